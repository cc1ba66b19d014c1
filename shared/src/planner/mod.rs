//! Plan execution as a tool layer ([`PlanLayer`]): the plan tools the planner
//! model calls (docs/plans.md) — create (validate, store, review), decide
//! (approve, reject, continue), and execute: stages in
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
//!   and leaves the rest pending: the plan stays `running` (resumable);
//! - an executor's calls wait for the user's yes as the turn's own do (the
//!   same [`ApprovalGate`], so the same policy), and only calls of the
//!   step's own tools: the step ends `waiting_for_approval` keeping its
//!   executor's messages, the plan pauses after that stage, and the plan
//!   call hands the waiting calls to the turn's loop ([`StreamedRun::waiting`]),
//!   which ends the turn with them waiting in the session's log. The answer
//!   stores each call's result there ([`crate::approval`]) and here
//!   ([`answered`]); the step then goes on from its executor's messages
//!   with those results, and the plan from that step.

mod create;
mod decide;
mod stage;
mod step;
#[cfg(test)]
mod tests;

use crate::ids::{SessionId, TurnId, UserId};
use crate::message::{ChatMessage, PendingApproval, PlanStepRef, Role, ToolCall, Usage};
use crate::model_loop::{ApprovalGate, LoopRunner, StreamCx, StreamedRun, ToolRun, TurnScope, TurnTools};
use crate::plan::store::PlanStore;
use crate::plan::{PlanRecord, PlanStatus, StepCall, StepStatus, StepTool};
use crate::store::StoreError;
use crate::tools::plan::{is_plan_tool, plan_definitions, AGENT_CREATE_PLAN};
use crate::tools::{ToolName, ToolScope};
use std::sync::Mutex;

/// The plan tools, as a layer of the turn's tools.
pub struct PlanLayer<'a> {
    /// Where plan records go.
    pub store: &'a dyn PlanStore,
    /// Which executor calls wait for the user's yes: the turn's own gate;
    /// `None`: none waits.
    pub approvals: Option<&'a dyn ApprovalGate>,
    /// The tools steps work with (each step gets only those it names).
    pub tools: &'a dyn TurnTools,
    /// Executors of one parallel stage running at once (at least 1).
    pub step_concurrency: usize,
    /// Model → tools rounds of one executor.
    pub step_max_rounds: usize,
}

/// The plan tools' definitions in `scope`: plans work in a project, where
/// their steps have its tools; a step names them from `offered`, the
/// definitions offered beside the plan tools (the ontology's and the web's;
/// not `read_tool_output`, which is no step tool). Not in a brain dump: its
/// changes go as one batch for the user's review (`propose_entities`), and
/// offered a plan the local model planned "research flyer options" steps
/// that visited made-up sites instead of proposing the tasks.
pub fn definitions(scope: &TurnScope, offered: &[serde_json::Value]) -> Vec<serde_json::Value> {
    if scope.context_type == crate::session::ContextType::BrainDump {
        return vec![];
    }
    match tool_scope(scope) {
        ToolScope::Project { .. } => {
            let names: Vec<&str> = offered
                .iter()
                .filter_map(|d| d["function"]["name"].as_str())
                .filter(|n| ToolName::parse(n).is_some())
                .collect();
            plan_definitions(&names)
        }
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
        definitions(scope, &self.tools.offered(scope))
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
        let waiting = Mutex::new(Vec::new());
        let env = Env {
            layer: self,
            runner: cx.runner,
            user: cx.user,
            sid: cx.sid,
            turn_id: cx.turn_id,
            scope: cx.scope,
            spent: &spent,
            waiting: &waiting,
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
        let (usage, waiting) = (spent.into_inner().unwrap_or_default(), waiting.into_inner().unwrap_or_default());
        StreamedRun { run, interrupted, usage, waiting }
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
    /// Executor calls that wait for the user's yes (the plan paused).
    waiting: &'a Mutex<Vec<(ToolCall, PendingApproval)>>,
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

/// The user's answer to one plan step's waiting call, as the answering turn
/// stored it in the session's log.
#[derive(Debug, Clone)]
pub struct StepAnswer {
    pub step: PlanStepRef,
    pub tool_call_id: String,
    /// The call's result: the approved call's own, or why it did not run.
    pub content: String,
    /// Whether it ran (approved), and its `ok`.
    pub ran: Option<bool>,
}

/// Records the answers to plan steps' waiting calls: each result joins its
/// step's executor messages (an approved call that ran also joins the
/// step's calls); a step with no call left waiting is `pending` again (its
/// next attempt goes on from those messages), and a plan with no step left
/// waiting is `running`. The plans that can go on now.
pub async fn answered(
    store: &dyn PlanStore,
    user: &UserId,
    sid: &SessionId,
    answers: &[StepAnswer],
) -> Result<Vec<String>, StoreError> {
    let mut plans: Vec<&str> = answers.iter().map(|a| a.step.plan_id.as_str()).collect();
    plans.dedup();
    let mut ready = Vec::new();
    for plan_id in plans {
        let Some((mut rec, version)) = store.load(user, sid, plan_id).await? else { continue };
        if rec.status != PlanStatus::WaitingForApproval {
            continue;
        }
        for a in answers.iter().filter(|a| a.step.plan_id == plan_id) {
            record_answer(&mut rec, a);
        }
        if rec.steps.iter().all(|s| s.status != StepStatus::WaitingForApproval) {
            rec.status = PlanStatus::Running;
            ready.push(rec.id.clone());
        }
        rec.updated_at = crate::now_ms();
        store.save(user, sid, &rec, version).await?;
    }
    Ok(ready)
}

fn record_answer(rec: &mut PlanRecord, a: &StepAnswer) {
    let Some(step) = rec.steps.iter_mut().find(|s| s.step_id == a.step.step_id) else { return };
    let Some(i) = step.waiting.iter().position(|w| w.tool_call.id == a.tool_call_id) else { return };
    let call = step.waiting.remove(i).tool_call;
    step.resume.push(ChatMessage {
        role: Role::Tool,
        content: Some(a.content.clone()),
        tool_calls: vec![],
        tool_call_id: Some(call.id.clone()),
    });
    if let Some(ok) = a.ran {
        step.calls.push(StepCall { tool_call: call, ok, result: a.content.clone() });
    }
    if step.waiting.is_empty() && step.status == StepStatus::WaitingForApproval {
        step.status = StepStatus::Pending;
    }
}
