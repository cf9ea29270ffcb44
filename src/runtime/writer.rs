//! The store's single writer: one thread owns the read-write connection and runs every
//! write transaction of the process, one after another, from a queue.
//!
//! Callers block until their job is done, so each transition is still one transaction
//! that has committed when the call returns. What changes is who waits: with a shared
//! mutex, every hand-off to a parked thread left SQLite idle while the kernel woke it;
//! here the writer takes the next job off the queue at once.

use rusqlite::Connection;
use std::sync::mpsc;

type Job = Box<dyn FnOnce(&Connection) + Send>;

/// A handle on the writer thread; clones share it. The thread ends with the last handle.
#[derive(Clone)]
pub struct Database {
    jobs: mpsc::Sender<Job>,
}

#[derive(Debug, thiserror::Error)]
#[error("the store's writer thread has stopped")]
pub struct WriterGone;

/// Why the writer could not start.
#[derive(Debug, thiserror::Error)]
pub enum OpenFailed {
    #[error(transparent)]
    Store(#[from] crate::runtime::schema::OpenError),
    #[error("cannot start the writer thread: {0}")]
    Thread(std::io::Error),
}

impl Database {
    /// Opens (or creates) the store at `path` and starts its writer thread.
    pub fn open(path: &std::path::Path) -> Result<Self, OpenFailed> {
        let conn = crate::runtime::schema::open(path, crate::runtime::schema::OpenMode::Runtime)?;
        Self::start(conn).map_err(OpenFailed::Thread)
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
        Ok(Self { jobs })
    }

    /// Runs `work` on the writer thread and waits for its result.
    pub fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Connection) -> T + Send + 'static,
    ) -> Result<T, WriterGone> {
        let (reply, result) = mpsc::sync_channel(1);
        self.jobs
            .send(Box::new(move |conn| {
                let _ = reply.send(work(conn));
            }))
            .map_err(|_| WriterGone)?;
        result.recv().map_err(|_| WriterGone)
    }
}
