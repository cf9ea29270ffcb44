//! The SQLite backend, and the read queries the API server shares with it.
//!
//! Read commands open the file read-only, so a triage cannot write even by accident.
//! Resolve and replay go through `remediation::apply`, which the server calls too.

use super::{
    EventQuery, Result, Selection, Store, StoreError, Triaged, decode_cursor, encode_cursor,
};
use crate::api::{
    ActionRequest, ActionResponse, DlqEntry, DlqPage, EventRow, EventsResponse, NotificationDoc,
};
use crate::clock::{Clock, SystemClock};
use crate::model::{Event, payload_problem};
use crate::remediation::{self, Action, Actor};
use crate::runtime::queries::{self, EVENT_COLUMNS, NOTIFICATION_COLUMNS, NOTIFICATION_WIDTH};
use crate::runtime::schema::{self, OpenMode};
use crate::triage::{Observed, Triage};
use rusqlite::{Connection, OptionalExtension};
use std::path::{Path, PathBuf};

pub fn notification_doc(conn: &Connection, id: &str) -> Result<NotificationDoc> {
    let row = queries::read_notification(conn, id)?
        .ok_or_else(|| StoreError::NotFound(format!("notification {id}")))?;
    Ok(NotificationDoc {
        events: queries::read_events(conn, id)?,
        row,
    })
}

/// Events across notifications. Newest first: one walk of the (kind, at) index per kind,
/// merged, so the newest N cost N steps per kind whatever the store's size. After a
/// cursor: oldest first by id.
pub fn search_events(conn: &Connection, query: &EventQuery) -> Result<EventsResponse> {
    let (filter, filter_params) = query.selection.events_sql();
    let limit = query.limit.max(1);
    let mut found: Vec<(Event, String)> = Vec::new();
    let read = |row: &rusqlite::Row| -> rusqlite::Result<(Event, String)> {
        let notification_id = queries::Cells::new(row).required_text(4, "notification_id");
        Ok((queries::event(row, 0), notification_id))
    };
    if let Some(after) = query.after {
        let kinds = placeholders(query.kinds.len());
        let kind_filter = if query.kinds.is_empty() {
            String::new()
        } else {
            format!(" AND e.kind IN ({kinds})")
        };
        let sql = format!(
            "SELECT {EVENT_COLUMNS}, e.notification_id FROM uns_events e
             WHERE e.id > ?{kind_filter}{filter} ORDER BY e.id LIMIT {limit}"
        );
        let mut params: Vec<rusqlite::types::Value> = vec![after.into()];
        params.extend(query.kinds.iter().map(|k| k.as_str().to_string().into()));
        params.extend(filter_params);
        let mut stmt = conn.prepare_cached(&sql)?;
        found = stmt
            .query_map(rusqlite::params_from_iter(params), read)?
            .collect::<rusqlite::Result<_>>()?;
    } else {
        let kinds: Vec<String> = if query.kinds.is_empty() {
            stored_kinds(conn)?
        } else {
            query.kinds.iter().map(|k| k.as_str().to_string()).collect()
        };
        let sql = format!(
            "SELECT {EVENT_COLUMNS}, e.notification_id FROM uns_events e
             WHERE e.kind = ?{filter} ORDER BY e.at DESC, e.id DESC LIMIT {limit}"
        );
        let mut stmt = conn.prepare_cached(&sql)?;
        for kind in kinds {
            let mut params: Vec<rusqlite::types::Value> = vec![kind.into()];
            params.extend(filter_params.iter().cloned());
            let rows = stmt.query_map(rusqlite::params_from_iter(params), read)?;
            for row in rows {
                found.push(row?);
            }
        }
        found.sort_by(|(a, _), (b, _)| b.at.total_cmp(&a.at).then(b.id.cmp(&a.id)));
        found.truncate(limit);
    }
    let mut rows = conn.prepare_cached(
        "SELECT status, dead_letter, attempts, cycle FROM uns_notifications WHERE id = ?1",
    )?;
    let mut events = Vec::with_capacity(found.len());
    for (event, notification_id) in found {
        let joined = rows
            .query_row([&notification_id], |row| {
                let mut cells = queries::Cells::new(row);
                Ok((
                    cells.required_text(0, "status"),
                    cells.integer(1, "dead_letter") != 0,
                    cells.integer(2, "attempts"),
                    cells.integer(3, "cycle"),
                    cells.problems,
                ))
            })
            .optional()?;
        // The join of the runbook's query: an event whose row is gone is not shown.
        let Some((status, dead_letter, attempts, cycle, problems)) = joined else {
            continue;
        };
        let mut unreadable = event.unreadable;
        unreadable.extend(problems.into_iter().map(|p| format!("row {p}")));
        events.push(EventRow {
            id: event.id,
            notification_id,
            at: event.at,
            kind: event.kind,
            payload: event.payload,
            status,
            dead_letter,
            attempts,
            cycle,
            unreadable,
        });
    }
    Ok(EventsResponse { events })
}

fn placeholders(n: usize) -> String {
    vec!["?"; n].join(", ")
}

/// Every kind stored, by seeking the (kind, at) index from one kind to the next.
fn stored_kinds(conn: &Connection) -> Result<Vec<String>> {
    let mut stmt =
        conn.prepare_cached("SELECT kind FROM uns_events WHERE kind > ?1 ORDER BY kind LIMIT 1")?;
    let mut kinds = Vec::new();
    let mut after = String::new();
    while let Some(kind) = stmt
        .query_row([&after], |row| Ok(queries::Cells::new(row).text(0, "kind")))
        .optional()?
        .flatten()
    {
        if kinds.len() > 1000 {
            break;
        }
        after = kind.clone();
        kinds.push(kind);
    }
    Ok(kinds)
}

/// One page of the selected DLQ entries after `cursor`, by id.
pub fn dlq_page(
    conn: &Connection,
    selection: &Selection,
    cursor: Option<&str>,
    limit: usize,
    include_events: bool,
) -> Result<DlqPage> {
    // No cursor: from the start, rows without an id (they sort first) included.
    let after = cursor.map(decode_cursor).transpose()?;
    let limit = limit.clamp(1, 1000);
    let (filter, filter_params) = selection.dlq_sql();
    let mut params: Vec<rusqlite::types::Value> =
        vec![after.map_or(rusqlite::types::Value::Null, Into::into)];
    params.extend(filter_params);
    params.push((limit as i64).into());
    let page = format!(
        "SELECT n.rowid AS r FROM uns_notifications n
         WHERE n.dead_letter = 1 AND (?1 IS NULL OR n.id > ?1){filter}
         ORDER BY n.id, n.rowid LIMIT ?"
    );
    let mut entries: Vec<DlqEntry> = Vec::with_capacity(limit);
    let mut rowids: Vec<i64> = Vec::new();
    if include_events {
        // One ordered join instead of a query per entry.
        let sql = format!(
            "WITH page AS ({page})
             SELECT {NOTIFICATION_COLUMNS}, {EVENT_COLUMNS}
             FROM page JOIN uns_notifications n ON n.rowid = page.r
             LEFT JOIN uns_events e ON e.notification_id = n.id
             ORDER BY n.id, n.rowid, e.id"
        );
        let mut stmt = conn.prepare_cached(&sql)?;
        let mut rows = stmt.query(rusqlite::params_from_iter(params))?;
        while let Some(row) = rows.next()? {
            let rowid: i64 = row.get(0)?;
            if rowids.last() != Some(&rowid) {
                rowids.push(rowid);
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
            "WITH page AS ({page})
             SELECT {NOTIFICATION_COLUMNS} FROM page JOIN uns_notifications n ON n.rowid = page.r
             ORDER BY n.id, n.rowid"
        );
        let mut stmt = conn.prepare_cached(&sql)?;
        let rows = stmt.query_map(rusqlite::params_from_iter(params), |row| {
            Ok(queries::notification(row, 0))
        })?;
        for row in rows {
            entries.push(DlqEntry {
                row: row?,
                events: None,
            });
        }
    }
    // The page is full when the SQL limit was reached; the channel test below may thin it.
    let next_cursor = (entries.len() == limit)
        .then(|| entries.last().map(|e| encode_cursor(&e.row.id)))
        .flatten();
    entries.retain(|e| selection.keeps_channels(&e.row.channels, !e.row.unreadable.is_empty()));
    Ok(DlqPage {
        entries,
        next_cursor,
    })
}

/// Streams every selected DLQ entry, triaged straight from SQLite's row buffers: each
/// payload is read where SQLite holds it, parsed once into the few fields triage reads,
/// and only one entry is in memory at a time.
pub fn each_triaged(
    conn: &Connection,
    selection: &Selection,
    visit: &mut dyn FnMut(Triaged) -> Result<()>,
) -> Result<()> {
    let (filter, params) = selection.dlq_sql();
    // Only the event columns ride on the join; each row is read once, by rowid, when its
    // first event arrives. Repeating the row's columns on every event costs more than
    // the whole triage.
    let sql = format!(
        "SELECT n.rowid, {EVENT_COLUMNS}
         FROM uns_notifications n LEFT JOIN uns_events e ON e.notification_id = n.id
         WHERE n.dead_letter = 1{filter} ORDER BY n.id, n.rowid, e.id"
    );
    let mut stmt = conn.prepare(&sql)?;
    let mut by_rowid = conn.prepare(&format!(
        "SELECT {NOTIFICATION_COLUMNS} FROM uns_notifications n WHERE n.rowid = ?1"
    ))?;
    let mut rows = stmt.query(rusqlite::params_from_iter(params))?;
    let mut current: Option<(i64, Triage, Vec<String>)> = None;
    let finish = |(_, triage, unreadable): (i64, Triage, Vec<String>),
                  visit: &mut dyn FnMut(Triaged) -> Result<()>|
     -> Result<()> {
        if !selection.keeps_channels(&triage.row().channels, !triage.row().unreadable.is_empty()) {
            return Ok(());
        }
        let (verdict, row) = triage.finish();
        let mut all = row.unreadable.clone();
        all.extend(unreadable);
        visit(Triaged {
            row,
            verdict,
            unreadable: all,
        })
    };
    while let Some(row) = rows.next()? {
        let rowid: i64 = row.get(0)?;
        if current.as_ref().is_none_or(|(r, _, _)| *r != rowid) {
            if let Some(done) = current.take() {
                finish(done, visit)?;
            }
            let notification = by_rowid.query_row([rowid], |n| Ok(queries::notification(n, 0)))?;
            current = Some((rowid, Triage::start(notification), Vec::new()));
        }
        let Some((_, triage, unreadable)) = current.as_mut() else {
            continue;
        };
        if row.get_ref(1)? == rusqlite::types::ValueRef::Null {
            continue;
        }
        // The same checks, in the same order, as queries::event, without copying.
        let mut cells = queries::Cells::new(row);
        let id = cells.integer(1, "id");
        cells.required_real(2, "at");
        let kind = cells.text_ref(3, "kind");
        let payload = cells.text_ref(4, "payload");
        let mut observed = Observed::from_text(id, &kind, &payload);
        if observed.fields.is_err()
            && let Some(problem) = payload_problem(&payload)
        {
            cells.problems.push(problem);
        }
        unreadable.extend(cells.problems.iter().map(|p| format!("event {id}: {p}")));
        observed = observed.with_unreadable(cells.problems.first().map(String::as_str));
        triage.read(observed);
    }
    if let Some(done) = current {
        finish(done, visit)?;
    }
    Ok(())
}

/// Resolve and replay on the store itself, through the guarded transition.
fn act(
    conn: &Connection,
    clock: &dyn Clock,
    id: &str,
    action: Action,
    request: &ActionRequest,
) -> Result<ActionResponse> {
    // On the store itself the operator is who the process runs as, as the CLI says.
    let operator = request
        .operator
        .as_deref()
        .map(str::trim)
        .filter(|o| !o.is_empty())
        .map(str::to_string)
        .unwrap_or_else(crate::identity::account_name);
    Ok(remediation::apply(
        conn,
        clock.now(),
        id,
        action,
        request,
        &Actor::local(&operator),
    )?)
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

    fn events(&self, query: &EventQuery) -> Result<EventsResponse> {
        search_events(&self.conn, query)
    }

    fn dlq_page(
        &self,
        selection: &Selection,
        cursor: Option<&str>,
        limit: usize,
        include_events: bool,
    ) -> Result<DlqPage> {
        dlq_page(&self.conn, selection, cursor, limit, include_events)
    }

    fn each_triaged(
        &self,
        selection: &Selection,
        visit: &mut dyn FnMut(Triaged) -> Result<()>,
    ) -> Result<()> {
        each_triaged(&self.conn, selection, visit)
    }

    fn resolve(&self, id: &str, request: &ActionRequest) -> Result<ActionResponse> {
        act(
            &self.conn,
            self.clock.as_ref(),
            id,
            Action::Resolve,
            request,
        )
    }

    fn replay(&self, id: &str, request: &ActionRequest) -> Result<ActionResponse> {
        act(&self.conn, self.clock.as_ref(), id, Action::Replay, request)
    }
}
