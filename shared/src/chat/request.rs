//! The body of `POST /chat`: what `useChat`'s `DefaultChatTransport` sends,
//! `{id, messages, trigger, messageId}` plus the `body` extras a client adds,
//! made into a [`ValidTurn`]. Pure and cheap, so it runs before the stream
//! opens: a body refused here gets an HTTP 400 (413 when too large).
//!
//! The server keeps the history, so of `messages` only the last one is read,
//! and only its text parts: it must be the user's. The others are checked to
//! be JSON and borrowed from the body, never copied (a whole conversation
//! may be megabytes). `id` (the chat id the
//! client made) is the session's id, created by the first turn that names it.

use crate::approval::ApprovalAnswer;
use crate::turn::{BadTurn, TurnRequest, ValidTurn};
use serde::Deserialize;
use serde_json::value::RawValue;

/// The transport's body. Unknown fields are ignored (the transport and
/// `body` extras may add more); the extras we read are the native request's.
#[derive(Debug, Deserialize)]
struct ChatBody<'a> {
    #[serde(default)]
    id: Option<String>,
    /// Each message as the body spells it, borrowed: an unchanged
    /// `DefaultChatTransport` sends the whole conversation (megabytes), of
    /// which only the last message is read, so none is copied.
    #[serde(default, borrow)]
    messages: Vec<&'a RawValue>,
    #[serde(default)]
    trigger: Option<String>,
    #[serde(default)]
    context_type: Option<String>,
    #[serde(default)]
    entity_id: Option<String>,
    /// Shorthand for `projectFocus.projectId` (the prewarm body's name).
    #[serde(default)]
    project_id: Option<String>,
    #[serde(default, rename = "projectFocus", alias = "project_focus")]
    project_focus: Option<serde_json::Value>,
    #[serde(default)]
    stream_run_id: Option<serde_json::Value>,
    #[serde(default)]
    voice_note_group_id: Option<String>,
    #[serde(default)]
    timezone: Option<String>,
    /// The assistant message an approval's answer continues.
    #[serde(default, rename = "messageId")]
    message_id: Option<serde_json::Value>,
}

/// A `UIMessage` as far as we read it.
#[derive(Debug, Deserialize)]
struct UiMessageIn {
    role: String,
    #[serde(default)]
    parts: Vec<UiPartIn>,
}

#[derive(Debug, Deserialize)]
struct UiPartIn {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    text: Option<String>,
    /// A tool part's state (`approval-responded` carries the user's answer).
    #[serde(default)]
    state: Option<String>,
    /// `{id, approved, reason?}` on an answered tool part.
    #[serde(default)]
    approval: Option<serde_json::Value>,
}

/// A validated chat body: the turn, and the assistant message the answer
/// continues (an approval's answer: the request's `messageId`).
#[derive(Debug, Clone)]
pub struct ChatTurn {
    pub turn: ValidTurn,
    pub message_id: Option<String>,
}

/// Why a chat body was refused (HTTP 400, 413 for a message too large).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BadChat {
    #[error("`id` (the chat id) is required")]
    MissingId,
    #[error("unknown trigger {0:?}: `submit-message` or `regenerate-message`")]
    UnknownTrigger(String),
    #[error("the last of `messages` must be the user's, with a text part")]
    NoUserMessage,
    #[error(transparent)]
    Turn(#[from] BadTurn),
}

impl BadChat {
    pub fn code(&self) -> &'static str {
        match self {
            BadChat::MissingId => "missing_chat_id",
            BadChat::UnknownTrigger(_) => "unknown_trigger",
            BadChat::NoUserMessage => "missing_message",
            BadChat::Turn(t) => t.code(),
        }
    }

    pub fn status(&self) -> http::StatusCode {
        match self {
            BadChat::Turn(BadTurn::MessageTooLarge { .. }) => http::StatusCode::PAYLOAD_TOO_LARGE,
            _ => http::StatusCode::BAD_REQUEST,
        }
    }
}

/// Validates a `POST /chat` body. `regenerate-message` answers the stored last
/// user message again; the client's copy of it is checked like a new one but
/// not stored.
pub fn parse(body: &[u8], max_message_bytes: usize) -> Result<ChatTurn, BadChat> {
    // serde's struct visitor also reads a JSON array by position.
    if body.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(match serde_json::from_slice::<serde::de::IgnoredAny>(body) {
            Ok(_) => BadTurn::NotAnObject.into(),
            Err(e) => BadTurn::InvalidJson(e.to_string()).into(),
        });
    }
    let chat: ChatBody = serde_json::from_slice(body).map_err(|e| BadTurn::InvalidJson(e.to_string()))?;
    let id = chat.id.filter(|i| !i.is_empty()).ok_or(BadChat::MissingId)?;
    let regenerate = match chat.trigger.as_deref() {
        None | Some("submit-message") => false,
        Some("regenerate-message") => true,
        Some(other) => return Err(BadChat::UnknownTrigger(other.to_string())),
    };
    let last: UiMessageIn = serde_json::from_str(chat.messages.last().ok_or(BadChat::NoUserMessage)?.get())
        .map_err(|e| BadTurn::InvalidJson(format!("the last of `messages`: {e}")))?;
    let answers = if last.role == "assistant" && !regenerate { answers(&last.parts) } else { vec![] };
    let texts: Vec<&str> = last.parts.iter().filter(|p| p.kind == "text").filter_map(|p| p.text.as_deref()).collect();
    let message = match (last.role.as_str(), answers.is_empty()) {
        ("user", _) if !texts.is_empty() => texts.join("\n"),
        // Read for its scope only: the turn stores no message of the user's.
        ("assistant", false) => "(approval)".to_string(),
        _ => return Err(BadChat::NoUserMessage),
    };
    let message_id = match chat.message_id {
        Some(serde_json::Value::String(m)) if !answers.is_empty() && is_message_id(&m) => Some(m),
        _ => None,
    };
    let req = TurnRequest {
        message,
        session_id: Some(id),
        context_type: chat.context_type,
        entity_id: chat.entity_id,
        project_focus: focus(chat.project_focus, chat.project_id)?,
        stream_run_id: chat.stream_run_id,
        voice_note_group_id: chat.voice_note_group_id,
        timezone: chat.timezone,
    };
    let mut turn = ValidTurn::from_request(req, max_message_bytes)?;
    turn.session_may_be_new = answers.is_empty();
    turn.regenerate = regenerate;
    if !answers.is_empty() {
        turn.message.clear();
        turn.approvals = answers;
    }
    Ok(ChatTurn { turn, message_id })
}

/// The answers of an assistant message's tool parts in state
/// `approval-responded` (`addToolApprovalResponse`): `{id, approved, reason?}`.
fn answers(parts: &[UiPartIn]) -> Vec<ApprovalAnswer> {
    parts
        .iter()
        .filter(|p| p.state.as_deref() == Some("approval-responded"))
        .filter_map(|p| {
            let a = p.approval.as_ref()?;
            Some(ApprovalAnswer {
                approval_id: a.get("id")?.as_str()?.to_string(),
                approved: a.get("approved")?.as_bool()?,
                reason: a.get("reason").and_then(|r| r.as_str()).map(|r| r.chars().take(1_000).collect()),
            })
        })
        .collect()
}

/// A client's message id we name the continued message by: 1–128
/// characters, none of them control characters.
fn is_message_id(m: &str) -> bool {
    (1..=128).contains(&m.chars().count()) && !m.chars().any(char::is_control)
}

/// `projectFocus` with `project_id` as its `projectId` when it names none.
fn focus(focus: Option<serde_json::Value>, project_id: Option<String>) -> Result<Option<serde_json::Value>, BadTurn> {
    let Some(project) = project_id.filter(|p| !p.is_empty()) else { return Ok(focus) };
    match focus {
        None => Ok(Some(serde_json::json!({ "projectId": project }))),
        Some(serde_json::Value::Object(mut f)) => {
            if !f.contains_key("projectId") && !f.contains_key("project_id") {
                f.insert("projectId".into(), project.into());
            }
            Ok(Some(serde_json::Value::Object(f)))
        }
        Some(other) => Err(BadTurn::InvalidFocus(format!("got {other}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: usize = 32 * 1024;

    fn body(v: serde_json::Value) -> Vec<u8> {
        serde_json::to_vec(&v).unwrap()
    }

    fn user(text: &str) -> serde_json::Value {
        serde_json::json!({"id": "u1", "role": "user", "parts": [{"type": "text", "text": text}]})
    }

    #[test]
    fn the_transports_body_is_a_turn_on_the_chat_id() {
        let b = body(serde_json::json!({
            "id": "Xb3kQ9mZ2pL7aR1c", "trigger": "submit-message", "messageId": null,
            "messages": [user("old"), {"id": "a1", "role": "assistant", "parts": []}, user("new")],
            "context_type": "project", "project_id": "p1",
        }));
        let t = parse(&b, MAX).unwrap().turn;
        assert_eq!(t.message, "new");
        assert_eq!(t.session_id.unwrap().as_str(), "Xb3kQ9mZ2pL7aR1c");
        assert!(t.session_may_be_new && !t.regenerate);
        assert_eq!(t.focus.unwrap()["projectId"], "p1");
    }

    #[test]
    fn bad_bodies_are_refused_with_their_codes() {
        let code = |v: serde_json::Value| parse(&body(v), MAX).unwrap_err().code();
        assert_eq!(code(serde_json::json!({"messages": [user("hi")]})), "missing_chat_id");
        assert_eq!(code(serde_json::json!({"id": "a#b", "messages": [user("hi")]})), "invalid_id");
        assert_eq!(code(serde_json::json!({"id": "c1", "messages": []})), "missing_message");
        assert_eq!(
            code(serde_json::json!({"id": "c1", "messages": [{"role": "assistant", "parts": []}]})),
            "missing_message"
        );
        assert_eq!(code(serde_json::json!({"id": "c1", "messages": [user("  ")]})), "missing_message");
        assert_eq!(
            code(serde_json::json!({"id": "c1", "trigger": "resume", "messages": [user("hi")]})),
            "unknown_trigger"
        );
        assert_eq!(
            code(serde_json::json!({"id": "c1", "messages": [user("hi")], "context_type": "x"})),
            "unknown_context_type"
        );
        assert_eq!(
            code(serde_json::json!({"id": "c1", "messages": [user("hi")], "project_id": "bad id"})),
            "invalid_focus"
        );
        assert_eq!(parse(b"[1]", MAX).unwrap_err().code(), "invalid_json");
        assert_eq!(parse(b"{", MAX).unwrap_err().code(), "invalid_json");
        let big = parse(&body(serde_json::json!({"id": "c1", "messages": [user(&"x".repeat(MAX + 1))]})), MAX);
        assert_eq!(big.unwrap_err().status(), http::StatusCode::PAYLOAD_TOO_LARGE);
    }

    #[test]
    fn an_answered_approval_is_a_turn_that_continues_the_assistant_message() {
        let answered = serde_json::json!({"id": "m1", "role": "assistant", "parts": [
            {"type": "step-start"},
            {"type": "tool-delete_entity", "toolCallId": "c1", "state": "approval-responded",
             "input": {"kind": "task", "id": "t1"}, "approval": {"id": "apv1.1.x", "approved": false, "reason": "keep it"}},
            {"type": "tool-create_task", "toolCallId": "c2", "state": "output-available", "input": {}, "output": "ok"},
        ]});
        let b = body(serde_json::json!({"id": "c1", "trigger": "submit-message", "messageId": "m1",
            "messages": [user("delete it"), answered]}));
        let t = parse(&b, MAX).unwrap();
        assert_eq!(t.message_id.as_deref(), Some("m1"));
        assert!(t.turn.message.is_empty() && !t.turn.session_may_be_new);
        assert_eq!(
            t.turn.approvals,
            [ApprovalAnswer { approval_id: "apv1.1.x".into(), approved: false, reason: Some("keep it".into()) }]
        );
        // An assistant message without an answer is still no message.
        let asked = serde_json::json!({"id": "m1", "role": "assistant", "parts": [
            {"type": "tool-delete_entity", "toolCallId": "c1", "state": "approval-requested", "approval": {"id": "a"}}]});
        let b = body(serde_json::json!({"id": "c1", "messages": [asked]}));
        assert_eq!(parse(&b, MAX).unwrap_err().code(), "missing_message");
    }

    #[test]
    fn regenerate_is_flagged() {
        let b = body(
            serde_json::json!({"id": "c1", "trigger": "regenerate-message", "messageId": "m", "messages": [user("hi")]}),
        );
        assert!(parse(&b, MAX).unwrap().turn.regenerate);
    }
}
