//! Submitting a notification, reading one, turning a prefix into ids, and the event
//! search.

use super::query::{EventsQuery, PrefixQuery, Query, kinds, limit};
use super::{MAX_EVENTS_LIMIT, checked_id, object_body, selection};
use crate::api::{self, SubmitRequest};
use crate::model::Message;
use crate::runtime::engine::{self, NewNotification};
use crate::server::errors::{ApiError, ApiResult};
use crate::server::state::{AppState, blocking};
use crate::store::direct;
use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

pub(crate) async fn submit(
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

pub(crate) async fn notification(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> ApiResult<api::NotificationDoc> {
    checked_id(&id)?;
    Ok(Json(
        blocking(&state, move |state| {
            state.read(|conn| direct::notification_doc(conn, &id))
        })
        .await?,
    ))
}

/// `GET /api/v1/runtime/notifications?id_prefix=P`: how a client turns a typed prefix
/// into an id (`dlq=true` for DLQ entries only; at most `limit`, 1 to 100, default 10).
pub(crate) async fn ids_with_prefix(
    State(state): State<Arc<AppState>>,
    RawQuery(query): RawQuery,
) -> ApiResult<api::IdsResponse> {
    let asked: PrefixQuery = Query::parse_for(&query, &[super::query::PREFIX])?.typed()?;
    let prefix = asked.id_prefix.filter(|p| !p.is_empty()).ok_or_else(|| {
        ApiError::invalid(format!(
            "id_prefix is required: 1 to {} bytes of the id's start",
            crate::model::MAX_ID_BYTES
        ))
    })?;
    checked_id(&prefix)?;
    let dlq_only = match asked.dlq.as_deref() {
        None | Some("false") => false,
        Some("true") => true,
        Some(_) => return Err(ApiError::invalid("dlq must be true or false")),
    };
    let limit = limit(asked.limit.as_deref(), 10, 100)?;
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

pub(crate) async fn events(
    State(state): State<Arc<AppState>>,
    RawQuery(query): RawQuery,
) -> ApiResult<api::EventsResponse> {
    let query = Query::parse_for(&query, &[super::query::EVENTS, super::query::SELECTION])?;
    let asked: EventsQuery = query.typed()?;
    let kinds = kinds(&query)?;
    let after = match &asked.after {
        None => None,
        Some(value) => Some(
            value
                .parse::<i64>()
                .map_err(|_| ApiError::invalid("after must be an event id"))?,
        ),
    };
    let query = crate::store::EventQuery {
        kinds,
        selection: selection(&state, &asked.selection, &query)?,
        limit: limit(asked.limit.as_deref(), 25, MAX_EVENTS_LIMIT)?,
        after,
    };
    Ok(Json(
        blocking(&state, move |state| {
            state.read(|conn| {
                let query = crate::store::EventQuery {
                    selection: super::with_exclusions(conn, query.selection)?,
                    ..query
                };
                direct::search_events(conn, &query)
            })
        })
        .await?,
    ))
}
