//! The runtime's HTTP API (DESIGN section 3) on axum, with the worker in-process: its
//! configuration and lifecycle here; the shared state in `state`, the error mapping in
//! `errors`, the router, middleware and handlers in `routes`.
//!
//! Every `/api/` route needs a bearer key; the key's name is the operator recorded in the
//! audit. Store calls run on tokio's blocking pool: reads on a small pool of read-only
//! connections, writes on the store's writer thread, which the in-process worker shares.
//! The listener is bound before the worker claims anything, so a server that cannot
//! serve never touches a row.

mod errors;
pub mod keys;
pub mod listen;
mod routes;
mod state;

pub use routes::notifications::new_notification;
use routes::router;
use state::{AppState, Readers};

use crate::clock::{Clock, SystemClock};
use crate::db::Place;
use crate::runtime::metrics::Metrics;
use crate::runtime::schema::{self, OpenMode};
use crate::runtime::worker::{Adapters, Worker, WorkerConfig};
use crate::runtime::writer::{Database, OpenFailed, Pool};
pub use keys::Keys;
pub use listen::Limits;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// Request bodies larger than this get 413.
pub const BODY_LIMIT: usize = 64 * 1024;
const READ_CONNECTIONS: usize = 4;

/// Everything `runtime serve` needs.
pub struct ServerConfig {
    /// The store: a SQLite file, or a PostgreSQL database that several servers share.
    pub db: Place,
    /// What `POST .../verify` reads: relay logs, provider tokens.
    pub verify: crate::verify::Sources,
    pub listen: SocketAddr,
    /// None only with the explicit insecure flag on a loopback address.
    pub keys: Option<Keys>,
    /// The in-process worker; None serves the API alone.
    pub worker: Option<(WorkerConfig, Adapters)>,
    pub default_max_attempts: i64,
    /// Where `GET /metrics` reads from; None makes a fresh set for this server's
    /// worker. Given, it is shared with a worker that runs elsewhere in the process.
    pub metrics: Option<Arc<Metrics>>,
    pub limits: Limits,
}

impl ServerConfig {
    /// The API alone over `db`, on a free loopback port, with `keys` and the default
    /// limits: what tests, benchmarks and the sweep serve. Fields can be set after.
    pub fn api_only(db: impl Into<Place>, keys: Option<Keys>) -> Self {
        Self {
            db: db.into(),
            verify: crate::verify::Sources::default(),
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            keys,
            worker: None,
            default_max_attempts: 3,
            metrics: None,
            limits: Limits::default(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("--insecure-no-auth is only allowed on a loopback address, not {0}")]
    InsecureNotLoopback(SocketAddr),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(transparent)]
    Store(#[from] schema::OpenError),
    #[error(transparent)]
    Postgres(#[from] crate::db::pg::OpenError),
    #[error("cannot start the server: {0}")]
    Runtime(std::io::Error),
}

impl From<OpenFailed> for ServeError {
    fn from(err: OpenFailed) -> Self {
        match err {
            OpenFailed::Store(open) => ServeError::Store(open),
            OpenFailed::Postgres(open) => ServeError::Postgres(open),
            OpenFailed::Thread(io) => ServeError::Runtime(io),
        }
    }
}

/// A server started in the background (tests, `repro --keep-running`, the load test).
pub struct RunningServer {
    pub addr: SocketAddr,
    shutdown: Option<tokio::sync::watch::Sender<bool>>,
    thread: Option<JoinHandle<()>>,
    worker_stop: Arc<AtomicBool>,
    worker_threads: Vec<JoinHandle<()>>,
    pub worker: Option<Worker>,
}

impl RunningServer {
    /// Graceful stop: no new claims, in-flight calls record their results, then exit.
    pub fn stop(mut self) {
        self.stop_inner();
    }

    fn stop_inner(&mut self) {
        self.worker_stop.store(true, Ordering::SeqCst);
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(true);
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        for thread in self.worker_threads.drain(..) {
            let _ = thread.join();
        }
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        self.stop_inner();
    }
}

impl Readers {
    /// The read side of `place`, and the place the store's identity names.
    fn open(place: &Place) -> Result<(Self, String), ServeError> {
        Ok(match place {
            Place::File(path) => (
                Readers::Sqlite {
                    connections: (0..READ_CONNECTIONS)
                        .map(|_| schema::open(path, OpenMode::ReadOnly).map(Mutex::new))
                        .collect::<Result<Vec<_>, _>>()?,
                    next: AtomicUsize::new(0),
                },
                crate::runtime::queries::file_place(path),
            ),
            Place::Postgres(target) => {
                let pool = Pool::open(target, false, true)?;
                let place = pool.identity_place.clone();
                (Readers::Postgres(Box::new(pool)), place)
            }
        })
    }
}

/// Opens the store, binds, and serves on background threads until stopped.
pub fn start(config: ServerConfig) -> Result<RunningServer, ServeError> {
    start_with_clock(config, Arc::new(SystemClock))
}

pub fn start_with_clock(
    config: ServerConfig,
    clock: Arc<dyn Clock>,
) -> Result<RunningServer, ServeError> {
    if config.keys.is_none() && !config.listen.ip().is_loopback() {
        return Err(ServeError::InsecureNotLoopback(config.listen));
    }
    let writer = Database::open_at(&config.db)?;
    let (readers, identity_place) = Readers::open(&config.db)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .thread_name("uns-api")
        .enable_all()
        .build()
        .map_err(ServeError::Runtime)?;
    // Bind first: a server that cannot listen must not have claimed a single row.
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind(config.listen))
        .map_err(|source| ServeError::Bind {
            addr: config.listen,
            source,
        })?;
    let addr = listener.local_addr().map_err(|source| ServeError::Bind {
        addr: config.listen,
        source,
    })?;
    let worker_stop = Arc::new(AtomicBool::new(false));
    let lease_seconds = config
        .worker
        .as_ref()
        .map_or(WorkerConfig::default().lease_seconds, |(c, _)| {
            c.lease_seconds
        });
    let metrics = config
        .metrics
        .unwrap_or_else(|| Arc::new(Metrics::new(lease_seconds)));
    let (writer, worker, worker_threads) = match config.worker {
        Some((worker_config, adapters)) => {
            let worker = Worker::new(writer.clone(), clock.clone(), adapters, worker_config)
                .with_metrics(metrics.clone());
            let threads = worker.spawn(worker_stop.clone());
            (worker.database(), Some(worker), threads)
        }
        None => (writer, None, Vec::new()),
    };
    let state = Arc::new(AppState {
        metrics,
        verify: config.verify,
        readers,
        writer,
        clock,
        keys: config.keys,
        default_max_attempts: config.default_max_attempts,
        worker: worker.as_ref().map(Worker::supported),
        request_timeout: config.limits.request_timeout,
        identity_place,
    });
    let (shutdown_tx, shutdown_rx) = tokio::sync::watch::channel(false);
    let app = router(state);
    let limits = config.limits;
    // Said before the first request is answered, never after: a log that shows requests
    // served before "serving", or a server stopped right after its first answer without
    // the line, would mislead whoever reads it. It names the store, for whoever looks
    // after several, as it may be printed (no password).
    let store = crate::render::sanitize::clean(&config.db.shown()).into_owned();
    tracing::info!(%addr, %store, "serving the UNS API");
    let thread = std::thread::Builder::new()
        .name("uns-api".into())
        .spawn(move || {
            runtime.block_on(listen::serve(listener, app, limits, shutdown_rx));
            runtime.shutdown_timeout(std::time::Duration::from_secs(5));
        })
        .map_err(ServeError::Runtime)?;
    Ok(RunningServer {
        addr,
        shutdown: Some(shutdown_tx),
        thread: Some(thread),
        worker_stop,
        worker_threads,
        worker,
    })
}

/// `runtime serve`: runs until SIGINT or SIGTERM, then stops gracefully.
pub fn serve_until_signal(
    config: ServerConfig,
    clock: Arc<dyn Clock>,
) -> Result<SocketAddr, ServeError> {
    // Watched before the server starts and before it says it serves (see StopSignals);
    // kept while it stops, so a second signal then is taken, not fatal.
    let mut signals = crate::interrupt::StopSignals::watch().map_err(ServeError::Runtime)?;
    let server = start_with_clock(config, clock)?;
    let addr = server.addr;
    let _ = signals.wait();
    tracing::info!(
        "shutting down: no new claims; waiting for in-flight calls to record their results"
    );
    server.stop();
    tracing::info!("stopped");
    Ok(addr)
}
