//! The sessions API on the stream function's URL, and Stop: the real handler,
//! DynamoDB Local, and a scripted model.

use serde_json::{json, Value};
use shared::ids::{SessionId, UserId};
use shared::session::api::{MessageStatus, MessagesPage, SessionList, StopAnswer};
use shared::session::store::{DeleteProgress, SessionLog, Sessions};
use shared::sse::{DoneReason, StreamEvent};
use std::time::Duration;
use tests::{token, Reply, Step, TestApp, Turn};

async fn call(t: &TestApp, user: &str, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("authorization", format!("Bearer {}", token(user)))
        .body(match body {
            Some(b) => lambda_http::Body::from(b.to_string()),
            None => lambda_http::Body::Empty,
        })
        .unwrap();
    let turn = Turn::read(shared::edge::stream::handle_stream(&t.app, lambda_http::Request::from(req)).await).await;
    (turn.status, turn.json.unwrap_or(Value::Null))
}

fn user(u: &str) -> UserId {
    UserId::parse(u).unwrap()
}

#[tokio::test]
async fn sessions_list_most_recent_first_across_pages() {
    let t = TestApp::new().await;
    let mut ids = Vec::new();
    for i in 0..7 {
        ids.push(t.turn("alice", json!({"message": format!("conversation {i}")})).await.session_id());
        // Distinct activity times.
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
    t.turn("bob", json!({"message": "bob's own"})).await;
    // Activity moves session 2 to the top.
    t.turn("alice", json!({"message": "back to it", "session_id": ids[2]})).await;

    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let path = match &cursor {
            Some(c) => format!("/sessions?limit=3&cursor={c}"),
            None => "/sessions?limit=3".to_string(),
        };
        let (status, body) = call(&t, "alice", "GET", &path, None).await;
        assert_eq!(status, 200, "{body}");
        let page: SessionList = serde_json::from_value(body).unwrap();
        assert!(page.sessions.len() <= 3);
        seen.extend(page.sessions.iter().map(|s| s.id.to_string()));
        pages += 1;
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    assert!(pages >= 3);
    let mut expected = vec![ids[2].clone()];
    expected.extend(ids.iter().rev().filter(|i| **i != ids[2]).cloned());
    assert_eq!(seen, expected, "most recently active first, no duplicates, only alice's");
    // The listed view carries what a sidebar needs.
    let (_, body) = call(&t, "alice", "GET", "/sessions?limit=1", None).await;
    let first = &body["sessions"][0];
    assert_eq!(first["title"], json!("conversation 2"));
    assert_eq!(first["message_count"], json!(4));
    assert_eq!(first["status"], json!("active"));
    // A cursor is not transferable between users.
    let (_, body) = call(&t, "alice", "GET", "/sessions?limit=1", None).await;
    let alices_cursor = body["next_cursor"].as_str().unwrap().to_string();
    let (status, body) = call(&t, "bob", "GET", &format!("/sessions?cursor={alices_cursor}"), None).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], json!("invalid_cursor"));
}

#[tokio::test]
async fn messages_page_both_ways_in_chronological_order() {
    let t = TestApp::new().await;
    let sid = t.turn("alice", json!({"message": "m1"})).await.session_id();
    for i in 2..=5 {
        t.turn("alice", json!({"message": format!("m{i}"), "session_id": sid})).await;
    }
    // 10 messages: u1 a2 u3 a4 … u9 a10.
    let (status, body) = call(&t, "alice", "GET", &format!("/sessions/{sid}/messages?limit=4"), None).await;
    assert_eq!(status, 200);
    let newest: MessagesPage = serde_json::from_value(body).unwrap();
    assert_eq!(newest.messages.iter().map(|m| m.seq).collect::<Vec<_>>(), vec![7, 8, 9, 10]);
    assert_eq!(newest.messages[2].content.as_deref(), Some("m5"));
    assert_eq!(newest.next_before, Some(7));
    assert_eq!(newest.next_after, None);
    let (_, body) = call(&t, "alice", "GET", &format!("/sessions/{sid}/messages?limit=4&before=7"), None).await;
    let older: MessagesPage = serde_json::from_value(body).unwrap();
    assert_eq!(older.messages.iter().map(|m| m.seq).collect::<Vec<_>>(), vec![3, 4, 5, 6]);
    let (_, body) = call(&t, "alice", "GET", &format!("/sessions/{sid}/messages?limit=4&before=3"), None).await;
    let oldest: MessagesPage = serde_json::from_value(body).unwrap();
    assert_eq!(oldest.messages.iter().map(|m| m.seq).collect::<Vec<_>>(), vec![1, 2]);
    assert_eq!(oldest.next_before, None);
    // Forward from the start.
    let (_, body) = call(&t, "alice", "GET", &format!("/sessions/{sid}/messages?limit=4&after=2"), None).await;
    let fwd: MessagesPage = serde_json::from_value(body).unwrap();
    assert_eq!(fwd.messages.iter().map(|m| m.seq).collect::<Vec<_>>(), vec![3, 4, 5, 6]);
    assert_eq!(fwd.next_after, Some(6));
    let (status, body) = call(&t, "alice", "GET", &format!("/sessions/{sid}/messages?before=3&after=1"), None).await;
    assert_eq!((status, body["error"]["code"].clone()), (400, json!("invalid_query")));
}

#[tokio::test]
async fn errored_messages_carry_their_marker_and_partial_text() {
    let t = TestApp::new().await;
    t.llm.push(Reply::Stream(vec![Step::Text("half".into()), Step::Drop]));
    let sid = t.turn("alice", json!({"message": "go"})).await.session_id();
    let (_, body) = call(&t, "alice", "GET", &format!("/sessions/{sid}/messages"), None).await;
    let page: MessagesPage = serde_json::from_value(body).unwrap();
    let a = &page.messages[1];
    assert_eq!(a.status, MessageStatus::Error);
    assert_eq!(a.content.as_deref(), Some("half"));
    assert_eq!(a.error.as_ref().unwrap().code, "llm_stream_error");
}

#[tokio::test]
async fn rename_then_close_refuses_new_turns_and_writes_nothing() {
    let t = TestApp::new().await;
    let sid = t.turn("alice", json!({"message": "first words"})).await.session_id();
    let (status, body) =
        call(&t, "alice", "PATCH", &format!("/sessions/{sid}"), Some(json!({"title": "  My   plan "}))).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["title"], json!("My plan"));
    for bad in [json!({"title": ""}), json!({"title": "x".repeat(201)}), json!({"name": "x"})] {
        let (status, _) = call(&t, "alice", "PATCH", &format!("/sessions/{sid}"), Some(bad)).await;
        assert_eq!(status, 400);
    }
    let (status, body) = call(&t, "alice", "POST", &format!("/sessions/{sid}/close"), None).await;
    assert_eq!((status, body["status"].clone()), (200, json!("closed")));
    let before = t.llm.request_count();
    let refused = t.turn("alice", json!({"message": "still there?", "session_id": sid})).await;
    assert_eq!(refused.kinds(), vec!["agent_state", "error", "done"]);
    assert_eq!(refused.error_code().as_deref(), Some("session_closed"));
    assert_eq!(t.llm.request_count(), before);
    let s = t.store().session(&user("alice"), &SessionId::parse(sid).unwrap()).await.unwrap().unwrap();
    assert_eq!(s.view.message_count, 2, "nothing written");
    assert_eq!(s.view.title.as_deref(), Some("My plan"), "a user's title is kept");
}

#[tokio::test]
async fn delete_removes_every_item_in_batches_and_resumes_after_interruption() {
    let t = TestApp::new().await;
    let sid = t.turn("alice", json!({"message": "start"})).await.session_id();
    // 60 turns: 120 messages + 60 turn records + the session item.
    for i in 0..59 {
        t.turn("alice", json!({"message": format!("m{i}"), "session_id": sid})).await;
    }
    let pk = format!("U#alice#S#{sid}");
    let count = |t: &TestApp| {
        let (client, table, pk) = (t.dynamo.clone(), t.table.clone(), pk.clone());
        async move {
            client
                .query()
                .table_name(table)
                .key_condition_expression("pk = :pk")
                .expression_attribute_values(":pk", aws_sdk_dynamodb::types::AttributeValue::S(pk))
                .select(aws_sdk_dynamodb::types::Select::Count)
                .send()
                .await
                .unwrap()
                .count
        }
    };
    assert!(count(&t).await > 100);
    // An invocation that dies after two batches.
    let sid_typed = SessionId::parse(sid.clone()).unwrap();
    let partial = t.store().delete_session(&user("alice"), &sid_typed, Some(2)).await.unwrap();
    assert_eq!(partial, DeleteProgress::Partial { items_deleted: 50 });
    // Gone from reads and lists at once.
    let (status, _) = call(&t, "alice", "GET", &format!("/sessions/{sid}"), None).await;
    assert_eq!(status, 404);
    let (_, list) = call(&t, "alice", "GET", "/sessions", None).await;
    assert!(list["sessions"].as_array().unwrap().is_empty());
    let refused = t.turn("alice", json!({"message": "hello?", "session_id": sid})).await;
    assert_eq!(refused.error_code().as_deref(), Some("session_not_found"));
    assert!(count(&t).await > 50, "items remain until the retry");
    // The retried DELETE finishes the job.
    let (status, _) = call(&t, "alice", "DELETE", &format!("/sessions/{sid}"), None).await;
    assert_eq!(status, 204);
    assert_eq!(count(&t).await, 0, "a direct Query of the session's key finds nothing");
    let (status, _) = call(&t, "alice", "DELETE", &format!("/sessions/{sid}"), None).await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn another_users_ids_are_404_on_every_route_and_change_nothing() {
    let t = TestApp::new().await;
    let sid = t.turn("alice", json!({"message": "mine"})).await.session_id();
    let missing = SessionId::new().to_string();
    for id in [sid.as_str(), missing.as_str(), "bad%23id"] {
        for (method, path, body) in [
            ("GET", format!("/sessions/{id}"), None),
            ("GET", format!("/sessions/{id}/messages"), None),
            ("PATCH", format!("/sessions/{id}"), Some(json!({"title": "taken"}))),
            ("POST", format!("/sessions/{id}/close"), None),
            ("POST", format!("/sessions/{id}/stop"), None),
            ("DELETE", format!("/sessions/{id}"), None),
        ] {
            let (status, body) = call(&t, "bob", method, &path, body).await;
            assert_eq!(status, 404, "{method} {path}");
            assert_eq!(body, json!({"error": {"code": "session_not_found", "message": "no such session"}}));
        }
    }
    let s = t.store().session(&user("alice"), &SessionId::parse(sid.clone()).unwrap()).await.unwrap().unwrap();
    assert_eq!(s.view.title.as_deref(), Some("mine"));
    assert_eq!(s.view.status, shared::session::SessionStatus::Active);
    let (status, _) = call(&t, "nobody", "GET", "/sessions", None).await;
    assert_eq!(status, 200);
    let unauth = http::Request::builder().method("GET").uri("/sessions").body(lambda_http::Body::Empty).unwrap();
    let turn = Turn::read(shared::edge::stream::handle_stream(&t.app, lambda_http::Request::from(unauth)).await).await;
    assert_eq!(turn.status, 401);
}

#[tokio::test]
async fn stop_ends_a_running_turn_and_keeps_the_partial() {
    let t = TestApp::with_config(|c| c.stop_poll = Duration::from_millis(200)).await;
    let sid = t.turn("alice", json!({"message": "hello"})).await.session_id();
    let words: Vec<String> = (0..400).map(|i| format!("w{i} ")).collect();
    t.llm.push(Reply::paced(&words.iter().map(String::as_str).collect::<Vec<_>>(), Duration::from_millis(50)));
    let resp = t
        .post(
            Some(&token("alice")),
            json!({"message": "a long one", "session_id": sid, "stream_run_id": "r-1"}).to_string(),
        )
        .await;
    let reader = tokio::spawn(Turn::read(resp));
    // Stop once the answer is streaming (its third word is out).
    while t.llm.sent().len() < 3 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (status, body) =
        call(&t, "alice", "POST", &format!("/sessions/{sid}/stop"), Some(json!({"stream_run_id": "r-1"}))).await;
    assert_eq!(status, 200);
    let answer: StopAnswer = serde_json::from_value(body).unwrap();
    assert!(answer.stopped);
    let turn = reader.await.unwrap();
    match turn.done() {
        StreamEvent::Done { reason, .. } => assert_eq!(*reason, DoneReason::Stopped),
        _ => unreachable!(),
    }
    assert_eq!(turn.error_code(), None, "a stop is not an error");
    let partial = turn.text();
    assert!(partial.starts_with("w0 ") && !partial.contains("w399"), "{partial}");
    let msgs = t.store().recent_messages(&user("alice"), &SessionId::parse(sid.clone()).unwrap(), 2).await.unwrap();
    assert!(msgs[1].stopped && msgs[1].error.is_none());
    assert_eq!(msgs[1].content.as_deref(), Some(partial.as_str()), "the stored partial is what the user saw");
    // The page marks it stopped; the next turn's model request is valid and carries it.
    let (_, body) = call(&t, "alice", "GET", &format!("/sessions/{sid}/messages?limit=1"), None).await;
    assert_eq!(body["messages"][0]["status"], json!("stopped"));
    t.llm.push(Reply::text(&["ok"]));
    let next = t.turn("alice", json!({"message": "continue", "session_id": sid})).await;
    assert_eq!(next.error_code(), None);
    let requests = t.llm.requests();
    let sent = &requests.last().unwrap()["messages"];
    let roles: Vec<&str> = sent.as_array().unwrap().iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles.iter().filter(|r| **r == "user").count(), 3);
    // The partial is the assistant's words as the user saw them; that it was
    // stopped is a system note right before it, never a marker in the
    // assistant's own text (a small model imitates those: issue 25).
    let sent = sent.as_array().unwrap();
    let at = sent.iter().position(|m| m["role"] == "assistant" && m["content"] == json!(partial)).expect("the partial");
    assert_eq!(sent[at - 1]["role"], "system");
    assert!(sent[at - 1]["content"].as_str().unwrap().contains("stopped by the user"), "{:?}", sent[at - 1]);
    assert_eq!(sent[at + 1], json!({"role": "user", "content": "continue"}));
    assert!(sent.iter().all(|m| !m["content"].as_str().unwrap_or("").contains("STOPPED")));
}

#[tokio::test]
async fn stop_after_the_turn_ended_changes_nothing() {
    let t = TestApp::new().await;
    let sid = t.turn("alice", json!({"message": "hello", "stream_run_id": "done-1"})).await.session_id();
    let (status, body) = call(&t, "alice", "POST", &format!("/sessions/{sid}/stop"), None).await;
    assert_eq!(status, 200);
    assert_eq!(body["stopped"], json!(false));
    let (_, body) =
        call(&t, "alice", "POST", &format!("/sessions/{sid}/stop"), Some(json!({"stream_run_id": "done-1"}))).await;
    assert_eq!(body["stopped"], json!(false));
    let next = t.turn("alice", json!({"message": "next", "session_id": sid})).await;
    assert_eq!(next.error_code(), None, "a stale stop does not touch later turns");
    assert!(matches!(next.done(), StreamEvent::Done { reason: DoneReason::Complete, .. }));
}
