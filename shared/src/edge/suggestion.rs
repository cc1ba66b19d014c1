//! `POST /sessions/{id}/suggestion` on the stream function: the next message
//! the user (or the user's agent) could send in the session, streamed as a
//! turn's text is, stored nowhere ([`crate::suggest`],
//! `docs/chat-protocol.md#message-suggestions`).
//!
//! Everything that can refuse it is decided before the response's head, so
//! each refusal is a status with the JSON error body: the body (400), the
//! session (404 for another user's or none, like the sessions API; 409 when
//! closed), a spent budget (429 with `Retry-After`, as a turn's refusal the
//! process already knows). Those take one round trip (the session, its
//! history and the budgets' admission, in parallel); the model is asked
//! only after it, so no text could come sooner. Once the stream is open, a
//! failure is `error` then `done`.

use super::body::JsonBody;
use super::error::{over_budget, ErrorBody};
use super::extract::{Deadline, Segments, User};
use super::sessions::{not_found, session_id};
use super::stream::StreamApp;
use super::{ApiError, OpenApiRouter};
use crate::sse::EventSink;
use crate::suggest::{self, Refused, SuggestionRequest};
use axum::extract::State;
use axum::response::Response;
use http::StatusCode;
use utoipa_axum::routes;

pub fn routes() -> OpenApiRouter<StreamApp> {
    OpenApiRouter::new().routes(routes!(suggestion))
}

/// Drafts the next message the user could send: streamed like a turn's text, stored nowhere.
#[utoipa::path(post, path = "/sessions/{id}/suggestion", tag = "sessions", security(("bearer" = [])),
    params(("id" = String, Path, description = "The session's id.")),
    request_body(content = SuggestionRequest, description = "`{}` for a plain suggestion; a goal, the other agent's last message, or both"),
    responses((status = 200, content_type = "text/event-stream",
            description = "The suggestion's events (`StreamEvent`, SSE): `text_delta`s, then `done` (`error` just before it when the model failed); nothing stored"),
        (status = 400, body = ErrorBody, description = "`invalid_json` (also for an empty body), `invalid_goal`, `invalid_other_message`"),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody, description = "`session_not_found`: none, or another user's"),
        (status = 405, body = ErrorBody, description = "`method_not_allowed`"),
        (status = 409, body = ErrorBody, description = "`session_closed`"),
        (status = 413, body = ErrorBody, description = "`too_large`: the body is over 6 MiB"),
        (status = 429, body = ErrorBody, description = "`quota_exceeded`: a budget of the user's is spent; `Retry-After` says when to come back"),
        (status = 503, body = ErrorBody)))]
async fn suggestion(
    State(app): State<StreamApp>,
    User(user): User,
    id: Segments,
    Deadline(deadline): Deadline,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let sid = session_id(id)?;
    let req = SuggestionRequest::parse(&body).map_err(|e| ApiError::bad_request(e.code(), e.to_string()))?;
    // A refusal this process saw and that still stands: no I/O (docs/budgets.md).
    if let Some(refused) = super::stream::standing_refusal(&app, &user) {
        return Ok(refused);
    }
    let prepared = match suggest::begin(&app.deps, &user, &sid, &req, deadline).await {
        Ok(p) => p,
        Err(Refused::NotFound) => return Err(not_found()),
        Err(Refused::Closed) => {
            return Err(ApiError::new(StatusCode::CONFLICT, "session_closed", "the session is closed"));
        }
        Err(Refused::OverBudget(over)) => return Ok(over_budget(&over)),
        Err(Refused::Store(e)) => return Err(e.into()),
    };
    let (sink, body) = EventSink::channel();
    tokio::spawn(suggest::run(app.deps.clone(), user, prepared, deadline, sink));
    Ok(super::sse_response(body, false))
}
