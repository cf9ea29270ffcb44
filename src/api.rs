//! The HTTP API's request and response bodies, shared by the server and the client so
//! the two cannot drift apart.

use crate::engine::{Conflict, Submitted};
use crate::model::{Event, Notification};
use serde::{Deserialize, Serialize};

pub const NOTIFICATIONS: &str = "/api/v1/notifications";
pub const RUNTIME_NOTIFICATION: &str = "/api/v1/runtime/notifications";
pub const RUNTIME_EVENTS: &str = "/api/v1/runtime/events";
pub const DLQ: &str = "/api/v1/dlq";
pub const HEALTHZ: &str = "/healthz";

/// `GET /api/v1/runtime/notifications/{id}`: the row's fields plus its events.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NotificationDoc {
    #[serde(flatten)]
    pub row: Notification,
    pub events: Vec<Event>,
}

/// One row of the cross-notification event search, joined with its notification.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventRow {
    pub id: i64,
    pub notification_id: String,
    pub at: f64,
    pub kind: String,
    pub payload: serde_json::Value,
    pub status: String,
    pub dead_letter: bool,
    pub attempts: i64,
    pub cycle: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventsResponse {
    pub events: Vec<EventRow>,
}

/// One DLQ entry; `events` only with `include=events`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DlqEntry {
    #[serde(flatten)]
    pub row: Notification,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events: Option<Vec<Event>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DlqPage {
    pub entries: Vec<DlqEntry>,
    /// Opaque; absent on the last page.
    pub next_cursor: Option<String>,
}

/// `POST /api/v1/notifications`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubmitRequest {
    pub channels: Vec<String>,
    #[serde(default)]
    pub recipient: Option<String>,
    #[serde(default)]
    pub subject: Option<String>,
    #[serde(default)]
    pub body: Option<String>,
    #[serde(default)]
    pub idempotency_key: Option<String>,
    #[serde(default)]
    pub max_attempts: Option<i64>,
}

pub type SubmitResponse = Submitted;

/// The optional body of resolve (`DELETE /api/v1/dlq/{id}`) and replay.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActionRequest {
    #[serde(default)]
    pub operator: Option<String>,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub ticket: Option<String>,
    #[serde(default)]
    pub attestation: Option<String>,
    /// Replay only; default: the channels triage did not find DELIVERED.
    #[serde(default)]
    pub channels: Option<Vec<String>>,
    #[serde(default)]
    pub force: bool,
    /// Refuse as stale unless this is still the entry's newest event.
    #[serde(default)]
    pub expected_last_event_id: Option<i64>,
    /// The verdict the caller acted on; the server triages afresh when absent.
    #[serde(default)]
    pub triage: Option<serde_json::Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActionResponse {
    pub id: String,
    /// "resolved" or "replayed".
    pub action: String,
    /// The DLQ_RESOLVED or REPLAYED event.
    pub event_id: i64,
    pub status: String,
    pub cycle: i64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub channels: Vec<String>,
}

/// Every error answer: `{"error": "..."}`, plus the row's state on a conflict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conflict: Option<Conflict>,
}
