//! The SSE event contract: every event a turn can send, one serde-tagged enum,
//! the native encoder, the decoder and the sink a turn writes to. The wire
//! format, with examples, is in `docs/events.md`.
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
//!
//! Another protocol spells the same events its own way by implementing
//! [`FrameEncoder`] above this module (the AI SDK's UI message stream is
//! `chat::ui_stream`); the route that knows its client picks the encoder.

mod decode;
mod sink;

pub use decode::{SseDecodeError, SseDecoder, SseFrame};
pub use sink::{Disconnected, EventSink, SinkStats, SseBody, Tee, CHANNEL_FRAMES};

use crate::ids::{SessionId, TurnId};
use crate::message::{ToolCall, Usage};
pub use crate::plan::ToolOrigin;
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
    /// The answer was cut off: `cut_off` came just before.
    CutOff,
}

/// Defined with the ontology (a plan's pending change names one too, and
/// plans and stored messages sit below the event contract).
pub use crate::entities::{OperationAction, OperationStatus};

/// The steps of `events` as the live feed settles them: each ended step
/// once, and a start only when nothing ended it (kept with a call's result,
/// so the history reads the same after a reload).
pub fn settled_operations(events: &[StreamEvent]) -> Vec<crate::message::StoredOperation> {
    use crate::message::StoredOperation;
    let ops: Vec<StoredOperation> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Operation { action, entity_type, entity_name, status, entity_id, summary } => {
                Some(StoredOperation {
                    action: *action,
                    entity_type: entity_type.clone(),
                    entity_name: entity_name.clone(),
                    status: *status,
                    entity_id: entity_id.clone(),
                    summary: summary.clone(),
                })
            }
            _ => None,
        })
        .collect();
    let same = |a: &StoredOperation, b: &StoredOperation| {
        (a.action, &a.entity_type, &a.entity_name) == (b.action, &b.entity_type, &b.entity_name)
    };
    ops.iter()
        .enumerate()
        .filter(|(i, op)| {
            op.status != OperationStatus::Start
                || !ops[i + 1..].iter().any(|o| o.status != OperationStatus::Start && same(o, op))
        })
        .map(|(_, op)| op.clone())
        .collect()
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
        /// Who made the call: the planner, or a plan step's executor.
        #[serde(default)]
        origin: ToolOrigin,
    },
    ToolResult {
        tool_call_id: String,
        name: String,
        ok: bool,
        /// A bounded preview of the result, not the whole output.
        preview: String,
        #[serde(default)]
        origin: ToolOrigin,
    },
    /// A human-readable step (AGENTIC_CHAT_V2_SPEC §6.4): names, not raw ids.
    Operation {
        action: OperationAction,
        entity_type: String,
        entity_name: String,
        status: OperationStatus,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        entity_id: Option<String>,
        /// The step in a sentence, where names alone do not say it
        /// ("Moved Design review to Tue 1 Dec 10:00").
        #[serde(default, skip_serializing_if = "Option::is_none")]
        summary: Option<String>,
    },
    /// The calendar's truth after a write: the events created or changed
    /// (whole) and the ids deleted; the client applies it as is.
    CalendarPatch {
        patch: crate::calendar::CalendarPatch,
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
    /// A valid plan was stored (docs/plans.md); its steps are all pending.
    PlanCreated {
        plan_id: String,
        plan: crate::plan::AgentPlan,
    },
    /// A `draft_only` plan waits for the user's next turn (approve, edit, reject).
    PlanReadyForReview {
        plan_id: String,
    },
    /// The reviewer's verdict on an `agent_review` plan, before it runs.
    PlanReview {
        plan_id: String,
        approved: bool,
        reason: String,
    },
    /// A step begins (in plan order within a stage; parallel steps overlap).
    StepStart {
        plan_id: String,
        step_id: String,
        title: String,
    },
    /// The step's executor (a scoped model loop) was started.
    ExecutorSpawned {
        plan_id: String,
        step_id: String,
        executor: crate::plan::ExecutorKind,
        tools: Vec<String>,
    },
    /// The executor ended: its closing words, or why it failed.
    ExecutorResult {
        plan_id: String,
        step_id: String,
        ok: bool,
        summary: String,
    },
    /// The step's status as stored, with what it made.
    StepComplete {
        plan_id: String,
        step_id: String,
        status: crate::plan::StepStatus,
        outputs: crate::plan::StepOutputs,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// A call of this round waits for the user's yes ([`crate::approval`]):
    /// it did not run; the turn ends with it waiting. `summary` is the
    /// operation in human words, `arguments` the stored ones (what an
    /// approval runs). Answered by `POST /sessions/{id}/approvals/{approval_id}`
    /// or, on the UI message stream, by the client's approval response.
    /// A plan step's call (origin `plan_step`) pauses its plan at that step.
    ApprovalRequired {
        approval_id: String,
        tool_call_id: String,
        tool: String,
        summary: String,
        #[schema(value_type = Object)]
        arguments: serde_json::Value,
        /// Ms since the epoch; after it the call counts as denied.
        expires_at: i64,
        /// Who made the call: the planner, or a plan step's executor.
        #[serde(default)]
        origin: ToolOrigin,
    },
    /// The user's answer to a waiting call, at the start of the turn that
    /// continues: an approved call's events and `tool_result` follow; a
    /// denied one's `tool_result` says so ("denied by the user: …").
    ApprovalAnswered {
        approval_id: String,
        tool_call_id: String,
        tool: String,
        approved: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// `project_create`: the request was too vague to create anything; the
    /// model asked these (`ask_clarifying_questions`). Nothing was written;
    /// the questions are also the turn's answer text, and the turn ends.
    ClarifyingQuestions {
        questions: Vec<String>,
    },
    /// A tool moved the conversation to another scope (`create_onto_project`:
    /// to the project it created). The session stores `current` when the
    /// turn ends; later turns that name no `context_type` run there.
    ContextShift {
        current: Focus,
        reason: ShiftReason,
        /// The human name of what the conversation moved to.
        entity_name: String,
    },
    /// The answer's word checked against this turn's write steps
    /// ([`crate::claims`]): it claimed a change no tool
    /// committed, or denied one that committed. `asked_again`: the text
    /// before this event is withdrawn (kept in the log, never sent to the
    /// model again) and the model answers once more; `corrected`: the
    /// answer stands, and these mismatches correct it.
    AnswerCheck {
        verdict: CheckVerdict,
        mismatches: Vec<crate::claims::ClaimMismatch>,
    },
    /// The answer was cut off before its end: by the model's token limit
    /// (`length`) or because it repeated itself (`repetition`). `done`
    /// follows with reason `cut_off`; the stored answer is marked so.
    CutOff {
        reason: crate::message::CutReason,
    },
    /// Dev only (`DEV_EVENTS=1`): a measurement of this turn.
    Telemetry(Telemetry),
    /// Dev only (`DEV_EVENTS=1`): what the context builder kept and dropped.
    DebugContext(DebugContext),
}

/// What the turn did about an answer that did not match its steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum CheckVerdict {
    /// The model is asked once more (its next text is the answer).
    AskedAgain,
    /// The answer stands with these corrections.
    Corrected,
}

/// Why the scope moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ShiftReason {
    ProjectCreated,
}

/// One measurement of a turn (dev only), tagged by `kind`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Telemetry {
    /// The tools offered to the model this turn, by scope.
    ToolSelection { context_type: crate::session::ContextType, scope: String, offered: Vec<String> },
    /// The model called a tool its scope did not offer.
    ToolSelectionMiss { tool: String },
    /// One tool call, from its start to its result.
    ToolExecution { tool: String, tool_call_id: String, duration_ms: u64, ok: bool },
    /// One step of a plan, from its start to its end.
    PlanStep { plan_id: String, step_id: String, duration_ms: u64, ok: bool },
}

/// What the context builder made of this turn's log (dev only). Seqs are the
/// log's message numbers; token counts are ours (`CONTEXT_TOKENIZER`) except
/// `model_total`, the calibrated estimate `context_usage` reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct DebugContext {
    /// Log messages sent, in order, the current one last.
    pub kept: Vec<u64>,
    /// Left out for the budgets or the tool-call protocol.
    pub dropped: Vec<u64>,
    /// Not sent because the summary covers them.
    pub summarized: Vec<u64>,
    pub summary_used: bool,
    /// False when the system prompt, summary and current message alone are over a budget.
    pub within_budget: bool,
    pub chars_used: usize,
    pub tokens: DebugTokens,
    /// The context pack's scope (`global`, `project`, `entity`); absent without a pack.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pack_scope: Option<String>,
}

/// Where the request's tokens go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct DebugTokens {
    /// The whole system prompt, pack and agent state included.
    pub system_prompt: u64,
    /// Of which the context pack's JSON and the agent state block.
    pub pack: u64,
    pub agent_state: u64,
    pub summary: u64,
    /// The kept history before the current message.
    pub history: u64,
    pub current: u64,
    /// The tool definitions offered.
    pub tools: u64,
    /// Messages and tools, as we count them.
    pub counted_total: u64,
    /// The same in the model's tokens, as calibrated (`context_usage.tokens_used`).
    pub model_total: u64,
    /// `CONTEXT_MAX_TOKENS`.
    pub budget: u64,
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
            StreamEvent::CalendarPatch { .. } => "calendar_patch",
            StreamEvent::ContextUsage(_) => "context_usage",
            StreamEvent::Error { .. } => "error",
            StreamEvent::Done { .. } => "done",
            StreamEvent::PlanCreated { .. } => "plan_created",
            StreamEvent::PlanReadyForReview { .. } => "plan_ready_for_review",
            StreamEvent::PlanReview { .. } => "plan_review",
            StreamEvent::StepStart { .. } => "step_start",
            StreamEvent::ExecutorSpawned { .. } => "executor_spawned",
            StreamEvent::ExecutorResult { .. } => "executor_result",
            StreamEvent::StepComplete { .. } => "step_complete",
            StreamEvent::ApprovalRequired { .. } => "approval_required",
            StreamEvent::ApprovalAnswered { .. } => "approval_answered",
            StreamEvent::ClarifyingQuestions { .. } => "clarifying_questions",
            StreamEvent::ContextShift { .. } => "context_shift",
            StreamEvent::AnswerCheck { .. } => "answer_check",
            StreamEvent::CutOff { .. } => "cut_off",
            StreamEvent::Telemetry(_) => "telemetry",
            StreamEvent::DebugContext(_) => "debug_context",
        }
    }

    pub fn error(code: impl Into<String>, message: impl Into<String>, retryable: bool) -> Self {
        StreamEvent::Error { code: code.into(), message: message.into(), retryable }
    }

    /// Whether only a development build's client gets it (`DEV_EVENTS`).
    pub fn dev_only(&self) -> bool {
        matches!(self, StreamEvent::Telemetry(_) | StreamEvent::DebugContext(_))
    }
}

/// How one response spells the turn's events. The [`EventSink`] numbers the
/// frames (the ids the frame log keeps, whatever the format) and hands each
/// event with its id to the response's encoder.
pub trait FrameEncoder: Send + Sync {
    /// The bytes the event numbered `id` becomes on the wire (maybe none).
    fn encode(&mut self, id: u64, event: &StreamEvent) -> Bytes;
}

/// Our native frames ([`encode_frame`]): what the native stream and its
/// replay from the frame log speak.
#[derive(Debug, Default, Clone, Copy)]
pub struct NativeEncoder;

impl FrameEncoder for NativeEncoder {
    fn encode(&mut self, id: u64, event: &StreamEvent) -> Bytes {
        encode_frame(id, event)
    }
}

/// Native frames numbered from 1 by the encoder itself, for a stream no
/// [`EventSink`] writes (tests, the benchmarks).
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
/// the live stream ([`NativeEncoder`]) and for a replay of stored frames
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
    fn wire_shape_of_the_project_and_dev_events() {
        let shift = StreamEvent::ContextShift {
            current: Focus {
                context_type: crate::session::ContextType::Project,
                entity_id: None,
                focus: Some(serde_json::json!({"projectId": "p1"})),
            },
            reason: ShiftReason::ProjectCreated,
            entity_name: "Launch".into(),
        };
        let timing = StreamEvent::Telemetry(Telemetry::ToolExecution {
            tool: "create_task".into(),
            tool_call_id: "c1".into(),
            duration_ms: 12,
            ok: true,
        });
        let json = serde_json::to_value(&timing).unwrap();
        assert_eq!(json["type"], "telemetry");
        assert_eq!(json["kind"], "tool_execution");
        let json = serde_json::to_value(&shift).unwrap();
        assert_eq!(json["current"]["focus"]["projectId"], "p1");
        for e in [shift, timing, StreamEvent::ClarifyingQuestions { questions: vec!["Who is it for?".into()] }] {
            let back: StreamEvent = serde_json::from_value(serde_json::to_value(&e).unwrap()).unwrap();
            assert_eq!(back, e);
        }
    }

    #[test]
    fn wire_shape_of_text_delta() {
        let mut enc = SseEncoder::new();
        let b = enc.encode(&StreamEvent::TextDelta { content: "hi".into() });
        assert_eq!(&b[..], b"id: 1\nevent: text_delta\ndata: {\"type\":\"text_delta\",\"content\":\"hi\"}\n\n");
    }
}
