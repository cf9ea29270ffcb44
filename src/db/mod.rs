//! The store's database behind one interface: the SQLite file (the embedded default) or a
//! PostgreSQL database (DESIGN §12).
//!
//! Every query and transition is written once, in the SQL both engines read (`?N`
//! parameters, `IS NOT DISTINCT FROM`, `RETURNING`), with the few words they spell apart
//! (JSON, the schema's catalogue, the clock) asked of [`Dialect`]. Rows come back through
//! [`Source`] either way, so a row is decoded by one reader whichever engine held it, and
//! what one value cannot be read as is named the same way.

pub mod error;
pub mod locks;
pub mod pg;
pub mod snapshot;
pub mod tls;
pub mod value;
pub mod wire;

pub use error::{DbError, DbResult};
pub use value::{Arg, Source};

use pg::PgConn;
use rusqlite::types::{Value, ValueRef};

/// A connection to the store, in either engine.
#[derive(Clone, Copy)]
pub enum Db<'c> {
    Sqlite(&'c rusqlite::Connection),
    Postgres(&'c PgConn),
}

/// Where a store is: a SQLite file, or a PostgreSQL database (DESIGN §12).
#[derive(Debug, Clone)]
pub enum Place {
    File(std::path::PathBuf),
    Postgres(pg::Target),
}

impl Place {
    /// Where it is as `--db` takes it, for a command this process runs itself.
    pub fn argument(&self) -> std::ffi::OsString {
        match self {
            Place::File(path) => path.clone().into_os_string(),
            Place::Postgres(target) => target.url.clone().into(),
        }
    }

    /// Where it is, as it may be printed: never a password.
    pub fn shown(&self) -> String {
        match self {
            Place::File(path) => path.display().to_string(),
            Place::Postgres(target) => pg::shown(&target.url),
        }
    }
}

impl From<std::path::PathBuf> for Place {
    fn from(path: std::path::PathBuf) -> Self {
        Place::File(path)
    }
}

impl From<&std::path::Path> for Place {
    fn from(path: &std::path::Path) -> Self {
        Place::File(path.to_path_buf())
    }
}

/// A connection the caller owns, in either engine.
pub enum Conn {
    Sqlite(rusqlite::Connection),
    Postgres(Box<PgConn>),
}

impl Conn {
    pub fn db(&self) -> Db<'_> {
        match self {
            Conn::Sqlite(conn) => Db::Sqlite(conn),
            Conn::Postgres(conn) => Db::Postgres(conn),
        }
    }
}

/// Which engine's words a statement is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

impl From<Db<'_>> for Dialect {
    fn from(db: Db<'_>) -> Self {
        db.dialect()
    }
}

impl<'c> Db<'c> {
    pub fn dialect(&self) -> Dialect {
        match self {
            Db::Sqlite(_) => Dialect::Sqlite,
            Db::Postgres(_) => Dialect::Postgres,
        }
    }

    /// Runs `sql` with `params`, handing each row to `each`. PostgreSQL's rows are read
    /// whole before the first is handed on, so `each` may ask the database again.
    pub fn each(
        &self,
        sql: &str,
        params: &[Value],
        each: &mut dyn FnMut(&dyn Source) -> DbResult<()>,
    ) -> DbResult<()> {
        match self {
            Db::Sqlite(conn) => {
                let mut stmt = conn.prepare_cached(sql)?;
                let mut rows = stmt.query(rusqlite::params_from_iter(params.iter()))?;
                while let Some(row) = rows.next()? {
                    each(row)?;
                }
                Ok(())
            }
            Db::Postgres(conn) => {
                let rows = conn.query(sql, params)?;
                for row in &rows {
                    each(&pg::PgRow(row))?;
                }
                Ok(())
            }
        }
    }

    /// Runs `sql` with `params`, handing each row to `each` as it is read until it
    /// returns false: a walk never holds the rows it has passed. On PostgreSQL `each`
    /// must not ask the database again (SQLite's may).
    pub fn stream(
        &self,
        sql: &str,
        params: &[Value],
        each: &mut dyn FnMut(&dyn Source) -> DbResult<bool>,
    ) -> DbResult<()> {
        match self {
            Db::Sqlite(conn) => {
                let mut stmt = conn.prepare_cached(sql)?;
                let mut rows = stmt.query(rusqlite::params_from_iter(params.iter()))?;
                while let Some(row) = rows.next()? {
                    if !each(row)? {
                        break;
                    }
                }
                Ok(())
            }
            Db::Postgres(conn) => conn.stream(sql, params, each),
        }
    }

    /// Every row of `sql`, each made into a `T` by `make`.
    pub fn rows<T>(
        &self,
        sql: &str,
        params: &[Value],
        mut make: impl FnMut(&dyn Source) -> DbResult<T>,
    ) -> DbResult<Vec<T>> {
        let mut all = Vec::new();
        self.each(sql, params, &mut |row| {
            all.push(make(row)?);
            Ok(())
        })?;
        Ok(all)
    }

    /// The first row of `sql`, made into a `T`; None when there is none.
    pub fn row<T>(
        &self,
        sql: &str,
        params: &[Value],
        make: impl FnOnce(&dyn Source) -> DbResult<T>,
    ) -> DbResult<Option<T>> {
        let mut make = Some(make);
        let mut found = None;
        self.each(sql, params, &mut |row| {
            if let Some(make) = make.take() {
                found = Some(make(row)?);
            }
            Ok(())
        })?;
        Ok(found)
    }

    /// Runs a statement that returns no rows; how many rows it changed.
    pub fn execute(&self, sql: &str, params: &[Value]) -> DbResult<u64> {
        match self {
            Db::Sqlite(conn) => Ok(conn
                .prepare_cached(sql)?
                .execute(rusqlite::params_from_iter(params.iter()))?
                as u64),
            Db::Postgres(conn) => conn.execute(sql, params),
        }
    }

    /// Runs statements with no parameters and no rows, one after another.
    pub fn batch(&self, sql: &str) -> DbResult<()> {
        match self {
            Db::Sqlite(conn) => Ok(conn.execute_batch(sql)?),
            Db::Postgres(conn) => conn.batch(sql),
        }
    }

    /// Runs `work` in one write transaction: SQLite's `BEGIN IMMEDIATE`, so a writer never
    /// has to upgrade a read lock; PostgreSQL's at READ COMMITTED ([`pg::BEGIN_WRITE`]),
    /// whose rows a transition locks as it reads them ([`Db::lock`]). An error from
    /// `work` rolls it back, and so does a COMMIT that fails: SQLite leaves the
    /// transaction open after one (a deferred constraint, a full disk), and a connection
    /// that lives on (the server's writer) must not keep it. A COMMIT whose failure does
    /// not say whether it was kept is [`DbError::CommitUncertain`].
    pub fn write_tx<T, E: From<DbError>>(
        &self,
        work: impl FnOnce(&Db<'c>) -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        let begin = match self.dialect() {
            Dialect::Sqlite => "BEGIN IMMEDIATE",
            Dialect::Postgres => pg::BEGIN_WRITE,
        };
        self.batch(begin)?;
        let done = work(self).and_then(|value| match self.batch("COMMIT") {
            Ok(()) => Ok(value),
            Err(err) => Err(E::from(err.at_commit())),
        });
        if done.is_err() && self.in_transaction() {
            let _ = self.batch("ROLLBACK");
        }
        done
    }

    /// Runs `work` in one read transaction, which writes nothing and ends with a
    /// ROLLBACK whatever `work` returns: every statement of it reads the same snapshot,
    /// and SQLite takes the store's shared lock once instead of once per statement
    /// (reading ten thousand entries one by one spent a sixth of its time locking).
    /// Inside a transaction already open, `work` simply runs in it.
    pub fn read_tx<T, E: From<DbError>>(
        &self,
        work: impl FnOnce(&Db<'c>) -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        let begin = match self {
            Db::Sqlite(conn) if !conn.is_autocommit() => return work(self),
            Db::Postgres(conn) if conn.in_transaction() => return work(self),
            Db::Sqlite(_) => "BEGIN",
            Db::Postgres(_) => pg::BEGIN_READ,
        };
        self.batch(begin)?;
        let done = work(self);
        let ended = self.batch("ROLLBACK");
        let value = done?;
        ended?;
        Ok(value)
    }

    /// Whether a transaction is open on this connection: SQLite says; PostgreSQL ends
    /// one that failed, at its COMMIT or ROLLBACK, so a ROLLBACK is always safe there.
    fn in_transaction(&self) -> bool {
        match self {
            Db::Sqlite(conn) => !conn.is_autocommit(),
            Db::Postgres(_) => true,
        }
    }

    /// Locks the notification `id` for the rest of the transaction (PostgreSQL: `FOR
    /// UPDATE`); SQLite's write transaction holds the whole store already.
    pub fn lock(&self, id: &str) -> DbResult<()> {
        if self.dialect() == Dialect::Postgres {
            self.each(
                "SELECT 1 FROM uns_notifications WHERE id = ?1 FOR UPDATE",
                &[Value::Text(id.to_string())],
                &mut |_| Ok(()),
            )?;
        }
        Ok(())
    }

    /// The time a transition goes by: the caller's clock on SQLite (one machine, one
    /// clock), the database's own on PostgreSQL, so workers on machines whose clocks
    /// disagree cannot extend or steal a lease.
    pub fn now(&self, clock: f64) -> DbResult<f64> {
        match self {
            Db::Sqlite(_) => Ok(clock),
            Db::Postgres(conn) => conn.now(),
        }
    }

    /// The id of the row an `INSERT ... RETURNING id` made.
    pub fn insert(&self, sql: &str, params: &[Value]) -> DbResult<i64> {
        self.row(sql, params, |row| match row.cell(0)? {
            ValueRef::Integer(id) => Ok(id),
            other => Err(DbError::Value(format!(
                "an insert returned {:?}, not an id",
                other.data_type()
            ))),
        })?
        .ok_or_else(|| DbError::Value("an insert returned no id".into()))
    }
}

impl Dialect {
    /// Text at `path` (`$.a.b`) of the JSON document in `column`, or NULL (not JSON, or
    /// no text there).
    pub fn json_text(self, column: &str, path: &str) -> String {
        match self {
            Dialect::Sqlite => format!(
                "CASE WHEN json_valid({column}) AND json_type({column}, '{path}') = 'text' THEN json_extract({column}, '{path}') END"
            ),
            Dialect::Postgres => format!(
                "CASE WHEN jsonb_typeof({j} #> '{p}') = 'string' THEN {j} #>> '{p}' END",
                j = json_column(column),
                p = pg_path(path)
            ),
        }
    }

    /// The value at `path` of the JSON in `column` as SQLite's `json_extract` gives it
    /// for a comparison with a number: true and false as 1 and 0, numbers as numbers;
    /// anything else NULL.
    pub fn json_number(self, column: &str, path: &str) -> String {
        match self {
            Dialect::Sqlite => format!(
                "CASE WHEN json_valid({column}) AND json_type({column}, '{path}') IN ('true', 'false', 'integer', 'real') THEN json_extract({column}, '{path}') END"
            ),
            Dialect::Postgres => {
                let value = format!("{} #> '{}'", json_column(column), pg_path(path));
                format!(
                    "CASE jsonb_typeof({value}) WHEN 'boolean' THEN CASE WHEN ({value})::text = 'true' THEN 1 ELSE 0 END WHEN 'number' THEN ({value})::text::float8 END"
                )
            }
        }
    }

    /// Whether `column` holds JSON.
    pub fn json_valid(self, column: &str) -> String {
        match self {
            Dialect::Sqlite => format!("json_valid({column})"),
            Dialect::Postgres => format!("({} IS NOT NULL)", json_column(column)),
        }
    }

    /// The type of the value at `path` in the JSON of `column`, in SQLite's words
    /// (`text`, `integer`, `real`, `true`, `false`, `null`, `object`, `array`).
    pub fn json_type(self, column: &str, path: &str) -> String {
        match self {
            Dialect::Sqlite => format!("json_type({column}, '{path}')"),
            Dialect::Postgres => {
                let value = format!("{} #> '{}'", json_column(column), pg_path(path));
                format!(
                    "CASE jsonb_typeof({value}) WHEN 'string' THEN 'text' WHEN 'number' THEN CASE WHEN ({value})::text ~ '^-?[0-9]+$' THEN 'integer' ELSE 'real' END WHEN 'boolean' THEN ({value})::text ELSE jsonb_typeof({value}) END"
                )
            }
        }
    }

    /// Whether the table `name` exists.
    pub fn has_table(self, name: &str) -> String {
        match self {
            Dialect::Sqlite => format!(
                "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '{name}')"
            ),
            Dialect::Postgres => format!("SELECT to_regclass('{name}') IS NOT NULL"),
        }
    }
}

/// The JSON column PostgreSQL keeps beside a text column of JSON (`payload` →
/// `payload_json`), for the statements that look inside it.
fn json_column(column: &str) -> String {
    format!("{column}_json")
}

/// `$.a.b` as PostgreSQL's path `{a,b}`.
fn pg_path(path: &str) -> String {
    let keys: Vec<&str> = path
        .trim_start_matches('$')
        .split('.')
        .filter(|k| !k.is_empty())
        .collect();
    format!("{{{}}}", keys.join(","))
}

/// What a write transaction on a SQLite file meets when another process holds the file
/// (waiting for it not at all), and when its statement cannot run: for the tests of
/// what each error is taken for.
#[cfg(test)]
pub(crate) fn held_and_broken() -> (DbError, DbError) {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("held.db");
    let holder = rusqlite::Connection::open(&path).expect("open");
    holder.execute_batch("BEGIN EXCLUSIVE").expect("hold");
    let waiter = rusqlite::Connection::open(&path).expect("open");
    waiter
        .busy_timeout(std::time::Duration::ZERO)
        .expect("no wait");
    let db = Db::Sqlite(&waiter);
    let held = db
        .write_tx(|_| Ok::<(), DbError>(()))
        .expect_err("the file is held");
    holder.execute_batch("COMMIT").expect("let go");
    let broken = db.write_tx(|tx| tx.batch("SELEC 1")).expect_err("not SQL");
    (held, broken)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_read_as_postgres_writes_them() {
        assert_eq!(
            pg_path("$.metadata.provider_outcome"),
            "{metadata,provider_outcome}"
        );
        assert_eq!(pg_path("$.channel"), "{channel}");
    }

    /// A file another process holds is worth trying again; a statement that cannot run
    /// is not; neither kept anything.
    #[test]
    fn a_file_held_by_another_passes_and_a_broken_statement_does_not() {
        let (held, broken) = held_and_broken();
        assert!(held.passing(), "{held}");
        assert!(!held.may_have_committed());
        assert!(!broken.passing(), "{broken}");
        assert!(!broken.may_have_committed());
    }
}
