//! The SSE event contract: every event a turn can send, one serde-tagged enum,
//! and the one encoder. The wire format, with examples, is in `docs/events.md`.
//!
//! A frame is
//! ```text
//! id: <n>
//! event: <type>
//! data: <one line of JSON, with "type": "<type>">
//!
//! ```
//! `id` is per turn, starting at 1 and increasing by one per frame, so a client
//! can tell a gap from a reordering, and come back after the last one it has
//! (`Last-Event-ID`: [`crate::frames`]). `event` repeats the JSON's `type` for
//! readers (like curl) that look at the frame header only.

mod decode;
mod sink;
pub mod ui;

pub use decode::{SseDecodeError, SseDecoder, SseFrame};
pub use sink::{Disconnected, EventSink, SinkStats, SseBody, Tee, WireFormat, CHANNEL_FRAMES};

use crate::ids::{SessionId, TurnId};
use crate::message::{ToolCall, Usage};
use crate::session::SessionView;
use bytes::Bytes;
use serde::{Deserialize, Serialize};

/// What the agent is doing, for the UI's status line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AgentActivity {
    Thinking,
    Executing,
    WaitingOnUser,
}

/// How a turn ended, carried by `done`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum DoneReason {
    /// The model finished its answer.
    Complete,
    /// Something failed; an `error` event came just before.
    Error,
    /// The user pressed Stop (or the client went away).
    Stopped,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum OperationAction {
    List,
    Search,
    Read,
    Create,
    Update,
    Delete,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum OperationStatus {
    Start,
    Success,
    Error,
}

/// The budget the context builder worked with and what it kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ContextUsage {
    /// The request in the model's tokens, tool definitions included, as
    /// calibrated by its earlier reports (`context::TokenCalibration`).
    pub tokens_used: u64,
    /// `CONTEXT_MAX_TOKENS`.
    pub token_budget: u64,
    /// Log messages sent, the current one included.
    pub messages_kept: u32,
    /// Log messages left out for the budgets (not those the summary covers).
    pub messages_dropped: u32,
    pub summary_used: bool,
    /// Whether the context pack came from the prewarm cache; absent when the
    /// scope has no cacheable pack (global, or no ontology).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<CacheStatus>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum CacheStatus {
    Hit,
    Miss,
}

/// Where a turn looks: its scope, entity and the client's focus metadata.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Focus {
    pub context_type: crate::session::ContextType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entity_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub focus: Option<serde_json::Value>,
}

impl Focus {
    pub fn of(s: &SessionView) -> Focus {
        Focus { context_type: s.context_type, entity_id: s.entity_id.clone(), focus: s.focus.clone() }
    }
}

/// Every event a turn sends. `type` is the tag on the wire.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StreamEvent {
    /// Always first, before any I/O.
    AgentState {
        state: AgentActivity,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        details: Option<String>,
    },
    /// The authoritative session, once resolved or created.
    Session {
        session: SessionView,
    },
    /// This turn's focus differs from the one stored on the session (sent
    /// right after `session`; the session now holds `current`).
    FocusChanged {
        previous: Focus,
        current: Focus,
    },
    TextDelta {
        content: String,
    },
    ToolCall {
        tool_call: ToolCall,
    },
    ToolResult {
        tool_call_id: String,
        name: String,
        ok: bool,
        /// A bounded preview of the result, not the whole output.
        preview: String,
    },
    /// A human-readable step (AGENTIC_CHAT_V2_SPEC §6.4): names, not raw ids.
    Operation {
        action: OperationAction,
        entity_type: String,
        entity_name: String,
        status: OperationStatus,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        entity_id: Option<String>,
    },
    /// The backend's truth after a write; the client applies it as is. The
    /// same [`crate::entities::EntityPatch`] the entities API returns.
    EntityPatch {
        patch: crate::entities::EntityPatch,
    },
    ContextUsage(ContextUsage),
    /// Something failed; `done` follows.
    Error {
        code: String,
        message: String,
        /// True when sending the same request again may succeed.
        retryable: bool,
    },
    /// Always last.
    Done {
        reason: DoneReason,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        session_id: Option<SessionId>,
        turn_id: TurnId,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Usage>,
        /// This request repeated a `stream_run_id`: what came before `done`
        /// is that turn's stream (or stored outcome), replayed or followed,
        /// and `turn_id` is that turn's. Absent (false) on a turn that ran.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        replayed: bool,
    },
}

impl StreamEvent {
    /// The `type` tag, as it appears on the wire.
    pub fn kind(&self) -> &'static str {
        match self {
            StreamEvent::AgentState { .. } => "agent_state",
            StreamEvent::Session { .. } => "session",
            StreamEvent::FocusChanged { .. } => "focus_changed",
            StreamEvent::TextDelta { .. } => "text_delta",
            StreamEvent::ToolCall { .. } => "tool_call",
            StreamEvent::ToolResult { .. } => "tool_result",
            StreamEvent::Operation { .. } => "operation",
            StreamEvent::EntityPatch { .. } => "entity_patch",
            StreamEvent::ContextUsage(_) => "context_usage",
            StreamEvent::Error { .. } => "error",
            StreamEvent::Done { .. } => "done",
        }
    }

    pub fn error(code: impl Into<String>, message: impl Into<String>, retryable: bool) -> Self {
        StreamEvent::Error { code: code.into(), message: message.into(), retryable }
    }
}

/// The one SSE encoder. One per turn: it owns the turn's frame counter.
#[derive(Debug, Default)]
pub struct SseEncoder {
    last_id: u64,
}

impl SseEncoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Encodes one event as one frame, numbering it.
    pub fn encode(&mut self, event: &StreamEvent) -> Bytes {
        self.last_id += 1;
        encode_frame(self.last_id, event)
    }

    /// The id of the last frame encoded.
    pub fn last_id(&self) -> u64 {
        self.last_id
    }
}

/// One event as the frame numbered `id`: the one spelling of a frame, for
/// the live stream ([`SseEncoder`]) and for a replay of stored frames
/// ([`crate::frames`]), so that both are byte-identical.
pub fn encode_frame(id: u64, event: &StreamEvent) -> Bytes {
    // serde_json escapes control characters, so the JSON is one line and no
    // payload can forge a frame boundary.
    let json = serde_json::to_string(event).expect("events always serialize");
    let kind = event.kind();
    let mut out = String::with_capacity(json.len() + kind.len() + 32);
    out.push_str("id: ");
    out.push_str(itoa(id).as_str());
    out.push_str("\nevent: ");
    out.push_str(kind);
    out.push_str("\ndata: ");
    out.push_str(&json);
    out.push_str("\n\n");
    Bytes::from(out)
}

fn itoa(n: u64) -> String {
    n.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_numbered_and_round_trip() {
        let mut enc = SseEncoder::new();
        let events = vec![
            StreamEvent::AgentState { state: AgentActivity::Thinking, details: None },
            StreamEvent::TextDelta { content: "line one\nline two\r\n\ndata: fake".into() },
            StreamEvent::error("llm_timeout", "slow", true),
        ];
        let mut wire = Vec::new();
        for e in &events {
            wire.extend_from_slice(&enc.encode(e));
        }
        let mut dec = SseDecoder::new();
        let frames = dec.feed(&wire).unwrap();
        assert_eq!(frames.len(), 3);
        for (i, (f, e)) in frames.iter().zip(&events).enumerate() {
            assert_eq!(f.id.as_deref(), Some((i + 1).to_string().as_str()));
            assert_eq!(f.event.as_deref(), Some(e.kind()));
            let back: StreamEvent = serde_json::from_str(&f.data).unwrap();
            assert_eq!(&back, e);
        }
    }

    #[test]
    fn wire_shape_of_text_delta() {
        let mut enc = SseEncoder::new();
        let b = enc.encode(&StreamEvent::TextDelta { content: "hi".into() });
        assert_eq!(&b[..], b"id: 1\nevent: text_delta\ndata: {\"type\":\"text_delta\",\"content\":\"hi\"}\n\n");
    }
}
