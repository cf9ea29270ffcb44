//! Where the CLI reads and acts: one trait, a SQLite and an HTTP backend.

pub mod direct;
pub mod http;
pub mod page;
pub mod place;
pub mod selection;
mod walk;

pub use selection::{Events, Rows, Selection, Window};
pub use walk::{WindowStarts, postgres_reads};

use crate::api::{ActionRequest, ActionResponse, DlqPage, EventsResponse, NotificationDoc};
use crate::model::{Kind, Notification};
use crate::remediation::{Conflict, Refusal, Rejection};
use crate::runtime::engine::EngineError;
use crate::runtime::schema::OpenError;
use crate::triage::Verdict;

/// What can go wrong talking to a store, typed so each maps to one exit code.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{0} not found")]
    NotFound(String),
    /// Someone else changed the entry first.
    #[error("conflict: {0}")]
    Conflict(Conflict),
    /// The entry's history moved since the verdict the action was based on.
    #[error("stale: {0}")]
    Stale(Conflict),
    #[error("refused: {}", .0.why())]
    Refused(Refusal),
    #[error("{0}")]
    Invalid(String),
    #[error("authentication failed: {0}")]
    Auth(String),
    /// The database refused the credentials (a PostgreSQL store): not the API's key.
    #[error("authentication failed: {0}")]
    DatabaseAuth(String),
    /// What the command line named cannot be used as given (exit 2).
    #[error("{0}")]
    Usage(String),
    #[error("{0}")]
    Unavailable(String),
    #[error("{0}")]
    InvalidStore(String),
    #[error("{0}")]
    Other(String),
    /// A server's pages do not move forward (a page repeated under a fresh cursor, a
    /// cursor given twice): it would be paged for ever, so it is read no further.
    #[error("{0}")]
    Repeats(String),
    /// A reader asked a stream to stop early; not a failure.
    #[error("stopped")]
    Stopped,
}

pub type Result<T> = std::result::Result<T, StoreError>;

impl From<rusqlite::Error> for StoreError {
    fn from(err: rusqlite::Error) -> Self {
        StoreError::Other(format!("store error: {err}"))
    }
}

impl From<crate::db::DbError> for StoreError {
    fn from(err: crate::db::DbError) -> Self {
        use crate::db::DbError;
        match err {
            err if err.refused_credentials() => StoreError::DatabaseAuth(err.to_string()),
            err if err.unreachable() => {
                StoreError::Unavailable(format!("the database went away: {err}"))
            }
            // Kept nothing, and may well work in a moment (a lock another session held
            // past the bound, a deadlock, a serialization failure): asked again, not given
            // up on, where a caller waits ([`StoreError::Unavailable`]).
            // SQLite's file held by another process past the busy timeout as well.
            err if err.passing() && !err.may_have_committed() => {
                StoreError::Unavailable(format!("store error: {err}"))
            }
            DbError::Sqlite(err) => err.into(),
            err => StoreError::Other(format!("store error: {err}")),
        }
    }
}

impl From<OpenError> for StoreError {
    fn from(err: OpenError) -> Self {
        match err {
            OpenError::Sqlite { .. }
            | OpenError::NotWritable { .. }
            | OpenError::NoFolder { .. } => StoreError::Unavailable(err.to_string()),
            _ => StoreError::InvalidStore(err.to_string()),
        }
    }
}

impl From<crate::db::pg::OpenError> for StoreError {
    fn from(err: crate::db::pg::OpenError) -> Self {
        use crate::db::pg::OpenError;
        match err {
            err if err.refused_credentials() => StoreError::DatabaseAuth(err.to_string()),
            OpenError::Url { .. } => StoreError::Usage(err.to_string()),
            OpenError::Connect { .. }
            | OpenError::Database { .. }
            | OpenError::ReadOnly { .. }
            | OpenError::NoHostOfKind { .. }
            | OpenError::Pooled { .. }
            | OpenError::NotPermitted { .. } => StoreError::Unavailable(err.to_string()),
            _ => StoreError::InvalidStore(err.to_string()),
        }
    }
}

impl From<EngineError> for StoreError {
    fn from(err: EngineError) -> Self {
        match err {
            EngineError::Invalid(message) => StoreError::Invalid(message),
            EngineError::Db(err) => err.into(),
            EngineError::WriterGone(gone) => StoreError::Unavailable(gone.to_string()),
        }
    }
}

impl From<Rejection> for StoreError {
    fn from(rejection: Rejection) -> Self {
        match rejection {
            Rejection::NotFound(id) => StoreError::NotFound(format!("notification {id}")),
            Rejection::NotInDlq(conflict) => StoreError::Conflict(conflict),
            Rejection::Stale(conflict) => StoreError::Stale(conflict),
            Rejection::Refused(refusal) => StoreError::Refused(refusal),
            Rejection::Store(err) => err.into(),
        }
    }
}

/// One DLQ entry, triaged as it streamed past.
#[derive(Debug, Clone)]
pub struct Triaged {
    /// The row, with only what its message was: `payload` holds the subject and the
    /// email recipient (see [`Triaged::message`]), since nothing else a walk shows reads
    /// it and reading it whole costs more than the triage.
    pub row: Notification,
    pub verdict: Verdict,
    /// Values that could not be read: the row's, then each event's ("event N: ...").
    pub unreadable: Vec<String>,
}

impl Triaged {
    /// What the message was.
    pub fn message(&self) -> crate::model::payload::Message {
        crate::model::payload::Message::of(&self.row.payload)
    }
}

/// What receives each triaged entry.
pub type Visit<'a> = dyn FnMut(Triaged) -> Result<()> + Send + 'a;

/// `visit`, handed only the entries the selection's tests on a verdict keep (the reply
/// code): one rule, applied where each backend triages.
pub fn keeping<'a>(
    selection: &'a Selection,
    visit: &'a mut Visit<'_>,
) -> impl FnMut(Triaged) -> Result<()> + Send + 'a {
    move |entry| {
        if selection.keeps_verdict(&entry.verdict) {
            visit(entry)
        } else {
            Ok(())
        }
    }
}

/// One event as stored, borrowed from wherever it was read. It is what the DLQ page
/// writes for an event, so both backends hand a reader the same text.
#[derive(Debug, Clone, serde::Serialize)]
pub struct StoredEvent<'a> {
    pub id: i64,
    pub at: f64,
    pub kind: std::borrow::Cow<'a, str>,
    pub payload: std::borrow::Cow<'a, serde_json::value::RawValue>,
    /// What could not be read of it; its payload is then `{}` or the text as a string.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unreadable: Vec<String>,
}

impl<'a> StoredEvent<'a> {
    /// What a history is read from.
    pub fn observed(&self) -> crate::history::Observed<'_> {
        crate::history::Observed::from_text(self.id, self.at, &self.kind, self.payload.get())
            .with_unreadable(self.unreadable.first().map(String::as_str))
    }

    /// Reads [`crate::runtime::queries::EVENT_COLUMNS`] from the start of `row`.
    pub fn from_copy<S: crate::runtime::queries::Source + ?Sized>(row: &'a S) -> Self {
        let mut cells = crate::runtime::queries::Cells::new(row);
        let id = cells.integer(0, "id");
        let at = cells.required_real(1, "at");
        let kind = cells.text_ref(2, "kind");
        let payload = cells.payload_ref(3, "payload");
        Self {
            id,
            at,
            kind,
            payload,
            unreadable: cells.problems,
        }
    }
}

/// What [`Store::documents`] gives: the document of an id, or why it could not be read.
pub type Documents<'s> = dyn FnMut(&str) -> Result<NotificationDoc> + 's;

/// What receives each notification of a walk with its events, in id order.
pub type EntryVisit<'a> = dyn FnMut(Notification, &[StoredEvent<'_>]) -> Result<()> + Send + 'a;

/// What the cross-notification event search asks for.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EventQuery {
    /// Only these kinds (none: every kind).
    pub kinds: Vec<Kind>,
    pub selection: Selection,
    pub limit: usize,
    /// Only events after this id, oldest first (a cursor for following); without it,
    /// the newest first.
    pub after: Option<i64>,
}

impl EventQuery {
    /// The query string of `GET /api/v1/runtime/events`.
    pub fn query(&self) -> Vec<(&'static str, String)> {
        let mut pairs: Vec<(&'static str, String)> = self
            .kinds
            .iter()
            .map(|k| ("kind", k.as_str().to_string()))
            .collect();
        pairs.push(("limit", self.limit.to_string()));
        if let Some(after) = self.after {
            pairs.push(("after", after.to_string()));
        }
        pairs.extend(self.selection.query());
        pairs
    }
}

/// How a store is named to the operator: with its context when it came from one.
pub fn in_context(context: Option<&str>, place: &str) -> String {
    match context {
        Some(name) => format!("context {name} ({place})"),
        None => place.to_string(),
    }
}

pub trait Store {
    /// A short name for messages: the file path or the base URL.
    fn describe(&self) -> String;

    /// Why this store is no longer the one its name reaches: a SQLite file replaced or
    /// removed under the open connection, which goes on reading the old file for ever.
    /// None while it is, and for a store reached afresh at each request.
    fn replaced(&self) -> Option<String> {
        None
    }

    /// Who the store will record as acting for an action claimed by `claimed`, as a
    /// prompt names them ([`crate::model::payload::person`]).
    fn operator(&self, claimed: &str) -> Result<String>;

    fn notification(&self, id: &str) -> Result<NotificationDoc>;

    /// A reader of the documents of `ids`, asked for in the list's order (an id may be
    /// passed over): each answer is [`Store::notification`]'s. A backend where each costs
    /// a round trip asks for the next several at once.
    fn documents<'s>(&'s self, _ids: &'s [String]) -> Box<Documents<'s>> {
        Box::new(|id| self.notification(id))
    }

    /// Events across notifications (see [`EventQuery`]).
    fn events(&self, query: &EventQuery) -> Result<EventsResponse>;

    /// One page of the selected DLQ entries, ordered by id.
    fn dlq_page(
        &self,
        selection: &Selection,
        cursor: Option<&str>,
        limit: usize,
        include_events: bool,
    ) -> Result<DlqPage>;

    /// Every selected DLQ entry, triaged, in id order, streamed one at a time. `visit`
    /// may run on another thread than the caller's; an error from it stops the walk.
    fn each_triaged(&self, selection: &Selection, visit: &mut Visit<'_>) -> Result<()>;

    /// Every notification with a channel attempt started in `window`, in the DLQ or not,
    /// narrowed by the selection's channel and error text, in id order, with its events
    /// as stored, at least those `events` asks for (reconcile). Its row carries only the
    /// message's recipient.
    fn each_attempted(
        &self,
        selection: &Selection,
        window: Window,
        events: Events<'_>,
        visit: &mut EntryVisit<'_>,
    ) -> Result<()>;

    /// Every attempt started in `window`, by the index of kinds by time: the notifications
    /// that made one (all that [`Store::each_attempted`] may walk in it, before its
    /// selection narrows them) and when each started. None from a backend that cannot
    /// read them apart from the histories (the API).
    fn window_starts(&self, window: Window) -> Result<Option<WindowStarts>> {
        let _ = window;
        Ok(None)
    }

    /// Asks the providers' own records about the UNCERTAIN attempts of these entries
    /// (DESIGN §7), here, with `sources`, over the history the backend supplies.
    fn verify(
        &self,
        ids: &[String],
        sources: &crate::verify::Sources,
    ) -> Result<crate::verify::Asked>;

    /// Appends the answers of `asked` that are not CANNOT_TELL as VERIFIED events, each
    /// entry checked against the history as it stands by the recording transition and
    /// answered on its own (on a store: in batches; see
    /// [`crate::remediation::verified::record_each`]). API: posted with their evidence
    /// to a keyed route, one request per entry, which records them as read on the
    /// client.
    fn record_verified(
        &self,
        asked: &crate::verify::Asked,
        operator: &str,
        why: crate::remediation::verified::Why<'_>,
    ) -> Vec<std::result::Result<crate::remediation::verified::Written, (String, StoreError)>>;

    fn resolve(&self, id: &str, request: &ActionRequest) -> Result<ActionResponse>;

    /// Keeps an operator's note about the incident (`unsctl note`); it changes no entry.
    fn note(&self, request: &crate::api::NoteRequest) -> Result<crate::api::NoteRow>;

    /// The notes written in `[since, until)` (either end open), oldest first.
    fn notes(&self, since: Option<f64>, until: Option<f64>) -> Result<Vec<crate::api::NoteRow>>;

    fn replay(&self, id: &str, request: &ActionRequest) -> Result<ActionResponse>;

    /// The ids that start with `prefix` (DLQ entries only when `dlq_only`), in order, at
    /// most `limit`: how a typed prefix becomes an id.
    fn ids_with_prefix(&self, prefix: &str, dlq_only: bool, limit: usize) -> Result<Vec<String>>;

    /// [`Store::ids_with_prefix`] of each of `prefixes`, in their order, ending at the
    /// first that fails: one after another by default; a store across a network asks
    /// several at once, since each costs a round trip.
    fn ids_with_prefixes(
        &self,
        prefixes: &[&str],
        dlq_only: bool,
        limit: usize,
    ) -> Vec<Result<Vec<String>>> {
        through_first_failure(
            prefixes
                .iter()
                .map(|prefix| self.ids_with_prefix(prefix, dlq_only, limit)),
        )
    }

    /// Which store this is, the same over both backends
    /// ([`crate::runtime::queries::store_identity`]); None when it cannot say (an empty
    /// store, or a server too old to tell).
    fn identity(&self) -> Result<Option<String>>;

    /// Per step of `window`, the lease losses, reclaims, UNKNOWN outcomes, dead letters,
    /// replays, resolves and deliveries, and the last of each (DESIGN §10).
    fn pulse(&self, window: crate::pulse::Window) -> Result<crate::pulse::Pulse>;

    /// The runtime's numbers now, and its claims, lease losses, reclaims and provider
    /// calls over the `window_seconds` before `until` (default: now) (`doctor`,
    /// `reconcile`, `GET /api/v1/runtime/stats`).
    fn health(
        &self,
        window_seconds: f64,
        until: Option<f64>,
    ) -> Result<crate::runtime::queries::Health>;

    /// Now, by the clock the store's events are stamped by: the database's on
    /// PostgreSQL, the server's over the API, this machine's for a file. What "now" and
    /// "ago" are told by wherever they meet the store's times.
    fn now(&self) -> Result<f64> {
        Ok(self.health(RECENT_NOW_WINDOW, None)?.stats.at)
    }
}

/// The shortest window a store's numbers are read over when only its clock is wanted.
const RECENT_NOW_WINDOW: f64 = 60.0;

/// The rule every reader of pages keeps, the commands and the screen alike: each page
/// starts past the last id of the page before, and no cursor comes twice. A server that
/// breaks it repeats itself, and would be paged for ever under fresh cursors.
#[derive(Debug, Default)]
pub struct Onward {
    last: Option<String>,
    cursors: std::collections::HashSet<String>,
}

impl Onward {
    /// A page from `place` whose ids run from `first` to `last` (none: an empty page).
    pub fn page(&mut self, place: &str, first: Option<&str>, last: Option<&str>) -> Result<()> {
        if let (Some(before), Some(first)) = (&self.last, first)
            && first <= before.as_str()
        {
            return Err(StoreError::Repeats(format!(
                "{place} repeats itself: a page starts at id {}, not past the last id of the page before ({}); it was read no further",
                crate::render::sanitize::clean(first),
                crate::render::sanitize::clean(before)
            )));
        }
        if let Some(last) = last {
            self.last = Some(last.to_string());
        }
        Ok(())
    }

    /// The cursor `place` gave for the next page.
    pub fn cursor(&mut self, place: &str, next: &str) -> Result<()> {
        if !self.cursors.insert(next.to_string()) {
            return Err(StoreError::Repeats(format!(
                "{place} repeats itself: it gave a page cursor it had given before, which no UNS API does; it was read no further"
            )));
        }
        Ok(())
    }
}

/// The opaque DLQ cursor: where the previous page ended, by id and then row, so that
/// even a damaged store holding one id twice pages through every row once.
pub fn encode_cursor(rowid: i64, last_id: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("after:{rowid}:{last_id}"))
}

pub fn decode_cursor(cursor: &str) -> Result<(i64, String)> {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(cursor)
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .and_then(|text| {
            let (rowid, id) = text.strip_prefix("after:")?.split_once(':')?;
            Some((rowid.parse().ok()?, id.to_string()))
        })
        .ok_or_else(|| StoreError::Invalid(format!("invalid cursor {cursor:?}")))
}

/// `answers` in order, up to and with the first that failed; none after it is taken, so
/// a lazy list asks nothing more once one fails.
pub(crate) fn through_first_failure<T>(
    answers: impl IntoIterator<Item = Result<T>>,
) -> Vec<Result<T>> {
    let mut taken = Vec::new();
    for answer in answers {
        let failed = answer.is_err();
        taken.push(answer);
        if failed {
            break;
        }
    }
    taken
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store held by another for longer than a statement waits kept nothing of the
    /// statement and may well take it in a moment: it is unavailable (asked again where
    /// a caller waits, a 503 from the API), not a failure; a statement that cannot run
    /// is a failure.
    #[test]
    fn a_store_held_by_another_is_unavailable_and_a_broken_statement_is_not() {
        let (held, broken) = crate::db::held_and_broken();
        assert!(
            matches!(StoreError::from(held), StoreError::Unavailable(_)),
            "held"
        );
        assert!(
            matches!(StoreError::from(broken), StoreError::Other(_)),
            "broken"
        );
    }
}
