//! Plan execution against a fake loop runner (each step's executor is
//! scripted), an in-memory plan store and fake tools: no model, no DynamoDB.
//! Time is tokio's paused clock, so "at once" is observed, not timed.

use super::create::verdict;
use super::step::{StepApprovals, StepTools};
use super::*;
use crate::approval::{Gate, Signer};
use crate::ids::ProjectId;
use crate::message::{ChatMessage, FunctionCall, PlanStepRef, Role, StoredMessage};
use crate::model_loop::{ApprovalGate, AskError, LoopAbort, LoopEnd, Nested, Outcome, RoundLog};
use crate::plan::{
    AgentPlan, ExecutorKind, PlanMode, PlanStage, PlanStep, StageMode, StepIntent, StepStatus, ToolOrigin,
};
use crate::session::ContextType;
use crate::sse::{EventSink, SseBody, SseDecoder, StreamEvent};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// Plan records in memory, with the store's version checks.
#[derive(Default)]
struct Plans(Mutex<Vec<(PlanRecord, u64)>>);

impl Plans {
    fn only(&self) -> PlanRecord {
        let plans = self.0.lock().unwrap();
        assert_eq!(plans.len(), 1, "one plan");
        plans[0].0.clone()
    }
}

#[async_trait::async_trait]
impl PlanStore for Plans {
    async fn save(&self, _: &UserId, _: &SessionId, plan: &PlanRecord, expected: u64) -> Result<u64, StoreError> {
        let mut plans = self.0.lock().unwrap();
        let slot = plans.iter_mut().find(|(r, _)| r.id == plan.id).ok_or(StoreError::NotFound)?;
        if slot.1 != expected {
            return Err(StoreError::LeaseLost);
        }
        *slot = (plan.clone(), expected + 1);
        Ok(expected + 1)
    }

    async fn create(
        &self,
        _: &UserId,
        _: &SessionId,
        plan: &PlanRecord,
        replaced: &[(PlanRecord, u64)],
    ) -> Result<u64, StoreError> {
        let mut plans = self.0.lock().unwrap();
        for (old, _) in replaced {
            let slot = plans.iter_mut().find(|(r, _)| r.id == old.id).expect("a stored plan");
            slot.0.status = PlanStatus::Superseded;
            slot.0.superseded_by = Some(plan.id.clone());
        }
        plans.push((plan.clone(), 1));
        Ok(1)
    }

    async fn load(&self, _: &UserId, _: &SessionId, id: &str) -> Result<Option<(PlanRecord, u64)>, StoreError> {
        Ok(self.0.lock().unwrap().iter().find(|(r, _)| r.id == id).cloned())
    }

    async fn list(&self, _: &UserId, _: &SessionId, limit: usize) -> Result<Vec<(PlanRecord, u64)>, StoreError> {
        Ok(self.0.lock().unwrap().iter().rev().take(limit).cloned().collect())
    }
}

/// What one step's executor does in the fake runner.
#[derive(Clone)]
struct Exec {
    outcome: Outcome,
    /// Events it sends on its own sink.
    events: Vec<StreamEvent>,
    /// Calls it makes in its last round, which the approval gate may ask
    /// about (the others get ok results).
    calls: Vec<ToolCall>,
    /// A finished round it stores.
    round: Option<Vec<ToolCall>>,
    /// How long it runs (tokio time).
    ms: u64,
    usage: Usage,
}

fn done(ms: u64) -> Exec {
    Exec { outcome: Outcome::Complete, events: vec![], calls: vec![], round: None, ms, usage: Usage::default() }
}

/// Runs each step's executor from a script; records starts and ends.
#[derive(Default)]
struct Runner {
    steps: HashMap<String, Exec>,
    review: Option<Result<String, AskError>>,
    order: Mutex<Vec<String>>,
    briefs: Mutex<Vec<String>>,
    /// Every executor's messages, as it was given them.
    given: Mutex<Vec<Vec<ChatMessage>>>,
    running: AtomicUsize,
    most: AtomicUsize,
}

impl Runner {
    fn with(steps: &[(&str, Exec)]) -> Runner {
        Runner { steps: steps.iter().map(|(s, e)| (s.to_string(), e.clone())).collect(), ..Runner::default() }
    }

    fn order(&self) -> Vec<String> {
        self.order.lock().unwrap().clone()
    }
}

#[async_trait::async_trait]
impl LoopRunner for Runner {
    async fn run(
        &self,
        nested: Nested<'_>,
        log: &mut dyn RoundLog,
        sink: &mut EventSink,
    ) -> Result<LoopEnd, LoopAbort> {
        let ToolOrigin::PlanStep { step_id, .. } = nested.origin.clone() else { panic!("an executor's origin") };
        self.briefs.lock().unwrap().push(nested.messages[1].content.clone().unwrap_or_default());
        self.given.lock().unwrap().push(nested.messages.clone());
        let exec = self.steps.get(&step_id).cloned().unwrap_or_else(|| done(1));
        self.order.lock().unwrap().push(format!("start {step_id}"));
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        for ev in exec.events {
            let _ = sink.send(ev).await;
        }
        let _ = sink.send(StreamEvent::TextDelta { content: "executor words".into() }).await;
        let mut unsaved = vec![];
        if !exec.calls.is_empty() {
            let waits = nested.approvals.expect("executors have a gate").waits(&exec.calls).await;
            let mut r = round(exec.calls.clone());
            r[0].approvals = waits.iter().flatten().cloned().collect();
            let waiting: Vec<String> = r[0].approvals.iter().map(|p| p.tool_call_id.clone()).collect();
            r.retain(|m| m.tool_call_id.as_deref().is_none_or(|id| !waiting.iter().any(|w| w == id)));
            unsaved = r;
        }
        if let Some(calls) = exec.round {
            log.store_round(&round(calls)).await.map_err(LoopAbort)?;
        }
        tokio::time::sleep(Duration::from_millis(exec.ms)).await;
        self.running.fetch_sub(1, Ordering::SeqCst);
        self.order.lock().unwrap().push(format!("end {step_id}"));
        let words =
            StoredMessage::new(SessionId::new(), 9, TurnId::new(), Role::Assistant, Some(format!("did {step_id}")));
        if unsaved.is_empty() {
            unsaved.push(words);
        }
        Ok(LoopEnd { unsaved, outcome: exec.outcome, usage: exec.usage })
    }

    async fn ask(&self, _: Vec<ChatMessage>) -> Result<String, AskError> {
        self.review.clone().expect("a review was scripted")
    }
}

/// A stored round: the calls, each with an ok result.
fn round(calls: Vec<ToolCall>) -> Vec<StoredMessage> {
    let (sid, turn) = (SessionId::new(), TurnId::new());
    let mut assistant = StoredMessage::new(sid.clone(), 1, turn.clone(), Role::Assistant, None);
    assistant.tool_calls = calls.clone();
    let mut out = vec![assistant];
    for (i, c) in calls.iter().enumerate() {
        let mut m =
            StoredMessage::new(sid.clone(), 2 + i as u64, turn.clone(), Role::Tool, Some(r#"{"ok":true}"#.into()));
        m.tool_call_id = Some(c.id.clone());
        out.push(m);
    }
    out
}

/// Tools that record what ran (a plan never runs a waiting call itself).
#[derive(Default)]
struct Tools(Mutex<Vec<String>>);

#[async_trait::async_trait]
impl TurnTools for Tools {
    fn offered(&self, _: &TurnScope) -> Vec<serde_json::Value> {
        vec![]
    }

    async fn run(&self, _: &UserId, _: &TurnScope, call: &ToolCall) -> ToolRun {
        self.0.lock().unwrap().push(call.id.clone());
        ToolRun { ok: true, content: r#"{"ok":true}"#.into(), preview: "ran".into(), events: vec![] }
    }
}

fn call(id: &str, name: &str, args: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        kind: "function".into(),
        function: FunctionCall { name: name.into(), arguments: args.into() },
    }
}

fn step(id: &str, inputs: &[&str]) -> PlanStep {
    PlanStep {
        id: id.into(),
        title: format!("do {id}"),
        intent: StepIntent::Research,
        executor: ExecutorKind::Research,
        tools: vec!["search_project".into(), "update_entity".into(), "delete_entity".into()],
        inputs: inputs.iter().map(|s| s.to_string()).collect(),
        outputs: vec![],
    }
}

fn plan(mode: PlanMode, stages: Vec<(StageMode, Vec<PlanStep>)>) -> AgentPlan {
    AgentPlan {
        goal: "the goal".into(),
        stages: stages
            .into_iter()
            .enumerate()
            .map(|(i, (mode, steps))| PlanStage { id: format!("st{i}"), name: "n".into(), mode, steps })
            .collect(),
        constraints: vec![],
        mode,
    }
}

/// A plan layer over the fakes, run for one plan call in a project scope.
struct Turn {
    plans: Plans,
    tools: Tools,
    runner: Runner,
    user: UserId,
    sid: SessionId,
    turn_id: TurnId,
    scope: TurnScope,
    cap: usize,
}

impl Turn {
    fn new(runner: Runner) -> Turn {
        let project = ProjectId::new();
        Turn {
            plans: Plans::default(),
            tools: Tools::default(),
            runner,
            user: UserId::parse("user-1").unwrap(),
            sid: SessionId::new(),
            turn_id: TurnId::new(),
            scope: TurnScope {
                context_type: ContextType::Project,
                entity_id: None,
                focus: Some(serde_json::json!({"projectId": project.to_string()})),
                timezone: None,
            },
            cap: 3,
        }
    }

    /// One plan call: its result and every event it sent.
    async fn call(&self, name: &str, args: serde_json::Value) -> (StreamedRun, Vec<StreamEvent>) {
        let gate = self.gate();
        let layer = PlanLayer {
            store: &self.plans,
            approvals: Some(&gate),
            tools: &self.tools,
            step_concurrency: self.cap,
            step_max_rounds: 3,
        };
        let (mut sink, body) = EventSink::channel();
        let reader = tokio::spawn(read_all(body));
        let cx = StreamCx {
            user: &self.user,
            sid: &self.sid,
            turn_id: &self.turn_id,
            scope: &self.scope,
            runner: &self.runner,
            sink: &mut sink,
        };
        let ran = layer.run_streamed(&call("c1", name, &args.to_string()), cx).await;
        drop(sink);
        (ran, reader.await.unwrap())
    }

    /// The turn's approval gate (the policy of [`crate::approval::policy`]).
    fn gate(&self) -> Gate<'_> {
        Gate {
            signer: Signer::new(b"k".to_vec()),
            user: &self.user,
            sid: &self.sid,
            ttl: Duration::from_secs(600),
            settings: crate::approval::read_settings(None, &self.user),
            calendar: None,
            entities: None,
            project: None,
            zone: None,
        }
    }

    /// The same plans, run by another runner (a later turn).
    fn later(&self, runner: Runner) -> Turn {
        let mut t = Turn::new(runner);
        t.plans = Plans(Mutex::new(self.plans.0.lock().unwrap().clone()));
        (t.user, t.sid) = (self.user.clone(), self.sid.clone());
        t
    }

    async fn create(&self, plan: AgentPlan) -> (StreamedRun, Vec<StreamEvent>) {
        self.call("agent_create_plan", serde_json::to_value(plan).unwrap()).await
    }
}

async fn read_all(mut body: SseBody) -> Vec<StreamEvent> {
    use http_body_util::BodyExt;
    let (mut dec, mut out) = (SseDecoder::new(), vec![]);
    while let Some(Ok(frame)) = body.frame().await {
        let Ok(data) = frame.into_data() else { continue };
        for f in dec.feed(&data).unwrap() {
            out.push(serde_json::from_str(&f.data).unwrap());
        }
    }
    out
}

fn result(ran: &StreamedRun) -> serde_json::Value {
    serde_json::from_str(&ran.run.content).unwrap()
}

#[tokio::test(start_paused = true)]
async fn stages_run_in_order_and_a_parallel_stages_steps_at_once() {
    let runner = Runner::with(&[("a", done(50)), ("b", done(10)), ("c", done(5)), ("d", done(5))]);
    let turn = Turn::new(runner);
    let p = plan(
        PlanMode::AutoExecute,
        vec![
            (StageMode::Parallel, vec![step("a", &[]), step("b", &[])]),
            (StageMode::Sequence, vec![step("c", &["a"]), step("d", &["c"])]),
        ],
    );
    let (ran, _) = turn.create(p).await;
    assert_eq!(turn.runner.order(), ["start a", "start b", "end b", "end a", "start c", "end c", "start d", "end d"]);
    assert_eq!(turn.runner.most.load(Ordering::SeqCst), 2);
    let rec = turn.plans.only();
    assert_eq!(rec.status, PlanStatus::Completed);
    assert!(rec.steps.iter().all(|s| s.status == StepStatus::Done && s.attempts == 1));
    assert_eq!(rec.step("a").summary.as_deref(), Some("did a"));
    assert_eq!(result(&ran)["next"], "answer the user from the steps' results");
    assert!(ran.run.ok && ran.interrupted.is_none());
    let brief_c = &turn.runner.briefs.lock().unwrap()[2];
    assert!(brief_c.contains("Result of step a") && brief_c.contains("did a"), "{brief_c}");
}

#[tokio::test(start_paused = true)]
async fn a_parallel_stage_keeps_to_the_step_concurrency() {
    let runner = Runner::with(&[("a", done(10)), ("b", done(10)), ("c", done(10)), ("d", done(10))]);
    let mut turn = Turn::new(runner);
    turn.cap = 2;
    let steps = ["a", "b", "c", "d"].iter().map(|s| step(s, &[])).collect();
    turn.create(plan(PlanMode::AutoExecute, vec![(StageMode::Parallel, steps)])).await;
    assert_eq!(turn.runner.most.load(Ordering::SeqCst), 2);
    assert_eq!(turn.plans.only().status, PlanStatus::Completed);
}

#[tokio::test(start_paused = true)]
async fn a_failed_step_fails_the_plan_and_skips_the_steps_that_need_it() {
    let failed =
        Exec { outcome: Outcome::Failed { code: "llm_error", message: "broke".into(), retryable: false }, ..done(1) };
    let turn = Turn::new(Runner::with(&[("a", failed)]));
    let p = plan(
        PlanMode::AutoExecute,
        vec![(StageMode::Sequence, vec![step("a", &[]), step("b", &["a"]), step("c", &[])])],
    );
    let (ran, events) = turn.create(p).await;
    let rec = turn.plans.only();
    assert_eq!(rec.status, PlanStatus::Failed);
    assert_eq!((rec.step("a").status, rec.step("a").error.as_deref()), (StepStatus::Failed, Some("broke")));
    assert_eq!(rec.step("b").status, StepStatus::Skipped);
    assert_eq!(rec.step("c").status, StepStatus::Done, "a step that does not need it still runs");
    assert_eq!(turn.runner.order(), ["start a", "end a", "start c", "end c"]);
    assert!(!ran.run.ok);
    assert!(events.iter().any(
        |e| matches!(e, StreamEvent::StepComplete { step_id, status: StepStatus::Skipped, .. } if step_id == "b")
    ));
}

#[tokio::test(start_paused = true)]
async fn a_step_sends_its_events_in_order_without_its_words() {
    let op = StreamEvent::ToolCall {
        tool_call: call("x", "search_project", "{}"),
        origin: ToolOrigin::PlanStep { plan_id: "p".into(), step_id: "a".into() },
    };
    let turn = Turn::new(Runner::with(&[("a", Exec { events: vec![op], ..done(1) })]));
    let (_, events) = turn.create(plan(PlanMode::AutoExecute, vec![(StageMode::Sequence, vec![step("a", &[])])])).await;
    let kinds: Vec<&str> = events.iter().map(|e| e.kind()).collect();
    assert_eq!(
        kinds,
        ["plan_created", "step_start", "executor_spawned", "tool_call", "executor_result", "step_complete"]
    );
}

/// A plan whose step `a` deletes, then a step `b`: created, paused.
async fn paused() -> (Turn, StreamedRun, Vec<StreamEvent>) {
    let calls = vec![call("s1", "search_project", "{}"), call("del", "delete_entity", r#"{"kind":"task","id":"t1"}"#)];
    let turn = Turn::new(Runner::with(&[("a", Exec { calls, ..done(1) })]));
    let p = plan(
        PlanMode::AutoExecute,
        vec![(StageMode::Sequence, vec![step("a", &[])]), (StageMode::Sequence, vec![step("b", &[])])],
    );
    let (ran, events) = turn.create(p).await;
    (turn, ran, events)
}

#[tokio::test(start_paused = true)]
async fn a_steps_delete_waits_for_an_approval_and_the_plan_pauses_after_its_stage() {
    let (turn, ran, events) = paused().await;
    let rec = turn.plans.only();
    assert_eq!(rec.status, PlanStatus::WaitingForApproval);
    let a = rec.step("a");
    assert_eq!(a.status, StepStatus::WaitingForApproval);
    assert_eq!(a.waiting.len(), 1);
    assert_eq!(a.waiting[0].tool_call.id, "del");
    assert_eq!(a.waiting[0].summary, "Delete the task t1");
    let last = a.resume.iter().rposition(|m| m.role == Role::Assistant).unwrap();
    assert_eq!(a.resume[last].tool_calls.len(), 2, "its messages end with the waiting round");
    assert_eq!(a.resume.len(), last + 2, "and the result of the call that ran (search), not of the waiting one");
    assert_eq!(rec.step("b").status, StepStatus::Pending, "later stages wait");
    assert!(turn.tools.0.lock().unwrap().is_empty(), "nothing ran outside the executor");
    // The turn gets the approval, signed for this user's session over the
    // call as stored, naming the step.
    assert_eq!(ran.waiting.len(), 1);
    let (c, p) = &ran.waiting[0];
    assert_eq!((c.id.as_str(), p.tool_call_id.as_str()), ("del", "del"));
    assert_eq!(p.step, Some(PlanStepRef { plan_id: rec.id.clone(), step_id: "a".into() }));
    assert!(Signer::new(b"k".to_vec()).verify(&p.approval_id, &turn.user, &turn.sid, c));
    assert_eq!(a.waiting[0].approval_id, p.approval_id);
    assert!(result(&ran)["next"].as_str().unwrap().contains("Approve / Deny"));
    assert_eq!(result(&ran)["steps"][0]["waiting_for_approval"][0], "Delete the task t1");
    assert!(!events.iter().any(|e| e.kind() == "confirmation_required"));
    assert_eq!(turn.runner.order(), ["start a", "end a"]);
}

#[tokio::test(start_paused = true)]
async fn a_stage_cut_off_while_a_step_waits_leaves_nothing_waiting() {
    let delete = call("del", "delete_entity", r#"{"kind":"task","id":"t1"}"#);
    let waits = Exec { calls: vec![delete], ..done(1) };
    let cut = Exec { outcome: Outcome::Stopped, ..done(5) };
    let turn = Turn::new(Runner::with(&[("a", waits), ("b", cut)]));
    let (ran, _) = turn
        .create(plan(PlanMode::AutoExecute, vec![(StageMode::Parallel, vec![step("a", &[]), step("b", &[])])]))
        .await;
    assert_eq!(ran.interrupted, Some(Outcome::Stopped));
    assert!(ran.waiting.is_empty(), "the turn asks nothing: it was cut off");
    let rec = turn.plans.only();
    assert_eq!(rec.status, PlanStatus::Running, "resumable");
    let a = rec.step("a");
    assert_eq!(a.status, StepStatus::Pending, "it runs again from its brief on continue");
    assert!(a.waiting.is_empty() && a.resume.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_plan_waiting_for_approvals_is_not_continued_by_the_tool() {
    let (turn, _, _) = paused().await;
    let later = turn.later(Runner::default());
    let (ran, _) = later.call("agent_continue_plan", serde_json::json!({"decision": "continue"})).await;
    assert_eq!(result(&ran)["error"]["code"], "plan_decision_not_applicable");
    assert!(later.runner.order().is_empty(), "nothing ran");
}

/// The answer to the paused plan's call, then `continue` (what the turn does).
async fn answer_and_resume(turn: &Turn, content: &str, ran: Option<bool>) -> Turn {
    let plan_id = turn.plans.only().id;
    let step = PlanStepRef { plan_id: plan_id.clone(), step_id: "a".into() };
    let answer = StepAnswer { step, tool_call_id: "del".into(), content: content.into(), ran };
    assert_eq!(answered(&turn.plans, &turn.user, &turn.sid, &[answer]).await.unwrap(), [plan_id]);
    let rec = turn.plans.only();
    assert_eq!((rec.status, rec.step("a").status), (PlanStatus::Running, StepStatus::Pending));
    let later = turn.later(Runner::default());
    later.call("agent_continue_plan", serde_json::json!({"decision": "continue"})).await;
    later
}

#[tokio::test(start_paused = true)]
async fn a_denial_is_the_calls_result_the_executor_reads_and_the_plan_goes_on() {
    let (turn, _, _) = paused().await;
    let later = answer_and_resume(&turn, "denied by the user: keep it", None).await;
    assert_eq!(later.runner.order(), ["start a", "end a", "start b", "end b"], "from step a, then the rest");
    let given = later.runner.given.lock().unwrap()[0].clone();
    let last = given.last().unwrap();
    assert_eq!((last.role, last.tool_call_id.as_deref()), (Role::Tool, Some("del")));
    assert_eq!(last.content.as_deref(), Some("denied by the user: keep it"));
    assert!(given.iter().any(|m| m.tool_calls.iter().any(|c| c.id == "s1")), "its own messages, not a new brief");
    let rec = later.plans.only();
    assert_eq!(rec.status, PlanStatus::Completed);
    assert!(rec.step("a").calls.iter().all(|c| c.tool_call.id != "del"), "a denied call did not run");
    assert!(later.tools.0.lock().unwrap().is_empty());
}

#[tokio::test(start_paused = true)]
async fn an_approved_call_that_ran_is_one_of_the_steps_calls() {
    let (turn, _, _) = paused().await;
    let later = answer_and_resume(&turn, r#"{"ok":true,"deleted":"t1"}"#, Some(true)).await;
    let rec = later.plans.only();
    assert_eq!(rec.status, PlanStatus::Completed);
    let del = rec.step("a").calls.iter().find(|c| c.tool_call.id == "del").expect("recorded");
    assert!(del.ok);
    assert!(later.tools.0.lock().unwrap().is_empty(), "the plan never runs it again: the answer ran it");
}

#[tokio::test(start_paused = true)]
async fn answers_to_a_plan_that_no_longer_waits_change_nothing() {
    let (turn, _, _) = paused().await;
    turn.call("agent_continue_plan", serde_json::json!({"decision": "reject", "reason": "no"})).await;
    let step = PlanStepRef { plan_id: turn.plans.only().id, step_id: "a".into() };
    let answer = StepAnswer { step, tool_call_id: "del".into(), content: "x".into(), ran: None };
    assert!(answered(&turn.plans, &turn.user, &turn.sid, &[answer]).await.unwrap().is_empty());
    assert_eq!(turn.plans.only().status, PlanStatus::Rejected);
}

#[tokio::test(start_paused = true)]
async fn an_interrupted_step_starts_no_new_one_and_the_plan_resumes_on_continue() {
    let cut = Exec { outcome: Outcome::Stopped, round: Some(vec![call("r1", "search_project", "{}")]), ..done(1) };
    let turn = Turn::new(Runner::with(&[("a", cut)]));
    let p = plan(PlanMode::AutoExecute, vec![(StageMode::Sequence, vec![step("a", &[]), step("b", &[])])]);
    let (ran, _) = turn.create(p).await;
    assert_eq!(ran.interrupted, Some(Outcome::Stopped));
    assert_eq!(turn.runner.order(), ["start a", "end a"], "b never starts");
    let rec = turn.plans.only();
    assert_eq!(rec.status, PlanStatus::Running, "resumable");
    assert_eq!(rec.step("a").status, StepStatus::Pending);
    assert_eq!(rec.step("a").calls[0].tool_call.id, "r1", "the round it finished is in the record");

    let mut resumed = Turn::new(Runner::default());
    resumed.plans = Plans(Mutex::new(turn.plans.0.lock().unwrap().clone()));
    let (ran, _) = resumed.call("agent_continue_plan", serde_json::json!({"decision": "continue"})).await;
    assert!(ran.interrupted.is_none());
    assert_eq!(resumed.runner.order(), ["start a", "end a", "start b", "end b"]);
    let rec = resumed.plans.only();
    assert_eq!((rec.status, rec.step("a").attempts), (PlanStatus::Completed, 2));
    let brief = &resumed.runner.briefs.lock().unwrap()[0];
    assert!(brief.contains("do not repeat them") && brief.contains("search_project"), "{brief}");
}

#[tokio::test(start_paused = true)]
async fn the_executors_usage_is_the_plan_calls() {
    let used = |n| Exec { usage: Usage { prompt_tokens: n, completion_tokens: 1, total_tokens: n + 1 }, ..done(1) };
    let turn = Turn::new(Runner::with(&[("a", used(10)), ("b", used(5))]));
    let (ran, _) = turn
        .create(plan(PlanMode::AutoExecute, vec![(StageMode::Parallel, vec![step("a", &[]), step("b", &[])])]))
        .await;
    assert_eq!((ran.usage.prompt_tokens, ran.usage.completion_tokens), (15, 2));
}

#[tokio::test]
async fn an_invalid_plan_runs_nothing_and_names_every_problem() {
    let turn = Turn::new(Runner::default());
    let mut bad = step("a", &["a"]);
    bad.tools = vec!["agent_create_plan".into()];
    let (ran, _) = turn.create(plan(PlanMode::AutoExecute, vec![(StageMode::Sequence, vec![bad])])).await;
    assert_eq!(result(&ran)["error"]["code"], "invalid_plan");
    assert_eq!(result(&ran)["error"]["problems"].as_array().unwrap().len(), 2);
    assert!(turn.plans.0.lock().unwrap().is_empty() && turn.runner.order().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_draft_waits_for_approval_and_a_new_plan_supersedes_it() {
    let turn = Turn::new(Runner::default());
    let (ran, events) = turn.create(plan(PlanMode::DraftOnly, vec![(StageMode::Sequence, vec![step("a", &[])])])).await;
    assert_eq!(turn.plans.only().status, PlanStatus::AwaitingApproval);
    assert!(turn.runner.order().is_empty(), "a draft does not run");
    assert!(events.iter().any(|e| matches!(e, StreamEvent::PlanReadyForReview { .. })));
    let draft = result(&ran)["plan_id"].as_str().unwrap().to_string();
    let (ran, _) = turn.create(plan(PlanMode::AutoExecute, vec![(StageMode::Sequence, vec![step("b", &[])])])).await;
    assert_eq!(result(&ran)["superseded"][0]["plan_id"], draft.as_str());
    let (ran, _) = turn.call("agent_continue_plan", serde_json::json!({"decision": "approve", "plan_id": draft})).await;
    assert_eq!(result(&ran)["error"]["code"], "plan_decision_not_applicable", "a replaced plan never runs");
    assert_eq!(turn.runner.order(), ["start b", "end b"]);
}

#[tokio::test(start_paused = true)]
async fn a_reviewed_plan_runs_only_when_the_reviewer_approves() {
    let runner =
        Runner { review: Some(Ok(r#"{"verdict":"reject","reason":"too risky"}"#.into())), ..Runner::default() };
    let turn = Turn::new(runner);
    turn.create(plan(PlanMode::AgentReview, vec![(StageMode::Sequence, vec![step("a", &[])])])).await;
    let rec = turn.plans.only();
    assert_eq!((rec.status, rec.reason.as_deref()), (PlanStatus::Rejected, Some("too risky")));
    assert!(turn.runner.order().is_empty());

    let runner = Runner { review: Some(Err(AskError::OutOfTime)), ..Runner::default() };
    let turn = Turn::new(runner);
    turn.create(plan(PlanMode::AgentReview, vec![(StageMode::Sequence, vec![step("a", &[])])])).await;
    assert_eq!(turn.plans.only().reason.as_deref(), Some("the review ran out of time"), "no review, no run");

    let runner = Runner { review: Some(Ok(r#"{"verdict":"approve","reason":"fine"}"#.into())), ..Runner::default() };
    let turn = Turn::new(runner);
    turn.create(plan(PlanMode::AgentReview, vec![(StageMode::Sequence, vec![step("a", &[])])])).await;
    assert_eq!(turn.plans.only().status, PlanStatus::Completed);
}

#[tokio::test]
async fn a_decision_without_an_open_plan_says_so() {
    let turn = Turn::new(Runner::default());
    let (ran, _) = turn.call("agent_continue_plan", serde_json::json!({"decision": "approve"})).await;
    assert_eq!(result(&ran)["error"]["code"], "no_open_plan");
    let (ran, _) =
        turn.call("agent_continue_plan", serde_json::json!({"decision": "approve", "plan_id": "nope"})).await;
    assert_eq!(result(&ran)["error"]["code"], "plan_not_found");
}

#[tokio::test]
async fn a_step_asks_the_turns_policy_for_its_own_tools_only() {
    let turn = Turn::new(Runner::default());
    let inner = turn.gate();
    let step = PlanStepRef { plan_id: "p".into(), step_id: "a".into() };
    let gate = StepApprovals { inner: &inner, allowed: vec![ToolName::DeleteEntity, ToolName::UpdateEntity], step };
    let one_update = [call("u1", "update_entity", "{}"), call("s", "search_project", "{}")];
    assert!(gate.waits(&one_update).await.iter().all(Option::is_none), "one update runs");
    let two_updates = [call("u1", "update_entity", "{}"), call("u2", "update_entity", "{}")];
    assert!(gate.waits(&two_updates).await.iter().all(Option::is_some), "several updates wait, as in a turn");
    let w = gate.waits(&[call("d", "delete_entity", "{}"), call("s", "search_project", "{}")]).await;
    assert_eq!(w[0].as_ref().unwrap().step.as_ref().unwrap().step_id, "a");
    assert!(w[1].is_none());
    let step = PlanStepRef { plan_id: "p".into(), step_id: "a".into() };
    let not_given = StepApprovals { inner: &inner, allowed: vec![], step };
    assert!(not_given.waits(&[call("d", "delete_entity", "{}")]).await[0].is_none(), "refused by the step's tools");
}

#[tokio::test]
async fn a_step_runs_only_the_tools_it_was_given() {
    let inner = Tools::default();
    let tools = StepTools { inner: &inner, allowed: vec![ToolName::SearchProject] };
    let turn = Turn::new(Runner::default());
    let refused = tools.run(&turn.user, &turn.scope, &call("x", "delete_entity", "{}")).await;
    assert!(refused.content.contains("tool_not_in_step"));
    assert!(tools.run(&turn.user, &turn.scope, &call("y", "search_project", "{}")).await.ok);
    assert_eq!(*inner.0.lock().unwrap(), ["y"]);
    assert_eq!(tools.offered(&turn.scope).len(), 1);
}

#[test]
fn plan_tools_are_offered_in_a_project_and_handled_with_the_stream() {
    let turn = Turn::new(Runner::default());
    assert_eq!(definitions(&turn.scope, &[]).len(), 2);
    let global = TurnScope { context_type: ContextType::Global, entity_id: None, focus: None, timezone: None };
    assert!(definitions(&global, &[]).is_empty());
    let dump = TurnScope { context_type: ContextType::BrainDump, ..turn.scope.clone() };
    assert!(definitions(&dump, &[]).is_empty(), "a brain dump's changes go as one batch, not a plan");
    let layer =
        PlanLayer { store: &turn.plans, approvals: None, tools: &turn.tools, step_concurrency: 1, step_max_rounds: 1 };
    assert!(
        layer.handles("agent_create_plan") && layer.handles("agent_continue_plan") && !layer.handles("search_project")
    );
    assert!(layer.streams(&call("c", "agent_create_plan", "{}")));
}

/// A step's `tools` are named from the tools offered beside the plan tools
/// (an `enum` a constraining model server holds the model to), never
/// `read_tool_output` or the plan tools themselves: a small model named
/// steps' tools `research` and `create`, and the plan was refused.
#[test]
fn a_steps_tools_are_named_from_the_tools_offered() {
    let turn = Turn::new(Runner::default());
    let offered: Vec<serde_json::Value> = ["create_task", "search_project", "web_visit", "read_tool_output"]
        .iter()
        .map(|n| serde_json::json!({"type": "function", "function": {"name": n}}))
        .collect();
    let defs = definitions(&turn.scope, &offered);
    let step = &defs[0]["function"]["parameters"]["properties"]["stages"]["items"]["properties"]["steps"]["items"];
    assert_eq!(
        step["properties"]["tools"]["items"]["enum"],
        serde_json::json!(["create_task", "search_project", "web_visit"])
    );
}

#[test]
fn reviewer_verdicts() {
    assert_eq!(verdict(r#"{"verdict":"approve","reason":"fine"}"#), (true, "fine".into()));
    assert!(!verdict("Sure: {\"verdict\": \"reject\", \"reason\": \"deletes\"}").0);
    assert!(!verdict("looks good").0);
}
