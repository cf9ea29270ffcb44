//! A selection (DESIGN §5) as a person gives it, from the command line's flags or the
//! live screen's words (`channel:slack error:"5.1.1" !code:"HTTP 400" branch:verify
//! since:1h`): one builder, checked by one rule, so both select the same entries.

use crate::exit::{Failure, Result};
use crate::model::Channel;
use crate::store::{Selection, Window};
use crate::triage::Branch;

/// The parts of a selection as typed: texts and times not yet read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Parts {
    pub channel: Option<Channel>,
    pub not_channel: Option<Channel>,
    pub error: Vec<String>,
    pub not_error: Vec<String>,
    pub error_code: Vec<String>,
    pub not_error_code: Vec<String>,
    pub subject: Vec<String>,
    pub recipient: Vec<String>,
    pub since: Option<String>,
    pub until: Option<String>,
    pub exclude: Vec<String>,
}

/// `--since` and `--until` (or `since:`/`until:`) as instants, resolved against `now`,
/// so that both backends see the same ones.
pub fn window(since: Option<&str>, until: Option<&str>, now: f64) -> Result<Window> {
    let instant = |flag: &str, text: Option<&str>| {
        text.map(|t| crate::clock::parse_instant(t, now))
            .transpose()
            .map_err(|err| Failure::usage(format!("{flag}: {err}")))
    };
    Ok(Window {
        since: instant("--since", since)?,
        until: instant("--until", until)?,
    })
}

impl Parts {
    /// The typed selection; times are resolved against `now`.
    pub fn selection(&self, now: f64) -> Result<Selection> {
        let window = window(self.since.as_deref(), self.until.as_deref(), now)?;
        let selection = Selection {
            channel: self.channel,
            error: self.error.clone(),
            since: window.since,
            until: window.until,
            not_channel: self.not_channel,
            not_error: self.not_error.clone(),
            exclude: self.exclude.clone(),
            error_code: self.error_code.clone(),
            not_error_code: self.not_error_code.clone(),
            subject: self.subject.clone(),
            recipient: self.recipient.clone(),
        };
        selection.check().map_err(Failure::usage)?;
        Ok(selection)
    }
}

/// A filter as typed on the screen, and what it selects.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filter {
    pub text: String,
    pub selection: Selection,
    pub branch: Option<Branch>,
}

/// The words a filter knows, for the help and the error.
pub const WORDS: &str = "channel: !channel: error: !error: code: !code: subject: to: branch: since: until: !id: (a bare word is error:)";

impl Filter {
    /// Reads `text` against the clock `now`; an unknown key, a bad value or an unclosed
    /// quote is an error that says which.
    pub fn parse(text: &str, now: f64) -> std::result::Result<Self, String> {
        let mut parts = Parts::default();
        let mut branch = None;
        // A word that names one thing (a channel, a branch, a time) is read once: given
        // twice, the second would silently stand for both.
        let mut once: Vec<(bool, String, String)> = Vec::new();
        for (negated, key, value) in words(text)? {
            let key = key.to_ascii_lowercase();
            if matches!(key.as_str(), "channel" | "branch" | "since" | "until") {
                if let Some((_, _, first)) =
                    once.iter().find(|(n, k, _)| *n == negated && *k == key)
                {
                    let word = format!("{}{key}:", if negated { "!" } else { "" });
                    return Err(format!(
                        "{word} given twice ({word}{first}, {word}{value}): it names one; the words that repeat, any of them matching, are error: !error: code: !code: subject: to: !id:"
                    ));
                }
                once.push((negated, key.clone(), value.clone()));
            }
            let text_word = matches!(
                (negated, key.as_str()),
                (_, "error" | "" | "code") | (false, "subject" | "to")
            );
            if text_word && let Some(why) = crate::store::selection::blank_text(&value) {
                let word = format!("{}{key}", if negated { "!" } else { "" });
                let word = if key.is_empty() {
                    format!("{word}\"\"")
                } else {
                    format!("{word}:\"\"")
                };
                return Err(format!("{word}: {why}"));
            }
            match (negated, key.as_str()) {
                (false, "channel") => parts.channel = Some(channel(&value)?),
                (true, "channel") => parts.not_channel = Some(channel(&value)?),
                (false, "error" | "") => parts.error.push(value),
                (true, "error" | "") => parts.not_error.push(value),
                (false, "code") => parts.error_code.push(value),
                (true, "code") => parts.not_error_code.push(value),
                (false, "subject") => parts.subject.push(value),
                (false, "to") => parts.recipient.push(value),
                (false, "branch") => {
                    branch = Some(
                        value
                            .parse::<Branch>()
                            .map_err(|_| format!("branch:{value}: resolve, verify or replay"))?,
                    );
                }
                (false, "since") => parts.since = Some(value),
                (false, "until") => parts.until = Some(value),
                (true, "id") => parts.exclude.push(value),
                (negated, other) => {
                    return Err(format!(
                        "{}{other}: not a filter word; the words are {WORDS}",
                        if negated { "!" } else { "" }
                    ));
                }
            }
        }
        let selection = parts.selection(now).map_err(|err| err.message)?;
        Ok(Self {
            text: text.trim().to_string(),
            selection,
            branch,
        })
    }
}

fn channel(value: &str) -> std::result::Result<Channel, String> {
    value
        .trim()
        .parse()
        .map_err(|_| format!("channel:{value}: email, slack or pagerduty"))
}

/// `(negated, key, value)` for each word of `text`: `key:value`, `key:"a value"`, a
/// leading `!`, or a bare word (key "").
fn words(text: &str) -> std::result::Result<Vec<(bool, String, String)>, String> {
    let mut found = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let Some(&first) = chars.peek() else {
            break;
        };
        let negated = first == '!';
        if negated {
            chars.next();
        }
        let mut key = String::new();
        let mut value = String::new();
        let mut in_value = false;
        while let Some(&c) = chars.peek() {
            if c.is_whitespace() {
                break;
            }
            chars.next();
            match c {
                ':' if !in_value => in_value = true,
                '"' => {
                    let mut closed = false;
                    for c in chars.by_ref() {
                        if c == '"' {
                            closed = true;
                            break;
                        }
                        if in_value {
                            value.push(c);
                        } else {
                            key.push(c);
                        }
                    }
                    if !closed {
                        return Err("a quote is not closed".into());
                    }
                }
                c if in_value => value.push(c),
                c => key.push(c),
            }
        }
        if in_value {
            found.push((negated, key, value));
        } else {
            found.push((negated, String::new(), key));
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_selection_reads_as_written() {
        let filter = Filter::parse(
            r#"channel:slack error:"5.1.1" !error:"HTTP 400" branch:verify code:550 !code:"HTTP 404" subject:disk to:ops@"#,
            1_000_000.0,
        )
        .expect("filter");
        assert_eq!(filter.selection.channel, Some(Channel::Slack));
        assert_eq!(filter.selection.error, ["5.1.1"]);
        assert_eq!(filter.selection.not_error, ["HTTP 400"]);
        assert_eq!(filter.selection.error_code, ["550"]);
        assert_eq!(filter.selection.not_error_code, ["HTTP 404"]);
        assert_eq!(filter.selection.subject, ["disk"]);
        assert_eq!(filter.selection.recipient, ["ops@"]);
        assert_eq!(filter.branch, Some(Branch::Verify));
        assert_eq!(
            Filter::parse("since:1h", 1_000_000.0)
                .expect("since")
                .selection
                .since,
            Some(1_000_000.0 - 3600.0)
        );
        assert_eq!(
            Filter::parse("timeout", 0.0).expect("bare").selection.error,
            ["timeout"]
        );
        // A channel and its negation are two words; a text word repeats, any matching.
        let both = Filter::parse("channel:email !channel:slack error:a error:b", 0.0)
            .expect("one of each");
        assert_eq!(both.selection.error, ["a", "b"]);
        let twice = Filter::parse("branch:resolve branch:replay", 0.0).expect_err("twice");
        assert!(
            twice.starts_with("branch: given twice (branch:resolve, branch:replay)"),
            "{twice}"
        );
        for bad in [
            "channel:fax",
            "branch:maybe",
            "colour:red",
            "error:\"open",
            "since:yesterday-ish",
            "branch:resolve branch:replay",
            "channel:email channel:slack",
            "!channel:email !channel:slack",
            "since:1h since:2h",
        ] {
            assert!(Filter::parse(bad, 0.0).is_err(), "{bad}");
        }
        // A text word that names nothing would pick every entry, or leave every one out.
        for (blank, word) in [
            ("error:", "error:\"\""),
            ("!error:\" \"", "!error:\"\""),
            ("code:", "code:\"\""),
            ("channel:email subject:\"\"", "subject:\"\""),
            ("to:", "to:\"\""),
            ("\"\"", "\"\""),
        ] {
            let refused = Filter::parse(blank, 0.0).expect_err(blank);
            assert!(
                refused.starts_with(&format!("{word}: an empty text")),
                "{blank}: {refused}"
            );
        }
    }
}
