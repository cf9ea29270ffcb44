//! The runtime's vocabulary: channels, statuses, event kinds and the stored rows.
//!
//! These names are the contract of DESIGN.md sections 2 and 3; the database, the API and
//! the CLI all spell them the same way.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A delivery channel. Serialised upper-case, as stored in `uns_notifications.channels`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
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
#[error("unknown channel {0:?}: expected EMAIL, SLACK or PAGERDUTY")]
pub struct UnknownChannel(pub String);

impl FromStr for Channel {
    type Err = UnknownChannel;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim().to_ascii_uppercase().as_str() {
            "EMAIL" => Ok(Channel::Email),
            "SLACK" => Ok(Channel::Slack),
            "PAGERDUTY" => Ok(Channel::Pagerduty),
            _ => Err(UnknownChannel(text.to_string())),
        }
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

/// Event kinds appended to `uns_events`.
pub mod kind {
    pub const SUBMITTED: &str = "SUBMITTED";
    pub const ATTEMPT_STARTED: &str = "ATTEMPT_STARTED";
    pub const CHANNEL_ATTEMPT_STARTED: &str = "CHANNEL_ATTEMPT_STARTED";
    pub const CHANNEL_ATTEMPT_RESULT: &str = "CHANNEL_ATTEMPT_RESULT";
    pub const LEASE_LOST: &str = "LEASE_LOST";
    pub const RETRY_SCHEDULED: &str = "RETRY_SCHEDULED";
    pub const DELIVERED: &str = "DELIVERED";
    pub const DEAD_LETTERED: &str = "DEAD_LETTERED";
    pub const DLQ_RESOLVED: &str = "DLQ_RESOLVED";
    pub const REPLAYED: &str = "REPLAYED";

    /// Every kind the runtime writes; anything else in a store is unexpected.
    pub const ALL: [&str; 10] = [
        SUBMITTED,
        ATTEMPT_STARTED,
        CHANNEL_ATTEMPT_STARTED,
        CHANNEL_ATTEMPT_RESULT,
        LEASE_LOST,
        RETRY_SCHEDULED,
        DELIVERED,
        DEAD_LETTERED,
        DLQ_RESOLVED,
        REPLAYED,
    ];
}

/// What the provider did with a channel call, as far as the adapter can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum ProviderOutcome {
    Accepted,
    Rejected,
    Unknown,
}

impl ProviderOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderOutcome::Accepted => "ACCEPTED",
            ProviderOutcome::Rejected => "REJECTED",
            ProviderOutcome::Unknown => "UNKNOWN",
        }
    }
}

/// One row of `uns_notifications`, as read back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Notification {
    pub id: String,
    pub status: String,
    pub dead_letter: bool,
    pub attempts: i64,
    pub cycle: i64,
    pub cycle_attempts: i64,
    pub max_attempts: i64,
    /// Kept as stored text parsed leniently: a store may hold names this build does not know.
    pub channels: Vec<String>,
    pub payload: serde_json::Value,
    pub idempotency_key: Option<String>,
    pub lease_token: Option<String>,
    pub lease_until: Option<f64>,
    pub next_attempt_at: f64,
    pub error_message: Option<String>,
    pub created_at: f64,
    pub updated_at: f64,
}

/// One row of `uns_events`. The payload is kept raw when it is not valid JSON, so that
/// triage can name the bad event instead of failing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub id: i64,
    pub at: f64,
    pub kind: String,
    pub payload: serde_json::Value,
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

    #[test]
    fn channel_names_round_trip() {
        for channel in Channel::ALL {
            assert_eq!(channel.as_str().parse::<Channel>(), Ok(channel));
            let json = serde_json::to_string(&channel).unwrap_or_default();
            assert_eq!(json, format!("\"{}\"", channel.as_str()));
        }
        assert_eq!("slack".parse::<Channel>(), Ok(Channel::Slack));
        assert!("SMS".parse::<Channel>().is_err());
    }
}
