//! The store read directly, in either engine (the SQLite file or the PostgreSQL
//! database), and the read queries the API server shares with it.
//!
//! Read commands open the store read-only (SQLite's read-only connection, PostgreSQL's
//! read-only session), so a triage cannot write even by accident. Resolve and replay go
//! through `remediation::apply`, which the server calls too.

use super::{EventQuery, Result, Selection, Store, StoreError};
use crate::api::{
    ActionRequest, ActionResponse, DlqPage, EventRow, EventsResponse, NotificationDoc,
};
use crate::clock::{Clock, SystemClock};
use crate::db::pg::{PgConn, Target};
use crate::db::{Conn, Db};
use crate::remediation::{self, Action, Actor};
use crate::runtime::queries::{self, EVENT_COLUMNS};
use crate::runtime::schema::{self, OpenMode};
use std::path::Path;

pub fn notification_doc(conn: &Db<'_>, id: &str) -> Result<NotificationDoc> {
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
/// kind is one walk down the (kind, at) index, stopped after `limit` rows, and the
/// database merges the walks, so the newest N cost N steps per kind however large the
/// store. After a cursor: oldest first by id, for following.
pub fn search_events(conn: &Db<'_>, query: &EventQuery) -> Result<EventsResponse> {
    let ids = pick_events(conn, query)?;
    let columns =
        format!("{EVENT_COLUMNS}, e.notification_id, n.status, n.dead_letter, n.attempts, n.cycle");
    let sql = format!(
        "SELECT {columns} FROM uns_events e JOIN uns_notifications n ON n.id = e.notification_id
         WHERE e.id = ?1"
    );
    let mut events = Vec::with_capacity(ids.len());
    for id in ids {
        let found = conn.row(&sql, crate::args![id], |row| {
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
        })?;
        // Gone between the two reads only if someone deleted it, which nothing here does.
        events.extend(found);
    }
    Ok(EventsResponse { events })
}

/// The ids [`search_events`] answers with, in its order. Only the index columns are
/// ordered and merged, so a payload of megabytes is read once, for the rows shown, and
/// never copied through a sorter.
fn pick_events(conn: &Db<'_>, query: &EventQuery) -> Result<Vec<i64>> {
    let (filter, filter_params) = query.selection.events_sql(conn.dialect());
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
                "SELECT {columns} {from} WHERE TRUE{filter} ORDER BY e.at DESC, e.kind, e.id LIMIT {limit}"
            )
        } else {
            let walks: Vec<String> = kinds
                .into_iter()
                .enumerate()
                .map(|(walk, kind)| {
                    params.push(kind.into());
                    params.extend(filter_params.iter().cloned());
                    format!(
                        "SELECT * FROM (SELECT {columns} {from} WHERE e.kind = ?{filter}
                         ORDER BY e.at DESC, e.id LIMIT {limit}) AS walk{walk}"
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
    Ok(conn.rows(&sql, &params, |row| {
        Ok(queries::Cells::new(row).integer(0, "id"))
    })?)
}

fn placeholders(n: usize) -> String {
    vec!["?"; n].join(", ")
}

/// Every kind stored, by seeking the (kind, at) index from one kind to the next.
fn stored_kinds(conn: &Db<'_>) -> Result<Vec<String>> {
    let sql = "SELECT kind FROM uns_events WHERE kind > ?1 ORDER BY kind LIMIT 1";
    let mut kinds = Vec::new();
    let mut after = String::new();
    while let Some(kind) = conn
        .row(sql, crate::args![&after], |row| {
            Ok(queries::Cells::new(row).text(0, "kind"))
        })?
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
    conn: &Db<'_>,
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

/// A store opened directly: a SQLite file, or a PostgreSQL database.
pub struct DirectStore {
    /// Where it is, as it may be printed: the file's path, or the URL without a password.
    place: String,
    /// What its identity is hashed with (see `queries::store_identity`).
    identity_place: String,
    conn: Conn,
    clock: Box<dyn Clock>,
    /// Said once to the operator: how the file had to be opened.
    pub note: Option<String>,
    /// The config context it was opened for, named in every prompt and summary.
    pub context: Option<String>,
    /// How a file was opened; kept while the connection is, since it may own the
    /// private copy the connection reads.
    _access: schema::Access,
    /// The SQLite file the connection opened, as its path named it then.
    file: Option<FileSeen>,
}

/// A file as a path named it: its device and inode.
struct FileSeen {
    path: std::path::PathBuf,
    dev: u64,
    ino: u64,
}

impl FileSeen {
    fn of(path: &Path) -> Option<Self> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(path).ok()?;
        Some(Self {
            path: path.to_path_buf(),
            dev: meta.dev(),
            ino: meta.ino(),
        })
    }

    /// Why the path no longer names this file, if it does not.
    fn gone(&self) -> Option<String> {
        use std::os::unix::fs::MetadataExt;
        let path = self.path.display();
        match std::fs::metadata(&self.path) {
            Ok(meta) if (meta.dev(), meta.ino()) == (self.dev, self.ino) => None,
            Ok(_) => Some(format!(
                "{path} is another file now (replaced while it was read, as a restore or a move leaves it): what was read so far was the old file's; run the command again to read the new one"
            )),
            Err(err) => Some(format!(
                "{path} is no longer there ({err}): what was read so far was the file that was there"
            )),
        }
    }
}

impl DirectStore {
    /// The store at `place`, read-only unless `write`.
    pub fn open(place: &crate::db::Place, write: bool) -> Result<Self> {
        use crate::db::Place;
        match (place, write) {
            (Place::File(path), false) => Self::open_read_only(path),
            (Place::File(path), true) => Self::open_read_write(path),
            (Place::Postgres(target), write) => Self::open_postgres(target, write),
        }
    }

    /// Read-only: every read command uses this.
    pub fn open_read_only(path: &Path) -> Result<Self> {
        let (conn, access) = schema::open_read_only(path)?;
        Ok(Self {
            note: access.note(path),
            _access: access,
            ..Self::of_file(path, conn)
        })
    }

    /// For resolve and replay, alongside a running worker.
    pub fn open_read_write(path: &Path) -> Result<Self> {
        Ok(Self::of_file(
            path,
            schema::open(path, OpenMode::ReadWrite)?,
        ))
    }

    /// A PostgreSQL store: read-only (a session that refuses every write) unless `write`.
    pub fn open_postgres(target: &Target, write: bool) -> Result<Self> {
        let conn = PgConn::open(target, false)?;
        if write {
            conn.takes_writes()?;
        } else {
            conn.read_only()?;
        }
        Ok(Self {
            place: conn.place.clone(),
            identity_place: conn.identity_place()?,
            conn: Conn::Postgres(Box::new(conn)),
            clock: Box::new(SystemClock),
            note: None,
            context: None,
            _access: schema::Access::Shared,
            file: None,
        })
    }

    fn of_file(path: &Path, conn: rusqlite::Connection) -> Self {
        Self {
            file: FileSeen::of(path),
            place: path.display().to_string(),
            identity_place: queries::file_place(path),
            conn: Conn::Sqlite(conn),
            clock: Box::new(SystemClock),
            note: None,
            context: None,
            _access: schema::Access::Shared,
        }
    }

    /// The same store, its changes stamped by `clock` (tests, the lab).
    pub fn with_clock(mut self, clock: Box<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The connection, for the lab and the checks that read it themselves.
    pub fn db(&self) -> Db<'_> {
        self.conn.db()
    }
}

impl Store for DirectStore {
    fn identity(&self) -> Result<Option<String>> {
        Ok(queries::store_identity(&self.db(), &self.identity_place)?)
    }

    fn ids_with_prefix(&self, prefix: &str, dlq_only: bool, limit: usize) -> Result<Vec<String>> {
        Ok(queries::ids_with_prefix(
            &self.db(),
            prefix,
            dlq_only,
            limit,
        )?)
    }

    fn health(&self, window_seconds: f64, until: Option<f64>) -> Result<queries::Health> {
        Ok(queries::health(
            &self.db(),
            self.clock.now(),
            window_seconds,
            until,
        )?)
    }

    fn now(&self) -> Result<f64> {
        Ok(self.db().now(self.clock.now())?)
    }

    fn describe(&self) -> String {
        crate::store::in_context(self.context.as_deref(), &self.place)
    }

    fn replaced(&self) -> Option<String> {
        self.file.as_ref()?.gone()
    }

    fn operator(&self, claimed: &str) -> Result<String> {
        Ok(claimed.to_string())
    }

    fn notification(&self, id: &str) -> Result<NotificationDoc> {
        notification_doc(&self.db(), id)
    }

    fn events(&self, query: &EventQuery) -> Result<EventsResponse> {
        search_events(&self.db(), query)
    }

    fn dlq_page(
        &self,
        selection: &Selection,
        cursor: Option<&str>,
        limit: usize,
        include_events: bool,
    ) -> Result<DlqPage> {
        super::page::dlq_page(&self.db(), selection, cursor, limit, include_events)
    }

    fn each_attempted(
        &self,
        selection: &Selection,
        window: super::Window,
        events: super::Events<'_>,
        visit: &mut super::EntryVisit<'_>,
    ) -> Result<()> {
        super::walk::each_entry(
            &self.db(),
            super::Rows::Attempted { selection, window },
            events,
            visit,
        )
    }

    fn window_starts(&self, window: super::Window) -> Result<Option<super::WindowStarts>> {
        super::walk::window_starts(&self.db(), window).map(Some)
    }

    fn each_triaged(&self, selection: &Selection, visit: &mut super::Visit<'_>) -> Result<()> {
        super::walk::each_triaged(&self.db(), selection, &mut super::keeping(selection, visit))
    }

    fn pulse(&self, window: crate::pulse::Window) -> Result<crate::pulse::Pulse> {
        Ok(crate::pulse::read(&self.db(), window)?)
    }

    fn verify(
        &self,
        ids: &[String],
        sources: &crate::verify::Sources,
    ) -> Result<crate::verify::Asked> {
        Ok(crate::verify::ask(
            &self.db(),
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
            &self.db(),
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
            &self.db(),
            self.clock.as_ref(),
            id,
            Action::Resolve,
            request,
        )
    }

    fn replay(&self, id: &str, request: &ActionRequest) -> Result<ActionResponse> {
        act(&self.db(), self.clock.as_ref(), id, Action::Replay, request)
    }

    fn note(&self, request: &crate::api::NoteRequest) -> Result<crate::api::NoteRow> {
        let actor = Actor::local(&local_operator(request.operator.as_deref()));
        Ok(remediation::note::write(
            &self.db(),
            self.clock.now(),
            request,
            &actor,
        )?)
    }

    fn notes(&self, since: Option<f64>, until: Option<f64>) -> Result<Vec<crate::api::NoteRow>> {
        Ok(queries::read_notes(&self.db(), since, until)?)
    }
}
