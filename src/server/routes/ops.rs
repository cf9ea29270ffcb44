//! What operators and monitors read without touching a row: metrics, stats, who am I,
//! and health.

use super::query::{Query, StatsQuery};
use crate::api::{self};
use crate::runtime::schema::{self};
use crate::server::errors::{ApiError, ApiResult};
use crate::server::state::{AppState, Principal, blocking};
use axum::Json;
use axum::extract::{Extension, RawQuery, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

/// `GET /metrics`: Prometheus's text format, open like `/healthz` (it holds no id and no
/// payload). The store gauges are read at most every few seconds.
/// OpenMetrics goes to a scraper that asks for it; anything else gets the classic format.
pub(crate) async fn metrics(
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
pub(crate) async fn stats(
    State(state): State<Arc<AppState>>,
    RawQuery(query): RawQuery,
) -> ApiResult<crate::runtime::queries::Health> {
    let asked: StatsQuery = Query::parse_for(&query, &[super::query::STATS])?.typed()?;
    let window = match asked.window {
        None => 900.0,
        Some(value) => value
            .parse::<f64>()
            .ok()
            .filter(|w| w.is_finite() && *w > 0.0 && *w <= 7.0 * 86_400.0)
            .ok_or_else(|| {
                ApiError::invalid("window must be seconds, more than 0 and at most a week")
            })?,
    };
    let until = asked
        .until
        .as_deref()
        .map(|t| crate::clock::parse_instant(t, state.clock.now()))
        .transpose()
        .map_err(|err| ApiError::invalid(format!("until: {err}")))?;
    Ok(Json(
        blocking(&state, move |state| {
            let now = state.clock.now();
            // The store's numbers, and what only this server knows: its worker's adapters.
            state
                .read(|conn| Ok(crate::runtime::queries::health(conn, now, window, until)?))
                .map(|health| crate::runtime::queries::Health {
                    server_worker: state.worker.clone(),
                    ..health
                })
        })
        .await?,
    ))
}

/// `GET /api/v1/runtime/pulse?since=S&until=U&step=N` (unix seconds): the pulse of that
/// absolute window, at most 1,440 steps. The client resolves relative times, so both
/// backends read the same window.
pub(crate) async fn pulse(
    State(state): State<Arc<AppState>>,
    RawQuery(query): RawQuery,
) -> ApiResult<crate::pulse::Pulse> {
    let query = Query::parse_for(&query, &[super::query::PULSE])?;
    let number = |name: &str, what: &str| -> Result<f64, ApiError> {
        query
            .one(name)?
            .and_then(|v| v.parse::<f64>().ok())
            .filter(|v| v.is_finite())
            .ok_or_else(|| ApiError::invalid(format!("{name} must be given, in {what}")))
    };
    let window = crate::pulse::Window::new(
        number("since", "unix seconds")?,
        number("until", "unix seconds")?,
        number("step", "seconds")?,
    )
    .map_err(ApiError::invalid)?;
    Ok(Json(
        blocking(&state, move |state| {
            state.read(|conn| Ok(crate::pulse::read(conn, window)?))
        })
        .await?,
    ))
}

/// `GET /api/v1/whoami`: the name the server records for the key presented.
pub(crate) async fn whoami(Extension(principal): Extension<Principal>) -> Json<api::WhoAmI> {
    Json(api::WhoAmI {
        operator: principal.0,
        service: api::SERVICE.into(),
    })
}

pub(crate) async fn healthz(State(state): State<Arc<AppState>>) -> Response {
    let identity = blocking(&state, |state| {
        state.read(|conn| {
            Ok(crate::runtime::queries::store_identity(
                conn,
                &state.identity_place,
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
        "worker": state.worker.is_some(),
        "store": identity.ok().flatten(),
    });
    let status = if ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(body)).into_response()
}
