//! Keeping secrets out of what is stored and shown: one redaction, applied where text
//! leaves the part that holds the secret (an adapter's result, a parser's error), so no
//! printer, store or log downstream has to know what to hide.
//!
//! A secret is hidden wherever it appears, whole; and any URL in the text is cut to its
//! origin when it carries userinfo, a path or a query, since webhook paths, tokens in
//! query strings and `user:password@` are secrets that libraries quote in their errors.

/// What stands where a secret was.
pub const MARK: &str = "[redacted]";

/// Values shorter than this are not hidden: nobody could recognise them, and hiding them
/// would shred ordinary text.
const SHORTEST: usize = 4;

/// The secrets one part holds.
#[derive(Debug, Clone, Default)]
pub struct Secrets {
    values: Vec<String>,
}

impl Secrets {
    pub fn new() -> Self {
        Self::default()
    }

    /// A value to hide wherever it appears.
    pub fn add(&mut self, value: &str) -> &mut Self {
        let value = value.trim();
        if value.len() >= SHORTEST && !self.values.iter().any(|v| v == value) {
            self.values.push(value.to_string());
            // Longest first, so a secret that contains another is hidden whole.
            self.values.sort_by_key(|v| std::cmp::Reverse(v.len()));
        }
        self
    }

    /// A URL whose every part but the origin is secret (a webhook): the URL, its path and
    /// query, its userinfo and each query value.
    pub fn add_url(&mut self, url: &str) -> &mut Self {
        self.add(url);
        if let Ok(parsed) = reqwest::Url::parse(url) {
            let tail = &url[url.find(parsed.path()).unwrap_or(url.len())..];
            if parsed.path() != "/" || parsed.query().is_some() {
                self.add(tail);
            }
            if let Some(password) = parsed.password() {
                self.add(password);
            }
            for (_, value) in parsed.query_pairs() {
                self.add(&value);
            }
        }
        self
    }

    /// `text` with every secret hidden and every URL cut to its origin.
    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_string();
        for value in &self.values {
            if out.contains(value.as_str()) {
                out = out.replace(value.as_str(), MARK);
            }
        }
        scrub_urls(&out)
    }
}

/// The URL without userinfo, path or query: `https://hooks.slack.com`.
pub fn origin(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(parsed) => format!(
            "{}://{}{}",
            parsed.scheme(),
            parsed.host_str().unwrap_or(""),
            parsed.port().map(|p| format!(":{p}")).unwrap_or_default()
        ),
        Err(_) => "(invalid url)".into(),
    }
}

/// Every `http://` or `https://` URL in `text` that carries more than its origin, cut to
/// its origin followed by the mark.
pub fn scrub_urls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = find_scheme(rest) {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| c.is_whitespace() || matches!(c, ')' | '"' | '\'' | '>' | ']' | ','))
            .unwrap_or(tail.len());
        let url = &tail[..end];
        let bare = origin(url);
        let only_origin = url.trim_end_matches('/') == bare;
        if only_origin || bare == "(invalid url)" && !url.contains('@') {
            out.push_str(url);
        } else {
            out.push_str(&bare);
            out.push('/');
            out.push_str(MARK);
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

fn find_scheme(text: &str) -> Option<usize> {
    let lower = text.to_ascii_lowercase();
    [lower.find("http://"), lower.find("https://")]
        .into_iter()
        .flatten()
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_webhook_url_and_its_parts_are_hidden_wherever_they_appear() {
        let mut secrets = Secrets::new();
        secrets.add_url("https://hooks.slack.com/services/T0/B0/XyZsecretPart");
        secrets.add("R0UTINGKEY123");
        let text = "error sending request for url (https://hooks.slack.com/services/T0/B0/XyZsecretPart): \
                    connection refused; body echoed /services/T0/B0/XyZsecretPart and R0UTINGKEY123";
        let clean = secrets.redact(text);
        assert!(!clean.contains("XyZsecretPart"), "{clean}");
        assert!(!clean.contains("R0UTINGKEY123"), "{clean}");
        assert!(clean.contains("connection refused"), "{clean}");
        assert!(clean.contains(MARK), "{clean}");
    }

    #[test]
    fn urls_are_cut_to_their_origin_when_they_carry_more() {
        assert_eq!(
            scrub_urls("see http://user:pw@host:8080/x?api_key=k1 now"),
            "see http://host:8080/[redacted] now"
        );
        assert_eq!(
            scrub_urls("GET https://api.example.com/ failed"),
            "GET https://api.example.com/ failed"
        );
        assert_eq!(
            scrub_urls("(http://127.0.0.1:9/services/a/b)"),
            "(http://127.0.0.1:9/[redacted])"
        );
        assert_eq!(scrub_urls("no url here"), "no url here");
        assert_eq!(origin("https://h.test:8443/p?q=1"), "https://h.test:8443");
    }

    #[test]
    fn short_values_are_not_secrets() {
        let mut secrets = Secrets::new();
        secrets.add("a").add("");
        assert_eq!(secrets.redact("a cat"), "a cat");
    }
}
