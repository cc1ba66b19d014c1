//! The AI SDK's way in, on the stream function (`docs/chat-protocol.md`):
//!
//! - `POST /chat`: a turn whose body is `useChat`'s ([`request`]) and whose
//!   answer is the UI message stream ([`crate::sse::ui`]); the assistant
//!   message's id (`start.messageId`) is the turn id;
//! - `GET /chat/{id}/stream`: what `useChat({resume: true})` calls on load:
//!   204 when the session has no running (or just finished) turn, else that
//!   turn replayed from its first event, re-encoded with the same `messageId`,
//!   then followed live to its end, from the frame log ([`resume`]).
//!
//! Auth happens before (in [`crate::http::handle_stream`]); everything here
//! is scoped to that user.

pub mod request;
pub mod resume;

use crate::edge::{json_error, ResponseBody};
use crate::http::StreamApp;
use crate::ids::{SessionId, TurnId, UserId};
use crate::sse::WireFormat;
use http::{Method, Response, StatusCode};

/// Whether a path is this module's.
pub fn is_chat_path(path: &str) -> bool {
    path == "/chat" || path.starts_with("/chat/")
}

pub async fn handle(
    app: &StreamApp,
    user: UserId,
    req: &lambda_http::Request,
    started: std::time::Instant,
) -> Response<ResponseBody> {
    let path = req.uri().path().trim_end_matches('/');
    let resume_of = path.strip_prefix("/chat/").and_then(|rest| rest.strip_suffix("/stream"));
    match (req.method(), path, resume_of) {
        (&Method::POST, "/chat", _) => post_chat(app, user, req, started).await,
        (&Method::GET, _, Some(id)) => match SessionId::parse(id) {
            Ok(sid) => {
                let deadline = crate::http::invocation_deadline(req, app.deps.config.turn_timeout);
                resume::handle(app, &user, &sid, deadline).await
            }
            Err(e) => json_error(StatusCode::BAD_REQUEST, "invalid_id", e.to_string()),
        },
        (_, "/chat", _) | (_, _, Some(_)) => {
            json_error(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", "POST /chat; GET /chat/{id}/stream")
        }
        _ => json_error(StatusCode::NOT_FOUND, "not_found", "no such route"),
    }
}

async fn post_chat(
    app: &StreamApp,
    user: UserId,
    req: &lambda_http::Request,
    started: std::time::Instant,
) -> Response<ResponseBody> {
    let valid = match request::parse(req.body().as_ref(), app.deps.config.max_message_bytes) {
        Ok(v) => v,
        Err(e) => return json_error(e.status(), e.code(), e.to_string()),
    };
    let turn_id = TurnId::new();
    let format = WireFormat::UiMessageStream { message_id: turn_id.to_string() };
    crate::http::stream_turn(app, user, valid, turn_id, format, req, started).await
}
