//! One payload type per event kind: what the engine and the remediation transitions
//! write into `uns_events.payload`, and what the engine reads back of it.
//!
//! Every writer goes through [`to_text`], which serialises through a JSON map, so the
//! keys of a stored payload are always in the same (sorted) order whatever the field
//! order here. Fields a reader needs are optional on the way in (`#[serde(default)]`,
//! `null` allowed): a store written by another build may lack them, and a reader says
//! what is missing rather than failing on the first absent key; a field of the wrong
//! type makes the payload unreadable, by the same rule as triage's. Triage reads the same
//! payloads through its own zero-copy view (`triage::fields`), which the tests hold
//! against these types.

use super::{Channel, ChannelSet};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// What an out-of-band check found about a channel's attempts, as an operator attests it
/// or a provider's record proves it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Claim {
    Delivered,
    NotDelivered,
}

/// What a notification's message was, as far as its row says: the subject and the
/// email recipient (text values only; anything else reads as absent).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Message {
    pub subject: Option<String>,
    pub recipient: Option<String>,
}

impl Message {
    /// The message of a row's payload.
    pub fn of(payload: &Value) -> Self {
        let text = |key: &str| payload.get(key)?.as_str().map(str::to_string);
        Self {
            subject: text("subject"),
            recipient: text("recipient"),
        }
    }

    /// Who `channel`'s copy goes to: the email recipient, or where the provider's own
    /// setting sends it (a Slack webhook names its channel, a PagerDuty routing key its
    /// service: neither is in the store).
    pub fn to(&self, channel: Channel) -> String {
        match channel {
            Channel::Email => self
                .recipient
                .clone()
                .unwrap_or_else(|| "(no recipient recorded)".into()),
            Channel::Slack => "(the Slack webhook's channel)".into(),
            Channel::Pagerduty => "(the routing key's PagerDuty service)".into(),
        }
    }

    /// Who each of `channels` goes to, in one line.
    pub fn to_all(&self, channels: &[Channel]) -> String {
        let mut said: Vec<String> = Vec::new();
        for channel in channels {
            let to = self.to(*channel);
            if !said.contains(&to) {
                said.push(to);
            }
        }
        if said.is_empty() {
            "-".into()
        } else {
            said.join(", ")
        }
    }
}

/// The keys every event written under a lease carries.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LeaseKeys {
    #[serde(default)]
    pub attempt: Option<i64>,
    #[serde(default)]
    pub cycle: Option<i64>,
    #[serde(default)]
    pub cycle_attempt: Option<i64>,
    #[serde(default)]
    pub lease_token: Option<String>,
}

/// SUBMITTED.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Submitted {
    pub attempt: i64,
    pub cycle: i64,
    pub cycle_attempt: i64,
    pub channels: ChannelSet,
    pub idempotency_key: Option<String>,
}

/// ATTEMPT_STARTED: a worker took the lease.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttemptStarted {
    #[serde(flatten)]
    pub lease: LeaseKeys,
    pub worker_id: String,
    pub reclaimed: bool,
    pub lease_until: f64,
    /// A reclaim: the lease it took over (`null` when the row named none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_lease_token: Option<Option<String>>,
}

/// CHANNEL_ATTEMPT_STARTED: the fence held and the provider is about to be called.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChannelAttemptStarted {
    #[serde(flatten)]
    pub lease: LeaseKeys,
    /// What the adapter says about the call before it is made (`smtp_from`, ...). It
    /// comes before the fields below, which win if a detail repeats one of their names.
    #[serde(flatten)]
    pub details: Map<String, Value>,
    pub channel: Channel,
    pub provider_effect_may_have_occurred: bool,
}

/// CHANNEL_ATTEMPT_RESULT: what the adapter saw of the call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChannelAttemptResult {
    #[serde(flatten)]
    pub lease: LeaseKeys,
    #[serde(default)]
    pub channel: Option<String>,
    #[serde(default)]
    pub success: Option<bool>,
    #[serde(default)]
    pub message_id: Option<String>,
    #[serde(default)]
    pub error: Option<String>,
    /// `provider_outcome`, `retryable`, and what the provider answered.
    #[serde(default)]
    pub metadata: Option<Map<String, Value>>,
}

/// LEASE_LOST.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeaseLost {
    #[serde(flatten)]
    pub lease: LeaseKeys,
    /// Whether a provider call had started under the lease.
    pub provider_effect_may_have_occurred: bool,
}

/// RETRY_SCHEDULED.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RetryScheduled {
    #[serde(flatten)]
    pub lease: LeaseKeys,
    pub next_attempt_at: f64,
    pub channels: ChannelSet,
}

/// DELIVERED: the lease's keys only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Delivered {
    #[serde(flatten)]
    pub lease: LeaseKeys,
}

/// DEAD_LETTERED, by a worker settling under its lease or by a claim that found the
/// attempt budget spent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeadLettered {
    #[serde(flatten)]
    pub lease: LeaseKeys,
    pub error_message: String,
}

/// Who acted and why: the part every operator's event (DLQ_RESOLVED, REPLAYED) shares.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Audit {
    /// The front end that made the change, when it was not the command line: `tui`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<Via>,
    pub operator: String,
    pub reason: Option<String>,
    pub ticket: Option<String>,
    pub attestation: Option<String>,
    pub verified: Option<Claim>,
    pub forced: bool,
    pub overridden: Vec<String>,
    /// The verdict the change was based on, computed where the change was made.
    pub triage: Value,
    /// Over the API: who the client said it was, beside the key's name in `operator`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claimed_operator: Option<String>,
    /// A resolve: the channels given up on purpose, that nobody received (FAILED or
    /// NOT_ATTEMPTED when it was made).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub given_up: Vec<super::Channel>,
}

/// The person an audited act names, the one way it is said everywhere (audit, report,
/// screen, prompts): over the API the operator the client claimed with the name of the
/// key it came through, `oncall-jane (key ops-2)`; on the store directly, the operator.
/// A key's name alone never stands for a person.
pub fn person(operator: Option<&str>, claimed: Option<&str>) -> String {
    let operator = operator.map(str::trim).filter(|o| !o.is_empty());
    match (claimed.map(str::trim).filter(|c| !c.is_empty()), operator) {
        (Some(claimed), Some(key)) => format!("{claimed} (key {key})"),
        (Some(claimed), None) => claimed.to_string(),
        (None, Some(operator)) => operator.to_string(),
        (None, None) => "(no operator recorded)".into(),
    }
}

/// The most characters of a name an operator gives.
pub const MAX_OPERATOR_CHARS: usize = 200;

/// Why `name` cannot be recorded as the person acting; None when it can. The audit says
/// a person once, on one line, and over the API beside the key it came through
/// ([`person`]): a name holding a line break or another control character, or the words
/// that name a key, would make the record say someone else acted.
pub fn operator_name_problem(name: &str) -> Option<String> {
    let name = name.trim();
    if name.chars().any(char::is_control) {
        return Some("holds a control character (a line break, a tab, an escape)".into());
    }
    if name.chars().count() > MAX_OPERATOR_CHARS {
        return Some(format!("is longer than {MAX_OPERATOR_CHARS} characters"));
    }
    if name.to_ascii_lowercase().contains("(key ") {
        return Some(
            "holds \"(key \", which the record uses to name the API key an act came through".into(),
        );
    }
    None
}

/// A front end other than the command line, named in the audit of what it changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Via {
    /// `unsctl tui`, the live screen.
    Tui,
}

/// NOTE: what an operator wrote down about the incident (`unsctl note`), kept in the
/// store's notes beside the events. It changes no entry; a note that says it is the fix
/// gives the report its fix time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Note {
    /// The front end that wrote it, when it was not the command line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<Via>,
    /// As in [`Audit`]: the key's name over the API, beside the person it claimed.
    pub operator: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claimed_operator: Option<String>,
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ticket: Option<String>,
    /// When the fix went in, as the note says: the note is the fix's record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixed_at: Option<f64>,
}

impl Note {
    /// Who wrote it, said as every act's person is.
    pub fn person(&self) -> String {
        person(Some(&self.operator), self.claimed_operator.as_deref())
    }
}

/// DLQ_RESOLVED.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DlqResolved {
    #[serde(flatten)]
    pub audit: Audit,
    pub cycle: i64,
}

/// REPLAYED: who acted, and the new cycle.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Replayed {
    #[serde(flatten)]
    pub audit: Audit,
    #[serde(flatten)]
    pub cycle: NewCycle,
    /// When the new cycle was made due, when a pace put it later than the replay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub due_at: Option<f64>,
    /// The pace, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pace: Option<String>,
}

/// The cycle a REPLAYED event starts: what the engine reads back to know which channels
/// the cycle owes. Optional on the way in, so what a payload lacks can be named.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NewCycle {
    #[serde(default)]
    pub cycle: Option<i64>,
    #[serde(default)]
    pub previous_cycle: Option<i64>,
    #[serde(default)]
    pub cycle_attempt: Option<i64>,
    /// The channels' names as stored: a name this build does not know is named by the
    /// reader, not lost in a parse error.
    #[serde(default)]
    pub channels: Option<Vec<String>>,
}

/// VERIFIED: what a provider's own record proved about a channel's attempts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verified {
    pub channel: Channel,
    pub cycle: i64,
    pub attempts: Vec<i64>,
    pub outcome: Claim,
    pub source: String,
    pub evidence: String,
    pub operator: String,
    pub reason: Option<String>,
    pub ticket: Option<String>,
    pub triage: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claimed_operator: Option<String>,
    /// The record was read on a client that posted the answer with its evidence, not by
    /// whoever wrote this event (DESIGN §7).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub read_on_client: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<Via>,
}

/// The EMAIL result's metadata key naming the relay that answered the attempt, by the
/// name its EHLO reply gave: written by the adapter, read by verify (DESIGN §7).
pub const SMTP_GREETING: &str = "smtp_greeting";

/// The envelope sender the EMAIL adapter records on each attempt's start.
pub const SMTP_FROM: &str = "smtp_from";

/// The stored text of a payload: serialised through a JSON map, so its keys are sorted
/// and every writer spells the same payload the same way.
pub fn to_text<T: Serialize>(payload: &T) -> String {
    serde_json::to_value(payload)
        .map(|value| value.to_string())
        .unwrap_or_else(|_| "{}".to_string())
}
