//! The store's schema (DESIGN section 2): creating it, and refusing files that are not it.
//!
//! Every open checks the file before it writes anything, so pointing the tool at the wrong
//! file never changes that file.

use rusqlite::{Connection, OpenFlags};
use std::path::{Path, PathBuf};

/// The schema version this build creates, and migrates older stores to when the
/// runtime opens them (`PRAGMA user_version`).
pub const SCHEMA_VERSION: i64 = 3;

/// The oldest version this build reads and changes as it is, without migrating.
pub const OLDEST_VERSION: i64 = 1;

const SCHEMA_V1: &str = r#"
CREATE TABLE uns_notifications (
    id              TEXT PRIMARY KEY,
    status          TEXT NOT NULL
                    CHECK (status IN ('PENDING', 'LEASED', 'DELIVERED', 'DEAD', 'RESOLVED')),
    dead_letter     INTEGER NOT NULL DEFAULT 0 CHECK (dead_letter IN (0, 1)),
    attempts        INTEGER NOT NULL DEFAULT 0,
    cycle           INTEGER NOT NULL DEFAULT 1,
    cycle_attempts  INTEGER NOT NULL DEFAULT 0,
    max_attempts    INTEGER NOT NULL,
    channels        TEXT NOT NULL,
    payload         TEXT NOT NULL,
    idempotency_key TEXT UNIQUE,
    lease_token     TEXT,
    lease_until     REAL,
    next_attempt_at REAL NOT NULL,
    error_message   TEXT,
    created_at      REAL NOT NULL,
    updated_at      REAL NOT NULL
);
-- Work queues as partial indexes: a settled row leaves them, so the many DELIVERED rows
-- cost the worker nothing.
CREATE INDEX uns_notifications_due ON uns_notifications (next_attempt_at) WHERE status = 'PENDING';
CREATE INDEX uns_notifications_leased ON uns_notifications (lease_until) WHERE status = 'LEASED';
CREATE INDEX uns_notifications_dlq ON uns_notifications (id) WHERE dead_letter = 1;

CREATE TABLE uns_events (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    notification_id TEXT NOT NULL REFERENCES uns_notifications (id),
    at              REAL NOT NULL,
    kind            TEXT NOT NULL,
    payload         TEXT NOT NULL
);
CREATE INDEX uns_events_notification ON uns_events (notification_id, id);
CREATE INDEX uns_events_kind ON uns_events (kind, at);

-- The history is evidence: it is appended to, never rewritten, and no row is ever deleted.
CREATE TRIGGER uns_events_append_only_update BEFORE UPDATE ON uns_events
BEGIN SELECT RAISE(ABORT, 'uns_events is append-only'); END;
CREATE TRIGGER uns_events_append_only_delete BEFORE DELETE ON uns_events
BEGIN SELECT RAISE(ABORT, 'uns_events is append-only'); END;
CREATE TRIGGER uns_notifications_never_deleted BEFORE DELETE ON uns_notifications
BEGIN SELECT RAISE(ABORT, 'notifications are never deleted'); END;
"#;

/// Version 2: dead letters by when they died, for `--since` and `--until` on a large DLQ.
const SCHEMA_V2: &str = r#"
CREATE INDEX uns_notifications_dlq_updated ON uns_notifications (updated_at) WHERE dead_letter = 1;
"#;

/// Version 3: the operators' notes about an incident (`unsctl note`), which belong to no
/// one notification; evidence as the events are, so appended to and never rewritten.
const SCHEMA_V3: &str = r#"
CREATE TABLE uns_notes (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    at      REAL NOT NULL,
    kind    TEXT NOT NULL,
    payload TEXT NOT NULL
);
CREATE INDEX uns_notes_at ON uns_notes (at);
CREATE TRIGGER uns_notes_append_only_update BEFORE UPDATE ON uns_notes
BEGIN SELECT RAISE(ABORT, 'uns_notes is append-only'); END;
CREATE TRIGGER uns_notes_append_only_delete BEFORE DELETE ON uns_notes
BEGIN SELECT RAISE(ABORT, 'uns_notes is append-only'); END;
"#;

/// The first version with a place for notes: an older store reads as one without any.
pub const NOTES_VERSION: i64 = 3;

/// Each version's change, applied in order from the store's version up.
const MIGRATIONS: [(i64, &str); 3] = [(1, SCHEMA_V1), (2, SCHEMA_V2), (3, SCHEMA_V3)];

/// Why a file could not be used as a store.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("{path}: no such store file")]
    Missing { path: PathBuf },
    #[error(
        "{path}: the folder {folder} does not exist; the runtime makes the store file, never its folder"
    )]
    NoFolder { path: PathBuf, folder: PathBuf },
    #[error("{path} is a directory, not a store file")]
    Directory { path: PathBuf },
    #[error("{path} is a device, pipe or socket, not a store file")]
    NotAFile { path: PathBuf },
    #[error(
        "{path}: cannot write here (a read-only file, directory or mount); reads still work, changes need write access"
    )]
    NotWritable { path: PathBuf },
    #[error(
        "{path} is an empty file, not a UNS store (the runtime creates one with `unsctl runtime serve --db PATH`)"
    )]
    Empty { path: PathBuf },
    #[error("{path}: not a SQLite database")]
    NotSqlite { path: PathBuf },
    #[error("{path}: a SQLite database, but not a UNS store (no uns_notifications table)")]
    NotUnsStore { path: PathBuf },
    #[error(
        "{path}: schema version {found} is newer than this unsctl understands ({SCHEMA_VERSION}); upgrade unsctl"
    )]
    NewerSchema { path: PathBuf, found: i64 },
    #[error(
        "{path}: unknown UNS schema version {found} (this unsctl reads versions {OLDEST_VERSION} to {SCHEMA_VERSION})"
    )]
    UnknownSchema { path: PathBuf, found: i64 },
    #[error("{path}: a damaged UNS store: {missing}")]
    Damaged { path: PathBuf, missing: String },
    #[error("{path}: {source}")]
    Sqlite {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
}

/// How a store is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenMode {
    /// Read commands: SQLite refuses every write on this connection.
    ReadOnly,
    /// Remediation: the file must already be a UNS store.
    ReadWrite,
    /// Create the schema in a new or empty file; an existing store is used at its
    /// version (`runtime submit`, the demo's and the sweep's own stores).
    Create,
    /// The runtime (`runtime serve`, `runtime worker`): as `Create`, and an older
    /// store's schema is brought up to this build's version. Nothing else migrates.
    Runtime,
}

impl OpenMode {
    fn creates(self) -> bool {
        matches!(self, OpenMode::Create | OpenMode::Runtime)
    }
}

/// Opens `path` as a UNS store in `mode`, checking the schema before anything is written.
pub fn open(path: &Path, mode: OpenMode) -> Result<Connection, OpenError> {
    match mode {
        // Only where the place is writable (the server's readers, tests): a private copy
        // would be removed with the access dropped here.
        OpenMode::ReadOnly => match open_read_only(path)? {
            (conn, Access::Shared | Access::Immutable) => Ok(conn),
            (_, Access::Copy(_)) => Err(OpenError::NotWritable {
                path: path.to_path_buf(),
            }),
        },
        _ => open_writable(path, mode),
    }
}

/// How a read-only store was opened.
#[derive(Debug)]
pub enum Access {
    /// Alongside any writer, seeing every committed change.
    Shared,
    /// The file (or its directory) cannot be written, so SQLite cannot keep its shared
    /// lock files; it is read as an immutable snapshot.
    Immutable,
    /// As `Immutable`, but its -wal file holds changes an immutable read would miss: the
    /// file and its -wal were copied to a private directory (kept while this lives) and
    /// the copy is read, with those changes.
    Copy(tempfile::TempDir),
}

impl Access {
    /// The one line to say about it, if any.
    pub fn note(&self, path: &Path) -> Option<String> {
        match self {
            Access::Shared => None,
            Access::Copy(_) => Some(format!(
                "note: {} is not writable here, so a private copy of it and its -wal file is read",
                path.display()
            )),
            Access::Immutable => {
                let wal = PathBuf::from(format!("{}-wal", path.display()));
                let unseen = std::fs::metadata(&wal).is_ok_and(|m| m.len() > 0);
                Some(format!(
                    "note: {} is not writable here, so it is read as an immutable snapshot{}",
                    path.display(),
                    if unseen {
                        " (changes still in its -wal file are not seen)"
                    } else {
                        ""
                    }
                ))
            }
        }
    }
}

/// What kind of file `path` is, before SQLite touches it.
fn inspect_file(path: &Path, mode: OpenMode) -> Result<bool, OpenError> {
    let path_buf = || path.to_path_buf();
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(_) if mode.creates() => {
            // SQLite says only that it cannot open the file: a folder mistyped or not
            // yet made would read as a place it may not write.
            let folder = path
                .parent()
                .filter(|folder| !folder.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            if !folder.is_dir() {
                return Err(OpenError::NoFolder {
                    path: path_buf(),
                    folder: folder.to_path_buf(),
                });
            }
            return Ok(false);
        }
        Err(_) => return Err(OpenError::Missing { path: path_buf() }),
    };
    if meta.is_dir() {
        return Err(OpenError::Directory { path: path_buf() });
    }
    if !meta.is_file() {
        return Err(OpenError::NotAFile { path: path_buf() });
    }
    if meta.len() == 0 && !mode.creates() {
        return Err(OpenError::Empty { path: path_buf() });
    }
    Ok(meta.len() > 0)
}

/// Opens a store for reading only. A store in a place this process cannot write to (a
/// read-only mount, a copy kept for a post-mortem) is read as an immutable snapshot.
pub fn open_read_only(path: &Path) -> Result<(Connection, Access), OpenError> {
    inspect_file(path, OpenMode::ReadOnly)?;
    let access = match check_existing(path, &Access::Shared) {
        Ok(()) => Access::Shared,
        Err(OpenError::Sqlite { source, .. }) if cannot_share(&source) => {
            check_existing(path, &Access::Immutable)?;
            copy_with_wal(path).map_or(Access::Immutable, Access::Copy)
        }
        Err(err) => return Err(err),
    };
    let conn = connect_read_only(path, &access).map_err(|source| classify(path, source))?;
    let sqlite = |source| OpenError::Sqlite {
        path: path.to_path_buf(),
        source,
    };
    conn.busy_timeout(crate::db::locks::LOCK_WAIT)
        .map_err(sqlite)?;
    // 16 MiB of page cache keeps the hot index pages in memory without letting a long
    // scan (a triage of the whole DLQ) grow the process.
    conn.pragma_update(None, "cache_size", -16_384)
        .map_err(sqlite)?;
    stable_plans(&conn).map_err(sqlite)?;
    Ok((conn, access))
}

/// One query plan per statement, whatever values are bound to it (SQLite's query planner
/// stability guarantee). Without it, SQLite 3.54 marks a parameter compared in a query
/// with an ORDER BY (every read of a notification's events) as one whose value may
/// change the plan, and prepares the statement again on every run: a cached statement
/// saved nothing. Our stores carry no statistics for a bound value to choose by.
fn stable_plans(conn: &Connection) -> rusqlite::Result<()> {
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )
    .map(|_| ())
}

/// SQLite could not set up its shared-memory files: the place is read-only.
fn cannot_share(err: &rusqlite::Error) -> bool {
    matches!(
        err,
        rusqlite::Error::SqliteFailure(e, _)
            if matches!(e.code, rusqlite::ErrorCode::ReadOnly | rusqlite::ErrorCode::CannotOpen)
    )
}

/// The store's file name inside a private copy.
const COPY_NAME: &str = "store.db";

/// Copies `path` and its -wal file into a private directory, when the -wal holds
/// anything; `None` when there is nothing to gain or the copy cannot be made.
fn copy_with_wal(path: &Path) -> Option<tempfile::TempDir> {
    let wal = PathBuf::from(format!("{}-wal", path.display()));
    if !std::fs::metadata(&wal).is_ok_and(|m| m.len() > 0) {
        return None;
    }
    let dir = tempfile::Builder::new()
        .prefix("unsctl-copy-")
        .tempdir()
        .ok()?;
    let copy = dir.path().join(COPY_NAME);
    std::fs::copy(path, &copy).ok()?;
    std::fs::copy(&wal, dir.path().join(format!("{COPY_NAME}-wal"))).ok()?;
    Some(dir)
}

fn connect_read_only(path: &Path, access: &Access) -> rusqlite::Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    match access {
        Access::Shared => Connection::open_with_flags(path, flags),
        Access::Copy(dir) => Connection::open_with_flags(dir.path().join(COPY_NAME), flags),
        Access::Immutable => {
            Connection::open_with_flags(immutable_uri(path), flags | OpenFlags::SQLITE_OPEN_URI)
        }
    }
}

/// `file:` URI for `path`, read-only and immutable.
fn immutable_uri(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut uri = String::from("file:");
    for byte in absolute.as_os_str().as_bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'/' | b'-' | b'_' | b'.' | b'~' => {
                uri.push(*byte as char)
            }
            other => uri.push_str(&format!("%{other:02X}")),
        }
    }
    uri.push_str("?mode=ro&immutable=1");
    uri
}

fn open_writable(path: &Path, mode: OpenMode) -> Result<Connection, OpenError> {
    let sqlite = |source: rusqlite::Error| {
        if cannot_share(&source) {
            OpenError::NotWritable {
                path: path.to_path_buf(),
            }
        } else {
            OpenError::Sqlite {
                path: path.to_path_buf(),
                source,
            }
        }
    };
    if inspect_file(path, mode)? {
        match check_existing(path, &Access::Shared) {
            Err(OpenError::Sqlite { source, .. }) if cannot_share(&source) => {
                // Still refuse a file that is not a store before saying it is read-only.
                check_existing(path, &Access::Immutable)?;
                return Err(OpenError::NotWritable {
                    path: path.to_path_buf(),
                });
            }
            checked => checked?,
        }
    }
    let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    if mode.creates() {
        flags |= OpenFlags::SQLITE_OPEN_CREATE;
    }
    let conn = Connection::open_with_flags(path, flags).map_err(sqlite)?;
    // SQLite opens a file this user cannot write for reading only, and says so only at
    // the first write: after a preview and a prompt, entry by entry.
    if conn.is_readonly(rusqlite::MAIN_DB).map_err(sqlite)? {
        return Err(OpenError::NotWritable {
            path: path.to_path_buf(),
        });
    }
    conn.busy_timeout(crate::db::locks::LOCK_WAIT)
        .map_err(sqlite)?;
    conn.pragma_update(None, "foreign_keys", true)
        .map_err(sqlite)?;
    conn.pragma_update(None, "cache_size", -16_384)
        .map_err(sqlite)?;
    stable_plans(&conn).map_err(sqlite)?;
    if mode.creates() {
        // Only the runtime sets the journal mode: a mutation from the CLI changes a file
        // only by the transaction it was asked for.
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(sqlite)?;
        create_schema(&conn, path, mode == OpenMode::Runtime).map_err(sqlite)?;
    }
    // WAL with NORMAL sync survives a killed process (the failure this runtime is built
    // around); only an OS crash can lose the last commits.
    conn.pragma_update(None, "synchronous", "NORMAL")
        .map_err(sqlite)?;
    Ok(conn)
}

/// The columns every reader and the engine rely on (DESIGN section 2), by table.
const REQUIRED: &[(&str, &[&str])] = &[
    (
        "uns_notifications",
        &[
            "id",
            "status",
            "dead_letter",
            "attempts",
            "cycle",
            "cycle_attempts",
            "max_attempts",
            "channels",
            "payload",
            "idempotency_key",
            "lease_token",
            "lease_until",
            "next_attempt_at",
            "error_message",
            "created_at",
            "updated_at",
        ],
    ),
    (
        "uns_events",
        &["id", "notification_id", "at", "kind", "payload"],
    ),
];

/// What a store of version 3 on has beside them.
const REQUIRED_NOTES: (&str, &[&str]) = ("uns_notes", &["id", "at", "kind", "payload"]);

/// What a store of `version` lacks (a table or columns someone dropped), said in words;
/// `None` when it has all it should.
fn missing_columns(conn: &Connection, version: i64) -> Option<String> {
    let mut missing = Vec::new();
    let notes = (version >= NOTES_VERSION).then_some(&REQUIRED_NOTES);
    for (table, columns) in REQUIRED.iter().chain(notes) {
        let present: Vec<String> = conn
            .prepare(&format!("PRAGMA table_info({table})"))
            .and_then(|mut stmt| {
                stmt.query_map([], |row| row.get::<_, String>(1))?
                    .collect::<rusqlite::Result<_>>()
            })
            .unwrap_or_default();
        if present.is_empty() {
            missing.push(format!("table {table} is missing"));
            continue;
        }
        let lacking: Vec<&str> = columns
            .iter()
            .filter(|c| !present.iter().any(|p| p == *c))
            .copied()
            .collect();
        if !lacking.is_empty() {
            missing.push(format!("{table} lacks {}", lacking.join(", ")));
        }
    }
    (!missing.is_empty()).then(|| missing.join("; "))
}

/// Validates an existing file through a read-only connection, so a wrong file is untouched.
fn check_existing(path: &Path, access: &Access) -> Result<(), OpenError> {
    let conn = connect_read_only(path, access).map_err(|source| classify(path, source))?;
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .map_err(|source| classify(path, source))?;
    let has_table: bool = conn
        .query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'uns_notifications')",
            [],
            |row| row.get(0),
        )
        .map_err(|source| classify(path, source))?;
    let any_table: bool = conn
        .query_row("SELECT EXISTS (SELECT 1 FROM sqlite_master)", [], |row| {
            row.get(0)
        })
        .map_err(|source| classify(path, source))?;
    let path = path.to_path_buf();
    match version {
        OLDEST_VERSION..=SCHEMA_VERSION if has_table => match missing_columns(&conn, version) {
            Some(missing) => Err(OpenError::Damaged { path, missing }),
            None => Ok(()),
        },
        0 if !any_table => Ok(()),
        0 => Err(OpenError::NotUnsStore { path }),
        found if found > SCHEMA_VERSION && has_table => Err(OpenError::NewerSchema { path, found }),
        found if has_table => Err(OpenError::UnknownSchema { path, found }),
        _ => Err(OpenError::NotUnsStore { path }),
    }
}

fn classify(path: &Path, source: rusqlite::Error) -> OpenError {
    let not_a_database = matches!(
        &source,
        rusqlite::Error::SqliteFailure(err, _) if err.code == rusqlite::ErrorCode::NotADatabase
    );
    if not_a_database {
        OpenError::NotSqlite {
            path: path.to_path_buf(),
        }
    } else {
        OpenError::Sqlite {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Creates the schema in an empty database, or (when `migrate`) brings an older store to
/// this build's version: in one transaction, so a store is at one version or the next,
/// never between.
fn create_schema(conn: &Connection, path: &Path, migrate: bool) -> rusqlite::Result<()> {
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let result = (|| {
        let version: i64 = conn.query_row("PRAGMA user_version", [], |row| row.get(0))?;
        if version == SCHEMA_VERSION || (version > 0 && !migrate) {
            return Ok(());
        }
        for (target, change) in MIGRATIONS {
            if version < target {
                conn.execute_batch(change)?;
            }
        }
        conn.pragma_update(None, "user_version", SCHEMA_VERSION)?;
        if version > 0 {
            tracing::info!(
                store = %path.display(),
                from = version,
                to = SCHEMA_VERSION,
                "migrated the store's schema"
            );
        }
        Ok(())
    })();
    match result {
        Ok(()) => conn.execute_batch("COMMIT"),
        Err(err) => {
            let _ = conn.execute_batch("ROLLBACK");
            Err(err)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(path: &Path) -> Vec<u8> {
        std::fs::read(path).unwrap_or_default()
    }

    #[test]
    fn creates_the_current_schema_and_reopens() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("uns.db");
        let conn = open(&path, OpenMode::Create)?;
        let version: i64 = conn.query_row("PRAGMA user_version", [], |row| row.get(0))?;
        assert_eq!(version, SCHEMA_VERSION);
        let journal: String = conn.query_row("PRAGMA journal_mode", [], |row| row.get(0))?;
        assert_eq!(journal, "wal");
        let foreign_keys: i64 = conn.query_row("PRAGMA foreign_keys", [], |row| row.get(0))?;
        assert_eq!(foreign_keys, 1);
        drop(conn);
        open(&path, OpenMode::ReadOnly)?;
        open(&path, OpenMode::ReadWrite)?;
        Ok(())
    }

    /// A cached statement is prepared once, read or written: binding another id to the
    /// read of a notification's events (it has an ORDER BY) does not prepare it again.
    #[test]
    fn a_cached_statement_is_not_prepared_again_for_each_id() -> anyhow::Result<()> {
        use rusqlite::StatementStatus;
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("uns.db");
        let writer = open(&path, OpenMode::Create)?;
        let events = format!(
            "SELECT {} FROM uns_events e WHERE e.notification_id = ?1 ORDER BY e.id",
            crate::runtime::queries::EVENT_COLUMNS
        );
        let (reader, _) = open_read_only(&path)?;
        for conn in [&writer, &reader] {
            for id in ["n-1", "n-2", "n-3"] {
                let mut statement = conn.prepare_cached(&events)?;
                let mut rows = statement.query([id])?;
                while rows.next()?.is_some() {}
            }
            let statement = conn.prepare_cached(&events)?;
            assert_eq!(statement.get_status(StatementStatus::Run), 3);
            assert_eq!(statement.get_status(StatementStatus::RePrepare), 0);
        }
        Ok(())
    }

    /// A store as schema version 1 left it, with one dead letter.
    fn v1_store(path: &Path) -> anyhow::Result<()> {
        let conn = Connection::open(path)?;
        conn.execute_batch(SCHEMA_V1)?;
        conn.pragma_update(None, "user_version", 1)?;
        conn.execute(
            "INSERT INTO uns_notifications (id, status, dead_letter, max_attempts, channels, payload,
               next_attempt_at, created_at, updated_at)
             VALUES ('n-1', 'DEAD', 1, 3, '[\"EMAIL\"]', '{}', 0, 1, 2)",
            [],
        )?;
        Ok(())
    }

    fn version_and_index(path: &Path) -> anyhow::Result<(i64, bool)> {
        let conn = Connection::open(path)?;
        let version = conn.query_row("PRAGMA user_version", [], |row| row.get(0))?;
        let index = conn.query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE name = 'uns_notifications_dlq_updated')",
            [],
            |row| row.get(0),
        )?;
        Ok((version, index))
    }

    #[test]
    fn only_the_runtime_migrates_a_v1_store() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("v1.db");
        v1_store(&path)?;
        let before = bytes(&path);
        for mode in [OpenMode::ReadOnly, OpenMode::ReadWrite, OpenMode::Create] {
            let conn = open(&path, mode)?;
            let dead: i64 = conn.query_row(
                "SELECT COUNT(*) FROM uns_notifications WHERE dead_letter = 1",
                [],
                |row| row.get(0),
            )?;
            assert_eq!(dead, 1, "{mode:?} reads the v1 store");
            drop(conn);
            assert_eq!(version_and_index(&path)?, (1, false), "{mode:?} migrated");
        }
        assert_eq!(bytes(&path).len(), before.len());
        drop(open(&path, OpenMode::Runtime)?);
        assert_eq!(version_and_index(&path)?, (SCHEMA_VERSION, true));
        let conn = open(&path, OpenMode::ReadOnly)?;
        let id: String =
            conn.query_row("SELECT id FROM uns_notifications", [], |row| row.get(0))?;
        assert_eq!(id, "n-1");
        Ok(())
    }

    #[test]
    fn a_migration_that_fails_leaves_the_store_as_it_was() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("v1.db");
        v1_store(&path)?;
        // Something in the way of the new index: the migration cannot finish.
        Connection::open(&path)?
            .execute_batch("CREATE TABLE uns_notifications_dlq_updated (x);")?;
        let err = open(&path, OpenMode::Runtime).err();
        assert!(matches!(err, Some(OpenError::Sqlite { .. })), "{err:?}");
        assert_eq!(version_and_index(&path)?.0, 1);
        let conn = open(&path, OpenMode::ReadOnly)?;
        let indexes: i64 = conn.query_row(
            "SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name LIKE 'uns_%'",
            [],
            |row| row.get(0),
        )?;
        assert_eq!(indexes, 5, "no index of version 2 was left behind");
        Ok(())
    }

    #[test]
    fn read_only_connection_cannot_write() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("uns.db");
        drop(open(&path, OpenMode::Create)?);
        let conn = open(&path, OpenMode::ReadOnly)?;
        let write = conn.execute(
            "INSERT INTO uns_events (notification_id, at, kind, payload) VALUES ('x', 0, 'K', '{}')",
            [],
        );
        assert!(write.is_err());
        Ok(())
    }

    #[test]
    fn refuses_a_file_that_is_not_sqlite_and_leaves_it_alone() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("notes.txt");
        std::fs::write(
            &path,
            b"this is not a database, just some text\n".repeat(20),
        )?;
        let before = bytes(&path);
        for mode in [OpenMode::ReadOnly, OpenMode::ReadWrite, OpenMode::Create] {
            let err = open(&path, mode).err();
            assert!(matches!(err, Some(OpenError::NotSqlite { .. })), "{err:?}");
        }
        assert_eq!(bytes(&path), before);
        Ok(())
    }

    #[test]
    fn refuses_foreign_and_newer_schemas_unchanged() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let foreign = dir.path().join("other.db");
        Connection::open(&foreign)?
            .execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1);")?;
        let newer = dir.path().join("newer.db");
        drop(open(&newer, OpenMode::Create)?);
        Connection::open(&newer)?.pragma_update(None, "user_version", 7)?;

        let foreign_before = bytes(&foreign);
        let newer_before = bytes(&newer);
        for mode in [OpenMode::ReadOnly, OpenMode::ReadWrite, OpenMode::Create] {
            let err = open(&foreign, mode).err();
            assert!(
                matches!(err, Some(OpenError::NotUnsStore { .. })),
                "{err:?}"
            );
            let err = open(&newer, mode).err();
            assert!(
                matches!(err, Some(OpenError::NewerSchema { found: 7, .. })),
                "{err:?}"
            );
        }
        assert_eq!(bytes(&foreign), foreign_before);
        assert_eq!(bytes(&newer), newer_before);
        Ok(())
    }

    #[test]
    fn missing_file_is_not_created_by_readers() {
        let dir = tempfile::tempdir().ok();
        let path = dir
            .as_ref()
            .map(|d| d.path().join("absent.db"))
            .unwrap_or_default();
        assert!(matches!(
            open(&path, OpenMode::ReadOnly),
            Err(OpenError::Missing { .. })
        ));
        assert!(!path.exists());
    }

    /// A store to be made in a folder that is not there: the folder is named, not taken
    /// for a place that cannot be written, and nothing is made.
    #[test]
    fn a_store_in_a_missing_folder_names_the_folder() {
        let dir = tempfile::tempdir().expect("dir");
        let folder = dir.path().join("not-yet");
        let path = folder.join("uns.db");
        let err = open(&path, OpenMode::Create).err();
        assert!(
            matches!(&err, Some(OpenError::NoFolder { folder: f, .. }) if *f == folder),
            "{err:?}"
        );
        assert!(!folder.exists());
        std::fs::create_dir(&folder).expect("folder");
        assert!(open(&path, OpenMode::Create).is_ok());
    }
}
