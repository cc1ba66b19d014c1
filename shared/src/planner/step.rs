//! One plan step's executor: a nested loop (run by the [`LoopRunner`] the
//! loop handed the layer) on the step's brief (or, after the user answered
//! its waiting calls, on its own messages so far), with only the step's tools
//! ([`StepTools`]), the turn's approval gate for the step's own tools
//! ([`StepApprovals`]), its rounds sent to the plan record ([`StepLog`]) and
//! its events read back from its own sink and forwarded (its words dropped).
//!
//! [`LoopRunner`]: crate::model_loop::LoopRunner

use super::stage::FromStep;
use super::{failure, Env};
use crate::ids::UserId;
use crate::message::{ChatMessage, PendingApproval, PlanStepRef, Role, StoredMessage, ToolCall, Usage};
use crate::model_loop::telemetry::Telemetry;
use crate::model_loop::{ApprovalGate, LoopEnd, Nested, Outcome, RoundLog, ToolRun, TurnScope, TurnTools};
use crate::plan::{PlanRecord, PlanStep, StepCall, StepOutputs, ToolOrigin};
use crate::sse::{EventSink, OperationAction, OperationStatus, SseDecoder, StreamEvent};
use crate::store::StoreError;
use crate::tools::ToolName;
use std::collections::HashMap;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// What one executor did.
pub(super) struct StepEnd {
    pub step_id: String,
    pub summary: String,
    pub outputs: StepOutputs,
    pub calls: Vec<StepCall>,
    /// Its calls that wait for the user's yes, with their approvals.
    pub waiting: Vec<(ToolCall, PendingApproval)>,
    /// Its messages up to the wait (empty when nothing waits).
    pub transcript: Vec<ChatMessage>,
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
    let step_ref = PlanStepRef { plan_id: plan_id.clone(), step_id: step.id.clone() };
    let gate = env.layer.approvals.map(|inner| StepApprovals { inner, allowed: allowed.clone(), step: step_ref });
    let mut log = StepLog { step_id: step.id.clone(), tx: tx.clone(), transcript: messages.clone() };
    let (esink, body) = EventSink::channel();
    let nested = Nested {
        messages,
        tools: (!allowed.is_empty()).then_some(&tools as &dyn TurnTools),
        offered: &offered,
        max_rounds: env.layer.step_max_rounds,
        origin: ToolOrigin::PlanStep { plan_id: plan_id.clone(), step_id: step.id.clone() },
        approvals: gate.as_ref().map(|g| g as &dyn ApprovalGate),
    };
    // The sink moves in (it closes when the executor ends, which ends the
    // forwarding); the log is only borrowed: its messages are kept.
    let exec = async {
        let mut esink = esink;
        env.runner.run(nested, &mut log, &mut esink).await
    };
    let (ended, (outputs, oks)) = tokio::join!(exec, forward(body, tx, gone));
    let end = ended.unwrap_or_else(|abort| LoopEnd {
        unsaved: vec![],
        outcome: Outcome::Failed { code: abort.0.code(), message: abort.0.to_string(), retryable: true },
        usage: Default::default(),
    });
    let summary = end.unsaved.iter().rev().find(|m| m.role == Role::Assistant).and_then(|m| m.content.clone());
    let waiting = waiting_calls(&end.unsaved);
    let transcript = if waiting.is_empty() {
        vec![]
    } else {
        [log.transcript, end.unsaved.iter().map(StoredMessage::to_chat).collect()].concat()
    };
    // Executors run inside the turn's task (not spawned), so the turn's
    // recorder is in scope here (dev only: DEV_EVENTS).
    let ok = matches!(end.outcome, Outcome::Complete);
    Telemetry::current().plan_step(plan_id, &step.id, started.elapsed(), ok);
    StepEnd {
        step_id: step.id,
        summary: summary.unwrap_or_default(),
        outputs,
        calls: step_calls(&end.unsaved, &oks),
        waiting,
        transcript,
        outcome: end.outcome,
        usage: end.usage,
    }
}

/// The calls of `messages` that wait for the user's yes, with their approvals.
fn waiting_calls(messages: &[StoredMessage]) -> Vec<(ToolCall, PendingApproval)> {
    messages
        .iter()
        .flat_map(|m| {
            m.approvals.iter().filter_map(|p| Some((m.tool_calls.iter().find(|c| c.id == p.tool_call_id)?, p)))
        })
        .map(|(c, p)| (c.clone(), p.clone()))
        .collect()
}

/// The calls that ran, paired with their results (waiting ones did not run:
/// they sent no `tool_result`).
fn step_calls(messages: &[StoredMessage], oks: &HashMap<String, bool>) -> Vec<StepCall> {
    let results: HashMap<&str, &str> = messages
        .iter()
        .filter_map(|m| Some((m.tool_call_id.as_deref()?, m.content.as_deref().unwrap_or_default())))
        .collect();
    messages
        .iter()
        .flat_map(|m| &m.tool_calls)
        .filter(|c| oks.contains_key(&c.id))
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

/// The turn's approval gate, for the calls of the step's own tools only
/// (others are refused by [`StepTools`] when they run, so an approval can
/// never run a tool the step was not given); each approval names the step.
pub(super) struct StepApprovals<'a> {
    pub inner: &'a dyn ApprovalGate,
    pub allowed: Vec<ToolName>,
    pub step: PlanStepRef,
}

#[async_trait::async_trait]
impl ApprovalGate for StepApprovals<'_> {
    async fn waits(&self, calls: &[ToolCall]) -> Vec<Option<PendingApproval>> {
        let own = |c: &ToolCall| ToolName::parse(&c.function.name).is_some_and(|t| self.allowed.contains(&t));
        let mine: Vec<ToolCall> = calls.iter().filter(|c| own(c)).cloned().collect();
        let mut waits = self.inner.waits(&mine).await.into_iter();
        calls
            .iter()
            .map(|c| {
                let p = if own(c) { waits.next().flatten()? } else { return None };
                Some(PendingApproval { step: Some(self.step.clone()), ..p })
            })
            .collect()
    }
}

/// Where an executor's rounds go: to the plan record, with the step (not to
/// the session's log); its messages are kept for a step that comes to wait.
struct StepLog {
    step_id: String,
    tx: mpsc::UnboundedSender<FromStep>,
    transcript: Vec<ChatMessage>,
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
            .map(|c| {
                let result = results.get(c.id.as_str()).copied().unwrap_or_default();
                let v: serde_json::Value = serde_json::from_str(result).unwrap_or_default();
                let ok = v.get("error").is_none() && v["ok"] != false;
                StepCall { tool_call: c.clone(), ok, result: result.to_string() }
            })
            .collect();
        self.transcript.extend(messages.iter().map(StoredMessage::to_chat));
        let _ = self.tx.send(FromStep::Round { step_id: self.step_id.clone(), calls });
        Ok(())
    }
}
