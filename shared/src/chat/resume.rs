//! `GET /chat/{id}/stream`: a session's running (or just finished) turn for
//! `useChat({resume: true})`. `DefaultChatTransport` treats what it gets as a
//! **replay** (at the first `start` it empties the assistant message), so the
//! turn is read from the frame log ([`crate::frames::follow`]) from its first
//! frame, re-encoded by a fresh UI encoder with the same `messageId` (the
//! turn id) as the original response, then followed live to its `done`. The
//! log holds the frames as the client was sent them, so the replay is the
//! same message (parts, order, ids, content), not the same bytes: the sink
//! merges consecutive text deltas while its channel is full, which a replay
//! written faster than it is read makes happen (docs/chat-protocol.md).
//!
//! 204 when there is nothing to resume (no frame log, no turn running or
//! finished within [`crate::frames::RESUME_WINDOW`]), and for an approval's
//! continuation (it continues a message the client reads from the history). A turn cut off for good
//! ends with the log's `error` (`stream_interrupted`) and `done`, so `finish`
//! and `[DONE]`; a follow that reaches the invocation's deadline first just
//! ends the body without `finish` (the turn is still running: the client may
//! come back).

use super::ui_stream::UiEncoder;
use crate::frames::{Follow, FrameLog};
use crate::ids::{SessionId, UserId};
use crate::sse::{EventSink, SseBody, StreamEvent};
use crate::store::StoreError;
use futures::StreamExt;
use std::sync::Arc;
use tokio::time::Instant;

/// The session's running (or just finished) turn as a UI message stream,
/// followed until `until`; `None` when there is nothing to resume.
pub async fn resume(
    log: Arc<dyn FrameLog>,
    user: &UserId,
    sid: &SessionId,
    until: Instant,
) -> Result<Option<SseBody>, StoreError> {
    let Some(Follow { turn_id, mut frames }) = crate::frames::follow(log, user, sid, 0, until).await? else {
        return Ok(None);
    };
    // An approval's answer continues a message of an earlier turn, which the
    // client has from the history: its replay under its own id would show
    // the answer twice. It opens with `approval_answered` right after the
    // session's events, so the first frames tell.
    let mut head = Vec::new();
    while let Some(frame) = frames.next().await {
        let opening = matches!(
            frame.event,
            StreamEvent::AgentState { .. } | StreamEvent::Session { .. } | StreamEvent::FocusChanged { .. }
        );
        if matches!(frame.event, StreamEvent::ApprovalAnswered { .. }) {
            return Ok(None);
        }
        head.push(frame);
        if !opening {
            break;
        }
    }
    let frames = futures::stream::iter(head).chain(frames).boxed();
    Ok(Some(replay(Follow { turn_id, frames })))
}

/// The followed turn as a UI message stream named after the turn.
fn replay(follow: Follow) -> SseBody {
    let Follow { turn_id, mut frames } = follow;
    let (mut sink, body) = EventSink::channel_with(Box::new(UiEncoder::replaying(turn_id.to_string())));
    tokio::spawn(async move {
        while let Some(frame) = frames.next().await {
            let last = matches!(frame.event, StreamEvent::Done { .. });
            if sink.send(frame.event).await.is_err() || last {
                return;
            }
        }
        let _ = sink.flush().await;
    });
    body
}
