//! Triage (DESIGN section 4): from one row and its events, which remediation is safe.
//!
//! Pure: values in, a verdict out, no IO. Its safety rule is that it never says RESOLVE
//! for a channel the provider did not accept, nor REPLAY for one the provider may have
//! acted on; evidence it cannot read makes the answer VERIFY, never silence.

use crate::history::{Attempt, History, Observed};
use crate::model::ProviderOutcome;
use crate::model::command::{self, CommandLine, Step, Unwritable};
use crate::model::{Channel, ChannelSet, Event, Notification};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The remediation a DLQ entry calls for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Branch {
    /// Branch 1: every channel was accepted. Never replay.
    Resolve,
    /// Branch 2: some channel's outcome is unknown. Check out of band first.
    Verify,
    /// Branch 3: nothing is uncertain and something was not delivered. Fix, then replay.
    Replay,
}

impl Branch {
    pub const ALL: [Branch; 3] = [Branch::Resolve, Branch::Verify, Branch::Replay];

    pub fn as_str(self) -> &'static str {
        match self {
            Branch::Resolve => "RESOLVE",
            Branch::Verify => "VERIFY",
            Branch::Replay => "REPLAY",
        }
    }
}

impl std::fmt::Display for Branch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Branch {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Branch::ALL
            .into_iter()
            .find(|b| b.as_str().eq_ignore_ascii_case(text.trim()))
            .ok_or_else(|| format!("unknown branch {text:?}: expected resolve, verify or replay"))
    }
}

/// What a plan does with an entry: the branch's action, or nothing until someone checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PlanAction {
    Resolve,
    Replay,
    /// Nothing is done until someone checks out of band and changes it.
    Verify,
}

impl PlanAction {
    pub fn of(branch: Branch) -> Self {
        match branch {
            Branch::Resolve => PlanAction::Resolve,
            Branch::Verify => PlanAction::Verify,
            Branch::Replay => PlanAction::Replay,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            PlanAction::Resolve => "resolve",
            PlanAction::Replay => "replay",
            PlanAction::Verify => "verify",
        }
    }
}

/// What is known of one channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ChannelState {
    Delivered,
    Uncertain,
    Failed,
    NotAttempted,
}

impl ChannelState {
    pub fn as_str(self) -> &'static str {
        match self {
            ChannelState::Delivered => "DELIVERED",
            ChannelState::Uncertain => "UNCERTAIN",
            ChannelState::Failed => "FAILED",
            ChannelState::NotAttempted => "NOT_ATTEMPTED",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChannelVerdict {
    pub channel: Channel,
    pub state: ChannelState,
    /// `uns_events.id` values that prove the state.
    pub evidence: Vec<i64>,
    /// What to search for out of band (Message-IDs, idempotency keys).
    pub message_ids: Vec<String>,
    /// Why a channel is FAILED or UNCERTAIN, in the provider's or the adapter's words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
    /// FAILED, and the last rejection is permanent: replaying it unchanged is refused
    /// again (DESIGN §4).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub permanent: bool,
    /// The code of the reply that proves the state, as triage classes it: an SMTP code
    /// with its enhanced status code where the reply gave one (`550 5.1.1`), or an HTTP
    /// status (`HTTP 400`). What `--error-code` selects by and causes are grouped by.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
}

impl ChannelVerdict {
    /// The most specific part of [`ChannelVerdict::code`]: the enhanced status code, else
    /// the reply code or status (`5.1.1`, `421`, `HTTP 400`).
    pub fn code_group(&self) -> Option<&str> {
        let code = self.code.as_deref()?;
        Some(match code.strip_prefix("HTTP ") {
            Some(_) => code,
            None => code.rsplit(' ').next().unwrap_or(code),
        })
    }

    /// Whether the reply's code is `asked` (`5.1.1`, `550`, `HTTP 400` or `400`, any case
    /// and spacing).
    pub fn has_code(&self, asked: &str) -> bool {
        let Some(code) = self.code.as_deref() else {
            return false;
        };
        let asked: String = asked
            .trim()
            .to_ascii_uppercase()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        let asked = asked
            .strip_prefix("HTTP ")
            .map_or(asked.clone(), |n| format!("HTTP {n}"));
        match code.strip_prefix("HTTP ") {
            Some(status) => asked == code || asked == status,
            None => code.split(' ').any(|part| part == asked),
        }
    }
}

/// One DLQ entry's verdict: the JSON contract of DESIGN section 6. Only triage makes
/// one; a verdict read back from a client or a plan is never trusted.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    pub id: String,
    pub branch: Branch,
    pub lease_lost: bool,
    pub status: String,
    pub cycle: i64,
    pub attempts: i64,
    pub error_message: Option<String>,
    pub last_event_id: Option<i64>,
    pub channels: Vec<ChannelVerdict>,
    pub next_step: Step,
    /// The plan's action for this entry.
    pub action: PlanAction,
    /// Anything odd in the evidence, each naming its event or column.
    pub notes: Vec<String>,
    /// The row's `channels` column could not be read: no resolve or replay can pass the
    /// guardrails without `--force`, so no such step is suggested.
    #[serde(skip)]
    pub channels_unreadable: bool,
}

impl Verdict {
    /// Channels in `state`.
    pub fn in_state(&self, state: ChannelState) -> ChannelSet {
        self.channels
            .iter()
            .filter(|c| c.state == state)
            .map(|c| c.channel)
            .collect()
    }

    /// Channels a replay covers by default: every one not DELIVERED.
    pub fn undelivered(&self) -> ChannelSet {
        self.channels
            .iter()
            .filter(|c| c.state != ChannelState::Delivered)
            .map(|c| c.channel)
            .collect()
    }

    /// FAILED and NOT_ATTEMPTED channels: nobody received these, and nothing is in doubt.
    pub fn unsent(&self) -> ChannelSet {
        self.channels
            .iter()
            .filter(|c| matches!(c.state, ChannelState::Failed | ChannelState::NotAttempted))
            .map(|c| c.channel)
            .collect()
    }

    pub fn channel(&self, channel: Channel) -> Option<&ChannelVerdict> {
        self.channels.iter().find(|c| c.channel == channel)
    }

    /// Every evidence event id, in order.
    pub fn evidence(&self) -> Vec<i64> {
        let mut ids: Vec<i64> = self
            .channels
            .iter()
            .flat_map(|c| c.evidence.iter().copied())
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }
}

/// Every attempt of `channel` with its outcome once verifications are applied (and the
/// event that settled it), in (cycle, attempt, lease) order.
fn settled_attempts(
    history: &History,
    channel: Channel,
) -> Vec<(&Attempt, ProviderOutcome, Option<i64>)> {
    let mut attempts: Vec<(&Attempt, ProviderOutcome, Option<i64>)> = history
        .attempts(channel)
        .iter()
        .map(|attempt| {
            let (outcome, settled_by) = history.outcome_of(attempt);
            (attempt, outcome, settled_by)
        })
        .collect();
    attempts.sort_by(|a, b| {
        (a.0.cycle, a.0.attempt, &a.0.lease_token).cmp(&(b.0.cycle, b.0.attempt, &b.0.lease_token))
    });
    attempts
}

/// One channel's verdict from the history: the best outcome any attempt reached, the
/// doubt of the current cycle, or its refusals.
fn channel_verdict(history: &History, channel: Channel) -> ChannelVerdict {
    let row_id = history.id.as_str();
    let current = history.cycle;
    let attempts = settled_attempts(history, channel);
    let verifications = history.verifications(channel);
    let verified_delivered: Vec<i64> = verifications
        .iter()
        .filter(|v| v.delivered)
        .map(|v| v.event_id)
        .collect();
    let pick = |wanted: ProviderOutcome, keep: &dyn Fn(&Attempt) -> bool| {
        attempts
            .iter()
            .filter(|(attempt, outcome, _)| *outcome == wanted && keep(attempt))
            .collect::<Vec<_>>()
    };
    let accepted = pick(ProviderOutcome::Accepted, &|_| true);
    let uncertain = pick(ProviderOutcome::Unknown, &|attempt| {
        attempt.cycle == current || !history.cleared_by_replay(channel, attempt.newest_event())
    });
    let rejected = pick(ProviderOutcome::Rejected, &|attempt| {
        attempt.cycle == current
    });
    let (state, proof, extra) = if !accepted.is_empty() || !verified_delivered.is_empty() {
        // The attempts a DELIVERED answer was about are part of its proof.
        let verified = attempts.iter().filter(|(attempt, outcome, _)| {
            *outcome != ProviderOutcome::Accepted
                && verifications
                    .iter()
                    .any(|v| v.delivered && attempt.covered_by(v))
        });
        let proof = accepted.into_iter().chain(verified).collect();
        (ChannelState::Delivered, proof, verified_delivered)
    } else if !uncertain.is_empty() {
        (ChannelState::Uncertain, uncertain, Vec::new())
    } else if !rejected.is_empty() {
        let settled = rejected.iter().filter_map(|a| a.2).collect();
        (ChannelState::Failed, rejected, settled)
    } else {
        (ChannelState::NotAttempted, Vec::new(), Vec::new())
    };
    let mut evidence: Vec<i64> = proof
        .iter()
        .flat_map(|(attempt, _, _)| attempt.event_ids())
        .chain(extra)
        .collect();
    evidence.sort_unstable();
    evidence.dedup();
    let mut message_ids = Vec::new();
    for (attempt, _, _) in &proof {
        for id in attempt.message_ids(row_id) {
            if !message_ids.contains(&id) {
                message_ids.push(id);
            }
        }
    }
    let cause = match state {
        ChannelState::Uncertain | ChannelState::Failed => proof
            .last()
            .map(|(attempt, _, settled)| cause_of(attempt, *settled)),
        _ => None,
    };
    // The newest rejection decides: a permanent one fixed and then refused for a
    // transient reason is transient now.
    let newest_rejection = proof
        .iter()
        .filter(|(_, _, settled)| settled.is_none())
        .max_by_key(|(attempt, _, _)| attempt.newest_event())
        .filter(|_| state == ChannelState::Failed);
    let permanent = newest_rejection.is_some_and(|(attempt, _, _)| attempt.permanent);
    let code = newest_rejection.and_then(|(attempt, _, _)| attempt.code.clone());
    ChannelVerdict {
        channel,
        state,
        evidence,
        message_ids,
        cause,
        permanent,
        code,
    }
}

/// Why an attempt left its channel FAILED or UNCERTAIN: the answer that settled it, the
/// provider's or adapter's words, or what the history lacks.
fn cause_of(attempt: &Attempt, settled: Option<i64>) -> String {
    match (&attempt.error, settled, attempt.results.is_empty()) {
        (_, Some(id), _) => format!("verified not delivered (event {id})"),
        (Some(error), _, _) => cause_text(error),
        (None, _, true) => format!(
            "the call started (event {}) and no result was recorded: the worker died or hung mid-call",
            attempt.start.unwrap_or_default()
        ),
        (None, _, false) => "no detail recorded".to_string(),
    }
}

/// The longest cause a verdict carries: it is read in a table cell or a JSON field, and
/// the provider's whole text stays in its event.
const MAX_CAUSE_BYTES: usize = 4096;

/// `error` as a verdict's cause: whole when short, else cut with a note of what was left.
fn cause_text(error: &str) -> String {
    if error.len() <= MAX_CAUSE_BYTES {
        return error.to_string();
    }
    let mut end = MAX_CAUSE_BYTES;
    while !error.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}… (+{} bytes; the whole text is in the event)",
        &error[..end],
        error.len() - end
    )
}

/// The verdict on a history read.
pub fn judge(row: &Notification, history: &History) -> Verdict {
    let channels: Vec<ChannelVerdict> = history
        .channels
        .iter()
        .map(|channel| channel_verdict(history, channel))
        .collect();
    let mut notes = history.notes.clone();
    let branch = if history.unreadable {
        Branch::Verify
    } else if channels.is_empty() {
        notes.push("no channels recorded for this notification".into());
        Branch::Verify
    } else if channels.iter().all(|c| c.state == ChannelState::Delivered) {
        Branch::Resolve
    } else if channels.iter().any(|c| c.state == ChannelState::Uncertain) {
        Branch::Verify
    } else {
        Branch::Replay
    };
    let mut verdict = Verdict {
        id: row.id.clone(),
        branch,
        lease_lost: history.lease_lost,
        status: row.status.to_string(),
        cycle: row.cycle,
        attempts: row.attempts,
        error_message: row.error_message.clone(),
        last_event_id: history.last_event_id,
        channels,
        next_step: Step::default(),
        action: PlanAction::of(branch),
        notes,
        channels_unreadable: history.channels_unreadable,
    };
    verdict.next_step = next_step(&verdict);
    verdict
}

/// Classifies one notification from its row and full history.
pub fn triage<'a>(row: &Notification, events: impl IntoIterator<Item = Observed<'a>>) -> Verdict {
    judge(row, &History::read(row, events))
}

/// Triage over events read in full.
pub fn triage_events(row: &Notification, events: &[Event]) -> Verdict {
    triage(row, events.iter().map(Observed::from_event))
}

/// The command that carries the remediation out (for VERIFY: the one that asks the
/// providers' own records, since nothing may act before someone has checked; when no
/// channel is UNCERTAIN and the doubt comes from evidence that cannot be read, the one
/// that shows it). The id is the store's, so it is quoted as data (DESIGN §5).
fn next_step(verdict: &Verdict) -> Step {
    let id = verdict.id.as_str();
    if verdict.notes.iter().any(|n| n.ends_with(": id: NULL")) {
        return Step::Words(
            "none: the row has no id, so no command can address it; repair the store".into(),
        );
    }
    let on = |words: &[&str]| CommandLine::unsctl(words).operand(crate::model::command::THE_ID, id);
    match verdict.branch {
        Branch::Resolve => Step::run(on(&["dlq", "resolve"]).map(|l| l.words(&["--confirm"]))),
        // Nothing a provider could answer: the doubt is in the store itself.
        Branch::Verify if verdict.in_state(ChannelState::Uncertain).is_empty() => {
            Step::run(on(&["inspect"]))
        }
        Branch::Verify => Step::run(on(&["verify"])),
        Branch::Replay => {
            let channels = verdict.undelivered().joined(",");
            let failed: Vec<&ChannelVerdict> = verdict
                .channels
                .iter()
                .filter(|c| c.state == ChannelState::Failed)
                .collect();
            let replay = |words: &[&str]| {
                on(&["replay"]).map(|l| l.words(&["--channels", &channels]).words(words))
            };
            // A channel refused permanently is refused again unless its cause is fixed, and
            // the replay must say what was: the guardrail asks for the reason.
            if !failed.iter().any(|c| c.permanent) {
                return Step::run(replay(&["--confirm"]));
            }
            let causes: Vec<String> = failed
                .iter()
                .filter(|c| c.permanent)
                .map(|c| {
                    format!(
                        "{} {}",
                        c.channel,
                        quote(&short_cause(c.cause.as_deref().unwrap_or("refused")))
                    )
                })
                .collect();
            let reason = command::placeholder(command::WHAT_WAS_FIXED);
            Step::after(
                format!(
                    "fix the cause first ({}: refused permanently, so a replay unchanged is refused again)",
                    causes.join("; ")
                ),
                replay(&["--reason", &reason, "--confirm"]),
            )
        }
    }
}

/// Provider text inside one of triage's sentences: in double quotes, its own quotes and
/// backslashes escaped, so it never reads as a step of unsctl's (DESIGN §5).
fn quote(text: &str) -> String {
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for c in text.chars() {
        if matches!(c, '"' | '\\') {
            quoted.push('\\');
        }
        quoted.push(c);
    }
    quoted.push('"');
    quoted
}

/// A cause cut to a clause: the first line, at most 80 characters.
pub fn short_cause(cause: &str) -> String {
    let line = cause.lines().next().unwrap_or_default().trim();
    match line.char_indices().nth(80) {
        Some((end, _)) => format!("{}…", &line[..end]),
        None => line.to_string(),
    }
}

/// What a VERIFY entry leads to once someone has checked out of band: each a label and
/// the command, only those that can succeed. "If it arrived" only ever resolves: where a
/// channel is still owed, or the doubt is in the store rather than at a provider, an
/// operator's word that something arrived must not be the ground for sending anything.
pub fn after_verification(verdict: &Verdict) -> Vec<(&'static str, Step)> {
    let id = verdict.id.as_str();
    let uncertain = verdict.in_state(ChannelState::Uncertain);
    if verdict.channels_unreadable || uncertain.is_empty() {
        return Vec::new();
    }
    let on = |words: &[&str]| -> Result<CommandLine, Unwritable> {
        CommandLine::unsctl(words).operand(crate::model::command::THE_ID, id)
    };
    let mut steps = Vec::new();
    if verdict.unsent().is_empty() {
        steps.push((
            "if it arrived",
            Step::run(
                on(&["dlq", "resolve"]).map(|l| l.words(&["--verified-delivered", "--confirm"])),
            ),
        ));
    }
    let channels = verdict.undelivered().joined(",");
    steps.push((
        "if it did not",
        Step::run(on(&["replay"]).map(|l| {
            l.words(&[
                "--channels",
                &channels,
                "--verified-not-delivered",
                "--confirm",
            ])
        })),
    ));
    steps
}

/// Counts per branch, every branch present.
pub fn summary<'a>(verdicts: impl IntoIterator<Item = &'a Verdict>) -> BTreeMap<Branch, usize> {
    let mut counts = empty_summary();
    for verdict in verdicts {
        *counts.entry(verdict.branch).or_default() += 1;
    }
    counts
}

/// Every branch at zero.
pub fn empty_summary() -> BTreeMap<Branch, usize> {
    Branch::ALL.iter().map(|b| (*b, 0)).collect()
}

#[cfg(test)]
mod tests;
