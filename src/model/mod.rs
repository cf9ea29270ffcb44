//! The runtime's vocabulary: channels, statuses, event kinds, Message-IDs and stored rows.
//!
//! These names are the contract of DESIGN.md sections 2 and 3; the database, the API and
//! the CLI all spell them the same way. Input is parsed into these types at the edge, so
//! the rest of the code never compares channel or kind names as strings.

pub mod command;
pub mod payload;

use serde::{Deserialize, Deserializer, Serialize};
use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

/// A delivery channel. Serialised upper-case, as stored in `uns_notifications.channels`;
/// parsed in any letter case with surrounding whitespace trimmed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Channel {
    Email,
    Slack,
    Pagerduty,
}

impl Channel {
    pub const ALL: [Channel; 3] = [Channel::Email, Channel::Slack, Channel::Pagerduty];

    pub fn as_str(self) -> &'static str {
        match self {
            Channel::Email => "EMAIL",
            Channel::Slack => "SLACK",
            Channel::Pagerduty => "PAGERDUTY",
        }
    }
}

impl fmt::Display for Channel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error for a channel name that is not EMAIL, SLACK or PAGERDUTY.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown channel {0:?}: the valid channels are EMAIL, SLACK and PAGERDUTY (any letter case)"
)]
pub struct UnknownChannel(pub String);

impl FromStr for Channel {
    type Err = UnknownChannel;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let name = text.trim();
        Channel::ALL
            .into_iter()
            .find(|channel| channel.as_str().eq_ignore_ascii_case(name))
            .ok_or_else(|| UnknownChannel(text.to_string()))
    }
}

impl<'de> Deserialize<'de> for Channel {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = std::borrow::Cow::<'de, str>::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// A set of channels: duplicates collapse, order is always EMAIL, SLACK, PAGERDUTY.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ChannelSet(BTreeSet<Channel>);

impl ChannelSet {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn insert(&mut self, channel: Channel) -> bool {
        self.0.insert(channel)
    }

    pub fn contains(&self, channel: Channel) -> bool {
        self.0.contains(&channel)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn iter(&self) -> impl Iterator<Item = Channel> + '_ {
        self.0.iter().copied()
    }

    /// Whether every channel of `self` is in `other`.
    pub fn is_subset(&self, other: &ChannelSet) -> bool {
        self.0.is_subset(&other.0)
    }

    /// The channels of `self` that are not in `other`.
    pub fn without(&self, other: &ChannelSet) -> ChannelSet {
        ChannelSet(self.0.difference(&other.0).copied().collect())
    }

    /// Parses a list of names (any case, trimmed, duplicates collapse); the first unknown
    /// name is the error.
    pub fn parse<S: AsRef<str>>(names: &[S]) -> Result<Self, UnknownChannel> {
        names.iter().map(|name| name.as_ref().parse()).collect()
    }

    /// "EMAIL,SLACK": the spelling `--channels` takes.
    pub fn joined(&self, separator: &str) -> String {
        self.iter()
            .map(Channel::as_str)
            .collect::<Vec<_>>()
            .join(separator)
    }
}

impl FromIterator<Channel> for ChannelSet {
    fn from_iter<I: IntoIterator<Item = Channel>>(iter: I) -> Self {
        Self(iter.into_iter().collect())
    }
}

impl fmt::Display for ChannelSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.joined(","))
    }
}

/// The aggregate status of a notification row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Status {
    Pending,
    Leased,
    Delivered,
    Dead,
    Resolved,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "PENDING",
            Status::Leased => "LEASED",
            Status::Delivered => "DELIVERED",
            Status::Dead => "DEAD",
            Status::Resolved => "RESOLVED",
        }
    }

    /// Whether the row has stopped moving: nothing will change it without an operator.
    pub fn is_settled(self) -> bool {
        matches!(self, Status::Delivered | Status::Dead | Status::Resolved)
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Status {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "PENDING" => Ok(Status::Pending),
            "LEASED" => Ok(Status::Leased),
            "DELIVERED" => Ok(Status::Delivered),
            "DEAD" => Ok(Status::Dead),
            "RESOLVED" => Ok(Status::Resolved),
            other => Err(format!("unknown status {other:?}")),
        }
    }
}

/// A name the store holds in a column: a status or an event kind.
pub trait StoredName: Copy + PartialEq + 'static {
    fn as_str(self) -> &'static str;
    /// The value a stored name spells exactly, if any.
    fn from_stored(text: &str) -> Option<Self>;
}

impl StoredName for Status {
    fn as_str(self) -> &'static str {
        Status::as_str(self)
    }

    fn from_stored(text: &str) -> Option<Self> {
        text.parse().ok()
    }
}

impl StoredName for Kind {
    fn as_str(self) -> &'static str {
        Kind::as_str(self)
    }

    fn from_stored(text: &str) -> Option<Self> {
        Kind::from_stored(text)
    }
}

/// A value as the store holds it: one this build knows, or the text it could not read,
/// kept so it can be shown and so triage can say the row is unreadable rather than guess.
/// Serialised as the stored text, so every output spells it as the store does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stored<T> {
    Known(T),
    Unreadable(String),
}

impl<T: StoredName> Stored<T> {
    pub fn read(text: &str) -> Self {
        T::from_stored(text).map_or_else(|| Stored::Unreadable(text.to_string()), Stored::Known)
    }

    pub fn as_str(&self) -> &str {
        match self {
            Stored::Known(value) => value.as_str(),
            Stored::Unreadable(text) => text,
        }
    }

    pub fn known(&self) -> Option<T> {
        match self {
            Stored::Known(value) => Some(*value),
            Stored::Unreadable(_) => None,
        }
    }
}

impl<T: StoredName> PartialEq<T> for Stored<T> {
    fn eq(&self, other: &T) -> bool {
        self.known() == Some(*other)
    }
}

impl<T: StoredName> From<T> for Stored<T> {
    fn from(value: T) -> Self {
        Stored::Known(value)
    }
}

impl<T: StoredName> From<&str> for Stored<T> {
    fn from(text: &str) -> Self {
        Stored::read(text)
    }
}

impl<T: StoredName> From<String> for Stored<T> {
    fn from(text: String) -> Self {
        Stored::read(&text)
    }
}

impl<T: StoredName> fmt::Display for Stored<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl<T: StoredName> Serialize for Stored<T> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de, T: StoredName> Deserialize<'de> for Stored<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Ok(Stored::read(&text))
    }
}

/// The kinds of event appended to `uns_events`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Kind {
    Submitted,
    AttemptStarted,
    ChannelAttemptStarted,
    ChannelAttemptResult,
    LeaseLost,
    RetryScheduled,
    Delivered,
    DeadLettered,
    DlqResolved,
    Replayed,
    Verified,
}

impl Kind {
    /// Every kind the runtime writes; anything else in a store is unexpected.
    pub const ALL: [Kind; 11] = [
        Kind::Submitted,
        Kind::AttemptStarted,
        Kind::ChannelAttemptStarted,
        Kind::ChannelAttemptResult,
        Kind::LeaseLost,
        Kind::RetryScheduled,
        Kind::Delivered,
        Kind::DeadLettered,
        Kind::DlqResolved,
        Kind::Replayed,
        Kind::Verified,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Submitted => "SUBMITTED",
            Kind::AttemptStarted => "ATTEMPT_STARTED",
            Kind::ChannelAttemptStarted => "CHANNEL_ATTEMPT_STARTED",
            Kind::ChannelAttemptResult => "CHANNEL_ATTEMPT_RESULT",
            Kind::LeaseLost => "LEASE_LOST",
            Kind::RetryScheduled => "RETRY_SCHEDULED",
            Kind::Delivered => "DELIVERED",
            Kind::DeadLettered => "DEAD_LETTERED",
            Kind::DlqResolved => "DLQ_RESOLVED",
            Kind::Replayed => "REPLAYED",
            Kind::Verified => "VERIFIED",
        }
    }

    /// The kind a stored name spells exactly, if any.
    pub fn from_stored(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|kind| kind.as_str() == name)
    }

    /// Every kind's name, for messages and completions.
    pub fn names() -> Vec<&'static str> {
        Kind::ALL.iter().map(|kind| kind.as_str()).collect()
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Kind {
    type Err = String;

    /// A kind as a person types it: any letter case, `-` for `_`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let name = text.trim().to_ascii_uppercase().replace('-', "_");
        Kind::from_stored(&name).ok_or_else(|| {
            format!(
                "unknown event kind {text:?}: the kinds are {}",
                Kind::names().join(", ")
            )
        })
    }
}

/// What the provider did with a channel call, as far as the adapter can tell: the one
/// outcome type, written by the adapter and read back from the history. Ordered so that
/// the best result an attempt recorded is its outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum ProviderOutcome {
    Rejected,
    /// An UNKNOWN result, or (read back) no result at all: the worker died or hung
    /// mid-call.
    Unknown,
    Accepted,
}

impl ProviderOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderOutcome::Accepted => "ACCEPTED",
            ProviderOutcome::Rejected => "REJECTED",
            ProviderOutcome::Unknown => "UNKNOWN",
        }
    }

    /// A CHANNEL_ATTEMPT_RESULT read back, by its `success` and its metadata's
    /// `provider_outcome`: the one table from a result to its outcome. A result that does
    /// not say whether it succeeded is UNKNOWN, never a refusal.
    pub fn of_result(success: Option<bool>, provider_outcome: Option<&str>) -> Self {
        match (success, provider_outcome) {
            (Some(true), _) => ProviderOutcome::Accepted,
            (Some(false), Some("UNKNOWN")) | (None, _) => ProviderOutcome::Unknown,
            (Some(false), _) => ProviderOutcome::Rejected,
        }
    }

    /// A result's payload read the same way.
    pub fn of_payload(payload: &serde_json::Value) -> Self {
        Self::of_result(
            payload["success"].as_bool(),
            payload["metadata"]["provider_outcome"].as_str(),
        )
    }
}

/// The Message-ID an email attempt carries: `<id.cycle.attempt@uns.local>`. Derived, so
/// a relay log can be searched for any attempt without asking the runtime.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MessageId {
    pub notification_id: String,
    pub cycle: i64,
    pub attempt: i64,
}

impl MessageId {
    pub const DOMAIN: &'static str = "uns.local";

    pub fn new(notification_id: &str, cycle: i64, attempt: i64) -> Self {
        Self {
            notification_id: notification_id.to_string(),
            cycle,
            attempt,
        }
    }

    /// Whether `text` is exactly the Message-ID of this attempt, as [`fmt::Display`]
    /// writes it, without building it.
    pub fn is(text: &str, notification_id: &str, cycle: i64, attempt: i64) -> bool {
        let matched = || -> Option<()> {
            let rest = text.strip_prefix('<')?.strip_suffix('>')?;
            let rest = rest.strip_prefix(notification_id)?.strip_prefix('.')?;
            let rest = rest.strip_suffix(Self::DOMAIN)?.strip_suffix('@')?;
            let (c, a) = rest.split_once('.')?;
            let canonical = |digits: &str, n: i64| {
                digits.parse::<i64>().ok() == Some(n) && digits.len() == n.to_string().len()
            };
            (canonical(c, cycle) && canonical(a, attempt)).then_some(())
        };
        matched().is_some()
    }

    /// The notification `text` is the Message-ID of an attempt of, when it is exactly one
    /// as [`fmt::Display`] writes it (angle brackets, numbers as written), without
    /// building it: what a relay log is searched for when every attempt of a notification
    /// is asked about.
    pub fn notification_of(text: &str) -> Option<&str> {
        let rest = text.strip_prefix('<')?.strip_suffix('>')?;
        let rest = rest.strip_suffix(Self::DOMAIN)?.strip_suffix('@')?;
        let (rest, attempt) = rest.rsplit_once('.')?;
        let (id, cycle) = rest.rsplit_once('.')?;
        let as_written = |digits: &str| {
            digits
                .parse::<i64>()
                .is_ok_and(|n| n.to_string().len() == digits.len())
        };
        (!id.is_empty() && as_written(cycle) && as_written(attempt)).then_some(id)
    }

    /// Reads `<id.cycle.attempt@uns.local>` (the angle brackets are optional).
    pub fn parse(text: &str) -> Option<Self> {
        let inner = text.trim();
        let inner = inner
            .strip_prefix('<')
            .and_then(|rest| rest.strip_suffix('>'))
            .unwrap_or(inner);
        let (local, domain) = inner.rsplit_once('@')?;
        if domain != Self::DOMAIN {
            return None;
        }
        let (rest, attempt) = local.rsplit_once('.')?;
        let (id, cycle) = rest.rsplit_once('.')?;
        if id.is_empty() {
            return None;
        }
        Some(Self {
            notification_id: id.to_string(),
            cycle: cycle.parse().ok()?,
            attempt: attempt.parse().ok()?,
        })
    }
}

impl fmt::Display for MessageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "<{}.{}.{}@{}>",
            self.notification_id,
            self.cycle,
            self.attempt,
            Self::DOMAIN
        )
    }
}

/// The `Idempotency-Key` the webhook adapters send: stable across the attempts of one
/// cycle, new after a replay.
pub fn idempotency_key(notification_id: &str, channel: Channel, cycle: i64) -> String {
    format!("{notification_id}:{channel}:{cycle}")
}

/// What to search a provider's own records for, in its own terms, to find what an
/// attempt sent: the relay log's Message-ID, PagerDuty's dedup key (the bare
/// notification id, which names the incident), Slack's metadata Idempotency-Key.
pub fn provider_key(notification_id: &str, channel: Channel, cycle: i64, attempt: i64) -> String {
    match channel {
        Channel::Email => MessageId::new(notification_id, cycle, attempt).to_string(),
        Channel::Pagerduty => notification_id.to_string(),
        Channel::Slack => idempotency_key(notification_id, channel, cycle),
    }
}

/// What a provider's key is called in its own records, for a sentence.
pub fn provider_key_name(channel: Channel) -> &'static str {
    match channel {
        Channel::Email => "Message-ID",
        Channel::Pagerduty => "incident_key (dedup key)",
        Channel::Slack => "metadata idempotency_key",
    }
}

/// The longest notification id any input may carry (an argument, a plan entry, an API
/// route), in bytes; the runtime's own are 34.
pub const MAX_ID_BYTES: usize = 256;

/// A notification id as an input carries it (an argument, a plan entry, an API route):
/// 1 to `MAX_ID_BYTES` bytes, none of them a control character or one that moves or hides
/// text (a line break, a direction mark), nor a space at either end. A store may hold
/// any text as an id, and every id a composed command can carry on one line must be one
/// an argument can name, so inner spaces are allowed (DESIGN §5). The one place the
/// id rule is written; every edge parses into this type, so a bad id is refused with the
/// same words wherever it was typed. A command that expands prefixes takes a prefix under
/// the same rule.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct NotificationId(String);

/// Why a text is not a notification id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadId {
    #[error("an id cannot be empty")]
    Empty,
    #[error("an id is at most {MAX_ID_BYTES} bytes; this one is {0}")]
    TooLong(usize),
    #[error("an id holds no control characters, line breaks or direction marks")]
    Unprintable,
    #[error("an id neither starts nor ends with a space")]
    Padded,
}

impl NotificationId {
    pub fn parse(text: &str) -> Result<Self, BadId> {
        if text.is_empty() {
            return Err(BadId::Empty);
        }
        if text.len() > MAX_ID_BYTES {
            return Err(BadId::TooLong(text.len()));
        }
        if command::holds_unprintable(text) {
            return Err(BadId::Unprintable);
        }
        if text.trim() != text {
            return Err(BadId::Padded);
        }
        Ok(Self(text.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for NotificationId {
    type Err = BadId;

    fn from_str(text: &str) -> Result<Self, BadId> {
        Self::parse(text)
    }
}

impl fmt::Display for NotificationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for NotificationId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl From<NotificationId> for String {
    fn from(id: NotificationId) -> String {
        id.0
    }
}

/// A notification with its history: the row's fields plus its events, in event order
/// (the API's `GET /api/v1/runtime/notifications/{id}` document).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NotificationDoc {
    #[serde(flatten)]
    pub row: Notification,
    pub events: Vec<Event>,
}

/// One row of `uns_notifications`, as read back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Notification {
    pub id: String,
    pub status: Stored<Status>,
    pub dead_letter: bool,
    pub attempts: i64,
    pub cycle: i64,
    pub cycle_attempts: i64,
    pub max_attempts: i64,
    /// The stored names as written; a store may hold names this build does not know, and
    /// triage says so rather than guessing.
    pub channels: Vec<String>,
    pub payload: serde_json::Value,
    pub idempotency_key: Option<String>,
    pub lease_token: Option<String>,
    pub lease_until: Option<f64>,
    pub next_attempt_at: f64,
    pub error_message: Option<String>,
    pub created_at: f64,
    pub updated_at: f64,
    /// Columns that could not be read, each "column: why". A row with any is VERIFY.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unreadable: Vec<String>,
}

impl Notification {
    /// The row's channels as a set, or why they cannot be trusted.
    pub fn channel_set(&self) -> Result<ChannelSet, String> {
        if let Some(problem) = self.unreadable.iter().find(|u| u.starts_with("channels")) {
            return Err(problem.clone());
        }
        ChannelSet::parse(&self.channels).map_err(|err| format!("channels: {err}"))
    }
}

/// An event payload exactly as stored: JSON text, kept verbatim so every reader (the
/// store, the API, a plan) triages the same bytes. Text that is not JSON is kept as a
/// JSON string and the event names the column as unreadable.
pub type Payload = Box<serde_json::value::RawValue>;

/// One note as stored: its payload verbatim, as an event's is.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NoteRow {
    pub id: i64,
    pub at: f64,
    pub kind: String,
    pub payload: Payload,
    /// What could not be read of it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unreadable: Vec<String>,
}

impl NoteRow {
    /// The note it holds; None when its payload is not one.
    pub fn note(&self) -> Option<payload::Note> {
        serde_json::from_str(self.payload.get()).ok()
    }
}

/// The payload for stored `text`: verbatim when it is JSON, else the text as a JSON
/// string and why it could not be read.
pub fn payload_of(text: &str) -> (Payload, Option<String>) {
    match serde_json::value::RawValue::from_string(text.to_string()) {
        Ok(raw) => (raw, None),
        Err(_) => (json_string(text), payload_problem(text)),
    }
}

/// Why stored payload `text` is not JSON, in the words every reader uses.
pub fn payload_problem(text: &str) -> Option<String> {
    serde_json::from_str::<serde::de::IgnoredAny>(text)
        .err()
        .map(|err| format!("payload: not valid JSON ({})", without_position(&err)))
}

/// Stored payload `text` as a JSON tree, read as the history reads it: `null` when it is
/// not JSON, or when it names a key twice (it says two things, so no field of it is shown
/// as said).
pub fn payload_tree(text: &str) -> serde_json::Value {
    crate::json::strict(text.as_bytes()).unwrap_or(serde_json::Value::Null)
}

/// The payload a JSON tree would be stored as.
pub fn payload_from_value(value: &serde_json::Value) -> Payload {
    serde_json::value::to_raw_value(value).unwrap_or_default()
}

/// `text` as a JSON string value.
pub fn json_string(text: &str) -> Payload {
    let quoted = serde_json::to_string(text).unwrap_or_else(|_| "null".to_string());
    serde_json::value::RawValue::from_string(quoted).unwrap_or_else(|_| empty_payload())
}

/// `null`, for a payload that could not be read at all.
pub fn empty_payload() -> Payload {
    Payload::default()
}

/// A JSON error without its "at line L column C": the same fault reads the same
/// whatever the bytes around it.
pub fn without_position(err: &serde_json::Error) -> String {
    let text = err.to_string();
    let suffix = format!(" at line {} column {}", err.line(), err.column());
    text.strip_suffix(&suffix).unwrap_or(&text).to_string()
}

/// One row of `uns_events`. Columns that could not be read are named in `unreadable`,
/// so that triage can name the bad event instead of failing the whole read.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Event {
    pub id: i64,
    pub at: f64,
    pub kind: Stored<Kind>,
    pub payload: Payload,
    /// Columns that could not be read, each "column: why".
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unreadable: Vec<String>,
}

impl Event {
    /// The payload as a JSON tree, for showing its fields (`null` when it is not JSON).
    pub fn payload_value(&self) -> serde_json::Value {
        payload_tree(self.payload.get())
    }
}

impl PartialEq for Event {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
            && self.at == other.at
            && self.kind == other.kind
            && self.payload.get() == other.payload.get()
            && self.unreadable == other.unreadable
    }
}

/// The payload of a new notification as the API and `runtime submit` accept it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Email address for EMAIL; free text for the others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recipient: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every reader of a stored payload's fields reads what the history reads: one that
    /// names a key twice shows no field at all, neither reading of it.
    #[test]
    fn a_payload_naming_a_key_twice_shows_no_field() {
        for text in [
            r#"{"operator": "jane", "operator": "mallory"}"#,
            r#"{"channel": "SLACK", "success": false, "success": true}"#,
            r#"{"triage": {"branch": "REPLAY", "branch": "RESOLVE"}}"#,
        ] {
            assert_eq!(payload_tree(text), serde_json::Value::Null, "{text}");
            let (payload, _) = payload_of(text);
            let event = Event {
                id: 1,
                at: 1.0,
                kind: Stored::from("REPLAYED"),
                payload,
                unreadable: Vec::new(),
            };
            assert_eq!(event.payload_value(), serde_json::Value::Null, "{text}");
        }
        let text = r#"{"operator": "jane", "channels": ["EMAIL"]}"#;
        assert_eq!(payload_tree(text)["operator"], "jane");
    }

    #[test]
    fn channel_names_parse_in_any_case_trimmed() {
        for channel in Channel::ALL {
            assert_eq!(channel.as_str().parse::<Channel>(), Ok(channel));
            let json = serde_json::to_string(&channel).unwrap_or_default();
            assert_eq!(json, format!("\"{}\"", channel.as_str()));
        }
        for spelling in ["slack", " Slack", "SLACK\t", "\nsLaCk "] {
            assert_eq!(
                spelling.parse::<Channel>(),
                Ok(Channel::Slack),
                "{spelling:?}"
            );
        }
        for bad in ["SMS", "", "sla ck", "EMAILS"] {
            assert!(bad.parse::<Channel>().is_err(), "{bad:?}");
        }
        let parsed: Result<Channel, _> = serde_json::from_str("\" email\"");
        assert_eq!(parsed.ok(), Some(Channel::Email));
    }

    #[test]
    fn a_message_id_is_recognised_exactly_as_written() {
        let written = MessageId::new("n-1", 2, 13).to_string();
        assert!(MessageId::is(&written, "n-1", 2, 13));
        for other in [
            "<n-1.2.13@uns.local",
            "n-1.2.13@uns.local>",
            "<n-1.2.013@uns.local>",
            "<n-1.2.13@uns.localx>",
            "<n-1.2.14@uns.local>",
            "<n-12.2.13@uns.local>",
            "<n-1.2.1.3@uns.local>",
            "<n-1.+2.13@uns.local>",
        ] {
            assert!(!MessageId::is(other, "n-1", 2, 13), "{other}");
        }
    }

    #[test]
    fn the_notification_of_a_message_id_is_read_only_from_one_as_written() {
        for (id, cycle, attempt) in [("n-1", 2, 13), ("n-abc.def", 0, 0), ("n.1.2", -1, 7)] {
            let written = MessageId::new(id, cycle, attempt).to_string();
            assert_eq!(MessageId::notification_of(&written), Some(id), "{written}");
        }
        for other in [
            "<n-1.2.13@uns.local",
            "n-1.2.13@uns.local>",
            "n-1.2.13@uns.local",
            "<n-1.2.013@uns.local>",
            "<n-1.2.13@uns.localx>",
            "<n-1.2.13@xuns.local>",
            "<n-1.+2.13@uns.local>",
            "<n-1.2.13 @uns.local>",
            "<.2.13@uns.local>",
            "<n-1.13@uns.local>",
            "<n-1.2.99999999999999999999@uns.local>",
        ] {
            assert_eq!(MessageId::notification_of(other), None, "{other}");
        }
    }

    #[test]
    fn a_channel_list_is_a_set() {
        let set = ChannelSet::parse(&["slack", "SLACK", " email", "Slack"]);
        assert_eq!(
            set.as_ref().map(|s| s.joined(",")),
            Ok("EMAIL,SLACK".into())
        );
        let from_json: Result<ChannelSet, _> =
            serde_json::from_str(r#"["PAGERDUTY","email","EMAIL\t"]"#);
        assert_eq!(
            from_json.map(|s| s.joined(",")).ok().as_deref(),
            Some("EMAIL,PAGERDUTY")
        );
        let unknown: Result<ChannelSet, _> = serde_json::from_str(r#"["EMAIL","SMS"]"#);
        assert!(unknown.is_err());
    }

    #[test]
    fn message_ids_round_trip() {
        let id = MessageId::new("n-abc.def", 2, 7);
        assert_eq!(id.to_string(), "<n-abc.def.2.7@uns.local>");
        assert_eq!(MessageId::parse(&id.to_string()), Some(id));
        assert_eq!(
            MessageId::parse("n-1.1.3@uns.local").map(|m| m.attempt),
            Some(3)
        );
        for bad in [
            "garbage",
            "<n-1.x.1@uns.local>",
            "<n-1.1.1@other.test>",
            "<.1.1@uns.local>",
        ] {
            assert_eq!(MessageId::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn kinds_parse_as_people_type_them() {
        assert_eq!("lease-lost".parse::<Kind>(), Ok(Kind::LeaseLost));
        assert_eq!(Kind::from_stored("LEASE_LOST"), Some(Kind::LeaseLost));
        assert_eq!(Kind::from_stored("lease_lost"), None);
        assert!("PROVIDER_CALLBACK".parse::<Kind>().is_err());
    }
}
