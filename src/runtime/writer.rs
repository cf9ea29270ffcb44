//! Where the runtime's writes run: on SQLite, one thread owns the read-write connection
//! and runs every write transaction of the process, one after another, from a queue; on
//! PostgreSQL, each caller takes a connection of a pool (the database orders the writes,
//! by its row locks).
//!
//! Callers block until their job is done, so each transition is still one transaction
//! that has committed when the call returns. On SQLite what changes is who waits: with a
//! shared mutex, every hand-off to a parked thread left SQLite idle while the kernel woke
//! it; here the writer takes the next job off the queue at once.

use crate::db::pg::{PgConn, Target};
use crate::db::{Conn, Db, Place};
use rusqlite::Connection;
use std::sync::{Arc, Condvar, Mutex, mpsc};

type Job = Box<dyn FnOnce(&Connection) + Send>;

/// A handle on the store's writes; clones share it. SQLite's writer thread ends with the
/// last handle.
#[derive(Clone)]
pub enum Database {
    Sqlite(mpsc::Sender<Job>),
    Postgres(Arc<Pool>),
}

/// Why a write could not be run at all: nothing of it was done.
#[derive(Debug, thiserror::Error)]
pub enum WriterGone {
    /// The file's writer thread ended: nothing more is written in this process.
    #[error("the store's writer has stopped: {0}")]
    Stopped(String),
    /// No connection to the database could be had: it may be back in a moment.
    #[error("no connection to the store: {0}")]
    Unreachable(String),
}

/// Why the writer could not start.
#[derive(Debug, thiserror::Error)]
pub enum OpenFailed {
    #[error(transparent)]
    Store(#[from] crate::runtime::schema::OpenError),
    #[error(transparent)]
    Postgres(#[from] crate::db::pg::OpenError),
    #[error("cannot start the writer thread: {0}")]
    Thread(std::io::Error),
}

/// PostgreSQL connections to one database, each used by one caller at a time, at most
/// [`Pool::LIMIT`] open at once: a burst of requests waits for a connection rather than
/// opening as many as the server has threads.
pub struct Pool {
    target: Target,
    read_only: bool,
    state: Mutex<Idle>,
    freed: Condvar,
    /// The database's URL, as it may be printed.
    pub place: String,
    /// What the store's identity is hashed with (see `PgConn::identity_place`).
    pub identity_place: String,
}

struct Idle {
    /// Each with when it was given back.
    idle: Vec<(PgConn, std::time::Instant)>,
    /// Connections open, idle or in use.
    open: usize,
}

impl Drop for Pool {
    /// The connections close on a thread of their own: the client's own runtime cannot
    /// run on a thread that drives the server's (where the last handle on a server's
    /// pool may go).
    fn drop(&mut self) {
        let idle: Vec<PgConn> = std::mem::take(&mut self.lock().idle)
            .into_iter()
            .map(|(conn, _)| conn)
            .collect();
        if idle.is_empty() {
            return;
        }
        let _ = std::thread::Builder::new()
            .name("uns-db-close".into())
            .spawn(move || drop(idle))
            .map(|closing| closing.join());
    }
}

impl Pool {
    /// The most connections a pool holds open.
    pub const LIMIT: usize = 12;

    /// A connection idle this long is asked whether it is still there before it is
    /// lent: the server may have ended it meanwhile (a restart, a failover,
    /// `idle_session_timeout`), and the client learns that only when it next speaks, so
    /// the request given it would fail. One busier than that was just heard from.
    pub const CHECKED_AFTER_IDLE: std::time::Duration = std::time::Duration::from_secs(1);

    /// Opens the first connection, checking (and on an empty database, when `create`,
    /// creating) the schema. A `read_only` pool's sessions refuse every write; any other
    /// is refused on a database that takes none.
    pub fn open(
        target: &Target,
        create: bool,
        read_only: bool,
    ) -> Result<Self, crate::db::pg::OpenError> {
        let first = PgConn::open(target, create)?;
        // The runtime claims, settles and takes remediations: on a database that takes
        // no writes (a hot standby) it would fail every one of them, so it does not start.
        if !read_only {
            first.takes_writes()?;
        }
        let unusable = |err: crate::db::DbError| crate::db::pg::OpenError::Database {
            url: first.place.clone(),
            said: err.to_string(),
        };
        let identity_place = first.identity_place().map_err(unusable)?;
        let pool = Self {
            identity_place,
            place: first.place.clone(),
            target: target.clone(),
            read_only,
            state: Mutex::new(Idle {
                idle: Vec::new(),
                open: 1,
            }),
            freed: Condvar::new(),
        };
        let first = pool
            .prepared(first)
            .map_err(|err| crate::db::pg::OpenError::Database {
                url: pool.place.clone(),
                said: err.to_string(),
            })?;
        pool.lock().idle.push((first, std::time::Instant::now()));
        Ok(pool)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Idle> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn prepared(&self, conn: PgConn) -> crate::db::DbResult<PgConn> {
        if self.read_only {
            conn.read_only()?;
        }
        Ok(conn)
    }

    /// Runs `work` on a connection of the pool; one that failed is closed, not kept, and so
    /// is one whose session refused a write for taking none, which it would refuse every
    /// write lent it from now on.
    pub fn with<T>(&self, work: impl FnOnce(&Db<'_>) -> T) -> Result<T, WriterGone> {
        let conn = self.take()?;
        let value = work(&Db::Postgres(&conn));
        if !self.read_only && conn.took_no_writes() {
            drop(conn);
            self.lock().open -= 1;
            self.freed.notify_one();
            return Ok(value);
        }
        let mut state = self.lock();
        if conn.is_closed() {
            state.open -= 1;
        } else {
            state.idle.push((conn, std::time::Instant::now()));
        }
        drop(state);
        self.freed.notify_one();
        Ok(value)
    }

    /// A connection to lend: an idle one still there, else a new one while fewer than
    /// [`Pool::LIMIT`] are open, else the next one given back.
    fn take(&self) -> Result<PgConn, WriterGone> {
        loop {
            let taken = {
                let mut state = self.lock();
                loop {
                    if let Some((conn, since)) = state.idle.pop() {
                        if conn.is_closed() {
                            state.open -= 1;
                            continue;
                        }
                        break Some((conn, since));
                    }
                    if state.open < Self::LIMIT {
                        state.open += 1;
                        break None;
                    }
                    state = self.freed.wait(state).unwrap_or_else(|p| p.into_inner());
                }
            };
            match taken {
                // Asked outside the lock: the others need not wait on the network.
                Some((conn, since)) => {
                    if since.elapsed() < Self::CHECKED_AFTER_IDLE || conn.is_valid() {
                        return Ok(conn);
                    }
                    drop(conn);
                    self.lock().open -= 1;
                    self.freed.notify_one();
                }
                None => {
                    let made = PgConn::connect(&self.target)
                        .map_err(|err| WriterGone::Unreachable(err.to_string()))
                        .and_then(|conn| {
                            self.prepared(conn)
                                .map_err(|err| WriterGone::Unreachable(err.to_string()))
                        });
                    if made.is_err() {
                        self.lock().open -= 1;
                        self.freed.notify_one();
                    }
                    return made;
                }
            }
        }
    }
}

/// The store at `place` for the runtime's own writes, on this thread: a new file or an
/// empty database gets the schema.
pub fn open_runtime(place: &Place) -> Result<Conn, OpenFailed> {
    Ok(match place {
        Place::File(path) => Conn::Sqlite(crate::runtime::schema::open(
            path,
            crate::runtime::schema::OpenMode::Runtime,
        )?),
        Place::Postgres(target) => Conn::Postgres(Box::new(PgConn::open(target, true)?)),
    })
}

impl Database {
    /// Opens (or creates) the store at `path` and starts its writer thread.
    pub fn open(path: &std::path::Path) -> Result<Self, OpenFailed> {
        let conn = crate::runtime::schema::open(path, crate::runtime::schema::OpenMode::Runtime)?;
        Self::start(conn).map_err(OpenFailed::Thread)
    }

    /// The runtime's store wherever it is: a file's writer thread, or a pool of
    /// connections to a PostgreSQL database, whose schema is created when it is empty.
    pub fn open_at(place: &Place) -> Result<Self, OpenFailed> {
        match place {
            Place::File(path) => Self::open(path),
            Place::Postgres(target) => Self::open_postgres(target),
        }
    }

    /// Connects to the PostgreSQL store at `target`, creating its schema on an empty
    /// database.
    pub fn open_postgres(target: &Target) -> Result<Self, OpenFailed> {
        Ok(Database::Postgres(Arc::new(Pool::open(
            target, true, false,
        )?)))
    }

    /// Moves `conn` onto a new writer thread.
    pub fn start(conn: Connection) -> std::io::Result<Self> {
        let (jobs, queue) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("uns-db-writer".into())
            .spawn(move || {
                for job in queue {
                    job(&conn);
                }
            })?;
        Ok(Database::Sqlite(jobs))
    }

    /// Runs `work` where this store's writes run, and waits for its result.
    pub fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Db<'_>) -> T + Send + 'static,
    ) -> Result<T, WriterGone> {
        match self {
            Database::Sqlite(jobs) => {
                let (reply, result) = mpsc::sync_channel(1);
                jobs.send(Box::new(move |conn| {
                    let _ = reply.send(work(&Db::Sqlite(conn)));
                }))
                .map_err(|_| WriterGone::Stopped("its thread ended".into()))?;
                result
                    .recv()
                    .map_err(|_| WriterGone::Stopped("its thread ended".into()))
            }
            Database::Postgres(pool) => pool.with(work),
        }
    }
}
