//! A page of the DLQ as the API's JSON (`DlqPage`), written as the store is read.
//!
//! A large triage over HTTP moves every event through here, so an entry's events are
//! copied once into a reused buffer and written from it; no event becomes a struct of
//! its own. The typed page is read back from the same bytes, so the server and the
//! SQLite backend can never disagree about what a page holds.

use super::selection::{Events, Rows};
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
    page_json(
        conn,
        Rows::Dlq(selection),
        cursor,
        limit,
        include_events,
        Events::All,
    )
}

/// A page of `rows` as JSON in the DLQ page's shape, with (when `include_events`) those
/// of their events `events` asks for, and the cursor of the next page.
pub fn page_json(
    conn: &Db<'_>,
    rows: Rows<'_>,
    cursor: Option<&str>,
    limit: usize,
    include_events: bool,
    events: Events<'_>,
) -> Result<(Vec<u8>, Option<String>)> {
    let shown = Shown {
        include_events,
        events,
    };
    let probed = PROBED_PER_ENTRY * (limit.clamp(1, 1000) + 1);
    page_json_probing(conn, rows, cursor, limit, shown, probed)
}

/// What a page shows of each entry's events.
#[derive(Debug, Clone, Copy)]
struct Shown<'k> {
    include_events: bool,
    /// Which, when they are included.
    events: Events<'k>,
}

/// How many notifications a page of attempted notifications looks at one by one, per
/// entry it holds, before it reads the rest of the window at once.
const PROBED_PER_ENTRY: usize = 4;

/// [`page_json`], looking at the first `probed` notifications past the cursor one by
/// one when it pages attempted notifications on SQLite (0: none).
///
/// Asking the window of all the attempts at once costs the window's size on every page,
/// so paging a window of 100,000 cost as many times that as it has pages (50 s over the
/// API, against 1.5 s read directly). Notifications made at about the same time lie
/// together in id order, so the page's entries are usually among the next few: each of
/// those is asked about its own attempts. Only when they are not is the rest of the
/// window asked at once, past them: the page holds the same entries either way.
fn page_json_probing(
    conn: &Db<'_>,
    rows: Rows<'_>,
    cursor: Option<&str>,
    limit: usize,
    shown: Shown<'_>,
    probed: usize,
) -> Result<(Vec<u8>, Option<String>)> {
    let include_events = shown.include_events;
    let limit = limit.clamp(1, 1000);
    let selection = rows.selection();
    let dialect = conn.dialect();
    let after = cursor.map(decode_cursor).transpose()?;
    let columns = rows.notification_columns(dialect);
    let passes = statements(conn, rows, after, probed, &|filter, position| {
        page_sql(dialect, &columns, filter, position, shown, limit)
    })?;
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
    for (sql, params) in &passes {
        // The page is full once `each` asks for no more rows.
        let mut full = false;
        conn.stream(sql, params, &mut |row| match each(row) {
            Ok(more) => {
                full = !more;
                Ok(more)
            }
            Err(err) => {
                failed = Some(err);
                Ok(false)
            }
        })?;
        if let Some(err) = failed {
            return Err(err);
        }
        if full {
            break;
        }
    }
    if next.is_none()
        && let Some((_, entry)) = current
    {
        page.entry(&entry)?;
    }
    page.finish(next)
}

/// The statements of a page of `rows` past `after`, read in turn until it is full; `sql`
/// makes one of a condition and a position. Attempted notifications on SQLite are
/// looked at `probed` at a time first (see [`probing_passes`]); anything else is one
/// statement.
fn statements(
    conn: &Db<'_>,
    rows: Rows<'_>,
    after: Option<(i64, String)>,
    probed: usize,
    sql: &dyn Fn(&str, &str) -> String,
) -> Result<Vec<Statement>> {
    Ok(match (conn.dialect(), rows) {
        (Dialect::Sqlite, Rows::Attempted { .. }) if probed > 0 => {
            probing_passes(conn, rows, after, probed, sql)?
        }
        (dialect, _) => vec![at_once(rows, dialect, after, sql)],
    })
}

/// A statement's text and the values it takes.
type Statement = (String, Vec<rusqlite::types::Value>);

/// The one statement of the rows past `after`, the window (if any) asked at once.
fn at_once(
    rows: Rows<'_>,
    dialect: Dialect,
    after: Option<(i64, String)>,
    sql: &dyn Fn(&str, &str) -> String,
) -> Statement {
    let (filter, mut params) = rows.where_sql(dialect);
    let position = after_sql(after, &mut params);
    (sql(&filter, position), params)
}

/// Rows past the cursor `after` (none: from the start, rows without an id, which sort
/// first, included), as a range of the id index, so every page costs the same; its
/// values are added to `params`.
fn after_sql(
    after: Option<(i64, String)>,
    params: &mut Vec<rusqlite::types::Value>,
) -> &'static str {
    match after {
        None => "",
        Some((rowid, id)) => {
            params.extend([id.clone().into(), id.into(), rowid.into()]);
            " AND n.id >= ? AND (n.id > ? OR n.rowid > ?)"
        }
    }
}

/// The statements of a page of attempted notifications on SQLite, read in turn until the
/// page is full: the `probed` notifications past `after`, each asked about its own
/// attempts, then the rest, past them, with the window asked at once. `sql` makes a
/// statement of a condition and a position.
fn probing_passes(
    conn: &Db<'_>,
    rows: Rows<'_>,
    after: Option<(i64, String)>,
    probed: usize,
    sql: &dyn Fn(&str, &str) -> String,
) -> Result<Vec<Statement>> {
    use super::selection::Attempts;
    use rusqlite::types::Value;
    let mut position_params = Vec::new();
    let position = after_sql(after.clone(), &mut position_params);
    // The last of the notifications looked at one by one, by (id, row id).
    let last = conn.row(
        &format!(
            "SELECT n.id, n.rowid FROM uns_notifications n WHERE 1 = 1{position}
             ORDER BY n.id, n.rowid LIMIT 1 OFFSET {}",
            probed - 1
        ),
        &position_params,
        |row| {
            Ok(match (row.cell(0)?, row.cell(1)?) {
                (ValueRef::Text(id), ValueRef::Integer(rowid)) => std::str::from_utf8(id)
                    .ok()
                    .map(|id| (id.to_string(), rowid)),
                _ => None,
            })
        },
    )?;
    let (by_row, mut params) = rows.where_sql_as(Dialect::Sqlite, Attempts::RowByRow);
    params.extend(position_params);
    let Some(last) = last else {
        // Fewer remain: each is looked at on its own.
        return Ok(vec![(sql(&by_row, position), params)]);
    };
    let Some((id, rowid)) = last else {
        // An id that is not text bounds no range: the window at once, as it was.
        return Ok(vec![at_once(rows, Dialect::Sqlite, after, sql)]);
    };
    // Up to that notification. Written without an OR, so SQLite reads one range of the
    // id index in order and sorts nothing. A row without an id is never attempted (no
    // event names it), so leaving it out here changes no page.
    let up_to = format!("{position} AND n.id <= ? AND NOT (n.id = ? AND n.rowid > ?)");
    params.extend([
        Value::from(id.clone()),
        Value::from(id.clone()),
        Value::from(rowid),
    ]);
    Ok(vec![
        (sql(&by_row, &up_to), params),
        at_once(rows, Dialect::Sqlite, Some((rowid, id)), sql),
    ])
}

/// The page's query: in SQLite, the entries' row ids (and their events) in index order
/// with no sort, the row's columns read once per entry by rowid; in PostgreSQL, the
/// page's entries (and one more) picked first, each line carrying its entry's columns.
fn page_sql(
    dialect: Dialect,
    columns: &str,
    filter: &str,
    position: &str,
    shown: Shown<'_>,
    limit: usize,
) -> String {
    let (event_columns, join, order) = if shown.include_events {
        (
            EVENT_COLUMNS,
            format!(
                " LEFT JOIN uns_events e ON e.notification_id = n.id{}",
                shown.events.join_sql()
            ),
            ", e.id",
        )
    } else {
        ("NULL", String::new(), "")
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
                events: self.include_events.then_some(EventList {
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
    events: Option<EventList<'a>>,
}

struct EventList<'a> {
    copies: &'a Copies,
    starts: &'a [usize],
}

impl Serialize for EventList<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.starts.len()))?;
        for start in self.starts {
            let copy = self.copies.row(*start);
            seq.serialize_element(&super::StoredEvent::from_copy(&copy))?;
        }
        seq.end()
    }
}

#[cfg(test)]
mod tests {
    use super::page_json_probing;
    use crate::store::{Events, Rows, Selection, Window};

    /// Every page of `rows`, in turn, as JSON, looking at `probed` notifications one by
    /// one on each.
    fn every_page(
        conn: &crate::db::Db<'_>,
        rows: Rows<'_>,
        limit: usize,
        probed: usize,
    ) -> Vec<String> {
        let mut pages = Vec::new();
        let mut cursor = None;
        loop {
            let shown = super::Shown {
                include_events: true,
                events: Events::All,
            };
            let (json, next) =
                page_json_probing(conn, rows, cursor.as_deref(), limit, shown, probed)
                    .expect("page");
            pages.push(String::from_utf8(json).expect("utf-8"));
            match next {
                Some(next) => cursor = Some(next),
                None => return pages,
            }
        }
    }

    /// A store whose notifications in the window lie apart in id order: every third was
    /// attempted in the window, the others before it, and some never; each has events
    /// of other kinds too, so only its own start can put it in the window.
    fn scattered_store(dir: &std::path::Path) -> rusqlite::Connection {
        use crate::runtime::schema::{OpenMode, open};
        let conn = open(&dir.join("scattered.db"), OpenMode::Create).expect("store");
        for n in 0..60 {
            let id = format!("n-{:03}", (n * 37) % 60);
            conn.execute(
                "INSERT INTO uns_notifications (id, status, max_attempts, channels, payload,
                     next_attempt_at, created_at, updated_at)
                 VALUES (?1, 'DEAD', 3, '[\"EMAIL\"]', '{\"recipient\":\"a@b\"}', 0, 0, 0)",
                [&id],
            )
            .expect("row");
            let at = match n % 3 {
                0 => 2000.0 + f64::from(n),
                1 => 500.0,
                _ => continue,
            };
            for (kind, at) in [("SUBMITTED", 3000.0), ("CHANNEL_ATTEMPT_STARTED", at)] {
                conn.execute(
                    "INSERT INTO uns_events (notification_id, at, kind, payload)
                     VALUES (?1, ?2, ?3, '{\"channel\":\"EMAIL\",\"cycle\":1}')",
                    rusqlite::params![&id, at, kind],
                )
                .expect("event");
            }
        }
        conn
    }

    /// Looking at a page's first notifications one by one finds the very pages the
    /// window asked at once does, whatever how many are looked at, the page's size,
    /// the window, and how the notifications in it lie.
    #[test]
    fn a_page_of_attempted_notifications_is_the_same_however_it_is_looked_for() {
        let every_case = rusqlite::Connection::open_in_memory().expect("store");
        every_case
            .execute_batch(include_str!("../../fixtures/every-case.sql"))
            .expect("fixture");
        let dir = tempfile::tempdir().expect("dir");
        let scattered = scattered_store(dir.path());
        // Rows without an id sort first: a page from the start looks past them.
        let null_id = rusqlite::Connection::open_in_memory().expect("store");
        null_id
            .execute_batch(&format!(
                "{}\n{}",
                include_str!("../../fixtures/hostile/base.sql"),
                include_str!("../../fixtures/hostile/null-id.sql")
            ))
            .expect("fixture");
        let selection = Selection::default();
        let windows = [
            Window::default(),
            Window {
                since: Some(1000.0),
                until: None,
            },
            Window {
                since: Some(2010.0),
                until: Some(2040.0),
            },
            Window {
                since: Some(1_800_000_000.0),
                until: None,
            },
        ];
        let mut pages_read = 0;
        for conn in [&every_case, &scattered, &null_id] {
            let conn = crate::db::Db::Sqlite(conn);
            for window in windows {
                let rows = Rows::Attempted {
                    selection: &selection,
                    window,
                };
                for limit in [1, 2, 5, 1000] {
                    let at_once = every_page(&conn, rows, limit, 0);
                    for probed in [1, 2, 3, 7, 4 * (limit + 1), 10_000] {
                        let pages = every_page(&conn, rows, limit, probed);
                        assert_eq!(
                            pages, at_once,
                            "{window:?}, {limit} a page, {probed} looked at"
                        );
                        pages_read += pages.len();
                    }
                }
            }
        }
        assert!(pages_read > 500, "{pages_read}");
    }

    /// A notification looked at on its own is asked about its own starts, by the index
    /// of events by notification, never by reading the window's starts by time.
    #[test]
    fn a_notification_looked_at_on_its_own_reads_only_its_own_events() {
        let dir = tempfile::tempdir().expect("dir");
        let conn = scattered_store(dir.path());
        let db = crate::db::Db::Sqlite(&conn);
        let selection = Selection::default();
        let rows = Rows::Attempted {
            selection: &selection,
            window: Window {
                since: Some(1000.0),
                until: Some(3000.0),
            },
        };
        let shown = super::Shown {
            include_events: true,
            events: Events::All,
        };
        let columns = rows.notification_columns(crate::db::Dialect::Sqlite);
        let after = Some((3, "n-010".to_string()));
        let passes = super::probing_passes(&db, rows, after, 10, &|filter, position| {
            super::page_sql(
                crate::db::Dialect::Sqlite,
                &columns,
                filter,
                position,
                shown,
                10,
            )
        })
        .expect("passes");
        assert_eq!(passes.len(), 2, "{passes:?}");
        let plan = |(sql, params): &super::Statement| {
            let mut plan = conn
                .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
                .expect("plan");
            plan.query_map(rusqlite::params_from_iter(params), |row| {
                row.get::<_, String>(3)
            })
            .expect("rows")
            .collect::<rusqlite::Result<Vec<_>>>()
            .expect("plan")
            .join("\n")
        };
        let one_by_one = plan(&passes[0]);
        assert!(
            one_by_one.contains("uns_events_notification"),
            "{one_by_one}"
        );
        assert!(!one_by_one.contains("uns_events_kind"), "{one_by_one}");
        // One range of the id index, in order: nothing is sorted.
        assert!(!one_by_one.contains("TEMP B-TREE"), "{one_by_one}");
        let at_once = plan(&passes[1]);
        assert!(at_once.contains("uns_events_kind"), "{at_once}");
    }
}
