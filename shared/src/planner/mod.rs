//! Plan execution as a tool layer ([`PlanLayer`]): the plan tools the planner
//! model calls (docs/plans.md) — create (validate, store, review), decide
//! (approve, reject, confirm, cancel, continue), and execute: stages in
//! order, a parallel stage's steps at once under `PLAN_STEP_CONCURRENCY`,
//! each step an executor — a nested model loop run by the [`LoopRunner`] the
//! loop hands the layer, with a scoped context (the step and its inputs'
//! results, not the conversation), the step's tools only and
//! `PLAN_STEP_MAX_ROUNDS`. What a plan *is* (types, validation, its record)
//! lives in [`crate::plan`]; the loop itself knows nothing of plans.
//!
//! Contract (besides the one in [`crate::plan`]):
//! - plan calls run with the stream ([`TurnTools::streams`]): after the
//!   round's other calls, one at a time, their events before their result;
//! - events go out in this order per step: `step_start`, `executor_spawned`,
//!   the executor's tool events (origin `plan_step`), `executor_result`,
//!   `step_complete`; executors' words never reach the answer (the planner
//!   reads the plan tool's result and answers);
//! - executors' rounds go to the plan record, never to the session's log;
//!   a step's status is saved before its `step_complete` is sent;
//! - an interrupted turn (Stop, client gone, deadline, lease lost) starts no
//!   new step, lets running ones end as their loops do, keeps finished ones
//!   and leaves the rest pending: the plan stays `running` (resumable).

mod create;
mod decide;
mod stage;
mod step;
#[cfg(test)]
mod tests;

use crate::entities::EntityService;
use crate::ids::{SessionId, TurnId, UserId};
use crate::message::{ToolCall, Usage};
use crate::model_loop::{LoopRunner, StreamCx, StreamedRun, ToolRun, TurnScope, TurnTools};
use crate::plan::store::PlanStore;
use crate::plan::{PlanRecord, PlanStatus, StepTool};
use crate::store::StoreError;
use crate::tools::plan::{is_plan_tool, plan_definitions, AGENT_CREATE_PLAN};
use crate::tools::{ToolName, ToolScope};
use std::sync::Mutex;

pub use step::BULK_UPDATE_CALLS;

/// The plan tools, as a layer of the turn's tools.
pub struct PlanLayer<'a> {
    /// Where plan records go.
    pub store: &'a dyn PlanStore,
    /// Names for the changes a plan holds for confirmation; `None`: ids only.
    pub entities: Option<&'a EntityService>,
    /// The tools steps work with (each step gets only those it names).
    pub tools: &'a dyn TurnTools,
    /// Executors of one parallel stage running at once (at least 1).
    pub step_concurrency: usize,
    /// Model → tools rounds of one executor.
    pub step_max_rounds: usize,
}

/// The plan tools' definitions in `scope`: plans work in a project, where
/// their steps have its tools.
pub fn definitions(scope: &TurnScope) -> Vec<serde_json::Value> {
    match tool_scope(scope) {
        ToolScope::Project { .. } => plan_definitions(),
        _ => vec![],
    }
}

fn tool_scope(scope: &TurnScope) -> ToolScope {
    ToolScope::from_focus(scope.context_type, scope.entity_id.as_deref(), scope.focus.as_ref())
}

/// Whether a step may be given the tool `name` in `scope` (the gate of
/// [`ToolScope::allows`]; plan tools are no [`ToolName`], so never).
pub fn step_tool_in(scope: &ToolScope) -> impl Fn(&str) -> StepTool + '_ {
    |name| match ToolName::parse(name) {
        Some(tool) if scope.allows(tool) => StepTool::Allowed,
        Some(_) => StepTool::NotInScope,
        None => StepTool::Unknown,
    }
}

#[async_trait::async_trait]
impl TurnTools for PlanLayer<'_> {
    fn offered(&self, scope: &TurnScope) -> Vec<serde_json::Value> {
        definitions(scope)
    }

    /// Plan calls need the stream; run without it, they say so.
    async fn run(&self, _: &UserId, _: &TurnScope, _: &ToolCall) -> ToolRun {
        ToolRun::failed("plans are not available here")
    }

    fn handles(&self, name: &str) -> bool {
        is_plan_tool(name)
    }

    fn streams(&self, call: &ToolCall) -> bool {
        is_plan_tool(&call.function.name)
    }

    async fn run_streamed(&self, call: &ToolCall, cx: StreamCx<'_>) -> StreamedRun {
        let spent = Mutex::new(Usage::default());
        let env = Env {
            layer: self,
            runner: cx.runner,
            user: cx.user,
            sid: cx.sid,
            turn_id: cx.turn_id,
            scope: cx.scope,
            spent: &spent,
        };
        let ran = if call.function.name == AGENT_CREATE_PLAN {
            create::create(&env, call, cx.sink).await
        } else {
            decide::decide(&env, call, cx.sink).await
        };
        let (run, interrupted) = ran.unwrap_or_else(|e| {
            tracing::error!(code = e.code(), error = %e, "plan not stored");
            (failure("store_unavailable", &format!("the plan could not be saved: {e}")), None)
        });
        StreamedRun { run, interrupted, usage: spent.into_inner().unwrap_or_default() }
    }
}

/// What one plan call runs on.
#[derive(Clone, Copy)]
struct Env<'a> {
    layer: &'a PlanLayer<'a>,
    runner: &'a dyn LoopRunner,
    user: &'a UserId,
    sid: &'a SessionId,
    turn_id: &'a TurnId,
    scope: &'a TurnScope,
    /// What the executors' model requests used, for the turn's usage.
    spent: &'a Mutex<Usage>,
}

impl Env<'_> {
    fn tool_scope(&self) -> ToolScope {
        tool_scope(self.scope)
    }
}

/// A plan call's result, and what cut the turn off while it ran.
type Ran = Result<(ToolRun, Option<crate::model_loop::Outcome>), StoreError>;

fn failure(code: &str, message: &str) -> ToolRun {
    let content = serde_json::json!({"error": {"code": code, "message": message}}).to_string();
    ToolRun { ok: false, preview: message.chars().take(400).collect(), content, events: vec![] }
}

/// A status as the wire spells it (`awaiting_approval`, ...).
fn status_name(status: PlanStatus) -> String {
    serde_json::to_value(status).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
}

/// The plan tool's result: the record, and what the planner should do next.
fn answer(rec: &PlanRecord, next: &str) -> ToolRun {
    let mut v = rec.result();
    v["next"] = serde_json::Value::String(next.into());
    let ok = !matches!(rec.status, PlanStatus::Failed);
    let preview = format!("plan {}: {}", serde_json::to_value(rec.status).unwrap_or_default(), rec.plan.goal);
    ToolRun { ok, content: v.to_string(), preview: preview.chars().take(400).collect(), events: vec![] }
}

/// A stored plan and its version, saved through one place.
struct Book<'a> {
    env: &'a Env<'a>,
    rec: PlanRecord,
    version: u64,
}

impl Book<'_> {
    async fn save(&mut self) -> Result<(), StoreError> {
        self.rec.updated_at = crate::now_ms();
        let env = self.env;
        self.version = env.layer.store.save(env.user, env.sid, &self.rec, self.version).await?;
        Ok(())
    }
}
