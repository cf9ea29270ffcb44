//! The SQLite backend, and the read queries the API server shares with it.
//!
//! Read commands open the file read-only, so a triage cannot write even by accident.
//! Resolve and replay go through `remediation::apply`, which the server calls too.

use super::{Entry, Result, Store, StoreError, decode_cursor, encode_cursor};
use crate::api::{
    ActionRequest, ActionResponse, DlqEntry, DlqPage, EventRow, EventsResponse, NotificationDoc,
};
use crate::clock::{Clock, SystemClock};
use crate::model::Kind;
use crate::remediation::{self, Action, Actor};
use crate::runtime::queries::{self, EVENT_COLUMNS, NOTIFICATION_COLUMNS, NOTIFICATION_WIDTH};
use crate::runtime::schema::{self, OpenMode};
use rusqlite::{Connection, params};
use std::path::{Path, PathBuf};

pub fn notification_doc(conn: &Connection, id: &str) -> Result<NotificationDoc> {
    let row = queries::read_notification(conn, id)?
        .ok_or_else(|| StoreError::NotFound(format!("notification {id}")))?;
    Ok(NotificationDoc {
        events: queries::read_events(conn, id)?,
        row,
    })
}

/// Events of `kinds` across notifications, newest first, joined with their row.
pub fn search_events(conn: &Connection, kinds: &[Kind], limit: usize) -> Result<EventsResponse> {
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
        .query_map(
            rusqlite::params_from_iter(kinds.iter().map(|k| k.as_str())),
            |row| {
                let mut cells = queries::Cells::new(row);
                let event = EventRow {
                    id: cells.integer(0, "id"),
                    notification_id: cells.required_text(1, "notification_id"),
                    at: cells.required_real(2, "at"),
                    kind: cells.required_text(3, "kind"),
                    payload: cells.json(4, "payload"),
                    status: cells.required_text(5, "status"),
                    dead_letter: cells.integer(6, "dead_letter") != 0,
                    attempts: cells.integer(7, "attempts"),
                    cycle: cells.integer(8, "cycle"),
                    unreadable: Vec::new(),
                };
                Ok(EventRow {
                    unreadable: cells.problems,
                    ..event
                })
            },
        )?
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
    // No cursor: from the start, rows without an id (they sort first) included.
    let after = cursor.map(decode_cursor).transpose()?;
    let limit = limit.clamp(1, 1000);
    let mut entries = Vec::with_capacity(limit);
    if include_events {
        // One ordered join instead of a query per entry.
        let sql = format!(
            "WITH page AS (SELECT rowid AS r FROM uns_notifications
                           WHERE dead_letter = 1 AND (?1 IS NULL OR id > ?1) ORDER BY id LIMIT ?2)
             SELECT {NOTIFICATION_COLUMNS}, {EVENT_COLUMNS}
             FROM page JOIN uns_notifications n ON n.rowid = page.r
             LEFT JOIN uns_events e ON e.notification_id = n.id
             ORDER BY n.id, n.rowid, e.id"
        );
        let mut stmt = conn.prepare_cached(&sql)?;
        let mut rows = stmt.query(params![after, limit as i64])?;
        let mut last_rowid = None;
        while let Some(row) = rows.next()? {
            let rowid: i64 = row.get(0)?;
            if last_rowid != Some(rowid) {
                last_rowid = Some(rowid);
                entries.push(DlqEntry {
                    row: queries::notification(row, 0),
                    events: Some(Vec::new()),
                });
            }
            if let (Some(entry), Some(_)) = (
                entries.last_mut(),
                row.get::<_, Option<i64>>(NOTIFICATION_WIDTH)?,
            ) {
                entry
                    .events
                    .get_or_insert_with(Vec::new)
                    .push(queries::event(row, NOTIFICATION_WIDTH));
            }
        }
    } else {
        let sql = format!(
            "SELECT {NOTIFICATION_COLUMNS} FROM uns_notifications n
             WHERE n.dead_letter = 1 AND (?1 IS NULL OR n.id > ?1) ORDER BY n.id, n.rowid LIMIT ?2"
        );
        let mut stmt = conn.prepare_cached(&sql)?;
        let rows = stmt.query_map(params![after, limit as i64], |row| {
            Ok(queries::notification(row, 0))
        })?;
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
        "SELECT {NOTIFICATION_COLUMNS}, {EVENT_COLUMNS}
         FROM uns_notifications n LEFT JOIN uns_events e ON e.notification_id = n.id
         WHERE n.dead_letter = 1 ORDER BY n.id, n.rowid, e.id"
    );
    let mut stmt = conn.prepare(&sql)?;
    let mut rows = stmt.query([])?;
    let mut current: Option<(i64, Entry)> = None;
    while let Some(row) = rows.next()? {
        let rowid: i64 = row.get(0)?;
        if current.as_ref().map(|(r, _)| *r != rowid).unwrap_or(true) {
            if let Some((_, done)) = current.take() {
                visit(done)?;
            }
            current = Some((rowid, (queries::notification(row, 0), Vec::new())));
        }
        if let (Some((_, (_, events))), Some(_)) = (
            current.as_mut(),
            row.get::<_, Option<i64>>(NOTIFICATION_WIDTH)?,
        ) {
            events.push(queries::event(row, NOTIFICATION_WIDTH));
        }
    }
    if let Some((_, done)) = current {
        visit(done)?;
    }
    Ok(())
}

/// A store file opened directly.
pub struct SqliteStore {
    path: PathBuf,
    conn: Connection,
    clock: Box<dyn Clock>,
    /// Said once to the operator: how the file had to be opened.
    pub note: Option<String>,
}

impl SqliteStore {
    /// Read-only: every read command uses this.
    pub fn open_read_only(path: &Path) -> Result<Self> {
        let (conn, access) = schema::open_read_only(path)?;
        Ok(Self {
            path: path.to_path_buf(),
            conn,
            clock: Box::new(SystemClock),
            note: access.note(path),
        })
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
            note: None,
        })
    }

    fn act(&self, id: &str, action: Action, request: &ActionRequest) -> Result<ActionResponse> {
        // On the store itself the operator is who the process runs as, as the CLI says.
        let operator = request
            .operator
            .as_deref()
            .map(str::trim)
            .filter(|o| !o.is_empty())
            .map(str::to_string)
            .unwrap_or_else(crate::identity::account_name);
        Ok(remediation::apply(
            &self.conn,
            self.clock.now(),
            id,
            action,
            request,
            &Actor::local(&operator),
        )?)
    }
}

impl Store for SqliteStore {
    fn describe(&self) -> String {
        self.path.display().to_string()
    }

    fn operator(&self, claimed: &str) -> Result<String> {
        Ok(claimed.to_string())
    }

    fn notification(&self, id: &str) -> Result<NotificationDoc> {
        notification_doc(&self.conn, id)
    }

    fn events(&self, kinds: &[Kind], limit: usize) -> Result<EventsResponse> {
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
        self.act(id, Action::Resolve, request)
    }

    fn replay(&self, id: &str, request: &ActionRequest) -> Result<ActionResponse> {
        self.act(id, Action::Replay, request)
    }
}
