//! Message suggestions (issue 44 item 3): the next message the user — or the
//! user's agent, talking to another agent — could send in a session, drafted
//! by the model and streamed like a turn's text. Nothing is stored: the
//! suggestion becomes part of the session only when the user sends it, as a
//! turn (`docs/chat-protocol.md#message-suggestions`).
//!
//! Contract:
//! - [`SuggestionRequest::parse`]: the body (`{goal?, other_message?}`),
//!   refused (400) before any I/O;
//! - [`begin`]: ONE round trip before the answer's head, three requests in
//!   parallel: the session (the owner check: another user's session, or
//!   none, is [`Refused::NotFound`]), its recent log (the turn's own read,
//!   [`crate::turn::history::TurnHistory`], at most [`HISTORY_MESSAGES`]
//!   messages) and the budgets' admission (the turn's,
//!   [`crate::budget::admit`]: a suggestion counts as a turn in the minute,
//!   holds a concurrent slot while it streams and spends tokens);
//! - [`run`]: one model request with no tools, its text streamed as
//!   `text_delta`s, then `done` (`error` before it when the model failed,
//!   `cut_off` when it hit its token limit). The only write is the budget
//!   slot's release with the request's tokens: no message, no frame, no
//!   session change.

use crate::budget::{OverBudget, Slot};
use crate::ids::{SessionId, TurnId, UserId};
use crate::llm::{ChatRequest, LlmEvent};
use crate::message::{without_superseded, ChatMessage, CutReason, Role, StoredMessage, Usage};
use crate::session::SessionStatus;
use crate::sse::{DoneReason, EventSink, StreamEvent};
use crate::store::StoreError;
use crate::summary::store::SessionSummary;
use crate::turn::TurnDeps;
use futures::{FutureExt, StreamExt};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

/// The longest `goal`, in characters (Unicode scalar values, as JSON
/// Schema's `maxLength` counts them).
pub const GOAL_MAX_CHARS: usize = 1_000;
/// The longest `other_message`, in characters.
pub const OTHER_MESSAGE_MAX_CHARS: usize = 8_000;
/// The most recent messages of the session the prompt shows.
pub const HISTORY_MESSAGES: usize = 20;
/// Each shown message is cut to this many characters (an ellipsis marks the cut).
pub const MESSAGE_MAX_CHARS: usize = 2_000;
/// The longest suggestion, in the model's tokens (less when the deployment's
/// `LLM_MAX_TOKENS` or the day's token budget leaves less).
pub const MAX_TOKENS: u32 = 1_024;

/// The fixed instruction, the system message of every suggestion request.
pub const INSTRUCTION: &str = "Draft the next message the user would send in the conversation below, \
written as the user (first person, their language and tone), to the assistant or to the other agent. \
Answer with only the message text: no preface, no quotes, no explanation.";

/// The body of `POST /sessions/{id}/suggestion`. Unknown fields are ignored;
/// an absent, `null` or blank field is none.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SuggestionRequest {
    /// What the user wants their next message to achieve; at most 1,000 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 1000)]
    pub goal: Option<String>,
    /// The other agent's last message, when the user's agent answers another
    /// agent (an agent bridge): the draft answers it; at most 8,000 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 8000)]
    pub other_message: Option<String>,
}

/// Why a suggestion's body was refused (400).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadSuggestion {
    #[error("{0}")]
    InvalidJson(String),
    #[error("`goal` is over {GOAL_MAX_CHARS} characters")]
    GoalTooLong,
    #[error("`other_message` is over {OTHER_MESSAGE_MAX_CHARS} characters")]
    OtherMessageTooLong,
}

impl BadSuggestion {
    pub fn code(&self) -> &'static str {
        match self {
            BadSuggestion::InvalidJson(_) => "invalid_json",
            BadSuggestion::GoalTooLong => "invalid_goal",
            BadSuggestion::OtherMessageTooLong => "invalid_other_message",
        }
    }
}

impl SuggestionRequest {
    /// The body as sent: a JSON object (`{}` for no goal and no message; an
    /// empty body is refused like every required body), each field within
    /// its limit; blank fields are dropped.
    pub fn parse(body: &[u8]) -> Result<SuggestionRequest, BadSuggestion> {
        if body.iter().all(u8::is_ascii_whitespace) {
            return Err(BadSuggestion::InvalidJson("the body is required: a JSON object, `{}` for none".into()));
        }
        let req: SuggestionRequest =
            serde_json::from_slice(body).map_err(|e| BadSuggestion::InvalidJson(e.to_string()))?;
        let too_long = |s: &Option<String>, max: usize| s.as_ref().is_some_and(|s| s.chars().count() > max);
        if too_long(&req.goal, GOAL_MAX_CHARS) {
            return Err(BadSuggestion::GoalTooLong);
        }
        if too_long(&req.other_message, OTHER_MESSAGE_MAX_CHARS) {
            return Err(BadSuggestion::OtherMessageTooLong);
        }
        let kept = |s: Option<String>| s.filter(|s| !s.trim().is_empty());
        Ok(SuggestionRequest { goal: kept(req.goal), other_message: kept(req.other_message) })
    }
}

/// Why a suggestion did not start; nothing was streamed, nothing counted
/// but what the turn's own refusals count (a missing session's admission
/// counts in the minute, as a turn's does).
#[derive(Debug)]
pub enum Refused {
    /// No such session for this user (another user's included).
    NotFound,
    /// The session is closed: no turn will be sent in it.
    Closed,
    OverBudget(OverBudget),
    Store(StoreError),
}

/// A suggestion that may run: its id (the `done`'s `turn_id`, its budget
/// slot's), the model's messages and what the budgets granted.
pub struct Prepared {
    pub id: TurnId,
    pub session: SessionId,
    pub messages: Vec<ChatMessage>,
    slot: Option<Slot>,
    tokens_left: Option<u64>,
}

/// The owner check, the history and the admission, in one round trip.
pub async fn begin(
    deps: &TurnDeps,
    user: &UserId,
    sid: &SessionId,
    req: &SuggestionRequest,
    deadline: Instant,
) -> Result<Prepared, Refused> {
    let id = TurnId::new();
    let left = deadline.saturating_duration_since(Instant::now());
    let expires_ms = crate::now_ms() + left.as_millis() as i64;
    let (session, log, admitted) = tokio::join!(
        deps.store.session(user, sid),
        deps.history.recent_log(user, sid, HISTORY_MESSAGES),
        crate::budget::admit(deps.budget.as_ref(), &deps.config.budgets, user, &id, expires_ms),
    );
    let (slot, tokens_left) = match admitted {
        Ok(granted) => granted,
        Err(over) => {
            deps.refusals.remember(user, over, crate::now_ms());
            return Err(Refused::OverBudget(over));
        }
    };
    let refused = match (session, log) {
        (Ok(Some(s)), Ok(log)) if s.view.status == SessionStatus::Active => {
            let summary = log.summary.unwrap_or_else(|e| {
                tracing::warn!(error = %e, "summary not loaded");
                None
            });
            let messages = prompt(&log.messages, summary.as_ref(), req);
            return Ok(Prepared { id, session: sid.clone(), messages, slot, tokens_left });
        }
        (Ok(Some(_)), Ok(_)) => Refused::Closed,
        (Ok(None), _) => Refused::NotFound,
        (Err(e), _) | (_, Err(e)) => Refused::Store(e),
    };
    if let Some(slot) = slot {
        slot.release(0).await;
    }
    Err(refused)
}

/// The model's messages: the fixed instruction, then one user message
/// holding the conversation so far (the summary of what is older, the
/// recent messages' text, each cut to [`MESSAGE_MAX_CHARS`]), the other
/// agent's message and the goal when given, and the request itself.
pub fn prompt(
    history: &[StoredMessage],
    summary: Option<&SessionSummary>,
    req: &SuggestionRequest,
) -> Vec<ChatMessage> {
    let through = summary.map_or(0, |s| s.through_seq);
    let mut text = String::new();
    if let Some(s) = summary {
        text.push_str(&format!("Earlier in the conversation (a summary):\n{}\n\n", s.text.trim()));
    }
    text.push_str("The conversation so far:\n");
    let shown = without_superseded(history.to_vec());
    let lines: Vec<String> = shown
        .iter()
        .filter(|m| m.seq > through && m.include_in_context)
        .filter_map(|m| {
            let who = match m.role {
                Role::User => "User",
                Role::Assistant => "Assistant",
                _ => return None,
            };
            let content = m.content.as_deref().map(str::trim).filter(|c| !c.is_empty())?;
            Some(format!("{who}: {}", cut(content, MESSAGE_MAX_CHARS)))
        })
        .collect();
    if lines.is_empty() {
        text.push_str("(nothing yet)\n");
    }
    for line in lines {
        text.push_str(&line);
        text.push_str("\n\n");
    }
    if let Some(other) = &req.other_message {
        text.push_str(&format!("\nThe other agent's last message, to answer:\n{}\n", other.trim()));
    }
    if let Some(goal) = &req.goal {
        text.push_str(&format!("\nThe user's goal for this message: {}\n", goal.trim()));
    }
    text.push_str("\nDraft the next message the user would send. Only the message text.");
    vec![ChatMessage::system(INSTRUCTION), ChatMessage::user(text)]
}

/// `s` cut to `max` characters, an ellipsis marking the cut.
fn cut(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s.to_string(),
    }
}

/// How the model request ended.
enum Ended {
    Complete,
    CutOff,
    /// The client went away: nothing more to send.
    Gone,
    Failed {
        code: &'static str,
        message: String,
        retryable: bool,
    },
}

/// Streams the suggestion to `sink`, then `done`; gives the budget slot back
/// with the request's tokens (the model's count, ours when it reports none)
/// before the body ends.
pub async fn run(deps: TurnDeps, user: UserId, prepared: Prepared, deadline: Instant, mut sink: EventSink) {
    let Prepared { id, session, messages, slot, tokens_left } = prepared;
    let cap = deps.config.llm.max_tokens.unwrap_or(MAX_TOKENS).min(MAX_TOKENS);
    let cap = tokens_left.map_or(cap, |left| cap.min(u32::try_from(left).unwrap_or(u32::MAX)).max(1));
    let request = ChatRequest {
        model: deps.config.llm.model.clone(),
        messages: messages.clone(),
        tools: vec![],
        max_tokens: Some(cap),
        temperature: None,
    };
    let left = deadline.saturating_duration_since(Instant::now());
    let stop_at = deadline - deps.config.deadline_margin.min(left / 10);
    // A panic while streaming still ends the stream `error` then `done`, as a turn's does.
    let streamed = std::panic::AssertUnwindSafe(stream(&deps, request, stop_at, &mut sink)).catch_unwind().await;
    let (text, reported, ended) = streamed.unwrap_or_else(|_| {
        tracing::error!("the suggestion panicked");
        let message = "the suggestion failed unexpectedly".to_string();
        (String::new(), None, Ended::Failed { code: "internal_error", message, retryable: true })
    });
    let usage = reported.unwrap_or_else(|| {
        let counter = deps.counter.get();
        let prompt: u64 = messages.iter().filter_map(|m| m.content.as_deref()).map(|c| counter.count(c)).sum();
        let completion = counter.count(&text);
        Usage { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion }
    });
    let reason = match ended {
        Ended::Complete => DoneReason::Complete,
        Ended::Gone => DoneReason::Stopped,
        Ended::CutOff => {
            let _ = sink.send(StreamEvent::CutOff { reason: CutReason::Length }).await;
            DoneReason::CutOff
        }
        Ended::Failed { code, message, retryable } => {
            tracing::warn!(code, user_id = %user, session_id = %session, suggestion_id = %id, "suggestion failed");
            let _ = sink.send(StreamEvent::error(code, message, retryable)).await;
            DoneReason::Error
        }
    };
    let done =
        StreamEvent::Done { reason, session_id: Some(session), turn_id: id, usage: Some(usage), replayed: false };
    let _ = sink.send(done).await;
    if let Some(slot) = slot {
        slot.release(usage.prompt_tokens + usage.completion_tokens).await;
    }
}

/// The model request, its text relayed as it comes: the text, the usage
/// the model reported, and how it ended. Tool-call deltas (none are offered)
/// are dropped.
async fn stream(
    deps: &TurnDeps,
    request: ChatRequest,
    stop_at: Instant,
    sink: &mut EventSink,
) -> (String, Option<Usage>, Ended) {
    let deadline = || Ended::Failed {
        code: "deadline_exceeded",
        message: "the suggestion ran out of time".into(),
        retryable: true,
    };
    let model =
        |e: crate::llm::LlmError| Ended::Failed { code: e.code(), message: e.to_string(), retryable: e.is_transient() };
    let (mut text, mut usage, mut length) = (String::new(), None, false);
    let opened = tokio::select! {
        biased;
        _ = sink.closed() => return (text, usage, Ended::Gone),
        _ = tokio::time::sleep_until(stop_at) => return (text, usage, deadline()),
        r = deps.llm.stream_chat(request) => r,
    };
    let mut events = match opened {
        Ok(s) => s,
        Err(e) => return (text, usage, model(e)),
    };
    let ended = loop {
        tokio::select! {
            biased;
            _ = tokio::time::sleep_until(stop_at) => break deadline(),
            r = sink.idle() => if r.is_err() { break Ended::Gone },
            ev = events.next() => match ev {
                None if length => break Ended::CutOff,
                None => break Ended::Complete,
                Some(Ok(LlmEvent::TextDelta(t))) => {
                    text.push_str(&t);
                    if sink.text(&t).is_err() {
                        break Ended::Gone;
                    }
                }
                Some(Ok(LlmEvent::Usage(u))) => usage = Some(u),
                Some(Ok(LlmEvent::Finish { reason })) => length = reason == "length",
                Some(Ok(LlmEvent::ToolCallDelta { .. })) => {}
                Some(Err(e)) => break model(e),
            },
        }
    };
    (text, usage, ended)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_is_an_object_within_its_limits_and_blank_fields_are_none() {
        let parse = |b: &str| SuggestionRequest::parse(b.as_bytes());
        assert_eq!(parse("{}"), Ok(SuggestionRequest::default()));
        assert_eq!(parse(r#"{"goal": "  ", "other_message": null, "extra": 1}"#), Ok(SuggestionRequest::default()));
        let ok = parse(r#"{"goal": "book it", "other_message": "Tuesday?"}"#).unwrap();
        assert_eq!((ok.goal.as_deref(), ok.other_message.as_deref()), (Some("book it"), Some("Tuesday?")));
        for bad in ["", "  ", r#"{"goal": 5}"#, r#"{"goal": "x""#] {
            assert_eq!(parse(bad).unwrap_err().code(), "invalid_json", "{bad:?}");
        }
        let at = "é".repeat(GOAL_MAX_CHARS);
        assert!(parse(&serde_json::json!({ "goal": at }).to_string()).is_ok(), "characters, not bytes");
        let over = serde_json::json!({ "goal": format!("{at}x") }).to_string();
        assert_eq!(parse(&over), Err(BadSuggestion::GoalTooLong));
        let over = serde_json::json!({ "other_message": "x".repeat(OTHER_MESSAGE_MAX_CHARS + 1) }).to_string();
        assert_eq!(parse(&over), Err(BadSuggestion::OtherMessageTooLong));
    }

    #[test]
    fn the_prompt_shows_the_recent_text_after_the_summary_with_the_goal_and_the_other_message() {
        let sid = SessionId::new();
        let turn = TurnId::new();
        let msg = |seq, role, text: &str| StoredMessage::new(sid.clone(), seq, turn.clone(), role, Some(text.into()));
        let mut hidden = msg(4, Role::Assistant, "a withdrawn answer");
        hidden.include_in_context = false;
        let history = vec![
            msg(1, Role::User, "covered by the summary"),
            msg(2, Role::User, "Plan my week"),
            msg(3, Role::Assistant, &"long ".repeat(1000)),
            hidden,
        ];
        let summary: SessionSummary = serde_json::from_value(serde_json::json!({"version": 1, "text": "They talked.",
            "through_seq": 1, "source_last_seq": 1, "model": "m", "created_at": 0}))
        .unwrap();
        let req = SuggestionRequest { goal: Some("finish the report".into()), other_message: Some("Monday?".into()) };
        let messages = prompt(&history, Some(&summary), &req);
        assert_eq!(messages.len(), 2);
        assert_eq!(messages[0].content.as_deref(), Some(INSTRUCTION));
        let text = messages[1].content.as_deref().unwrap();
        assert!(text.contains("They talked.") && text.contains("User: Plan my week"), "{text}");
        assert!(!text.contains("covered by") && !text.contains("withdrawn"), "{text}");
        assert!(text.contains("Monday?") && text.contains("finish the report"), "{text}");
        let long = text.lines().find(|l| l.starts_with("Assistant: ")).unwrap();
        assert_eq!(long.chars().count(), "Assistant: ".len() + MESSAGE_MAX_CHARS + 1, "cut, with an ellipsis");
    }
}
