//! The DLQ: a page of it, and the guarded resolve, replay and verify of one entry.

use super::query::{DlqQuery, Query, limit};
use super::{checked_id, object_body, selection};
use crate::api::{self};
use crate::remediation::{self, Action, Actor, Rejection, Request as ActionRequest};
use crate::server::errors::{ApiError, ApiResult};
use crate::server::state::{AppState, Principal, blocking};
use crate::store::StoreError;
use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Extension, Path, RawQuery, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

/// One page of the DLQ. Written as the store is read; the next page's cursor is also
/// in the `UNS-Next-Cursor` header, so a client can ask for it before parsing this one.
pub(crate) async fn page(
    State(state): State<Arc<AppState>>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let query = Query::parse_for(&query, &[super::query::DLQ, super::query::SELECTION])?;
    let asked: DlqQuery = query.typed()?;
    let limit = limit(asked.limit.as_deref(), 100, 1000)?;
    let cursor = asked.cursor;
    let include_events = query
        .all("include")
        .any(|v| v.split(',').any(|part| part == "events"));
    let selection = selection(&state, &asked.selection, &query)?;
    let (json, next) = blocking(&state, move |state| {
        state.read(|conn| {
            let selection = super::with_exclusions(conn, selection)?;
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
    Ok(page_response(json, next))
}

/// A page written as JSON, with the next page's cursor also in the `UNS-Next-Cursor`
/// header.
pub(crate) fn page_response(json: Vec<u8>, next: Option<String>) -> Response {
    let mut response = (
        [(header::CONTENT_TYPE, "application/json")],
        Bytes::from(json),
    )
        .into_response();
    if let Some(next) = next.and_then(|n| header::HeaderValue::from_str(&n).ok()) {
        response.headers_mut().insert(api::NEXT_CURSOR, next);
    }
    response
}

pub(crate) async fn act(
    state: Arc<AppState>,
    principal: Principal,
    id: String,
    action: Action,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<remediation::Done> {
    checked_id(&id)?;
    let request: ActionRequest = object_body(body, true)?;
    let actor = actor(principal, request.operator.as_deref())?;
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

/// Who acts: the key's name is recorded; what the client claims is kept beside it, and
/// said to be missing when it claims no one, so the key's name never stands alone for a
/// person (DESIGN §5).
/// A claim that cannot be recorded ([`crate::model::payload::operator_name_problem`]) is a
/// 400: the record would say someone else acted.
pub(crate) fn actor(principal: Principal, claimed: Option<&str>) -> Result<Actor, ApiError> {
    let claimed = claimed.map(str::trim).filter(|o| !o.is_empty());
    if let Some(why) = claimed.and_then(crate::model::payload::operator_name_problem) {
        return Err(ApiError::from(StoreError::Invalid(format!(
            "operator cannot be recorded: it {why}"
        ))));
    }
    Ok(Actor {
        operator: principal.0,
        claimed_operator: Some(claimed.unwrap_or(NO_OPERATOR).to_string()),
    })
}

/// What stands for the operator when a client names none.
pub(crate) const NO_OPERATOR: &str = "(no operator named)";

pub(crate) async fn resolve(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<remediation::Done> {
    act(state, principal, id, Action::Resolve, body).await
}

pub(crate) async fn replay(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<remediation::Done> {
    act(state, principal, id, Action::Replay, body).await
}

/// `POST /api/v1/runtime/notifications/{id}/verify`: the providers' records, asked here
/// with this server's logs and tokens, and with `record` the answers appended.
pub(crate) async fn verify(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<api::VerifyResponse> {
    checked_id(&id)?;
    let request: api::VerifyRequest = object_body(body, true)?;
    let actor = actor(principal, request.operator.as_deref())?;
    Ok(Json(
        blocking(&state, move |state| {
            verify_here(state, id, &request, &actor)
        })
        .await?,
    ))
}

pub(crate) fn verify_here(
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
    if let Some(id) = asked.not_found().next() {
        return Err(StoreError::NotFound(format!("notification {id}")).into());
    }
    let recorded = if request.record {
        let (reason, ticket) = (request.reason.clone(), request.ticket.clone());
        let actor = actor.clone();
        let (results, back) = state.write(move |conn| {
            let why = crate::remediation::verified::Why {
                reason: reason.as_deref(),
                ticket: ticket.as_deref(),
                via: None,
            };
            let results = crate::verify::record(
                conn,
                now,
                &asked,
                &actor,
                why,
                crate::remediation::verified::ReadOn::Here,
            );
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

/// `POST /api/v1/runtime/notifications/{id}/verified`: answers a client read from the
/// providers' records, each with its source and evidence, recorded as VERIFIED events
/// after the transition checks them against the history as it stands (DESIGN §7). The
/// audit says who sent them and that they were read on the client.
pub(crate) async fn verified(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<crate::remediation::verified::Written> {
    checked_id(&id)?;
    let request: api::VerifiedRequest = object_body(body, false)?;
    if request.findings.is_empty() {
        return Err(ApiError::from(StoreError::Invalid(
            "no findings to record".into(),
        )));
    }
    let actor = actor(principal, request.operator.as_deref())?;
    Ok(Json(
        blocking(&state, move |state| {
            let clock = state.clock.clone();
            state
                .writer
                .run(move |conn| {
                    crate::remediation::verified::record(
                        conn,
                        clock.now(),
                        &id,
                        &request.findings,
                        &actor,
                        crate::remediation::verified::Why {
                            reason: request.reason.as_deref(),
                            ticket: request.ticket.as_deref(),
                            via: request.via,
                        },
                        crate::remediation::verified::ReadOn::Client,
                    )
                })
                .map_err(|gone| Rejection::Store(gone.into()))?
        })
        .await?,
    ))
}

pub(crate) fn response(
    asked: crate::verify::Asked,
    recorded: Option<crate::remediation::verified::Written>,
) -> api::VerifyResponse {
    api::VerifyResponse {
        summary: crate::verify::summary(&asked.answers),
        answers: asked.answers,
        unread: asked.unread,
        skipped: asked
            .skipped
            .into_iter()
            .map(|(id, reason)| api::Skipped { id, reason })
            .collect(),
        recorded,
    }
}
