//! One notification's history, reduced to what reconciliation counts: every channel
//! attempt with its window and recorded outcome, the recorded verifications, the
//! operator's resolution and which channels the current cycle still owes.
//!
//! Both backends hand the same rows and event texts here, so they reduce alike.

use crate::model::{Channel, ChannelSet, Kind, Notification, Status, Stored};
use crate::store::StoredEvent;
use serde::Deserialize;
use std::borrow::Cow;
use std::collections::BTreeMap;

/// What the history recorded about one attempt's provider call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recorded {
    Accepted,
    Rejected,
    /// An UNKNOWN result, or no result at all (the worker died or the result was lost).
    Unknown,
}

/// One channel attempt: a provider call that started.
#[derive(Debug, Clone, PartialEq)]
pub struct Attempt {
    pub cycle: i64,
    pub attempt: i64,
    pub lease_token: String,
    /// When CHANNEL_ATTEMPT_STARTED was committed (or, without one, the first result).
    pub started: f64,
    /// When the call could last have acted: its lease's end, or a later result.
    pub ended: f64,
    /// The envelope sender the email adapter recorded on the start.
    pub sender: Option<String>,
    /// The relay that answered, by its greeting's name, where a result recorded it.
    pub relay: Option<String>,
    pub recorded: Recorded,
    /// The start and result events.
    pub event_ids: Vec<i64>,
    /// The provider's reply or the adapter's error, when rejected or unknown.
    pub error: Option<String>,
}

/// A VERIFIED event: an operator recorded a provider's own answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Verification {
    pub event_id: i64,
    pub at: f64,
    pub cycle: i64,
    pub attempts: Vec<i64>,
    pub delivered: bool,
    pub source: String,
}

/// Who resolved the entry, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolution {
    pub event_id: i64,
    pub at: f64,
    pub operator: String,
    pub reason: Option<String>,
}

/// One channel's part of the history.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChannelHistory {
    pub attempts: Vec<Attempt>,
    pub verifications: Vec<Verification>,
}

/// One notification, reduced.
#[derive(Debug, Clone, PartialEq)]
pub struct History {
    pub id: String,
    pub status: Stored<Status>,
    pub dead_letter: bool,
    pub cycle: i64,
    /// The message's recipient (EMAIL).
    pub recipient: Option<String>,
    pub channels: BTreeMap<Channel, ChannelHistory>,
    /// The channels the current cycle owes, when a replay named them; None: every one.
    pub owed: Option<ChannelSet>,
    pub resolution: Option<Resolution>,
    /// What could not be read, each naming its event.
    pub notes: Vec<String>,
}

impl History {
    /// Whether the runtime will still try `channel` on its own: the row is due or leased
    /// and its current cycle owes the channel.
    pub fn still_owed(&self, channel: Channel) -> bool {
        let active = matches!(self.status.known(), Some(Status::Pending | Status::Leased));
        active && self.owed.as_ref().is_none_or(|owed| owed.contains(channel))
    }
}

/// The payload keys reconciliation reads; any other is skipped. A payload whose known
/// keys have the wrong type is unreadable as a whole, and named.
#[derive(Debug, Default, Deserialize)]
struct Fields<'a> {
    #[serde(borrow, default)]
    channel: Option<Cow<'a, str>>,
    #[serde(default)]
    cycle: Option<i64>,
    #[serde(default)]
    attempt: Option<i64>,
    #[serde(borrow, default)]
    lease_token: Option<Cow<'a, str>>,
    #[serde(default)]
    lease_until: Option<f64>,
    #[serde(default)]
    success: Option<bool>,
    #[serde(borrow, default)]
    error: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    metadata: Option<Metadata<'a>>,
    #[serde(borrow, default)]
    smtp_from: Option<Cow<'a, str>>,
    #[serde(default)]
    attempts: Option<Vec<i64>>,
    #[serde(borrow, default)]
    outcome: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    source: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    operator: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    claimed_operator: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    reason: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    channels: Option<Vec<Cow<'a, str>>>,
}

#[derive(Debug, Default, Deserialize)]
struct Metadata<'a> {
    #[serde(borrow, default)]
    provider_outcome: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    smtp_greeting: Option<Cow<'a, str>>,
}

/// Reduces `row` and its events, oldest first.
pub fn reduce(row: &Notification, events: &[StoredEvent<'_>]) -> History {
    let mut history = History {
        id: row.id.clone(),
        status: row.status.clone(),
        dead_letter: row.dead_letter,
        cycle: row.cycle,
        recipient: row
            .payload
            .get("recipient")
            .and_then(serde_json::Value::as_str)
            .map(str::to_string),
        channels: BTreeMap::new(),
        owed: None,
        resolution: None,
        notes: row
            .unreadable
            .iter()
            .map(|u| format!("the row: {u}"))
            .collect(),
    };
    if let Ok(set) = row.channel_set() {
        for channel in set.iter() {
            history.channels.entry(channel).or_default();
        }
    }
    // The lease each claim took, by token: an attempt's window ends with it.
    let mut leases: BTreeMap<String, f64> = BTreeMap::new();
    for event in events {
        let Some(kind) = Kind::from_stored(&event.kind) else {
            continue;
        };
        if !event.unreadable.is_empty() {
            history.notes.push(format!(
                "event {} ({kind}) could not be read: {}",
                event.id,
                event.unreadable.join("; ")
            ));
            continue;
        }
        let fields: Fields<'_> = match serde_json::from_str(event.payload.get()) {
            Ok(fields) => fields,
            Err(err) => {
                if matches!(
                    kind,
                    Kind::AttemptStarted
                        | Kind::ChannelAttemptStarted
                        | Kind::ChannelAttemptResult
                        | Kind::Verified
                        | Kind::DlqResolved
                        | Kind::Replayed
                ) {
                    history.notes.push(format!(
                        "event {} ({kind}): payload could not be read ({})",
                        event.id,
                        crate::model::without_position(&err)
                    ));
                }
                continue;
            }
        };
        match kind {
            Kind::AttemptStarted => {
                if let (Some(token), Some(until)) = (&fields.lease_token, fields.lease_until) {
                    leases.insert(token.to_string(), until);
                }
            }
            Kind::ChannelAttemptStarted | Kind::ChannelAttemptResult => {
                read_attempt(&mut history, &leases, event, kind, &fields);
            }
            Kind::Verified => read_verified(&mut history, event, &fields),
            Kind::DlqResolved => {
                let operator = fields
                    .operator
                    .as_deref()
                    .unwrap_or("(no operator recorded)");
                let operator = match fields.claimed_operator.as_deref() {
                    Some(claimed) if claimed != operator => {
                        format!("{claimed} (key {operator})")
                    }
                    _ => operator.to_string(),
                };
                history.resolution = Some(Resolution {
                    event_id: event.id,
                    at: event.at,
                    operator,
                    reason: fields.reason.map(Cow::into_owned),
                });
            }
            Kind::Replayed => {
                history.resolution = None;
                history.owed = fields
                    .channels
                    .as_ref()
                    .and_then(|names| ChannelSet::parse(names).ok())
                    .filter(|set| !set.is_empty());
            }
            _ => {}
        }
    }
    history
}

fn channel_of(
    history: &mut History,
    event: &StoredEvent<'_>,
    kind: Kind,
    name: Option<&str>,
) -> Option<Channel> {
    match name.map(str::parse::<Channel>) {
        Some(Ok(channel)) => Some(channel),
        _ => {
            history.notes.push(format!(
                "event {} ({kind}) names no channel this build knows",
                event.id
            ));
            None
        }
    }
}

fn read_attempt(
    history: &mut History,
    leases: &BTreeMap<String, f64>,
    event: &StoredEvent<'_>,
    kind: Kind,
    fields: &Fields<'_>,
) {
    let Some(channel) = channel_of(history, event, kind, fields.channel.as_deref()) else {
        return;
    };
    let (Some(cycle), Some(number)) = (fields.cycle, fields.attempt) else {
        history.notes.push(format!(
            "event {} ({kind}): no cycle or attempt in the payload",
            event.id
        ));
        return;
    };
    let token = fields.lease_token.as_deref().unwrap_or_default();
    let lease_end = leases.get(token).copied();
    let attempts = &mut history.channels.entry(channel).or_default().attempts;
    let at = attempts
        .iter()
        .position(|a| a.cycle == cycle && a.attempt == number && a.lease_token == token);
    let attempt = match at {
        Some(at) => &mut attempts[at],
        None => {
            attempts.push(Attempt {
                cycle,
                attempt: number,
                lease_token: token.to_string(),
                started: event.at,
                ended: lease_end.unwrap_or(event.at).max(event.at),
                sender: None,
                relay: None,
                recorded: Recorded::Unknown,
                event_ids: Vec::new(),
                error: None,
            });
            let last = attempts.len() - 1;
            &mut attempts[last]
        }
    };
    attempt.event_ids.push(event.id);
    attempt.started = attempt.started.min(event.at);
    attempt.ended = attempt.ended.max(event.at);
    if kind == Kind::ChannelAttemptStarted {
        if let Some(sender) = &fields.smtp_from {
            attempt.sender = Some(sender.to_string());
        }
        return;
    }
    if let Some(name) = fields
        .metadata
        .as_ref()
        .and_then(|m| m.smtp_greeting.as_deref())
    {
        attempt.relay = Some(name.to_string());
    }
    let provider = fields
        .metadata
        .as_ref()
        .and_then(|m| m.provider_outcome.as_deref());
    let recorded = match (fields.success, provider) {
        (Some(true), _) => Recorded::Accepted,
        (Some(false), Some("UNKNOWN")) | (None, _) => Recorded::Unknown,
        (Some(false), _) => Recorded::Rejected,
    };
    // An acceptance is never undone by another result of the same attempt.
    attempt.recorded = match (attempt.recorded, recorded) {
        (Recorded::Accepted, _) | (_, Recorded::Accepted) => Recorded::Accepted,
        (_, new) => new,
    };
    if let Some(error) = fields.error.as_deref().filter(|e| !e.is_empty()) {
        attempt.error = Some(error.to_string());
    }
}

fn read_verified(history: &mut History, event: &StoredEvent<'_>, fields: &Fields<'_>) {
    let Some(channel) = channel_of(history, event, Kind::Verified, fields.channel.as_deref())
    else {
        return;
    };
    let delivered = match fields.outcome.as_deref() {
        Some("DELIVERED") => true,
        Some("NOT_DELIVERED") => false,
        _ => {
            history.notes.push(format!(
                "event {} (VERIFIED) has no outcome this build knows: counted as no verification",
                event.id
            ));
            return;
        }
    };
    let (Some(cycle), Some(attempts)) = (fields.cycle, fields.attempts.clone()) else {
        history.notes.push(format!(
            "event {} (VERIFIED) names no cycle or attempts: counted as no verification",
            event.id
        ));
        return;
    };
    history
        .channels
        .entry(channel)
        .or_default()
        .verifications
        .push(Verification {
            event_id: event.id,
            at: event.at,
            cycle,
            attempts,
            delivered,
            source: fields.source.as_deref().unwrap_or("operator").to_string(),
        });
}
