//! The SQLite backend, and the read queries the API server shares with it.
//!
//! Read commands open the file read-only, so a triage cannot write even by accident.
//! Resolve and replay go through [`act`], which the server calls too.

use super::{Entry, Result, Store, StoreError, decode_cursor, encode_cursor};
use crate::api::{
    ActionRequest, ActionResponse, DlqEntry, DlqPage, EventRow, EventsResponse, NotificationDoc,
};
use crate::clock::{Clock, SystemClock};
use crate::engine::{self, Audit, EngineError};
use crate::model::{Channel, Event, Notification};
use crate::runtime::schema::{self, OpenError, OpenMode};
use crate::triage;
use rusqlite::{Connection, OptionalExtension, Row, params};
use std::path::{Path, PathBuf};

const ROW_COLUMNS: &str = "n.id, n.status, n.dead_letter, n.attempts, n.cycle, n.cycle_attempts, \
    n.max_attempts, n.channels, n.payload, n.idempotency_key, n.lease_token, n.lease_until, \
    n.next_attempt_at, n.error_message, n.created_at, n.updated_at";
const ROW_WIDTH: usize = 16;

impl From<rusqlite::Error> for StoreError {
    fn from(err: rusqlite::Error) -> Self {
        StoreError::Other(format!("store error: {err}"))
    }
}

impl From<OpenError> for StoreError {
    fn from(err: OpenError) -> Self {
        match err {
            OpenError::Missing { .. } => StoreError::InvalidStore(err.to_string()),
            OpenError::Sqlite { .. } => StoreError::Unavailable(err.to_string()),
            _ => StoreError::InvalidStore(err.to_string()),
        }
    }
}

impl From<EngineError> for StoreError {
    fn from(err: EngineError) -> Self {
        match err {
            EngineError::NotFound(id) => StoreError::NotFound(format!("notification {id}")),
            EngineError::Conflict(conflict) => StoreError::Conflict(conflict),
            EngineError::Invalid(message) => StoreError::Invalid(message),
            EngineError::Sqlite(err) => err.into(),
            EngineError::WriterGone(gone) => StoreError::Unavailable(gone.to_string()),
        }
    }
}

/// Parses stored JSON, keeping unparseable text as a string so triage can name it.
fn json_or_raw(text: String) -> serde_json::Value {
    serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text))
}

fn notification_from(row: &Row) -> rusqlite::Result<Notification> {
    let channels: String = row.get(7)?;
    Ok(Notification {
        id: row.get(0)?,
        status: row.get(1)?,
        dead_letter: row.get::<_, i64>(2)? != 0,
        attempts: row.get(3)?,
        cycle: row.get(4)?,
        cycle_attempts: row.get(5)?,
        max_attempts: row.get(6)?,
        channels: serde_json::from_str(&channels).unwrap_or_default(),
        payload: json_or_raw(row.get(8)?),
        idempotency_key: row.get(9)?,
        lease_token: row.get(10)?,
        lease_until: row.get(11)?,
        next_attempt_at: row.get(12)?,
        error_message: row.get(13)?,
        created_at: row.get(14)?,
        updated_at: row.get(15)?,
    })
}

fn event_from(row: &Row, first: usize) -> rusqlite::Result<Event> {
    Ok(Event {
        id: row.get(first)?,
        at: row.get(first + 1)?,
        kind: row.get(first + 2)?,
        payload: json_or_raw(row.get(first + 3)?),
    })
}

pub fn read_notification(conn: &Connection, id: &str) -> Result<Option<Notification>> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {ROW_COLUMNS} FROM uns_notifications n WHERE n.id = ?1"
        ))?
        .query_row([id], notification_from)
        .optional()?)
}

pub fn read_events(conn: &Connection, id: &str) -> Result<Vec<Event>> {
    let mut stmt = conn.prepare_cached(
        "SELECT id, at, kind, payload FROM uns_events WHERE notification_id = ?1 ORDER BY id",
    )?;
    let events = stmt
        .query_map([id], |row| event_from(row, 0))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(events)
}

pub fn notification_doc(conn: &Connection, id: &str) -> Result<NotificationDoc> {
    let row = read_notification(conn, id)?
        .ok_or_else(|| StoreError::NotFound(format!("notification {id}")))?;
    Ok(NotificationDoc {
        events: read_events(conn, id)?,
        row,
    })
}

/// Events of `kinds` across notifications, newest first, joined with their row.
pub fn search_events(conn: &Connection, kinds: &[String], limit: usize) -> Result<EventsResponse> {
    let placeholders = vec!["?"; kinds.len()].join(", ");
    let filter = if kinds.is_empty() {
        String::new()
    } else {
        format!("WHERE e.kind IN ({placeholders})")
    };
    let sql = format!(
        "SELECT e.id, e.notification_id, e.at, e.kind, e.payload, n.status, n.dead_letter, n.attempts, n.cycle
         FROM uns_events e JOIN uns_notifications n ON n.id = e.notification_id
         {filter} ORDER BY e.at DESC, e.id DESC LIMIT {limit}"
    );
    let mut stmt = conn.prepare(&sql)?;
    let events = stmt
        .query_map(rusqlite::params_from_iter(kinds.iter()), |row| {
            Ok(EventRow {
                id: row.get(0)?,
                notification_id: row.get(1)?,
                at: row.get(2)?,
                kind: row.get(3)?,
                payload: json_or_raw(row.get(4)?),
                status: row.get(5)?,
                dead_letter: row.get::<_, i64>(6)? != 0,
                attempts: row.get(7)?,
                cycle: row.get(8)?,
            })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(EventsResponse { events })
}

/// One page of the DLQ after `cursor`, by id.
pub fn dlq_page(
    conn: &Connection,
    cursor: Option<&str>,
    limit: usize,
    include_events: bool,
) -> Result<DlqPage> {
    let after = cursor.map(decode_cursor).transpose()?.unwrap_or_default();
    let limit = limit.clamp(1, 1000);
    let mut entries = Vec::with_capacity(limit);
    if include_events {
        // One ordered join instead of a query per entry.
        let sql = format!(
            "WITH page AS (SELECT id FROM uns_notifications WHERE dead_letter = 1 AND id > ?1 ORDER BY id LIMIT ?2)
             SELECT {ROW_COLUMNS}, e.id, e.at, e.kind, e.payload
             FROM page JOIN uns_notifications n ON n.id = page.id
             LEFT JOIN uns_events e ON e.notification_id = n.id
             ORDER BY n.id, e.id"
        );
        let mut stmt = conn.prepare_cached(&sql)?;
        let mut rows = stmt.query(params![after, limit as i64])?;
        while let Some(row) = rows.next()? {
            let id: String = row.get(0)?;
            if entries
                .last()
                .map(|e: &DlqEntry| e.row.id != id)
                .unwrap_or(true)
            {
                entries.push(DlqEntry {
                    row: notification_from(row)?,
                    events: Some(Vec::new()),
                });
            }
            if let (Some(entry), Some(_)) =
                (entries.last_mut(), row.get::<_, Option<i64>>(ROW_WIDTH)?)
            {
                entry
                    .events
                    .get_or_insert_with(Vec::new)
                    .push(event_from(row, ROW_WIDTH)?);
            }
        }
    } else {
        let sql = format!(
            "SELECT {ROW_COLUMNS} FROM uns_notifications n WHERE n.dead_letter = 1 AND n.id > ?1 ORDER BY n.id LIMIT ?2"
        );
        let mut stmt = conn.prepare_cached(&sql)?;
        let rows = stmt.query_map(params![after, limit as i64], notification_from)?;
        for row in rows {
            entries.push(DlqEntry {
                row: row?,
                events: None,
            });
        }
    }
    let next_cursor = (entries.len() == limit)
        .then(|| entries.last().map(|e| encode_cursor(&e.row.id)))
        .flatten();
    Ok(DlqPage {
        entries,
        next_cursor,
    })
}

/// Streams every DLQ entry with its events: one ordered join, one entry in memory.
pub fn each_dlq_entry(conn: &Connection, visit: &mut dyn FnMut(Entry) -> Result<()>) -> Result<()> {
    let sql = format!(
        "SELECT {ROW_COLUMNS}, e.id, e.at, e.kind, e.payload
         FROM uns_notifications n LEFT JOIN uns_events e ON e.notification_id = n.id
         WHERE n.dead_letter = 1 ORDER BY n.id, e.id"
    );
    let mut stmt = conn.prepare(&sql)?;
    let mut rows = stmt.query([])?;
    let mut current: Option<Entry> = None;
    while let Some(row) = rows.next()? {
        let id: String = row.get(0)?;
        if current.as_ref().map(|(n, _)| n.id != id).unwrap_or(true) {
            if let Some(done) = current.take() {
                visit(done)?;
            }
            current = Some((notification_from(row)?, Vec::new()));
        }
        if let (Some((_, events)), Some(_)) =
            (current.as_mut(), row.get::<_, Option<i64>>(ROW_WIDTH)?)
        {
            events.push(event_from(row, ROW_WIDTH)?);
        }
    }
    if let Some(done) = current {
        visit(done)?;
    }
    Ok(())
}

/// Resolve or replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Resolve,
    Replay,
}

/// Triage the entry afresh (unless the caller sends the verdict it acted on), then run the
/// engine's single transition, refusing it if the history moved in between.
pub fn act(
    conn: &Connection,
    now: f64,
    id: &str,
    action: Action,
    request: &ActionRequest,
    default_operator: &str,
) -> Result<ActionResponse> {
    let doc = notification_doc(conn, id)?;
    let verdict = triage::triage(&doc.row, &doc.events);
    let channels = crate::remediation::check(&verdict, action, request)
        .map_err(|refusal| StoreError::Refused(refusal.to_string()))?;
    let triage_value = request
        .triage
        .clone()
        .unwrap_or_else(|| audit_summary(&verdict));
    let audit = Audit {
        operator: request
            .operator
            .clone()
            .filter(|o| !o.trim().is_empty())
            .unwrap_or_else(|| default_operator.to_string()),
        reason: request.reason.clone(),
        ticket: request.ticket.clone(),
        attestation: request.attestation.clone(),
        forced: request.force,
        triage: triage_value,
        expected_last_event_id: request.expected_last_event_id.or(verdict.last_event_id),
    };
    match action {
        Action::Resolve => {
            let event_id = engine::resolve(conn, now, id, &audit)?;
            Ok(ActionResponse {
                id: id.to_string(),
                action: "resolved".into(),
                event_id,
                status: "RESOLVED".into(),
                cycle: doc.row.cycle,
                channels: Vec::new(),
            })
        }
        Action::Replay => {
            let channels = channels
                .iter()
                .map(|name| {
                    name.parse::<Channel>()
                        .map_err(|err| StoreError::Invalid(err.to_string()))
                })
                .collect::<Result<Vec<_>>>()?;
            let event_id = engine::replay(conn, now, id, &channels, &audit)?;
            Ok(ActionResponse {
                id: id.to_string(),
                action: "replayed".into(),
                event_id,
                status: "PENDING".into(),
                cycle: doc.row.cycle + 1,
                channels: channels.iter().map(|c| c.to_string()).collect(),
            })
        }
    }
}

/// What an audit event keeps of a verdict: branch, channel states, evidence, last event.
pub fn audit_summary(verdict: &triage::Verdict) -> serde_json::Value {
    serde_json::json!({
        "branch": verdict.branch,
        "lease_lost": verdict.lease_lost,
        "last_event_id": verdict.last_event_id,
        "channels": verdict.channels.iter().map(|c| serde_json::json!({
            "channel": c.channel, "state": c.state, "evidence": c.evidence,
        })).collect::<Vec<_>>(),
    })
}

/// A store file opened directly.
pub struct SqliteStore {
    path: PathBuf,
    conn: Connection,
    clock: Box<dyn Clock>,
    operator: String,
}

impl SqliteStore {
    /// Read-only: every read command uses this.
    pub fn open_read_only(path: &Path) -> Result<Self> {
        Self::open(path, OpenMode::ReadOnly)
    }

    /// For resolve and replay, alongside a running worker.
    pub fn open_read_write(path: &Path) -> Result<Self> {
        Self::open(path, OpenMode::ReadWrite)
    }

    fn open(path: &Path, mode: OpenMode) -> Result<Self> {
        Ok(Self {
            path: path.to_path_buf(),
            conn: schema::open(path, mode)?,
            clock: Box::new(SystemClock),
            operator: "unknown".into(),
        })
    }

    pub fn with_operator(mut self, operator: &str) -> Self {
        self.operator = operator.to_string();
        self
    }

    pub fn connection(&self) -> &Connection {
        &self.conn
    }
}

impl Store for SqliteStore {
    fn describe(&self) -> String {
        self.path.display().to_string()
    }

    fn notification(&self, id: &str) -> Result<NotificationDoc> {
        notification_doc(&self.conn, id)
    }

    fn events(&self, kinds: &[String], limit: usize) -> Result<EventsResponse> {
        search_events(&self.conn, kinds, limit)
    }

    fn dlq_page(
        &self,
        cursor: Option<&str>,
        limit: usize,
        include_events: bool,
    ) -> Result<DlqPage> {
        dlq_page(&self.conn, cursor, limit, include_events)
    }

    fn each_dlq_entry(&self, visit: &mut dyn FnMut(Entry) -> Result<()>) -> Result<()> {
        each_dlq_entry(&self.conn, visit)
    }

    fn resolve(&self, id: &str, request: &ActionRequest) -> Result<ActionResponse> {
        act(
            &self.conn,
            self.clock.now(),
            id,
            Action::Resolve,
            request,
            &self.operator,
        )
    }

    fn replay(&self, id: &str, request: &ActionRequest) -> Result<ActionResponse> {
        act(
            &self.conn,
            self.clock.now(),
            id,
            Action::Replay,
            request,
            &self.operator,
        )
    }
}
