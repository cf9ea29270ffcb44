//! The SQLite backend, and the read queries the API server shares with it.
//!
//! Read commands open the file read-only, so a triage cannot write even by accident.
//! Resolve and replay go through `remediation::apply`, which the server calls too.

use super::{EventQuery, Result, Selection, Store, StoreError};
use crate::api::{
    ActionRequest, ActionResponse, DlqPage, EventRow, EventsResponse, NotificationDoc,
};
use crate::clock::{Clock, SystemClock};
use crate::remediation::{self, Action, Actor};
use crate::runtime::queries::{self, EVENT_COLUMNS};
use crate::runtime::schema::{self, OpenMode};
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

/// Most kinds merged in one statement; a store holding more (only a damaged one could)
/// is searched without the index.
const MERGED_KINDS: usize = 64;

/// Events across notifications, joined with their row as the runbook's query joins them.
///
/// Newest first, in the runbook query's order: by time, then by kind, then by id. Each
/// kind is one walk down the (kind, at) index, stopped after `limit` rows, and SQLite
/// merges the walks, so the newest N cost N steps per kind however large the store.
/// After a cursor: oldest first by id, for following.
pub fn search_events(conn: &Connection, query: &EventQuery) -> Result<EventsResponse> {
    let ids = pick_events(conn, query)?;
    let columns =
        format!("{EVENT_COLUMNS}, e.notification_id, n.status, n.dead_letter, n.attempts, n.cycle");
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {columns} FROM uns_events e JOIN uns_notifications n ON n.id = e.notification_id
         WHERE e.id = ?1"
    ))?;
    let mut events = Vec::with_capacity(ids.len());
    for id in ids {
        let found = stmt
            .query_row([id], |row| {
                let event = queries::event(row, 0);
                let mut cells = queries::Cells::new(row);
                let notification_id = cells.required_text(4, "notification_id");
                let status = cells.required_text(5, "status");
                let dead_letter = cells.integer(6, "dead_letter") != 0;
                let attempts = cells.integer(7, "attempts");
                let cycle = cells.integer(8, "cycle");
                let mut unreadable = event.unreadable;
                unreadable.extend(cells.problems.into_iter().map(|p| format!("row {p}")));
                Ok(EventRow {
                    id: event.id,
                    notification_id,
                    at: event.at,
                    kind: event.kind.as_str().to_string(),
                    payload: event.payload,
                    status,
                    dead_letter,
                    attempts,
                    cycle,
                    unreadable,
                })
            })
            .optional()?;
        // Gone between the two reads only if someone deleted it, which nothing here does.
        events.extend(found);
    }
    Ok(EventsResponse { events })
}

/// The ids [`search_events`] answers with, in its order. Only the index columns are
/// ordered and merged, so a payload of megabytes is read once, for the rows shown, and
/// never copied through a sorter.
fn pick_events(conn: &Connection, query: &EventQuery) -> Result<Vec<i64>> {
    let (filter, filter_params) = query.selection.events_sql();
    let limit = query.limit.max(1);
    let columns = "e.id, e.at, e.kind";
    let from = "FROM uns_events e JOIN uns_notifications n ON n.id = e.notification_id";
    let mut params: Vec<rusqlite::types::Value> = Vec::new();
    let sql = if let Some(after) = query.after {
        params.push(after.into());
        let kind_filter = match query.kinds.len() {
            0 => String::new(),
            n => format!(" AND e.kind IN ({})", placeholders(n)),
        };
        params.extend(query.kinds.iter().map(|k| k.as_str().to_string().into()));
        params.extend(filter_params);
        format!(
            "SELECT {columns} {from} WHERE e.id > ?{kind_filter}{filter} ORDER BY e.id LIMIT {limit}"
        )
    } else {
        let kinds: Vec<String> = if query.kinds.is_empty() {
            stored_kinds(conn)?
        } else {
            // A set: a kind named twice is one walk, and never enough walks to fall back
            // to the search of every kind below.
            let named: std::collections::BTreeSet<&str> =
                query.kinds.iter().map(|k| k.as_str()).collect();
            named.into_iter().map(str::to_string).collect()
        };
        if kinds.is_empty() {
            // Nothing stored yet.
            return Ok(Vec::new());
        }
        if kinds.len() > MERGED_KINDS {
            params.extend(filter_params);
            format!(
                "SELECT {columns} {from} WHERE 1{filter} ORDER BY e.at DESC, e.kind, e.id LIMIT {limit}"
            )
        } else {
            let walks: Vec<String> = kinds
                .into_iter()
                .map(|kind| {
                    params.push(kind.into());
                    params.extend(filter_params.iter().cloned());
                    format!(
                        "SELECT * FROM (SELECT {columns} {from} WHERE e.kind = ?{filter}
                         ORDER BY e.at DESC, e.id LIMIT {limit})"
                    )
                })
                .collect();
            // Columns by position: 1 is `id`, 2 is `at`, 3 is `kind`.
            format!(
                "{} ORDER BY 2 DESC, 3, 1 LIMIT {limit}",
                walks.join(" UNION ALL ")
            )
        }
    };
    let mut stmt = conn.prepare_cached(&sql)?;
    let ids = stmt.query_map(rusqlite::params_from_iter(params), |row| {
        row.get::<_, i64>(0)
    })?;
    Ok(ids.collect::<rusqlite::Result<_>>()?)
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

/// Resolve and replay on the store itself, through the guarded transition.
fn act(
    conn: &Connection,
    clock: &dyn Clock,
    id: &str,
    action: Action,
    request: &ActionRequest,
) -> Result<ActionResponse> {
    Ok(remediation::apply(
        conn,
        clock.now(),
        id,
        action,
        request,
        &Actor::local(&local_operator(request.operator.as_deref())),
    )?)
}

/// On the store itself the operator is the one the command names, else who the process
/// runs as, as the command line says.
fn local_operator(named: Option<&str>) -> String {
    named
        .map(str::trim)
        .filter(|o| !o.is_empty())
        .map(str::to_string)
        .unwrap_or_else(crate::identity::account_name)
}

/// A store file opened directly.
pub struct SqliteStore {
    path: PathBuf,
    conn: Connection,
    clock: Box<dyn Clock>,
    /// Said once to the operator: how the file had to be opened.
    pub note: Option<String>,
    /// The config context it was opened for, named in every prompt and summary.
    pub context: Option<String>,
    /// How the file was opened; kept while the connection is, since it may own the
    /// private copy the connection reads.
    _access: schema::Access,
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
            context: None,
            _access: access,
        })
    }

    /// For resolve and replay, alongside a running worker.
    pub fn open_read_write(path: &Path) -> Result<Self> {
        Self::open(path, OpenMode::ReadWrite)
    }

    /// The same store, its changes stamped by `clock` (tests, the lab).
    pub fn with_clock(mut self, clock: Box<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    fn open(path: &Path, mode: OpenMode) -> Result<Self> {
        Ok(Self {
            path: path.to_path_buf(),
            conn: schema::open(path, mode)?,
            clock: Box::new(SystemClock),
            note: None,
            context: None,
            _access: schema::Access::Shared,
        })
    }
}

impl Store for SqliteStore {
    fn identity(&self) -> Result<Option<String>> {
        Ok(crate::runtime::queries::store_identity(
            &self.conn, &self.path,
        )?)
    }

    fn ids_with_prefix(&self, prefix: &str, dlq_only: bool, limit: usize) -> Result<Vec<String>> {
        Ok(queries::ids_with_prefix(
            &self.conn, prefix, dlq_only, limit,
        )?)
    }

    fn health(&self, window_seconds: f64, until: Option<f64>) -> Result<queries::Health> {
        Ok(queries::health(
            &self.conn,
            self.clock.now(),
            window_seconds,
            until,
        )?)
    }

    fn describe(&self) -> String {
        crate::store::in_context(self.context.as_deref(), &self.path.display().to_string())
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
        super::page::dlq_page(&self.conn, selection, cursor, limit, include_events)
    }

    fn each_attempted(
        &self,
        selection: &Selection,
        window: super::Window,
        visit: &mut super::EntryVisit<'_>,
    ) -> Result<()> {
        super::walk::each_entry(
            &self.conn,
            super::Rows::Attempted { selection, window },
            visit,
        )
    }

    fn each_triaged(&self, selection: &Selection, visit: &mut super::Visit<'_>) -> Result<()> {
        super::walk::each_triaged(&self.conn, selection, &mut super::keeping(selection, visit))
    }

    fn pulse(&self, window: crate::pulse::Window) -> Result<crate::pulse::Pulse> {
        Ok(crate::pulse::read(&self.conn, window)?)
    }

    fn verify(
        &self,
        ids: &[String],
        sources: &crate::verify::Sources,
    ) -> Result<crate::verify::Asked> {
        Ok(crate::verify::ask(
            &self.conn,
            ids,
            sources,
            self.clock.now(),
        )?)
    }

    fn record_verified(
        &self,
        asked: &crate::verify::Asked,
        operator: &str,
        why: crate::remediation::verified::Why<'_>,
    ) -> Vec<std::result::Result<crate::remediation::verified::Written, (String, StoreError)>> {
        crate::verify::record(
            &self.conn,
            self.clock.now(),
            asked,
            &Actor::local(operator),
            why,
            crate::remediation::verified::ReadOn::Here,
        )
        .into_iter()
        .map(|result| result.map_err(|(id, rejection)| (id, rejection.into())))
        .collect()
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

    fn note(&self, request: &crate::api::NoteRequest) -> Result<crate::api::NoteRow> {
        let actor = Actor::local(&local_operator(request.operator.as_deref()));
        Ok(remediation::note::write(
            &self.conn,
            self.clock.now(),
            request,
            &actor,
        )?)
    }

    fn notes(&self, since: Option<f64>, until: Option<f64>) -> Result<Vec<crate::api::NoteRow>> {
        Ok(queries::read_notes(&self.conn, since, until)?)
    }
}
