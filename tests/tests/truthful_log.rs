//! The log tells the truth (issue 15): what a turn stores is what happened,
//! whatever ended it — Stop or a disconnect while a tool call is in flight,
//! a model stream cut inside a call's arguments, a panic, a retried run id —
//! and the next model request is a valid history. Real stream handler,
//! DynamoDB Local, the scripted model.

use serde_json::{json, Value};
use shared::entities::store::DynamoEntityStore;
use shared::entities::{EntityKind, EntityService, NewProject, PageRequest};
use shared::ids::{ProjectId, RunId, SessionId, UserId};
use shared::message::{CutReason, Role, ToolCall};
use shared::session::store::{SessionLog, Sessions};
use shared::session::TurnStatus;
use shared::sse::{DoneReason, StreamEvent};
use shared::turn::{ToolRun, TurnScope, TurnTools};
use std::sync::Arc;
use std::time::Duration;
use tests::{assert_tool_protocol, token, Reply, Step, TestApp, Turn};

fn user(u: &str) -> UserId {
    UserId::parse(u).unwrap()
}

fn service(t: &TestApp) -> EntityService {
    EntityService::new(DynamoEntityStore::new(t.dynamo.clone(), t.table.clone()))
}

async fn project(t: &TestApp, u: &str) -> ProjectId {
    let p = NewProject { name: "Launch".into(), description: None, state: Default::default(), context: None };
    service(t).create_project(&user(u), p).await.unwrap().data.project.id
}

fn in_project(p: &ProjectId, message: &str, run: &str) -> Value {
    json!({"message": message, "context_type": "project", "projectFocus": {"projectId": p.to_string()},
        "stream_run_id": run})
}

/// The real tools, but each call's answer comes back `delay` after its write
/// committed: the window in which a Stop or a disconnect lands "during" it.
struct SlowAnswers {
    inner: Arc<dyn TurnTools>,
    delay: Duration,
}

#[async_trait::async_trait]
impl TurnTools for SlowAnswers {
    fn offered(&self, scope: &TurnScope) -> Vec<Value> {
        self.inner.offered(scope)
    }
    async fn run(&self, user: &UserId, scope: &TurnScope, call: &ToolCall) -> ToolRun {
        let run = self.inner.run(user, scope, call).await;
        tokio::time::sleep(self.delay).await;
        run
    }
}

async fn slow_tools_app(delay: Duration) -> TestApp {
    let mut t = TestApp::with_config(|c| c.stop_poll = Duration::from_millis(50)).await;
    let inner = t.app.deps.tools.clone().expect("the stream function has tools");
    t.app.deps.tools = Some(Arc::new(SlowAnswers { inner, delay }));
    t
}

async fn tasks(t: &TestApp, p: &ProjectId) -> usize {
    let page =
        service(t).list(&user("alice"), p, EntityKind::Task, PageRequest { limit: None, cursor: None }).await.unwrap();
    page.items.len()
}

/// Waits until the turn of `run` has ended (for turns whose client left).
async fn ended(t: &TestApp, sid: &SessionId, run: &str) -> TurnStatus {
    let run = RunId::parse(run).unwrap();
    for _ in 0..200 {
        if let Some(r) = t.store().turn_by_run(&user("alice"), sid, &run).await.unwrap() {
            if r.status != TurnStatus::Running {
                return r.status;
            }
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the turn did not end");
}

/// Alice's messages of a session, as the sessions API gives them.
async fn history(t: &TestApp, sid: &str) -> Vec<Value> {
    let req = http::Request::builder()
        .method("GET")
        .uri(format!("/sessions/{sid}/messages"))
        .header("authorization", format!("Bearer {}", token("alice")))
        .body(lambda_http::Body::Empty)
        .unwrap();
    let page = Turn::read(shared::edge::stream::handle_stream(&t.app, lambda_http::Request::from(req)).await).await;
    page.json.unwrap()["messages"].as_array().unwrap().clone()
}

/// The tool message stored for `call_id`, parsed.
async fn stored_result(t: &TestApp, sid: &SessionId, call_id: &str) -> Value {
    let msgs = t.store().recent_messages(&user("alice"), sid, 50).await.unwrap();
    let m = msgs.iter().find(|m| m.tool_call_id.as_deref() == Some(call_id)).expect("a stored result");
    serde_json::from_str(m.content.as_deref().unwrap()).unwrap()
}

#[tokio::test]
async fn a_stop_while_a_tool_call_is_in_flight_keeps_its_real_result() {
    // The call's answer is held 5 s after its write: the stop below lands
    // inside that (a margin a loaded machine meets).
    let t = slow_tools_app(Duration::from_secs(5)).await;
    let p = project(&t, "alice").await;
    let first = t.turn("alice", in_project(&p, "hello", "r-0")).await;
    let sid = first.session_id();
    t.llm.push(Reply::tool_calls(&[("create_task", json!({"title": "Write the launch post"}))]));
    let mut body = in_project(&p, "add a task", "r-1");
    body["session_id"] = json!(sid);
    let resp = t.post(Some(&token("alice")), body.to_string()).await;
    let reader = tokio::spawn(Turn::read(resp));
    // In flight: its write is applied, its answer held (no fixed sleep).
    while tasks(&t, &p).await == 0 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let stop = http::Request::builder()
        .method("POST")
        .uri(format!("/sessions/{sid}/stop"))
        .header("authorization", format!("Bearer {}", token("alice")))
        .body(lambda_http::Body::Empty)
        .unwrap();
    let stopped = Turn::read(shared::edge::stream::handle_stream(&t.app, lambda_http::Request::from(stop)).await).await;
    assert_eq!(stopped.json.as_ref().unwrap()["stopped"], json!(true), "{:?}", stopped.json);
    let turn = reader.await.unwrap();

    assert!(matches!(turn.done(), StreamEvent::Done { reason: DoneReason::Stopped, .. }), "{:?}", turn.kinds());
    assert_eq!(tasks(&t, &p).await, 1, "the write committed");
    assert!(turn.kinds().contains(&"entity_patch"), "the client learns what changed: {:?}", turn.kinds());
    let sid = SessionId::parse(sid).unwrap();
    let result = stored_result(&t, &sid, "call_0_create_task").await;
    assert_eq!(result["fields"]["title"], json!("Write the launch post"), "the real result, not 'not run': {result}");

    // The next turn's model request tells the model the task exists.
    t.llm.push(Reply::text(&["ok"]));
    let mut next = in_project(&p, "and now?", "r-2");
    next["session_id"] = json!(sid.to_string());
    let after = t.turn("alice", next).await;
    assert_eq!(after.error_code(), None, "{:?}", after.events);
    let req = t.llm.requests().last().unwrap().clone();
    assert_tool_protocol(&req);
    assert!(req.to_string().contains("Write the launch post"));
}

#[tokio::test]
async fn a_disconnect_while_a_tool_call_is_in_flight_keeps_its_real_result() {
    let mut t = slow_tools_app(Duration::from_millis(800)).await;
    // A turn whose frames are not kept (one whose are goes on without its client).
    t.app.deps.frames = None;
    let p = project(&t, "alice").await;
    let sid = t.turn("alice", in_project(&p, "hello", "r-0")).await.session_id();
    t.llm.push(Reply::tool_calls(&[("create_task", json!({"title": "Draft"}))]));
    let mut body = in_project(&p, "add a task", "r-1");
    body["session_id"] = json!(sid);
    let resp = t.post(Some(&token("alice")), body.to_string()).await;
    let mut stream = resp.into_body();
    // Read until the tool call is on the wire, then leave.
    use http_body_util::BodyExt;
    let mut seen = Vec::new();
    while !String::from_utf8_lossy(&seen).contains("\"tool_call\"") {
        let frame = stream.frame().await.expect("more frames").unwrap();
        seen.extend_from_slice(&frame.into_data().unwrap_or_default());
    }
    drop(stream);
    let sid = SessionId::parse(sid).unwrap();
    assert_eq!(ended(&t, &sid, "r-1").await, TurnStatus::Stopped);
    assert_eq!(tasks(&t, &p).await, 1);
    let result = stored_result(&t, &sid, "call_0_create_task").await;
    assert_eq!(result["fields"]["title"], json!("Draft"), "{result}");
}

#[tokio::test]
async fn a_call_cut_off_mid_arguments_is_stored_so_the_next_request_stays_valid() {
    let t = TestApp::new().await;
    let p = project(&t, "alice").await;
    t.llm.push(Reply::Stream(vec![
        Step::Text("Creating it".into()),
        Step::ToolCall {
            index: Some(0),
            id: Some("cut".into()),
            name: Some("create_task".into()),
            arguments: "{\"title\": \"Writ".into(),
        },
        Step::Drop,
    ]));
    let turn = t.turn("alice", in_project(&p, "add a task", "r-1")).await;
    assert_eq!(turn.error_code().as_deref(), Some("llm_stream_error"), "{:?}", turn.events);
    assert_eq!(tasks(&t, &p).await, 0, "nothing ran");
    let sid = SessionId::parse(turn.session_id()).unwrap();
    let msgs = t.store().recent_messages(&user("alice"), &sid, 20).await.unwrap();
    let call = msgs.iter().flat_map(|m| m.tool_calls.iter()).find(|c| c.id == "cut").expect("the call is kept");
    assert_eq!(call.function.arguments, "{}", "stored arguments are valid JSON");
    let result = stored_result(&t, &sid, "cut").await;
    assert_eq!(result["error"]["code"], json!("invalid_arguments"), "{result}");
    assert_eq!(result["arguments_received"], json!("{\"title\": \"Writ"), "what the model sent is kept");

    t.llm.push(Reply::text(&["again"]));
    let mut next = in_project(&p, "continue", "r-2");
    next["session_id"] = json!(sid.to_string());
    let after = t.turn("alice", next).await;
    assert_eq!(after.error_code(), None, "{:?}", after.events);
    let req = t.llm.requests().last().unwrap().clone();
    assert_tool_protocol(&req);
    for m in req["messages"].as_array().unwrap() {
        for c in m["tool_calls"].as_array().into_iter().flatten() {
            let args = c["function"]["arguments"].as_str().unwrap();
            assert!(serde_json::from_str::<Value>(args).is_ok_and(|v| v.is_object()), "{args}");
        }
    }
}

/// Tools whose definitions cannot be built: a panic inside the turn, after
/// the lease was taken.
struct Exploding;

#[async_trait::async_trait]
impl TurnTools for Exploding {
    fn offered(&self, _: &TurnScope) -> Vec<Value> {
        panic!("a bug in the tool definitions");
    }
    async fn run(&self, _: &UserId, _: &TurnScope, _: &ToolCall) -> ToolRun {
        unreachable!()
    }
}

#[tokio::test]
async fn a_panic_in_the_turn_still_ends_with_error_then_done_and_frees_the_session() {
    let mut t = TestApp::new().await;
    let sid = t.turn("alice", json!({"message": "hello"})).await.session_id();
    let tools = t.app.deps.tools.replace(Arc::new(Exploding));
    let boom = t.turn("alice", json!({"message": "again", "session_id": sid})).await;
    assert_eq!(boom.error_code().as_deref(), Some("internal_error"), "{:?}", boom.kinds());
    match boom.done() {
        StreamEvent::Done { reason: DoneReason::Error, session_id, .. } => {
            assert_eq!(session_id.as_ref().map(ToString::to_string).as_deref(), Some(sid.as_str()))
        }
        other => panic!("{other:?}"),
    }
    t.app.deps.tools = tools;
    let next = t.turn("alice", json!({"message": "still there?", "session_id": sid})).await;
    assert_eq!(next.error_code(), None, "the lease was given back, not left to expire: {:?}", next.events);
}

#[tokio::test]
async fn only_an_object_is_a_turn_and_a_bad_focus_is_refused_with_nothing_written() {
    let t = TestApp::new().await;
    for (body, code) in [
        (json!(["hi"]), "invalid_json"),
        (json!(["hi", null, "global"]), "invalid_json"),
        (json!({"message": "hi", "projectFocus": {"projectId": "not a valid id!"}}), "invalid_focus"),
    ] {
        let turn = Turn::read(t.post(Some(&token("alice")), body.to_string()).await).await;
        assert_eq!(turn.status, 400, "{body}");
        assert_eq!(turn.json.as_ref().unwrap()["error"]["code"], json!(code), "{body}");
    }
    let items = t.dynamo.scan().table_name(&t.table).send().await.unwrap();
    assert_eq!(items.count, 0, "nothing written");
    assert_eq!(t.llm.request_count(), 0);
}

#[tokio::test]
async fn a_voice_note_group_is_stored_with_the_message_and_returned_in_history() {
    let t = TestApp::new().await;
    let turn = t.turn("alice", json!({"message": "dictated", "voice_note_group_id": "vng-42"})).await;
    let messages = history(&t, &turn.session_id()).await;
    let user_msg = messages.iter().find(|m| m["role"] == "user").unwrap();
    assert_eq!(user_msg["voice_note_group_id"], json!("vng-42"), "{user_msg}");
    let assistant = messages.iter().find(|m| m["role"] == "assistant").unwrap();
    assert!(assistant.get("voice_note_group_id").is_none());
}

#[tokio::test]
async fn a_retried_first_turn_makes_one_session_and_replays_its_outcome() {
    let t = TestApp::new().await;
    t.llm.push(Reply::text(&["Hello ", "there"]));
    let body = json!({"message": "hi", "stream_run_id": "first-run"});
    let one = t.turn("alice", body.clone()).await;
    let two = t.turn("alice", body).await;
    assert_eq!(one.error_code(), None);
    assert_eq!(two.error_code(), None, "{:?}", two.events);
    assert_eq!(two.session_id(), one.session_id(), "the same session, not a second one");
    assert_eq!(two.text(), "Hello there", "the stored outcome");
    assert!(matches!(two.done(), StreamEvent::Done { replayed: true, .. }));
    assert_eq!(t.llm.request_count(), 1, "the model was called once");
    let sessions = t.store().list_sessions(&user("alice"), 10, None).await.unwrap();
    assert_eq!(sessions.sessions.len(), 1);
    let sid = SessionId::parse(one.session_id()).unwrap();
    let msgs = t.store().recent_messages(&user("alice"), &sid, 10).await.unwrap();
    assert_eq!(msgs.iter().filter(|m| m.role == Role::User).count(), 1);
    // Another user's same run id is theirs.
    let bob = t.turn("bob", json!({"message": "hi", "stream_run_id": "first-run"})).await;
    assert_ne!(bob.session_id(), one.session_id());
}

#[tokio::test]
async fn a_retry_of_a_running_turn_names_its_session() {
    let mut t = TestApp::new().await;
    // Without the frame log; with it, the retry follows the running turn
    // (tests/tests/resume.rs).
    t.app.deps.frames = None;
    t.llm.push(Reply::paced(&["slow ", "answer ", "here"], Duration::from_millis(400)));
    let body = json!({"message": "hi", "stream_run_id": "busy-run"});
    let first = tokio::spawn({
        let resp = t.post(Some(&token("alice")), body.to_string()).await;
        Turn::read(resp)
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let retry = t.turn("alice", body).await;
    let first = first.await.unwrap();
    assert_eq!(retry.error_code().as_deref(), Some("turn_running"), "{:?}", retry.events);
    assert_eq!(retry.session_id(), first.session_id());
    assert_eq!(first.error_code(), None);
    assert_eq!(t.llm.request_count(), 1);
}

#[tokio::test]
async fn a_one_megabyte_answer_is_stored_whole_and_read_back() {
    let t = TestApp::new().await;
    // Every word its own: the same word 200 000 times is a loop the turn cuts
    // (`model_loop::repetition`), not an answer.
    let line = |i: usize| (0..200).map(|j| format!("{:06} ", i * 200 + j)).collect::<String>();
    let pieces: Vec<String> = (0..1_000).map(|i| format!("{i:04}é{}\n", line(i))).collect();
    let answer: String = pieces.concat();
    assert!(answer.len() > 1_000_000);
    t.llm.push(Reply::text(&pieces.iter().map(String::as_str).collect::<Vec<_>>()));
    let turn = t.turn("alice", json!({"message": "write a lot"})).await;
    assert_eq!(turn.error_code(), None, "{:?}", turn.error_code());
    assert_eq!(turn.text(), answer, "the client saw it all");
    let sid = SessionId::parse(turn.session_id()).unwrap();
    let msgs = t.store().recent_messages(&user("alice"), &sid, 10).await.unwrap();
    let stored = msgs.iter().find(|m| m.role == Role::Assistant).expect("the answer is in the log");
    assert_eq!(stored.content.as_deref(), Some(answer.as_str()), "byte for byte");
    // The sessions API returns it whole, and the next turn's context reads it.
    let messages = history(&t, &sid.to_string()).await;
    let api = messages.iter().find(|m| m["role"] == "assistant").unwrap();
    assert_eq!(api["content"].as_str().map(str::len), Some(answer.len()));
    t.llm.push(Reply::text(&["ok"]));
    let next = t.turn("alice", json!({"message": "thanks", "session_id": sid.to_string()})).await;
    assert_eq!(next.error_code(), None, "{:?}", next.events);
}

#[tokio::test]
async fn a_tool_call_with_a_megabyte_of_arguments_is_stored_with_its_result() {
    let t = TestApp::new().await;
    let p = project(&t, "alice").await;
    let content = "lorem ipsum dolor ".repeat(60_000);
    t.llm.push(Reply::tool_calls(&[("create_document", json!({"title": "Big", "content": content}))]));
    t.llm.push(Reply::text(&["made it"]));
    let turn = t.turn("alice", in_project(&p, "write the big doc", "r-1")).await;
    assert_eq!(turn.error_code(), None, "{:?}", turn.error_code());
    let sid = SessionId::parse(turn.session_id()).unwrap();
    let msgs = t.store().recent_messages(&user("alice"), &sid, 10).await.unwrap();
    let call = msgs.iter().flat_map(|m| m.tool_calls.iter()).find(|c| c.function.name == "create_document").unwrap();
    let args: Value = serde_json::from_str(&call.function.arguments).unwrap();
    assert_eq!(args["content"].as_str(), Some(content.as_str()), "the arguments, whole");
    let result = stored_result(&t, &sid, &call.id).await;
    assert!(result.to_string().contains("Big"), "the log says the document was made: {result}");
    assert_eq!(t.llm.request_count(), 2);
    assert_tool_protocol(&t.llm.requests()[1]);
}

/// The `answer_check` events of a turn: (verdict, kinds of mismatch).
fn checks(turn: &Turn) -> Vec<(String, Vec<String>)> {
    turn.events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::AnswerCheck { verdict, mismatches } => Some((
                json!(verdict).as_str().unwrap().to_string(),
                mismatches.iter().map(|m| json!(m.kind).as_str().unwrap().to_string()).collect(),
            )),
            _ => None,
        })
        .collect()
}

/// The note the model was asked again with, if it was.
fn note_of(request: &Value) -> Option<String> {
    let last = request["messages"].as_array()?.last()?;
    let text = last["content"].as_str()?;
    (last["role"] == "user" && text.starts_with("[A check by the app")).then(|| text.to_string())
}

#[tokio::test]
async fn an_answer_that_claims_a_change_no_tool_made_is_asked_again_then_corrected() {
    let t = TestApp::new().await;
    let p = project(&t, "alice").await;
    // Issue 40: no write at all, then "I've cancelled …" — twice.
    t.llm.push(Reply::text(&["I've cancelled tomorrow's ", "standup only."]));
    t.llm.push(Reply::text(&["Done: the standup was deleted."]));
    let turn = t.turn("alice", in_project(&p, "cancel tomorrow's standup", "r-1")).await;
    assert!(matches!(turn.done(), StreamEvent::Done { reason: DoneReason::Complete, .. }), "{:?}", turn.kinds());
    assert_eq!(
        checks(&turn),
        [
            ("asked_again".into(), vec!["claimed_not_done".into()]),
            ("corrected".into(), vec!["claimed_not_done".into()])
        ]
    );
    let requests = t.llm.requests();
    assert_eq!(requests.len(), 2, "asked once more, never twice");
    let note = note_of(&requests[1]).expect("the second request ends with the note");
    assert!(note.contains("Committed this turn: nothing"), "{note}");
    assert!(requests[1]["tools"].as_array().is_none_or(|t| t.is_empty()), "no tools the second time");
    // The log shows both answers: the first withdrawn, the second corrected.
    let sid = turn.session_id();
    let shown = history(&t, &sid).await;
    let answers: Vec<&Value> = shown.iter().filter(|m| m["role"] == "assistant").collect();
    assert_eq!(answers.len(), 2, "{shown:?}");
    assert_eq!(answers[0]["in_context"], json!(false));
    assert_eq!(answers[0]["claim_mismatches"][0]["action"], json!("delete"));
    assert!(answers[1].get("in_context").is_none(), "{:?}", answers[1]);
    assert_eq!(answers[1]["claim_mismatches"][0]["kind"], json!("claimed_not_done"));
    // The withdrawn answer never reaches the model again.
    t.llm.push(Reply::text(&["ok"]));
    let mut next = in_project(&p, "thanks", "r-2");
    next["session_id"] = json!(sid);
    t.turn("alice", next).await;
    let sent = serde_json::to_string(&t.llm.requests().last().unwrap()["messages"]).unwrap();
    assert!(!sent.contains("I've cancelled tomorrow"), "{sent}");
    assert!(sent.contains("the standup was deleted"), "the answer that stood is in context: {sent}");
}

#[tokio::test]
async fn a_write_the_answer_denies_is_asked_again_and_a_true_answer_stands() {
    let t = TestApp::new().await;
    let p = project(&t, "alice").await;
    t.llm.push(Reply::tool_calls(&[("create_task", json!({"title": "Write the blog post"}))]));
    t.llm.push(Reply::text(&["Sorry, I couldn't create Write the blog post."]));
    t.llm.push(Reply::text(&["I created the task Write the blog post."]));
    let turn = t.turn("alice", in_project(&p, "add a task", "r-1")).await;
    assert_eq!(tasks(&t, &p).await, 1);
    assert_eq!(checks(&turn), [("asked_again".into(), vec!["done_but_denied".into()])], "{:?}", turn.kinds());
    let note = note_of(&t.llm.requests()[2]).expect("asked again with the note");
    assert!(note.contains("Committed this turn: creation of task \"Write the blog post\""), "{note}");
    let shown = history(&t, &turn.session_id()).await;
    let last = shown.last().unwrap();
    assert_eq!(last["content"], json!("I created the task Write the blog post."));
    assert!(last.get("claim_mismatches").is_none(), "the true answer stands as it is: {last}");
    assert_eq!(last["status"], json!("complete"));
}

#[tokio::test]
async fn partial_success_claimed_in_full_is_caught_and_a_true_answer_needs_nothing() {
    let t = TestApp::new().await;
    let p = project(&t, "alice").await;
    // One write committed; the answer claims a second that never ran.
    t.llm.push(Reply::tool_calls(&[("create_task", json!({"title": "Write the blog post"}))]));
    t.llm.push(Reply::text(&["I created Write the blog post and deleted the old checklist."]));
    t.llm.push(Reply::text(&["I created Write the blog post; the old checklist is unchanged."]));
    let turn = t.turn("alice", in_project(&p, "add a task and drop the old checklist", "r-1")).await;
    let c = checks(&turn);
    assert_eq!(c, [("asked_again".into(), vec!["claimed_not_done".into()])], "{:?}", turn.kinds());
    let shown = history(&t, &turn.session_id()).await;
    let withdrawn = shown.iter().find(|m| m["in_context"] == json!(false)).expect("the first answer is kept");
    assert_eq!(withdrawn["claim_mismatches"].as_array().unwrap().len(), 1, "the creation stands: {withdrawn}");
    assert_eq!(withdrawn["claim_mismatches"][0]["action"], json!("delete"));

    // A truthful answer the first time: asked once, nothing checked aloud.
    t.llm.push(Reply::tool_calls(&[("create_task", json!({"title": "Second"}))]));
    t.llm.push(Reply::text(&["I created the task Second. Should I delete the old checklist too?"]));
    let mut next = in_project(&p, "one more", "r-2");
    next["session_id"] = json!(turn.session_id());
    let before = t.llm.request_count();
    let ok = t.turn("alice", next).await;
    assert!(checks(&ok).is_empty(), "{:?}", ok.kinds());
    assert_eq!(t.llm.request_count() - before, 2, "not asked again");
}

#[tokio::test]
async fn an_answer_cut_at_the_length_limit_is_stored_and_shown_as_cut_off() {
    let t = TestApp::new().await;
    t.llm.push(Reply::Stream(vec![
        Step::Text("Here are your events: 1. Standup, 2. Des".into()),
        Step::Finish("length".into()),
        Step::Done,
    ]));
    let turn = t.turn("alice", json!({"message": "list my week", "stream_run_id": "r-1"})).await;
    assert!(matches!(turn.done(), StreamEvent::Done { reason: DoneReason::CutOff, .. }), "{:?}", turn.kinds());
    assert!(turn.events.iter().any(|e| matches!(e, StreamEvent::CutOff { reason: CutReason::Length })));
    let sid = SessionId::parse(turn.session_id()).unwrap();
    assert_eq!(ended(&t, &sid, "r-1").await, TurnStatus::CutOff);
    let shown = history(&t, &turn.session_id()).await;
    let last = shown.last().unwrap();
    assert_eq!((last["status"].clone(), last["cut_off"].clone()), (json!("cut_off"), json!("length")), "{last}");
    // The next request tells the model its answer was cut.
    t.llm.push(Reply::text(&["ok"]));
    t.turn("alice", json!({"message": "continue", "session_id": sid.to_string(), "stream_run_id": "r-2"})).await;
    let sent = serde_json::to_string(&t.llm.requests().last().unwrap()["messages"]).unwrap();
    assert!(sent.contains("cut off at the model's length limit"), "{sent}");
    // A repeated run id replays the same ending.
    let again = t.turn("alice", json!({"message": "list my week", "stream_run_id": "r-1"})).await;
    assert!(matches!(again.done(), StreamEvent::Done { reason: DoneReason::CutOff, replayed: true, .. }));
}

#[tokio::test]
async fn a_model_repeating_itself_is_stopped_early_and_cut_off() {
    let t = TestApp::new().await;
    // Issue 40: the same item, numbered 1 … 63, until the token limit.
    let items: Vec<Step> = (1..=63).map(|i| Step::Text(format!("{i}. Standup – daily at 9:00\n"))).collect();
    t.llm.push(Reply::Stream(items));
    let turn = t.turn("alice", json!({"message": "list my standups", "stream_run_id": "r-1"})).await;
    assert!(matches!(turn.done(), StreamEvent::Done { reason: DoneReason::CutOff, .. }), "{:?}", turn.kinds());
    assert!(turn.events.iter().any(|e| matches!(e, StreamEvent::CutOff { reason: CutReason::Repetition })));
    let text = turn.text();
    assert!(text.contains("12. Standup") && !text.contains("13. Standup"), "cut at the 12th copy: {text}");
    let shown = history(&t, &turn.session_id()).await;
    assert_eq!(shown.last().unwrap()["cut_off"], json!("repetition"));
}

/// Asked again without tools, a model may answer with nothing but a call
/// (or nothing at all): the first answer then stands, corrected, and no
/// empty assistant message enters the log (every later request of the
/// session would carry it, and a strict server refuses one: "an assistant
/// message needs content or tool_calls").
#[tokio::test]
async fn a_second_answer_that_says_nothing_leaves_the_first_standing_corrected() {
    let t = TestApp::new().await;
    let p = project(&t, "alice").await;
    t.llm.push(Reply::text(&["I've cancelled tomorrow's standup only."]));
    t.llm.push(Reply::tool_calls(&[("list_entities", json!({"kind": "task"}))]));
    let turn = t.turn("alice", in_project(&p, "cancel tomorrow's standup", "r-1")).await;
    assert!(matches!(turn.done(), StreamEvent::Done { reason: DoneReason::Complete, .. }), "{:?}", turn.kinds());
    assert_eq!(
        checks(&turn),
        [
            ("asked_again".into(), vec!["claimed_not_done".into()]),
            ("corrected".into(), vec!["claimed_not_done".into()])
        ]
    );
    let sid = turn.session_id();
    let shown = history(&t, &sid).await;
    let answers: Vec<&Value> = shown.iter().filter(|m| m["role"] == "assistant").collect();
    assert_eq!(answers.len(), 1, "no empty answer is stored: {shown:?}");
    assert!(answers[0].get("in_context").is_none(), "the first answer stands: {:?}", answers[0]);
    assert_eq!(answers[0]["claim_mismatches"][0]["kind"], json!("claimed_not_done"));
    // The next turn's request is one the strict scripted server takes.
    t.llm.push(Reply::text(&["ok"]));
    let mut next = in_project(&p, "thanks", "r-2");
    next["session_id"] = json!(sid);
    let next = t.turn("alice", next).await;
    assert_eq!(next.error_code(), None, "{:?}", next.events);
    assert_eq!(t.llm.take_rejections(), vec![]);
}
