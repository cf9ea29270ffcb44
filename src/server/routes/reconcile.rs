//! `GET /api/v1/runtime/reconcile`: the notifications with a channel attempt in a window,
//! in the DLQ or not, each with its events (those of the kinds `kind` names, when it is
//! given), paged as the DLQ is. Reconcile counts copies from them on the client, so both
//! backends read the same rows and events.

use super::query::{DlqQuery, Query, kinds, limit};
use super::selection;
use crate::server::errors::ApiError;
use crate::server::state::{AppState, blocking};
use crate::store::{Events, Rows, Selection, Window};
use axum::extract::{RawQuery, State};
use axum::response::Response;
use std::sync::Arc;

pub(crate) async fn page(
    State(state): State<Arc<AppState>>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let query = Query::parse_for(&query, &[super::query::RECONCILE, super::query::SELECTION])?;
    let asked: DlqQuery = query.typed()?;
    let limit = limit(asked.limit.as_deref(), 100, 1000)?;
    let cursor = asked.cursor;
    // The kinds of event asked for, read as the events route reads them.
    let kinds = kinds(&query)?;
    // The times bound the attempts, not when the entries last changed.
    let picked = selection(&state, &asked.selection, &query)?;
    let window = Window {
        since: picked.since,
        until: picked.until,
    };
    let selection = Selection {
        since: None,
        until: None,
        ..picked
    };
    let (json, next) = blocking(&state, move |state| {
        state.read(|conn| {
            let selection = super::with_exclusions(conn, selection)?;
            crate::store::page::page_json(
                conn,
                Rows::Attempted {
                    selection: &selection,
                    window,
                },
                cursor.as_deref(),
                limit,
                true,
                if kinds.is_empty() {
                    Events::All
                } else {
                    Events::Kinds(&kinds)
                },
            )
        })
    })
    .await?;
    Ok(super::dlq::page_response(json, next))
}
