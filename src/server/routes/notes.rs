//! The operators' notes about an incident: `POST` keeps one, `GET` lists a window's.

use super::object_body;
use super::query::Query;
use crate::api::{NoteRequest, NoteRow, NotesResponse};
use crate::remediation::{self, Rejection};
use crate::server::errors::{ApiError, ApiResult};
use crate::server::state::{AppState, Principal, blocking};
use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Extension, RawQuery, State};
use std::sync::Arc;

/// `POST /api/v1/runtime/notes`: the key's name is recorded with the person it claims,
/// as for every act.
pub(crate) async fn write(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<NoteRow> {
    let request: NoteRequest = object_body(body, false)?;
    let actor = super::dlq::actor(principal, request.operator.as_deref())?;
    Ok(Json(
        blocking(&state, move |state| {
            let clock = state.clock.clone();
            state
                .writer
                .run(move |conn| remediation::note::write(conn, clock.now(), &request, &actor))
                .map_err(|gone| Rejection::Store(gone.into()))?
        })
        .await?,
    ))
}

/// `GET /api/v1/runtime/notes?since=S&until=U` (unix seconds, either left out).
pub(crate) async fn list(
    State(state): State<Arc<AppState>>,
    RawQuery(query): RawQuery,
) -> ApiResult<NotesResponse> {
    let query = Query::parse_for(&query, &[super::query::NOTES])?;
    let time = |name: &str| -> Result<Option<f64>, ApiError> {
        match query.one(name)? {
            None => Ok(None),
            Some(text) => text
                .parse::<f64>()
                .ok()
                .filter(|at| at.is_finite())
                .map(Some)
                .ok_or_else(|| ApiError::invalid(format!("{name} must be unix seconds"))),
        }
    };
    let (since, until) = (time("since")?, time("until")?);
    Ok(Json(
        blocking(&state, move |state| {
            state.read(|conn| {
                Ok(NotesResponse {
                    notes: crate::runtime::queries::read_notes(conn, since, until)?,
                })
            })
        })
        .await?,
    ))
}
