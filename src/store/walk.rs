//! The triage of every selected DLQ entry of a store, in id order, in two stages: the
//! calling thread steps the database and copies raw cells into batches; a second thread
//! decodes, triages and hands each entry on. Batches go back to be refilled, so a walk
//! of any length allocates little after the first few and holds a few MiB at most.
//!
//! SQLite is stepped in the id index's order and each entry's row read by its rowid
//! (no sort, nothing read twice); PostgreSQL streams the entries and their events as two
//! reads of one snapshot, each in its index's order, merged by id as they arrive.

use super::selection::Rows;
use super::{EntryVisit, Events, Result, Selection, StoreError, StoredEvent, Triaged, Visit};
use crate::db::pg::PgConn;
use crate::db::snapshot::Merged;
use crate::db::{Db, Dialect};
use crate::history::{Observed, Reader};
use crate::model::payload_problem;
use crate::runtime::queries::{
    self, Copies, EVENT_COLUMNS, NOTIFICATION_COLUMNS, NOTIFICATION_WIDTH, Source,
};
use crate::triage;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, Statement};
use std::sync::mpsc::{Receiver, SyncSender, channel, sync_channel};

/// Bytes of copied rows handed from the reading thread to the triaging one at a time.
const BATCH_BYTES: usize = 1 << 20;

/// The columns of one event in a walk's rows, after the row id.
const EVENT_WIDTH: usize = 4;

/// The index schema version 2 keeps of dead letters by time.
const BY_TIME: &str = "uns_notifications_dlq_updated";

pub fn each_triaged(conn: &Db<'_>, selection: &Selection, visit: &mut Visit<'_>) -> Result<()> {
    let mut reader = Reader::default();
    walk(conn, Rows::Dlq(selection), Events::All, |batch| {
        triage_batch(batch, selection, &mut reader, visit)
    })
}

/// Every notification `rows` picks, in id order, with those of its events `events` asks
/// for, as stored (reconcile).
pub fn each_entry(
    conn: &Db<'_>,
    rows: Rows<'_>,
    events: Events<'_>,
    visit: &mut EntryVisit<'_>,
) -> Result<()> {
    let selection = rows.selection();
    walk(conn, rows, events, |batch| {
        entry_batch(batch, selection, visit)
    })
}

/// The attempts started in a window, read apart from the histories that made them.
#[derive(Debug, Default, PartialEq)]
pub struct WindowStarts {
    /// The notifications that made one, their ids read as the walk reads them.
    pub notifications: std::collections::HashSet<String, foldhash::fast::RandomState>,
    /// When each started (a start whose time cannot be read is left out).
    pub at: Vec<f64>,
}

/// Every attempt started in `window`, as [`Rows::Attempted`] finds them (the same
/// condition), by the index of kinds by time: a cost of the window's starts alone.
pub fn window_starts(conn: &Db<'_>, window: super::Window) -> Result<WindowStarts> {
    let (within, params) = window.starts_sql();
    let mut starts = WindowStarts::default();
    conn.each(
        &format!(
            "SELECT a.notification_id, a.at FROM uns_events a
             WHERE a.kind = 'CHANNEL_ATTEMPT_STARTED'{within}"
        ),
        &params,
        &mut |row| {
            let mut cells = crate::db::value::Cells::new(row);
            // Most notifications start several attempts: each id is copied once.
            if !matches!(row.cell(0), Ok(ValueRef::Null)) {
                let id = cells.text_ref(0, "notification_id");
                if !starts.notifications.contains(&*id) {
                    starts.notifications.insert(id.into_owned());
                }
            }
            starts.at.extend(cells.real(1, "at"));
            Ok(())
        },
    )?;
    Ok(starts)
}

/// Reads `rows` with `events` on this thread and hands each batch to `decode` on another.
fn walk(
    conn: &Db<'_>,
    rows: Rows<'_>,
    events: Events<'_>,
    mut decode: impl FnMut(&Batch) -> Result<()> + Send,
) -> Result<()> {
    let (full, arriving) = sync_channel::<Batch>(2);
    let (spare, returned) = channel::<Batch>();
    std::thread::scope(|scope| {
        let decoder = std::thread::Builder::new()
            .name("decode".into())
            .spawn_scoped(scope, move || {
                for batch in arriving {
                    decode(&batch)?;
                    let _ = spare.send(batch);
                }
                Ok(())
            })
            .map_err(|err| StoreError::Other(format!("cannot start the decode thread: {err}")))?;
        let read = match conn {
            Db::Sqlite(conn) => read(conn, rows, events, full, returned),
            Db::Postgres(conn) => stream(conn, rows, events, full, returned),
        };
        let decoded = decoder
            .join()
            .unwrap_or_else(|_| Err(StoreError::Other("the decode thread failed".into())));
        // The visitor's error comes first: it is why the reading stopped.
        decoded.and(read)
    })
}

/// Rows copied by the reading thread: each entry's row, then its events' cells.
#[derive(Default)]
struct Batch {
    copies: Copies,
    /// Where each entry's row copy starts, and how many events follow it.
    entries: Vec<(usize, usize)>,
}

/// The notification columns a walk of `rows` reads: a triage shows only what the
/// message was, so nothing else of it is read (see Triaged).
fn columns(rows: Rows<'_>, dialect: Dialect) -> String {
    match rows {
        Rows::Dlq(_) => {
            NOTIFICATION_COLUMNS.replace("n.payload", super::selection::message_only(dialect))
        }
        Rows::Attempted { .. } => rows.notification_columns(dialect).into_owned(),
    }
}

/// The two reads a walk of `rows` (with `events`) makes of PostgreSQL, and the values
/// both take: the entries by id, their first column the id; and their events by entry
/// and id, their first column the entry's id. (The benchmark has psql stream the very
/// same rows.)
pub fn postgres_reads(
    rows: Rows<'_>,
    events: Events<'_>,
) -> (String, String, Vec<rusqlite::types::Value>) {
    let (filter, params) = rows.where_sql(Dialect::Postgres);
    let columns = columns(rows, Dialect::Postgres);
    let heads =
        format!("SELECT n.id, {columns} FROM uns_notifications n WHERE {filter} ORDER BY n.id");
    let kinds = events.join_sql();
    let lines = format!(
        "SELECT e.notification_id, {EVENT_COLUMNS} FROM uns_events e
         WHERE e.notification_id IN (SELECT n.id FROM uns_notifications n WHERE {filter}){kinds}
         ORDER BY e.notification_id, e.id"
    );
    (heads, lines, params)
}

/// Streams the selected rows and, after each, its events from PostgreSQL: two reads of
/// one snapshot merged by the entry's id (see [`crate::db::snapshot`]), each in the
/// order of its own index, so the server neither sorts nor repeats an entry's columns
/// on its event lines. The id is the table's key, so it orders the entries alone.
fn stream(
    conn: &PgConn,
    rows: Rows<'_>,
    events: Events<'_>,
    full: SyncSender<Batch>,
    returned: Receiver<Batch>,
) -> Result<()> {
    let (heads, lines, params) = postgres_reads(rows, events);
    let mut batcher = Batcher {
        batch: Batch::default(),
        full,
        returned,
        by_rowid: None,
        current: None,
    };
    let mut taken = Ok(true);
    conn.merge(&heads, &lines, &params, &mut |row| {
        taken = match row {
            Merged::Head(head) => batcher.begin(head, 1..1 + NOTIFICATION_WIDTH),
            Merged::Line(line) => batcher.event(line, 1..1 + EVENT_WIDTH).map(|()| true),
        };
        Ok(matches!(taken, Ok(true)))
    })?;
    if taken? {
        batcher.finish();
    }
    Ok(())
}

/// Steps the store and fills batches. Rows come in the walk's shape: the row id, then
/// [`EVENT_COLUMNS`] (NULL when the entry has none of the events asked for).
fn read(
    conn: &Connection,
    rows: Rows<'_>,
    events: Events<'_>,
    full: SyncSender<Batch>,
    returned: Receiver<Batch>,
) -> Result<()> {
    let (filter, params) = rows.where_sql(Dialect::Sqlite);
    // The kinds join with the events, so an entry with none of them still comes, alone.
    let kinds = events.join_sql();
    let walk_sql = |which: &str| {
        format!(
            "SELECT n.rowid, {EVENT_COLUMNS}
             FROM uns_notifications n LEFT JOIN uns_events e ON e.notification_id = n.id{kinds}
             WHERE {which} ORDER BY n.id, n.rowid, e.id"
        )
    };
    let columns = columns(rows, Dialect::Sqlite);
    let mut batcher = Batcher {
        batch: Batch::default(),
        full,
        returned,
        by_rowid: Some(conn.prepare(&format!(
            "SELECT {columns} FROM uns_notifications n WHERE n.rowid = ?1"
        ))?),
        current: None,
    };
    let windowed = match rows {
        Rows::Dlq(selection) => selection.since.is_some() || selection.until.is_some(),
        Rows::Attempted { .. } => false,
    };
    if windowed && has_index(conn, BY_TIME)? {
        // A time window: find its entries by the index of dead letters by time, then
        // read each, so a window costs what it holds, not what the DLQ holds.
        let mut window = conn.prepare(&format!(
            "SELECT n.rowid FROM uns_notifications n INDEXED BY {BY_TIME}
             WHERE {filter} ORDER BY n.id, n.rowid"
        ))?;
        let rowids: Vec<i64> = window
            .query_map(rusqlite::params_from_iter(params), |row| row.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        let mut entry = conn.prepare(&walk_sql("n.rowid = ?1"))?;
        for rowid in rowids {
            let mut rows = entry.query([rowid])?;
            while let Some(row) = rows.next()? {
                if !batcher.take(row)? {
                    return Ok(());
                }
            }
        }
    } else {
        let mut walk = conn.prepare(&walk_sql(&filter))?;
        let mut rows = walk.query(rusqlite::params_from_iter(params))?;
        while let Some(row) = rows.next()? {
            if !batcher.take(row)? {
                return Ok(());
            }
        }
    }
    batcher.finish();
    Ok(())
}

fn has_index(conn: &Connection, name: &str) -> Result<bool> {
    Ok(conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = ?1)",
        [name],
        |row| row.get(0),
    )?)
}

/// Fills batches from the walk's rows and hands them over when full.
struct Batcher<'c> {
    batch: Batch,
    full: SyncSender<Batch>,
    returned: Receiver<Batch>,
    /// SQLite: reads an entry's row by its rowid. None: the row follows the event's
    /// columns on each line of the walk.
    by_rowid: Option<Statement<'c>>,
    current: Option<i64>,
}

impl Batcher<'_> {
    /// Copies one row of the walk; false when the triage side has stopped listening.
    fn take(&mut self, row: &dyn Source) -> Result<bool> {
        let rowid = match row.cell(0)? {
            ValueRef::Integer(rowid) => rowid,
            other => {
                return Err(StoreError::Other(format!(
                    "a walk read a row id of type {:?}",
                    other.data_type()
                )));
            }
        };
        if self.current != Some(rowid) {
            self.current = Some(rowid);
            if !self.hand_on_when_full() {
                return Ok(false);
            }
            let copies = &mut self.batch.copies;
            let start = match &mut self.by_rowid {
                Some(by_rowid) => {
                    by_rowid.query_row([rowid], |n| copies.push(n, 0..NOTIFICATION_WIDTH))?
                }
                None => {
                    let from = 1 + EVENT_WIDTH;
                    copies.push(row, from..from + NOTIFICATION_WIDTH)?
                }
            };
            self.batch.entries.push((start, 0));
        }
        if row.cell(1)? == ValueRef::Null {
            return Ok(true);
        }
        self.event(row, 1..1 + EVENT_WIDTH)?;
        Ok(true)
    }

    /// Starts an entry with its row, `columns` of `row`; false when the triage side has
    /// stopped listening.
    fn begin(&mut self, row: &dyn Source, columns: std::ops::Range<usize>) -> Result<bool> {
        if !self.hand_on_when_full() {
            return Ok(false);
        }
        let start = self.batch.copies.push(row, columns)?;
        self.batch.entries.push((start, 0));
        Ok(true)
    }

    /// Hands the batch on, before an entry begins, when it is full; false when the
    /// triage side has stopped listening.
    fn hand_on_when_full(&mut self) -> bool {
        if self.batch.copies.size() < BATCH_BYTES {
            return true;
        }
        let next = self.returned.try_recv().unwrap_or_default();
        if self
            .full
            .send(std::mem::replace(&mut self.batch, next))
            .is_err()
        {
            return false;
        }
        self.batch.copies.clear();
        self.batch.entries.clear();
        true
    }

    /// Adds `columns` of `row` as an event of the current entry.
    fn event(&mut self, row: &dyn Source, columns: std::ops::Range<usize>) -> Result<()> {
        self.batch.copies.push(row, columns)?;
        if let Some((_, events)) = self.batch.entries.last_mut() {
            *events += 1;
        }
        Ok(())
    }

    fn finish(self) {
        if !self.batch.entries.is_empty() {
            let _ = self.full.send(self.batch);
        }
    }
}

/// Decodes and triages one batch of copied rows, with the checks and notes of
/// `queries::notification` and `queries::event`; `reader` reads every entry in turn.
fn triage_batch(
    batch: &Batch,
    selection: &Selection,
    reader: &mut Reader,
    visit: &mut Visit<'_>,
) -> Result<()> {
    for &(start, events) in &batch.entries {
        let row = queries::notification(&batch.copies.row(start), 0);
        if !selection.keeps_channels(&row.channels, !row.unreadable.is_empty()) {
            continue;
        }
        reader.begin(&row);
        let mut unreadable = Vec::new();
        for event in 0..events {
            let copy = batch
                .copies
                .row(start + NOTIFICATION_WIDTH + event * EVENT_WIDTH);
            let mut cells = queries::Cells::new(&copy);
            let id = cells.integer(0, "id");
            let at = cells.required_real(1, "at");
            let kind = cells.text_ref(2, "kind");
            let payload = cells.text_ref(3, "payload");
            let observed = Observed::from_text(id, at, &kind, &payload)
                .with_unreadable(cells.problems.first().map(String::as_str));
            let readable = reader.read(observed);
            if !readable && let Some(problem) = payload_problem(&payload) {
                cells.problems.push(problem);
            }
            unreadable.extend(cells.problems.iter().map(|p| format!("event {id}: {p}")));
        }
        let verdict = triage::judge(&row, reader.history());
        let mut all = row.unreadable.clone();
        all.extend(unreadable);
        visit(Triaged {
            row,
            verdict,
            unreadable: all,
        })?;
    }
    Ok(())
}

/// Decodes one batch of copied rows into rows and their events as stored, with the
/// checks and notes of `queries::notification` and the DLQ page's events.
fn entry_batch(batch: &Batch, selection: &Selection, visit: &mut EntryVisit<'_>) -> Result<()> {
    let mut copies = Vec::new();
    for &(start, count) in &batch.entries {
        let row = queries::notification(&batch.copies.row(start), 0);
        if !selection.keeps_channels(&row.channels, !row.unreadable.is_empty()) {
            continue;
        }
        copies.clear();
        copies.extend((0..count).map(|event| {
            batch
                .copies
                .row(start + NOTIFICATION_WIDTH + event * EVENT_WIDTH)
        }));
        let events: Vec<StoredEvent<'_>> = copies.iter().map(StoredEvent::from_copy).collect();
        visit(row, &events)?;
    }
    Ok(())
}
