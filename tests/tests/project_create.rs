//! The `project_create` flow end to end (CURRENT_FLOW_AND_GAPS §6.4): the
//! real stream handler, the entities service on DynamoDB Local, and a
//! scripted model. A vague request gets `clarifying_questions` and writes
//! nothing; a clear one creates the project with its context document,
//! moves the session into it (`context_shift`), and the next turn runs in
//! the project's scope. And gap 1: a request's explicit `context_type` wins
//! over the session's stored scope.

use serde_json::{json, Value};
use shared::entities::store::DynamoEntityStore;
use shared::entities::{EntityKind, EntityService, NewProject};
use shared::ids::{ProjectId, SessionId, UserId};
use shared::message::Role;
use shared::session::store::{SessionLog, Sessions};
use shared::session::ContextType;
use shared::sse::{AgentActivity, ShiftReason, StreamEvent};
use tests::{Reply, TestApp, Turn};

fn user(u: &str) -> UserId {
    UserId::parse(u).unwrap()
}

fn service(t: &TestApp) -> EntityService {
    EntityService::new(DynamoEntityStore::new(t.dynamo.clone(), t.table.clone()))
}

async fn project_count(t: &TestApp, u: &str) -> usize {
    service(t).list_projects(&user(u), Default::default()).await.unwrap().items.len()
}

/// The tool names a recorded model request offered.
fn offered(req: &Value) -> Vec<String> {
    req["tools"].as_array().into_iter().flatten().map(|d| d["function"]["name"].as_str().unwrap().to_string()).collect()
}

fn system_prompt(req: &Value) -> String {
    assert_eq!(req["messages"][0]["role"], "system");
    tests::system_text(req)
}

/// What `project_create` offers before its project exists, and the built-in reader.
const CREATE_SET: [&str; 5] =
    ["ask_clarifying_questions", "create_onto_project", "list_projects", "search_workspace", "read_tool_output"];

fn create_set() -> Vec<String> {
    CREATE_SET.iter().map(|s| s.to_string()).collect()
}

async fn stored_session(t: &TestApp, u: &str, turn: &Turn) -> shared::session::Session {
    let sid = SessionId::parse(turn.session_id()).unwrap();
    t.store().session(&user(u), &sid).await.unwrap().expect("the session is stored")
}

#[tokio::test]
async fn a_vague_request_gets_clarifying_questions_and_nothing_is_written() {
    let t = TestApp::new().await;
    let questions = ["What is the project for?", "What would done look like?"];
    t.llm.push(Reply::tool_calls(&[("ask_clarifying_questions", json!({ "questions": questions }))]));
    let turn = t.turn("alice", json!({"message": "I want to start something", "context_type": "project_create"})).await;
    assert_eq!(turn.error_code(), None, "{:?}", turn.events);

    // The model was offered the asking and the creating tool, and asked once:
    // the questions ended the turn.
    let reqs = t.llm.requests();
    assert_eq!(reqs.len(), 1, "the model is not asked again after the questions");
    assert_eq!(offered(&reqs[0]), create_set());
    assert!(system_prompt(&reqs[0]).contains("Scope: creating a new project"));

    // The client got the questions as an event and as the answer.
    let asked: Vec<_> = turn
        .events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ClarifyingQuestions { questions } => Some(questions.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(asked, vec![questions.map(String::from).to_vec()]);
    assert_eq!(turn.text(), "- What is the project for?\n- What would done look like?");
    let kinds = turn.kinds();
    let pos = |k: &str| kinds.iter().position(|x| *x == k).unwrap_or_else(|| panic!("no {k} in {kinds:?}"));
    assert!(pos("tool_call") < pos("clarifying_questions"));
    assert!(pos("clarifying_questions") < pos("tool_result"));
    assert!(pos("tool_result") < pos("text_delta"));
    assert!(turn
        .events
        .iter()
        .any(|e| matches!(e, StreamEvent::AgentState { state: AgentActivity::WaitingOnUser, .. })));
    assert!(!kinds.contains(&"context_shift") && !kinds.contains(&"operation") && !kinds.contains(&"entity_patch"));
    assert!(matches!(turn.done(), StreamEvent::Done { reason: shared::sse::DoneReason::Complete, .. }));

    // Nothing was written to the ontology; the log holds the questions as the answer.
    assert_eq!(project_count(&t, "alice").await, 0);
    let session = stored_session(&t, "alice", &turn).await;
    assert_eq!(session.view.context_type, ContextType::ProjectCreate, "no move without a project");
    let log = t.store().recent_messages(&user("alice"), &session.view.id, 10).await.unwrap();
    let last = log.last().unwrap();
    assert_eq!(last.role, Role::Assistant);
    assert_eq!(last.content.as_deref(), Some(turn.text().as_str()));
}

/// Scripts a clear request's turn: `create_onto_project`, then a short answer.
fn script_creation(t: &TestApp) {
    t.llm.push(Reply::tool_calls(&[(
        "create_onto_project",
        json!({
            "name": "Garden planner",
            "description": "Plan the vegetable garden",
            "context": "An app to plan my vegetable garden: what to sow where and when. Scope: one garden, this season.",
            "tasks": ["Sketch the beds"]
        }),
    )]));
    t.llm.push(Reply::text(&["Created ", "Garden planner."]));
}

/// The project a turn's `context_shift` moved into.
fn shifted_to(turn: &Turn) -> ProjectId {
    let shifts: Vec<_> = turn
        .events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ContextShift { current, reason, entity_name } => Some((current, *reason, entity_name)),
            _ => None,
        })
        .collect();
    assert_eq!(shifts.len(), 1, "one context_shift: {:?}", turn.kinds());
    let (current, reason, name) = shifts[0];
    assert_eq!(
        (current.context_type, reason, name.as_str()),
        (ContextType::Project, ShiftReason::ProjectCreated, "Garden planner")
    );
    assert_eq!(current.entity_id, None);
    let focus = current.focus.as_ref().expect("the new focus");
    assert_eq!(focus["projectName"], "Garden planner");
    ProjectId::parse(focus["projectId"].as_str().unwrap()).unwrap()
}

#[tokio::test]
async fn a_clear_request_creates_the_project_and_the_next_turn_runs_in_it() {
    let t = TestApp::new().await;
    script_creation(&t);
    let message = "Create a project to plan my vegetable garden this season: one garden, what to sow where and when.";
    let first = t.turn("alice", json!({"message": message, "context_type": "project_create"})).await;
    assert_eq!(first.error_code(), None, "{:?}", first.events);
    assert_eq!(first.text(), "Created Garden planner.");

    // The project and its context document, read back through the entities service.
    let p = shifted_to(&first);
    assert_eq!(project_count(&t, "alice").await, 1);
    let svc = service(&t);
    let project = svc.get_project(&user("alice"), &p).await.unwrap();
    assert_eq!(project.name, "Garden planner");
    let doc = svc.get(&user("alice"), &p, EntityKind::Document, &project.context_document_id).await.unwrap();
    assert!(doc.content.as_deref().unwrap().starts_with("An app to plan my vegetable garden"), "{doc:?}");
    let tasks = svc.list(&user("alice"), &p, EntityKind::Task, Default::default()).await.unwrap();
    assert_eq!(tasks.items.len(), 1);

    // The move comes after the writes' patches and before the call's result.
    let kinds = first.kinds();
    let last_patch = kinds.iter().rposition(|k| *k == "entity_patch").unwrap();
    let shift = kinds.iter().position(|k| *k == "context_shift").unwrap();
    let result = kinds.iter().position(|k| *k == "tool_result").unwrap();
    assert!(last_patch < shift && shift < result, "{kinds:?}");

    // The session stores the project's scope.
    let session = stored_session(&t, "alice", &first).await;
    assert_eq!(session.view.context_type, ContextType::Project);
    assert_eq!(session.view.focus.as_ref().unwrap()["projectId"], p.to_string());

    // The next turn, naming no scope, runs in the project: its pack in the
    // system prompt, the project's tools offered.
    t.llm.push(Reply::text(&["Next: sketch the beds."]));
    let next = t.turn("alice", json!({"message": "What's next?", "session_id": first.session_id()})).await;
    assert_eq!(next.error_code(), None, "{:?}", next.events);
    let req = t.llm.requests().pop().unwrap();
    let prompt = system_prompt(&req);
    assert!(prompt.contains("Scope: project"), "{prompt}");
    assert!(prompt.contains(&p.to_string()) && prompt.contains("Garden planner"), "the project's pack: {prompt}");
    assert!(prompt.contains("Sketch the beds"), "the pack names the project's entities: {prompt}");
    let tools = offered(&req);
    assert!(tools.contains(&"create_task".to_string()) && tools.contains(&"read_document".to_string()), "{tools:?}");
    assert!(!tools.contains(&"create_onto_project".to_string()), "{tools:?}");
    match &next.events[1] {
        StreamEvent::Session { session } => assert_eq!(session.context_type, ContextType::Project),
        e => panic!("{e:?}"),
    }
}

#[tokio::test]
async fn an_explicit_context_type_wins_over_the_scope_the_session_moved_to() {
    let t = TestApp::new().await;
    script_creation(&t);
    let first = t
        .turn(
            "alice",
            json!({"message": "Create a garden planning project for this season", "context_type": "project_create"}),
        )
        .await;
    let p = shifted_to(&first);

    // The client still names `project_create`: that scope, not the stored project's.
    t.llm.push(Reply::text(&["What shall we create?"]));
    let again = t
        .turn(
            "alice",
            json!({"message": "Another one", "session_id": first.session_id(), "context_type": "project_create"}),
        )
        .await;
    assert_eq!(again.error_code(), None, "{:?}", again.events);
    let req = t.llm.requests().pop().unwrap();
    assert_eq!(offered(&req), create_set());
    let prompt = system_prompt(&req);
    assert!(prompt.contains("Scope: creating a new project"), "{prompt}");
    // (The agent state still names what the session made: that is the session's, not the project's pack.)
    assert!(!prompt.contains("Documents first") && !prompt.contains("\"doc_structure\""), "no project pack: {prompt}");
    let session = stored_session(&t, "alice", &first).await;
    assert_eq!(session.view.context_type, ContextType::ProjectCreate);
    assert_eq!(session.view.focus, None, "the project focus is left with the project");
    assert!(project_count(&t, "alice").await == 1 && !p.to_string().is_empty());
}

#[tokio::test]
async fn an_explicit_global_context_type_leaves_the_stored_project() {
    let t = TestApp::new().await;
    let new = NewProject { name: "Launch".into(), description: None, state: Default::default(), context: None };
    let p = service(&t).create_project(&user("alice"), new).await.unwrap().data.project.id;
    let focus = json!({"projectId": p.to_string()});
    t.llm.push(Reply::text(&["In the project."]));
    let first = t.turn("alice", json!({"message": "hi", "context_type": "project", "projectFocus": focus})).await;
    let sid = first.session_id();
    assert!(offered(&t.llm.requests()[0]).contains(&"create_task".to_string()));

    // `global`, named with no focus: the workspace's tools, not the stored project's.
    t.llm.push(Reply::text(&["Everywhere."]));
    let global = t.turn("alice", json!({"message": "all my work", "session_id": sid, "context_type": "global"})).await;
    assert_eq!(global.error_code(), None, "{:?}", global.events);
    let tools = offered(&t.llm.requests()[1]);
    let workspace = [
        "list_projects",
        "search_workspace",
        "get_project",
        "create_project",
        "update_project",
        "get_field_info",
        "get_buildos_overview",
    ];
    assert_eq!(tools, [&workspace[..], &["web_visit", "read_tool_output"]].concat());
    assert!(global.kinds().contains(&"focus_changed"));

    // Stored: the next turn that names nothing stays global.
    t.llm.push(Reply::text(&["Still everywhere."]));
    let after = t.turn("alice", json!({"message": "and now?", "session_id": sid})).await;
    assert_eq!(after.error_code(), None);
    assert!(!offered(&t.llm.requests()[2]).contains(&"create_task".to_string()));

    // Between the modes of one project the stored project stays.
    let back = t
        .turn("alice", json!({"message": "back", "session_id": sid, "context_type": "project", "projectFocus": focus}))
        .await;
    assert_eq!(back.error_code(), None);
    t.llm.push(Reply::text(&["Auditing."]));
    let audit =
        t.turn("alice", json!({"message": "audit it", "session_id": sid, "context_type": "project_audit"})).await;
    assert_eq!(audit.error_code(), None);
    assert!(offered(&t.llm.requests().pop().unwrap()).contains(&"create_task".to_string()));
}

/// Refused arguments are errors the model reads, with no event and no
/// write: no questions (or too many), a project without its context.
#[tokio::test]
async fn refused_arguments_ask_nothing_and_create_nothing() {
    use shared::message::{FunctionCall, ToolCall};
    use shared::tools::{ToolContext, ToolRegistry, ToolScope};
    let t = TestApp::new().await;
    let reg = ToolRegistry::new(service(&t));
    let ctx = ToolContext { user: user("alice"), scope: ToolScope::Global, zone: None };
    let call = |name: &str, args: Value| ToolCall {
        id: "c1".into(),
        kind: "function".into(),
        function: FunctionCall { name: name.into(), arguments: args.to_string() },
    };
    let six: Vec<String> = (1..=6).map(|i| format!("Question {i}?")).collect();
    for (tool, args) in [
        ("ask_clarifying_questions", json!({"questions": []})),
        ("ask_clarifying_questions", json!({"questions": six})),
        ("ask_clarifying_questions", json!({"questions": ["  "]})),
        ("create_onto_project", json!({"name": "No context"})),
    ] {
        let out = reg.execute(&ctx, &call(tool, args.clone())).await;
        assert!(!out.ok, "{tool} {args}: {}", out.content);
        assert_eq!(out.error_code.as_deref(), Some("invalid_arguments"), "{}", out.content);
        assert!(out.events().is_empty(), "{tool} {args}: {:?}", out.events());
    }
    assert_eq!(project_count(&t, "alice").await, 0);
}
