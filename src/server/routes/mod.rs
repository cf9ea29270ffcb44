//! The router, its middleware (the key, the request deadline), and what the handlers
//! share in reading a request: its body, its id, and its query string as a typed struct.

use crate::api::{self, ErrorKind};
use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use std::sync::Arc;

pub(crate) mod dlq;
pub(crate) mod notes;
pub(crate) mod notifications;
pub(crate) mod ops;
pub(crate) mod query;
pub(crate) mod reconcile;

use super::BODY_LIMIT;
use super::errors::ApiError;
use super::state::{ANONYMOUS, AppState, Principal};

pub(crate) const MAX_EVENTS_LIMIT: usize = 10_000;

pub(crate) async fn require_key(
    State(state): State<Arc<AppState>>,
    mut request: Request,
    next: Next,
) -> Response {
    let name = match &state.keys {
        None => ANONYMOUS.to_string(),
        Some(keys) => {
            let mut given = request.headers().get_all(header::AUTHORIZATION).iter();
            let (first, second) = (given.next(), given.next());
            if second.is_some() {
                // Two keys: which of them acts, and who is named in the audit, cannot be told.
                return ApiError::new(
                    StatusCode::UNAUTHORIZED,
                    ErrorKind::Unauthorized,
                    "more than one Authorization header: send one key",
                )
                .into_response();
            }
            let presented = first
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

pub(crate) fn body_bytes(body: Result<Bytes, BytesRejection>) -> Result<Bytes, ApiError> {
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
pub(crate) fn object_body<T: serde::de::DeserializeOwned + Default>(
    body: Result<Bytes, BytesRejection>,
    optional: bool,
) -> Result<T, ApiError> {
    let bytes = body_bytes(body)?;
    if optional && bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    // A key given twice is refused, not read as its last: `{"confirm": false, "confirm":
    // true}` says two things.
    let value = crate::json::strict(&bytes)
        .map_err(|err| ApiError::invalid(format!("invalid JSON body: {err}")))?;
    if !value.is_object() {
        return Err(ApiError::invalid("the body must be a JSON object"));
    }
    serde_json::from_value(value).map_err(|err| ApiError::invalid(format!("invalid body: {err}")))
}

pub(crate) fn checked_id(id: &str) -> Result<(), ApiError> {
    crate::model::NotificationId::parse(id)
        .map(drop)
        .map_err(|err| ApiError::invalid(err.to_string()))
}

/// The selection of the DLQ and event routes, its times read against the server's clock.
pub(crate) fn selection(
    state: &AppState,
    asked: &crate::store::selection::SelectionQuery,
    query: &query::Query,
) -> Result<crate::store::Selection, ApiError> {
    let asked = crate::store::selection::SelectionQuery {
        exclude: query.all("exclude").map(str::to_string).collect(),
        error: query.all("error").map(str::to_string).collect(),
        not_error: query.all("not_error").map(str::to_string).collect(),
        subject: query.all("subject").map(str::to_string).collect(),
        to: query.all("to").map(str::to_string).collect(),
        ..asked.clone()
    };
    crate::store::Selection::from_query(&asked, state.clock.now()).map_err(ApiError::invalid)
}

/// `selection` with each `exclude` expanded from its prefix among the notifications, as
/// the CLI's `--exclude` is: one that names no notification, or several, is refused,
/// never passed over. Any notification counts, in the DLQ or not: one that left the DLQ
/// between a client's pages (notifications are never deleted) must not end its reading.
pub(crate) fn with_exclusions(
    db: &crate::db::Db<'_>,
    mut selection: crate::store::Selection,
) -> Result<crate::store::Selection, crate::store::StoreError> {
    use crate::store::selection::{EXCLUDED_SHOWN, excluded_id};
    let mut ids: Vec<String> = Vec::with_capacity(selection.exclude.len());
    for typed in &selection.exclude {
        let found = crate::runtime::queries::ids_with_prefix(db, typed, false, EXCLUDED_SHOWN + 1)?;
        let id = excluded_id(typed, &found).map_err(|not| {
            crate::store::StoreError::Invalid(format!(
                "{}: an exclusion must name the one notification it leaves out",
                not.refusal("exclude", typed, "notification's")
            ))
        })?;
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    selection.exclude = ids;
    Ok(selection)
}

/// Answers 408 when a request (its body included) takes longer than the limit.
pub(crate) async fn request_timeout(
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

pub(crate) async fn not_found() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        ErrorKind::NotFound,
        "no such endpoint",
    )
}

pub(crate) async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        ErrorKind::Invalid,
        "this endpoint does not take that method",
    )
}

pub(crate) fn router(state: Arc<AppState>) -> Router {
    let guarded = Router::new()
        .route(api::NOTIFICATIONS, post(notifications::submit))
        .route(
            api::RUNTIME_NOTIFICATION,
            get(notifications::ids_with_prefix),
        )
        .route(
            &format!("{}/{{id}}", api::RUNTIME_NOTIFICATION),
            get(notifications::notification),
        )
        .route(
            &format!("{}/{{id}}/replay", api::RUNTIME_NOTIFICATION),
            post(dlq::replay),
        )
        .route(
            &format!("{}/{{id}}/verify", api::RUNTIME_NOTIFICATION),
            post(dlq::verify),
        )
        .route(
            &format!("{}/{{id}}/verified", api::RUNTIME_NOTIFICATION),
            post(dlq::verified),
        )
        .route(api::RUNTIME_EVENTS, get(notifications::events))
        .route(api::RUNTIME_STATS, get(ops::stats))
        .route(api::RUNTIME_PULSE, get(ops::pulse))
        .route(api::RUNTIME_NOTES, get(notes::list).post(notes::write))
        .route(api::DLQ, get(dlq::page))
        .route(api::RUNTIME_RECONCILE, get(reconcile::page))
        .route(&format!("{}/{{id}}", api::DLQ), delete(dlq::resolve))
        .route(api::WHOAMI, get(ops::whoami))
        .route_layer(middleware::from_fn_with_state(state.clone(), require_key));
    Router::new()
        .route(api::HEALTHZ, get(ops::healthz))
        .route(api::METRICS, get(ops::metrics))
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
