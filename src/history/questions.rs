//! What verify asks the providers about: each channel attempt whose outcome is unknown,
//! with the window in which it could have reached the provider, and the attempts a record
//! about a cycle's shared key may cover. The transition that records their answers
//! checks each answer against these as the history stands.

use super::History;
use crate::model::ProviderOutcome;
use crate::model::{Channel, MessageId};
use std::collections::BTreeMap;

/// An attempt in doubt, as a provider is asked about it: what it was sent as, and when
/// it could have reached the provider.
#[derive(Debug, Clone, PartialEq)]
pub struct InDoubt {
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
    pub attempts: Vec<InDoubt>,
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
pub fn questions(history: &History, uncertain: &[(Channel, &[i64])]) -> Vec<Question> {
    let mut questions = Vec::new();
    for (channel, evidence) in uncertain {
        let channel = *channel;
        let attempts = history.attempts(channel);
        let mut by_cycle: BTreeMap<i64, Vec<InDoubt>> = BTreeMap::new();
        let mut asked: Vec<_> = attempts
            .iter()
            .filter(|a| a.attempt >= 0 && a.event_ids().any(|id| evidence.contains(&id)))
            .collect();
        asked.sort_by(|a, b| {
            (a.cycle, a.attempt, &a.lease_token).cmp(&(b.cycle, b.attempt, &b.lease_token))
        });
        for attempt in asked {
            by_cycle.entry(attempt.cycle).or_default().push(InDoubt {
                attempt: attempt.attempt,
                message_id: (channel == Channel::Email).then(|| {
                    MessageId::new(&history.id, attempt.cycle, attempt.attempt).to_string()
                }),
                sender: attempt.sender.clone(),
                relay: attempt.relay.clone(),
                started: attempt.started,
                ended: attempt.ended,
            });
        }
        for (cycle, attempts) in by_cycle {
            // What a record about the cycle's shared key (PagerDuty's dedup key, Slack's
            // Idempotency-Key) may cover: every attempt of the cycle but those the
            // provider refused, which did nothing a record could show; one that started
            // and recorded nothing may have.
            let mut cycle_attempts: Vec<i64> = history
                .attempts(channel)
                .iter()
                .filter(|a| {
                    a.cycle == cycle && a.attempt >= 0 && a.recorded() != ProviderOutcome::Rejected
                })
                .map(|a| a.attempt)
                .collect();
            cycle_attempts.sort_unstable();
            cycle_attempts.dedup();
            questions.push(Question {
                id: history.id.clone(),
                channel,
                cycle,
                attempts,
                cycle_attempts,
            });
        }
    }
    questions
}
