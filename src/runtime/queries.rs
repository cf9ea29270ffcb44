//! Reading rows back, tolerantly: a value that cannot be read (a BLOB where text belongs,
//! invalid UTF-8, text in a number column, a NULL) is named on its own row, never fatal,
//! so one bad row cannot hide the others.

use crate::model::{Event, Notification, Stored};
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OptionalExtension, Row};

/// The columns of `uns_notifications` as [`notification`] reads them, from alias `n`.
pub const NOTIFICATION_COLUMNS: &str = "n.rowid, n.id, n.status, n.dead_letter, n.attempts, \
    n.cycle, n.cycle_attempts, n.max_attempts, n.channels, n.payload, n.idempotency_key, \
    n.lease_token, n.lease_until, n.next_attempt_at, n.error_message, n.created_at, n.updated_at";
/// How many columns [`NOTIFICATION_COLUMNS`] holds.
pub const NOTIFICATION_WIDTH: usize = 17;
/// The columns of `uns_events` as [`event`] reads them, from alias `e`.
pub const EVENT_COLUMNS: &str = "e.id, e.at, e.kind, e.payload";

/// Longest stretch of a bad value quoted in a note.
const QUOTE: usize = 40;

/// Where cells come from: a statement's current row, or a copy of one.
pub trait Source {
    fn cell(&self, index: usize) -> rusqlite::Result<ValueRef<'_>>;
}

impl Source for Row<'_> {
    fn cell(&self, index: usize) -> rusqlite::Result<ValueRef<'_>> {
        self.get_ref(index)
    }
}

/// Rows copied out of a statement into one buffer, so that another thread can decode
/// them while the statement steps on. Cleared and refilled, the buffer is reused.
#[derive(Debug, Default)]
pub struct Copies {
    bytes: Vec<u8>,
    cells: Vec<Copied>,
}

#[derive(Debug, Clone, Copy)]
enum Copied {
    Null,
    Integer(i64),
    Real(f64),
    Text(usize, usize),
    Blob(usize, usize),
}

impl Copies {
    /// Appends `columns` of `row`; returns where the copy starts, for [`Copies::row`].
    pub fn push(&mut self, row: &Row, columns: std::ops::Range<usize>) -> rusqlite::Result<usize> {
        let start = self.cells.len();
        for index in columns {
            let cell = match row.get_ref(index)? {
                ValueRef::Null => Copied::Null,
                ValueRef::Integer(n) => Copied::Integer(n),
                ValueRef::Real(x) => Copied::Real(x),
                ValueRef::Text(bytes) => {
                    self.bytes.extend_from_slice(bytes);
                    Copied::Text(self.bytes.len() - bytes.len(), self.bytes.len())
                }
                ValueRef::Blob(bytes) => {
                    self.bytes.extend_from_slice(bytes);
                    Copied::Blob(self.bytes.len() - bytes.len(), self.bytes.len())
                }
            };
            self.cells.push(cell);
        }
        Ok(start)
    }

    /// The copy that starts at `start`, its first column at index 0.
    pub fn row(&self, start: usize) -> CopiedRow<'_> {
        CopiedRow {
            copies: self,
            start,
        }
    }

    pub fn clear(&mut self) {
        self.bytes.clear();
        self.cells.clear();
    }

    /// Bytes held, to bound a batch.
    pub fn size(&self) -> usize {
        self.bytes.len() + self.cells.len() * std::mem::size_of::<Copied>()
    }
}

/// One copied row, read through [`Cells`] like the statement's own.
#[derive(Clone, Copy)]
pub struct CopiedRow<'a> {
    copies: &'a Copies,
    start: usize,
}

impl Source for CopiedRow<'_> {
    fn cell(&self, index: usize) -> rusqlite::Result<ValueRef<'_>> {
        let cell = self
            .copies
            .cells
            .get(self.start + index)
            .ok_or_else(|| rusqlite::Error::InvalidColumnIndex(index))?;
        let bytes = |from: usize, to: usize| self.copies.bytes.get(from..to).unwrap_or_default();
        Ok(match *cell {
            Copied::Null => ValueRef::Null,
            Copied::Integer(n) => ValueRef::Integer(n),
            Copied::Real(x) => ValueRef::Real(x),
            Copied::Text(from, to) => ValueRef::Text(bytes(from, to)),
            Copied::Blob(from, to) => ValueRef::Blob(bytes(from, to)),
        })
    }
}

/// One row's cells, read leniently; what could not be read is collected.
pub struct Cells<'r, S: Source + ?Sized> {
    row: &'r S,
    pub problems: Vec<String>,
}

fn quote(text: &str) -> String {
    let mut quoted: String = text.chars().take(QUOTE).collect();
    if quoted.len() < text.len() {
        quoted.push('…');
    }
    format!("{quoted:?}")
}

impl<'r, S: Source + ?Sized> Cells<'r, S> {
    pub fn new(row: &'r S) -> Self {
        Self {
            row,
            problems: Vec::new(),
        }
    }

    fn value(&mut self, index: usize, column: &str) -> Option<ValueRef<'r>> {
        match self.row.cell(index) {
            Ok(value) => Some(value),
            Err(err) => {
                self.problems.push(format!("{column}: {err}"));
                None
            }
        }
    }

    /// Text, or `None` for NULL. Invalid UTF-8 and BLOBs are decoded lossily and named.
    pub fn text(&mut self, index: usize, column: &str) -> Option<String> {
        match self.value(index, column)? {
            ValueRef::Null => None,
            ValueRef::Text(bytes) => Some(match std::str::from_utf8(bytes) {
                Ok(text) => text.to_string(),
                Err(_) => {
                    self.problems
                        .push(format!("{column}: not valid UTF-8 ({} bytes)", bytes.len()));
                    String::from_utf8_lossy(bytes).into_owned()
                }
            }),
            ValueRef::Blob(bytes) => {
                self.problems.push(format!(
                    "{column}: a BLOB of {} bytes, not text",
                    bytes.len()
                ));
                Some(String::from_utf8_lossy(bytes).into_owned())
            }
            ValueRef::Integer(n) => Some(n.to_string()),
            ValueRef::Real(x) => Some(x.to_string()),
        }
    }

    /// Text borrowed from the row when it is valid UTF-8 (no copy), as [`Cells::text`]
    /// otherwise; empty and named when NULL.
    pub fn text_ref(&mut self, index: usize, column: &str) -> std::borrow::Cow<'r, str> {
        match self.value(index, column) {
            Some(ValueRef::Text(bytes)) => match std::str::from_utf8(bytes) {
                Ok(text) => std::borrow::Cow::Borrowed(text),
                Err(_) => {
                    self.problems
                        .push(format!("{column}: not valid UTF-8 ({} bytes)", bytes.len()));
                    std::borrow::Cow::Owned(String::from_utf8_lossy(bytes).into_owned())
                }
            },
            Some(ValueRef::Null) => {
                self.problems.push(format!("{column}: NULL"));
                std::borrow::Cow::Borrowed("")
            }
            Some(ValueRef::Blob(bytes)) => {
                self.problems.push(format!(
                    "{column}: a BLOB of {} bytes, not text",
                    bytes.len()
                ));
                std::borrow::Cow::Owned(String::from_utf8_lossy(bytes).into_owned())
            }
            Some(ValueRef::Integer(n)) => std::borrow::Cow::Owned(n.to_string()),
            Some(ValueRef::Real(x)) => std::borrow::Cow::Owned(x.to_string()),
            None => std::borrow::Cow::Borrowed(""),
        }
    }

    /// Text that must be present.
    pub fn required_text(&mut self, index: usize, column: &str) -> String {
        self.text(index, column).unwrap_or_else(|| {
            self.problems.push(format!("{column}: NULL"));
            String::new()
        })
    }

    /// A number, or `None` for NULL; text that does not parse is named.
    pub fn real(&mut self, index: usize, column: &str) -> Option<f64> {
        match self.value(index, column)? {
            ValueRef::Null => None,
            ValueRef::Integer(n) => Some(n as f64),
            ValueRef::Real(x) if x.is_finite() => Some(x),
            ValueRef::Real(x) => {
                self.problems.push(format!("{column}: {x} is not a time"));
                None
            }
            ValueRef::Text(bytes) => {
                let text = String::from_utf8_lossy(bytes);
                match text.trim().parse::<f64>() {
                    Ok(x) if x.is_finite() => Some(x),
                    _ => {
                        self.problems
                            .push(format!("{column}: text {} is not a number", quote(&text)));
                        None
                    }
                }
            }
            ValueRef::Blob(bytes) => {
                self.problems.push(format!(
                    "{column}: a BLOB of {} bytes, not a number",
                    bytes.len()
                ));
                None
            }
        }
    }

    /// A number that must be present; 0 when it is not (and named).
    pub fn required_real(&mut self, index: usize, column: &str) -> f64 {
        self.real(index, column).unwrap_or_else(|| {
            if !self.problems.iter().any(|p| p.starts_with(column)) {
                self.problems.push(format!("{column}: NULL"));
            }
            0.0
        })
    }

    /// An integer that must be present; 0 when it is not (and named).
    pub fn integer(&mut self, index: usize, column: &str) -> i64 {
        let value = match self.value(index, column) {
            Some(ValueRef::Integer(n)) => return n,
            Some(value) => value,
            None => return 0,
        };
        let parsed = match value {
            ValueRef::Real(x) if x.fract() == 0.0 && x.abs() < 9e15 => Some(x as i64),
            ValueRef::Text(bytes) => String::from_utf8_lossy(bytes).trim().parse().ok(),
            _ => None,
        };
        parsed.unwrap_or_else(|| {
            let shown = match value {
                ValueRef::Null => "NULL".to_string(),
                ValueRef::Blob(bytes) => format!("a BLOB of {} bytes", bytes.len()),
                ValueRef::Text(bytes) => format!("text {}", quote(&String::from_utf8_lossy(bytes))),
                ValueRef::Real(x) => x.to_string(),
                ValueRef::Integer(n) => n.to_string(),
            };
            self.problems
                .push(format!("{column}: {shown} is not an integer"));
            0
        })
    }

    /// An event payload: the stored text verbatim when it is JSON; otherwise kept as a
    /// string and named (a BLOB becomes null).
    pub fn payload(&mut self, index: usize, column: &str) -> crate::model::Payload {
        let before = self.problems.len();
        match self.text(index, column) {
            None => {
                self.problems.push(format!("{column}: NULL"));
                crate::model::empty_payload()
            }
            Some(_) if self.problems.len() > before => crate::model::empty_payload(),
            Some(text) => {
                let (payload, problem) = crate::model::payload_of(&text);
                self.problems.extend(problem);
                payload
            }
        }
    }

    /// As [`Cells::payload`], borrowed from the row when the stored text is JSON.
    pub fn payload_ref(
        &mut self,
        index: usize,
        column: &str,
    ) -> std::borrow::Cow<'r, serde_json::value::RawValue> {
        use std::borrow::Cow;
        let before = self.problems.len();
        let text = self.text_ref(index, column);
        if self.problems.len() > before {
            return Cow::Owned(crate::model::empty_payload());
        }
        match text {
            Cow::Borrowed(text) => match serde_json::from_str::<&serde_json::value::RawValue>(text)
            {
                Ok(raw) => Cow::Borrowed(raw),
                Err(_) => {
                    self.problems.extend(crate::model::payload_problem(text));
                    Cow::Owned(crate::model::json_string(text))
                }
            },
            Cow::Owned(text) => {
                let (payload, problem) = crate::model::payload_of(&text);
                self.problems.extend(problem);
                Cow::Owned(payload)
            }
        }
    }

    /// A JSON document stored as text: parsed, or kept as a string when it is not JSON
    /// (triage then names it); a BLOB becomes null.
    pub fn json(&mut self, index: usize, column: &str) -> serde_json::Value {
        let before = self.problems.len();
        match self.text(index, column) {
            None => serde_json::Value::Null,
            Some(_) if self.problems.len() > before => serde_json::Value::Null,
            Some(text) => serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text)),
        }
    }
}

/// Decodes a notification from [`NOTIFICATION_COLUMNS`] starting at column `first`.
pub fn notification(row: &(impl Source + ?Sized), first: usize) -> Notification {
    let mut cells = Cells::new(row);
    let rowid = cells.integer(first, "rowid");
    let id = cells.text(first + 1, "id").unwrap_or_else(|| {
        cells.problems.push("id: NULL".into());
        format!("(no id: rowid {rowid})")
    });
    let channels_text = cells.required_text(first + 8, "channels");
    let channels = match serde_json::from_str::<Vec<String>>(&channels_text) {
        Ok(names) => names,
        Err(_) => {
            cells.problems.push(format!(
                "channels: {} is not a JSON array of channel names",
                quote(&channels_text)
            ));
            Vec::new()
        }
    };
    let notification = Notification {
        status: Stored::read(&cells.required_text(first + 2, "status")),
        dead_letter: cells.integer(first + 3, "dead_letter") != 0,
        attempts: cells.integer(first + 4, "attempts"),
        cycle: cells.integer(first + 5, "cycle"),
        cycle_attempts: cells.integer(first + 6, "cycle_attempts"),
        max_attempts: cells.integer(first + 7, "max_attempts"),
        channels,
        payload: cells.json(first + 9, "payload"),
        idempotency_key: cells.text(first + 10, "idempotency_key"),
        lease_token: cells.text(first + 11, "lease_token"),
        lease_until: cells.real(first + 12, "lease_until"),
        next_attempt_at: cells.required_real(first + 13, "next_attempt_at"),
        error_message: cells.text(first + 14, "error_message"),
        created_at: cells.required_real(first + 15, "created_at"),
        updated_at: cells.required_real(first + 16, "updated_at"),
        id,
        unreadable: Vec::new(),
    };
    Notification {
        unreadable: cells.problems,
        ..notification
    }
}

/// Decodes an event from [`EVENT_COLUMNS`] starting at column `first`.
pub fn event(row: &(impl Source + ?Sized), first: usize) -> Event {
    let mut cells = Cells::new(row);
    let event = Event {
        id: cells.integer(first, "id"),
        at: cells.required_real(first + 1, "at"),
        kind: Stored::read(&cells.required_text(first + 2, "kind")),
        payload: cells.payload(first + 3, "payload"),
        unreadable: Vec::new(),
    };
    Event {
        unreadable: cells.problems,
        ..event
    }
}

pub fn read_notification(conn: &Connection, id: &str) -> rusqlite::Result<Option<Notification>> {
    conn.prepare_cached(&format!(
        "SELECT {NOTIFICATION_COLUMNS} FROM uns_notifications n WHERE n.id = ?1"
    ))?
    .query_row([id], |row| Ok(notification(row, 0)))
    .optional()
}

/// Every event of one notification, oldest first.
pub fn read_events(conn: &Connection, id: &str) -> rusqlite::Result<Vec<Event>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {EVENT_COLUMNS} FROM uns_events e WHERE e.notification_id = ?1 ORDER BY e.id"
    ))?;
    stmt.query_map([id], |row| Ok(event(row, 0)))?.collect()
}

/// Whether the store has a place for notes (schema version 3 on).
pub fn has_notes(conn: &Connection) -> rusqlite::Result<bool> {
    conn.prepare_cached(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'uns_notes')",
    )?
    .query_row([], |row| row.get(0))
}

/// The notes written in `[since, until)` (either end open), oldest first; none in a store
/// without a place for them.
pub fn read_notes(
    conn: &Connection,
    since: Option<f64>,
    until: Option<f64>,
) -> rusqlite::Result<Vec<crate::api::NoteRow>> {
    if !has_notes(conn)? {
        return Ok(Vec::new());
    }
    let mut stmt = conn.prepare_cached(
        "SELECT id, at, kind, payload FROM uns_notes
         WHERE at >= coalesce(?1, at) AND at < coalesce(?2, at + 1) ORDER BY id",
    )?;
    stmt.query_map(rusqlite::params![since, until], |row| {
        let mut cells = Cells::new(row);
        let note = crate::api::NoteRow {
            id: cells.integer(0, "id"),
            at: cells.required_real(1, "at"),
            kind: cells.required_text(2, "kind"),
            payload: cells.payload(3, "payload"),
            unreadable: Vec::new(),
        };
        Ok(crate::api::NoteRow {
            unreadable: cells.problems,
            ..note
        })
    })?
    .collect()
}

/// The id of a notification's newest event.
pub fn newest_event_id(conn: &Connection, id: &str) -> rusqlite::Result<Option<i64>> {
    conn.prepare_cached("SELECT MAX(id) FROM uns_events WHERE notification_id = ?1")?
        .query_row([id], |row| row.get(0))
}

/// The runtime's state in a few numbers: what `/metrics`, `doctor` and the API's stats
/// show. Each is read from an index where one serves it, so it stays cheap on a large
/// store.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Stats {
    /// When these were read (unix seconds).
    pub at: f64,
    /// Rows by status, as stored.
    pub by_status: std::collections::BTreeMap<String, i64>,
    pub dlq_entries: i64,
    /// When the longest-waiting DLQ entry got there.
    pub oldest_dlq_at: Option<f64>,
    /// Rows waiting to be claimed now: PENDING and due, or LEASED with the lease run out.
    pub due: i64,
    /// Since when the longest-waiting of them has been due.
    pub oldest_due_at: Option<f64>,
    /// The newest claim (ATTEMPT_STARTED) by any worker.
    pub last_claim_at: Option<f64>,
    /// Rows PENDING and due later: retries backing off, and paced replays waiting their
    /// turn.
    #[serde(default)]
    pub scheduled: i64,
    /// When the last of them is due.
    #[serde(default)]
    pub last_scheduled_at: Option<f64>,
}

pub fn stats(conn: &Connection, now: f64) -> rusqlite::Result<Stats> {
    let mut stats = Stats {
        at: now,
        ..Stats::default()
    };
    let mut by_status =
        conn.prepare_cached("SELECT status, COUNT(*) FROM uns_notifications GROUP BY status")?;
    let mut rows = by_status.query([])?;
    while let Some(row) = rows.next()? {
        let status = Cells::new(row)
            .text(0, "status")
            .unwrap_or_else(|| "NULL".into());
        stats.by_status.insert(status, row.get(1)?);
    }
    let (entries, oldest): (i64, Option<f64>) = conn
        .prepare_cached(
            "SELECT COUNT(*), MIN(updated_at) FROM uns_notifications WHERE dead_letter = 1",
        )?
        .query_row([], |r| Ok((r.get(0)?, r.get(1).ok().flatten())))?;
    stats.dlq_entries = entries;
    stats.oldest_dlq_at = oldest;
    for (status, column) in [("PENDING", "next_attempt_at"), ("LEASED", "lease_until")] {
        let (due, oldest): (i64, Option<f64>) = conn
            .prepare_cached(&format!(
                "SELECT COUNT(*), MIN({column}) FROM uns_notifications
                 WHERE status = '{status}' AND {column} <= ?1"
            ))?
            .query_row([now], |r| Ok((r.get(0)?, r.get(1).ok().flatten())))?;
        stats.due += due;
        stats.oldest_due_at = match (stats.oldest_due_at, oldest) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
    stats.last_claim_at = conn
        .prepare_cached("SELECT MAX(at) FROM uns_events WHERE kind = 'ATTEMPT_STARTED'")?
        .query_row([], |r| Ok(r.get::<_, Option<f64>>(0).ok().flatten()))?;
    let (scheduled, last): (i64, Option<f64>) = conn
        .prepare_cached(
            "SELECT COUNT(*), MAX(next_attempt_at) FROM uns_notifications
             WHERE status = 'PENDING' AND next_attempt_at > ?1",
        )?
        .query_row([now], |r| Ok((r.get(0)?, r.get(1).ok().flatten())))?;
    stats.scheduled = scheduled;
    stats.last_scheduled_at = last;
    Ok(stats)
}

/// How the runtime has been doing over a recent window: what `doctor` judges it by.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Health {
    #[serde(flatten)]
    pub stats: Stats,
    /// The window the counts below cover, in seconds back from `at`.
    pub window_seconds: f64,
    /// Claims (ATTEMPT_STARTED) in the window.
    pub claims: i64,
    /// LEASE_LOST events in the window.
    pub lease_lost: i64,
    /// Claims of a row whose lease had run out (ATTEMPT_STARTED reclaimed) in the window:
    /// each may send a copy a lost lease already sent.
    #[serde(default)]
    pub reclaims: i64,
    /// The workers that claimed rows in the window, by id.
    pub workers: Vec<String>,
    /// The lease the newest claim was given, in seconds.
    pub lease_seconds: Option<f64>,
    /// Provider calls that ended in the window, by channel.
    pub calls: Vec<ChannelCalls>,
    /// The SMTP relay (`host:port`) the newest email attempt went to, as the adapter
    /// recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smtp_relay: Option<String>,
    /// The last LEASE_LOST and the last reclaim at or before the window's end, however
    /// long ago (unix seconds): what "still happening" is told by (DESIGN §10).
    #[serde(default)]
    pub last_lease_lost: Option<f64>,
    #[serde(default)]
    pub last_reclaim: Option<f64>,
}

/// How long one channel's provider calls took (CHANNEL_ATTEMPT_STARTED to its result),
/// and how many the provider refused or left unknown.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ChannelCalls {
    pub channel: String,
    pub calls: usize,
    pub p99_seconds: f64,
    pub max_seconds: f64,
    #[serde(default)]
    pub refused: usize,
    #[serde(default)]
    pub unknown: usize,
}

/// The most call results one health reading pairs with their starts.
const CALLS_READ: i64 = 50_000;

/// The workers that claimed a row since `since`, by name.
fn workers_since(conn: &Connection, since: f64) -> rusqlite::Result<Vec<String>> {
    let mut workers = Vec::new();
    let mut statement = conn.prepare_cached(
        "SELECT DISTINCT json_extract(payload, '$.worker_id') FROM uns_events
         WHERE kind = 'ATTEMPT_STARTED' AND at >= ?1 AND json_valid(payload)",
    )?;
    let mut rows = statement.query([since])?;
    while let Some(row) = rows.next()? {
        if let Some(worker) = Cells::new(row).text(0, "worker_id") {
            workers.push(worker);
        }
    }
    workers.sort();
    Ok(workers)
}

/// The lease the newest claim took, in seconds.
fn newest_lease_seconds(conn: &Connection) -> rusqlite::Result<Option<f64>> {
    Ok(conn
        .prepare_cached(
            "SELECT json_extract(payload, '$.lease_until') - at FROM uns_events
             WHERE kind = 'ATTEMPT_STARTED' AND json_valid(payload)
             ORDER BY at DESC LIMIT 1",
        )?
        .query_row([], |r| Ok(r.get::<_, Option<f64>>(0).ok().flatten()))
        .optional()?
        .flatten()
        .filter(|s| s.is_finite() && *s > 0.0))
}

/// The runtime's health over the `window_seconds` before `until` (default: now).
pub fn health(
    conn: &Connection,
    now: f64,
    window_seconds: f64,
    until: Option<f64>,
) -> rusqlite::Result<Health> {
    let end = until.unwrap_or(f64::INFINITY);
    let since = until.unwrap_or(now) - window_seconds;
    let count = |kind: &str, reclaimed: bool| -> rusqlite::Result<i64> {
        let sql = if reclaimed {
            "SELECT COUNT(*) FROM uns_events WHERE kind = ?1 AND at >= ?2 AND at < ?3
             AND json_valid(payload) AND json_extract(payload, '$.reclaimed') = 1"
        } else {
            "SELECT COUNT(*) FROM uns_events WHERE kind = ?1 AND at >= ?2 AND at < ?3"
        };
        conn.prepare_cached(sql)?
            .query_row(rusqlite::params![kind, since, end], |r| r.get(0))
    };
    let (last_lease_lost, last_reclaim) =
        crate::pulse::last_losses(conn, until.unwrap_or(f64::MAX))?;
    let mut health = Health {
        stats: stats(conn, now)?,
        window_seconds,
        claims: count("ATTEMPT_STARTED", false)?,
        lease_lost: count("LEASE_LOST", false)?,
        reclaims: count("ATTEMPT_STARTED", true)?,
        last_lease_lost,
        last_reclaim,
        ..Health::default()
    };
    health.workers = workers_since(conn, since)?;
    health.lease_seconds = newest_lease_seconds(conn)?;
    health.calls = channel_calls(conn, since)?;
    health.smtp_relay = newest_relay(conn)?;
    Ok(health)
}

/// Each channel's calls since `since`: how long they took, how many were refused and how
/// many ended unknown.
fn channel_calls(conn: &Connection, since: f64) -> rusqlite::Result<Vec<ChannelCalls>> {
    // Each result is paired with the newest start of the same channel under the same
    // lease before it: a late result is never paired with a reclaiming worker's start.
    let mut calls = conn.prepare_cached(
        "SELECT json_extract(r.payload, '$.channel'),
                json_extract(r.payload, '$.success'),
                json_extract(r.payload, '$.metadata.provider_outcome'),
                r.at - (SELECT s.at FROM uns_events s
                        WHERE s.notification_id = r.notification_id AND s.id < r.id
                          AND s.kind = 'CHANNEL_ATTEMPT_STARTED' AND json_valid(s.payload)
                          AND json_extract(s.payload, '$.channel')
                              = json_extract(r.payload, '$.channel')
                          AND json_extract(s.payload, '$.lease_token')
                              IS json_extract(r.payload, '$.lease_token')
                        ORDER BY s.id DESC LIMIT 1)
         FROM uns_events r
         WHERE r.kind = 'CHANNEL_ATTEMPT_RESULT' AND r.at >= ?1 AND json_valid(r.payload)
         ORDER BY r.at DESC LIMIT ?2",
    )?;
    let mut by_channel: std::collections::BTreeMap<String, (Vec<f64>, usize, usize)> =
        Default::default();
    let mut rows = calls.query(rusqlite::params![since, CALLS_READ])?;
    while let Some(row) = rows.next()? {
        let mut cells = Cells::new(row);
        let channel = cells.text(0, "channel");
        let success = row.get::<_, Option<bool>>(1).ok().flatten();
        let said = cells.text(2, "provider_outcome");
        let took = row.get::<_, Option<f64>>(3).ok().flatten();
        if let (Some(channel), Some(took)) = (channel, took)
            && took.is_finite()
            && took >= 0.0
        {
            let entry = by_channel.entry(channel).or_default();
            entry.0.push(took);
            match crate::model::ProviderOutcome::of_result(success, said.as_deref()) {
                crate::model::ProviderOutcome::Rejected => entry.1 += 1,
                crate::model::ProviderOutcome::Unknown => entry.2 += 1,
                crate::model::ProviderOutcome::Accepted => {}
            }
        }
    }
    let mut out = Vec::new();
    for (channel, (mut took, refused, unknown)) in by_channel {
        took.sort_by(f64::total_cmp);
        let rank = ((took.len() as f64) * 0.99).ceil() as usize;
        out.push(ChannelCalls {
            channel,
            calls: took.len(),
            p99_seconds: took[rank.clamp(1, took.len()) - 1],
            max_seconds: took[took.len() - 1],
            refused,
            unknown,
        });
    }
    Ok(out)
}

/// The relay the newest email attempt named, when it names one as `host:port`.
fn newest_relay(conn: &Connection) -> rusqlite::Result<Option<String>> {
    Ok(conn
        .prepare_cached(
            "SELECT json_extract(payload, '$.smtp_relay') FROM uns_events
             WHERE kind = 'CHANNEL_ATTEMPT_STARTED' AND json_valid(payload)
               AND json_type(payload, '$.smtp_relay') = 'text'
             ORDER BY at DESC LIMIT 1",
        )?
        .query_row([], |r| r.get::<_, String>(0))
        .optional()?
        .filter(|relay| is_relay_address(relay)))
}

/// `host:port` and nothing else: what a store names as its relay is probed only then.
pub fn is_relay_address(text: &str) -> bool {
    let Some((host, port)) = text.rsplit_once(':') else {
        return false;
    };
    !host.is_empty()
        && host.len() <= 253
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '[' | ']' | ':'))
        && port.parse::<u16>().is_ok_and(|p| p > 0)
}

/// The ids that start with `prefix`, in order, at most `limit` (DLQ entries only when
/// `dlq_only`): one walk of the id index from the prefix on.
pub fn ids_with_prefix(
    conn: &Connection,
    prefix: &str,
    dlq_only: bool,
    limit: usize,
) -> rusqlite::Result<Vec<String>> {
    // Every id that starts with the prefix sorts before prefix + the last code point.
    let upper = format!("{prefix}\u{10FFFF}");
    let sql = if dlq_only {
        "SELECT id FROM uns_notifications WHERE dead_letter = 1 AND id >= ?1 AND id < ?2 ORDER BY id LIMIT ?3"
    } else {
        "SELECT id FROM uns_notifications WHERE id >= ?1 AND id < ?2 ORDER BY id LIMIT ?3"
    };
    let mut stmt = conn.prepare_cached(sql)?;
    let mut rows = stmt.query(rusqlite::params![prefix, upper, limit as i64])?;
    let mut ids = Vec::new();
    while let Some(row) = rows.next()? {
        if let Some(id) = Cells::new(row).text(0, "id") {
            ids.push(id);
        }
    }
    Ok(ids)
}

/// Which store this is, the same however it is reached (directly or through its API): a
/// hash of the file's real path and its first event, which never changes. A copy of the
/// store elsewhere, or another store at the same path, has another. None when the store
/// has no event yet.
pub fn store_identity(
    conn: &Connection,
    path: &std::path::Path,
) -> rusqlite::Result<Option<String>> {
    let first: Option<(i64, f64, Option<String>)> = conn
        .query_row(
            "SELECT id, CAST(at AS REAL), CAST(notification_id AS TEXT) FROM uns_events ORDER BY id LIMIT 1",
            [],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
        )
        .optional()?;
    let Some((id, at, notification)) = first else {
        return Ok(None);
    };
    let place = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let text = format!(
        "{}|{id}|{at:.6}|{}",
        place.display(),
        notification.unwrap_or_default()
    );
    // FNV-1a, 64 bits: an identity to compare, not a secret to keep.
    let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    Ok(Some(format!("{hash:016x}")))
}
