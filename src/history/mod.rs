//! One notification's history, read for what its attempts could have done: each channel
//! attempt whose outcome is unknown, with the window in which it could have reached the
//! provider, and the attempts a record about a cycle's shared key may cover. Verify asks
//! the providers about these; the transition that records their answers checks each
//! answer against them as the history stands.

use crate::model::{Channel, Event, Kind, MessageId, Notification, payload};
use std::collections::BTreeMap;

/// One attempt whose outcome is unknown, and when it could have reached the provider.
#[derive(Debug, Clone, PartialEq)]
pub struct Attempt {
    pub attempt: i64,
    /// EMAIL: the Message-ID the attempt's message carried.
    pub message_id: Option<String>,
    /// EMAIL: the envelope sender the adapter recorded on the attempt's start, if it did.
    pub sender: Option<String>,
    /// EMAIL: the relay that answered, by the name its greeting gave, if recorded.
    pub relay: Option<String>,
    /// When the call started.
    pub started: f64,
    /// When its lease ran out, or its late result came, whichever was later.
    pub ended: f64,
}

/// The unknown attempts of one channel in one cycle of one entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Question {
    pub id: String,
    pub channel: Channel,
    pub cycle: i64,
    pub attempts: Vec<Attempt>,
    /// Every attempt of the cycle on this channel (what a cycle-wide key covers).
    pub cycle_attempts: Vec<i64>,
}

impl Question {
    /// The span every attempt could have acted in.
    pub fn window(&self) -> (f64, f64) {
        let started = self
            .attempts
            .iter()
            .map(|a| a.started)
            .fold(f64::INFINITY, f64::min);
        let ended = self
            .attempts
            .iter()
            .map(|a| a.ended)
            .fold(f64::NEG_INFINITY, f64::max);
        (started, ended)
    }
}

/// What to ask about `uncertain` channels (each with the events triage gave as its
/// evidence, which for an UNCERTAIN channel are its unknown attempts'): their unknown
/// attempts, by cycle.
pub fn questions(
    row: &Notification,
    events: &[Event],
    uncertain: &[(Channel, &[i64])],
) -> Vec<Question> {
    let by_id: BTreeMap<i64, &Event> = events.iter().map(|e| (e.id, e)).collect();
    let mut questions = Vec::new();
    for (channel, evidence) in uncertain {
        let channel = *channel;
        let mut attempts: BTreeMap<(i64, i64, String), Attempt> = BTreeMap::new();
        for event in evidence.iter().filter_map(|id| by_id.get(id)) {
            let kind = event.kind.known();
            if !matches!(
                kind,
                Some(Kind::ChannelAttemptStarted | Kind::ChannelAttemptResult)
            ) {
                continue;
            }
            let payload = event.payload_value();
            let (Some(cycle), Some(number)) =
                (payload["cycle"].as_i64(), payload["attempt"].as_i64())
            else {
                continue;
            };
            let token = payload["lease_token"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let lease_until = lease_until(events, &token);
            let entry = attempts
                .entry((cycle, number, token))
                .or_insert_with(|| Attempt {
                    attempt: number,
                    message_id: (channel == Channel::Email)
                        .then(|| MessageId::new(&row.id, cycle, number).to_string()),
                    sender: None,
                    relay: None,
                    started: event.at,
                    ended: lease_until.unwrap_or(event.at),
                });
            if kind == Some(Kind::ChannelAttemptStarted)
                && let Some(sender) = payload[payload::SMTP_FROM].as_str()
            {
                entry.sender = Some(sender.to_string());
            }
            if kind == Some(Kind::ChannelAttemptResult)
                && let Some(name) = payload["metadata"][payload::SMTP_GREETING].as_str()
            {
                entry.relay = Some(name.to_string());
            }
            entry.started = entry.started.min(event.at);
            entry.ended = entry.ended.max(event.at);
        }
        let mut by_cycle: BTreeMap<i64, Vec<Attempt>> = BTreeMap::new();
        for ((cycle, _, _), attempt) in attempts {
            by_cycle.entry(cycle).or_default().push(attempt);
        }
        for (cycle, attempts) in by_cycle {
            questions.push(Question {
                id: row.id.clone(),
                channel,
                cycle,
                attempts,
                cycle_attempts: cycle_attempts(events, channel, cycle),
            });
        }
    }
    questions
}

/// When the lease `token` ran out, from the ATTEMPT_STARTED that took it.
fn lease_until(events: &[Event], token: &str) -> Option<f64> {
    events
        .iter()
        .filter(|e| e.kind == Kind::AttemptStarted)
        .map(Event::payload_value)
        .find(|p| p["lease_token"] == token && !token.is_empty())
        .and_then(|p| p["lease_until"].as_f64())
}

/// The attempts of `channel` in `cycle` that were not REJECTED: what a record about the
/// cycle's shared key (PagerDuty's dedup key, Slack's Idempotency-Key) may cover. An
/// attempt the provider refused did nothing a record could show; one that started and
/// recorded nothing may have.
fn cycle_attempts(events: &[Event], channel: Channel, cycle: i64) -> Vec<i64> {
    // Per attempt: whether a result came, and whether every result was a refusal.
    let mut seen: BTreeMap<i64, (bool, bool)> = BTreeMap::new();
    for event in events {
        let kind = event.kind.known();
        if !matches!(
            kind,
            Some(Kind::ChannelAttemptStarted | Kind::ChannelAttemptResult)
        ) {
            continue;
        }
        let payload = event.payload_value();
        let ours = payload["cycle"].as_i64() == Some(cycle)
            && payload["channel"]
                .as_str()
                .and_then(|c| c.parse::<Channel>().ok())
                == Some(channel);
        let Some(number) = payload["attempt"].as_i64().filter(|_| ours) else {
            continue;
        };
        let entry = seen.entry(number).or_insert((false, true));
        if kind == Some(Kind::ChannelAttemptResult) {
            let rejected = payload["success"] == false
                && payload["metadata"]["provider_outcome"]
                    .as_str()
                    .is_some_and(|o| o != "UNKNOWN");
            *entry = (true, entry.1 && rejected);
        }
    }
    seen.into_iter()
        .filter(|(_, (answered, refused))| !(*answered && *refused))
        .map(|(number, _)| number)
        .collect()
}
