//! Triage (DESIGN section 4): from one row and its events, which remediation is safe.
//!
//! Pure: values in, a verdict out, no IO. Its one safety rule is that it never says
//! RESOLVE for a channel the provider did not accept, nor REPLAY for one the provider
//! may have acted on; evidence it cannot read makes the answer VERIFY, never silence.

use crate::model::{Event, Notification, kind};
use serde::{Deserialize, Serialize};
use serde_json::Value;
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
        match text.to_ascii_uppercase().as_str() {
            "RESOLVE" => Ok(Branch::Resolve),
            "VERIFY" => Ok(Branch::Verify),
            "REPLAY" => Ok(Branch::Replay),
            _ => Err(format!(
                "unknown branch {text:?}: expected resolve, verify or replay"
            )),
        }
    }
}

/// What is known of one channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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

/// The outcome of one channel attempt (a start and its result under one lease).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum AttemptOutcome {
    Rejected,
    Unknown,
    Accepted,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelVerdict {
    pub channel: String,
    pub state: ChannelState,
    /// `uns_events.id` values that prove the state.
    pub evidence: Vec<i64>,
    /// What to search for out of band (Message-IDs, idempotency keys).
    pub message_ids: Vec<String>,
}

/// One DLQ entry's verdict: the JSON contract of DESIGN section 6.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    pub next_step: String,
    /// The plan's action for this entry: resolve, replay, or verify (nothing is done
    /// until someone checks and changes it).
    #[serde(default)]
    pub action: String,
    /// Anything odd in the evidence, each naming its event.
    #[serde(default)]
    pub notes: Vec<String>,
}

impl Verdict {
    /// Channels a replay should cover by default: every one not DELIVERED.
    pub fn undelivered(&self) -> Vec<String> {
        self.channels
            .iter()
            .filter(|c| c.state != ChannelState::Delivered)
            .map(|c| c.channel.clone())
            .collect()
    }

    pub fn channel(&self, name: &str) -> Option<&ChannelVerdict> {
        self.channels.iter().find(|c| c.channel == name)
    }
}

#[derive(Debug, Default)]
struct Attempt {
    cycle: i64,
    start: Option<i64>,
    results: Vec<(i64, AttemptOutcome)>,
    message_ids: Vec<String>,
}

impl Attempt {
    /// A start without a result means the worker died or hung mid-call.
    fn outcome(&self) -> AttemptOutcome {
        self.results
            .iter()
            .map(|(_, outcome)| *outcome)
            .max()
            .unwrap_or(AttemptOutcome::Unknown)
    }

    fn event_ids(&self) -> impl Iterator<Item = i64> + '_ {
        self.start
            .into_iter()
            .chain(self.results.iter().map(|(id, _)| *id))
    }
}

type AttemptKey = (i64, i64, String, String);

/// Classifies one notification from its row and full history.
pub fn triage(row: &Notification, events: &[Event]) -> Verdict {
    let mut notes = Vec::new();
    let mut unreadable = false;
    let mut lease_lost = false;
    let mut channel_order: Vec<String> = row.channels.clone();
    let mut attempts: BTreeMap<AttemptKey, Attempt> = BTreeMap::new();
    let mut key_order: Vec<AttemptKey> = Vec::new();

    for event in events {
        if !kind::ALL.contains(&event.kind.as_str()) {
            notes.push(format!("event {}: unknown kind {:?}", event.id, event.kind));
            unreadable = true;
            continue;
        }
        let Some(payload) = event.payload.as_object() else {
            notes.push(format!(
                "event {} ({}): payload is not a JSON object",
                event.id, event.kind
            ));
            unreadable = true;
            continue;
        };
        match event.kind.as_str() {
            kind::LEASE_LOST => lease_lost = true,
            kind::REPLAYED => {
                for name in payload
                    .get("channels")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    if let Some(name) = name.as_str() {
                        remember(&mut channel_order, name);
                    }
                }
            }
            kind::CHANNEL_ATTEMPT_STARTED | kind::CHANNEL_ATTEMPT_RESULT => {
                let channel = payload.get("channel").and_then(Value::as_str);
                let cycle = payload.get("cycle").and_then(Value::as_i64);
                let (Some(channel), Some(cycle)) = (channel, cycle) else {
                    notes.push(format!(
                        "event {} ({}): no channel or cycle in the payload",
                        event.id, event.kind
                    ));
                    unreadable = true;
                    continue;
                };
                remember(&mut channel_order, channel);
                let attempt_number = payload.get("attempt").and_then(Value::as_i64).unwrap_or(-1);
                let token = payload
                    .get("lease_token")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                let key = (cycle, attempt_number, channel.to_string(), token);
                if !attempts.contains_key(&key) {
                    key_order.push(key.clone());
                }
                let attempt = attempts.entry(key).or_default();
                attempt.cycle = cycle;
                if event.kind == kind::CHANNEL_ATTEMPT_STARTED {
                    attempt.start.get_or_insert(event.id);
                    if channel == "EMAIL" && attempt_number >= 0 {
                        let planned = crate::runtime::adapters::email::message_id(
                            &row.id,
                            cycle,
                            attempt_number,
                        );
                        remember(&mut attempt.message_ids, &planned);
                    }
                } else {
                    let outcome = result_outcome(payload);
                    if outcome == AttemptOutcome::Accepted && !has_text(payload.get("message_id")) {
                        notes.push(format!(
                            "event {}: {channel} accepted without a message_id; confirm with the provider",
                            event.id
                        ));
                    }
                    if payload.get("success").and_then(Value::as_bool).is_none() {
                        notes.push(format!(
                            "event {}: {channel} result has no readable success flag; treated as unknown",
                            event.id
                        ));
                    }
                    for id in [
                        payload.get("message_id"),
                        payload.get("metadata").and_then(|m| m.get("message_id")),
                        payload
                            .get("metadata")
                            .and_then(|m| m.get("idempotency_key")),
                    ]
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    {
                        remember(&mut attempt.message_ids, id);
                    }
                    attempt.results.push((event.id, outcome));
                }
            }
            _ => {}
        }
    }

    let channels: Vec<ChannelVerdict> = channel_order
        .iter()
        .map(|channel| {
            let all: Vec<&Attempt> = key_order
                .iter()
                .filter(|key| &key.2 == channel)
                .filter_map(|key| attempts.get(key))
                .collect();
            channel_verdict(channel, &all, row.cycle)
        })
        .collect();

    let branch = if unreadable {
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
        lease_lost,
        status: row.status.clone(),
        cycle: row.cycle,
        attempts: row.attempts,
        error_message: row.error_message.clone(),
        last_event_id: events.iter().map(|e| e.id).max(),
        channels,
        next_step: String::new(),
        action: branch.as_str().to_ascii_lowercase(),
        notes,
    };
    verdict.next_step = next_step(&verdict);
    verdict
}

fn channel_verdict(channel: &str, attempts: &[&Attempt], current_cycle: i64) -> ChannelVerdict {
    let pick = |wanted: AttemptOutcome, current_only: bool| -> Vec<&Attempt> {
        attempts
            .iter()
            .copied()
            .filter(|a| a.outcome() == wanted && (!current_only || a.cycle == current_cycle))
            .collect()
    };
    let (state, proof) = [
        (
            ChannelState::Delivered,
            pick(AttemptOutcome::Accepted, false),
        ),
        (ChannelState::Uncertain, pick(AttemptOutcome::Unknown, true)),
        (ChannelState::Failed, pick(AttemptOutcome::Rejected, true)),
    ]
    .into_iter()
    .find(|(_, proof)| !proof.is_empty())
    .unwrap_or((ChannelState::NotAttempted, Vec::new()));
    let mut evidence: Vec<i64> = proof.iter().flat_map(|a| a.event_ids()).collect();
    evidence.sort_unstable();
    evidence.dedup();
    let mut message_ids = Vec::new();
    for attempt in &proof {
        for id in &attempt.message_ids {
            remember(&mut message_ids, id);
        }
    }
    ChannelVerdict {
        channel: channel.to_string(),
        state,
        evidence,
        message_ids,
    }
}

fn result_outcome(payload: &serde_json::Map<String, Value>) -> AttemptOutcome {
    let provider_outcome = payload
        .get("metadata")
        .and_then(|m| m.get("provider_outcome"))
        .and_then(Value::as_str);
    match payload.get("success").and_then(Value::as_bool) {
        Some(true) => AttemptOutcome::Accepted,
        Some(false) if provider_outcome == Some("UNKNOWN") => AttemptOutcome::Unknown,
        Some(false) => AttemptOutcome::Rejected,
        None => AttemptOutcome::Unknown,
    }
}

fn has_text(value: Option<&Value>) -> bool {
    value
        .and_then(Value::as_str)
        .is_some_and(|text| !text.is_empty())
}

fn remember(list: &mut Vec<String>, item: &str) {
    if !list.iter().any(|existing| existing == item) {
        list.push(item.to_string());
    }
}

/// The command that carries the remediation out (for VERIFY: the one that shows what to
/// check, since no command may act before someone has looked).
fn next_step(verdict: &Verdict) -> String {
    let id = &verdict.id;
    match verdict.branch {
        Branch::Resolve => format!("unsctl dlq resolve {id} --confirm"),
        Branch::Verify => format!("unsctl inspect {id}"),
        Branch::Replay => format!(
            "unsctl replay {id} --channels {} --confirm",
            verdict.undelivered().join(",")
        ),
    }
}

/// The two commands a VERIFY entry leads to, once someone has checked out of band.
pub fn after_verification(verdict: &Verdict) -> (String, String) {
    let id = &verdict.id;
    (
        format!("unsctl dlq resolve {id} --verified-delivered --confirm"),
        format!(
            "unsctl replay {id} --channels {} --verified-not-delivered --confirm",
            verdict.undelivered().join(",")
        ),
    )
}

/// Counts per branch, every branch present.
pub fn summary<'a>(verdicts: impl IntoIterator<Item = &'a Verdict>) -> BTreeMap<Branch, usize> {
    let mut counts: BTreeMap<Branch, usize> = Branch::ALL.iter().map(|b| (*b, 0)).collect();
    for verdict in verdicts {
        *counts.entry(verdict.branch).or_default() += 1;
    }
    counts
}

#[cfg(test)]
mod tests;
