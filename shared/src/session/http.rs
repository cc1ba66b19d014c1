//! The sessions API on the stream function's URL: plain JSON, same bearer auth
//! as a turn. Routes and errors are documented in `docs/sessions.md`.
//!
//! | route | answer |
//! |---|---|
//! | `GET /sessions?limit=&cursor=` | [`SessionList`], most recently active first; one Query a page |
//! | `GET /sessions/{id}` | [`SessionView`] |
//! | `GET /sessions/{id}/messages?before=&after=&limit=` | [`MessagesPage`] |
//! | `PATCH /sessions/{id}` `{"title"}` | [`SessionView`] |
//! | `POST /sessions/{id}/close` | [`SessionView`] (status `closed`) |
//! | `POST /sessions/{id}/stop` `{"stream_run_id"?}` | [`StopAnswer`] |
//! | `DELETE /sessions/{id}` | 204, or 202 [`DeleteAnswer`] when a retry must finish the job |
//! | `GET /sessions/{id}/stream` (`Last-Event-ID` or `?after=`) | the running (or just finished) turn's frames after that id, then live until `done` (SSE); 204 when there is none |
//!
//! Another user's session id answers 404 exactly like a missing one (the
//! stream route: 204, like a session with nothing running).

use super::SessionView;
use crate::agent_state::store::AgentStateStore;
use crate::edge::{json, json_error, no_content, query_params, ResponseBody};
use crate::frames::FrameLog;
use crate::ids::{RunId, SessionId, TurnId, UserId};
use crate::message::{MessageError, Role, StoredMessage};
use crate::sse::SseBody;
use crate::store::{DeleteProgress, MessagesFrom, Store, StoreError};
use http::{header, Method, Response, StatusCode};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// Longest tool-result preview in a message view, in characters.
pub const PREVIEW_CHARS: usize = 200;
/// Longest title a user may set, in characters.
pub const TITLE_MAX: usize = 200;
/// Delete batches (of 25 items) one request may run before answering 202.
const DELETE_BUDGET: usize = 400;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SessionList {
    pub sessions: Vec<SessionView>,
    /// Pass as `cursor` for the next page; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// A message in the shape a UI renders.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct MessageView {
    pub id: String,
    pub seq: u64,
    pub role: Role,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    pub created_at: i64,
    /// An assistant's tool calls, each with its result's preview when it is on this page.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCallView>,
    /// A tool result whose call is on another page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// `complete`, `error` (the content is partial; see `error`) or `stopped` (partial, by the user).
    pub status: MessageStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<MessageError>,
    /// A user message dictated from voice notes: the id the client sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub voice_note_group_id: Option<String>,
    /// The turn that wrote it: the id of its answer in the AI SDK's protocol
    /// (`POST /chat`'s `start.messageId`), so a client that shows the history
    /// and then resumes the turn replaces the stored answer, not repeats it.
    pub turn_id: TurnId,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum MessageStatus {
    Complete,
    Error,
    Stopped,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ToolCallView {
    pub id: String,
    pub name: String,
    pub arguments: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_preview: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct MessagesPage {
    /// Chronological.
    pub messages: Vec<MessageView>,
    /// Pass as `before` for the previous (older) page; absent at the start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_before: Option<u64>,
    /// Pass as `after` for the next (newer) page; absent when this page reached the newest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_after: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RenameSession {
    pub title: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StopRequest {
    /// Stop only this run (string or number); without it, whatever turn is running.
    #[serde(default)]
    pub stream_run_id: Option<serde_json::Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct StopAnswer {
    /// False when there was no running turn (it had ended, or another run was named): nothing changed.
    pub stopped: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct DeleteAnswer {
    pub status: String,
    pub items_deleted: usize,
    pub message: String,
}

/// True when the request is for the sessions API (path `/sessions…`).
pub fn is_sessions_path(path: &str) -> bool {
    let p = path.trim_start_matches('/');
    p == "sessions" || p.starts_with("sessions/")
}

fn not_found() -> Response<ResponseBody> {
    json_error(StatusCode::NOT_FOUND, "session_not_found", "no such session")
}

fn store_error(e: StoreError) -> Response<ResponseBody> {
    match e {
        StoreError::NotFound => not_found(),
        e => {
            tracing::error!(code = e.code(), error = %e, "sessions api");
            json_error(StatusCode::SERVICE_UNAVAILABLE, e.code(), e.to_string())
        }
    }
}

fn bad(code: &str, message: impl Into<String>) -> Response<ResponseBody> {
    json_error(StatusCode::BAD_REQUEST, code, message)
}

/// A whole-number query parameter; `Err` holds the message for a 400.
fn number(q: &HashMap<String, String>, key: &str, max: u64) -> Result<Option<u64>, String> {
    match q.get(key) {
        None => Ok(None),
        Some(v) => match v.parse::<u64>() {
            Ok(n) if n <= max => Ok(Some(n)),
            _ => Err(format!("`{key}` must be a whole number up to {max}")),
        },
    }
}

/// What the sessions API runs on.
pub struct Api<'a> {
    pub store: &'a dyn Store,
    pub agent_state: Option<&'a dyn AgentStateStore>,
    /// `None`: turns are not resumable; the stream route answers 204.
    pub frames: Option<&'a std::sync::Arc<dyn FrameLog>>,
    /// When this invocation ends: a followed stream ends before it.
    pub deadline: tokio::time::Instant,
}

/// How long before the invocation's deadline a followed stream ends (the
/// client comes back with its `Last-Event-ID`).
pub(crate) const FOLLOW_MARGIN: std::time::Duration = std::time::Duration::from_secs(2);

/// Serves one sessions-API request for an authenticated user.
pub async fn handle(api: &Api<'_>, user: &UserId, req: &lambda_http::Request) -> Response<ResponseBody> {
    let (store, agent_state) = (api.store, api.agent_state);
    let path = req.uri().path().trim_matches('/').to_string();
    let parts: Vec<&str> = path.split('/').collect();
    let q = query_params(req.uri().query());
    let method = req.method().clone();
    let sid = match parts.get(1) {
        None => None,
        Some(raw) => match SessionId::parse(*raw) {
            Ok(s) => Some(s),
            // A malformed id cannot name anyone's session.
            Err(_) => return not_found(),
        },
    };
    match (method, sid, parts.get(2).copied(), parts.len()) {
        (Method::GET, None, None, 1) => list(store, user, &q).await,
        (Method::GET, Some(sid), None, 2) => match store.session(user, &sid).await {
            Ok(Some(s)) => json(StatusCode::OK, &s.view),
            Ok(None) => not_found(),
            Err(e) => store_error(e),
        },
        (Method::GET, Some(sid), Some("messages"), 3) => messages(store, user, &sid, &q).await,
        (Method::PATCH, Some(sid), None, 2) => rename(store, user, &sid, req.body().as_ref()).await,
        (Method::POST, Some(sid), Some("close"), 3) => match store.close_session(user, &sid).await {
            Ok(s) => {
                // "Cleared on session close" (AGENTIC_CHAT_V2_SPEC §8.6).
                if let Some(states) = agent_state {
                    if let Err(e) = states.clear(user, &sid).await {
                        return store_error(e);
                    }
                }
                json(StatusCode::OK, &s.view)
            }
            Err(e) => store_error(e),
        },
        (Method::POST, Some(sid), Some("stop"), 3) => stop(store, user, &sid, req.body().as_ref()).await,
        (Method::GET, Some(sid), Some("stream"), 3) => stream(api, user, &sid, req, &q).await,
        (Method::DELETE, Some(sid), None, 2) => match store.delete_session(user, &sid, Some(DELETE_BUDGET)).await {
            Ok(DeleteProgress::Done { .. }) => no_content(),
            Ok(DeleteProgress::Partial { items_deleted }) => json(
                StatusCode::ACCEPTED,
                &DeleteAnswer {
                    status: "deleting".into(),
                    items_deleted,
                    message: "the session is gone from lists and reads; send DELETE again to finish".into(),
                },
            ),
            Err(e) => store_error(e),
        },
        (_, _, _, n) if n <= 3 => {
            json_error(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", "see docs/sessions.md for the routes")
        }
        _ => json_error(StatusCode::NOT_FOUND, "no_such_route", "see docs/sessions.md for the routes"),
    }
}

/// The running (or just finished) turn's frames after the client's last id,
/// then live until `done`, encoded exactly as the live stream was.
async fn stream(
    api: &Api<'_>,
    user: &UserId,
    sid: &SessionId,
    req: &lambda_http::Request,
    q: &HashMap<String, String>,
) -> Response<ResponseBody> {
    let last_id = req.headers().get("last-event-id").map(|v| v.to_str().unwrap_or("x").trim().to_string());
    let after = match (last_id, number(q, "after", u64::MAX)) {
        (_, Err(m)) => return bad("invalid_query", m),
        (Some(h), _) if !h.is_empty() => match h.parse::<u64>() {
            Ok(n) => n,
            Err(_) => return bad("invalid_last_event_id", "`Last-Event-ID` must be a frame id (a whole number)"),
        },
        (_, Ok(a)) => a.unwrap_or(0),
    };
    let Some(log) = api.frames else { return no_content() };
    let until = api.deadline - FOLLOW_MARGIN;
    let follow = match crate::frames::follow(log.clone(), user, sid, after, until).await {
        Ok(Some(f)) => f,
        Ok(None) => return no_content(),
        Err(e) => return store_error(e),
    };
    let (tx, rx) = tokio::sync::mpsc::channel(crate::sse::CHANNEL_FRAMES);
    tokio::spawn(async move {
        use futures::StreamExt;
        let mut frames = follow.frames;
        while let Some(f) = frames.next().await {
            if tx.send(crate::sse::encode_frame(f.id, &f.event)).await.is_err() {
                return;
            }
        }
    });
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .header("x-accel-buffering", "no")
        .body(ResponseBody::Sse(SseBody::from_frames(rx)))
        .expect("static response parts are valid")
}

async fn list(store: &dyn Store, user: &UserId, q: &HashMap<String, String>) -> Response<ResponseBody> {
    let limit = match number(q, "limit", 100) {
        Ok(l) => l.unwrap_or(20).max(1) as usize,
        Err(m) => return bad("invalid_query", m),
    };
    match store.list_sessions(user, limit, q.get("cursor").map(String::as_str).filter(|c| !c.is_empty())).await {
        Ok(page) => json(StatusCode::OK, &SessionList { sessions: page.sessions, next_cursor: page.cursor }),
        Err(StoreError::NotFound) => bad("invalid_cursor", "the cursor is not one this API gave you"),
        Err(e) => store_error(e),
    }
}

async fn messages(
    store: &dyn Store,
    user: &UserId,
    sid: &SessionId,
    q: &HashMap<String, String>,
) -> Response<ResponseBody> {
    let (limit, before, after) =
        match (number(q, "limit", 200), number(q, "before", u64::MAX), number(q, "after", u64::MAX)) {
            (Ok(l), Ok(b), Ok(a)) => (l.unwrap_or(50).max(1) as usize, b, a),
            (Err(m), _, _) | (_, Err(m), _) | (_, _, Err(m)) => return bad("invalid_query", m),
        };
    let from = match (before, after) {
        (Some(_), Some(_)) => return bad("invalid_query", "give `before` or `after`, not both"),
        (b, None) => MessagesFrom::Before(b),
        (None, Some(a)) => MessagesFrom::After(a),
    };
    // The session read proves ownership; it runs beside the page query.
    let (session, page) = tokio::join!(store.session(user, sid), store.messages_page(user, sid, from, limit));
    let session = match session {
        Ok(Some(s)) => s,
        Ok(None) => return not_found(),
        Err(e) => return store_error(e),
    };
    let page = match page {
        Ok(p) => p,
        Err(e) => return store_error(e),
    };
    let first = page.first().map(|m| m.seq);
    let last = page.last().map(|m| m.seq);
    json(
        StatusCode::OK,
        &MessagesPage {
            next_before: first.filter(|s| *s > 1),
            next_after: last.filter(|s| *s < session.view.message_count),
            // A regenerated answer shows once: the one that replaced it.
            messages: views(crate::message::without_superseded(page)),
        },
    )
}

/// Folds each tool result into its call when both are on the page.
fn views(page: Vec<StoredMessage>) -> Vec<MessageView> {
    let mut results: HashMap<String, String> = page
        .iter()
        .filter(|m| m.role == Role::Tool)
        .filter_map(|m| Some((m.tool_call_id.clone()?, preview(m.content.as_deref().unwrap_or("")))))
        .collect();
    let calls_here: std::collections::HashSet<String> =
        page.iter().flat_map(|m| m.tool_calls.iter().map(|c| c.id.clone())).collect();
    page.into_iter()
        .filter(|m| !(m.role == Role::Tool && m.tool_call_id.as_ref().is_some_and(|id| calls_here.contains(id))))
        .map(|m| {
            let status = match (&m.error, m.stopped) {
                (Some(_), _) => MessageStatus::Error,
                (None, true) => MessageStatus::Stopped,
                _ => MessageStatus::Complete,
            };
            let is_tool = m.role == Role::Tool;
            MessageView {
                id: m.id.to_string(),
                seq: m.seq,
                role: m.role,
                content: if is_tool { m.content.as_deref().map(preview) } else { m.content },
                created_at: m.created_at,
                tool_calls: m
                    .tool_calls
                    .into_iter()
                    .map(|c| ToolCallView {
                        result_preview: results.remove(&c.id),
                        id: c.id,
                        name: c.function.name,
                        arguments: c.function.arguments,
                    })
                    .collect(),
                tool_call_id: m.tool_call_id,
                status,
                error: m.error,
                voice_note_group_id: m.voice_note_group_id,
                turn_id: m.turn_id,
            }
        })
        .collect()
}

fn preview(s: &str) -> String {
    if s.chars().count() <= PREVIEW_CHARS {
        return s.to_string();
    }
    let cut: String = s.chars().take(PREVIEW_CHARS).collect();
    format!("{cut}…")
}

async fn rename(store: &dyn Store, user: &UserId, sid: &SessionId, body: &[u8]) -> Response<ResponseBody> {
    let req: RenameSession = match serde_json::from_slice(body) {
        Ok(r) => r,
        Err(e) => return bad("invalid_json", e.to_string()),
    };
    let title = req.title.split_whitespace().collect::<Vec<_>>().join(" ");
    if title.is_empty() || title.chars().count() > TITLE_MAX {
        return bad("invalid_title", format!("`title` must be 1 to {TITLE_MAX} characters"));
    }
    match store.rename_session(user, sid, &title).await {
        Ok(s) => json(StatusCode::OK, &s.view),
        Err(e) => store_error(e),
    }
}

async fn stop(store: &dyn Store, user: &UserId, sid: &SessionId, body: &[u8]) -> Response<ResponseBody> {
    let req: StopRequest = if body.iter().all(u8::is_ascii_whitespace) {
        StopRequest::default()
    } else {
        match serde_json::from_slice(body) {
            Ok(r) => r,
            Err(e) => return bad("invalid_json", e.to_string()),
        }
    };
    let run = match req.stream_run_id {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(s)) => Some(s),
        Some(serde_json::Value::Number(n)) => Some(n.to_string()),
        Some(_) => return bad("invalid_stream_run_id", "`stream_run_id` must be a string or a number"),
    };
    let run = match run.map(RunId::parse).transpose() {
        Ok(r) => r,
        Err(e) => return bad("invalid_stream_run_id", e.to_string()),
    };
    match store.request_stop(user, sid, run.as_ref()).await {
        Ok(Some(turn)) => json(
            StatusCode::OK,
            &StopAnswer {
                stopped: true,
                turn_id: Some(turn.to_string()),
                message: "the running turn is stopping".into(),
            },
        ),
        Ok(None) => json(
            StatusCode::OK,
            &StopAnswer { stopped: false, turn_id: None, message: "no running turn to stop; nothing changed".into() },
        ),
        Err(e) => store_error(e),
    }
}
