//! Message suggestions (`POST /sessions/{id}/suggestion`, issue 44 item 3)
//! through the stream function's real handler, against DynamoDB Local and
//! the scripted model: the draft streams as `text_delta`s then `done` and
//! the table is the same item for item afterwards (no message, no frame, no
//! session change) — sent as a turn, the text is stored like any message;
//! another user's session (or none) is 404 and a closed one 409, the model
//! not asked; a missing or invalid body is 400 with the JSON error; a
//! suggestion spends the budgets as a turn does and a spent budget refuses
//! it as a turn's refusal does (429 with `Retry-After`); a model failure is
//! `error` then `done`, with nothing stored.

use aws_sdk_dynamodb::types::AttributeValue;
use serde_json::{json, Value};
use shared::config::BudgetConfig;
use shared::edge::stream::handle_stream;
use shared::ids::{SessionId, UserId};
use shared::sse::{DoneReason, StreamEvent};
use std::collections::HashMap;
use std::time::Duration;
use tests::{token, Reply, Step, TestApp, Turn};

type Item = HashMap<String, AttributeValue>;

/// Every item of the test's table, ordered by key: what "nothing stored" is checked against.
async fn table(t: &TestApp) -> Vec<Item> {
    let mut items = Vec::new();
    let mut start = None;
    loop {
        let page = t
            .dynamo
            .scan()
            .table_name(&t.table)
            .consistent_read(true)
            .set_exclusive_start_key(start)
            .send()
            .await
            .expect("scan");
        items.extend(page.items.unwrap_or_default());
        start = page.last_evaluated_key;
        if start.is_none() {
            break;
        }
    }
    let key = |i: &Item| format!("{:?}|{:?}", i.get("pk"), i.get("sk"));
    items.sort_by_key(key);
    items
}

/// The table without the users' budget items (a suggestion counts in them).
async fn table_but_budgets(t: &TestApp) -> Vec<Item> {
    let budget = AttributeValue::S(shared::store::keys::BUDGET_SK.to_string());
    table(t).await.into_iter().filter(|i| i.get("sk") != Some(&budget)).collect()
}

/// A request through the handler, with `body` as raw bytes.
async fn call_raw(t: &TestApp, user: &str, method: &str, path: &str, body: Vec<u8>) -> Turn {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("authorization", format!("Bearer {}", token(user)))
        .header("content-type", "application/json")
        .body(lambda_http::Body::Binary(body))
        .unwrap();
    Turn::read(handle_stream(&t.app, lambda_http::Request::from(req)).await).await
}

async fn suggest(t: &TestApp, user: &str, sid: &str, body: Value) -> Turn {
    call_raw(t, user, "POST", &format!("/sessions/{sid}/suggestion"), serde_json::to_vec(&body).unwrap()).await
}

async fn messages(t: &TestApp, user: &str, sid: &str) -> Vec<shared::message::StoredMessage> {
    use shared::session::store::{MessagesFrom, SessionLog};
    let (user, sid) = (UserId::parse(user).unwrap(), SessionId::parse(sid).unwrap());
    t.store().messages_page(&user, &sid, MessagesFrom::Before(None), 50).await.unwrap()
}

/// A session of `user` with one finished turn: its id.
async fn session_with_a_turn(t: &TestApp, user: &str) -> String {
    t.llm.push(Reply::text(&["Sure.", " What matters most this week?"]));
    let turn = t.turn(user, json!({"message": "Plan my week", "context_type": "global"})).await;
    assert_eq!(turn.error_code(), None, "{:?}", turn.events);
    turn.session_id()
}

fn assert_json_error(r: &Turn, status: u16, code: &str) {
    assert_eq!(r.status, status, "{:?} {:?}", r.json, r.kinds());
    assert_eq!(r.content_type, "application/json");
    let json = r.json.as_ref().expect("a JSON body");
    assert_eq!(json["error"]["code"], code, "{json}");
    assert!(json["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{json}");
}

#[tokio::test]
async fn a_suggestion_streams_the_draft_and_stores_nothing_until_it_is_sent_as_a_turn() {
    let t = TestApp::new().await;
    let sid = session_with_a_turn(&t, "alice").await;
    let before = table(&t).await;
    let draft = "Finish the quarterly report first.";
    t.llm.push(Reply::paced(&["Finish ", "the quarterly ", "report ", "first."], Duration::from_millis(30)));
    let body = json!({"goal": "get the report done", "other_message": "Which task should come first?"});
    let s = suggest(&t, "alice", &sid, body).await;
    assert_eq!((s.status, s.content_type.as_str()), (200, "text/event-stream"), "{:?}", s.json);
    let kinds = s.kinds();
    assert!(kinds.len() >= 2 && kinds[..kinds.len() - 1].iter().all(|k| *k == "text_delta"), "{kinds:?}");
    assert_eq!(s.text(), draft);
    match s.done() {
        StreamEvent::Done { reason, session_id, usage, .. } => {
            assert_eq!(*reason, DoneReason::Complete);
            assert_eq!(session_id.as_ref().map(|s| s.to_string()), Some(sid.clone()));
            assert!(usage.is_some_and(|u| u.completion_tokens > 0), "{usage:?}");
        }
        other => panic!("{other:?}"),
    }
    // What the model was asked: the fixed instruction, the history, the goal
    // and the other agent's message; no tools.
    let request = t.llm.requests().last().cloned().unwrap();
    assert!(request.get("tools").is_none(), "no tools are offered: {request}");
    assert!(tests::system_text(&request).contains("Draft the next message the user would send"), "{request}");
    let asked = request["messages"].as_array().unwrap().last().unwrap()["content"].as_str().unwrap().to_string();
    for part in ["Plan my week", "What matters most this week?", "get the report done", "Which task should come first?"]
    {
        assert!(asked.contains(part), "{part:?} is not in the prompt: {asked}");
    }
    // Nothing was stored: the table is the same, item for item (messages,
    // frames, the session, its turn records).
    assert_eq!(table(&t).await, before, "the suggestion stored something");
    assert_eq!(messages(&t, "alice", &sid).await.len(), 2);
    // Sent as a turn, the draft is a user message like any other.
    t.llm.push(Reply::text(&["Good plan."]));
    let sent = t.turn("alice", json!({"message": draft, "session_id": sid})).await;
    assert_eq!(sent.error_code(), None, "{:?}", sent.events);
    let stored = messages(&t, "alice", &sid).await;
    let texts: Vec<_> = stored.iter().map(|m| (m.role, m.content.clone().unwrap_or_default())).collect();
    use shared::message::Role::{Assistant, User};
    assert_eq!(
        texts,
        [
            (User, "Plan my week".to_string()),
            (Assistant, "Sure. What matters most this week?".to_string()),
            (User, draft.to_string()),
            (Assistant, "Good plan.".to_string()),
        ]
    );
}

#[tokio::test]
async fn another_users_session_or_none_is_404_and_a_closed_one_409_without_asking_the_model() {
    let t = TestApp::new().await;
    let sid = session_with_a_turn(&t, "alice").await;
    t.llm.set_default(Reply::text(&["must not be asked"]));
    let asked = t.llm.request_count();
    let before = table(&t).await;
    let bobs = suggest(&t, "bob", &sid, json!({})).await;
    assert_json_error(&bobs, 404, "session_not_found");
    let none = suggest(&t, "alice", "no-such-session", json!({})).await;
    assert_json_error(&none, 404, "session_not_found");
    let malformed = suggest(&t, "alice", "bad%20id", json!({})).await;
    assert_json_error(&malformed, 404, "session_not_found");
    assert_eq!(t.llm.request_count(), asked, "the model was not asked");
    assert_eq!(table(&t).await, before);
    // Closed: no turn will follow in it.
    let closed = call_raw(&t, "alice", "POST", &format!("/sessions/{sid}/close"), vec![]).await;
    assert_eq!(closed.status, 200, "{:?}", closed.json);
    assert_json_error(&suggest(&t, "alice", &sid, json!({})).await, 409, "session_closed");
    assert_eq!(t.llm.request_count(), asked, "the model was not asked");
}

#[tokio::test]
async fn a_missing_or_invalid_body_is_400_with_the_json_error_and_nothing_asked() {
    let t = TestApp::new().await;
    let sid = session_with_a_turn(&t, "carol").await;
    let asked = t.llm.request_count();
    let path = format!("/sessions/{sid}/suggestion");
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (vec![], "invalid_json"),
        (b"[]".to_vec(), "invalid_json"),
        (b"{\"goal\": ".to_vec(), "invalid_json"),
        (json!({"goal": 5}).to_string().into_bytes(), "invalid_json"),
        (json!({"goal": "x".repeat(1001)}).to_string().into_bytes(), "invalid_goal"),
        (json!({"other_message": "x".repeat(8001)}).to_string().into_bytes(), "invalid_other_message"),
    ];
    for (body, code) in cases {
        let r = call_raw(&t, "carol", "POST", &path, body.clone()).await;
        assert_json_error(&r, 400, code);
    }
    assert_eq!(t.llm.request_count(), asked, "the model was not asked");
    // At the limits, it is a suggestion.
    t.llm.push(Reply::text(&["ok"]));
    let at = json!({"goal": "é".repeat(1000), "other_message": "x".repeat(8000)});
    let r = suggest(&t, "carol", &sid, at).await;
    assert_eq!((r.status, r.text().as_str()), (200, "ok"), "{:?}", r.json);
}

/// Waits for the next clock minute when less than 40 s of this one are
/// left: the minute's count must not roll over between the turns below.
async fn early_in_a_minute() {
    let into = shared::now_ms().rem_euclid(60_000);
    if into > 20_000 {
        tokio::time::sleep(Duration::from_millis((60_000 - into) as u64 + 50)).await;
    }
}

async fn usage(t: &TestApp, user: &str) -> Value {
    let r = call_raw(t, user, "GET", "/me/usage", vec![]).await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    r.json.unwrap()
}

fn retry_after(r: &Turn, budget: &str) {
    assert_json_error(r, 429, "quota_exceeded");
    let message = r.json.as_ref().unwrap()["error"]["message"].as_str().unwrap();
    assert!(message.contains(budget) && message.contains("try again in"), "{message}");
}

#[tokio::test]
async fn a_suggestion_spends_the_budgets_as_a_turn_and_a_spent_budget_refuses_it_as_a_turn() {
    early_in_a_minute().await;
    let limits = BudgetConfig { tokens_per_day: 1_000, turns_per_minute: 2, concurrent_turns: 1, web_calls_per_day: 0 };
    let t = TestApp::with_config(|c| c.budgets = limits).await;
    t.llm.push(Reply::Stream(vec![
        Step::Text("Sure.".into()),
        Step::Usage { prompt: 8, completion: 2 },
        Step::Finish("stop".into()),
        Step::Done,
    ]));
    let sid = t.turn("dora", json!({"message": "Plan my week"})).await.session_id();
    // The second of the minute: a suggestion, capped at the day's tokens left.
    t.llm.push(Reply::Stream(vec![
        Step::Text("Start with the report.".into()),
        Step::Usage { prompt: 30, completion: 3 },
        Step::Finish("stop".into()),
        Step::Done,
    ]));
    let s = suggest(&t, "dora", &sid, json!({})).await;
    assert_eq!((s.status, s.text().as_str()), (200, "Start with the report."), "{:?}", s.json);
    assert_eq!(t.llm.requests().last().unwrap()["max_tokens"], 990, "capped at the tokens the day has left");
    let u = usage(&t, "dora").await;
    assert_eq!(u["turns_this_minute"], 2, "counted as a turn: {u}");
    assert_eq!(u["tokens_today"], 43, "its tokens counted: {u}");
    assert_eq!(u["concurrent_turns"], 0, "its slot given back: {u}");
    // The third of the minute: refused by the admission, before anything streams.
    let asked = t.llm.request_count();
    let before = table_but_budgets(&t).await;
    let refused = suggest(&t, "dora", &sid, json!({"goal": "one more"})).await;
    retry_after(&refused, "turns_per_minute");
    // Now known to this process: refused without I/O, a suggestion and a turn alike.
    retry_after(&suggest(&t, "dora", &sid, json!({})).await, "turns_per_minute");
    let turn = call_raw(&t, "dora", "POST", "/", json!({"message": "hi", "session_id": sid}).to_string().into()).await;
    retry_after(&turn, "turns_per_minute");
    assert_eq!(t.llm.request_count(), asked, "the model was not asked");
    assert_eq!(table_but_budgets(&t).await, before, "nothing stored");
    assert_eq!(usage(&t, "dora").await["turns_this_minute"], 2, "refusals count nothing");
}

#[tokio::test]
async fn a_model_failure_streams_error_then_done_and_stores_nothing() {
    let t = TestApp::new().await;
    let sid = session_with_a_turn(&t, "erin").await;
    let before = table(&t).await;
    t.llm.push(Reply::Stream(vec![Step::Text("Half a ".into()), Step::ErrorFrame("the model broke".into())]));
    let s = suggest(&t, "erin", &sid, json!({})).await;
    assert_eq!(s.status, 200);
    assert_eq!(s.kinds(), ["text_delta", "error", "done"]);
    assert_eq!(s.text(), "Half a ");
    assert_eq!(s.error_code().as_deref(), Some("llm_error"));
    assert!(matches!(s.done(), StreamEvent::Done { reason: DoneReason::Error, .. }));
    // A model that refuses the request outright: the same, without text.
    t.llm.push(Reply::Status(400, r#"{"error":{"message":"bad request"}}"#.into()));
    let s = suggest(&t, "erin", &sid, json!({})).await;
    assert_eq!(s.kinds(), ["error", "done"]);
    assert_eq!(s.error_code().as_deref(), Some("llm_http_error"));
    assert_eq!(table(&t).await, before, "nothing stored");
}
