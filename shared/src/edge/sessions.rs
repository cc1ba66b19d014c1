//! The sessions API on the stream function's URL: plain JSON, same bearer auth
//! as a turn. Routes and errors are documented in `docs/sessions.md` and in
//! the stream function's OpenAPI document ([`super::openapi`]).
//!
//! Another user's session id answers 404 exactly like a missing one (the
//! stream route: 204, like a session with nothing running); so does a
//! malformed one, which cannot name anyone's session.

use super::body::JsonBody;
use super::error::ErrorBody;
use super::extract::{Deadline, LastEventId, Params, Segments, User};
use super::stream::StreamApp;
use super::{json, no_content, ApiError, OpenApiRouter};
use crate::ids::{RunId, SessionId};
use crate::session::api::*;
use crate::session::store::{DeleteProgress, MessagesFrom};
use crate::session::SessionView;
use crate::store::StoreError;
use axum::extract::State;
use axum::response::Response;
use http::StatusCode;
use utoipa_axum::routes;

/// Delete batches (of 25 items) one request may run before answering 202.
const DELETE_BUDGET: usize = 400;

/// How long before the invocation's deadline a followed stream ends (the
/// client comes back with its `Last-Event-ID`).
pub(crate) const FOLLOW_MARGIN: std::time::Duration = std::time::Duration::from_secs(2);

type Answer = Result<Response, ApiError>;

/// The sessions routes, with their OpenAPI operations.
pub fn routes() -> OpenApiRouter<StreamApp> {
    OpenApiRouter::new()
        .routes(routes!(list))
        .routes(routes!(get_session, rename, delete))
        .routes(routes!(messages))
        .routes(routes!(close))
        .routes(routes!(stop))
        .routes(routes!(follow))
}

pub(super) fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "session_not_found", "no such session")
}

/// A store error, with a session that is not there said the sessions API's way.
fn store_error(e: StoreError) -> ApiError {
    match e {
        StoreError::NotFound => not_found(),
        e => e.into(),
    }
}

fn bad(code: &str, message: impl Into<String>) -> ApiError {
    ApiError::bad_request(code, message)
}

/// The `{id}` of the path: a malformed one is 404, like another user's.
pub(super) fn session_id(Segments(segs): Segments) -> Result<SessionId, ApiError> {
    segs.first().and_then(|s| SessionId::parse(s).ok()).ok_or_else(not_found)
}

/// The user's sessions, most recently active first; one Query a page.
#[utoipa::path(get, path = "/sessions", tag = "sessions", security(("bearer" = [])),
    params(
        ("limit" = Option<u64>, Query, description = "Page size, 1 to 100; 20 when absent.", minimum = 0, maximum = 100),
        ("cursor" = Option<String>, Query, description = "The `next_cursor` of the previous page."),
    ),
    responses((status = 200, body = SessionList),
        (status = 400, body = ErrorBody, description = "`invalid_query`, `invalid_cursor`"),
        (status = 401, body = ErrorBody), (status = 503, body = ErrorBody)))]
async fn list(State(app): State<StreamApp>, User(user): User, q: Params) -> Answer {
    let limit = q.number("limit", 100).map_err(|m| bad("invalid_query", m))?.unwrap_or(20).max(1) as usize;
    let cursor = q.get("cursor").map(String::as_str).filter(|c| !c.is_empty());
    match app.deps.store.list_sessions(&user, limit, cursor).await {
        Ok(page) => Ok(json(StatusCode::OK, &SessionList { sessions: page.sessions, next_cursor: page.cursor })),
        Err(StoreError::NotFound) => Err(bad("invalid_cursor", "the cursor is not one this API gave you")),
        Err(e) => Err(store_error(e)),
    }
}

/// One session.
#[utoipa::path(get, path = "/sessions/{id}", tag = "sessions", security(("bearer" = [])),
    params(("id" = String, Path, description = "The session's id.")),
    responses((status = 200, body = SessionView), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody, description = "`session_not_found`"), (status = 503, body = ErrorBody)))]
async fn get_session(State(app): State<StreamApp>, User(user): User, id: Segments) -> Answer {
    let sid = session_id(id)?;
    match app.deps.store.session(&user, &sid).await.map_err(store_error)? {
        Some(s) => Ok(json(StatusCode::OK, &s.view)),
        None => Err(not_found()),
    }
}

/// A page of the session's messages, chronological.
#[utoipa::path(get, path = "/sessions/{id}/messages", tag = "sessions", security(("bearer" = [])),
    params(("id" = String, Path, description = "The session's id."),
        ("limit" = Option<u64>, Query, description = "Page size, 1 to 200; 50 when absent.", minimum = 0, maximum = 200),
        ("before" = Option<u64>, Query, description = "Messages before this seq (the `next_before` of a page).",
            maximum = 18446744073709551615_u64),
        ("after" = Option<u64>, Query, description = "Messages after this seq (the `next_after` of a page); not with `before`.",
            maximum = 18446744073709551615_u64)),
    responses((status = 200, body = MessagesPage),
        (status = 400, body = ErrorBody, description = "`invalid_query`"), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody, description = "`session_not_found`"), (status = 503, body = ErrorBody)))]
async fn messages(State(app): State<StreamApp>, User(user): User, id: Segments, q: Params) -> Answer {
    let sid = session_id(id)?;
    let number = |key, max| q.number(key, max).map_err(|m| bad("invalid_query", m));
    let (limit, before, after) = (number("limit", 200)?, number("before", u64::MAX)?, number("after", u64::MAX)?);
    let from = match (before, after) {
        (Some(_), Some(_)) => return Err(bad("invalid_query", "give `before` or `after`, not both")),
        (b, None) => MessagesFrom::Before(b),
        (None, Some(a)) => MessagesFrom::After(a),
    };
    let limit = limit.unwrap_or(50).max(1) as usize;
    let store = &app.deps.store;
    // The session read proves ownership; it runs beside the page query.
    let (session, page) = tokio::join!(store.session(&user, &sid), store.messages_page(&user, &sid, from, limit));
    let session = session.map_err(store_error)?.ok_or_else(not_found)?;
    let page = page.map_err(store_error)?;
    let (first, last) = (page.first().map(|m| m.seq), page.last().map(|m| m.seq));
    Ok(json(
        StatusCode::OK,
        &MessagesPage {
            next_before: first.filter(|s| *s > 1),
            next_after: last.filter(|s| *s < session.view.message_count),
            // A regenerated answer shows once: the one that replaced it.
            messages: views(crate::message::without_superseded(page)),
        },
    ))
}

/// Renames a session.
#[utoipa::path(patch, path = "/sessions/{id}", tag = "sessions", security(("bearer" = [])),
    params(("id" = String, Path, description = "The session's id.")), request_body = RenameSession,
    responses((status = 200, body = SessionView),
        (status = 400, body = ErrorBody, description = "`invalid_json`, `invalid_title`"), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody, description = "`session_not_found`"),
        (status = 413, body = ErrorBody, description = "`too_large`: the body is over 6 MiB"),
        (status = 503, body = ErrorBody)))]
async fn rename(State(app): State<StreamApp>, User(user): User, id: Segments, JsonBody(body): JsonBody) -> Answer {
    let sid = session_id(id)?;
    let req: RenameSession = serde_json::from_slice(&body).map_err(|e| bad("invalid_json", e.to_string()))?;
    let title = req.title.split_whitespace().collect::<Vec<_>>().join(" ");
    if title.is_empty() || title.chars().count() > TITLE_MAX {
        return Err(bad("invalid_title", format!("`title` must be 1 to {TITLE_MAX} characters")));
    }
    let s = app.deps.store.rename_session(&user, &sid, &title).await.map_err(store_error)?;
    Ok(json(StatusCode::OK, &s.view))
}

/// Closes a session (a later turn on it is refused) and clears its agent state.
#[utoipa::path(post, path = "/sessions/{id}/close", tag = "sessions", security(("bearer" = [])),
    params(("id" = String, Path, description = "The session's id.")),
    responses((status = 200, body = SessionView), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody, description = "`session_not_found`"), (status = 503, body = ErrorBody)))]
async fn close(State(app): State<StreamApp>, User(user): User, id: Segments) -> Answer {
    let sid = session_id(id)?;
    let s = app.deps.store.close_session(&user, &sid).await.map_err(store_error)?;
    // "Cleared on session close" (AGENTIC_CHAT_V2_SPEC §8.6).
    if let Some(states) = &app.deps.agent_state {
        states.clear(&user, &sid).await.map_err(store_error)?;
    }
    Ok(json(StatusCode::OK, &s.view))
}

/// Asks the running turn (or the named run) to stop.
#[utoipa::path(post, path = "/sessions/{id}/stop", tag = "sessions", security(("bearer" = [])),
    params(("id" = String, Path, description = "The session's id.")),
    request_body(content = Option<StopRequest>, description = "Optional: without a body, whatever turn is running."),
    responses((status = 200, body = StopAnswer),
        (status = 400, body = ErrorBody, description = "`invalid_json`, `invalid_stream_run_id`"),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody, description = "`session_not_found`"),
        (status = 413, body = ErrorBody, description = "`too_large`: the body is over 6 MiB"),
        (status = 503, body = ErrorBody)))]
async fn stop(State(app): State<StreamApp>, User(user): User, id: Segments, JsonBody(body): JsonBody) -> Answer {
    let sid = session_id(id)?;
    let run = stop_run(&body)?;
    let answer = match app.deps.store.request_stop(&user, &sid, run.as_ref()).await.map_err(store_error)? {
        Some(turn) => StopAnswer {
            stopped: true,
            turn_id: Some(turn.to_string()),
            message: "the running turn is stopping".into(),
        },
        None => {
            StopAnswer { stopped: false, turn_id: None, message: "no running turn to stop; nothing changed".into() }
        }
    };
    Ok(json(StatusCode::OK, &answer))
}

/// The run a stop request names, if any (an empty body names none).
fn stop_run(body: &[u8]) -> Result<Option<RunId>, ApiError> {
    let req: StopRequest = if body.iter().all(u8::is_ascii_whitespace) {
        StopRequest::default()
    } else {
        serde_json::from_slice(body).map_err(|e| bad("invalid_json", e.to_string()))?
    };
    let run = match req.stream_run_id {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(s)) => Some(s),
        Some(serde_json::Value::Number(n)) => Some(n.to_string()),
        Some(_) => return Err(bad("invalid_stream_run_id", "`stream_run_id` must be a string or a number")),
    };
    run.map(RunId::parse).transpose().map_err(|e| bad("invalid_stream_run_id", e.to_string()))
}

/// Deletes a session and everything in it: 204, or 202 when a retry must finish the job.
#[utoipa::path(delete, path = "/sessions/{id}", tag = "sessions", security(("bearer" = [])),
    params(("id" = String, Path, description = "The session's id.")),
    responses((status = 204, description = "Deleted"), (status = 202, body = DeleteAnswer),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody, description = "`session_not_found`"),
        (status = 503, body = ErrorBody)))]
async fn delete(State(app): State<StreamApp>, User(user): User, id: Segments) -> Answer {
    let sid = session_id(id)?;
    match app.deps.store.delete_session(&user, &sid, Some(DELETE_BUDGET)).await.map_err(store_error)? {
        DeleteProgress::Done { .. } => Ok(no_content()),
        DeleteProgress::Partial { items_deleted } => Ok(json(
            StatusCode::ACCEPTED,
            &DeleteAnswer {
                status: "deleting".into(),
                items_deleted,
                message: "the session is gone from lists and reads; send DELETE again to finish".into(),
            },
        )),
    }
}

/// The running (or just finished) turn's frames after the client's last id,
/// then live until `done`, encoded exactly as the live stream was; 204 when
/// there is none.
#[utoipa::path(get, path = "/sessions/{id}/stream", tag = "sessions", security(("bearer" = [])),
    params(("id" = String, Path, description = "The session's id."),
        ("after" = Option<u64>, Query, description = "Frames after this id (`Last-Event-ID` wins).",
            maximum = 18446744073709551615_u64),
        ("Last-Event-ID" = Option<String>, Header, nullable = false,
            description = "The last frame id the client has (empty: none).", pattern = r"^(\+?[0-9]{1,19})?$")),
    responses((status = 200, content_type = "text/event-stream", description = "The frames (SSE)"),
        (status = 204, description = "Nothing running"),
        (status = 400, body = ErrorBody, description = "`invalid_query`, `invalid_last_event_id`"),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody, description = "`session_not_found`"),
        (status = 503, body = ErrorBody)))]
async fn follow(
    State(app): State<StreamApp>,
    User(user): User,
    id: Segments,
    q: Params,
    last_id: Option<LastEventId>,
    Deadline(deadline): Deadline,
) -> Answer {
    let sid = session_id(id)?;
    let after = match (last_id, q.number("after", u64::MAX)) {
        (_, Err(m)) => return Err(bad("invalid_query", m)),
        (Some(LastEventId(h)), _) if !h.is_empty() => h
            .parse::<u64>()
            .map_err(|_| bad("invalid_last_event_id", "`Last-Event-ID` must be a frame id (a whole number)"))?,
        (_, Ok(a)) => a.unwrap_or(0),
    };
    let Some(log) = &app.deps.frames else { return Ok(no_content()) };
    let until = deadline - FOLLOW_MARGIN;
    let Some(follow) = crate::frames::follow(log.clone(), &user, &sid, after, until).await.map_err(store_error)? else {
        // Nothing to replay: an idle session is 204, one that does not exist
        // (deleted, never made, or another user's) is 404 like every other
        // session route. Read only on this path, never before frames.
        return match app.deps.store.session(&user, &sid).await.map_err(store_error)? {
            Some(_) => Ok(no_content()),
            None => Err(not_found()),
        };
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
    Ok(super::sse_response(crate::sse::SseBody::from_frames(rx), false))
}
