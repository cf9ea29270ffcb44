//! The preview of a remediation as a value: each entry's line (its id, branch, verb,
//! channels, evidence, or why it is blocked) and the notes said beside them (the pace,
//! what each receiver does with a copy, the canary). The command line prints it (the
//! lines on stdout, the notes on stderr); the live screen draws the same lines.

use super::{Intent, planned};
use crate::remediation::Action;
use crate::remediation::policy::Terms;
use crate::render::Output;
use crate::render::views;

/// What a remediation will do, in lines, before anything changes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Preview {
    /// One line per entry, in order.
    pub lines: Vec<String>,
    /// The pace, then what each receiver does with a copy, then anything else said (the
    /// canary's plan).
    pub notes: Vec<String>,
}

impl Preview {
    /// The preview of `intents`, with `told` (the receivers' statements and the canary's
    /// plan) after the pace.
    pub fn of(intents: &[Intent], told: &[String], out: &Output, terms: Terms) -> Self {
        Self {
            lines: intents
                .iter()
                .map(|intent| line(intent, out, terms))
                .collect(),
            notes: pace_line(intents)
                .into_iter()
                .chain(told.iter().cloned())
                .collect(),
        }
    }

    /// Every line, the entries' then the notes', as a screen shows them.
    pub fn all(&self) -> impl Iterator<Item = &String> {
        self.lines.iter().chain(&self.notes)
    }
}

/// One intent in one line: id, branch, action, channels, evidence; or why it is blocked
/// and what would allow it, in `terms`.
pub fn line(intent: &Intent, out: &Output, terms: Terms) -> String {
    let branch = intent
        .verdict
        .as_ref()
        .map(|v| views::branch_text(v.branch, out))
        .unwrap_or_else(|| "-".into());
    let id = out.clean(&intent.id);
    let verb = intent.verb;
    match &intent.preview {
        Ok(approved) => {
            let channels = if approved.channels.is_empty() {
                "-".to_string()
            } else {
                approved.channels.joined(",")
            };
            let evidence = intent
                .verdict
                .as_ref()
                .map(|v| views::join_ids(&v.evidence()))
                .unwrap_or_default();
            let forced = if approved.overridden.is_empty() {
                ""
            } else {
                "  FORCED"
            };
            // Resolving past a channel nobody received gives it up: said before it is.
            let given_up = match (&intent.verdict, intent.action) {
                (Some(verdict), Action::Resolve) if !verdict.unsent().is_empty() => {
                    format!("  gives up {}", verdict.unsent().joined(","))
                }
                _ => String::new(),
            };
            format!(
                "{id}  {branch}  {verb}  channels {channels}  evidence {evidence}{given_up}{forced}"
            )
        }
        Err(blocked) => format!(
            "{id}  {branch}  {verb} {}",
            crate::render::sanitize::clean(&blocked.words_in(terms))
        ),
    }
}

/// "paced at 200/s: 15000 replays, the last due 1m 15s after the first", when paced.
pub fn pace_line(intents: &[Intent]) -> Option<String> {
    let planned = planned(intents)?;
    Some(format!(
        "paced at {}: {}, the last due {} after the first",
        crate::render::sanitize::clean(planned.words),
        crate::render::output::counted(planned.count as i64, "replay"),
        crate::render::time::duration(planned.last)
    ))
}
