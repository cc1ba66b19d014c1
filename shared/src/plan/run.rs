//! Running the plan tools inside the planner's model loop: create (validate,
//! store, review), decide (approve, reject, confirm, cancel, continue), and
//! execute — stages in order, a parallel stage's steps at once under
//! `PLAN_STEP_CONCURRENCY`, each step an executor: the turn's own
//! [`ModelLoop`] with a scoped context (the step and its inputs' results, not
//! the conversation), the step's tools only and `PLAN_STEP_MAX_ROUNDS`.
//!
//! Contract (besides the module's in [`crate::plan`]):
//! - events go out in this order per step: `step_start`, `executor_spawned`,
//!   the executor's tool events (origin `plan_step`), `executor_result`,
//!   `step_complete`; executors' words never reach the answer (the planner
//!   reads the plan tool's result and answers);
//! - a step's status is saved before its `step_complete` is sent;
//! - an interrupted turn (Stop, client gone, deadline, lease lost) starts no
//!   new step, lets running ones end as their loops do, keeps finished ones
//!   and leaves the rest pending: the plan stays `running` (resumable).

use super::{
    validate, AgentPlan, PendingChange, PlanMode, PlanRecord, PlanStatus, PlanStep, StageMode, StepCall, StepOutputs,
    StepStatus, ToolOrigin,
};
use crate::context::{CalibrationLine, TokenCalibration, TokenCounter};
use crate::entities::{EntityKind, EntityService};
use crate::ids::{EntityId, SessionId, TurnId, UserId};
use crate::llm::{ChatRequest, Llm, LlmEvent};
use crate::message::{ChatMessage, Role, StoredMessage, ToolCall, Usage};
use crate::plan::store::{PlanStore, OPEN_LOOKBACK};
use crate::sse::{EventSink, OperationAction, OperationStatus, SseDecoder, StreamEvent};
use crate::store::{Store, StoreError};
use crate::tools::plan::{ContinuePlanArgs, PlanDecision, AGENT_CREATE_PLAN};
use crate::tools::{ToolName, ToolScope};
use crate::turn::lease::Watch;
use crate::turn::model_loop::{CallGate, Counting, Limits, LoopEnd, ModelLoop, Outcome, RoundLog};
use crate::turn::{ToolRun, TurnScope, TurnTools};
use futures::stream::FuturesUnordered;
use futures::StreamExt;
use std::collections::HashMap;
use std::sync::Mutex;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// What plans need beyond the loop: where records go, and names for changes.
#[derive(Clone, Copy)]
pub struct PlanCtx<'a> {
    pub store: &'a dyn PlanStore,
    pub entities: Option<&'a EntityService>,
}

/// Update calls in one executor round from which they count as a bulk update
/// (and wait for the user's confirmation).
pub const BULK_UPDATE_CALLS: usize = 3;

/// The planner loop's parts an executor runs on.
#[derive(Clone, Copy)]
struct Env<'a> {
    llm: &'a dyn Llm,
    tools: &'a dyn TurnTools,
    store: &'a dyn Store,
    cfg: &'a crate::config::Config,
    user: &'a UserId,
    sid: &'a SessionId,
    turn_id: &'a TurnId,
    scope: &'a TurnScope,
    limits: Limits,
    watch: &'a Watch,
    counter: TokenCounter,
    line: CalibrationLine,
    calibration: &'a TokenCalibration,
    plans: PlanCtx<'a>,
    /// What the executors' model requests used, for the turn's usage.
    spent: &'a Mutex<Usage>,
}

impl<'a> Env<'a> {
    fn tool_scope(&self) -> ToolScope {
        ToolScope::from_focus(self.scope.context_type, self.scope.entity_id.as_deref(), self.scope.focus.as_ref())
    }
}

/// One plan tool call, run with the stream; its result, and what cut the turn
/// off while it ran.
pub async fn plan_call(lp: &mut ModelLoop<'_>, call: &ToolCall, sink: &mut EventSink) -> (ToolRun, Option<Outcome>) {
    let (Some(plans), Some(tools)) = (lp.plans, lp.tools) else {
        return (ToolRun::failed("plans are not available here"), None);
    };
    let spent = Mutex::new(Usage::default());
    let env = Env {
        llm: lp.llm,
        tools,
        store: lp.store,
        cfg: lp.cfg,
        user: lp.user,
        sid: lp.sid,
        turn_id: lp.turn_id,
        scope: lp.scope,
        limits: lp.limits,
        watch: lp.watch,
        counter: lp.counting.counter,
        line: lp.counting.line,
        calibration: lp.counting.calibration,
        plans,
        spent: &spent,
    };
    let ran = if call.function.name == AGENT_CREATE_PLAN {
        create(&env, call, sink).await
    } else {
        decide(&env, call, sink).await
    };
    lp.usage.add(&spent.into_inner().unwrap_or_default());
    ran.unwrap_or_else(|e| {
        tracing::error!(code = e.code(), error = %e, "plan not stored");
        (failure("store_unavailable", &format!("the plan could not be saved: {e}")), None)
    })
}

type Ran = Result<(ToolRun, Option<Outcome>), StoreError>;

fn failure(code: &str, message: &str) -> ToolRun {
    let content = serde_json::json!({"error": {"code": code, "message": message}}).to_string();
    ToolRun { ok: false, preview: message.chars().take(400).collect(), content, events: vec![] }
}

/// A status as the wire spells it (`awaiting_approval`, ...).
fn status_name(status: PlanStatus) -> String {
    serde_json::to_value(status).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
}

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
        self.version = self.env.plans.store.save(self.env.user, self.env.sid, &self.rec, self.version).await?;
        Ok(())
    }
}

async fn create<'a>(env: &'a Env<'a>, call: &ToolCall, sink: &mut EventSink) -> Ran {
    let plan: AgentPlan = match serde_json::from_str(&call.function.arguments) {
        Ok(p) => p,
        Err(e) => return Ok((failure("invalid_arguments", &format!("{AGENT_CREATE_PLAN}: {e}")), None)),
    };
    let valid = match validate(plan, &env.tool_scope()) {
        Ok(v) => v,
        Err(problems) => {
            let content = serde_json::json!({"error": {"code": "invalid_plan",
                "message": "the plan was not run; fix every problem and call agent_create_plan again",
                "problems": problems}})
            .to_string();
            return Ok((ToolRun { ok: false, preview: problems.join("; "), content, events: vec![] }, None));
        }
    };
    // One current plan per session: a new plan (the edit of a draft is a new
    // plan) replaces every open one, in the same transaction that stores it,
    // so a later decision without a plan id can only reach this one.
    let replaced: Vec<(PlanRecord, u64)> = env
        .plans
        .store
        .list(env.user, env.sid, OPEN_LOOKBACK)
        .await?
        .into_iter()
        .filter(|(r, _)| r.status.is_open())
        .collect();
    let mut rec = PlanRecord::new(&valid, env.turn_id.clone());
    rec.supersedes = replaced.iter().map(|(r, _)| r.id.clone()).collect();
    let version = env.plans.store.create(env.user, env.sid, &rec, &replaced).await?;
    let mut book = Book { env, rec, version };
    let plan_id = book.rec.id.clone();
    let _ = sink.send(StreamEvent::PlanCreated { plan_id: plan_id.clone(), plan: book.rec.plan.clone() }).await;
    let mut ran = match book.rec.plan.mode {
        PlanMode::DraftOnly => {
            let _ = sink.send(StreamEvent::PlanReadyForReview { plan_id }).await;
            let next = "show the user this plan and ask them to approve, change or reject it; on their answer call \
                        agent_continue_plan (approve or reject) or agent_create_plan with the changed plan";
            Ok((answer(&book.rec, next), None))
        }
        PlanMode::AgentReview => {
            let (approved, reason) = review(env, &book.rec.plan).await;
            let _ = sink.send(StreamEvent::PlanReview { plan_id, approved, reason: reason.clone() }).await;
            if !approved {
                book.rec.status = PlanStatus::Rejected;
                book.rec.reason = Some(reason);
                book.save().await?;
                return Ok((answer(&book.rec, "the reviewer rejected the plan: tell the user why"), None));
            }
            execute(book, sink).await
        }
        PlanMode::AutoExecute => execute(book, sink).await,
    };
    // The planner tells the user which plans will not run any more (and the
    // session's log keeps it: the plan history).
    if let Ok((run, _)) = &mut ran {
        if !replaced.is_empty() {
            note_replaced(run, &replaced);
        }
    }
    ran
}

/// Adds `superseded` (the plans this one replaced, as they were) to a plan
/// tool's result.
fn note_replaced(run: &mut ToolRun, replaced: &[(PlanRecord, u64)]) {
    let Ok(mut v) = serde_json::from_str::<serde_json::Value>(&run.content) else { return };
    let list: Vec<serde_json::Value> = replaced
        .iter()
        .map(|(r, _)| serde_json::json!({"plan_id": r.id, "goal": r.plan.goal, "was": r.status}))
        .collect();
    v["superseded"] = serde_json::Value::Array(list);
    v["superseded_note"] =
        "the plans in `superseded` were replaced by this one and will never run: say so if the user may expect them"
            .into();
    run.content = v.to_string();
}

async fn decide<'a>(env: &'a Env<'a>, call: &ToolCall, sink: &mut EventSink) -> Ran {
    let args: ContinuePlanArgs = match serde_json::from_str(&call.function.arguments) {
        Ok(a) => a,
        Err(e) => return Ok((failure("invalid_arguments", &format!("agent_continue_plan: {e}")), None)),
    };
    let verb = match args.decision {
        PlanDecision::Approve => "approve",
        PlanDecision::Reject => "reject",
        PlanDecision::Confirm => "confirm",
        PlanDecision::Cancel => "cancel",
        PlanDecision::Continue => "continue",
    };
    let found = match &args.plan_id {
        Some(id) => env.plans.store.load(env.user, env.sid, id).await?,
        // No plan named: the session's current plan (its newest) only. An
        // older plan is never reached this way: it was replaced, or it ended.
        None => match env.plans.store.current(env.user, env.sid).await? {
            None => {
                let why = format!("there is nothing to {verb}: this conversation has no plan");
                return Ok((failure("no_open_plan", &why), None));
            }
            Some((rec, _)) if !rec.status.is_open() => {
                let why = format!(
                    "there is nothing to {verb}: the current plan \"{}\" ({}) is {}; nothing was run. Tell the \
                     user so; a new plan needs agent_create_plan",
                    rec.plan.goal,
                    rec.id,
                    status_name(rec.status)
                );
                return Ok((failure("no_open_plan", &why), None));
            }
            open => open,
        },
    };
    let Some((rec, version)) = found else {
        return Ok((failure("plan_not_found", "there is no such plan in this conversation"), None));
    };
    let mut book = Book { env, rec, version };
    use PlanDecision as D;
    use PlanStatus as S;
    match (args.decision, book.rec.status) {
        (D::Approve, S::AwaitingApproval) | (D::Continue, S::Running) => {
            book.rec.status = S::Running;
            execute(book, sink).await
        }
        (D::Confirm, S::AwaitingConfirmation) => {
            confirm(&mut book, sink).await?;
            execute(book, sink).await
        }
        (D::Reject | D::Cancel, S::AwaitingApproval | S::Running | S::AwaitingConfirmation) => {
            let held = book.rec.steps.iter_mut().filter(|s| s.status == StepStatus::AwaitingConfirmation);
            for step in held {
                step.status = StepStatus::Skipped;
                step.error = Some("the user declined this change; nothing was changed".into());
                step.held.clear();
            }
            book.rec.status = if args.decision == D::Reject { S::Rejected } else { S::Cancelled };
            book.rec.reason = args.reason;
            book.save().await?;
            Ok((answer(&book.rec, "nothing more of this plan runs: tell the user what was and was not done"), None))
        }
        (_, S::Superseded) => {
            let by = book.rec.superseded_by.as_deref().unwrap_or("a newer plan");
            let why = format!("the plan was replaced by plan {by} and never runs; there is nothing to {verb} in it");
            Ok((failure("plan_decision_not_applicable", &why), None))
        }
        (decision, status) => {
            let why = format!("the plan is {}; {decision:?} does not apply to it", status_name(status));
            Ok((failure("plan_decision_not_applicable", &why), None))
        }
    }
}

/// Runs the calls the plan paused for, as their steps' executors asked for
/// them; each such step is then done.
async fn confirm(book: &mut Book<'_>, sink: &mut EventSink) -> Result<(), StoreError> {
    let env = book.env;
    let plan_id = book.rec.id.clone();
    let held: Vec<String> = book
        .rec
        .steps
        .iter()
        .filter(|s| s.status == StepStatus::AwaitingConfirmation)
        .map(|s| s.step_id.clone())
        .collect();
    for step_id in held {
        let origin = ToolOrigin::PlanStep { plan_id: plan_id.clone(), step_id: step_id.clone() };
        let calls = std::mem::take(&mut book.rec.step_mut(&step_id).held);
        let mut outputs = StepOutputs::default();
        let mut all_ok = true;
        for call in calls {
            let _ = sink.send(StreamEvent::ToolCall { tool_call: call.clone(), origin: origin.clone() }).await;
            let run = env.tools.run(env.user, env.scope, &call).await;
            collect_outputs(&run.events, &mut outputs);
            for ev in &run.events {
                let _ = sink.send(ev.clone()).await;
            }
            let (id, name) = (call.id.clone(), call.function.name.clone());
            let result = StreamEvent::ToolResult {
                tool_call_id: id,
                name,
                ok: run.ok,
                preview: run.preview.clone(),
                origin: origin.clone(),
            };
            let _ = sink.send(result).await;
            all_ok &= run.ok;
            book.rec.step_mut(&step_id).calls.push(StepCall { tool_call: call, ok: run.ok, result: run.content });
        }
        let step = book.rec.step_mut(&step_id);
        step.status = if all_ok { StepStatus::Done } else { StepStatus::Failed };
        step.outputs.entity_ids.extend(outputs.entity_ids);
        step.outputs.doc_ids.extend(outputs.doc_ids);
        step.summary = Some(format!("{} (confirmed by the user)", step.summary.clone().unwrap_or_default()));
        step.changes.clear();
        let (status, outputs, error) = (step.status, step.outputs.clone(), step.error.clone());
        book.save().await?;
        let _ =
            sink.send(StreamEvent::StepComplete { plan_id: plan_id.clone(), step_id, status, outputs, error }).await;
    }
    book.rec.status = PlanStatus::Running;
    book.save().await
}

/// The reviewer: one model call, no tools, that approves or rejects the plan.
/// A review that fails is a rejection: an unreviewed plan never runs.
async fn review(env: &Env<'_>, plan: &AgentPlan) -> (bool, String) {
    let request = ChatRequest {
        model: env.cfg.llm.model.clone(),
        messages: vec![
            ChatMessage::system(
                "You review plans before they run. Answer with one JSON object only: \
                 {\"verdict\": \"approve\" or \"reject\", \"reason\": \"<one sentence>\"}.",
            ),
            ChatMessage::user(serde_json::to_string(plan).unwrap_or_default()),
        ],
        tools: vec![],
        max_tokens: env.cfg.llm.max_tokens,
        temperature: None,
    };
    let text = async {
        let mut stream = env.llm.stream_chat(request).await.map_err(|e| e.to_string())?;
        let mut text = String::new();
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(LlmEvent::TextDelta(t)) => text.push_str(&t),
                Ok(_) => {}
                Err(e) => return Err(e.to_string()),
            }
        }
        Ok(text)
    };
    let text = match tokio::time::timeout_at(env.limits.stop_at, text).await {
        Ok(Ok(t)) => t,
        Ok(Err(e)) => return (false, format!("the review failed: {e}")),
        Err(_) => return (false, "the review ran out of time".into()),
    };
    verdict(&text)
}

/// The reviewer's answer: its JSON object if it wrote one, else its words.
fn verdict(text: &str) -> (bool, String) {
    let json = text
        .find('{')
        .zip(text.rfind('}'))
        .and_then(|(a, b)| (a < b).then(|| serde_json::from_str::<serde_json::Value>(&text[a..=b]).ok()).flatten());
    match json {
        Some(v) => {
            let approved = v["verdict"].as_str().is_some_and(|s| s.eq_ignore_ascii_case("approve"));
            (approved, v["reason"].as_str().unwrap_or_default().to_string())
        }
        None => (false, format!("the reviewer gave no verdict: {}", text.chars().take(200).collect::<String>())),
    }
}

/// Runs the plan's unfinished steps, stage by stage; its result, and what cut
/// the turn off, if anything.
async fn execute(mut book: Book<'_>, sink: &mut EventSink) -> Ran {
    let env = book.env;
    let stages = book.rec.plan.stages.clone();
    for stage in &stages {
        let cap = match stage.mode {
            StageMode::Parallel => env.cfg.plan_step_concurrency.max(1),
            StageMode::Sequence => 1,
        };
        if let Some(cut) = run_stage(&mut book, &stage.steps, cap, sink).await? {
            book.save().await?;
            let next = "the turn was cut off; finished steps are kept: tell the user what is done and that \
                        \"continue\" resumes the plan";
            return Ok((answer(&book.rec, next), Some(cut)));
        }
        let held: Vec<_> =
            book.rec.steps.iter().filter(|s| s.status == StepStatus::AwaitingConfirmation).cloned().collect();
        if !held.is_empty() {
            book.rec.status = PlanStatus::AwaitingConfirmation;
            book.save().await?;
            for s in held {
                let (plan_id, step_id, changes) = (book.rec.id.clone(), s.step_id, s.changes);
                let _ = sink.send(StreamEvent::ConfirmationRequired { plan_id, step_id, changes }).await;
            }
            let next = "nothing was deleted or changed in bulk yet: tell the user exactly what would change and ask \
                        them to confirm; on their answer call agent_continue_plan with confirm or cancel";
            return Ok((answer(&book.rec, next), None));
        }
    }
    let failed = book.rec.steps.iter().any(|s| s.status == StepStatus::Failed);
    book.rec.status = if failed { PlanStatus::Failed } else { PlanStatus::Completed };
    book.save().await?;
    let next = if failed {
        "some steps failed: tell the user plainly which ones and why, and what the other steps did"
    } else {
        "answer the user from the steps' results"
    };
    Ok((answer(&book.rec, next), None))
}

/// What one executor did.
struct StepEnd {
    step_id: String,
    summary: String,
    outputs: StepOutputs,
    calls: Vec<StepCall>,
    held: Vec<ToolCall>,
    /// How its loop ended.
    outcome: Outcome,
    usage: Usage,
}

/// Runs a stage's pending steps, at most `cap` at once, forwarding their
/// events as they come; what cut the turn off, if anything.
async fn run_stage(
    book: &mut Book<'_>,
    steps: &[PlanStep],
    cap: usize,
    sink: &mut EventSink,
) -> Result<Option<Outcome>, StoreError> {
    let env = *book.env;
    let plan_id = book.rec.id.clone();
    let (tx, mut rx) = mpsc::unbounded_channel::<FromStep>();
    let gone = CancellationToken::new();
    let pending: Vec<&PlanStep> = steps.iter().filter(|s| book.rec.step(&s.id).status == StepStatus::Pending).collect();
    let mut queue = pending.into_iter();
    let mut running = FuturesUnordered::new();
    let mut cut: Option<Outcome> = None;
    loop {
        while cut.is_none() && running.len() < cap {
            let Some(step) = queue.next() else { break };
            if let Some(why) = failed_input(&book.rec, step) {
                book.rec.step_mut(&step.id).status = StepStatus::Skipped;
                book.rec.step_mut(&step.id).error = Some(why.clone());
                book.save().await?;
                let (p, s) = (plan_id.clone(), step.id.clone());
                let ev = StreamEvent::StepComplete {
                    plan_id: p,
                    step_id: s,
                    status: StepStatus::Skipped,
                    outputs: StepOutputs::default(),
                    error: Some(why),
                };
                let _ = sink.send(ev).await;
                continue;
            }
            let brief = brief(&book.rec, step);
            book.rec.step_mut(&step.id).attempts += 1;
            let _ = sink
                .send(StreamEvent::StepStart {
                    plan_id: plan_id.clone(),
                    step_id: step.id.clone(),
                    title: step.title.clone(),
                })
                .await;
            let spawned = StreamEvent::ExecutorSpawned {
                plan_id: plan_id.clone(),
                step_id: step.id.clone(),
                executor: step.executor,
                tools: step.tools.clone(),
            };
            let _ = sink.send(spawned).await;
            running.push(run_step(env, plan_id.clone(), step.clone(), brief, tx.clone(), gone.clone()));
        }
        if running.is_empty() {
            break;
        }
        tokio::select! {
            // The client gone: executors stop as a turn does (their sinks close).
            _ = sink.closed(), if !gone.is_cancelled() => gone.cancel(),
            Some(msg) = rx.recv() => from_step(book, msg, sink, &gone).await?,
            Some(end) = running.next() => {
                // Everything the step sent goes out before its completion.
                while let Ok(msg) = rx.try_recv() {
                    from_step(book, msg, sink, &gone).await?;
                }
                if let Some(c) = interruption(&end.outcome) {
                    cut.get_or_insert(c);
                }
                settle(book, end, sink).await?;
            }
        }
    }
    Ok(cut)
}

/// What a running step tells the stage.
enum FromStep {
    /// An event for the client.
    Event(StreamEvent),
    /// An executor round that finished: its calls, saved at once so a crash
    /// later in the step cannot make a resumed attempt repeat them.
    Round { step_id: String, calls: Vec<StepCall> },
}

async fn from_step(
    book: &mut Book<'_>,
    msg: FromStep,
    sink: &mut EventSink,
    gone: &CancellationToken,
) -> Result<(), StoreError> {
    match msg {
        FromStep::Event(ev) => {
            if sink.send(ev).await.is_err() {
                gone.cancel();
            }
            Ok(())
        }
        FromStep::Round { step_id, calls } => {
            book.rec.step_mut(&step_id).calls.extend(calls);
            book.save().await
        }
    }
}

/// Outcomes that cut the turn off rather than fail the step.
fn interruption(o: &Outcome) -> Option<Outcome> {
    match o {
        Outcome::Stopped => Some(o.clone()),
        Outcome::Failed { code: "deadline_exceeded" | "session_lease_lost", .. } => Some(o.clone()),
        _ => None,
    }
}

/// A step's end into the record (saved), then `executor_result` and `step_complete`.
async fn settle(book: &mut Book<'_>, end: StepEnd, sink: &mut EventSink) -> Result<(), StoreError> {
    let plan_id = book.rec.id.clone();
    let interrupted = interruption(&end.outcome).is_some();
    book.env.spent.lock().expect("not poisoned").add(&end.usage);
    let step = book.rec.step_mut(&end.step_id);
    step.calls.extend(end.calls);
    step.outputs.entity_ids.extend(end.outputs.entity_ids);
    step.outputs.doc_ids.extend(end.outputs.doc_ids);
    let (ok, summary) = match &end.outcome {
        _ if interrupted => {
            // Left pending: it runs again on "continue", told of the calls it made.
            step.error = Some(format!("cut off: {}", end.outcome.why()));
            (false, end.outcome.why().to_string())
        }
        Outcome::Failed { message, .. } => {
            step.status = StepStatus::Failed;
            step.error = Some(message.clone());
            (false, message.clone())
        }
        _ if !end.held.is_empty() => {
            step.status = StepStatus::AwaitingConfirmation;
            step.summary = Some(end.summary.clone());
            step.held = end.held;
            (true, end.summary)
        }
        _ => {
            step.status = StepStatus::Done;
            step.summary = Some(end.summary.clone());
            step.error = None;
            (true, end.summary)
        }
    };
    let held = step.held.clone();
    let changes = describe(book.env, &held).await;
    let step = book.rec.step_mut(&end.step_id);
    step.changes = changes;
    let (status, outputs, error) = (step.status, step.outputs.clone(), step.error.clone());
    book.save().await?;
    let step_id = end.step_id;
    let result = StreamEvent::ExecutorResult { plan_id: plan_id.clone(), step_id: step_id.clone(), ok, summary };
    let _ = sink.send(result).await;
    let _ = sink.send(StreamEvent::StepComplete { plan_id, step_id, status, outputs, error }).await;
    Ok(())
}

/// Why a step cannot run: an input that failed or was skipped.
fn failed_input(rec: &PlanRecord, step: &PlanStep) -> Option<String> {
    step.inputs.iter().find_map(|i| {
        let st = rec.step(i);
        matches!(st.status, StepStatus::Failed | StepStatus::Skipped).then(|| format!("its input {i:?} did not finish"))
    })
}

/// The executor's scoped context: the plan's goal, the step, its inputs'
/// results, and the calls an earlier attempt of it made.
fn brief(rec: &PlanRecord, step: &PlanStep) -> Vec<ChatMessage> {
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

/// One step's executor: the turn's model loop on the step's context and
/// tools, with its own sink whose events are forwarded (words dropped).
async fn run_step(
    env: Env<'_>,
    plan_id: String,
    step: PlanStep,
    messages: Vec<ChatMessage>,
    tx: mpsc::UnboundedSender<FromStep>,
    gone: CancellationToken,
) -> StepEnd {
    let started = std::time::Instant::now();
    let telemetry_plan = plan_id.clone();
    let allowed: Vec<ToolName> = step.tools.iter().filter_map(|t| ToolName::parse(t)).collect();
    let offered: Vec<serde_json::Value> = allowed.iter().map(|t| t.definition()).collect();
    let tools = StepTools { inner: env.tools, allowed: allowed.clone() };
    let gate = StepGate { allowed: allowed.clone(), held: Mutex::default() };
    let mut log = StepLog { step_id: step.id.clone(), tx: tx.clone() };
    let (esink, body) = EventSink::channel();
    let origin = ToolOrigin::PlanStep { plan_id, step_id: step.id.clone() };
    let mut ex = ModelLoop {
        llm: env.llm,
        tools: (!allowed.is_empty()).then_some(&tools as &dyn TurnTools),
        store: env.store,
        cfg: env.cfg,
        user: env.user,
        sid: env.sid,
        turn_id: env.turn_id,
        scope: env.scope,
        limits: Limits { max_rounds: env.cfg.plan_step_max_rounds, ..env.limits },
        watch: env.watch,
        counting: Counting {
            counter: env.counter,
            line: env.line,
            calibration: env.calibration,
            tools_tokens: 0,
            counted: 0,
            calibrate: false,
        },
        agent_state: None,
        observed: false,
        next_seq: 1,
        usage: Default::default(),
        origin,
        plans: None,
        gate: Some(&gate),
    };
    let exec = async {
        let mut esink = esink;
        ex.run(messages, &offered, &mut log, &mut esink).await
    };
    let (ended, (outputs, oks)) = tokio::join!(exec, forward(body, tx, gone));
    let end = match ended {
        Ok(end) => end,
        Err(abort) => LoopEnd {
            unsaved: vec![],
            outcome: Outcome::Failed { code: abort.0.code(), message: abort.0.to_string(), retryable: true },
            usage: Default::default(),
        },
    };
    let summary = end.unsaved.iter().rev().find(|m| m.role == Role::Assistant).and_then(|m| m.content.clone());
    let held = gate.held.into_inner().unwrap_or_default();
    // Executors run inside the turn's task (not spawned), so the turn's
    // recorder is in scope here (dev only: DEV_EVENTS).
    let ok = matches!(end.outcome, Outcome::Complete);
    crate::turn::telemetry::Telemetry::current().plan_step(telemetry_plan, &step.id, started.elapsed(), ok);
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
fn collect_outputs(events: &[StreamEvent], outputs: &mut StepOutputs) {
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
async fn describe(env: &Env<'_>, held: &[ToolCall]) -> Vec<PendingChange> {
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
        let name = match (env.plans.entities, env.tool_scope().project(), kind, EntityId::parse(&id)) {
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
struct StepTools<'a> {
    inner: &'a dyn TurnTools,
    allowed: Vec<ToolName>,
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
struct StepGate {
    allowed: Vec<ToolName>,
    held: Mutex<Vec<ToolCall>>,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reviewer_verdicts() {
        assert_eq!(verdict(r#"{"verdict":"approve","reason":"fine"}"#), (true, "fine".into()));
        assert!(!verdict("Sure: {\"verdict\": \"reject\", \"reason\": \"deletes\"}").0);
        assert!(!verdict("looks good").0);
    }
}
