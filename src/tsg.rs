//! The troubleshooting guides of `tsg/`, embedded so `unsctl tsg` works anywhere, and a
//! small Markdown renderer for the terminal.

use crate::render::output::Output;

/// A guide: its id, title and Markdown text.
pub struct Guide {
    pub id: &'static str,
    pub text: &'static str,
}

pub const GUIDES: &[Guide] = &[
    Guide {
        id: "TSG-02",
        text: include_str!("../tsg/TSG-02.md"),
    },
    Guide {
        id: "TSG-03",
        text: include_str!("../tsg/TSG-03.md"),
    },
];

/// The Prometheus alert rules shipped in `tsg/alerts/`.
pub const ALERT_RULES: &str = include_str!("../tsg/alerts/uns.rules.yml");

/// One alert rule and the guide section its `runbook_url` names.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Alert {
    pub alert: String,
    pub severity: String,
    pub runbook_url: String,
    pub guide: String,
    /// The heading the URL's anchor names, or None when no heading has that anchor.
    pub section: Option<String>,
}

/// The alerts of [`ALERT_RULES`], in file order. The file is ours and embedded, so a
/// line reader serves: `- alert:`, `severity:` and `runbook_url:` are each one line.
pub fn alerts() -> Vec<Alert> {
    let mut found: Vec<Alert> = Vec::new();
    for line in ALERT_RULES.lines().map(str::trim) {
        if let Some(name) = line.strip_prefix("- alert:") {
            found.push(Alert {
                alert: name.trim().to_string(),
                severity: String::new(),
                runbook_url: String::new(),
                guide: String::new(),
                section: None,
            });
        } else if let Some(alert) = found.last_mut() {
            if let Some(severity) = line.strip_prefix("severity:") {
                alert.severity = severity.trim().to_string();
            } else if let Some(url) = line.strip_prefix("runbook_url:") {
                alert.runbook_url = url.trim().to_string();
                let (file, anchor) = alert
                    .runbook_url
                    .split_once('#')
                    .unwrap_or((&alert.runbook_url, ""));
                alert.guide = file
                    .rsplit('/')
                    .next()
                    .unwrap_or_default()
                    .trim_end_matches(".md")
                    .to_string();
                alert.section = find(&alert.guide).and_then(|guide| guide.section(anchor));
            }
        }
    }
    found
}

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens.
pub fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

impl Guide {
    /// The first heading, without the id prefix.
    pub fn title(&self) -> &'static str {
        let heading = self
            .text
            .lines()
            .next()
            .unwrap_or_default()
            .trim_start_matches('#')
            .trim();
        heading
            .strip_prefix(self.id)
            .map(|rest| rest.trim_start_matches(':').trim())
            .unwrap_or(heading)
    }
}

impl Guide {
    /// The heading whose anchor is `anchor`, as written.
    pub fn section(&self, anchor_wanted: &str) -> Option<String> {
        self.text
            .lines()
            .filter(|line| line.starts_with('#'))
            .map(|line| line.trim_start_matches('#').trim())
            .find(|heading| anchor(heading) == anchor_wanted)
            .map(str::to_string)
    }

    /// The alerts whose runbook is this guide.
    pub fn alerts(&self) -> Vec<String> {
        alerts()
            .into_iter()
            .filter(|a| a.guide == self.id)
            .map(|a| a.alert)
            .collect()
    }
}

pub fn find(id: &str) -> Option<&'static Guide> {
    GUIDES.iter().find(|g| g.id.eq_ignore_ascii_case(id))
}

/// Renders Markdown for a terminal `width` columns wide: headings underlined, prose
/// wrapped, code indented, markup removed.
pub fn render(text: &str, width: usize, out: &Output) -> String {
    let width = width.clamp(40, 100);
    let mut lines: Vec<String> = Vec::new();
    let mut in_code = false;
    let mut paragraph: Vec<String> = Vec::new();
    let flush = |paragraph: &mut Vec<String>, lines: &mut Vec<String>| {
        if paragraph.is_empty() {
            return;
        }
        let joined = paragraph.join(" ");
        let (first, rest) = match joined.strip_prefix("- ") {
            Some(item) => ("  - ".to_string(), item.to_string()),
            None => numbered(&joined).unwrap_or_else(|| (String::new(), joined.clone())),
        };
        let hang = " ".repeat(first.len());
        for (n, line) in wrap(&inline(&rest, out), width.saturating_sub(first.len()))
            .into_iter()
            .enumerate()
        {
            lines.push(format!(
                "{}{line}",
                if n == 0 {
                    first.as_str()
                } else {
                    hang.as_str()
                }
            ));
        }
        paragraph.clear();
    };
    for raw in text.lines() {
        if raw.trim_start().starts_with("```") {
            flush(&mut paragraph, &mut lines);
            in_code = !in_code;
            continue;
        }
        if in_code {
            let line = if raw.trim_start().starts_with("# prints:") {
                out.dim(raw)
            } else {
                raw.to_string()
            };
            lines.push(format!("    {line}"));
            continue;
        }
        let trimmed = raw.trim();
        if trimmed.starts_with("<!--") {
            continue;
        }
        if trimmed.is_empty() {
            flush(&mut paragraph, &mut lines);
            if lines.last().is_some_and(|l| !l.is_empty()) {
                lines.push(String::new());
            }
            continue;
        }
        if let Some(heading) = trimmed.strip_prefix('#') {
            flush(&mut paragraph, &mut lines);
            let level = 1 + heading.chars().take_while(|c| *c == '#').count();
            let title = inline(heading.trim_start_matches('#').trim(), out);
            lines.push(out.bold(&title));
            let rule = if level == 1 {
                '='
            } else if level == 2 {
                '-'
            } else {
                '.'
            };
            lines.push(
                rule.to_string()
                    .repeat(console::measure_text_width(&title).min(width)),
            );
            continue;
        }
        if trimmed.starts_with('|') {
            flush(&mut paragraph, &mut lines);
            if !trimmed.chars().all(|c| matches!(c, '|' | '-' | ' ' | ':')) {
                let cells: Vec<String> = trimmed
                    .trim_matches('|')
                    .split('|')
                    .map(|c| inline(c.trim(), out))
                    .collect();
                lines.push(format!("  {}", cells.join("  |  ")));
            }
            continue;
        }
        if (trimmed.starts_with("- ") || numbered(trimmed).is_some()) && !paragraph.is_empty() {
            flush(&mut paragraph, &mut lines);
        }
        paragraph.push(trimmed.to_string());
    }
    flush(&mut paragraph, &mut lines);
    while lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    lines.join("\n")
}

/// "1. text" as a list item: its number stays, continuation lines hang under the text.
fn numbered(line: &str) -> Option<(String, String)> {
    let (number, rest) = line.split_once(". ")?;
    let is_number =
        !number.is_empty() && number.len() <= 2 && number.chars().all(|c| c.is_ascii_digit());
    is_number.then(|| (format!("  {number}. "), rest.to_string()))
}

/// Inline markup: `code` and **bold** lose their markers; links keep their text.
fn inline(text: &str, out: &Output) -> String {
    let mut result = String::new();
    let mut rest = text;
    while let Some(start) = rest.find(['`', '*', '[']) {
        result.push_str(&rest[..start]);
        let tail = &rest[start..];
        if let Some(body) = tail.strip_prefix("**") {
            if let Some(end) = body.find("**") {
                result.push_str(&out.bold(&body[..end]));
                rest = &body[end + 2..];
                continue;
            }
        } else if let Some(body) = tail.strip_prefix('`') {
            if let Some(end) = body.find('`') {
                result.push_str(&body[..end]);
                rest = &body[end + 1..];
                continue;
            }
        } else if let Some(body) = tail.strip_prefix('[')
            && let Some(close) = body.find("](")
            && let Some(end) = body[close..].find(')')
        {
            result.push_str(&body[..close]);
            rest = &body[close + end + 1..];
            continue;
        }
        result.push_str(&tail[..1]);
        rest = &tail[1..];
    }
    result.push_str(rest);
    result
}

fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        let needed = console::measure_text_width(&line) + 1 + console::measure_text_width(word);
        if !line.is_empty() && needed > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_alert_names_a_heading_of_an_embedded_guide() {
        let alerts = alerts();
        assert_eq!(alerts.len(), 6, "{alerts:?}");
        for alert in &alerts {
            assert!(find(&alert.guide).is_some(), "{alert:?}");
            assert!(
                alert.section.is_some(),
                "no heading has this anchor: {alert:?}"
            );
            assert!(
                ["warning", "critical"].contains(&alert.severity.as_str()),
                "{alert:?}"
            );
        }
        assert_eq!(
            anchor("3.1 Triage the whole DLQ"),
            "31-triage-the-whole-dlq"
        );
        assert_eq!(
            anchor("Branch 2: the outcome is unknown (VERIFY)"),
            "branch-2-the-outcome-is-unknown-verify"
        );
    }
    use crate::render::output::{ColorChoice, Format};

    #[test]
    fn guides_render_without_markup_within_the_width() {
        let out = Output::new(Format::Table, ColorChoice::Never);
        for guide in GUIDES {
            let text = render(guide.text, 80, &out);
            assert!(
                !text.contains("```") && !text.contains("<!--") && !text.contains("**"),
                "{text}"
            );
            for line in text
                .lines()
                .filter(|l| !l.starts_with("    ") && !l.starts_with("  "))
            {
                assert!(console::measure_text_width(line) <= 80, "{line:?}");
            }
        }
        assert!(render(GUIDES[0].text, 80, &out).contains("Remediate"));
        assert_eq!(
            find("tsg-02").map(|g| g.title()),
            Some("Lost worker leases and provider calls with an unknown outcome")
        );
    }
}
