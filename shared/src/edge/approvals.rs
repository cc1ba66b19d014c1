//! Answering a call that waits for the user's yes ([`crate::approval`]):
//! `POST /sessions/{id}/approvals/{approval_id}` `{approved, reason}` on
//! the native stream, and the check `POST /chat` runs on an answered
//! approval. A refused answer (forged, replayed, expired, another user's or
//! another session's id) is a 4xx JSON body and nothing runs; an accepted
//! one is a turn, streamed like any (it ends with `done`).

use super::body::JsonBody;
use super::error::ErrorBody;
use super::extract::{Deadline, Segments, User};
use super::stream::{stream_turn, StreamApp, WireFormat};
use super::{ApiError, OpenApiRouter};
use crate::approval::{check, ApprovalAnswer, ApprovalBody, ApprovalError, Signer};
use crate::ids::{SessionId, TurnId, UserId};
use crate::turn::ValidTurn;
use axum::extract::State;
use axum::response::Response;
use http::StatusCode;
use utoipa_axum::routes;

pub fn routes() -> OpenApiRouter<StreamApp> {
    OpenApiRouter::new().routes(routes!(answer))
}

impl From<ApprovalError> for ApiError {
    fn from(e: ApprovalError) -> Self {
        ApiError::new(e.status(), e.code(), e.to_string())
    }
}

/// The answers checked against the session's log: a refusal is the 4xx.
pub(super) async fn precheck(
    app: &StreamApp,
    user: &UserId,
    sid: &SessionId,
    answers: &[ApprovalAnswer],
) -> Result<(), ApiError> {
    let signer = Signer::of(&app.deps.config);
    Ok(check(app.deps.store.as_ref(), &signer, user, sid, answers).await?)
}

/// Answers one waiting call: approved, it runs with its stored arguments;
/// denied, the model is told why. Either way the model goes on, streamed
/// as a turn (native events).
#[utoipa::path(post, path = "/sessions/{id}/approvals/{approval_id}", tag = "sessions", security(("bearer" = [])),
    params(("id" = String, Path, description = "The session's id."),
        ("approval_id" = String, Path, description = "The `approval_id` of `approval_required`.")),
    request_body(content = ApprovalBody, description = "The user's answer."),
    responses((status = 200, content_type = "text/event-stream", description = "The continuation, as a turn's events"),
        (status = 400, body = ErrorBody, description = "`invalid_json`"), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody, description = "`session_not_found`, `approval_not_found` (forged, another user's or session's)"),
        (status = 409, body = ErrorBody, description = "`approval_used`: answered already; nothing ran again"),
        (status = 410, body = ErrorBody, description = "`approval_expired`: the call did not run"),
        (status = 413, body = ErrorBody, description = "`too_large`: the body is over 6 MiB"),
        (status = 503, body = ErrorBody)))]
async fn answer(
    State(app): State<StreamApp>,
    User(user): User,
    Segments(segs): Segments,
    Deadline(deadline): Deadline,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let started = std::time::Instant::now();
    let not_found = || ApiError::new(StatusCode::NOT_FOUND, "session_not_found", "no such session");
    let sid = segs.first().and_then(|s| SessionId::parse(s).ok()).ok_or_else(not_found)?;
    let approval_id = segs.get(1).cloned().unwrap_or_default();
    let body: ApprovalBody =
        serde_json::from_slice(&body).map_err(|e| ApiError::bad_request("invalid_json", e.to_string()))?;
    let reason = body.reason.map(|r| r.chars().take(1_000).collect());
    let mut answers = vec![ApprovalAnswer { approval_id, approved: body.approved, reason }];
    answers.extend(body.more);
    precheck(&app, &user, &sid, &answers).await?;
    let turn = ValidTurn::answering(sid, answers);
    Ok(stream_turn(&app, user, turn, TurnId::new(), WireFormat::Native, deadline, started).await)
}
