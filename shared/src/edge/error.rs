//! Errors become answers here, once per error type: each has one
//! [`IntoResponse`], which picks its status and writes the one error body.
//!
//! [`StoreError`]'s statuses (one mapping for every route): not found 404;
//! closed or a repeated run 409; busy, a lost lease or an unreachable store
//! 503 (retryable, as `docs/sessions.md`, `docs/entities.md` and the events'
//! `session_busy` say); a corrupt record 500.

use crate::auth::AuthError;
use crate::calendar::CalendarError;
use crate::entities::EntityError;
use crate::store::StoreError;
use crate::turn::BadTurn;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{header, StatusCode};
use serde::{Deserialize, Serialize};

/// The JSON body of every error answered over plain HTTP.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ErrorDetail {
    /// Machine-readable, stable.
    pub code: String,
    pub message: String,
    /// `version_conflict` only: the version to retry with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(ignore)]
    pub current_version: Option<u64>,
}

/// A refusal: a status, a stable code and a message for people.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: String,
    pub message: String,
    pub current_version: Option<u64>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &str, message: impl Into<String>) -> Self {
        ApiError { status, code: code.to_string(), message: message.into(), current_version: None }
    }

    pub fn bad_request(code: &str, message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, code, message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let detail = ErrorDetail { code: self.code, message: self.message, current_version: self.current_version };
        let bytes = serde_json::to_vec(&ErrorBody { error: detail }).expect("error bodies serialize");
        (self.status, [(header::CONTENT_TYPE, "application/json")], Bytes::from(bytes)).into_response()
    }
}

/// A spent budget ([`crate::budget`]): 429 with `Retry-After` (seconds) and
/// the error body (`quota_exceeded`), before anything is streamed.
pub fn over_budget(over: &crate::budget::OverBudget) -> Response {
    let mut resp = ApiError::new(StatusCode::TOO_MANY_REQUESTS, "quota_exceeded", over.to_string()).into_response();
    resp.headers_mut().insert(header::RETRY_AFTER, header::HeaderValue::from(over.retry_after_secs));
    resp
}

/// The one status of each store error (see the module doc).
pub fn store_status(e: &StoreError) -> StatusCode {
    match e {
        StoreError::NotFound => StatusCode::NOT_FOUND,
        StoreError::Closed | StoreError::DuplicateRun => StatusCode::CONFLICT,
        StoreError::Busy | StoreError::LeaseLost | StoreError::Backend(_) => StatusCode::SERVICE_UNAVAILABLE,
        StoreError::Corrupt(_) => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        let status = store_status(&e);
        if status.is_server_error() {
            tracing::error!(code = e.code(), error = %e, "store failed");
        }
        ApiError::new(status, e.code(), e.to_string())
    }
}

impl IntoResponse for StoreError {
    fn into_response(self) -> Response {
        ApiError::from(self).into_response()
    }
}

impl From<AuthError> for ApiError {
    fn from(e: AuthError) -> Self {
        tracing::info!(code = e.code(), "refused: unauthenticated");
        let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::UNAUTHORIZED);
        ApiError::new(status, e.code(), e.to_string())
    }
}

impl IntoResponse for AuthError {
    fn into_response(self) -> Response {
        ApiError::from(self).into_response()
    }
}

impl From<&EntityError> for ApiError {
    fn from(e: &EntityError) -> Self {
        let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        if status.is_server_error() {
            tracing::error!(code = e.code(), error = %e, "entities request failed");
        } else {
            tracing::info!(code = e.code(), "entities request refused");
        }
        let current_version = match e {
            EntityError::Conflict { current_version, .. } => Some(*current_version),
            _ => None,
        };
        ApiError { current_version, ..ApiError::new(status, e.code(), e.to_string()) }
    }
}

impl IntoResponse for EntityError {
    fn into_response(self) -> Response {
        ApiError::from(&self).into_response()
    }
}

/// The calendar's statuses, as the entities API's: not found (another
/// user's included) 404; refused input 400; a stale version 409 with
/// `current_version`; a change made on the user's calendar server since it
/// was read 409 `calendar_conflict`; that server failing 502; the store's
/// own errors by [`store_status`].
impl From<CalendarError> for ApiError {
    fn from(e: CalendarError) -> Self {
        let status = match &e {
            CalendarError::NotFound | CalendarError::NoSuchInstance(_) => StatusCode::NOT_FOUND,
            CalendarError::BadInput { .. } | CalendarError::InvalidId(_) => StatusCode::BAD_REQUEST,
            CalendarError::Conflict { .. } | CalendarError::RemoteConflict { .. } => StatusCode::CONFLICT,
            CalendarError::Remote(_) => StatusCode::BAD_GATEWAY,
            CalendarError::Store(_) => {
                let CalendarError::Store(s) = e else { unreachable!() };
                return ApiError::from(s);
            }
        };
        if status.is_server_error() {
            tracing::error!(code = e.code(), error = %e, "calendar request failed");
        } else {
            tracing::info!(code = e.code(), "calendar request refused");
        }
        let current_version = match e {
            CalendarError::Conflict { current_version, .. } => Some(current_version),
            _ => None,
        };
        ApiError { current_version, ..ApiError::new(status, e.code(), e.to_string()) }
    }
}

impl IntoResponse for CalendarError {
    fn into_response(self) -> Response {
        ApiError::from(self).into_response()
    }
}

impl From<BadTurn> for ApiError {
    fn from(e: BadTurn) -> Self {
        let status = match e {
            BadTurn::MessageTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            _ => StatusCode::BAD_REQUEST,
        };
        ApiError::new(status, e.code(), e.to_string())
    }
}

impl IntoResponse for BadTurn {
    fn into_response(self) -> Response {
        ApiError::from(self).into_response()
    }
}

impl IntoResponse for crate::chat::request::BadChat {
    fn into_response(self) -> Response {
        match self {
            crate::chat::request::BadChat::Turn(t) => t.into_response(),
            other => ApiError::bad_request(other.code(), other.to_string()).into_response(),
        }
    }
}

impl IntoResponse for crate::prewarm::PrewarmError {
    fn into_response(self) -> Response {
        use crate::prewarm::PrewarmError as P;
        let status = match &self {
            P::Invalid { .. } => StatusCode::BAD_REQUEST,
            P::ProjectNotFound => StatusCode::NOT_FOUND,
            P::Store(e) => store_status(e),
            P::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
        };
        if status.is_server_error() {
            tracing::error!(code = self.code(), message = %self, "prewarm failed");
        }
        ApiError::new(status, self.code(), self.to_string()).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    async fn answer(r: impl IntoResponse) -> (StatusCode, serde_json::Value) {
        let resp = r.into_response();
        let status = resp.status();
        assert_eq!(resp.headers()[header::CONTENT_TYPE], "application/json");
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        (status, serde_json::from_slice(&bytes).unwrap())
    }

    #[tokio::test]
    async fn store_errors_have_one_status_each() {
        let cases = [
            (StoreError::NotFound, 404, "session_not_found"),
            (StoreError::Busy, 503, "session_busy"),
            (StoreError::Closed, 409, "session_closed"),
            (StoreError::DuplicateRun, 409, "duplicate_run"),
            (StoreError::LeaseLost, 503, "session_lease_lost"),
            (StoreError::Corrupt("x".into()), 500, "store_corrupt"),
            (StoreError::Backend("x".into()), 503, "store_unavailable"),
        ];
        for (e, status, code) in cases {
            let (s, body) = answer(e).await;
            assert_eq!((s.as_u16(), body["error"]["code"].as_str()), (status, Some(code)));
        }
    }

    #[tokio::test]
    async fn a_conflict_names_the_version_to_retry_with_and_nothing_else_does() {
        let (s, body) = answer(EntityError::Conflict { expected: 1, current_version: 4 }).await;
        assert_eq!((s.as_u16(), &body["error"]["current_version"]), (409, &serde_json::json!(4)));
        let (_, body) = answer(EntityError::SelfEdge).await;
        assert_eq!(
            body,
            serde_json::json!({"error": {"code": "edge_self_loop", "message": "an edge needs two different entities"}})
        );
    }
}
