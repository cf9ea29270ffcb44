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
    /// The live screen's view to open first (`unsctl tui --view pulse`).
    pub screen: Option<String>,
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
                screen: None,
            });
        } else if let Some(alert) = found.last_mut() {
            if let Some(severity) = line.strip_prefix("severity:") {
                alert.severity = severity.trim().to_string();
            } else if let Some(screen) = line.strip_prefix("screen:") {
                alert.screen = Some(screen.trim().trim_matches('\'').to_string());
            } else if let Some(url) = line.strip_prefix("runbook_url:") {
                alert.runbook_url = relative_url(url);
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

/// A rule's `runbook_url` as Prometheus fills it in without a `runbook_base` label: the
/// path after the template that roots it, unquoted.
fn relative_url(value: &str) -> String {
    let value = value.trim().trim_matches('\'').trim_matches('"');
    value
        .rsplit_once("{{ end }}")
        .map_or(value, |(_, path)| path)
        .to_string()
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

/// Renders a guide for a terminal `width` columns wide (40 to 100).
pub fn render(text: &str, width: usize, out: &Output) -> String {
    crate::render::markdown::render(text, width.clamp(40, 100), out)
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
            // What Prometheus shows without a runbook_base label: the path, relative.
            assert!(
                alert.runbook_url.starts_with("tsg/TSG-0") && !alert.runbook_url.contains("{{"),
                "{alert:?}"
            );
        }
        assert_eq!(
            relative_url(
                "'{{ with $externalLabels.runbook_base }}{{ . }}/{{ end }}tsg/TSG-03.md#x'"
            ),
            "tsg/TSG-03.md#x"
        );
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
                !text.contains("```")
                    && !text.contains("<!--")
                    && !text.contains("**")
                    && !text.contains("# prints:"),
                "{text}"
            );
            assert!(
                text.lines().all(|l| !l.starts_with('|')),
                "a table left as raw pipes: {text}"
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
