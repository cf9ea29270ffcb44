//! The runtime's HTTP API (DESIGN section 3) on axum, with the worker in-process.
//!
//! Every `/api/` route needs the bearer key, compared in constant time. Store calls run on
//! tokio's blocking pool: reads on a small pool of read-only connections, writes on the
//! connection the worker shares, so in-process writers take turns instead of sleeping in
//! SQLite's busy handler.

use crate::api::{self, ActionRequest, DlqPage, ErrorBody, SubmitRequest};
use crate::clock::{Clock, SystemClock};
use crate::engine::{self, NewNotification};
use crate::model::{Channel, Message};
use crate::runtime::db::Database;
use crate::runtime::schema::{self, OpenMode};
use crate::runtime::worker::{Adapters, Worker, WorkerConfig};
use crate::store::StoreError;
use crate::store::sqlite::{self, Action};
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Path, RawQuery, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use rusqlite::Connection;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use subtle::ConstantTimeEq;

/// Request bodies larger than this get 413.
pub const BODY_LIMIT: usize = 64 * 1024;
const READ_CONNECTIONS: usize = 4;
const MAX_EVENTS_LIMIT: usize = 10_000;

/// Everything `runtime serve` needs.
pub struct ServerConfig {
    pub db_path: PathBuf,
    pub listen: SocketAddr,
    /// None only with the explicit insecure flag on a loopback address.
    pub api_key: Option<String>,
    /// The in-process worker; None serves the API alone.
    pub worker: Option<(WorkerConfig, Adapters)>,
    pub default_max_attempts: i64,
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(
        "UNS_API_KEY is not set: the API would be open to anyone who can reach it; set it, or pass --insecure-no-auth on a loopback address"
    )]
    NoKey,
    #[error("--insecure-no-auth is only allowed on a loopback address, not {0}")]
    InsecureNotLoopback(SocketAddr),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot start the server runtime: {0}")]
    Runtime(std::io::Error),
}

struct AppState {
    readers: Vec<Mutex<Connection>>,
    next_reader: AtomicUsize,
    writer: Database,
    clock: Arc<dyn Clock>,
    key: Option<Vec<u8>>,
    default_max_attempts: i64,
    worker_running: bool,
}

impl AppState {
    fn read<T>(
        &self,
        work: impl FnOnce(&Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let start = self.next_reader.fetch_add(1, Ordering::Relaxed);
        // Take the first idle reader, else wait on one.
        for offset in 0..self.readers.len() {
            if let Ok(conn) = self.readers[(start + offset) % self.readers.len()].try_lock() {
                return work(&conn);
            }
        }
        let conn = self.readers[start % self.readers.len()]
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        work(&conn)
    }

    /// Runs `work` on the store's writer thread, shared with the in-process worker.
    fn write<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        self.writer
            .run(work)
            .map_err(|gone| StoreError::Unavailable(gone.to_string()))?
    }
}

/// An API error: status plus the JSON body.
struct ApiError(StatusCode, ErrorBody);

impl ApiError {
    fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self(
            status,
            ErrorBody {
                error: message.into(),
                conflict: None,
            },
        )
    }
}

impl From<StoreError> for ApiError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::NotFound(what) => {
                ApiError::new(StatusCode::NOT_FOUND, format!("{what} not found"))
            }
            StoreError::Conflict(conflict) => ApiError(
                StatusCode::CONFLICT,
                ErrorBody {
                    error: conflict.to_string(),
                    conflict: Some(conflict),
                },
            ),
            StoreError::Invalid(message) => ApiError::new(StatusCode::BAD_REQUEST, message),
            StoreError::Refused(message) => {
                ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, message)
            }
            other => {
                tracing::error!(error = %other, "request failed");
                ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal error; see the server log",
                )
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, Json(self.1)).into_response()
    }
}

type ApiResult<T> = Result<Json<T>, ApiError>;

async fn blocking<T: Send + 'static>(
    state: &Arc<AppState>,
    work: impl FnOnce(&AppState) -> Result<T, StoreError> + Send + 'static,
) -> Result<T, ApiError> {
    let state = state.clone();
    tokio::task::spawn_blocking(move || work(&state))
        .await
        .map_err(|_| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal error; see the server log",
            )
        })?
        .map_err(ApiError::from)
}

async fn require_key(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    if let Some(expected) = &state.key {
        let presented = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "))
            .map(str::as_bytes)
            .unwrap_or_default();
        let matches = presented.len() == expected.len() && bool::from(presented.ct_eq(expected));
        if !matches {
            let message = if request.headers().contains_key(header::AUTHORIZATION) {
                "invalid API key"
            } else {
                "missing Authorization: Bearer header"
            };
            return ApiError::new(StatusCode::UNAUTHORIZED, message).into_response();
        }
    }
    next.run(request).await
}

/// A JSON body that may be empty; malformed or oversized bodies get a JSON error.
fn optional_body<T: serde::de::DeserializeOwned + Default>(
    body: Result<Bytes, BytesRejection>,
) -> Result<T, ApiError> {
    let bytes =
        body.map_err(|rejection| ApiError::new(rejection.status(), rejection.body_text()))?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    serde_json::from_slice(&bytes)
        .map_err(|err| ApiError::new(StatusCode::BAD_REQUEST, format!("invalid JSON body: {err}")))
}

async fn submit(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let bytes =
        body.map_err(|rejection| ApiError::new(rejection.status(), rejection.body_text()))?;
    let request: SubmitRequest = serde_json::from_slice(&bytes).map_err(|err| {
        ApiError::new(StatusCode::BAD_REQUEST, format!("invalid JSON body: {err}"))
    })?;
    let new = new_notification(&request, state.default_max_attempts)
        .map_err(|m| ApiError::new(StatusCode::BAD_REQUEST, m))?;
    let submitted = blocking(&state, move |state| {
        let clock = state.clock.clone();
        state.write(move |conn| Ok(engine::submit(conn, clock.now(), &new)?))
    })
    .await?;
    let status = if submitted.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(submitted)).into_response())
}

/// Validates a submission; shared with `runtime submit --db`.
pub fn new_notification(
    request: &SubmitRequest,
    default_max_attempts: i64,
) -> Result<NewNotification, String> {
    if request.channels.is_empty() {
        return Err("channels: at least one of EMAIL, SLACK, PAGERDUTY is required".into());
    }
    let channels = request
        .channels
        .iter()
        .map(|c| c.parse::<Channel>().map_err(|e| format!("channels: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    if channels.contains(&Channel::Email) {
        let recipient = request.recipient.as_deref().unwrap_or_default();
        if recipient.parse::<lettre::Address>().is_err() {
            return Err(format!(
                "recipient: EMAIL needs an email address, got {recipient:?}"
            ));
        }
    }
    let max_attempts = request.max_attempts.unwrap_or(default_max_attempts);
    if !(1..=100).contains(&max_attempts) {
        return Err("max_attempts: must be between 1 and 100".into());
    }
    let message = Message {
        recipient: request.recipient.clone(),
        subject: request.subject.clone(),
        body: request.body.clone(),
    };
    Ok(NewNotification {
        channels,
        payload: serde_json::to_value(message).unwrap_or_default(),
        idempotency_key: request.idempotency_key.clone().filter(|k| !k.is_empty()),
        max_attempts,
    })
}

async fn notification(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> ApiResult<api::NotificationDoc> {
    Ok(Json(
        blocking(&state, move |state| {
            state.read(|conn| sqlite::notification_doc(conn, &id))
        })
        .await?,
    ))
}

fn query_pairs(query: &Option<String>) -> Vec<(String, String)> {
    form_urlencoded::parse(query.as_deref().unwrap_or_default().as_bytes())
        .into_owned()
        .collect()
}

fn parse_limit(pairs: &[(String, String)], default: usize, max: usize) -> Result<usize, ApiError> {
    match pairs.iter().find(|(k, _)| k == "limit") {
        None => Ok(default),
        Some((_, value)) => match value.parse::<usize>() {
            Ok(limit) if (1..=max).contains(&limit) => Ok(limit),
            _ => Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                format!("limit must be a number from 1 to {max}"),
            )),
        },
    }
}

async fn events(
    State(state): State<Arc<AppState>>,
    RawQuery(query): RawQuery,
) -> ApiResult<api::EventsResponse> {
    let pairs = query_pairs(&query);
    let kinds: Vec<String> = pairs
        .iter()
        .filter(|(k, _)| k == "kind")
        .map(|(_, v)| v.clone())
        .collect();
    let limit = parse_limit(&pairs, 25, MAX_EVENTS_LIMIT)?;
    Ok(Json(
        blocking(&state, move |state| {
            state.read(|conn| sqlite::search_events(conn, &kinds, limit))
        })
        .await?,
    ))
}

async fn dlq(State(state): State<Arc<AppState>>, RawQuery(query): RawQuery) -> ApiResult<DlqPage> {
    let pairs = query_pairs(&query);
    let limit = parse_limit(&pairs, 100, 1000)?;
    let cursor = pairs
        .iter()
        .find(|(k, _)| k == "cursor")
        .map(|(_, v)| v.clone());
    let include_events = pairs
        .iter()
        .any(|(k, v)| k == "include" && v.split(',').any(|part| part == "events"));
    Ok(Json(
        blocking(&state, move |state| {
            state.read(|conn| sqlite::dlq_page(conn, cursor.as_deref(), limit, include_events))
        })
        .await?,
    ))
}

async fn act(
    state: Arc<AppState>,
    id: String,
    action: Action,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<api::ActionResponse> {
    let request: ActionRequest = optional_body(body)?;
    Ok(Json(
        blocking(&state, move |state| {
            let clock = state.clock.clone();
            state.write(move |conn| sqlite::act(conn, clock.now(), &id, action, &request, "api"))
        })
        .await?,
    ))
}

async fn resolve(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<api::ActionResponse> {
    act(state, id, Action::Resolve, body).await
}

async fn replay(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<api::ActionResponse> {
    act(state, id, Action::Replay, body).await
}

async fn healthz(State(state): State<Arc<AppState>>) -> Response {
    let ok = blocking(&state, |state| {
        state.read(|conn| Ok(conn.query_row("SELECT 1", [], |row| row.get::<_, i64>(0))?))
    })
    .await
    .is_ok();
    let body = serde_json::json!({
        "status": if ok { "ok" } else { "store unavailable" },
        "schema_version": schema::SCHEMA_VERSION,
        "worker": state.worker_running,
    });
    let status = if ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(body)).into_response()
}

async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "no such endpoint")
}

fn router(state: Arc<AppState>) -> Router {
    let guarded = Router::new()
        .route(api::NOTIFICATIONS, post(submit))
        .route(
            &format!("{}/{{id}}", api::RUNTIME_NOTIFICATION),
            get(notification),
        )
        .route(
            &format!("{}/{{id}}/replay", api::RUNTIME_NOTIFICATION),
            post(replay),
        )
        .route(api::RUNTIME_EVENTS, get(events))
        .route(api::DLQ, get(dlq))
        .route(&format!("{}/{{id}}", api::DLQ), delete(resolve))
        .route_layer(middleware::from_fn_with_state(state.clone(), require_key));
    Router::new()
        .route(api::HEALTHZ, get(healthz))
        .merge(guarded)
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(state)
}

/// A server started in the background (tests, `repro --keep-running`, the load test).
pub struct RunningServer {
    pub addr: SocketAddr,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
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
            let _ = shutdown.send(());
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

fn check_auth(config: &ServerConfig) -> Result<(), ServeError> {
    match &config.api_key {
        Some(_) => Ok(()),
        None if config.listen.ip().is_loopback() => Ok(()),
        None => Err(ServeError::InsecureNotLoopback(config.listen)),
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
    check_auth(&config)?;
    let writer = Database::open(&config.db_path)?;
    let readers = (0..READ_CONNECTIONS)
        .map(|_| schema::open(&config.db_path, OpenMode::ReadOnly).map(Mutex::new))
        .collect::<Result<Vec<_>, _>>()
        .map_err(StoreError::from)?;
    let worker_stop = Arc::new(AtomicBool::new(false));
    let (writer, worker, worker_threads) = match config.worker {
        Some((worker_config, adapters)) => {
            let worker = Worker::new(writer.clone(), clock.clone(), adapters, worker_config);
            let threads = worker.spawn(worker_stop.clone());
            (worker.database(), Some(worker), threads)
        }
        None => (writer, None, Vec::new()),
    };
    let state = Arc::new(AppState {
        readers,
        next_reader: AtomicUsize::new(0),
        writer,
        clock,
        key: config.api_key.map(String::into_bytes),
        default_max_attempts: config.default_max_attempts,
        worker_running: worker.is_some(),
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .thread_name("uns-api")
        .enable_all()
        .build()
        .map_err(ServeError::Runtime)?;
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
    let (shutdown_tx, shutdown_rx) = tokio::sync::oneshot::channel::<()>();
    let app = router(state);
    let thread = std::thread::Builder::new()
        .name("uns-api".into())
        .spawn(move || {
            runtime.block_on(async move {
                let served = axum::serve(listener, app)
                    .with_graceful_shutdown(async move {
                        let _ = shutdown_rx.await;
                    })
                    .await;
                if let Err(err) = served {
                    tracing::error!(error = %err, "the API server stopped");
                }
            });
            runtime.shutdown_timeout(std::time::Duration::from_secs(5));
        })
        .map_err(ServeError::Runtime)?;
    tracing::info!(%addr, "serving the UNS API");
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
pub fn serve_until_signal(config: ServerConfig) -> Result<SocketAddr, ServeError> {
    let server = start(config)?;
    let addr = server.addr;
    let signals = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(ServeError::Runtime)?;
    signals.block_on(async {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            match signal(SignalKind::terminate()) {
                Ok(mut term) => {
                    tokio::select! {
                        _ = tokio::signal::ctrl_c() => {}
                        _ = term.recv() => {}
                    }
                }
                Err(_) => {
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
    });
    tracing::info!(
        "shutting down: no new claims; waiting for in-flight calls to record their results"
    );
    server.stop();
    tracing::info!("stopped");
    Ok(addr)
}
