//! Plans end to end (docs/plans.md): the real stream handler, the ontology on
//! DynamoDB Local, and a scripted model that answers the planner and each
//! step's executor by what the request is (executors' system prompts name
//! their step), so parallel executors can be scripted whatever order their
//! requests arrive in.

use serde_json::{json, Value};
use shared::entities::store::DynamoEntityStore;
use shared::entities::{EntityKind, EntityService, NewProject};
use shared::ids::{ProjectId, SessionId, UserId};
use shared::plan::store::{DynamoPlanStore, PlanStore};
use shared::plan::{PlanRecord, PlanStatus, StepStatus, ToolOrigin};
use shared::session::store::{SessionLog, Sessions};
use shared::sse::StreamEvent;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tests::{Reply, Step, TestApp, Turn};

fn user() -> UserId {
    UserId::parse("alice").unwrap()
}

fn service(t: &TestApp) -> EntityService {
    EntityService::new(DynamoEntityStore::new(t.dynamo.clone(), t.table.clone()))
}

async fn project(t: &TestApp) -> ProjectId {
    let p = NewProject { name: "Launch".into(), description: None, state: Default::default(), context: None };
    service(t).create_project(&user(), p).await.unwrap().data.project.id
}

fn in_project(p: &ProjectId, message: &str, session: Option<&str>) -> Value {
    let mut v = json!({"message": message, "context_type": "project", "projectFocus": {"projectId": p.to_string()}});
    if let Some(s) = session {
        v["session_id"] = json!(s);
    }
    v
}

/// Names of the entities of `kind` in the project.
async fn names(t: &TestApp, p: &ProjectId, kind: EntityKind) -> Vec<String> {
    let page = service(t).list(&user(), p, kind, Default::default()).await.unwrap();
    let mut v: Vec<String> = page.items.iter().map(|e| e.fields.name().to_string()).collect();
    v.sort();
    v
}

/// How an executor answers: given its request and which of its requests this
/// is (0 = the first of its first attempt, counting every attempt).
type StepScript = Box<dyn Fn(&Value, usize) -> Reply + Send + Sync>;

/// The scripted model's side of a plan: the planner's replies in order, and
/// per step id how its executor answers.
#[derive(Default)]
struct Script {
    planner: Mutex<VecDeque<Reply>>,
    steps: HashMap<String, StepScript>,
    asked: Mutex<HashMap<String, usize>>,
    reviewer: Mutex<Option<Reply>>,
}

impl Script {
    fn reply(&self, req: &Value) -> Reply {
        let system = tests::system_text(req);
        if system.starts_with("You review plans") {
            return self.reviewer.lock().unwrap().take().expect("one review scripted");
        }
        if let Some(rest) = system.split("(plan step ").nth(1) {
            let step = rest.split(')').next().unwrap().to_string();
            let n = {
                let mut asked = self.asked.lock().unwrap();
                let n = asked.entry(step.clone()).or_default();
                *n += 1;
                *n - 1
            };
            return (self.steps.get(&step).unwrap_or_else(|| panic!("no script for step {step}")))(req, n);
        }
        self.planner.lock().unwrap().pop_front().expect("a scripted planner reply")
    }

    fn asked(&self, step: &str) -> usize {
        self.asked.lock().unwrap().get(step).copied().unwrap_or(0)
    }
}

fn install(t: &TestApp, script: Script) -> Arc<Script> {
    let script = Arc::new(script);
    let s = script.clone();
    t.llm.set_default(Reply::dynamic(move |req| s.reply(req)));
    script
}

/// A reply held back `d` before its first chunk (a model's time to first token).
fn after(d: Duration, reply: Reply) -> Reply {
    match reply {
        Reply::Stream(mut steps) => {
            steps.insert(0, Step::Delay(d));
            Reply::Stream(steps)
        }
        other => other,
    }
}

/// Whether the executor's request already holds a tool result (its second round).
fn has_results(req: &Value) -> bool {
    req["messages"].as_array().unwrap().iter().any(|m| m["role"] == "tool")
}

/// An executor that calls `calls` in its first round and then answers `summary`.
fn calls_then(delay: Duration, calls: Vec<(&'static str, Value)>, summary: &'static str) -> StepScript {
    Box::new(move |req, _| {
        let reply = if has_results(req) {
            Reply::text(&[summary])
        } else {
            let c: Vec<(&str, Value)> = calls.iter().map(|(n, a)| (*n, a.clone())).collect();
            Reply::tool_calls(&c)
        };
        after(delay, reply)
    })
}

fn step(id: &str, title: &str, intent: &str, tools: &[&str], inputs: &[&str]) -> Value {
    json!({"id": id, "title": title, "intent": intent, "executor": "research", "tools": tools, "inputs": inputs})
}

/// Three parallel research steps, then a summary document and a task list.
fn two_stage_plan(mode: &str) -> Value {
    json!({"goal": "Competitor summary and task list", "mode": mode, "stages": [
        {"id": "research", "name": "Research", "mode": "parallel", "steps": [
            step("r1", "Research Acme", "research", &["search_project"], &[]),
            step("r2", "Research Globex", "research", &["search_project"], &[]),
            step("r3", "Research Initech", "research", &["search_project"], &[]),
        ]},
        {"id": "write", "name": "Write", "mode": "sequence", "steps": [
            step("w1", "Write the summary", "create", &["create_document"], &["r1", "r2", "r3"]),
            step("w2", "Create the task list", "create", &["create_task"], &["w1"]),
        ]},
    ]})
}

fn two_stage_script(delay: Duration, planner: Vec<Reply>) -> Script {
    let mut steps: HashMap<String, StepScript> = HashMap::new();
    for (id, who) in [("r1", "Acme"), ("r2", "Globex"), ("r3", "Initech")] {
        let summary: &'static str = Box::leak(format!("{who} is cheaper than us").into_boxed_str());
        steps.insert(id.into(), calls_then(delay, vec![("search_project", json!({"query": who}))], summary));
    }
    let doc = json!({"title": "Competitor summary", "content": "Acme, Globex and Initech undercut us."});
    steps.insert("w1".into(), calls_then(delay, vec![("create_document", doc)], "Wrote the summary"));
    let tasks = vec![
        ("create_task", json!({"title": "Match Acme's price"})),
        ("create_task", json!({"title": "Call Globex's customers"})),
    ];
    steps.insert("w2".into(), calls_then(delay, tasks, "Created two tasks"));
    Script { planner: Mutex::new(planner.into()), steps, ..Default::default() }
}

fn plan_events(turn: &Turn) -> Vec<String> {
    turn.events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::PlanCreated { .. } => Some("plan_created".to_string()),
            StreamEvent::StepStart { step_id, .. } => Some(format!("step_start {step_id}")),
            StreamEvent::StepComplete { step_id, status, .. } => Some(format!("step_complete {step_id} {status:?}")),
            StreamEvent::ApprovalRequired { origin: ToolOrigin::PlanStep { step_id, .. }, .. } => {
                Some(format!("approval_required {step_id}"))
            }
            _ => None,
        })
        .collect()
}

async fn plan_record(t: &TestApp, sid: &str, plan_id: &str) -> PlanRecord {
    let store = DynamoPlanStore::new(t.dynamo.clone(), t.table.clone());
    store.load(&user(), &SessionId::parse(sid).unwrap(), plan_id).await.unwrap().expect("the plan is stored").0
}

fn plan_id(turn: &Turn) -> String {
    turn.events
        .iter()
        .find_map(|e| match e {
            StreamEvent::PlanCreated { plan_id, .. } => Some(plan_id.clone()),
            _ => None,
        })
        .expect("plan_created")
}

/// The last tool message of the planner's last request: the plan's result.
fn plan_result(t: &TestApp) -> Value {
    let reqs = t.llm.requests();
    let planner = reqs.iter().rev().find(|r| {
        !tests::system_text(r).contains("(plan step ")
            && r["messages"].as_array().unwrap().iter().any(|m| m["role"] == "tool")
    });
    let msgs = planner.expect("a planner request after the plan").clone();
    let last = msgs["messages"].as_array().unwrap().iter().rev().find(|m| m["role"] == "tool").unwrap().clone();
    serde_json::from_str(last["content"].as_str().unwrap()).unwrap()
}

#[tokio::test]
async fn a_two_stage_plan_runs_research_in_parallel_under_the_cap_then_writes_in_order() {
    let t = TestApp::with_config(|c| c.plan_step_concurrency = 2).await;
    let p = project(&t).await;
    let script = install(
        &t,
        two_stage_script(
            Duration::from_millis(200),
            vec![
                Reply::tool_calls(&[("agent_create_plan", two_stage_plan("auto_execute"))]),
                Reply::text(&["The summary and two tasks are ready."]),
            ],
        ),
    );
    let turn = t.turn("alice", in_project(&p, "Research three competitors, then a summary doc and tasks", None)).await;
    assert_eq!(turn.error_code(), None, "{:?}", turn.events);
    assert_eq!(turn.text(), "The summary and two tasks are ready.", "executors' words stay out of the answer");

    // The ontology: one summary document and two tasks, nothing twice.
    let docs = names(&t, &p, EntityKind::Document).await;
    assert_eq!(docs.iter().filter(|d| *d == "Competitor summary").count(), 1, "{docs:?}");
    assert_eq!(names(&t, &p, EntityKind::Task).await, ["Call Globex's customers", "Match Acme's price"]);

    // The turn's usage counts the executors' requests: the planner's answer
    // and each executor's closing answer report one completion token each.
    match turn.done() {
        StreamEvent::Done { usage: Some(u), .. } => assert_eq!(u.completion_tokens, 6, "{u:?}"),
        other => panic!("{other:?}"),
    }

    // Never more executors at the model than the cap, and the cap was used.
    assert_eq!(t.llm.max_in_flight(), 2);
    for s in ["r1", "r2", "r3", "w1", "w2"] {
        assert_eq!(script.asked(s), 2, "step {s}: one tool round and one answer");
    }

    // The event order: the planner's call, the plan, three research steps
    // (two at once, then the third), then the writes one after the other.
    let kinds = turn.kinds();
    let pos = |k: &str| kinds.iter().position(|x| *x == k).unwrap();
    assert!(pos("tool_call") < pos("plan_created"));
    let ev = plan_events(&turn);
    assert_eq!(ev[0], "plan_created");
    assert_eq!(
        &ev[ev.len() - 4..],
        ["step_start w1", "step_complete w1 Done", "step_start w2", "step_complete w2 Done"]
    );
    let research: Vec<&String> = ev[1..7].iter().collect();
    assert_eq!(research.iter().filter(|e| e.starts_with("step_complete r")).count(), 3, "{ev:?}");
    assert!(ev[1].starts_with("step_start") && ev[2].starts_with("step_start"), "two start at once: {ev:?}");
    let last_plan_event = kinds.iter().rposition(|k| *k == "step_complete").unwrap();
    let planner_result = turn
        .events
        .iter()
        .rposition(|e| matches!(e, StreamEvent::ToolResult { origin: ToolOrigin::Planner, .. }))
        .unwrap();
    assert!(last_plan_event < planner_result && planner_result < pos("text_delta"), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"done"));

    // Every tool event names its origin: the planner's one call, and each
    // step's calls under that step, between its start and its completion.
    let pid = plan_id(&turn);
    let mut open: Vec<String> = vec![];
    let mut step_calls: HashMap<String, usize> = HashMap::new();
    for e in &turn.events {
        match e {
            StreamEvent::StepStart { step_id, .. } => open.push(step_id.clone()),
            StreamEvent::StepComplete { step_id, .. } => open.retain(|s| s != step_id),
            StreamEvent::ToolCall { tool_call, origin } => match origin {
                ToolOrigin::Planner => assert_eq!(tool_call.function.name, "agent_create_plan"),
                ToolOrigin::PlanStep { plan_id, step_id } => {
                    assert_eq!(plan_id, &pid);
                    assert!(open.contains(step_id), "{step_id} is running");
                    *step_calls.entry(step_id.clone()).or_default() += 1;
                }
            },
            _ => {}
        }
    }
    assert_eq!(
        step_calls,
        HashMap::from([("r1", 1), ("r2", 1), ("r3", 1), ("w1", 1), ("w2", 2)].map(|(k, v)| (k.to_string(), v)))
    );

    // step_complete carries what the step made.
    let outputs = |id: &str| {
        turn.events
            .iter()
            .find_map(|e| match e {
                StreamEvent::StepComplete { step_id, outputs, .. } if step_id == id => Some(outputs.clone()),
                _ => None,
            })
            .unwrap()
    };
    assert_eq!(outputs("w1").doc_ids.len(), 1);
    assert_eq!(outputs("w2").entity_ids.len(), 2);
    assert!(outputs("r1").entity_ids.is_empty());

    // Stored: the plan with every step done; the session's log holds the
    // planner's call only (the steps' calls are in the plan record).
    let sid = turn.session_id();
    let rec = plan_record(&t, &sid, &pid).await;
    assert_eq!(rec.status, PlanStatus::Completed);
    assert!(rec.steps.iter().all(|s| s.status == StepStatus::Done && s.attempts == 1), "{:?}", rec.steps);
    assert_eq!(rec.step("w2").calls.len(), 2);
    let log = t.store().recent_messages(&user(), &SessionId::parse(&sid).unwrap(), 50).await.unwrap();
    let logged: Vec<&str> = log.iter().flat_map(|m| &m.tool_calls).map(|c| c.function.name.as_str()).collect();
    assert_eq!(logged, ["agent_create_plan"]);
    // The planner read the steps' results, not their conversations.
    let result = plan_result(&t);
    assert_eq!(result["status"], "completed");
    assert_eq!(result["steps"][0]["summary"], "Acme is cheaper than us");
}

#[tokio::test]
async fn an_invalid_plan_is_a_tool_error_the_model_reads_and_nothing_runs() {
    let t = TestApp::new().await;
    let p = project(&t).await;
    let bad = json!({"goal": "x", "stages": [{"id": "a", "name": "A", "mode": "sequence", "steps": [
        step("s1", "Write", "create", &["create_document"], &["s2"]),
        step("s2", "Delete the project", "update", &["list_projects", "no_such_tool"], &[]),
    ]}]});
    install(
        &t,
        Script {
            planner: Mutex::new(
                vec![Reply::tool_calls(&[("agent_create_plan", bad)]), Reply::text(&["I could not plan that."])].into(),
            ),
            ..Default::default()
        },
    );
    let turn = t.turn("alice", in_project(&p, "do it", None)).await;
    assert_eq!(turn.error_code(), None);
    assert!(!turn.kinds().contains(&"plan_created"));
    let result = plan_result(&t);
    assert_eq!(result["error"]["code"], "invalid_plan");
    let problems = result["error"]["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert_eq!(t.llm.request_count(), 2);
}

#[tokio::test]
async fn a_failing_step_is_reported_its_dependents_skipped_and_the_planner_told() {
    // With the dev events on, so each step's time is also checked.
    let t = TestApp::with_config(|c| c.dev_events = true).await;
    let p = project(&t).await;
    let plan = json!({"goal": "Two notes and a summary", "stages": [
        {"id": "a", "name": "Notes", "mode": "parallel", "steps": [
            step("n1", "Note one", "create", &["create_document"], &[]),
            step("n2", "Note two", "create", &["create_document"], &[]),
        ]},
        {"id": "b", "name": "Sum", "mode": "sequence", "steps": [
            step("s", "Summary", "create", &["create_document"], &["n2"]),
        ]},
    ]});
    let mut steps: HashMap<String, StepScript> = HashMap::new();
    steps.insert(
        "n1".into(),
        calls_then(Duration::ZERO, vec![("create_document", json!({"title": "Note one", "content": "1"}))], "ok"),
    );
    steps.insert(
        "n2".into(),
        Box::new(|_, _| Reply::Status(400, r#"{"error":{"message":"the model refused"}}"#.into())),
    );
    steps.insert("s".into(), Box::new(|_, _| panic!("a step whose input failed never runs")));
    let script = install(
        &t,
        Script {
            planner: Mutex::new(
                vec![
                    Reply::tool_calls(&[("agent_create_plan", plan)]),
                    Reply::text(&["Note one is written; note two failed, so there is no summary."]),
                ]
                .into(),
            ),
            steps,
            ..Default::default()
        },
    );
    let turn = t.turn("alice", in_project(&p, "notes", None)).await;
    assert_eq!(turn.error_code(), None, "{:?}", turn.events);
    let ev = plan_events(&turn);
    assert!(ev.contains(&"step_complete n1 Done".to_string()), "{ev:?}");
    assert!(ev.contains(&"step_complete n2 Failed".to_string()), "{ev:?}");
    assert_eq!(ev.last().unwrap(), "step_complete s Skipped");
    assert_eq!(script.asked("s"), 0);
    let timed: Vec<(String, bool)> = turn
        .events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Telemetry(shared::sse::Telemetry::PlanStep { step_id, ok, .. }) => {
                Some((step_id.clone(), *ok))
            }
            _ => None,
        })
        .collect();
    assert!(timed.contains(&("n1".to_string(), true)), "{timed:?}");
    assert!(timed.contains(&("n2".to_string(), false)), "{timed:?}");
    assert_eq!(timed.len(), 2, "a skipped step runs no executor: {timed:?}");
    let result = plan_result(&t);
    assert_eq!(result["status"], "failed");
    assert!(result["steps"][1]["error"].as_str().unwrap().contains("refused"), "{result}");
    assert!(result["next"].as_str().unwrap().contains("failed"));
    let rec = plan_record(&t, &turn.session_id(), &plan_id(&turn)).await;
    assert_eq!(rec.status, PlanStatus::Failed);
    assert_eq!(names(&t, &p, EntityKind::Document).await.iter().filter(|d| d.starts_with("Note")).count(), 1);
}

#[tokio::test]
async fn a_plan_cut_off_by_the_deadline_resumes_on_continue_without_repeating_a_write() {
    let t = TestApp::with_config(|c| c.turn_timeout = Duration::from_millis(2_500)).await;
    let p = project(&t).await;
    let plan = json!({"goal": "Three notes and a summary", "stages": [
        {"id": "a", "name": "Notes", "mode": "parallel", "steps": [
            step("n1", "Note one", "create", &["create_document"], &[]),
            step("n2", "Note two", "create", &["create_document"], &[]),
            step("n3", "Note three", "create", &["create_document"], &[]),
        ]},
        {"id": "b", "name": "Sum", "mode": "sequence", "steps": [
            step("s", "Summary", "create", &["create_document"], &["n1", "n2", "n3"]),
        ]},
    ]});
    let note = |title: &'static str| vec![("create_document", json!({"title": title, "content": "x"}))];
    let mut steps: HashMap<String, StepScript> = HashMap::new();
    steps.insert("n1".into(), calls_then(Duration::ZERO, note("Note one"), "wrote note one"));
    steps.insert("n2".into(), calls_then(Duration::ZERO, note("Note two"), "wrote note two"));
    // The third note is written, then its executor's closing answer outlasts
    // the turn. On resume its executor is told of the write it made.
    steps.insert(
        "n3".into(),
        Box::new(|req, n| match n {
            0 => Reply::tool_calls(&[("create_document", json!({"title": "Note three", "content": "x"}))]),
            1 => after(Duration::from_secs(20), Reply::text(&["wrote note three"])),
            _ => {
                let brief = req["messages"][1]["content"].as_str().unwrap();
                assert!(brief.contains("do not repeat them") && brief.contains("Note three"), "{brief}");
                Reply::text(&["note three was already written"])
            }
        }),
    );
    steps.insert("s".into(), calls_then(Duration::ZERO, note("Summary"), "wrote the summary"));
    let script = install(
        &t,
        Script {
            planner: Mutex::new(
                vec![
                    Reply::tool_calls(&[("agent_create_plan", plan)]),
                    Reply::tool_calls(&[("agent_continue_plan", json!({"decision": "continue"}))]),
                    Reply::text(&["All three notes and the summary are written."]),
                ]
                .into(),
            ),
            steps,
            ..Default::default()
        },
    );
    let first = t.turn("alice", in_project(&p, "three notes and a summary", None)).await;
    assert_eq!(first.error_code().as_deref(), Some("deadline_exceeded"), "{:?}", first.kinds());
    assert_eq!(first.kinds().last(), Some(&"done"));
    let ev = plan_events(&first);
    assert!(ev.contains(&"step_complete n1 Done".to_string()) && ev.contains(&"step_complete n2 Done".to_string()));
    assert!(ev.contains(&"step_complete n3 Pending".to_string()), "cut off, left to resume: {ev:?}");
    assert!(!ev.iter().any(|e| e.contains(" s")), "the next stage never started: {ev:?}");
    let sid = first.session_id();
    let pid = plan_id(&first);
    let rec = plan_record(&t, &sid, &pid).await;
    assert_eq!(rec.status, PlanStatus::Running, "resumable");
    assert_eq!(rec.step("n3").status, StepStatus::Pending);
    assert_eq!(rec.step("n3").calls.len(), 1, "the write it made is recorded with the step");

    let second = t.turn("alice", in_project(&p, "continue", Some(&sid))).await;
    assert_eq!(second.error_code(), None, "{:?}", second.events);
    let ev = plan_events(&second);
    assert_eq!(ev, ["step_start n3", "step_complete n3 Done", "step_start s", "step_complete s Done"]);
    // Each write happened once: the finished steps did not run again.
    let docs = names(&t, &p, EntityKind::Document).await;
    for title in ["Note one", "Note two", "Note three", "Summary"] {
        assert_eq!(docs.iter().filter(|d| *d == title).count(), 1, "{title}: {docs:?}");
    }
    assert_eq!((script.asked("n1"), script.asked("n2")), (2, 2));
    let rec = plan_record(&t, &sid, &pid).await;
    assert_eq!(rec.status, PlanStatus::Completed);
    assert_eq!(rec.step("n3").attempts, 2);
}

#[tokio::test]
async fn a_draft_only_plan_waits_for_the_users_approval_on_the_next_turn() {
    let t = TestApp::new().await;
    let p = project(&t).await;
    let plan = json!({"goal": "A brief", "mode": "draft_only", "stages": [
        {"id": "a", "name": "Write", "mode": "sequence", "steps": [step("w", "Write the brief", "create", &["create_document"], &[])]},
    ]});
    let mut steps: HashMap<String, StepScript> = HashMap::new();
    steps.insert(
        "w".into(),
        calls_then(Duration::ZERO, vec![("create_document", json!({"title": "Brief", "content": "b"}))], "wrote it"),
    );
    install(
        &t,
        Script {
            planner: Mutex::new(
                vec![
                    Reply::tool_calls(&[("agent_create_plan", plan)]),
                    Reply::text(&["Here is the plan: write the brief. Shall I go ahead?"]),
                    Reply::tool_calls(&[("agent_continue_plan", json!({"decision": "approve"}))]),
                    Reply::text(&["The brief is written."]),
                ]
                .into(),
            ),
            steps,
            ..Default::default()
        },
    );
    let first = t.turn("alice", in_project(&p, "write a brief, but show me the plan first", None)).await;
    assert_eq!(first.error_code(), None);
    let kinds = first.kinds();
    assert!(kinds.contains(&"plan_created") && kinds.contains(&"plan_ready_for_review"), "{kinds:?}");
    assert!(!kinds.contains(&"step_start"));
    assert!(!names(&t, &p, EntityKind::Document).await.contains(&"Brief".to_string()));
    let sid = first.session_id();
    assert_eq!(plan_record(&t, &sid, &plan_id(&first)).await.status, PlanStatus::AwaitingApproval);

    let second = t.turn("alice", in_project(&p, "yes, go ahead", Some(&sid))).await;
    assert_eq!(second.error_code(), None, "{:?}", second.events);
    assert_eq!(plan_events(&second), ["step_start w", "step_complete w Done"]);
    assert!(names(&t, &p, EntityKind::Document).await.contains(&"Brief".to_string()));
    assert_eq!(plan_record(&t, &sid, &plan_id(&first)).await.status, PlanStatus::Completed);
}

/// A one-step `draft_only` plan whose step writes the document `title`.
fn newsletter_draft(step_id: &str, month: &str) -> Value {
    json!({"goal": format!("{month} newsletter"), "mode": "draft_only", "stages": [
        {"id": "s", "name": "Write", "mode": "sequence", "steps": [
            step(step_id, &format!("Write the {month} newsletter"), "create", &["create_document"], &[])]},
    ]})
}

/// The content of the planner's last tool message (a plan tool's result).
fn last_tool_result(t: &TestApp) -> Value {
    plan_result(t)
}

/// Issue 25: an edited draft stays open and runs later. The documented way to
/// edit a draft is a second `agent_create_plan`; the first draft must then be
/// retired, so the user's second "Approve." finds nothing to approve instead
/// of running the replaced March plan.
#[tokio::test]
async fn an_edited_draft_replaces_the_first_and_a_second_approve_runs_nothing() {
    let t = TestApp::new().await;
    let p = project(&t).await;
    let mut steps: HashMap<String, StepScript> = HashMap::new();
    let march = json!({"title": "March newsletter", "content": "March news"});
    let april = json!({"title": "April newsletter", "content": "April news"});
    steps.insert("march".into(), calls_then(Duration::ZERO, vec![("create_document", march)], "wrote March"));
    steps.insert("april".into(), calls_then(Duration::ZERO, vec![("create_document", april)], "wrote April"));
    let approve = || Reply::tool_calls(&[("agent_continue_plan", json!({"decision": "approve"}))]);
    let script = install(
        &t,
        Script {
            planner: Mutex::new(
                vec![
                    Reply::tool_calls(&[("agent_create_plan", newsletter_draft("march", "March"))]),
                    Reply::text(&["Here is the plan for the March newsletter. Approve?"]),
                    Reply::tool_calls(&[("agent_create_plan", newsletter_draft("april", "April"))]),
                    Reply::text(&["Changed: the April newsletter. Approve?"]),
                    approve(),
                    Reply::text(&["The April newsletter is written."]),
                    approve(),
                    Reply::text(&["There is nothing left to approve."]),
                ]
                .into(),
            ),
            steps,
            ..Default::default()
        },
    );

    let first = t.turn("alice", in_project(&p, "Plan the March newsletter; show me the plan first", None)).await;
    assert_eq!(first.error_code(), None, "{:?}", first.events);
    let sid = first.session_id();
    let march_id = plan_id(&first);
    let second = t.turn("alice", in_project(&p, "make it April instead", Some(&sid))).await;
    assert_eq!(second.error_code(), None, "{:?}", second.events);
    let april_id = plan_id(&second);
    assert_ne!(march_id, april_id);

    let third = t.turn("alice", in_project(&p, "Approve.", Some(&sid))).await;
    assert_eq!(third.error_code(), None, "{:?}", third.events);
    assert_eq!(plan_events(&third), ["step_start april", "step_complete april Done"]);

    // The second "Approve.": the draft it would have found was replaced.
    let fourth = t.turn("alice", in_project(&p, "Approve.", Some(&sid))).await;
    assert_eq!(fourth.error_code(), None, "{:?}", fourth.events);
    assert_eq!(plan_events(&fourth), Vec::<String>::new(), "nothing runs on the second approval");
    assert_eq!(script.asked("march"), 0, "the replaced March draft never ran");
    let docs = names(&t, &p, EntityKind::Document).await;
    assert!(!docs.contains(&"March newsletter".to_string()), "{docs:?}");
    assert_eq!(docs.iter().filter(|d| *d == "April newsletter").count(), 1, "{docs:?}");
    let refused = last_tool_result(&t);
    assert_eq!(refused["error"]["code"], "no_open_plan", "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("nothing to approve"), "{refused}");
    assert_eq!(plan_record(&t, &sid, &april_id).await.status, PlanStatus::Completed);

    // The replaced draft is kept, `superseded` by the April one, in the plan
    // history; the April plan's creation said so in its result, which the
    // session's log keeps.
    let march = plan_record(&t, &sid, &march_id).await;
    assert_eq!((march.status, march.superseded_by.as_deref()), (PlanStatus::Superseded, Some(april_id.as_str())));
    let store = DynamoPlanStore::new(t.dynamo.clone(), t.table.clone());
    let history: Vec<(String, PlanStatus)> = store
        .list(&user(), &SessionId::parse(&sid).unwrap(), 10)
        .await
        .unwrap()
        .into_iter()
        .map(|(r, _)| (r.plan.goal, r.status))
        .collect();
    assert_eq!(
        history,
        [
            ("April newsletter".to_string(), PlanStatus::Completed),
            ("March newsletter".to_string(), PlanStatus::Superseded)
        ]
    );
    let log = t.store().recent_messages(&user(), &SessionId::parse(&sid).unwrap(), 50).await.unwrap();
    let created_april: Value = log
        .iter()
        .filter_map(|m| serde_json::from_str::<Value>(m.content.as_deref()?).ok())
        .find(|v| v["plan_id"] == april_id.as_str() && v["status"] == "awaiting_approval")
        .expect("the April draft's result in the log");
    assert_eq!(created_april["superseded"][0]["plan_id"], march_id.as_str(), "{created_april}");
    assert_eq!(created_april["superseded"][0]["was"], "awaiting_approval");
    assert_eq!(
        script.asked("march") + script.asked("april"),
        2,
        "April ran once (a tool round and an answer), March never"
    );
}

/// A decision naming a superseded plan is refused; a new plan replaces every
/// open plan it finds, also more than fit in one transaction beside it.
#[tokio::test]
async fn superseding_is_one_transaction_and_refuses_a_plan_changed_meanwhile() {
    let t = TestApp::new().await;
    let p = project(&t).await;
    install(
        &t,
        Script {
            planner: Mutex::new(
                vec![
                    Reply::tool_calls(&[("agent_create_plan", newsletter_draft("march", "March"))]),
                    Reply::text(&["Here is the plan."]),
                ]
                .into(),
            ),
            ..Default::default()
        },
    );
    let first = t.turn("alice", in_project(&p, "plan the newsletter, show me first", None)).await;
    let sid = SessionId::parse(first.session_id()).unwrap();
    let store = DynamoPlanStore::new(t.dynamo.clone(), t.table.clone());
    let (draft, version) = store.current(&user(), &sid).await.unwrap().unwrap();

    // Eleven open plans, as a session from before superseding could hold.
    let mut open = vec![(draft.clone(), version)];
    for i in 0..10 {
        let mut r = draft.clone();
        r.id = uuid::Uuid::now_v7().to_string();
        r.plan.goal = format!("old draft {i}");
        store.save(&user(), &sid, &r, 0).await.unwrap();
        open.push((r, 1));
    }
    let mut new = draft.clone();
    new.id = uuid::Uuid::now_v7().to_string();
    new.plan.goal = "the one current plan".into();

    // One of them changed since it was read: nothing of the transaction is written.
    let (mut changed, v) = open.last().cloned().unwrap();
    changed.reason = Some("changed meanwhile".into());
    store.save(&user(), &sid, &changed, v).await.unwrap();
    let err = store.create(&user(), &sid, &new, &open).await.unwrap_err();
    assert!(matches!(err, shared::store::StoreError::LeaseLost), "{err:?}");
    assert!(store.load(&user(), &sid, &new.id).await.unwrap().is_none(), "the new plan was not stored");
    let newest = store.current(&user(), &sid).await.unwrap().unwrap();
    assert_eq!((newest.0.id.as_str(), newest.0.status), (changed.id.as_str(), PlanStatus::AwaitingApproval));

    // Read again: all eleven are superseded by the new plan, which is current.
    let open: Vec<_> = store.list(&user(), &sid, 20).await.unwrap();
    assert_eq!(open.len(), 11);
    assert_eq!(store.create(&user(), &sid, &new, &open).await.unwrap(), 1);
    let all = store.list(&user(), &sid, 20).await.unwrap();
    assert_eq!(all[0].0.id, new.id);
    assert!(
        all[1..]
            .iter()
            .all(|(r, _)| r.status == PlanStatus::Superseded && r.superseded_by.as_deref() == Some(new.id.as_str())),
        "{all:?}"
    );

    // The same plan id twice is refused; a deleted session stores no plan.
    assert!(matches!(store.create(&user(), &sid, &new, &[]).await, Err(shared::store::StoreError::LeaseLost)));
    t.store().delete_session(&user(), &sid, None).await.unwrap();
    let mut late = draft.clone();
    late.id = uuid::Uuid::now_v7().to_string();
    assert!(matches!(store.create(&user(), &sid, &late, &[]).await, Err(shared::store::StoreError::NotFound)));
}

#[tokio::test]
async fn an_agent_review_rejection_runs_nothing() {
    let t = TestApp::new().await;
    let p = project(&t).await;
    let plan = json!({"goal": "Wipe the backlog", "mode": "agent_review", "stages": [
        {"id": "a", "name": "Write", "mode": "sequence", "steps": [step("w", "Write", "create", &["create_document"], &[])]},
    ]});
    let mut steps: HashMap<String, StepScript> = HashMap::new();
    steps.insert("w".into(), Box::new(|_, _| panic!("a rejected plan never runs")));
    install(
        &t,
        Script {
            planner: Mutex::new(
                vec![
                    Reply::tool_calls(&[("agent_create_plan", plan)]),
                    Reply::text(&["The reviewer rejected the plan: it is too broad."]),
                ]
                .into(),
            ),
            steps,
            reviewer: Mutex::new(Some(Reply::text(&[r#"{"verdict": "reject", "reason": "too broad"}"#]))),
            ..Default::default()
        },
    );
    let turn = t.turn("alice", in_project(&p, "plan it and have it reviewed", None)).await;
    assert_eq!(turn.error_code(), None, "{:?}", turn.events);
    let review = turn.events.iter().find_map(|e| match e {
        StreamEvent::PlanReview { approved, reason, .. } => Some((*approved, reason.clone())),
        _ => None,
    });
    assert_eq!(review, Some((false, "too broad".to_string())));
    assert!(!turn.kinds().contains(&"step_start"));
    let rec = plan_record(&t, &turn.session_id(), &plan_id(&turn)).await;
    assert_eq!((rec.status, rec.reason.as_deref()), (PlanStatus::Rejected, Some("too broad")));
    assert_eq!(plan_result(&t)["status"], "rejected");
}

/// Any route of the stream function, read whole.
async fn post(t: &TestApp, user: &str, path: &str, body: Value) -> Turn {
    let req = http::Request::builder()
        .method("POST")
        .uri(path)
        .header("authorization", format!("Bearer {}", tests::token(user)))
        .body(lambda_http::Body::from(body.to_string()))
        .unwrap();
    Turn::read(shared::edge::stream::handle_stream(&t.app, lambda_http::Request::from(req)).await).await
}

/// `POST /sessions/{sid}/approvals/{approval}`.
async fn answer(t: &TestApp, user: &str, sid: &str, approval: &str, approved: bool, reason: Option<&str>) -> Turn {
    post(t, user, &format!("/sessions/{sid}/approvals/{approval}"), json!({"approved": approved, "reason": reason}))
        .await
}

/// The session's whole log.
async fn session_log(t: &TestApp, sid: &str) -> Vec<shared::message::StoredMessage> {
    use shared::session::store::MessagesFrom;
    let sid = SessionId::parse(sid).unwrap();
    t.store().messages_page(&user(), &sid, MessagesFrom::Before(None), 100).await.unwrap()
}

/// Every call in the log has exactly one result (what strict servers need).
fn every_call_answered(log: &[shared::message::StoredMessage]) {
    use shared::message::Role;
    for m in log.iter().filter(|m| m.role == Role::Assistant) {
        for c in &m.tool_calls {
            let n = log.iter().filter(|r| r.role == Role::Tool && r.tool_call_id.as_deref() == Some(&c.id)).count();
            assert_eq!(n, 1, "call {} has {n} results", c.id);
        }
    }
}

/// How many `delete` operations succeeded in these turns.
fn deletes(turns: &[&Turn]) -> usize {
    let done = |e: &&StreamEvent| {
        matches!(
            e,
            StreamEvent::Operation {
                action: shared::sse::OperationAction::Delete,
                status: shared::sse::OperationStatus::Success,
                ..
            }
        )
    };
    turns.iter().map(|t| t.events.iter().filter(done).count()).sum()
}

/// A plan in a project with the task "Old launch checklist": step `d`
/// deletes it (its executor then says what became of it, from the result it
/// reads), then a later stage's step `e` runs. The first turn, which ends
/// with the delete waiting: the test app, project, task, that turn, and its
/// approval id.
struct Paused {
    t: TestApp,
    p: ProjectId,
    first: Turn,
    approval: String,
    script: Arc<Script>,
}

async fn a_plan_that_deletes() -> Paused {
    let t = TestApp::new().await;
    let p = project(&t).await;
    let fields = json!({"title": "Old launch checklist"}).as_object().unwrap().clone();
    let new = shared::entities::CreateEntity::new(
        shared::entities::EntityFields::from_object(EntityKind::Task, fields).unwrap(),
    );
    let task = service(&t).create(&user(), &p, new).await.unwrap().data.id.to_string();
    let plan = json!({"goal": "Clean up", "stages": [
        {"id": "a", "name": "Clean", "mode": "sequence", "steps": [step("d", "Delete the old checklist", "update", &["delete_entity"], &[])]},
        {"id": "b", "name": "Check", "mode": "sequence", "steps": [step("e", "Look around", "research", &["search_project"], &["d"])]},
    ]});
    let mut steps: HashMap<String, StepScript> = HashMap::new();
    steps.insert(
        "d".into(),
        Box::new(move |req, _| {
            let last = req["messages"].as_array().unwrap().last().unwrap().clone();
            match last["content"].as_str() {
                _ if last["role"] != "tool" => {
                    Reply::tool_calls(&[("delete_entity", json!({"kind": "task", "id": task}))])
                }
                Some(r) if r.contains("denied by the user") => Reply::text(&["The user kept the checklist."]),
                _ => Reply::text(&["Deleted the checklist."]),
            }
        }),
    );
    steps.insert(
        "e".into(),
        calls_then(Duration::ZERO, vec![("search_project", json!({"query": "old"}))], "All clean."),
    );
    let planner = vec![Reply::tool_calls(&[("agent_create_plan", plan)]), Reply::text(&["Done."])];
    let script = install(&t, Script { planner: Mutex::new(planner.into()), steps, ..Default::default() });
    let first = t.turn("alice", in_project(&p, "delete the old checklist, then look around", None)).await;
    assert_eq!(first.error_code(), None, "{:?}", first.events);
    let asked = first.events.iter().find_map(|e| match e {
        StreamEvent::ApprovalRequired { approval_id, summary, tool, origin, .. } => {
            Some((approval_id.clone(), summary.clone(), tool.clone(), origin.clone()))
        }
        _ => None,
    });
    let (approval, summary, tool, origin) = asked.unwrap_or_else(|| panic!("approval_required: {:?}", first.kinds()));
    assert_eq!(tool, "delete_entity");
    assert_eq!(summary, "Delete the task \"Old launch checklist\"", "the operation in human words");
    assert!(matches!(origin, ToolOrigin::PlanStep { step_id, .. } if step_id == "d"));
    Paused { t, p, first, approval, script }
}

#[tokio::test]
async fn a_plan_steps_delete_waits_with_an_approval_and_the_turn_ends_there() {
    let Paused { t, p, first, script, .. } = a_plan_that_deletes().await;
    assert_eq!(names(&t, &p, EntityKind::Task).await, ["Old launch checklist"], "nothing deleted yet");
    assert_eq!(deletes(&[&first]), 0);
    assert_eq!(
        plan_events(&first),
        ["plan_created", "step_start d", "approval_required d", "step_complete d WaitingForApproval"]
    );
    assert!(!first.kinds().contains(&"confirmation_required"));
    let rec = plan_record(&t, &first.session_id(), &plan_id(&first)).await;
    assert_eq!(rec.status, PlanStatus::WaitingForApproval);
    assert_eq!(rec.step("e").status, StepStatus::Pending, "the next stage waits");
    // The planner is not asked again: the question is the turn's answer.
    assert_eq!(script.planner.lock().unwrap().len(), 1);
    // The log: the plan call and its result, then the waiting call (no result yet).
    let log = session_log(&t, &first.session_id()).await;
    let waiting = log.last().unwrap();
    assert_eq!(waiting.tool_calls[0].function.name, "delete_entity");
    assert_eq!(waiting.approvals[0].step.as_ref().unwrap().step_id, "d");
    assert_eq!(t.llm.take_rejections(), vec![]);
}

#[tokio::test]
async fn approving_a_plan_steps_delete_deletes_once_and_the_plan_goes_on_to_completion() {
    let Paused { t, p, first, approval, script } = a_plan_that_deletes().await;
    let sid = first.session_id();
    let yes = answer(&t, "alice", &sid, &approval, true, None).await;
    assert_eq!(yes.status, 200, "{:?}", yes.json);
    assert_eq!(yes.error_code(), None, "{:?}", yes.events);
    assert!(names(&t, &p, EntityKind::Task).await.is_empty(), "deleted");
    assert_eq!(deletes(&[&first, &yes]), 1, "exactly once");
    let kinds = yes.kinds();
    let at = |k| kinds.iter().position(|x| *x == k).unwrap_or_else(|| panic!("{k}: {kinds:?}"));
    assert!(at("approval_answered") < at("tool_result") && at("tool_result") < at("step_start"), "{kinds:?}");
    assert_eq!(plan_events(&yes), ["step_start d", "step_complete d Done", "step_start e", "step_complete e Done"]);
    assert_eq!(yes.text(), "Done.");
    let rec = plan_record(&t, &sid, &plan_id(&first)).await;
    assert_eq!(rec.status, PlanStatus::Completed);
    assert!(rec.step("d").calls.iter().any(|c| c.tool_call.function.name == "delete_entity" && c.ok));
    // The executor went on from its own messages with the delete's result.
    assert_eq!(script.asked("d"), 2);
    // The same approval again: refused, nothing runs.
    let again = answer(&t, "alice", &sid, &approval, true, None).await;
    assert_eq!((again.status, again.json.unwrap()["error"]["code"].clone()), (409, json!("approval_used")));
    assert_eq!(script.asked("d"), 2);
    every_call_answered(&session_log(&t, &sid).await);
    assert_eq!(t.llm.take_rejections(), vec![]);
}

#[tokio::test]
async fn denying_a_plan_steps_delete_keeps_the_task_and_the_executor_is_told() {
    let Paused { t, p, first, approval, script } = a_plan_that_deletes().await;
    let sid = first.session_id();
    let no = answer(&t, "alice", &sid, &approval, false, Some("I still need it")).await;
    assert_eq!((no.status, no.error_code()), (200, None), "{:?}", no.events);
    assert_eq!(names(&t, &p, EntityKind::Task).await, ["Old launch checklist"]);
    assert_eq!(deletes(&[&first, &no]), 0);
    let executor = t.llm.requests().into_iter().rev().find(|r| tests::system_text(r).contains("(plan step d)"));
    let last = executor.unwrap()["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["role"], "tool", "the denial is the waiting call's result, last in its request");
    assert!(last["content"].as_str().unwrap().contains("denied by the user: I still need it"), "{last}");
    let rec = plan_record(&t, &sid, &plan_id(&first)).await;
    assert_eq!(rec.status, PlanStatus::Completed, "the executor decided to go on");
    assert_eq!(rec.step("d").summary.as_deref(), Some("The user kept the checklist."));
    assert_eq!(script.asked("e"), 2, "the next stage ran");
    every_call_answered(&session_log(&t, &sid).await);
    assert_eq!(t.llm.take_rejections(), vec![]);
}

#[tokio::test]
async fn a_forged_or_foreign_approval_of_a_plan_step_is_refused_and_nothing_runs() {
    let Paused { t, p, first, approval, script } = a_plan_that_deletes().await;
    let sid = first.session_id();
    let mut forged = approval.clone();
    forged.pop();
    forged.push(if approval.ends_with('0') { '1' } else { '0' });
    let refused = answer(&t, "alice", &sid, &forged, true, None).await;
    assert_eq!((refused.status, refused.json.unwrap()["error"]["code"].clone()), (404, json!("approval_not_found")));
    assert_eq!(answer(&t, "bob", &sid, &approval, true, None).await.status, 404, "another user's");
    assert_eq!(names(&t, &p, EntityKind::Task).await, ["Old launch checklist"]);
    assert_eq!(script.asked("d"), 1, "the executor was not resumed");
    assert_eq!(plan_record(&t, &sid, &plan_id(&first)).await.status, PlanStatus::WaitingForApproval);
}

#[tokio::test]
async fn a_new_message_while_a_plan_step_waits_denies_it_and_keeps_the_plan_resumable() {
    let Paused { t, p, first, approval, script } = a_plan_that_deletes().await;
    let sid = first.session_id();
    script.planner.lock().unwrap().push_front(Reply::text(&["Sure, what else?"]));
    let next = t.turn("alice", in_project(&p, "Actually, never mind", Some(&sid))).await;
    assert_eq!(next.error_code(), None, "{:?}", next.events);
    assert_eq!(next.text(), "Sure, what else?");
    let planner = t.llm.requests().into_iter().rev().find(|r| !tests::system_text(r).contains("(plan step ")).unwrap();
    let sent: Vec<String> = planner["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(sent.iter().any(|r| r.contains("new message instead of approving")), "{sent:?}");
    assert_eq!(names(&t, &p, EntityKind::Task).await, ["Old launch checklist"]);
    assert_eq!(script.asked("d"), 1, "the plan does not run on by itself");
    let rec = plan_record(&t, &sid, &plan_id(&first)).await;
    assert_eq!((rec.status, rec.step("d").status), (PlanStatus::Running, StepStatus::Pending), "resumable");
    assert_eq!(answer(&t, "alice", &sid, &approval, true, None).await.status, 409, "spent");
    assert_eq!(names(&t, &p, EntityKind::Task).await, ["Old launch checklist"]);
    every_call_answered(&session_log(&t, &sid).await);
    assert_eq!(t.llm.take_rejections(), vec![]);
}

#[tokio::test]
async fn a_step_cannot_delete_with_a_tool_it_was_not_given() {
    let t = TestApp::new().await;
    let p = project(&t).await;
    let fields = json!({"title": "Keep me"}).as_object().unwrap().clone();
    let new = shared::entities::CreateEntity::new(
        shared::entities::EntityFields::from_object(EntityKind::Task, fields).unwrap(),
    );
    let task = service(&t).create(&user(), &p, new).await.unwrap().data.id.to_string();
    let plan = json!({"goal": "Look", "stages": [
        {"id": "a", "name": "Look", "mode": "sequence", "steps": [step("l", "Read the task", "research", &["get_entity"], &[])]},
    ]});
    let mut steps: HashMap<String, StepScript> = HashMap::new();
    steps.insert(
        "l".into(),
        calls_then(Duration::ZERO, vec![("delete_entity", json!({"kind": "task", "id": task}))], "could not delete"),
    );
    install(
        &t,
        Script {
            planner: Mutex::new(
                vec![Reply::tool_calls(&[("agent_create_plan", plan)]), Reply::text(&["Nothing was deleted."])].into(),
            ),
            steps,
            ..Default::default()
        },
    );
    let turn = t.turn("alice", in_project(&p, "look at the task", None)).await;
    assert_eq!(turn.error_code(), None, "{:?}", turn.events);
    assert!(!turn.kinds().contains(&"approval_required"), "refused, not asked about: {:?}", turn.kinds());
    assert_eq!(names(&t, &p, EntityKind::Task).await, ["Keep me"]);
    let rec = plan_record(&t, &turn.session_id(), &plan_id(&turn)).await;
    let call = &rec.step("l").calls[0];
    assert!(!call.ok && call.result.contains("tool_not_in_step"), "{call:?}");
}

/// The "Done when" measurement (docs/plans.md): the two-stage plan with every
/// model request taking 300 ms to its first token, its research stage run one
/// step at a time (cap 1) and three at once (cap 3). Prints both timelines and
/// wall times. Run: `scripts/test.sh -p tests --test plans -- --ignored --nocapture plan_timeline`.
#[tokio::test]
#[ignore]
async fn plan_timeline_cap_1_vs_cap_3() {
    let ttft = Duration::from_millis(300);
    let (mut walls, mut runs) = (vec![], vec![]);
    // The first turn of the process pays for warming up (connections, the
    // first DynamoDB requests): a throwaway run, so both caps run warm.
    for (i, cap) in [1, 1, 3].into_iter().enumerate() {
        let t = TestApp::with_config(|c| c.plan_step_concurrency = cap).await;
        let p = project(&t).await;
        install(
            &t,
            two_stage_script(
                ttft,
                vec![
                    after(ttft, Reply::tool_calls(&[("agent_create_plan", two_stage_plan("auto_execute"))])),
                    after(ttft, Reply::text(&["The summary and two tasks are ready."])),
                ],
            ),
        );
        let turn =
            t.turn("alice", in_project(&p, "Research three competitors, then a summary doc and tasks", None)).await;
        assert_eq!(turn.error_code(), None);
        let label = if i == 0 { " (warm-up, not counted)" } else { "" };
        println!("\n== PLAN_STEP_CONCURRENCY={cap}{label}: timeline (ms since the request) ==");
        for ((at, _), e) in turn.frames.iter().zip(&turn.events) {
            let what = match e {
                StreamEvent::ToolCall { tool_call, origin } => {
                    format!("tool_call {} ({})", tool_call.function.name, who(origin))
                }
                StreamEvent::ToolResult { name, origin, .. } => format!("tool_result {name} ({})", who(origin)),
                StreamEvent::StepStart { step_id, .. } => format!("step_start {step_id}"),
                StreamEvent::ExecutorSpawned { step_id, .. } => format!("executor_spawned {step_id}"),
                StreamEvent::ExecutorResult { step_id, .. } => format!("executor_result {step_id}"),
                StreamEvent::StepComplete { step_id, status, .. } => format!("step_complete {step_id} {status:?}"),
                StreamEvent::TextDelta { .. } | StreamEvent::AgentState { .. } | StreamEvent::ContextUsage(_) => {
                    continue
                }
                StreamEvent::Operation { .. } | StreamEvent::EntityPatch { .. } => continue,
                other => other.kind().to_string(),
            };
            println!("{:>6}  {what}", at.as_millis());
        }
        let wall = turn.frames.last().unwrap().0;
        let at = |f: &dyn Fn(&StreamEvent) -> bool| turn.frames[turn.events.iter().position(f).unwrap()].0;
        let run = at(&|e| matches!(e, StreamEvent::ToolResult { origin: ToolOrigin::Planner, .. }))
            - at(&|e| e.kind() == "plan_created");
        println!(
            "wall time: {} ms; the plan (plan_created to its tool_result): {} ms; most executors at the model at once: {}",
            wall.as_millis(),
            run.as_millis(),
            t.llm.max_in_flight()
        );
        if i > 0 {
            walls.push(wall);
            runs.push(run);
        }
    }
    let faster = |v: &[Duration]| (1.0 - v[1].as_secs_f64() / v[0].as_secs_f64()) * 100.0;
    println!(
        "\nwall: cap 1 {} ms, cap 3 {} ms ({:.0}% faster); plan: cap 1 {} ms, cap 3 {} ms ({:.0}% faster)",
        walls[0].as_millis(),
        walls[1].as_millis(),
        faster(&walls),
        runs[0].as_millis(),
        runs[1].as_millis(),
        faster(&runs)
    );
    assert!(walls[1] < walls[0]);
}

fn who(o: &ToolOrigin) -> String {
    match o {
        ToolOrigin::Planner => "planner".into(),
        ToolOrigin::PlanStep { step_id, .. } => format!("step {step_id}"),
    }
}

/// Reads a turn's events until `until` holds for one, then drops the body
/// (the client goes away). Returns the events read.
async fn read_until(
    resp: http::Response<shared::edge::ResponseBody>,
    until: impl Fn(&StreamEvent) -> bool,
) -> Vec<StreamEvent> {
    use http_body_util::BodyExt;
    let mut body = resp.into_body();
    let mut dec = shared::sse::SseDecoder::new();
    let mut events = vec![];
    while let Some(frame) = tokio::time::timeout(Duration::from_secs(10), body.frame()).await.expect("a frame") {
        let data = frame.unwrap().into_data().unwrap_or_default();
        for f in dec.feed(&data).unwrap() {
            let ev: StreamEvent = serde_json::from_str(&f.data).unwrap();
            let stop = until(&ev);
            events.push(ev);
            if stop {
                return events;
            }
        }
    }
    panic!("the stream ended first: {events:?}")
}

#[tokio::test]
async fn a_client_gone_mid_plan_stops_its_executors_and_leaves_the_plan_resumable() {
    let mut t = TestApp::new().await;
    // A turn whose frames are not kept; one whose are goes on without its
    // client, who can come back for the rest (tests/tests/resume.rs).
    t.app.deps.frames = None;
    let p = project(&t).await;
    let plan = json!({"goal": "Two notes", "stages": [
        {"id": "a", "name": "Notes", "mode": "parallel", "steps": [
            step("n1", "Note one", "create", &["create_document"], &[]),
            step("n2", "Note two", "create", &["create_document"], &[]),
        ]},
    ]});
    let note = |title: &'static str| vec![("create_document", json!({"title": title, "content": "x"}))];
    let mut steps: HashMap<String, StepScript> = HashMap::new();
    steps.insert("n1".into(), calls_then(Duration::ZERO, note("Note one"), "wrote note one"));
    let n2 = calls_then(Duration::ZERO, note("Note two"), "wrote note two");
    // Its first request is slow: the client leaves while it waits. 30 s: far
    // past the 20 s wait below, so a turn that waited for it cannot pass on
    // a machine of any load (a 3 s answer against a 2.5 s wait could).
    steps.insert(
        "n2".into(),
        Box::new(move |req, n| if n == 0 { after(Duration::from_secs(30), n2(req, n)) } else { n2(req, n) }),
    );
    let script = install(
        &t,
        Script {
            planner: Mutex::new(
                vec![
                    Reply::tool_calls(&[("agent_create_plan", plan)]),
                    Reply::tool_calls(&[("agent_continue_plan", json!({"decision": "continue"}))]),
                    Reply::text(&["Both notes are written."]),
                ]
                .into(),
            ),
            steps,
            ..Default::default()
        },
    );
    let body = serde_json::to_vec(&in_project(&p, "two notes", None)).unwrap();
    let resp = t.post(Some(&tests::token("alice")), body).await;
    let events = read_until(resp, |e| matches!(e, StreamEvent::StepComplete { step_id, .. } if step_id == "n1")).await;
    let sid = events.iter().find_map(|e| match e {
        StreamEvent::Session { session } => Some(session.id.to_string()),
        _ => None,
    });
    let (sid, pid) = (
        sid.unwrap(),
        events
            .iter()
            .find_map(|e| match e {
                StreamEvent::PlanCreated { plan_id, .. } => Some(plan_id.clone()),
                _ => None,
            })
            .unwrap(),
    );
    // The turn ends on its own (well before n2's slow answer would have come).
    let store = t.store();
    let ended = async {
        loop {
            let s = store.session(&user(), &SessionId::parse(&sid).unwrap()).await.unwrap().unwrap();
            if s.lease.is_none() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(20), ended).await.expect("the turn ended when its client left");
    let rec = plan_record(&t, &sid, &pid).await;
    assert_eq!(rec.status, PlanStatus::Running);
    assert_eq!((rec.step("n1").status, rec.step("n2").status), (StepStatus::Done, StepStatus::Pending));
    assert_eq!(names(&t, &p, EntityKind::Document).await.iter().filter(|d| d.starts_with("Note")).count(), 1);

    let second = t.turn("alice", in_project(&p, "continue", Some(&sid))).await;
    assert_eq!(second.error_code(), None, "{:?}", second.events);
    assert_eq!(plan_events(&second), ["step_start n2", "step_complete n2 Done"]);
    let docs = names(&t, &p, EntityKind::Document).await;
    assert_eq!(docs.iter().filter(|d| d.starts_with("Note")).collect::<Vec<_>>(), ["Note one", "Note two"]);
    assert_eq!(script.asked("n1"), 2, "the finished step never ran again");
}
