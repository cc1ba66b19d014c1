//! `GET /chat/{id}/stream`: a session's running (or just finished) turn for
//! `useChat({resume: true})`. `DefaultChatTransport` treats what it gets as a
//! **replay** (at the first `start` it empties the assistant message), so the
//! turn is sent from its first event, through a fresh UI encoder with the
//! same `messageId` (the turn id) as the original response, then followed
//! live to its `done`. The encoder is deterministic in the events, so the
//! client ends with the same message whichever way it read the turn.
//!
//! Where the events come from is a [`TurnFollower`]: the frame log of
//! resumable turns. 204 when it knows no turn for the session.

use crate::edge::{json_error, no_content, ResponseBody};
use crate::http::StreamApp;
use crate::ids::{SessionId, TurnId, UserId};
use crate::sse::{DoneReason, EventSink, StreamEvent, WireFormat};
use crate::store::StoreError;
use futures::stream::BoxStream;
use futures::StreamExt;
use http::{Response, StatusCode};

/// A turn being read back: its events from the first, then live, ending
/// with `done` (or earlier, when the log lost the rest).
pub struct FollowedTurn {
    pub turn_id: TurnId,
    pub events: BoxStream<'static, StreamEvent>,
}

/// The frame log of resumable turns, as this route reads it.
#[async_trait::async_trait]
pub trait TurnFollower: Send + Sync {
    /// The session's running or just-finished turn; `None`: nothing to resume.
    async fn follow(&self, user: &UserId, session: &SessionId) -> Result<Option<FollowedTurn>, StoreError>;
}

pub async fn handle(app: &StreamApp, user: &UserId, sid: &SessionId) -> Response<ResponseBody> {
    let Some(follower) = &app.follower else {
        // No frame log in this deployment: nothing can be resumed.
        return no_content();
    };
    match follower.follow(user, sid).await {
        Ok(None) => no_content(),
        Ok(Some(turn)) => replay(sid.clone(), turn),
        Err(e) => json_error(StatusCode::SERVICE_UNAVAILABLE, e.code(), e.to_string()),
    }
}

/// The turn's events as a UI message stream named after the turn. A log
/// that ends before `done` ends the stream with `error` and `done` anyway:
/// the client must always see `finish` and `[DONE]`.
pub fn replay(sid: SessionId, turn: FollowedTurn) -> Response<ResponseBody> {
    let FollowedTurn { turn_id, mut events } = turn;
    let (mut sink, body) = EventSink::channel_with(WireFormat::UiMessageStream { message_id: turn_id.to_string() });
    tokio::spawn(async move {
        while let Some(event) = events.next().await {
            let last = matches!(event, StreamEvent::Done { .. });
            if sink.send(event).await.is_err() || last {
                return;
            }
        }
        let lost = StreamEvent::error("turn_stream_lost", "the turn's stream ended before its end was recorded", true);
        let done = StreamEvent::Done {
            reason: DoneReason::Error,
            session_id: Some(sid),
            turn_id,
            usage: None,
            replayed: true,
        };
        if sink.send(lost).await.is_ok() {
            let _ = sink.send(done).await;
        }
    });
    crate::http::sse_response(body, true)
}
