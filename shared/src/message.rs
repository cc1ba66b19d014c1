//! The protocol-complete conversation log (UNIFIED_CONVERSATION_LOG_SPEC §4.1, §4.3).
//!
//! One [`StoredMessage`] per DynamoDB item. Every message converts to an
//! OpenAI `messages[]` entry without losing tool-call structure: assistant
//! messages carry `tool_calls`, tool messages carry `tool_call_id`. A model
//! failure is stored as an assistant message holding the partial text plus an
//! [`MessageError`] marker, and it stays in context so "continue" has an anchor.
//! The system prompt is never stored: it is rebuilt per turn.

use crate::ids::{MessageId, SessionId, TurnId};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

/// One tool call as the OpenAI protocol spells it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ToolCall {
    pub id: String,
    #[serde(rename = "type", default = "function_type")]
    pub kind: String,
    pub function: FunctionCall,
}

fn function_type() -> String {
    "function".to_string()
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct FunctionCall {
    pub name: String,
    /// JSON text exactly as the model produced it (it may be invalid JSON).
    pub arguments: String,
}

/// Marks an assistant message whose generation failed or was cut short.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct MessageError {
    /// Machine-readable, same vocabulary as the SSE `error` event's `code`.
    pub code: String,
    pub message: String,
}

/// Why an answer was cut off before its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum CutReason {
    /// The model hit its token limit (`finish_reason: "length"`).
    Length,
    /// The model repeated itself and the turn stopped it.
    Repetition,
}

impl CutReason {
    pub fn describe(self) -> &'static str {
        match self {
            CutReason::Length => "was cut off at the model's length limit",
            CutReason::Repetition => "was cut off because it kept repeating itself",
        }
    }
}

/// Token usage as reported by the model (or estimated when it reports none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
}

impl Usage {
    pub fn add(&mut self, other: &Usage) {
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
        self.total_tokens += other.total_tokens;
    }
}

/// One message of a session's log, as stored (one item each).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredMessage {
    pub id: MessageId,
    pub session_id: SessionId,
    /// Position in the session, from 1, gap-free: the sort key.
    pub seq: u64,
    pub turn_id: TurnId,
    pub role: Role,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Present when generation failed; `content` then holds the partial text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<MessageError>,
    /// Set when the user stopped the turn; `content` holds the partial text.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stopped: bool,
    /// Set when the answer was cut off before its end; `content` holds what came.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut_off: Option<CutReason>,
    /// The answer's word that this turn's steps contradict
    /// ([`crate::claims`]). On an answer withdrawn for it
    /// (`include_in_context: false`), why; on a final answer, its corrections.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub claim_mismatches: Vec<crate::claims::ClaimMismatch>,
    /// UI-only entries are kept in the log but never sent to the model.
    #[serde(default = "yes")]
    pub include_in_context: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    pub created_at: i64,
    /// A user message dictated from voice notes: the client's id of their group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub voice_note_group_id: Option<String>,
    /// Set on the marker a regenerating turn writes in place of a user
    /// message: the messages from this seq up to the marker (the answer it
    /// replaces) are superseded. They stay in the log, but neither they nor
    /// the marker are shown or sent to the model ([`without_superseded`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supersedes_from: Option<u64>,
    /// On an assistant message: its calls that wait for the user's approval
    /// ([`crate::approval`]). Their results come later in the log: the
    /// approved call's own, or the denial ("denied by the user: …").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvals: Vec<PendingApproval>,
    /// On a tool result: the steps its call took, in the words the live turn
    /// showed them, so the history reads the same after a reload.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub operations: Vec<StoredOperation>,
}

/// A step of a tool call as the user saw it: its settled `operation` event
/// (docs/events.md#operation), kept with the call's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct StoredOperation {
    pub action: crate::entities::OperationAction,
    pub entity_type: String,
    /// The entity's name (a title, never its id when it could be read).
    pub entity_name: String,
    /// `success` or `error`; `start` for a step that never ended.
    pub status: crate::entities::OperationStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entity_id: Option<String>,
    /// The step in a sentence ("Listed 3 events, 1–7 Dec").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
}

/// A call that waits for the user's yes ([`crate::approval`]): what the
/// approval id signs is the call as stored in the same message (its
/// arguments are never taken from the client).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PendingApproval {
    pub tool_call_id: String,
    /// HMAC over user, session, call id, tool, arguments' hash and expiry.
    pub approval_id: String,
    pub tool: String,
    /// The operation in human words ("Delete the task \"Old checklist\"").
    pub summary: String,
    /// Ms since the epoch; after it the call is denied as expired.
    pub expires_at: i64,
    /// A plan step's call ([`crate::planner`]): the executor that made it
    /// waits in the plan record, and the answer resumes that step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<PlanStepRef>,
}

/// The plan step a waiting call belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PlanStepRef {
    pub plan_id: String,
    pub step_id: String,
}

/// A contiguous run of the log as readers see it: without regenerate markers
/// and the answers they superseded. A marker always comes right after what it
/// supersedes, so a window ending at the log's newest message is filtered
/// whole; a page that ends before a marker still shows what it hides.
pub fn without_superseded(messages: Vec<StoredMessage>) -> Vec<StoredMessage> {
    let hidden: Vec<(u64, u64)> = messages.iter().filter_map(|m| Some((m.supersedes_from?, m.seq))).collect();
    if hidden.is_empty() {
        return messages;
    }
    messages.into_iter().filter(|m| !hidden.iter().any(|(from, marker)| (*from..=*marker).contains(&m.seq))).collect()
}

fn yes() -> bool {
    true
}

/// One entry of the OpenAI `messages[]` array.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: Role,
    /// `null` is meaningful for an assistant message that only calls tools.
    pub content: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl ChatMessage {
    pub fn system(text: impl Into<String>) -> Self {
        Self { role: Role::System, content: Some(text.into()), tool_calls: vec![], tool_call_id: None }
    }
    pub fn user(text: impl Into<String>) -> Self {
        Self { role: Role::User, content: Some(text.into()), tool_calls: vec![], tool_call_id: None }
    }
}

impl StoredMessage {
    /// A plain message of the log (no tool calls, no error, sent to the
    /// model), stamped now; the one way to make one.
    pub fn new(session_id: SessionId, seq: u64, turn_id: TurnId, role: Role, content: Option<String>) -> Self {
        StoredMessage {
            id: MessageId::new(),
            session_id,
            seq,
            turn_id,
            role,
            content,
            tool_calls: vec![],
            tool_call_id: None,
            error: None,
            stopped: false,
            cut_off: None,
            claim_mismatches: vec![],
            include_in_context: true,
            usage: None,
            created_at: crate::now_ms(),
            voice_note_group_id: None,
            supersedes_from: None,
            approvals: vec![],
            operations: vec![],
        }
    }

    /// This message as an OpenAI `messages[]` entry, its text as stored: an
    /// interrupted answer's partial text, without a word about what cut it
    /// off ([`to_model`] adds a note that says it).
    pub fn to_chat(&self) -> ChatMessage {
        ChatMessage {
            role: self.role,
            content: self.content.clone(),
            tool_calls: self.tool_calls.clone(),
            tool_call_id: self.tool_call_id.clone(),
        }
    }

    /// For an answer that failed or that the user stopped: what happened, as
    /// a system note to send right before it, for an answer sent with text or
    /// calls, or sent as nothing (`blank`). Never inside the assistant's
    /// text: a model reads its own earlier messages as examples, and a small
    /// one answered every later turn with a `[LLM_ERROR …]` marker it had
    /// been shown as its own words (issue 25). Before the answer, not after:
    /// a note between the answer and the user's "continue" was what the
    /// local model repeated or answered instead of continuing.
    fn interruption_note(&self, blank: bool) -> Option<ChatMessage> {
        if self.role != Role::Assistant {
            return None;
        }
        let what = match (&self.error, self.stopped, self.cut_off) {
            (Some(e), _, _) => format!("could not be completed ({}: {})", e.code, e.message),
            (None, true, _) => "was stopped by the user before it was complete".to_string(),
            (None, false, Some(cut)) => cut.describe().to_string(),
            _ => return None,
        };
        Some(ChatMessage::system(if blank {
            format!("The assistant's answer to the message above {what} and has no text.")
        } else {
            format!("The assistant's next answer {what}; it ends where it was cut off.")
        }))
    }
}

/// No text and no tool calls.
fn is_blank(chat: &ChatMessage) -> bool {
    chat.tool_calls.is_empty() && chat.content.as_deref().is_none_or(|c| c.trim().is_empty())
}

/// What the model is sent for one atomic group of the log (a message, or an
/// assistant message and the tool results answering it): the
/// interruption note of any of them first (never between a call and its
/// results, which would break the protocol), then each message as it is
/// stored (the first without its tool calls when `text_only`: their results
/// were never stored). An interrupted answer with no text and no calls is
/// sent as its note alone.
pub fn to_model(group: &[&StoredMessage], text_only: bool) -> Vec<ChatMessage> {
    let mut notes = Vec::new();
    let mut chats = Vec::with_capacity(group.len());
    for m in group {
        let mut chat = m.to_chat();
        if text_only {
            chat.tool_calls.clear();
        }
        let blank = is_blank(&chat);
        let note = m.interruption_note(blank);
        if !(blank && note.is_some()) {
            chats.push(chat);
        }
        notes.extend(note);
    }
    notes.extend(chats);
    notes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(role: Role, content: &str) -> StoredMessage {
        StoredMessage::new(SessionId::new(), 1, TurnId::new(), role, Some(content.into()))
    }

    #[test]
    fn an_interrupted_answer_is_a_system_note_then_its_partial_text() {
        let mut m = msg(Role::Assistant, "half an ans");
        m.error = Some(MessageError { code: "llm_stream_error".into(), message: "connection reset".into() });
        let sent = to_model(&[&m], false);
        assert_eq!(sent.len(), 2);
        assert_eq!(sent[0].role, Role::System);
        let note = sent[0].content.as_deref().unwrap();
        assert!(note.contains("llm_stream_error") && note.contains("next answer"), "{note}");
        assert_eq!((sent[1].role, sent[1].content.as_deref()), (Role::Assistant, Some("half an ans")));

        let mut stopped = msg(Role::Assistant, "");
        stopped.stopped = true;
        let sent = to_model(&[&stopped], false);
        assert_eq!(sent.len(), 1, "no empty assistant message: {sent:?}");
        assert_eq!(sent[0].role, Role::System);
        assert!(sent[0].content.as_deref().unwrap().contains("stopped by the user"));
        assert!(sent[0].content.as_deref().unwrap().contains("has no text"));

        let plain = msg(Role::Assistant, "all of it");
        assert_eq!(to_model(&[&plain], false), vec![plain.to_chat()]);
        let user = msg(Role::User, "hi");
        assert_eq!(to_model(&[&user], false), vec![user.to_chat()]);

        // A stopped call's note comes before it, never between it and its results.
        let mut call = msg(Role::Assistant, "");
        call.stopped = true;
        call.tool_calls = vec![ToolCall {
            id: "c1".into(),
            kind: "function".into(),
            function: FunctionCall { name: "f".into(), arguments: "{}".into() },
        }];
        let mut result = msg(Role::Tool, "ok");
        result.tool_call_id = Some("c1".into());
        let roles: Vec<Role> = to_model(&[&call, &result], false).iter().map(|c| c.role).collect();
        assert_eq!(roles, [Role::System, Role::Assistant, Role::Tool]);
    }

    #[test]
    fn a_marker_hides_itself_and_the_answer_it_supersedes() {
        let log: Vec<StoredMessage> = (1..=6)
            .map(|seq| {
                let mut m = msg(Role::Assistant, "x");
                m.seq = seq;
                m.supersedes_from = (seq == 5).then_some(3);
                m
            })
            .collect();
        let seqs: Vec<u64> = without_superseded(log).iter().map(|m| m.seq).collect();
        assert_eq!(seqs, [1, 2, 6]);
    }

    #[test]
    fn chat_message_serializes_null_content_for_tool_only_assistant() {
        let m = ChatMessage { role: Role::Assistant, content: None, tool_calls: vec![], tool_call_id: None };
        assert_eq!(serde_json::to_string(&m).unwrap(), r#"{"role":"assistant","content":null}"#);
    }
}
