//! Tools as the loop sees them: the [`TurnTools`] layer trait, what one call
//! produced ([`ToolRun`]), and [`Layers`], a stack of layers composed into one.
//!
//! Contract:
//! - a layer offers definitions for a scope and runs calls; failures are
//!   results the model reads, never errors of the loop;
//! - a layer may run some of its calls *with the stream*
//!   ([`TurnTools::streams`]): the loop runs those after the round's other
//!   calls, one at a time, handing each the sink and a [`LoopRunner`] for the
//!   nested loops it needs (a plan's steps, [`crate::planner`]); what such a
//!   call sends comes before its `tool_result`, and it may report what cut
//!   the turn off while it ran;
//! - in [`Layers`], a call goes to the first layer that [`TurnTools::handles`]
//!   it: the specific layers first, a catch-all registry last.

use super::{LoopRunner, Outcome};
use crate::ids::{SessionId, TurnId, UserId};
use crate::message::{ToolCall, Usage};
use crate::session::ContextType;
use crate::sse::{EventSink, StreamEvent};

/// Where a turn runs, as tools see it.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnScope {
    pub context_type: ContextType,
    pub entity_id: Option<String>,
    /// The client's focus metadata (`projectFocus`), e.g. `{"projectId": "…"}`.
    pub focus: Option<serde_json::Value>,
    /// The zone the request named: the calendar tools read local times in
    /// it (else the user's stored zone).
    pub timezone: Option<crate::calendar::Zone>,
}

/// What one tool call produced.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolRun {
    pub ok: bool,
    /// The whole result, as the tool message's content (what the model reads).
    pub content: String,
    /// A bounded preview for the `tool_result` event.
    pub preview: String,
    /// `operation` and `entity_patch` events, in the order they happened.
    pub events: Vec<StreamEvent>,
}

impl ToolRun {
    pub fn failed(why: &str) -> ToolRun {
        ToolRun {
            ok: false,
            content: serde_json::json!({"ok": false, "error": why}).to_string(),
            preview: why.to_string(),
            events: vec![],
        }
    }
}

/// What a call run with the stream is handed: who and where, the client's
/// sink (its events go straight out), and a runner for nested loops.
pub struct StreamCx<'a> {
    pub user: &'a UserId,
    pub sid: &'a SessionId,
    pub turn_id: &'a TurnId,
    pub scope: &'a TurnScope,
    pub runner: &'a dyn LoopRunner,
    pub sink: &'a mut EventSink,
}

/// How a call run with the stream ended: its result, what cut the turn off
/// while it ran (no later call of the round starts then), and what its nested
/// loops used of the model (added to the turn's usage).
#[derive(Debug)]
pub struct StreamedRun {
    pub run: ToolRun,
    pub interrupted: Option<Outcome>,
    pub usage: Usage,
    /// Calls its nested loops made that wait for the user's yes (signed
    /// like the turn's own): the turn ends with them waiting, after this
    /// call's result.
    pub waiting: Vec<(ToolCall, crate::message::PendingApproval)>,
}

/// A layer of tools: the set offered in a scope, and running a call (a call
/// outside the offered set still runs when the scope allows it).
#[async_trait::async_trait]
pub trait TurnTools: Send + Sync {
    /// OpenAI `tools` entries for this scope.
    fn offered(&self, scope: &TurnScope) -> Vec<serde_json::Value>;
    async fn run(&self, user: &UserId, scope: &TurnScope, call: &ToolCall) -> ToolRun;

    /// Asked after each tool round: `Some(answer)` when a call of this turn
    /// asked the user something (`ask_clarifying_questions`); the loop then
    /// ends the turn with that answer instead of asking the model again.
    /// Only a turn's watch ([`super::call_signals::Watched`]) knows; default never.
    fn asked_user(&self) -> Option<String> {
        None
    }

    /// How many calls of the tool `name` one turn may make (a cost or rate
    /// cap, e.g. web searches); the turn's [`super::call_signals::Watched`]
    /// answers calls past it with an error result. Default: no cap.
    fn per_turn_cap(&self, _name: &str) -> Option<usize> {
        None
    }

    /// Whether this layer runs the tool `name` (in [`Layers`], the first
    /// layer that does gets the call). Default: every name — a registry
    /// answers an unknown one with an error result.
    fn handles(&self, _name: &str) -> bool {
        true
    }

    /// Whether `call` runs with the stream ([`TurnTools::run_streamed`])
    /// rather than beside the round's other calls. Default: never.
    fn streams(&self, _call: &ToolCall) -> bool {
        false
    }

    /// Runs a call [`TurnTools::streams`] claimed. Default: as any call.
    async fn run_streamed(&self, call: &ToolCall, cx: StreamCx<'_>) -> StreamedRun {
        let run = self.run(cx.user, cx.scope, call).await;
        StreamedRun { run, interrupted: None, usage: Usage::default(), waiting: vec![] }
    }
}

/// Layers composed into one: a call goes to the first layer that handles it;
/// the offer is every layer's, in order; the first question asked wins.
pub struct Layers<'a>(Vec<&'a dyn TurnTools>);

impl<'a> Layers<'a> {
    /// `layers`, most specific first.
    pub fn new(layers: Vec<&'a dyn TurnTools>) -> Layers<'a> {
        Layers(layers)
    }

    fn layer(&self, name: &str) -> Option<&'a dyn TurnTools> {
        self.0.iter().copied().find(|l| l.handles(name))
    }
}

#[async_trait::async_trait]
impl TurnTools for Layers<'_> {
    fn offered(&self, scope: &TurnScope) -> Vec<serde_json::Value> {
        self.0.iter().flat_map(|l| l.offered(scope)).collect()
    }

    async fn run(&self, user: &UserId, scope: &TurnScope, call: &ToolCall) -> ToolRun {
        match self.layer(&call.function.name) {
            Some(l) => l.run(user, scope, call).await,
            None => ToolRun::failed(&format!("there is no tool named {:?}", call.function.name)),
        }
    }

    fn asked_user(&self) -> Option<String> {
        self.0.iter().find_map(|l| l.asked_user())
    }

    fn handles(&self, name: &str) -> bool {
        self.layer(name).is_some()
    }

    fn per_turn_cap(&self, name: &str) -> Option<usize> {
        self.layer(name).and_then(|l| l.per_turn_cap(name))
    }

    fn streams(&self, call: &ToolCall) -> bool {
        self.layer(&call.function.name).is_some_and(|l| l.streams(call))
    }

    async fn run_streamed(&self, call: &ToolCall, cx: StreamCx<'_>) -> StreamedRun {
        match self.layer(&call.function.name) {
            Some(l) => l.run_streamed(call, cx).await,
            None => StreamedRun {
                run: ToolRun::failed(&format!("there is no tool named {:?}", call.function.name)),
                interrupted: None,
                usage: Usage::default(),
                waiting: vec![],
            },
        }
    }
}
