//! The runtime's HTTP API (DESIGN section 3) on axum, with the worker in-process.
//!
//! Every `/api/` route needs a bearer key; the key's name is the operator recorded in the
//! audit. Store calls run on tokio's blocking pool: reads on a small pool of read-only
//! connections, writes on the store's writer thread, which the in-process worker shares.
//! The listener is bound before the worker claims anything, so a server that cannot
//! serve never touches a row.

pub mod keys;
pub mod listen;

use crate::api::{self, ErrorBody, ErrorKind, SubmitRequest};
use crate::clock::{Clock, SystemClock};
use crate::model::Message;
use crate::remediation::{self, Action, Actor, Rejection, Request as ActionRequest};
use crate::runtime::engine::{self, NewNotification};
use crate::runtime::metrics::Metrics;
use crate::runtime::schema::{self, OpenMode};
use crate::runtime::worker::{Adapters, Worker, WorkerConfig};
use crate::runtime::writer::{Database, OpenFailed};
use crate::store::StoreError;
use crate::store::sqlite;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Extension, Path, RawQuery, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
pub use keys::Keys;
pub use listen::Limits;
use rusqlite::Connection;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// Request bodies larger than this get 413.
pub const BODY_LIMIT: usize = 64 * 1024;
const READ_CONNECTIONS: usize = 4;
const MAX_EVENTS_LIMIT: usize = 10_000;

/// Everything `runtime serve` needs.
pub struct ServerConfig {
    pub db_path: PathBuf,
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
    /// The API alone over `db_path`, on a free loopback port, with `keys` and the default
    /// limits: what tests, benchmarks and the sweep serve. Fields can be set after.
    pub fn api_only(db_path: PathBuf, keys: Option<Keys>) -> Self {
        Self {
            db_path,
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
    #[error("cannot start the server: {0}")]
    Runtime(std::io::Error),
}

impl From<OpenFailed> for ServeError {
    fn from(err: OpenFailed) -> Self {
        match err {
            OpenFailed::Store(open) => ServeError::Store(open),
            OpenFailed::Thread(io) => ServeError::Runtime(io),
        }
    }
}

/// Who is calling: the name of the key they presented.
#[derive(Debug, Clone)]
struct Principal(String);

/// Recorded as the operator when the server runs without keys.
const ANONYMOUS: &str = "anonymous";

struct AppState {
    metrics: Arc<Metrics>,
    verify: crate::verify::Sources,
    readers: Vec<Mutex<Connection>>,
    next_reader: AtomicUsize,
    writer: Database,
    clock: Arc<dyn Clock>,
    keys: Option<Keys>,
    default_max_attempts: i64,
    worker_running: bool,
    request_timeout: std::time::Duration,
    db_path: std::path::PathBuf,
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
struct ApiError(StatusCode, Box<ErrorBody>);

impl ApiError {
    fn new(status: StatusCode, kind: ErrorKind, message: impl Into<String>) -> Self {
        Self(
            status,
            Box::new(ErrorBody {
                error: message.into(),
                kind: Some(kind),
                conflict: None,
                refusal: None,
            }),
        )
    }

    fn invalid(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, ErrorKind::Invalid, message)
    }

    fn internal() -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            ErrorKind::Internal,
            "internal error; see the server log",
        )
    }
}

impl From<StoreError> for ApiError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::NotFound(what) => ApiError::new(
                StatusCode::NOT_FOUND,
                ErrorKind::NotFound,
                format!("{what} not found"),
            ),
            StoreError::Invalid(message) => ApiError::invalid(message),
            other => {
                tracing::error!(error = %other, "request failed");
                ApiError::internal()
            }
        }
    }
}

impl From<Rejection> for ApiError {
    fn from(rejection: Rejection) -> Self {
        let conflict = |kind, conflict: remediation::Conflict| {
            ApiError(
                StatusCode::CONFLICT,
                Box::new(ErrorBody {
                    error: conflict.to_string(),
                    kind: Some(kind),
                    conflict: Some(conflict),
                    refusal: None,
                }),
            )
        };
        match rejection {
            Rejection::NotFound(id) => ApiError::new(
                StatusCode::NOT_FOUND,
                ErrorKind::NotFound,
                format!("notification {id} not found"),
            ),
            Rejection::NotInDlq(c) => conflict(ErrorKind::Conflict, c),
            Rejection::Stale(c) => conflict(ErrorKind::Stale, c),
            Rejection::Refused(refusal) => ApiError(
                StatusCode::UNPROCESSABLE_ENTITY,
                Box::new(ErrorBody {
                    error: format!("{}; {}", refusal.why(), refusal.api_remedy()),
                    kind: Some(ErrorKind::Refused),
                    conflict: None,
                    refusal: Some(refusal),
                }),
            ),
            Rejection::Store(err) => {
                tracing::error!(error = %err, "request failed");
                ApiError::internal()
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, Json(*self.1)).into_response()
    }
}

type ApiResult<T> = Result<Json<T>, ApiError>;

async fn blocking<T: Send + 'static, E: Into<ApiError> + Send + 'static>(
    state: &Arc<AppState>,
    work: impl FnOnce(&AppState) -> Result<T, E> + Send + 'static,
) -> Result<T, ApiError> {
    let state = state.clone();
    tokio::task::spawn_blocking(move || work(&state))
        .await
        .map_err(|_| ApiError::internal())?
        .map_err(Into::into)
}

async fn require_key(
    State(state): State<Arc<AppState>>,
    mut request: Request,
    next: Next,
) -> Response {
    let name = match &state.keys {
        None => ANONYMOUS.to_string(),
        Some(keys) => {
            let presented = request
                .headers()
                .get(header::AUTHORIZATION)
                .and_then(|value| value.to_str().ok())
                .and_then(|value| value.strip_prefix("Bearer "))
                .map(str::as_bytes)
                .unwrap_or_default();
            match keys.identify(presented) {
                Some(name) => name.to_string(),
                None => {
                    let message = if request.headers().contains_key(header::AUTHORIZATION) {
                        "invalid API key"
                    } else {
                        "missing Authorization: Bearer header"
                    };
                    return ApiError::new(
                        StatusCode::UNAUTHORIZED,
                        ErrorKind::Unauthorized,
                        message,
                    )
                    .into_response();
                }
            }
        }
    };
    request.extensions_mut().insert(Principal(name));
    next.run(request).await
}

fn body_bytes(body: Result<Bytes, BytesRejection>) -> Result<Bytes, ApiError> {
    body.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(
                rejection.status(),
                ErrorKind::TooLarge,
                format!("a request body is at most {} KiB", BODY_LIMIT / 1024),
            )
        } else {
            ApiError::new(
                rejection.status(),
                ErrorKind::Invalid,
                rejection.body_text(),
            )
        }
    })
}

/// A JSON object body; an empty body is the default. Anything else (an array, a string,
/// malformed JSON) is a 400, so no stray body can trigger an action.
fn object_body<T: serde::de::DeserializeOwned + Default>(
    body: Result<Bytes, BytesRejection>,
    optional: bool,
) -> Result<T, ApiError> {
    let bytes = body_bytes(body)?;
    if optional && bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    let value: serde_json::Value = serde_json::from_slice(&bytes)
        .map_err(|err| ApiError::invalid(format!("invalid JSON body: {err}")))?;
    if !value.is_object() {
        return Err(ApiError::invalid("the body must be a JSON object"));
    }
    serde_json::from_value(value).map_err(|err| ApiError::invalid(format!("invalid body: {err}")))
}

async fn submit(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let request: SubmitRequest = object_body(body, false)?;
    let new = new_notification(&request, state.default_max_attempts).map_err(ApiError::invalid)?;
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
    if request.channels.contains(crate::model::Channel::Email) {
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
        channels: request.channels.clone(),
        payload: serde_json::to_value(message).unwrap_or_default(),
        idempotency_key: request.idempotency_key.clone().filter(|k| !k.is_empty()),
        max_attempts,
    })
}

fn checked_id(id: &str) -> Result<(), ApiError> {
    crate::model::NotificationId::parse(id)
        .map(drop)
        .map_err(|err| ApiError::invalid(err.to_string()))
}

async fn notification(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> ApiResult<api::NotificationDoc> {
    checked_id(&id)?;
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
            _ => Err(ApiError::invalid(format!(
                "limit must be a number from 1 to {max}"
            ))),
        },
    }
}

/// `GET /api/v1/runtime/notifications?id_prefix=P`: how a client turns a typed prefix
/// into an id (`dlq=true` for DLQ entries only; at most `limit`, 1 to 100, default 10).
async fn ids_with_prefix(
    State(state): State<Arc<AppState>>,
    RawQuery(query): RawQuery,
) -> ApiResult<api::IdsResponse> {
    let pairs = query_pairs(&query);
    let prefix = pairs
        .iter()
        .find(|(k, _)| k == "id_prefix")
        .map(|(_, v)| v.clone())
        .filter(|p| !p.is_empty())
        .ok_or_else(|| {
            ApiError::invalid(format!(
                "id_prefix is required: 1 to {} bytes of the id's start",
                crate::model::MAX_ID_BYTES
            ))
        })?;
    checked_id(&prefix)?;
    let dlq_only = match pairs
        .iter()
        .find(|(k, _)| k == "dlq")
        .map(|(_, v)| v.as_str())
    {
        None | Some("false") => false,
        Some("true") => true,
        Some(_) => return Err(ApiError::invalid("dlq must be true or false")),
    };
    let limit = parse_limit(&pairs, 10, 100)?;
    let ids = blocking(&state, move |state| {
        state.read(|conn| {
            Ok(crate::runtime::queries::ids_with_prefix(
                conn, &prefix, dlq_only, limit,
            )?)
        })
    })
    .await?;
    Ok(Json(api::IdsResponse { ids }))
}

async fn events(
    State(state): State<Arc<AppState>>,
    RawQuery(query): RawQuery,
) -> ApiResult<api::EventsResponse> {
    let pairs = query_pairs(&query);
    let kinds = pairs
        .iter()
        .filter(|(k, _)| k == "kind")
        .map(|(_, v)| v.parse::<crate::model::Kind>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(ApiError::invalid)?;
    let after = match pairs.iter().find(|(k, _)| k == "after") {
        None => None,
        Some((_, value)) => Some(
            value
                .parse::<i64>()
                .map_err(|_| ApiError::invalid("after must be an event id"))?,
        ),
    };
    let query = crate::store::EventQuery {
        kinds,
        selection: selection(&state, &pairs)?,
        limit: parse_limit(&pairs, 25, MAX_EVENTS_LIMIT)?,
        after,
    };
    Ok(Json(
        blocking(&state, move |state| {
            state.read(|conn| sqlite::search_events(conn, &query))
        })
        .await?,
    ))
}

/// The selection query parameters of the DLQ and event routes.
fn selection(
    state: &AppState,
    pairs: &[(String, String)],
) -> Result<crate::store::Selection, ApiError> {
    crate::store::Selection::from_query(pairs, state.clock.now()).map_err(ApiError::invalid)
}

/// One page of the DLQ. Written as the store is read; the next page's cursor is also
/// in the `UNS-Next-Cursor` header, so a client can ask for it before parsing this one.
async fn dlq(
    State(state): State<Arc<AppState>>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let pairs = query_pairs(&query);
    let limit = parse_limit(&pairs, 100, 1000)?;
    let cursor = pairs
        .iter()
        .find(|(k, _)| k == "cursor")
        .map(|(_, v)| v.clone());
    let include_events = pairs
        .iter()
        .any(|(k, v)| k == "include" && v.split(',').any(|part| part == "events"));
    let selection = selection(&state, &pairs)?;
    let (json, next) = blocking(&state, move |state| {
        state.read(|conn| {
            crate::store::page::dlq_page_json(
                conn,
                &selection,
                cursor.as_deref(),
                limit,
                include_events,
            )
        })
    })
    .await?;
    let mut response = (
        [(header::CONTENT_TYPE, "application/json")],
        Bytes::from(json),
    )
        .into_response();
    if let Some(next) = next.and_then(|n| header::HeaderValue::from_str(&n).ok()) {
        response.headers_mut().insert(api::NEXT_CURSOR, next);
    }
    Ok(response)
}

async fn act(
    state: Arc<AppState>,
    principal: Principal,
    id: String,
    action: Action,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<remediation::Done> {
    checked_id(&id)?;
    let request: ActionRequest = object_body(body, true)?;
    let actor = actor(principal, request.operator.as_deref());
    Ok(Json(
        blocking(&state, move |state| {
            let clock = state.clock.clone();
            state
                .writer
                .run(move |conn| {
                    remediation::apply(conn, clock.now(), &id, action, &request, &actor)
                })
                .map_err(|gone| Rejection::Store(gone.into()))?
        })
        .await?,
    ))
}

/// Who acts: the key's name is recorded; what the client claims is kept beside it.
fn actor(principal: Principal, claimed: Option<&str>) -> Actor {
    Actor {
        operator: principal.0,
        claimed_operator: claimed
            .map(str::trim)
            .filter(|o| !o.is_empty())
            .map(str::to_string),
    }
}

async fn resolve(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<remediation::Done> {
    act(state, principal, id, Action::Resolve, body).await
}

async fn replay(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<remediation::Done> {
    act(state, principal, id, Action::Replay, body).await
}

/// `POST /api/v1/runtime/notifications/{id}/verify`: the providers' records, asked here
/// with this server's logs and tokens, and with `record` the answers appended.
async fn verify(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<api::VerifyResponse> {
    checked_id(&id)?;
    let request: api::VerifyRequest = object_body(body, true)?;
    let actor = actor(principal, request.operator.as_deref());
    Ok(Json(
        blocking(&state, move |state| {
            verify_here(state, id, &request, &actor)
        })
        .await?,
    ))
}

fn verify_here(
    state: &AppState,
    id: String,
    request: &api::VerifyRequest,
    actor: &Actor,
) -> Result<api::VerifyResponse, ApiError> {
    let now = state.clock.now();
    let ids = [id];
    // The lookups use a blocking HTTP client, which wants a thread of its own.
    let mut asked = std::thread::scope(|scope| {
        scope
            .spawn(|| state.read(|conn| Ok(crate::verify::ask(conn, &ids, &state.verify, now)?)))
            .join()
            .unwrap_or_else(|_| Err(StoreError::Other("the verify thread failed".into())))
    })?;
    if let Some((id, _)) = asked.skipped.iter().find(|(_, why)| why == "not found") {
        return Err(StoreError::NotFound(format!("notification {id}")).into());
    }
    let recorded = if request.record {
        let (reason, ticket) = (request.reason.clone(), request.ticket.clone());
        let actor = actor.clone();
        let (results, back) = state.write(move |conn| {
            let why = crate::remediation::verified::Why {
                reason: reason.as_deref(),
                ticket: ticket.as_deref(),
            };
            let results = crate::verify::record(conn, now, &asked, &actor, why);
            Ok((results, asked))
        })?;
        asked = back;
        let mut recorded = None;
        for result in results {
            recorded = Some(result.map_err(|(_, rejection)| ApiError::from(rejection))?);
        }
        recorded
    } else {
        None
    };
    Ok(response(asked, recorded))
}

fn response(
    asked: crate::verify::Asked,
    recorded: Option<crate::remediation::verified::Recorded>,
) -> api::VerifyResponse {
    api::VerifyResponse {
        summary: crate::verify::summary(&asked.answers),
        answers: asked.answers,
        skipped: asked
            .skipped
            .into_iter()
            .map(|(id, reason)| api::Skipped { id, reason })
            .collect(),
        recorded,
    }
}

/// `GET /metrics`: Prometheus's text format, open like `/healthz` (it holds no id and no
/// payload). The store gauges are read at most every few seconds.
/// OpenMetrics goes to a scraper that asks for it; anything else gets the classic format.
async fn metrics(
    State(state): State<Arc<AppState>>,
    headers: axum::http::HeaderMap,
) -> Result<Response, ApiError> {
    let open_metrics = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .any(|value| value.contains("application/openmetrics-text"));
    use crate::runtime::metrics::Freshness;
    match state.metrics.freshness() {
        Freshness::Fresh => {}
        Freshness::Never => {
            blocking(&state, |state| {
                let now = state.clock.now();
                state.read(|conn| Ok(state.metrics.refresh(conn, now)?))
            })
            .await?;
        }
        Freshness::Stale => {
            if state.metrics.begin_refresh() {
                let state = state.clone();
                tokio::task::spawn_blocking(move || {
                    let now = state.clock.now();
                    if let Err(err) = state.read(|conn| Ok(state.metrics.refresh(conn, now)?)) {
                        tracing::warn!(error = %err, "cannot read the store gauges for /metrics");
                    }
                    state.metrics.end_refresh();
                });
            }
        }
    }
    let text = if open_metrics {
        state.metrics.encode()
    } else {
        state.metrics.encode_classic()
    };
    let content_type = if open_metrics {
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    } else {
        "text/plain; version=0.0.4; charset=utf-8"
    };
    Ok(([(header::CONTENT_TYPE, content_type)], text).into_response())
}

/// `GET /api/v1/runtime/stats?window=SECONDS`: the numbers `doctor` judges the runtime
/// by (default window 15 min, at most a week).
async fn stats(
    State(state): State<Arc<AppState>>,
    RawQuery(query): RawQuery,
) -> ApiResult<crate::runtime::queries::Health> {
    let pairs = query_pairs(&query);
    let window = match pairs.iter().find(|(k, _)| k == "window") {
        None => 900.0,
        Some((_, value)) => value
            .parse::<f64>()
            .ok()
            .filter(|w| w.is_finite() && *w > 0.0 && *w <= 7.0 * 86_400.0)
            .ok_or_else(|| {
                ApiError::invalid("window must be seconds, more than 0 and at most a week")
            })?,
    };
    Ok(Json(
        blocking(&state, move |state| {
            let now = state.clock.now();
            state.read(|conn| Ok(crate::runtime::queries::health(conn, now, window)?))
        })
        .await?,
    ))
}

/// `GET /api/v1/whoami`: the name the server records for the key presented.
async fn whoami(Extension(principal): Extension<Principal>) -> Json<api::WhoAmI> {
    Json(api::WhoAmI {
        operator: principal.0,
        service: api::SERVICE.into(),
    })
}

async fn healthz(State(state): State<Arc<AppState>>) -> Response {
    let identity = blocking(&state, |state| {
        state.read(|conn| {
            Ok(crate::runtime::queries::store_identity(
                conn,
                &state.db_path,
            )?)
        })
    })
    .await;
    let ok = identity.is_ok();
    // Which store this server serves, so a plan made on it is never applied to another.
    let body = serde_json::json!({
        "service": api::SERVICE,
        "status": if ok { "ok" } else { "store unavailable" },
        "schema_version": schema::SCHEMA_VERSION,
        "worker": state.worker_running,
        "store": identity.ok().flatten(),
    });
    let status = if ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(body)).into_response()
}

/// Answers 408 when a request (its body included) takes longer than the limit.
async fn request_timeout(
    State(state): State<Arc<AppState>>,
    request: Request,
    next: Next,
) -> Response {
    match tokio::time::timeout(state.request_timeout, next.run(request)).await {
        Ok(response) => response,
        Err(_) => ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            ErrorKind::Timeout,
            format!(
                "the request took longer than {} s",
                state.request_timeout.as_secs_f64()
            ),
        )
        .into_response(),
    }
}

async fn not_found() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        ErrorKind::NotFound,
        "no such endpoint",
    )
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        ErrorKind::Invalid,
        "this endpoint does not take that method",
    )
}

fn router(state: Arc<AppState>) -> Router {
    let guarded = Router::new()
        .route(api::NOTIFICATIONS, post(submit))
        .route(api::RUNTIME_NOTIFICATION, get(ids_with_prefix))
        .route(
            &format!("{}/{{id}}", api::RUNTIME_NOTIFICATION),
            get(notification),
        )
        .route(
            &format!("{}/{{id}}/replay", api::RUNTIME_NOTIFICATION),
            post(replay),
        )
        .route(
            &format!("{}/{{id}}/verify", api::RUNTIME_NOTIFICATION),
            post(verify),
        )
        .route(api::RUNTIME_EVENTS, get(events))
        .route(api::RUNTIME_STATS, get(stats))
        .route(api::DLQ, get(dlq))
        .route(&format!("{}/{{id}}", api::DLQ), delete(resolve))
        .route(api::WHOAMI, get(whoami))
        .route_layer(middleware::from_fn_with_state(state.clone(), require_key));
    Router::new()
        .route(api::HEALTHZ, get(healthz))
        .route(api::METRICS, get(metrics))
        .merge(guarded)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            request_timeout,
        ))
        .with_state(state)
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
    let writer = Database::open(&config.db_path)?;
    let readers = (0..READ_CONNECTIONS)
        .map(|_| schema::open(&config.db_path, OpenMode::ReadOnly).map(Mutex::new))
        .collect::<Result<Vec<_>, _>>()?;
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
        next_reader: AtomicUsize::new(0),
        writer,
        clock,
        keys: config.keys,
        default_max_attempts: config.default_max_attempts,
        worker_running: worker.is_some(),
        request_timeout: config.limits.request_timeout,
        db_path: config.db_path.clone(),
    });
    let (shutdown_tx, shutdown_rx) = tokio::sync::watch::channel(false);
    let app = router(state);
    let limits = config.limits;
    let thread = std::thread::Builder::new()
        .name("uns-api".into())
        .spawn(move || {
            runtime.block_on(listen::serve(listener, app, limits, shutdown_rx));
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
    });
    tracing::info!(
        "shutting down: no new claims; waiting for in-flight calls to record their results"
    );
    server.stop();
    tracing::info!("stopped");
    Ok(addr)
}
