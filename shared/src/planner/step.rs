//! One plan step's executor: a nested loop (run by the [`LoopRunner`] the
//! loop handed the layer) on the step's brief, with only the step's tools
//! ([`StepTools`]), deletes and bulk updates held for confirmation
//! ([`StepGate`]), its rounds sent to the plan record ([`StepLog`]) and its
//! events read back from its own sink and forwarded (its words dropped).
//!
//! [`LoopRunner`]: crate::model_loop::LoopRunner

use super::stage::FromStep;
use super::{failure, Env};
use crate::entities::EntityKind;
use crate::ids::{EntityId, UserId};
use crate::message::{ChatMessage, Role, StoredMessage, ToolCall, Usage};
use crate::model_loop::telemetry::Telemetry;
use crate::model_loop::{CallGate, LoopEnd, Nested, Outcome, RoundLog, ToolRun, TurnScope, TurnTools};
use crate::plan::{PendingChange, PlanRecord, PlanStep, StepCall, StepOutputs, ToolOrigin};
use crate::sse::{EventSink, OperationAction, OperationStatus, SseDecoder, StreamEvent};
use crate::store::StoreError;
use crate::tools::ToolName;
use std::collections::HashMap;
use std::sync::Mutex;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Update calls in one executor round from which they count as a bulk update
/// (and wait for the user's confirmation).
pub const BULK_UPDATE_CALLS: usize = 3;

/// What one executor did.
pub(super) struct StepEnd {
    pub step_id: String,
    pub summary: String,
    pub outputs: StepOutputs,
    pub calls: Vec<StepCall>,
    pub held: Vec<ToolCall>,
    /// How its loop ended.
    pub outcome: Outcome,
    pub usage: Usage,
}

/// The executor's scoped context: the plan's goal, the step, its inputs'
/// results, and the calls an earlier attempt of it made.
pub(super) fn brief(rec: &PlanRecord, step: &PlanStep) -> Vec<ChatMessage> {
    let system = format!(
        "You are the executor of one step of a plan (plan step {id}). Do exactly this step with the tools you have, \
         then answer in one or two sentences saying what you did and the ids of what you created or changed. \
         Your answer goes to the planner, not the user.",
        id = step.id
    );
    let mut user = format!("Plan goal: {}\nStep {}: {} ({:?})", rec.plan.goal, step.id, step.title, step.intent);
    if !step.outputs.is_empty() {
        user.push_str(&format!("\nExpected outputs: {}", step.outputs.join(", ")));
    }
    for c in &rec.plan.constraints {
        user.push_str(&format!("\nConstraint: {c}"));
    }
    for i in &step.inputs {
        let st = rec.step(i);
        let input = serde_json::json!({"summary": st.summary, "outputs": st.outputs});
        user.push_str(&format!("\nResult of step {i}: {input}"));
    }
    let earlier = &rec.step(&step.id).calls;
    if !earlier.is_empty() {
        user.push_str(
            "\nAn earlier attempt of this step was cut off after these calls, which took effect; do not repeat them:",
        );
        for c in earlier {
            user.push_str(&format!(
                "\n- {}({}) -> {}",
                c.tool_call.function.name, c.tool_call.function.arguments, c.result
            ));
        }
    }
    vec![ChatMessage::system(system), ChatMessage::user(user)]
}

/// One step's executor: a nested loop on the step's context and tools, with
/// its own sink whose events are forwarded (words dropped).
pub(super) async fn run_step(
    env: Env<'_>,
    plan_id: String,
    step: PlanStep,
    messages: Vec<ChatMessage>,
    tx: mpsc::UnboundedSender<FromStep>,
    gone: CancellationToken,
) -> StepEnd {
    let started = std::time::Instant::now();
    let allowed: Vec<ToolName> = step.tools.iter().filter_map(|t| ToolName::parse(t)).collect();
    let offered: Vec<serde_json::Value> = allowed.iter().map(|t| t.definition()).collect();
    let tools = StepTools { inner: env.layer.tools, allowed: allowed.clone() };
    let gate = StepGate { allowed: allowed.clone(), held: Mutex::default() };
    let mut log = StepLog { step_id: step.id.clone(), tx: tx.clone() };
    let (mut esink, body) = EventSink::channel();
    let nested = Nested {
        messages,
        tools: (!allowed.is_empty()).then_some(&tools as &dyn TurnTools),
        offered: &offered,
        max_rounds: env.layer.step_max_rounds,
        origin: ToolOrigin::PlanStep { plan_id: plan_id.clone(), step_id: step.id.clone() },
        gate: Some(&gate),
    };
    let exec = async move { env.runner.run(nested, &mut log, &mut esink).await };
    let (ended, (outputs, oks)) = tokio::join!(exec, forward(body, tx, gone));
    let end = ended.unwrap_or_else(|abort| LoopEnd {
        unsaved: vec![],
        outcome: Outcome::Failed { code: abort.0.code(), message: abort.0.to_string(), retryable: true },
        usage: Default::default(),
    });
    let summary = end.unsaved.iter().rev().find(|m| m.role == Role::Assistant).and_then(|m| m.content.clone());
    let held = gate.held.into_inner().unwrap_or_default();
    // Executors run inside the turn's task (not spawned), so the turn's
    // recorder is in scope here (dev only: DEV_EVENTS).
    let ok = matches!(end.outcome, Outcome::Complete);
    Telemetry::current().plan_step(plan_id, &step.id, started.elapsed(), ok);
    StepEnd {
        step_id: step.id,
        summary: summary.unwrap_or_default(),
        outputs,
        calls: step_calls(&end.unsaved, &oks, &held),
        held,
        outcome: end.outcome,
        usage: end.usage,
    }
}

/// The calls that ran, paired with their results (held ones did not run).
fn step_calls(messages: &[StoredMessage], oks: &HashMap<String, bool>, held: &[ToolCall]) -> Vec<StepCall> {
    let results: HashMap<&str, &str> = messages
        .iter()
        .filter_map(|m| Some((m.tool_call_id.as_deref()?, m.content.as_deref().unwrap_or_default())))
        .collect();
    messages
        .iter()
        .flat_map(|m| &m.tool_calls)
        .filter(|c| oks.contains_key(&c.id) && !held.iter().any(|h| h.id == c.id))
        .map(|c| StepCall {
            tool_call: c.clone(),
            ok: oks[&c.id],
            result: results.get(c.id.as_str()).copied().unwrap_or_default().to_string(),
        })
        .collect()
}

/// Reads an executor's frames back into events and forwards the ones the
/// client sees (tool events and their operations and patches; not its words,
/// its status line or its `error`: the step's end reports those). Returns
/// what the step made and which calls ran (with their `ok`). When the client
/// is gone, stops reading, so the executor sees its sink closed and stops.
async fn forward(
    mut body: crate::sse::SseBody,
    tx: mpsc::UnboundedSender<FromStep>,
    gone: CancellationToken,
) -> (StepOutputs, HashMap<String, bool>) {
    use http_body_util::BodyExt;
    let mut dec = SseDecoder::new();
    let (mut outputs, mut oks) = (StepOutputs::default(), HashMap::new());
    loop {
        let frame = tokio::select! {
            biased;
            _ = gone.cancelled() => break,
            f = body.frame() => f,
        };
        let Some(Ok(frame)) = frame else { break };
        let Ok(data) = frame.into_data() else { continue };
        for f in dec.feed(&data).unwrap_or_default() {
            let Ok(ev) = serde_json::from_str::<StreamEvent>(&f.data) else { continue };
            match &ev {
                StreamEvent::TextDelta { .. } | StreamEvent::AgentState { .. } | StreamEvent::Error { .. } => continue,
                StreamEvent::ToolResult { tool_call_id, ok, .. } => {
                    oks.insert(tool_call_id.clone(), *ok);
                }
                _ => {}
            }
            collect_outputs(std::slice::from_ref(&ev), &mut outputs);
            let _ = tx.send(FromStep::Event(ev));
        }
    }
    (outputs, oks)
}

/// The ids of entities a tool run created or changed, from its operations.
pub(super) fn collect_outputs(events: &[StreamEvent], outputs: &mut StepOutputs) {
    for ev in events {
        if let StreamEvent::Operation {
            action: OperationAction::Create | OperationAction::Update,
            status: OperationStatus::Success,
            entity_type,
            entity_id: Some(id),
            ..
        } = ev
        {
            if !outputs.entity_ids.contains(id) {
                outputs.entity_ids.push(id.clone());
                if entity_type == "document" {
                    outputs.doc_ids.push(id.clone());
                }
            }
        }
    }
}

/// Human names of the changes held back, resolved before anything changes.
pub(super) async fn describe(env: &Env<'_>, held: &[ToolCall]) -> Vec<PendingChange> {
    let mut out = vec![];
    for call in held {
        let args: serde_json::Value = serde_json::from_str(&call.function.arguments).unwrap_or_default();
        let kind = args["kind"].as_str().and_then(EntityKind::parse);
        let id = args["id"].as_str().unwrap_or_default().to_string();
        let action = if call.function.name == ToolName::DeleteEntity.as_str() {
            OperationAction::Delete
        } else {
            OperationAction::Update
        };
        let name = match (env.layer.entities, env.tool_scope().project(), kind, EntityId::parse(&id)) {
            (Some(svc), Some(p), Some(k), Ok(eid)) => {
                svc.get(env.user, p, k, &eid).await.ok().map(|e| e.fields.name().to_string())
            }
            _ => None,
        };
        out.push(PendingChange {
            action,
            entity_type: kind.map_or("entity", |k| k.as_str()).to_string(),
            entity_name: name.unwrap_or_else(|| id.clone()),
            entity_id: id,
        });
    }
    out
}

/// A step's tools: only those the plan gave it, whatever the scope offers.
pub(super) struct StepTools<'a> {
    pub inner: &'a dyn TurnTools,
    pub allowed: Vec<ToolName>,
}

#[async_trait::async_trait]
impl TurnTools for StepTools<'_> {
    fn offered(&self, _: &TurnScope) -> Vec<serde_json::Value> {
        self.allowed.iter().map(|t| t.definition()).collect()
    }

    async fn run(&self, user: &UserId, scope: &TurnScope, call: &ToolCall) -> ToolRun {
        match ToolName::parse(&call.function.name) {
            Some(t) if self.allowed.contains(&t) => self.inner.run(user, scope, call).await,
            _ => failure("tool_not_in_step", &format!("{} is not one of this step's tools", call.function.name)),
        }
    }
}

/// Holds back a step's deletes, and its updates when a round makes
/// [`BULK_UPDATE_CALLS`] or more: they wait for the user's confirmation.
/// Only calls of the step's own tools (others are refused by [`StepTools`],
/// so a confirmation can never run a tool the step was not given).
pub(super) struct StepGate {
    pub allowed: Vec<ToolName>,
    pub held: Mutex<Vec<ToolCall>>,
}

impl CallGate for StepGate {
    fn hold(&self, calls: &[ToolCall]) -> Vec<Option<ToolRun>> {
        let is = |c: &ToolCall, t: ToolName| c.function.name == t.as_str() && self.allowed.contains(&t);
        let bulk = calls.iter().filter(|c| is(c, ToolName::UpdateEntity)).count() >= BULK_UPDATE_CALLS;
        let mut held = self.held.lock().expect("not poisoned");
        calls
            .iter()
            .map(|c| {
                if !(is(c, ToolName::DeleteEntity) || (bulk && is(c, ToolName::UpdateEntity))) {
                    return None;
                }
                held.push(c.clone());
                Some(failure(
                    "needs_confirmation",
                    "held for the user's confirmation; it has not run. Do not retry it: finish this step and say \
                     what waits for confirmation",
                ))
            })
            .collect()
    }
}

/// Where an executor's rounds go: to the plan record, with the step (not to
/// the session's log). Held calls did not run and are not recorded.
struct StepLog {
    step_id: String,
    tx: mpsc::UnboundedSender<FromStep>,
}

#[async_trait::async_trait]
impl RoundLog for StepLog {
    async fn ready(&mut self) -> Result<(), StoreError> {
        Ok(())
    }

    async fn store_round(&mut self, messages: &[StoredMessage]) -> Result<(), StoreError> {
        let results: HashMap<&str, &str> = messages
            .iter()
            .filter_map(|m| Some((m.tool_call_id.as_deref()?, m.content.as_deref().unwrap_or_default())))
            .collect();
        let calls = messages
            .iter()
            .flat_map(|m| &m.tool_calls)
            .filter_map(|c| {
                let result = results.get(c.id.as_str()).copied().unwrap_or_default();
                let v: serde_json::Value = serde_json::from_str(result).unwrap_or_default();
                let held = v["error"]["code"] == "needs_confirmation";
                let ok = v.get("error").is_none() && v["ok"] != false;
                (!held).then(|| StepCall { tool_call: c.clone(), ok, result: result.to_string() })
            })
            .collect();
        let _ = self.tx.send(FromStep::Round { step_id: self.step_id.clone(), calls });
        Ok(())
    }
}
