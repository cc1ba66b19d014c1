//! The AI SDK's routes on the stream function (`docs/chat-protocol.md`):
//! `POST /chat` (a turn answered with the UI message stream) and
//! `GET /chat/{id}/stream` (the running turn, replayed then followed). The
//! protocol itself is [`crate::chat`]; everything here is scoped to the
//! authenticated user.

use super::body::JsonBody;
use super::error::ErrorBody;
use super::extract::{Deadline, Segments, User};
use super::stream::{stream_turn, StreamApp, WireFormat};
use super::{no_content, ApiError, OpenApiRouter};
use crate::ids::{SessionId, TurnId};
use axum::extract::State;
use axum::response::Response;
use utoipa_axum::routes;

pub fn routes() -> OpenApiRouter<StreamApp> {
    OpenApiRouter::new().routes(routes!(post_chat)).routes(routes!(resume))
}

/// A turn from `useChat`'s `DefaultChatTransport`, answered with the UI message stream.
#[utoipa::path(post, path = "/chat", tag = "chat", security(("bearer" = [])),
    request_body(content = serde_json::Value, description = "`{id, messages, trigger, messageId}` and the native request's extras"),
    responses((status = 200, content_type = "text/event-stream", description = "The UI message stream (`x-vercel-ai-ui-message-stream: v1`)"),
        (status = 400, body = ErrorBody, description = "`invalid_json`, `missing_chat_id`, `unknown_trigger`, `missing_message`, …"),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody, description = "An answered approval: `approval_not_found`, `session_not_found`"),
        (status = 409, body = ErrorBody, description = "An answered approval: `approval_used`"),
        (status = 410, body = ErrorBody, description = "An answered approval: `approval_expired`"),
        (status = 413, body = ErrorBody, description = "`message_too_large`; `too_large`: the body is over 6 MiB"),
        (status = 429, body = ErrorBody, description = "`quota_exceeded`, with `Retry-After`"),
        (status = 503, body = ErrorBody)))]
async fn post_chat(
    State(app): State<StreamApp>,
    User(user): User,
    Deadline(deadline): Deadline,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let started = std::time::Instant::now();
    let chat = crate::chat::request::parse(&body, app.deps.config.max_message_bytes)
        .map_err(|e| ApiError::new(e.status(), e.code(), e.to_string()))?;
    if let (false, Some(sid)) = (chat.turn.approvals.is_empty(), &chat.turn.session_id) {
        super::approvals::precheck(&app, &user, sid, &chat.turn.approvals).await?;
    }
    let turn_id = TurnId::new();
    // An approval's answer continues the client's assistant message.
    let message_id = chat.message_id.unwrap_or_else(|| turn_id.to_string());
    let format = WireFormat::UiMessageStream { message_id };
    Ok(stream_turn(&app, user, chat.turn, turn_id, format, deadline, started).await)
}

/// The `POST /chat` body as the stream function's document states it: the
/// transport's `{id, messages, trigger, messageId}` with the native turn's
/// extras (`crate::chat::request`). The rule the server holds is that the
/// *last* message is the user's, with a non-blank text; JSON Schema cannot
/// name the last item, so the document asks it of every message (a stricter
/// grammar: scripts/schemathesis.toml lets this one operation accept bodies
/// outside it).
pub(super) fn chat_request_schema() -> serde_json::Value {
    let text = serde_json::json!({
        "type": "object", "required": ["type", "text"],
        "properties": {"type": {"enum": ["text"]}, "text": super::stream::not_blank("Not blank.")},
    });
    let message = serde_json::json!({
        "type": "object", "required": ["role", "parts"],
        "properties": {"role": {"enum": ["user"]}, "parts": {"type": "array", "minItems": 1, "items": text}},
    });
    let mut properties = serde_json::Map::new();
    properties.insert(
        "id".into(),
        serde_json::json!({"type": "string", "pattern": super::stream::ID_PATTERN,
            "description": "The chat id: the session's, created by the first turn that names it."}),
    );
    properties.insert(
        "messages".into(),
        serde_json::json!({"type": "array", "minItems": 1, "items": message,
            "description": "The client's history; the server reads the last one's text parts."}),
    );
    properties.insert("trigger".into(), serde_json::json!({"enum": ["submit-message", "regenerate-message", null]}));
    properties.insert("messageId".into(), serde_json::json!({"type": ["string", "null"]}));
    properties.insert(
        "project_id".into(),
        serde_json::json!({"type": ["string", "null"], "pattern": "^([A-Za-z0-9._:|@-]{1,64})?$",
            "description": "Shorthand for `projectFocus.projectId`."}),
    );
    // The chat id is the session: the native `session_id` is not read here.
    properties.extend(super::stream::turn_extras().into_iter().filter(|(k, _)| k != "session_id"));
    serde_json::json!({
        "type": "object",
        "description": "What `useChat`'s `DefaultChatTransport` sends; unknown fields are ignored.",
        "required": ["id", "messages"],
        "properties": properties,
    })
}

/// What `useChat({resume: true})` calls on load: the session's running (or
/// just finished) turn from its first event, then live; 204 when there is none.
#[utoipa::path(get, path = "/chat/{id}/stream", tag = "chat", security(("bearer" = [])),
    params(("id" = String, Path, description = "The chat (session) id.", pattern = "^[A-Za-z0-9._:|@-]{1,64}$")),
    responses((status = 200, content_type = "text/event-stream", description = "The turn as a UI message stream"),
        (status = 204, description = "Nothing to resume"),
        (status = 400, body = ErrorBody, description = "`invalid_id`"), (status = 401, body = ErrorBody),
        (status = 503, body = ErrorBody)))]
async fn resume(
    State(app): State<StreamApp>,
    User(user): User,
    Segments(segs): Segments,
    Deadline(deadline): Deadline,
) -> Result<Response, ApiError> {
    let raw = segs.first().map(String::as_str).unwrap_or("");
    let sid = SessionId::parse(raw).map_err(|e| ApiError::bad_request("invalid_id", e.to_string()))?;
    let Some(log) = &app.deps.frames else { return Ok(no_content()) };
    let until = deadline - super::sessions::FOLLOW_MARGIN;
    match crate::chat::resume::resume(log.clone(), &user, &sid, until).await {
        Ok(None) => Ok(no_content()),
        Ok(Some(body)) => Ok(super::sse_response(body, true)),
        Err(e) => Err(ApiError::new(http::StatusCode::SERVICE_UNAVAILABLE, e.code(), e.to_string())),
    }
}
