//! An API error as the client sees it: a status and a JSON body with a kind, and the
//! mapping from every store and guardrail error to one.

use crate::api::{ErrorBody, ErrorKind};
use crate::remediation::{self, Rejection};
use crate::store::StoreError;
use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// An API error: status plus the JSON body.
#[derive(Debug)]
pub(crate) struct ApiError(pub(crate) StatusCode, pub(crate) Box<ErrorBody>);

impl ApiError {
    pub(crate) fn new(status: StatusCode, kind: ErrorKind, message: impl Into<String>) -> Self {
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

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, ErrorKind::Invalid, message)
    }

    /// The store could not do it just now and kept nothing of it: a lock another session
    /// held past the bound, the database out of reach for a moment. Worth asking again,
    /// and not the server's fault; what the store said is in the server log.
    pub(crate) fn busy() -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorKind::Unavailable,
            "the store could not do this just now (a lock another session held, or the database out of reach for a moment) and nothing was changed: ask again; the server log says more",
        )
    }

    pub(crate) fn internal() -> Self {
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
            StoreError::Unavailable(why) => {
                tracing::warn!(error = %why, "request not answered: the store was unavailable");
                ApiError::busy()
            }
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
            // What the request asked was out of bounds: the client's to fix.
            Rejection::Store(crate::runtime::engine::EngineError::Invalid(why)) => {
                ApiError::invalid(why)
            }
            Rejection::Store(err) if err.passing() && !err.may_have_committed() => {
                tracing::warn!(error = %err, "request not carried out: the store was unavailable");
                ApiError::busy()
            }
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

pub(crate) type ApiResult<T> = Result<Json<T>, ApiError>;
