//! `unsctl store copy`: a SQLite store's whole history into an empty PostgreSQL
//! database, unchanged (DESIGN §12), so a runbook case or an incident can be read on
//! either engine.
//!
//! Unchanged means every value: ids, row ids, event ids and note ids kept, times to the
//! last bit, text byte for byte. A value PostgreSQL cannot hold as it is (text that is
//! not UTF-8 or holds a NUL byte, a number where text belongs, a status the schema does
//! not know) is not bent to fit: the copy is refused, naming every such value, and
//! nothing is written. It is one transaction, so a copy that fails half way leaves the
//! database as empty as it was.

use crate::db::pg::{PgConn, Target};
use crate::db::{DbError, Source};
use postgres::types::{ToSql, Type};
use rusqlite::types::ValueRef;
use std::path::Path;

/// What was copied.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Copied {
    pub notifications: u64,
    pub events: u64,
    pub notes: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    #[error(transparent)]
    From(#[from] super::schema::OpenError),
    #[error(transparent)]
    To(#[from] crate::db::pg::OpenError),
    #[error("{url}: not empty ({what}); a copy goes into an empty database only")]
    NotEmpty { url: String, what: String },
    /// Each value, by its table, row and column, and why.
    #[error("{} value(s) PostgreSQL cannot hold unchanged, so nothing was copied: {}", .0.len(), .0.join("; "))]
    Unchanged(Vec<String>),
    #[error("{0}")]
    Database(#[from] DbError),
}

impl From<rusqlite::Error> for CopyError {
    fn from(err: rusqlite::Error) -> Self {
        CopyError::Database(err.into())
    }
}

impl From<postgres::Error> for CopyError {
    fn from(err: postgres::Error) -> Self {
        CopyError::Database(err.into())
    }
}

/// What a column holds, as PostgreSQL's schema types it.
#[derive(Clone, Copy)]
enum Kind {
    Integer,
    Real,
    Text,
}

struct Table {
    name: &'static str,
    /// The order rows are read and written in.
    order: &'static str,
    /// Columns as SQLite names them (`rowid` included) and PostgreSQL takes them.
    columns: &'static [(&'static str, Kind, bool)],
    /// The identity column whose next value follows the largest copied.
    identity: &'static str,
}

const NOTIFICATIONS: Table = Table {
    name: "uns_notifications",
    order: "rowid",
    columns: &[
        ("rowid", Kind::Integer, false),
        ("id", Kind::Text, false),
        ("status", Kind::Text, false),
        ("dead_letter", Kind::Integer, false),
        ("attempts", Kind::Integer, false),
        ("cycle", Kind::Integer, false),
        ("cycle_attempts", Kind::Integer, false),
        ("max_attempts", Kind::Integer, false),
        ("channels", Kind::Text, false),
        ("payload", Kind::Text, false),
        ("idempotency_key", Kind::Text, true),
        ("lease_token", Kind::Text, true),
        ("lease_until", Kind::Real, true),
        ("next_attempt_at", Kind::Real, false),
        ("error_message", Kind::Text, true),
        ("created_at", Kind::Real, false),
        ("updated_at", Kind::Real, false),
    ],
    identity: "rowid",
};

const EVENTS: Table = Table {
    name: "uns_events",
    order: "id",
    columns: &[
        ("id", Kind::Integer, false),
        ("notification_id", Kind::Text, false),
        ("at", Kind::Real, false),
        ("kind", Kind::Text, false),
        ("payload", Kind::Text, false),
    ],
    identity: "id",
};

const NOTES: Table = Table {
    name: "uns_notes",
    order: "id",
    columns: &[
        ("id", Kind::Integer, false),
        ("at", Kind::Real, false),
        ("kind", Kind::Text, false),
        ("payload", Kind::Text, false),
    ],
    identity: "id",
};

/// The most problems a refused copy names.
const NAMED: usize = 50;

/// Copies the store at `from` into the empty database at `to`, creating its schema.
pub fn copy(from: &Path, to: &Target) -> Result<Copied, CopyError> {
    let (source, _access) = super::schema::open_read_only(from)?;
    let has_notes: bool = source.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'uns_notes')",
        [],
        |row| row.get(0),
    )?;
    // Every value is checked before anything is written: a refusal names them all.
    let mut problems = Vec::new();
    for table in [&NOTIFICATIONS, &EVENTS] {
        each_row(&source, table, &mut |row| {
            check(table, row, &mut problems);
            Ok(())
        })?;
    }
    if has_notes {
        each_row(&source, &NOTES, &mut |row| {
            check(&NOTES, row, &mut problems);
            Ok(())
        })?;
    }
    if !problems.is_empty() {
        return Err(CopyError::Unchanged(problems));
    }
    let target = PgConn::open(to, true)?;
    target.batch(crate::db::pg::BEGIN_WRITE)?;
    let copied = fill(&source, &target, has_notes);
    match copied {
        Ok(copied) => {
            target.batch("COMMIT")?;
            Ok(copied)
        }
        Err(err) => {
            let _ = target.batch("ROLLBACK");
            Err(err)
        }
    }
}

fn fill(
    source: &rusqlite::Connection,
    target: &PgConn,
    has_notes: bool,
) -> Result<Copied, CopyError> {
    // Nobody else fills it at the same time: the first copy's lock holds the second.
    target.batch("LOCK TABLE uns_notifications, uns_events, uns_notes IN EXCLUSIVE MODE")?;
    for table in [&NOTIFICATIONS, &EVENTS, &NOTES] {
        let sql = format!("SELECT EXISTS (SELECT 1 FROM {})", table.name);
        let rows = target.query(&sql, &[])?;
        if rows.first().is_some_and(|row| row.get::<_, bool>(0)) {
            return Err(CopyError::NotEmpty {
                url: target.place.clone(),
                what: format!("{} holds rows", table.name),
            });
        }
    }
    let notifications = copy_table(source, target, &NOTIFICATIONS)?;
    let events = copy_table(source, target, &EVENTS)?;
    let notes = if has_notes {
        copy_table(source, target, &NOTES)?
    } else {
        0
    };
    Ok(Copied {
        notifications,
        events,
        notes,
    })
}

/// Steps every row of `table` in its order.
fn each_row(
    source: &rusqlite::Connection,
    table: &Table,
    each: &mut dyn FnMut(&rusqlite::Row<'_>) -> Result<(), CopyError>,
) -> Result<(), CopyError> {
    let names: Vec<&str> = table.columns.iter().map(|(name, ..)| *name).collect();
    let mut statement = source.prepare(&format!(
        "SELECT {} FROM {} ORDER BY {}",
        names.join(", "),
        table.name,
        table.order
    ))?;
    let mut rows = statement.query([])?;
    while let Some(row) = rows.next()? {
        each(row)?;
    }
    Ok(())
}

/// Names each value of `row` PostgreSQL's column would not hold unchanged.
fn check(table: &Table, row: &rusqlite::Row<'_>, problems: &mut Vec<String>) {
    let key = match row.get_ref(0) {
        Ok(ValueRef::Integer(n)) => n.to_string(),
        _ => "?".into(),
    };
    for (index, (name, kind, nullable)) in table.columns.iter().enumerate() {
        let problem = match (row.cell(index), kind) {
            (Err(err), _) => Some(err.to_string()),
            (Ok(ValueRef::Null), _) if *nullable => None,
            (Ok(ValueRef::Null), _) => Some("NULL".into()),
            (Ok(ValueRef::Integer(_)), Kind::Integer | Kind::Real) => None,
            (Ok(ValueRef::Real(_)), Kind::Real) => None,
            (Ok(ValueRef::Text(bytes)), Kind::Text) => match std::str::from_utf8(bytes) {
                Ok(text) if text.contains('\0') => Some("text with a NUL byte".into()),
                Ok(_) => None,
                Err(_) => Some(format!("text that is not UTF-8 ({} bytes)", bytes.len())),
            },
            (Ok(value), _) => Some(format!("a {:?} value", value.data_type())),
        };
        if let Some(problem) = problem
            && problems.len() < NAMED
        {
            problems.push(format!(
                "{} {} {key}: {name}: {problem}",
                table.name, table.columns[0].0
            ));
        }
    }
}

/// Copies every row of `table` with `COPY ... FROM STDIN` in PostgreSQL's binary format
/// (no value is printed and parsed back), identity values included, and sets the
/// identity to go on after the largest copied.
fn copy_table(
    source: &rusqlite::Connection,
    target: &PgConn,
    table: &Table,
) -> Result<u64, CopyError> {
    let names: Vec<&str> = table.columns.iter().map(|(name, ..)| *name).collect();
    let types: Vec<Type> = table
        .columns
        .iter()
        .map(|(_, kind, _)| match kind {
            Kind::Integer => Type::INT8,
            Kind::Real => Type::FLOAT8,
            Kind::Text => Type::TEXT,
        })
        .collect();
    let sql = format!(
        "COPY {} ({}) FROM STDIN (FORMAT binary)",
        table.name,
        names.join(", ")
    );
    let mut failed = None;
    let copied = target.copy_in(&sql, &types, &mut |writer| {
        each_row(source, table, &mut |row| {
            let values = values(table, row)?;
            let refs: Vec<&(dyn ToSql + Sync)> = values.iter().map(|v| v.as_ref()).collect();
            writer.write(&refs).map_err(CopyError::from)
        })
        .map_err(|err| {
            let said = err.to_string();
            failed = Some(err);
            DbError::Value(said)
        })
    });
    if let Some(err) = failed {
        return Err(err);
    }
    let copied = copied?;
    target.batch(&format!(
        "SELECT setval(pg_get_serial_sequence('{name}', '{column}'), COALESCE((SELECT MAX({column}) FROM {name}), 0) + 1, false)",
        name = table.name,
        column = table.identity
    ))?;
    Ok(copied)
}

/// `row`'s values as PostgreSQL's types take them; [`check`] has passed every one.
fn values(table: &Table, row: &rusqlite::Row<'_>) -> Result<Vec<Box<dyn ToSql + Sync>>, CopyError> {
    table
        .columns
        .iter()
        .enumerate()
        .map(|(index, (name, kind, _))| {
            let value = row.get_ref(index)?;
            Ok(match (value, kind) {
                (ValueRef::Null, Kind::Integer) => Box::new(None::<i64>) as Box<dyn ToSql + Sync>,
                (ValueRef::Null, Kind::Real) => Box::new(None::<f64>),
                (ValueRef::Null, Kind::Text) => Box::new(None::<String>),
                (ValueRef::Integer(n), Kind::Integer) => Box::new(n),
                (ValueRef::Integer(n), Kind::Real) => Box::new(n as f64),
                (ValueRef::Real(x), Kind::Real) => Box::new(x),
                (ValueRef::Text(bytes), Kind::Text) => Box::new(
                    std::str::from_utf8(bytes)
                        .map_err(|_| CopyError::Unchanged(vec![format!("{name}: not UTF-8")]))?
                        .to_string(),
                ),
                (value, _) => {
                    return Err(CopyError::Unchanged(vec![format!(
                        "{name}: a {:?} value",
                        value.data_type()
                    )]));
                }
            })
        })
        .collect()
}
