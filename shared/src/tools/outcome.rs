//! What a tool call produces: a handler's [`Done`] (its result, the steps it
//! took, its patches and turn events) or a [`Refusal`], folded by
//! [`outcome`] into the [`ToolOutcome`] the turn logs and streams. Every
//! failure reads the same way: `{"error": {"code", "message"}}`, with store
//! details kept for the logs.

use super::wording;
use crate::calendar::CalendarError;
use crate::entities::{EntityError, EntityPatch};
use crate::sse::{OperationAction, OperationStatus, StreamEvent};
use serde_json::{json, Value};

/// The most characters of a result shown in `tool_result` and the UI.
pub const PREVIEW_CHARS: usize = 400;

/// The result of one tool call, ready for the log and the stream.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutcome {
    pub ok: bool,
    /// The full result (or `{"error": {"code", "message"}}`) as JSON text:
    /// the `role=tool` message's content.
    pub content: String,
    /// At most [`PREVIEW_CHARS`] characters of `content`, for `tool_result`.
    pub preview: String,
    /// The machine code of a failure (`invalid_arguments`, `unknown_tool`,
    /// `out_of_scope`, or an [`EntityError::code`]).
    pub error_code: Option<String>,
    /// `StreamEvent::Operation`s, in order: start, then success or error.
    pub operations: Vec<StreamEvent>,
    /// What the service's writes returned, in order, unchanged.
    pub patches: Vec<EntityPatch>,
    /// Events after the patches: about the turn itself (`clarifying_questions`
    /// from `ask_clarifying_questions`, `context_shift` from
    /// `create_onto_project`), and the steps that carry a sentence (the
    /// calendar's and the web tools' `operation`s, with their `summary`).
    pub turn_events: Vec<StreamEvent>,
}

impl ToolOutcome {
    /// The stream events of this call, in order: the operation's start and
    /// end, then each `entity_patch`, then the turn events (`tool_call`
    /// before and `tool_result` after are the caller's).
    pub fn events(&self) -> Vec<StreamEvent> {
        let patches = self.patches.iter().map(|p| StreamEvent::EntityPatch { patch: p.clone() });
        self.operations.iter().cloned().chain(patches).chain(self.turn_events.iter().cloned()).collect()
    }
}

/// A step in human terms, before its status is known.
#[derive(Debug, Clone)]
pub struct Op {
    pub action: OperationAction,
    pub entity_type: &'static str,
    pub name: String,
    pub id: Option<String>,
}

impl Op {
    fn event(&self, status: OperationStatus) -> StreamEvent {
        self.said(status, None)
    }

    fn said(&self, status: OperationStatus, summary: Option<String>) -> StreamEvent {
        StreamEvent::Operation {
            action: self.action,
            entity_type: self.entity_type.to_string(),
            entity_name: self.name.clone(),
            status,
            entity_id: self.id.clone(),
            summary,
        }
    }

    /// Its start and end: a listing that succeeded says what it found
    /// ([`wording::listing`]), the rest name their entity.
    fn events(&self, ok: bool, result: Option<&Value>) -> [StreamEvent; 2] {
        let listed = match (self.action, result) {
            (OperationAction::List, Some(r)) if ok => wording::listing(&self.name, r),
            _ => None,
        };
        let end = if ok { OperationStatus::Success } else { OperationStatus::Error };
        match listed {
            Some((start, done)) => [self.said(OperationStatus::Start, Some(start)), self.said(end, Some(done))],
            None => [self.event(OperationStatus::Start), self.event(end)],
        }
    }
}

/// Why a call did not reach (or was refused by) the service.
#[derive(Debug)]
pub enum Refusal {
    /// The arguments are not what the tool takes: `invalid_arguments`.
    Args(String),
    Entity(EntityError),
    /// A calendar operation refused, and the step it was (shown as failed).
    Calendar(CalendarError, Option<Op>),
    /// A page not read or a search not answered, with the step's events
    /// (start, then error).
    Web(crate::web::WebError, Vec<StreamEvent>),
}

impl From<EntityError> for Refusal {
    fn from(e: EntityError) -> Self {
        Refusal::Entity(e)
    }
}

/// What a handler did: its result, the steps it took (each with whether it
/// succeeded; a compound create takes several), the patches, and the events
/// about the turn a success sends.
#[derive(Debug)]
pub struct Done {
    pub result: Result<Value, EntityError>,
    pub ops: Vec<(Op, bool)>,
    pub patches: Vec<EntityPatch>,
    pub turn_events: Vec<StreamEvent>,
}

impl Done {
    /// A read: one step, no patch.
    pub fn read(result: Result<Value, EntityError>, op: Op) -> Self {
        let ok = result.is_ok();
        Done { result, ops: vec![(op, ok)], patches: vec![], turn_events: vec![] }
    }

    /// A result that is not an entity operation (no step, no patch).
    pub fn quiet(result: Result<Value, EntityError>) -> Self {
        Done { result, ops: vec![], patches: vec![], turn_events: vec![] }
    }
}

pub fn preview(content: &str) -> String {
    if content.chars().count() <= PREVIEW_CHARS {
        return content.to_string();
    }
    let mut p: String = content.chars().take(PREVIEW_CHARS - 1).collect();
    p.push('…');
    p
}

pub fn failure(code: &str, message: &str) -> ToolOutcome {
    let content = json!({ "error": { "code": code, "message": message } }).to_string();
    ToolOutcome {
        ok: false,
        preview: preview(&content),
        content,
        error_code: Some(code.to_string()),
        operations: vec![],
        patches: vec![],
        turn_events: vec![],
    }
}

/// What the model is told about a refused operation. Store failures say no
/// more than "unavailable": their details are for logs, not prompts.
pub fn entity_failure(e: &EntityError) -> (String, String) {
    let message = match e {
        EntityError::Store(_) => "the ontology store is unavailable right now; try again later".to_string(),
        e => e.to_string(),
    };
    (e.code().to_string(), message)
}

/// A refused calendar operation: its step failed, and the model reads why
/// (store and server details stay in the logs).
fn calendar_failure(e: &CalendarError, op: Option<Op>) -> ToolOutcome {
    let message = match e {
        CalendarError::Store(_) => "the calendar store is unavailable right now; try again later".to_string(),
        e => e.to_string(),
    };
    if matches!(e, CalendarError::Store(_) | CalendarError::Remote(_)) {
        tracing::error!(error = %e, "calendar tool call failed");
    }
    let mut out = failure(e.code(), &message);
    out.operations =
        op.map(|op| vec![op.event(OperationStatus::Start), op.event(OperationStatus::Error)]).unwrap_or_default();
    out
}

/// The outcome of a call to `tool` that ran (or was refused): a refusal of
/// the arguments is `invalid_arguments` prefixed with the tool's name; a
/// handler's steps become start and end operations whatever its result.
pub fn outcome(tool: &str, run: Result<Done, Refusal>) -> ToolOutcome {
    let done = match run {
        Ok(done) => done,
        Err(Refusal::Args(m)) => return failure("invalid_arguments", &format!("{tool}: {m}")),
        Err(Refusal::Entity(e)) => {
            let (code, message) = entity_failure(&e);
            return failure(&code, &message);
        }
        Err(Refusal::Calendar(e, op)) => return calendar_failure(&e, op),
        Err(Refusal::Web(e, events)) => {
            let mut out = failure(e.code(), &e.to_string());
            out.turn_events = events;
            return out;
        }
    };
    let mut outcome = match &done.result {
        Ok(v) => {
            let content = v.to_string();
            ToolOutcome {
                ok: true,
                preview: preview(&content),
                content,
                error_code: None,
                operations: vec![],
                patches: vec![],
                turn_events: done.turn_events,
            }
        }
        Err(e) => {
            if matches!(e, EntityError::Store(_)) {
                tracing::error!(tool, error = %e, "tool call failed in the store");
            }
            let (code, message) = entity_failure(e);
            failure(&code, &message)
        }
    };
    let result = done.result.as_ref().ok();
    outcome.operations = done.ops.iter().flat_map(|(op, ok)| op.events(*ok, result)).collect();
    outcome.patches = done.patches;
    outcome
}
