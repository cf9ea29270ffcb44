//! The HTTP API's request and response bodies, shared by the server and the client so
//! the two cannot drift apart.

use crate::model::{ChannelSet, Event, Notification};
use crate::remediation::{Conflict, Refusal};
use crate::runtime::engine::Submitted;
use serde::{Deserialize, Serialize};

/// A note (`POST /api/v1/runtime/notes`) and one as stored.
pub use crate::model::NoteRow;
/// The answer to resolve and replay.
pub use crate::remediation::Done as ActionResponse;
/// The body of resolve (`DELETE /api/v1/dlq/{id}`) and replay.
pub use crate::remediation::Request as ActionRequest;
pub use crate::remediation::note::NoteRequest;

pub const NOTIFICATIONS: &str = "/api/v1/notifications";
pub const RUNTIME_NOTIFICATION: &str = "/api/v1/runtime/notifications";
pub const RUNTIME_EVENTS: &str = "/api/v1/runtime/events";
pub const DLQ: &str = "/api/v1/dlq";
pub const HEALTHZ: &str = "/healthz";
pub const METRICS: &str = "/metrics";
pub const RUNTIME_STATS: &str = "/api/v1/runtime/stats";
pub const WHOAMI: &str = "/api/v1/whoami";
/// Notifications with a channel attempt in a window, with their events (reconcile).
pub const RUNTIME_RECONCILE: &str = "/api/v1/runtime/reconcile";
/// `GET`: the pulse of DESIGN §10 (`since`, `until`, `step`, in unix seconds).
pub const RUNTIME_PULSE: &str = "/api/v1/runtime/pulse";
/// `POST`: an operator's note ([`NoteRequest`]); `GET`: the notes (`since`, `until`).
pub const RUNTIME_NOTES: &str = "/api/v1/runtime/notes";

/// `url` without a `user:password@` part, for anything printed.
pub fn without_userinfo(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
            let (authority, tail) = rest.split_at(authority_end);
            match authority.rsplit_once('@') {
                Some((_, host)) => format!("{scheme}://{host}{tail}"),
                None => url.to_string(),
            }
        }
        None => url.to_string(),
    }
}

/// What `/healthz` and `/api/v1/whoami` call the service, so a client can tell a UNS API
/// from whatever else answers at a URL.
pub const SERVICE: &str = "uns-runtime";

/// `GET /api/v1/whoami`: who the server records for the key presented.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WhoAmI {
    pub operator: String,
    pub service: String,
}

/// The response header of a DLQ page that carries `next_cursor` too, so that a client
/// can ask for the next page before it has read this one.
pub const NEXT_CURSOR: &str = "uns-next-cursor";

/// `GET /api/v1/runtime/notifications/{id}`: the row's fields plus its events.
pub use crate::model::NotificationDoc;

/// `GET /api/v1/runtime/notifications?id_prefix=P[&dlq=true][&limit=N]`: the ids that
/// start with P, in order.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IdsResponse {
    pub ids: Vec<String>,
}

/// One row of the cross-notification event search, joined with its notification.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EventRow {
    pub id: i64,
    pub notification_id: String,
    pub at: f64,
    pub kind: String,
    pub payload: crate::model::Payload,
    pub status: String,
    pub dead_letter: bool,
    pub attempts: i64,
    pub cycle: i64,
    /// Columns that could not be read, each "column: why".
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unreadable: Vec<String>,
}

impl EventRow {
    /// The event itself, without its notification's columns.
    pub fn event(&self) -> crate::model::Event {
        crate::model::Event {
            id: self.id,
            at: self.at,
            kind: crate::model::Stored::read(&self.kind),
            payload: self.payload.clone(),
            unreadable: self.unreadable.clone(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EventsResponse {
    pub events: Vec<EventRow>,
}

/// The notes of a window, oldest first (`GET /api/v1/runtime/notes`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct NotesResponse {
    pub notes: Vec<NoteRow>,
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

/// A DLQ page read in place: the events borrow from the response's bytes, since the
/// HTTP backend's triage reads a million of them.
#[derive(Debug, Deserialize)]
pub struct DlqPageView<'a> {
    #[serde(borrow)]
    pub entries: Vec<DlqEntryView<'a>>,
    pub next_cursor: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct DlqEntryView<'a> {
    #[serde(flatten)]
    pub row: Notification,
    #[serde(borrow, default)]
    pub events: Option<Vec<EventView<'a>>>,
}

/// [`Event`], borrowed.
#[derive(Debug, Deserialize)]
pub struct EventView<'a> {
    pub id: i64,
    pub at: f64,
    #[serde(borrow)]
    pub kind: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    pub payload: &'a serde_json::value::RawValue,
    #[serde(default)]
    pub unreadable: Vec<String>,
}

/// `POST /api/v1/runtime/notifications/{id}/verify`: the server asks the providers'
/// records it is configured with; with `record`, it appends the answers as VERIFIED
/// events. The answers are always the server's own: a client sends none.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VerifyRequest {
    #[serde(default)]
    pub record: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ticket: Option<String>,
    /// Who the client says is acting; the server records the key's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator: Option<String>,
}

/// `POST /api/v1/runtime/notifications/{id}/verified`: answers read from the providers'
/// records on the client, each with its source and evidence.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VerifiedRequest {
    pub findings: Vec<crate::remediation::verified::Verified>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ticket: Option<String>,
    /// Who the client says is acting; the server records the key's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator: Option<String>,
    /// The front end recording, when not the command line (`tui`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<crate::model::payload::Via>,
}

/// An entry verify had nothing to ask about, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Skipped {
    pub id: String,
    pub reason: String,
}

/// The answer to a verify request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VerifyResponse {
    pub answers: Vec<crate::verify::Answer>,
    pub summary: std::collections::BTreeMap<crate::verify::Delivery, usize>,
    /// The records this server was given that could not be read, and why: no answer
    /// rests on them.
    #[serde(default)]
    pub unread: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<Skipped>,
    /// With `record`: what was written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorded: Option<crate::remediation::verified::Written>,
}

/// `POST /api/v1/notifications`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubmitRequest {
    pub channels: ChannelSet,
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

/// What kind of error an answer is, so a client never has to read the message text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    Invalid,
    Unauthorized,
    NotFound,
    /// Someone else changed the entry first.
    Conflict,
    /// The entry's history moved since the verdict the request was based on.
    Stale,
    /// A guardrail refused.
    Refused,
    TooLarge,
    Timeout,
    /// The server is at its connection limit.
    Unavailable,
    Internal,
}

/// Every error answer: `{"error": "..."}`, its kind, plus the row's state on a conflict
/// and the guardrail on a refusal.
#[cfg(test)]
mod tests {
    #[test]
    fn credentials_never_reach_the_screen() {
        assert_eq!(
            super::without_userinfo("https://ops:s3cret@uns.internal:8443/base?x=1"),
            "https://uns.internal:8443/base?x=1"
        );
        assert_eq!(
            super::without_userinfo("http://host/a@b"),
            "http://host/a@b"
        );
        assert_eq!(super::without_userinfo("not a url"), "not a url");
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<ErrorKind>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conflict: Option<Conflict>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<Refusal>,
}
