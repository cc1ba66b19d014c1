//! A repeated `stream_run_id`: the client lost the first answer (its
//! connection dropped before `session` or `done`) and sent the same request
//! again. It never runs the model again and never stores anything twice.
//! While the first turn's frames are in the frame log ([`crate::frames`]),
//! the answer is that turn's stream: replayed, then followed live when it is
//! still running (frame for frame, the same ids after this request's own
//! `agent_state`). Without them (expired, or not kept), a finished turn's
//! stored outcome is replayed from its messages, and a running one is named,
//! with its session, in an `error` `turn_running`. Either way `done` says
//! `replayed` and names the first turn.

use super::TurnDeps;
use crate::ids::{RunId, SessionId, UserId};
use crate::message::{Role, StoredMessage};
use crate::session::store::MessagesFrom;
use crate::session::{TurnRecord, TurnStatus};
use crate::sse::{DoneReason, EventSink, StreamEvent};
use crate::store::StoreError;
use futures::StreamExt;
use tokio::time::Instant;

/// Messages read per page while collecting the first turn's messages.
const PAGE: usize = 100;

/// Answers the retry; returns its `done`. `deadline`: when this invocation
/// ends (a followed turn is followed until shortly before).
pub async fn answer(
    deps: &TurnDeps,
    user: &UserId,
    sid: &SessionId,
    run: &RunId,
    deadline: Instant,
    sink: &mut EventSink,
) -> StreamEvent {
    let store = &deps.store;
    let (record, session) = tokio::join!(store.turn_by_run(user, sid, run), store.session(user, sid));
    let (record, session) = match (record, session) {
        (Ok(r), Ok(Some(s))) => (r, s),
        (_, Ok(None)) => return refuse(sink, None, StoreError::NotFound).await,
        (Err(e), _) | (_, Err(e)) => return refuse(sink, Some(sid), e).await,
    };
    if let Some(record) = &record {
        if let Some(done) = from_frames(deps, user, sid, record, deadline, sink).await {
            return done;
        }
    }
    let _ = sink.send(StreamEvent::Session { session: session.view.clone() }).await;
    let record = match record {
        Some(r) if r.status != TurnStatus::Running => r,
        running => {
            let message = format!(
                "the turn of this stream_run_id is still running in session {sid}; its answer will be in that \
                 session's history"
            );
            let _ = sink.send(StreamEvent::error("turn_running", message, true)).await;
            let turn_id = running.map_or_else(crate::ids::TurnId::new, |r| r.turn_id);
            return StreamEvent::Done {
                reason: DoneReason::Error,
                session_id: Some(sid.clone()),
                turn_id,
                usage: None,
                replayed: false,
            };
        }
    };
    match turn_messages(deps, user, sid, &record).await {
        Ok(messages) => replay(sink, sid, &record, &messages).await,
        Err(e) => refuse(sink, Some(sid), e).await,
    }
}

/// The first turn's frames after its `agent_state` (this request sent its
/// own), from the frame log; `None` when the log has none of them.
async fn from_frames(
    deps: &TurnDeps,
    user: &UserId,
    sid: &SessionId,
    record: &TurnRecord,
    deadline: Instant,
    sink: &mut EventSink,
) -> Option<StreamEvent> {
    let log = deps.frames.clone()?;
    let until = deadline - deps.config.deadline_margin.min(deadline.saturating_duration_since(Instant::now()) / 10);
    let follow = match crate::frames::follow_turn(log, user, sid, &record.turn_id, 1, until).await {
        Ok(f) => f?,
        Err(e) => {
            tracing::warn!(error = %e, "frame log not read; answering the retry from the turn record");
            return None;
        }
    };
    let mut frames = follow.frames;
    while let Some(f) = frames.next().await {
        let sent = match f.event {
            StreamEvent::Done { reason, session_id, turn_id, usage, .. } => {
                return Some(StreamEvent::Done { reason, session_id, turn_id, usage, replayed: true });
            }
            // One frame per stored frame (never coalesced), so the ids match.
            StreamEvent::TextDelta { content } => match sink.text(&content) {
                Ok(()) => sink.flush().await,
                gone => gone,
            },
            event => sink.send(event).await,
        };
        if sent.is_err() {
            // This client is gone: nothing more to follow for it.
            break;
        }
    }
    // Followed until this invocation's end: the client comes back for the rest.
    let message = "the turn of this stream_run_id is still running; its answer will be in the session's history";
    let _ = sink.send(StreamEvent::error("turn_running", message, true)).await;
    Some(StreamEvent::Done {
        reason: DoneReason::Error,
        session_id: Some(sid.clone()),
        turn_id: follow.turn_id,
        usage: None,
        replayed: true,
    })
}

async fn refuse(sink: &mut EventSink, sid: Option<&SessionId>, e: StoreError) -> StreamEvent {
    let retryable = matches!(e, StoreError::Backend(_));
    let _ = sink.send(StreamEvent::error(e.code(), e.to_string(), retryable)).await;
    StreamEvent::Done {
        reason: DoneReason::Error,
        session_id: sid.cloned(),
        turn_id: crate::ids::TurnId::new(),
        usage: None,
        replayed: false,
    }
}

/// The messages the first turn stored after its user message.
async fn turn_messages(
    deps: &TurnDeps,
    user: &UserId,
    sid: &SessionId,
    record: &TurnRecord,
) -> Result<Vec<StoredMessage>, StoreError> {
    let mut out = Vec::new();
    let mut after = record.user_message_seq;
    loop {
        let page = deps.store.messages_page(user, sid, MessagesFrom::After(after), PAGE).await?;
        let read = page.len();
        let ours = page.iter().take_while(|m| m.turn_id == record.turn_id).count();
        after = page.last().map_or(after, |m| m.seq);
        out.extend(page.into_iter().take(ours));
        // Done at the first message of a later turn, or the end of the log.
        if read < PAGE || ours < read {
            return Ok(out);
        }
    }
}

/// The stored outcome as the events the first turn sent: text, calls and
/// their results, `error` when it failed; then `done`.
async fn replay(sink: &mut EventSink, sid: &SessionId, record: &TurnRecord, messages: &[StoredMessage]) -> StreamEvent {
    let names: std::collections::HashMap<&str, &str> =
        messages.iter().flat_map(|m| m.tool_calls.iter().map(|c| (c.id.as_str(), c.function.name.as_str()))).collect();
    let mut error = None;
    let mut cut = None;
    let mut usage = None;
    for m in messages {
        match m.role {
            Role::Assistant => {
                if let Some(text) = m.content.as_deref().filter(|t| !t.is_empty()) {
                    let _ = sink.text(text);
                }
                for call in &m.tool_calls {
                    let _ =
                        sink.send(StreamEvent::ToolCall { tool_call: call.clone(), origin: Default::default() }).await;
                }
                if !m.claim_mismatches.is_empty() {
                    let verdict = match m.include_in_context {
                        true => crate::sse::CheckVerdict::Corrected,
                        false => crate::sse::CheckVerdict::AskedAgain,
                    };
                    let mismatches = m.claim_mismatches.clone();
                    let _ = sink.send(StreamEvent::AnswerCheck { verdict, mismatches }).await;
                }
                error = m.error.clone().or(error);
                cut = m.cut_off.or(cut);
                usage = m.usage.or(usage);
            }
            Role::Tool => {
                let id = m.tool_call_id.clone().unwrap_or_default();
                let content = m.content.clone().unwrap_or_default();
                let ok = serde_json::from_str::<serde_json::Value>(&content).map_or(true, |v| v["ok"] != false);
                let preview: String = content.chars().take(crate::session::api::PREVIEW_CHARS).collect();
                let name = names.get(id.as_str()).copied().unwrap_or_default().to_string();
                let _ = sink
                    .send(StreamEvent::ToolResult { tool_call_id: id, name, ok, preview, origin: Default::default() })
                    .await;
            }
            Role::User | Role::System => {}
        }
    }
    let reason = match record.status {
        TurnStatus::Completed | TurnStatus::Running => DoneReason::Complete,
        TurnStatus::Stopped => DoneReason::Stopped,
        TurnStatus::CutOff => {
            let reason = cut.unwrap_or(crate::message::CutReason::Length);
            let _ = sink.send(StreamEvent::CutOff { reason }).await;
            DoneReason::CutOff
        }
        TurnStatus::Error => {
            let (code, message) =
                error.map_or(("turn_failed".to_string(), "the turn failed".to_string()), |e| (e.code, e.message));
            let _ = sink.send(StreamEvent::error(code, message, false)).await;
            DoneReason::Error
        }
    };
    StreamEvent::Done { reason, session_id: Some(sid.clone()), turn_id: record.turn_id.clone(), usage, replayed: true }
}
