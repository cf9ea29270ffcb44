//! A page of the DLQ as the API's JSON (`DlqPage`), written as the store is read.
//!
//! A large triage over HTTP moves every event through here, so an entry's events are
//! copied once into a reused buffer and written from it; no event becomes a struct of
//! its own. The typed page is read back from the same bytes, so the server and the
//! SQLite backend can never disagree about what a page holds.

use super::selection::Rows;
use super::{Result, Selection, decode_cursor, encode_cursor};
use crate::api::DlqPage;
use crate::db::{Db, Dialect};
use crate::model::Notification;
use crate::runtime::queries::{self, Copies, EVENT_COLUMNS};
use rusqlite::types::ValueRef;
use serde::Serialize;
use serde::ser::{SerializeSeq, Serializer};

/// The columns of one event in the page's rows, after the row id.
const EVENT_WIDTH: usize = 4;

/// One page of the selected DLQ entries, ordered by id.
pub fn dlq_page(
    conn: &Db<'_>,
    selection: &Selection,
    cursor: Option<&str>,
    limit: usize,
    include_events: bool,
) -> Result<DlqPage> {
    let (json, _) = dlq_page_json(conn, selection, cursor, limit, include_events)?;
    serde_json::from_slice(&json)
        .map_err(|err| super::StoreError::Other(format!("a page did not read back: {err}")))
}

/// The page as JSON, and the cursor of the next page (also in the JSON).
pub fn dlq_page_json(
    conn: &Db<'_>,
    selection: &Selection,
    cursor: Option<&str>,
    limit: usize,
    include_events: bool,
) -> Result<(Vec<u8>, Option<String>)> {
    page_json(conn, Rows::Dlq(selection), cursor, limit, include_events)
}

/// A page of `rows` as JSON in the DLQ page's shape, and the cursor of the next page.
pub fn page_json(
    conn: &Db<'_>,
    rows: Rows<'_>,
    cursor: Option<&str>,
    limit: usize,
    include_events: bool,
) -> Result<(Vec<u8>, Option<String>)> {
    let limit = limit.clamp(1, 1000);
    let selection = rows.selection();
    let dialect = conn.dialect();
    let (filter, mut params) = rows.where_sql(dialect);
    // No cursor: from the start, rows without an id (they sort first) included. After
    // one: a range of the id index, so every page costs the same.
    let position = match cursor.map(decode_cursor).transpose()? {
        None => "",
        Some((rowid, id)) => {
            params.extend([id.clone().into(), id.into(), rowid.into()]);
            " AND n.id >= ? AND (n.id > ? OR n.rowid > ?)"
        }
    };
    let columns = rows.notification_columns(dialect);
    let sql = page_sql(dialect, &columns, &filter, position, include_events, limit);
    let by_rowid = format!("SELECT {columns} FROM uns_notifications n WHERE n.rowid = ?1");
    let width = if include_events { 1 + EVENT_WIDTH } else { 2 };
    // Room for a typical page up front: growing a page of megabytes copies it again.
    let mut json = Vec::with_capacity(limit * if include_events { 4096 } else { 512 });
    json.extend_from_slice(b"{\"entries\":[");
    let mut page = Writer {
        json,
        first: true,
        selection,
        include_events,
        events: Copies::default(),
        starts: Vec::new(),
    };
    let mut current: Option<(i64, Notification)> = None;
    let mut taken = 0;
    let mut next = None;
    let mut failed = None;
    let mut each = |row: &dyn queries::Source| -> Result<bool> {
        let rowid = row_id(row)?;
        if current.as_ref().is_none_or(|(last, _)| *last != rowid) {
            if let Some((last, entry)) = current.take() {
                if taken == limit {
                    next = Some(encode_cursor(last, &entry.id));
                    page.entry(&entry)?;
                    return Ok(false);
                }
                page.entry(&entry)?;
            }
            taken += 1;
            let notification = match dialect {
                Dialect::Sqlite => conn
                    .row(&by_rowid, crate::args![rowid], |n| {
                        Ok(queries::notification(n, 0))
                    })?
                    .ok_or_else(|| super::StoreError::Other("a row went away".into()))?,
                Dialect::Postgres => queries::notification(row, width),
            };
            current = Some((rowid, notification));
        }
        if include_events && row.cell(1)? != ValueRef::Null {
            let start = page.events.push(row, 1..1 + EVENT_WIDTH)?;
            page.starts.push(start);
        }
        Ok(true)
    };
    conn.stream(&sql, &params, &mut |row| match each(row) {
        Ok(more) => Ok(more),
        Err(err) => {
            failed = Some(err);
            Ok(false)
        }
    })?;
    if let Some(err) = failed {
        return Err(err);
    }
    if next.is_none()
        && let Some((_, entry)) = current
    {
        page.entry(&entry)?;
    }
    page.finish(next)
}

/// The page's query: in SQLite, the entries' row ids (and their events) in index order
/// with no sort, the row's columns read once per entry by rowid; in PostgreSQL, the
/// page's entries (and one more) picked first, each line carrying its entry's columns.
fn page_sql(
    dialect: Dialect,
    columns: &str,
    filter: &str,
    position: &str,
    include_events: bool,
    limit: usize,
) -> String {
    let (event_columns, join, order) = if include_events {
        (
            EVENT_COLUMNS,
            " LEFT JOIN uns_events e ON e.notification_id = n.id",
            ", e.id",
        )
    } else {
        ("NULL", "", "")
    };
    match dialect {
        Dialect::Sqlite => format!(
            "SELECT n.rowid, {event_columns} FROM uns_notifications n{join}
             WHERE {filter}{position} ORDER BY n.id, n.rowid{order}"
        ),
        Dialect::Postgres => format!(
            "SELECT n.rowid, {event_columns}, {columns} FROM uns_notifications n{join}
             WHERE n.id IN (SELECT n.id FROM uns_notifications n WHERE {filter}{position}
                            ORDER BY n.id, n.rowid LIMIT {})
             ORDER BY n.id, n.rowid{order}",
            limit + 1
        ),
    }
}

/// A line's row id, its first column.
fn row_id(row: &dyn queries::Source) -> Result<i64> {
    match row.cell(0)? {
        ValueRef::Integer(rowid) => Ok(rowid),
        other => Err(super::StoreError::Other(format!(
            "a page read a row id of type {:?}",
            other.data_type()
        ))),
    }
}

fn unwritable(err: serde_json::Error) -> super::StoreError {
    super::StoreError::Other(format!("cannot write a page: {err}"))
}

/// The page being written, and the current entry's events.
struct Writer<'s> {
    json: Vec<u8>,
    first: bool,
    selection: &'s Selection,
    include_events: bool,
    events: Copies,
    starts: Vec<usize>,
}

impl Writer<'_> {
    /// The page's JSON, closed, with the cursor of the next page.
    fn finish(self, next: Option<String>) -> Result<(Vec<u8>, Option<String>)> {
        let mut json = self.json;
        json.extend_from_slice(b"],\"next_cursor\":");
        serde_json::to_writer(&mut json, &next).map_err(unwritable)?;
        json.push(b'}');
        Ok((json, next))
    }

    /// Writes one entry (unless the exact channel test drops it) and clears its events.
    fn entry(&mut self, row: &Notification) -> Result<()> {
        if self
            .selection
            .keeps_channels(&row.channels, !row.unreadable.is_empty())
        {
            if !self.first {
                self.json.push(b',');
            }
            self.first = false;
            let entry = Entry {
                row,
                events: self.include_events.then_some(Events {
                    copies: &self.events,
                    starts: &self.starts,
                }),
            };
            serde_json::to_writer(&mut self.json, &entry).map_err(unwritable)?;
        }
        self.events.clear();
        self.starts.clear();
        Ok(())
    }
}

/// `DlqEntry`, borrowing its row and events.
#[derive(Serialize)]
struct Entry<'a> {
    #[serde(flatten)]
    row: &'a Notification,
    #[serde(skip_serializing_if = "Option::is_none")]
    events: Option<Events<'a>>,
}

struct Events<'a> {
    copies: &'a Copies,
    starts: &'a [usize],
}

impl Serialize for Events<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.starts.len()))?;
        for start in self.starts {
            let copy = self.copies.row(*start);
            seq.serialize_element(&super::StoredEvent::from_copy(&copy))?;
        }
        seq.end()
    }
}
