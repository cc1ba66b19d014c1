//! Approvals end to end on the native stream (docs/events.md#approval_required):
//! a delete waits for the user's yes, the answer is a turn, and the approval
//! id is signed, bound and single use. The scripted model refuses any history
//! a strict server would (every call must have its result), so each test also
//! proves the log stays valid. The fault-matrix rows of approvals
//! (docs/reliability.md) are the tests named `row_*`.

use serde_json::{json, Value};
use shared::calendar::store::{DynamoEventStore, EventStore};
use shared::calendar::{CalendarEvent, Organizer};
use shared::claims::MismatchKind;
use shared::entities::store::DynamoEntityStore;
use shared::entities::{EntityKind, EntityService, NewProject};
use shared::ids::{EntityId, ProjectId, SessionId, UserId};
use shared::message::{FunctionCall, Role, StoredMessage, ToolCall};
use shared::session::store::{MessagesFrom, SessionLog};
use shared::sse::{CheckVerdict, DoneReason, OperationAction, StreamEvent};
use shared::tools::{ToolContext, ToolRegistry, ToolScope};
use std::time::Duration;
use tests::fault_proxy::{Action, Fault, FaultProxy, Op, When};
use tests::{token, Reply, Step, TestApp, Turn};

fn uid(u: &str) -> UserId {
    UserId::parse(u).unwrap()
}

fn service(t: &TestApp) -> EntityService {
    EntityService::new(DynamoEntityStore::new(t.dynamo.clone(), t.table.clone()))
}

/// A project of alice's with one task; their ids.
async fn project_with_task(t: &TestApp, title: &str) -> (ProjectId, EntityId) {
    let svc = service(t);
    let p = NewProject { name: "Launch".into(), description: None, state: Default::default(), context: None };
    let project = svc.create_project(&uid("alice"), p).await.unwrap().data.project.id;
    let reg = ToolRegistry::new(svc);
    let ctx = ToolContext { user: uid("alice"), scope: ToolScope::Project { project: project.clone() }, zone: None };
    let call = ToolCall {
        id: "setup".into(),
        kind: "function".into(),
        function: FunctionCall { name: "create_task".into(), arguments: json!({"title": title}).to_string() },
    };
    let out = reg.execute(&ctx, &call).await;
    assert!(out.ok, "{}", out.content);
    let id = serde_json::from_str::<Value>(&out.content).unwrap()["id"].as_str().unwrap().to_string();
    (project, EntityId::parse(id).unwrap())
}

async fn task_exists(t: &TestApp, p: &ProjectId, task: &EntityId) -> bool {
    service(t).get(&uid("alice"), p, EntityKind::Task, task).await.is_ok()
}

fn in_project(p: &ProjectId, message: &str, sid: Option<&str>) -> Value {
    let mut body = json!({"message": message, "context_type": "project", "projectFocus": {"projectId": p.to_string()}});
    if let Some(sid) = sid {
        body["session_id"] = json!(sid);
    }
    body
}

/// Any route of the stream function, read whole.
async fn call(t: &TestApp, user: &str, path: &str, body: Value) -> Turn {
    request(t, "POST", user, path, Some(body), None).await
}

/// A request with its method; `deadline`: the invocation's time left (as
/// the runtime tells it), else the function's timeout.
async fn request(
    t: &TestApp,
    method: &str,
    user: &str,
    path: &str,
    body: Option<Value>,
    deadline: Option<Duration>,
) -> Turn {
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let mut req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("authorization", format!("Bearer {}", token(user)))
        .body(lambda_http::Body::from(body))
        .unwrap();
    if let Some(left) = deadline {
        // Below an epoch time, the runtime's deadline is a timeout from now.
        let mut cx = lambda_http::Context::default();
        cx.deadline = left.as_millis() as u64;
        req.extensions_mut().insert(cx);
    }
    Turn::read(shared::edge::stream::handle_stream(&t.app, lambda_http::Request::from(req)).await).await
}

async fn answer(t: &TestApp, user: &str, sid: &str, approval: &str, approved: bool, reason: Option<&str>) -> Turn {
    let body = json!({"approved": approved, "reason": reason});
    call(t, user, &format!("/sessions/{sid}/approvals/{approval}"), body).await
}

/// The approval the turn asked for: (approval id, tool call id, summary).
fn asked(turn: &Turn) -> (String, String, String) {
    turn.events
        .iter()
        .find_map(|e| match e {
            StreamEvent::ApprovalRequired { approval_id, tool_call_id, summary, .. } => {
                Some((approval_id.clone(), tool_call_id.clone(), summary.clone()))
            }
            _ => None,
        })
        .unwrap_or_else(|| panic!("approval_required: {:?}", turn.kinds()))
}

/// A first turn whose model deletes the task: it ends waiting.
async fn ask_to_delete(t: &TestApp, p: &ProjectId, task: &EntityId) -> (String, String, String) {
    t.llm.push(Reply::tool_calls(&[("delete_entity", json!({"kind": "task", "id": task.to_string()}))]));
    let first = t.turn("alice", in_project(p, "Delete the old checklist", None)).await;
    assert!(matches!(first.done(), StreamEvent::Done { reason: DoneReason::Complete, .. }), "{:?}", first.kinds());
    let (approval, call_id, summary) = asked(&first);
    assert!(summary.contains("Old checklist"), "the operation in human words: {summary}");
    assert!(!first.kinds().contains(&"tool_result"), "nothing ran: {:?}", first.kinds());
    assert!(task_exists(t, p, task).await);
    let _ = call_id;
    (first.session_id(), approval, summary)
}

async fn log(t: &TestApp, sid: &str) -> Vec<StoredMessage> {
    let sid = SessionId::parse(sid).unwrap();
    t.store().messages_page(&uid("alice"), &sid, MessagesFrom::Before(None), 100).await.unwrap()
}

/// The tool messages' contents in the model's last request.
fn tool_results_sent(t: &TestApp) -> Vec<String> {
    let req = t.llm.requests().last().cloned().expect("a model request");
    req["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or("").to_string())
        .collect()
}

/// Every call in the log has exactly one result.
fn every_call_answered(log: &[StoredMessage]) {
    for m in log.iter().filter(|m| m.role == Role::Assistant) {
        for c in &m.tool_calls {
            let results =
                log.iter().filter(|r| r.role == Role::Tool && r.tool_call_id.as_deref() == Some(c.id.as_str())).count();
            assert_eq!(results, 1, "call {} has {results} results", c.id);
        }
    }
}

#[tokio::test]
async fn an_approved_delete_runs_once_with_the_stored_arguments_and_the_model_goes_on() {
    let t = TestApp::new().await;
    let (p, task) = project_with_task(&t, "Old checklist").await;
    let (sid, approval, _) = ask_to_delete(&t, &p, &task).await;
    assert_eq!(t.llm.request_count(), 1);
    t.llm.push(Reply::text(&["Deleted ", "it."]));
    let yes = answer(&t, "alice", &sid, &approval, true, None).await;
    assert_eq!(yes.status, 200, "{:?}", yes.json);
    assert!(matches!(yes.done(), StreamEvent::Done { reason: DoneReason::Complete, .. }), "{:?}", yes.kinds());
    let kinds = yes.kinds();
    let at = |k| kinds.iter().position(|x| *x == k).unwrap_or_else(|| panic!("{k}: {kinds:?}"));
    assert!(at("approval_answered") < at("tool_result") && at("tool_result") < at("text_delta"), "{kinds:?}");
    assert_eq!(yes.text(), "Deleted it.");
    let named: Vec<String> = yes
        .events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Operation { entity_name, .. } => Some(entity_name.clone()),
            _ => None,
        })
        .collect();
    assert!(!named.is_empty() && named.iter().all(|n| n == "Old checklist"), "named as the question did: {named:?}");
    assert!(!task_exists(&t, &p, &task).await, "the task is gone");
    assert!(tool_results_sent(&t).iter().any(|r| r.contains("\"ok\":true") || !r.contains("denied")));
    // The same approval again: refused, nothing runs, the model is not asked.
    let again = answer(&t, "alice", &sid, &approval, true, None).await;
    assert_eq!(
        (again.status, again.json.as_ref().map(|j| j["error"]["code"].clone())),
        (409, Some(json!("approval_used")))
    );
    assert_eq!(t.llm.request_count(), 2);
    let stored = log(&t, &sid).await;
    every_call_answered(&stored);
    assert_eq!(t.llm.take_rejections(), vec![]);
}

#[tokio::test]
async fn a_denied_delete_leaves_the_task_and_the_model_is_told_why() {
    let t = TestApp::new().await;
    let (p, task) = project_with_task(&t, "Old checklist").await;
    let (sid, approval, _) = ask_to_delete(&t, &p, &task).await;
    t.llm.push(Reply::text(&["Kept it."]));
    let no = answer(&t, "alice", &sid, &approval, false, Some("I still need it")).await;
    assert_eq!(no.status, 200);
    assert!(matches!(no.done(), StreamEvent::Done { reason: DoneReason::Complete, .. }), "{:?}", no.kinds());
    assert!(task_exists(&t, &p, &task).await, "still there");
    let sent = tool_results_sent(&t);
    assert!(sent.iter().any(|r| r.contains("denied by the user: I still need it")), "{sent:?}");
    every_call_answered(&log(&t, &sid).await);
    assert_eq!(t.llm.take_rejections(), vec![]);
}

#[tokio::test]
async fn forged_and_foreign_approvals_are_refused_and_nothing_runs() {
    let t = TestApp::new().await;
    let (p, task) = project_with_task(&t, "Old checklist").await;
    let (sid, approval, _) = ask_to_delete(&t, &p, &task).await;
    let code =
        |turn: &Turn| (turn.status, turn.json.as_ref().map(|j| j["error"]["code"].as_str().unwrap().to_string()));
    let mut forged = approval.clone();
    forged.pop();
    forged.push(if approval.ends_with('0') { '1' } else { '0' });
    let not_found = (404, Some("approval_not_found".to_string()));
    assert_eq!(code(&answer(&t, "alice", &sid, &forged, true, None).await), not_found);
    assert_eq!(code(&answer(&t, "alice", &sid, "apv1.99999999999999.x", true, None).await), not_found);
    // Another user's request for the same session: not theirs.
    assert_eq!(code(&answer(&t, "bob", &sid, &approval, true, None).await).0, 404);
    assert!(task_exists(&t, &p, &task).await);
    assert_eq!(t.llm.request_count(), 1, "the model was not asked");
    every_call_answered(&[]);
}

#[tokio::test]
async fn row_approval_for_another_session_is_refused() {
    let t = TestApp::new().await;
    let (p, task) = project_with_task(&t, "Old checklist").await;
    let (_, approval, _) = ask_to_delete(&t, &p, &task).await;
    t.llm.push(Reply::text(&["Hello."]));
    let other = t.turn("alice", in_project(&p, "hi", None)).await.session_id();
    let refused = answer(&t, "alice", &other, &approval, true, None).await;
    assert_eq!(refused.status, 404, "{:?}", refused.json);
    assert_eq!(refused.json.unwrap()["error"]["code"], "approval_not_found");
    assert!(task_exists(&t, &p, &task).await);
}

#[tokio::test]
async fn row_the_same_approval_twice_at_once_runs_once() {
    let t = TestApp::new().await;
    let (p, task) = project_with_task(&t, "Old checklist").await;
    let (sid, approval, _) = ask_to_delete(&t, &p, &task).await;
    t.llm.set_default(Reply::text(&["Done."]));
    let (a, b) = tokio::join!(
        answer(&t, "alice", &sid, &approval, true, None),
        answer(&t, "alice", &sid, &approval, true, None)
    );
    // One ran; the other was refused (409, or busy/used on its stream).
    let ran = [&a, &b].iter().filter(|x| x.status == 200 && x.kinds().contains(&"approval_answered")).count();
    assert_eq!(ran, 1, "{:?} {:?} / {:?} {:?}", a.status, a.kinds(), b.status, b.json);
    assert!(!task_exists(&t, &p, &task).await);
    let stored = log(&t, &sid).await;
    every_call_answered(&stored);
    let results = stored.iter().filter(|m| m.role == Role::Tool).count();
    assert_eq!(results, 1, "one result for the one call");
    assert_eq!(t.llm.take_rejections(), vec![]);
}

#[tokio::test]
async fn row_a_new_message_instead_of_an_answer_denies_the_waiting_call() {
    let t = TestApp::new().await;
    let (p, task) = project_with_task(&t, "Old checklist").await;
    let (sid, approval, _) = ask_to_delete(&t, &p, &task).await;
    t.llm.push(Reply::text(&["Sure, what else?"]));
    let next = t.turn("alice", in_project(&p, "Actually, never mind", Some(&sid))).await;
    assert!(matches!(next.done(), StreamEvent::Done { reason: DoneReason::Complete, .. }), "{:?}", next.kinds());
    let sent = tool_results_sent(&t);
    assert!(sent.iter().any(|r| r.contains("new message instead of approving")), "{sent:?}");
    assert!(task_exists(&t, &p, &task).await);
    // The approval is spent: the call has its result.
    assert_eq!(answer(&t, "alice", &sid, &approval, true, None).await.status, 409);
    assert!(task_exists(&t, &p, &task).await);
    every_call_answered(&log(&t, &sid).await);
    assert_eq!(t.llm.take_rejections(), vec![]);
}

#[tokio::test]
async fn row_deadline_an_expired_approval_runs_nothing_and_the_next_turn_says_so() {
    let t = TestApp::with_config(|c| c.approval_ttl = std::time::Duration::from_millis(1)).await;
    let (p, task) = project_with_task(&t, "Old checklist").await;
    let (sid, approval, _) = ask_to_delete(&t, &p, &task).await;
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let late = answer(&t, "alice", &sid, &approval, true, None).await;
    assert_eq!((late.status, late.json.unwrap()["error"]["code"].clone()), (410, json!("approval_expired")));
    assert!(task_exists(&t, &p, &task).await);
    t.llm.push(Reply::text(&["It expired."]));
    let next = t.turn("alice", in_project(&p, "and now?", Some(&sid))).await;
    assert_eq!(next.error_code(), None, "{:?}", next.kinds());
    assert!(tool_results_sent(&t).iter().any(|r| r.contains("approval expired")));
    every_call_answered(&log(&t, &sid).await);
    assert_eq!(t.llm.take_rejections(), vec![]);
}

#[tokio::test]
async fn row_stop_while_a_call_waits_changes_nothing_and_the_approval_still_runs_once() {
    let t = TestApp::new().await;
    let (p, task) = project_with_task(&t, "Old checklist").await;
    let (sid, approval, _) = ask_to_delete(&t, &p, &task).await;
    let stop = call(&t, "alice", &format!("/sessions/{sid}/stop"), json!({})).await;
    assert_eq!(stop.status, 200);
    assert_eq!(stop.json.unwrap()["stopped"], false, "no turn runs while a call waits");
    assert!(task_exists(&t, &p, &task).await);
    t.llm.push(Reply::text(&["Deleted."]));
    assert_eq!(answer(&t, "alice", &sid, &approval, true, None).await.status, 200);
    assert!(!task_exists(&t, &p, &task).await);
    every_call_answered(&log(&t, &sid).await);
}

#[tokio::test]
async fn row_disconnect_while_a_call_waits_the_answer_still_runs_once_and_is_logged() {
    let t = TestApp::new().await;
    let (p, task) = project_with_task(&t, "Old checklist").await;
    let (sid, approval, _) = ask_to_delete(&t, &p, &task).await;
    t.llm.push(Reply::text(&["Deleted."]));
    // The client posts its answer and goes away before reading anything.
    let req = http::Request::builder()
        .method("POST")
        .uri(format!("/sessions/{sid}/approvals/{approval}"))
        .header("authorization", format!("Bearer {}", token("alice")))
        .body(lambda_http::Body::from(json!({"approved": true}).to_string()))
        .unwrap();
    drop(shared::edge::stream::handle_stream(&t.app, lambda_http::Request::from(req)).await);
    // A client gone before the turn began leaves it unstarted (nothing ran,
    // the call still waits); once begun, the turn runs to its end. Either way
    // the client's retry runs the call at most once more: exactly once in all.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let retry = answer(&t, "alice", &sid, &approval, true, None).await;
    assert!(matches!(retry.status, 200 | 409), "{} {:?}", retry.status, retry.json);
    assert!(!task_exists(&t, &p, &task).await, "the approved call ran");
    let stored = log(&t, &sid).await;
    every_call_answered(&stored);
    assert_eq!(stored.iter().filter(|m| m.role == Role::Tool).count(), 1);
    assert_eq!(answer(&t, "alice", &sid, &approval, true, None).await.status, 409, "spent");
    t.llm.push(Reply::text(&["Hi."]));
    let next = t.turn("alice", in_project(&p, "next", Some(&sid))).await;
    assert_eq!(next.error_code(), None, "{:?}", next.kinds());
    assert_eq!(t.llm.take_rejections(), vec![]);
}

/// The user's "ask first" tools, set through the route.
async fn ask_first(t: &TestApp, user: &str, tools: &[&str]) -> Turn {
    request(t, "PUT", user, "/me/approvals", Some(json!({"ask_first": tools})), None).await
}

fn error_code(turn: &Turn) -> Option<String> {
    turn.json.as_ref().and_then(|j| j["error"]["code"].as_str()).map(str::to_string)
}

async fn task_titles(t: &TestApp, p: &ProjectId) -> Vec<String> {
    let page = service(t).list(&uid("alice"), p, EntityKind::Task, Default::default()).await.unwrap();
    page.items.iter().map(|e| e.fields.name().to_string()).collect()
}

#[tokio::test]
async fn a_tool_the_user_set_to_ask_first_waits_and_unknown_names_are_refused() {
    let t = TestApp::new().await;
    let (p, _) = project_with_task(&t, "Old checklist").await;
    let got = request(&t, "GET", "alice", "/me/approvals", None, None).await;
    assert_eq!(got.status, 200, "{:?}", got.json);
    let got = got.json.unwrap();
    assert_eq!(got["ask_first"], json!([]));
    assert!(got["askable"].as_array().unwrap().contains(&json!("create_task")), "{got}");
    assert!(!got["askable"].as_array().unwrap().contains(&json!("list_projects")), "reads never ask");
    let refused = ask_first(&t, "alice", &["create_task", "launch_rockets"]).await;
    assert_eq!((refused.status, error_code(&refused)), (400, Some("unknown_tool".into())), "{:?}", refused.json);
    let bad = request(&t, "PUT", "alice", "/me/approvals", Some(json!({"ask_first": "create_task"})), None).await;
    assert_eq!((bad.status, error_code(&bad)), (400, Some("invalid_json".into())));
    let still = request(&t, "GET", "alice", "/me/approvals", None, None).await.json.unwrap();
    assert_eq!(still["ask_first"], json!([]), "nothing stored");
    let set = ask_first(&t, "alice", &["update_entity", "create_task", "create_task"]).await;
    assert_eq!(set.status, 200, "{:?}", set.json);
    assert_eq!(set.json.unwrap()["ask_first"], json!(["create_task", "update_entity"]), "once each, in order");
    let bobs = request(&t, "GET", "bob", "/me/approvals", None, None).await.json.unwrap();
    assert_eq!(bobs["ask_first"], json!([]), "alice's settings are hers");

    t.llm.push(Reply::tool_calls(&[("create_task", json!({"title": "Ship it"}))]));
    let first = t.turn("alice", in_project(&p, "Add a task to ship it", None)).await;
    let (approval, _, summary) = asked(&first);
    assert_eq!(summary, "Create task: title → \"Ship it\"");
    assert!(!first.kinds().contains(&"tool_result"), "nothing ran: {:?}", first.kinds());
    assert_eq!(task_titles(&t, &p).await, vec!["Old checklist"]);
    t.llm.push(Reply::text(&["Added."]));
    let sid = first.session_id();
    assert_eq!(answer(&t, "alice", &sid, &approval, true, None).await.status, 200);
    assert_eq!(task_titles(&t, &p).await.iter().filter(|n| *n == "Ship it").count(), 1);

    // Cleared: the next create runs at once.
    assert_eq!(ask_first(&t, "alice", &[]).await.status, 200);
    // (Two calls: the scripted model names calls by position and tool, and
    // `call_0_create_task` is the log's already.)
    let calls = [("list_entities", json!({"kind": "task"})), ("create_task", json!({"title": "Another"}))];
    t.llm.push(Reply::tool_calls(&calls));
    t.llm.push(Reply::text(&["Added."]));
    let next = t.turn("alice", in_project(&p, "And another", Some(&sid))).await;
    assert!(
        next.kinds().contains(&"tool_result") && !next.kinds().contains(&"approval_required"),
        "{:?}",
        next.kinds()
    );
    every_call_answered(&log(&t, &sid).await);
    assert_eq!(t.llm.take_rejections(), vec![]);
}

/// A single event of alice's, organized by `organizer`.
async fn alices_event(t: &TestApp, title: &str, organizer: Option<Organizer>) -> CalendarEvent {
    let mut e = shared::calendar::store::contract::event(title);
    (e.recurrence, e.organizer) = (None, organizer);
    DynamoEventStore::new(t.dynamo.clone(), t.table.clone()).put(&uid("alice"), &e, None).await.unwrap();
    e
}

#[tokio::test]
async fn a_change_to_an_event_someone_else_organizes_waits_the_users_own_runs() {
    let t = TestApp::new().await;
    let bob = |own| Organizer { address: "mailto:bob@example.com".into(), name: Some("Bob".into()), own };
    let theirs = alices_event(&t, "Board review", Some(bob(false))).await;
    let ours = alices_event(&t, "Focus time", Some(bob(true))).await;
    let move_it = |e: &CalendarEvent| json!({"event_id": e.id.to_string(), "title": "Moved"});
    t.llm.push(Reply::tool_calls(&[("update_calendar_event", move_it(&theirs))]));
    let first = t.turn("alice", json!({"message": "Rename the board review"})).await;
    let (_, _, summary) = asked(&first);
    assert_eq!(summary, "Change the calendar event \"Board review\" (organized by Bob): title → \"Moved\"");
    let events = DynamoEventStore::new(t.dynamo.clone(), t.table.clone());
    assert_eq!(events.get(&uid("alice"), &theirs.id).await.unwrap().unwrap().title, "Board review", "not run");
    t.llm.push(Reply::tool_calls(&[("update_calendar_event", move_it(&ours))]));
    t.llm.push(Reply::text(&["Renamed."]));
    let own = t.turn("alice", json!({"message": "Rename my focus time"})).await;
    assert!(own.kinds().contains(&"tool_result") && !own.kinds().contains(&"approval_required"), "{:?}", own.kinds());
    assert_eq!(events.get(&uid("alice"), &ours.id).await.unwrap().unwrap().title, "Moved");
    assert_eq!(t.llm.take_rejections(), vec![]);
}

#[tokio::test]
async fn row_deadline_while_an_approved_call_runs_it_is_cut_logged_and_never_runs_again() {
    let proxy = FaultProxy::start().await;
    let t = TestApp::with_dynamo_client(proxy.client().await, |_| {}).await;
    let (p, _) = project_with_task(&t, "Old checklist").await;
    assert_eq!(ask_first(&t, "alice", &["create_task"]).await.status, 200);
    t.llm.push(Reply::tool_calls(&[("create_task", json!({"title": "Slow task"}))]));
    let first = t.turn("alice", in_project(&p, "Add the slow task", None)).await;
    let (sid, (approval, _, _)) = (first.session_id(), asked(&first));
    // The task's write (in the project's partition) is held far past the
    // answer's deadline: `done` before it is released shows the deadline
    // ended the turn (no wall-clock bound on the deadline itself).
    let slow = Duration::from_secs(60);
    let write = Fault::on(Op::TransactWriteItems).containing("\"U#alice#P#").containing("Slow task");
    proxy.inject(write.when(When::Nth(1)).then(Action::Delay(slow)));
    t.llm.set_default(Reply::text(&["Made it."]));
    let path = format!("/sessions/{sid}/approvals/{approval}");
    let late =
        request(&t, "POST", "alice", &path, Some(json!({"approved": true})), Some(Duration::from_millis(2000))).await;
    let (done_at, _) = late.frames.last().unwrap();
    assert!(*done_at < slow, "done before the held write was released: {done_at:?}");
    assert!(matches!(late.done(), StreamEvent::Done { .. }), "{:?}", late.kinds());
    assert!(late.kinds().contains(&"approval_answered"), "{:?}", late.kinds());
    let stored = log(&t, &sid).await;
    every_call_answered(&stored);
    let result = stored.iter().find(|m| m.role == Role::Tool).and_then(|m| m.content.clone()).unwrap_or_default();
    assert!(result.contains("may or may not have taken effect"), "{result}");
    // Spent: the answer again runs nothing.
    assert_eq!(answer(&t, "alice", &sid, &approval, true, None).await.status, 409);
    proxy.clear();
    t.llm.clear_replies();
    t.llm.push(Reply::text(&["It may exist; let me check."]));
    let next = t.turn("alice", in_project(&p, "did it work?", Some(&sid))).await;
    assert_eq!(next.error_code(), None, "{:?}", next.kinds());
    assert!(tool_results_sent(&t).iter().any(|r| r.contains("may or may not have taken effect")));
    assert!(task_titles(&t, &p).await.iter().filter(|n| *n == "Slow task").count() <= 1, "at most once");
    assert_eq!(t.llm.take_rejections(), vec![]);
}

#[tokio::test]
async fn row_deadline_while_the_answers_continuation_runs_the_call_ran_once_and_done_comes() {
    let t = TestApp::new().await;
    let (p, task) = project_with_task(&t, "Old checklist").await;
    let (sid, approval, _) = ask_to_delete(&t, &p, &task).await;
    // The model never finishes after the approved delete: only the deadline
    // ends this turn.
    t.llm.push(Reply::Stream(vec![Step::Text("Deleted, and ".into()), Step::Hang]));
    let path = format!("/sessions/{sid}/approvals/{approval}");
    let cut =
        request(&t, "POST", "alice", &path, Some(json!({"approved": true})), Some(Duration::from_millis(2000))).await;
    assert_eq!(cut.error_code().as_deref(), Some("deadline_exceeded"), "{:?}", cut.kinds());
    assert!(matches!(cut.done(), StreamEvent::Done { .. }), "{:?}", cut.kinds());
    assert!(!task_exists(&t, &p, &task).await, "the approved call ran");
    let stored = log(&t, &sid).await;
    every_call_answered(&stored);
    assert_eq!(stored.iter().filter(|m| m.role == Role::Tool).count(), 1, "once");
    assert_eq!(answer(&t, "alice", &sid, &approval, true, None).await.status, 409, "spent");
    t.llm.clear_replies();
    t.llm.push(Reply::text(&["Done."]));
    let next = t.turn("alice", in_project(&p, "next", Some(&sid))).await;
    assert_eq!(next.error_code(), None, "{:?}", next.kinds());
    assert_eq!(t.llm.take_rejections(), vec![]);
}

#[tokio::test]
async fn words_that_call_a_waiting_delete_done_stand_corrected() {
    let t = TestApp::new().await;
    let (p, task) = project_with_task(&t, "Old checklist").await;
    // The call waits for the user's yes, but its words say it is done.
    let args = json!({"kind": "task", "id": task.to_string()}).to_string();
    t.llm.push(Reply::Stream(vec![
        Step::Text("I've deleted the Old checklist.".into()),
        Step::ToolCall { index: Some(0), id: Some("c1".into()), name: Some("delete_entity".into()), arguments: args },
        Step::Finish("tool_calls".into()),
        Step::Done,
    ]));
    let first = t.turn("alice", in_project(&p, "Delete the old checklist", None)).await;
    asked(&first);
    let checks: Vec<&StreamEvent> =
        first.events.iter().filter(|e| matches!(e, StreamEvent::AnswerCheck { .. })).collect();
    let [StreamEvent::AnswerCheck { verdict, mismatches }] = checks.as_slice() else { panic!("{:?}", first.kinds()) };
    assert_eq!(*verdict, CheckVerdict::Corrected, "the turn waits: corrected at once, not asked again");
    assert_eq!((mismatches[0].kind, mismatches[0].action), (MismatchKind::ClaimedNotDone, OperationAction::Delete));
    assert_eq!(t.llm.request_count(), 1);
    assert!(task_exists(&t, &p, &task).await);
    let stored = log(&t, &first.session_id()).await;
    let asking = stored.iter().find(|m| !m.approvals.is_empty()).expect("the waiting message");
    assert_eq!(asking.claim_mismatches.len(), 1, "the log keeps the correction");
    assert_eq!(t.llm.take_rejections(), vec![]);
}

/// History read back after a reload says what the live turn said (issue
/// 40): each stored call keeps its steps, the deleted task named by its
/// title (not its id), a listing by what it found.
#[tokio::test]
async fn the_history_after_a_reload_reads_like_the_live_turn() {
    let t = TestApp::new().await;
    let (p, task) = project_with_task(&t, "Old checklist").await;
    let (sid, approval, _) = ask_to_delete(&t, &p, &task).await;
    t.llm.push(Reply::tool_calls(&[("list_entities", json!({"kind": "task"}))]));
    t.llm.push(Reply::text(&["Deleted it; no tasks left."]));
    let yes = answer(&t, "alice", &sid, &approval, true, None).await;
    assert!(matches!(yes.done(), StreamEvent::Done { reason: DoneReason::Complete, .. }), "{:?}", yes.kinds());
    let live: Vec<Value> = yes
        .events
        .iter()
        .filter(
            |e| matches!(e, StreamEvent::Operation { status, .. } if *status != shared::sse::OperationStatus::Start),
        )
        .map(|e| {
            let mut v = serde_json::to_value(e).unwrap();
            v.as_object_mut().unwrap().remove("type");
            v
        })
        .collect();

    let history = request(&t, "GET", "alice", &format!("/sessions/{sid}/messages"), None, None).await;
    assert_eq!(history.status, 200);
    let page = history.json.expect("a messages page");
    let calls: Vec<&Value> = page["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["tool_calls"].as_array().into_iter().flatten())
        .collect();
    let ops = |name: &str| {
        let call = calls.iter().find(|c| c["name"] == name).unwrap_or_else(|| panic!("{name} in {page}"));
        call["operations"].as_array().cloned().unwrap_or_default()
    };
    let deleted = ops("delete_entity");
    assert_eq!(deleted.len(), 1, "{deleted:?}");
    assert_eq!(deleted[0]["entity_name"], "Old checklist", "the title, not {task}");
    assert_eq!((&deleted[0]["action"], &deleted[0]["status"]), (&json!("delete"), &json!("success")));
    let listed = ops("list_entities");
    assert_eq!(listed[0]["summary"], "Listed no tasks", "{listed:?}");
    let stored: Vec<Value> = [deleted, listed].concat();
    assert_eq!(stored, live, "the same words as the live turn");
}

/// `reorganize_project` (docs/tools.md#reorganizing-a-project): a batch of up
/// to three changes runs at once; a larger one waits, its question spells out
/// each change by name, and the yes applies all of it in one version.
#[tokio::test]
async fn a_reorganize_of_more_than_three_changes_waits_and_a_small_one_runs_at_once() {
    use shared::entities::{CreateEntity, EntityFields, NewDocument};
    let t = TestApp::new().await;
    let (p, task) = project_with_task(&t, "Draft").await;
    let (svc, alice) = (service(&t), uid("alice"));
    let mut docs = vec![];
    for title in ["Specs", "API notes", "Glossary", "FAQ"] {
        let d = NewDocument {
            title: title.into(),
            description: None,
            content: String::new(),
            parent_id: None,
            position: None,
        };
        docs.push(svc.create(&alice, &p, CreateEntity::from(d)).await.unwrap().data.id.to_string());
    }
    let fields = EntityFields::Goal(serde_json::from_value(json!({"name": "Ship"})).unwrap());
    let goal = svc.create(&alice, &p, CreateEntity::new(fields)).await.unwrap().data.id.to_string();
    let supports = json!({"from_kind": "task", "from_id": task.to_string(), "relation": "supports", "to_kind": "goal", "to_id": goal});
    let under_specs = |d: &str| json!({"document_id": d, "new_parent_id": docs[0]});
    let children_of_specs = || async {
        let tree = svc.doc_structure(&alice, &p).await.unwrap();
        let specs = tree.root.iter().find(|n| n.id.to_string() == docs[0]).cloned().unwrap();
        specs.children.iter().map(|n| n.id.to_string()).collect::<Vec<_>>()
    };

    // Two changes: at once.
    let small = json!({"moves": [under_specs(&docs[1])], "link": [supports]});
    t.llm.push(Reply::tool_calls(&[("reorganize_project", small)]));
    t.llm.push(Reply::text(&["Done."]));
    let first = t.turn("alice", in_project(&p, "Put the API notes under Specs and tie the draft to Ship", None)).await;
    let kinds = first.kinds();
    assert!(kinds.contains(&"tool_result") && !kinds.contains(&"approval_required"), "{kinds:?}");
    assert_eq!(children_of_specs().await, [docs[1].clone()]);
    assert_eq!(svc.edges(&alice, &p, None).await.unwrap().len(), 1);

    // Four changes: waits, nothing runs, the question names each.
    let version = svc.get_project(&alice, &p).await.unwrap().version;
    let large = json!({
        "expected_version": version,
        "moves": [under_specs(&docs[2]), under_specs(&docs[3]), {"document_id": docs[1], "new_parent_id": null, "position": 0}],
        "unlink": [supports],
    });
    t.llm.push(Reply::tool_calls(&[("reorganize_project", large)]));
    let second = t.turn("alice", in_project(&p, "Tidy the documents up and drop that link", None)).await;
    let (approval, _, summary) = asked(&second);
    assert!(
        summary.starts_with("Reorganize the project (4 changes): move \"Glossary\" under \"Specs\"")
            && summary.contains("unlink task \"Draft\" supports goal \"Ship\""),
        "{summary}"
    );
    assert!(!second.kinds().contains(&"tool_result"), "nothing ran: {:?}", second.kinds());
    assert_eq!(svc.get_project(&alice, &p).await.unwrap().version, version);

    t.llm.push(Reply::text(&["Reorganized."]));
    let sid = second.session_id();
    let yes = answer(&t, "alice", &sid, &approval, true, None).await;
    assert_eq!(yes.status, 200, "{:?}", yes.json);
    let patches: Vec<u64> = yes
        .events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::EntityPatch { patch } => Some(patch.version),
            _ => None,
        })
        .collect();
    assert_eq!(patches, [version + 1], "one patch, one version for the batch");
    assert_eq!(children_of_specs().await, [docs[2].clone(), docs[3].clone()]);
    assert!(svc.edges(&alice, &p, None).await.unwrap().is_empty());
}

/// A brain dump (docs/modes.md): the dump block (what exists, the voice
/// notes of the group) reaches the prompt; the model's one batch waits for
/// the user's yes with nothing written, and the yes writes all of it.
#[tokio::test]
async fn a_brain_dumps_batch_writes_nothing_before_the_yes_and_everything_after() {
    let t = TestApp::new().await;
    let (p, venue) = project_with_task(&t, "Book the venue").await;
    let dump = |message: &str, sid: Option<&str>| {
        let mut body = json!({"message": message, "context_type": "brain_dump",
            "projectFocus": {"projectId": p.to_string()}, "voice_note_group_id": "vg-1"});
        if let Some(sid) = sid {
            body["session_id"] = json!(sid);
        }
        body
    };
    t.llm.push(Reply::text(&["Go on."]));
    let first = t.turn("alice", dump("call the caterer about the party", None)).await;
    let sid = first.session_id();
    let batch = json!({"entities": [
        {"ref": "g1", "kind": "goal", "fields": {"name": "A good party"}},
        {"ref": "t1", "kind": "task", "fields": {"title": "Call the caterer"}},
        {"ref": "t2", "kind": "task", "fields": {"title": "Order flyers"}}],
        "links": [{"from": "t1", "relation": "supports", "to": "g1"},
                  {"from": venue.to_string(), "relation": "supports", "to": "g1"}]});
    t.llm.push(Reply::tool_calls(&[("propose_entities", batch)]));
    let second = t.turn("alice", dump("and order flyers", Some(&sid))).await;
    assert_eq!(second.error_code(), None, "{:?}", second.kinds());
    let prompt = tests::system_text(&t.llm.requests()[1]);
    assert!(prompt.contains(r#""mode":"dump""#), "{prompt}");
    assert!(prompt.contains(&format!("task “Book the venue”: id {venue}")), "what exists: {prompt}");
    assert!(prompt.contains(r#""notes":["call the caterer about the party","and order flyers"]"#), "{prompt}");
    let (approval, _, summary) = asked(&second);
    assert_eq!(
        summary,
        "Create 3 entities: goal “A good party”, task “Call the caterer”, task “Order flyers”; and 2 links"
    );
    assert_eq!(task_titles(&t, &p).await, ["Book the venue"], "nothing written before the yes");
    assert!(service(&t).edges(&uid("alice"), &p, None).await.unwrap().is_empty());

    t.llm.push(Reply::text(&["All added."]));
    let yes = answer(&t, "alice", &sid, &approval, true, None).await;
    assert_eq!(yes.status, 200, "{:?}", yes.json);
    let mut titles = task_titles(&t, &p).await;
    titles.sort();
    assert_eq!(titles, ["Book the venue", "Call the caterer", "Order flyers"]);
    let page = shared::entities::PageRequest { limit: Some(10), cursor: None };
    let goals = service(&t).list(&uid("alice"), &p, EntityKind::Goal, page).await.unwrap().items;
    assert_eq!(goals.len(), 1);
    let edges = service(&t).edges(&uid("alice"), &p, Some(&goals[0].id)).await.unwrap();
    assert_eq!(edges.len(), 2, "both links: {edges:?}");
    every_call_answered(&log(&t, &sid).await);
    assert_eq!(t.llm.take_rejections(), vec![]);
}
