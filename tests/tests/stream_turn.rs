//! The stream function's fast path, end to end: the real handler, DynamoDB
//! Local, and a scripted model.

use serde_json::json;
use shared::ids::{SessionId, UserId};
use shared::message::Role;
use shared::session::store::{Leases, SessionLog};
use shared::sse::{AgentActivity, DoneReason, StreamEvent};
use std::time::Duration;
use tests::scripted_llm::roles_and_contents;
use tests::{token, Reply, Step, TestApp, Turn};

fn user(u: &str) -> UserId {
    UserId::parse(u).unwrap()
}

#[tokio::test]
async fn events_come_in_order_with_monotonic_ids() {
    let t = TestApp::new().await;
    t.llm.push(Reply::text(&["Hel", "lo", " there"]));
    let turn = t.turn("alice", json!({"message": "hi"})).await;
    assert_eq!(turn.status, 200);
    assert!(turn.content_type.starts_with("text/event-stream"));
    assert_eq!(
        turn.kinds(),
        vec!["agent_state", "session", "context_usage", "text_delta", "text_delta", "text_delta", "done"]
    );
    assert_eq!(
        turn.events[0],
        StreamEvent::AgentState { state: AgentActivity::Thinking, details: Some("Thinking…".into()) }
    );
    let ids: Vec<u64> = turn.frames.iter().map(|(_, f)| f.id.as_deref().unwrap().parse().unwrap()).collect();
    assert_eq!(ids, (1..=ids.len() as u64).collect::<Vec<_>>());
    assert_eq!(turn.text(), "Hello there");
    match turn.done() {
        StreamEvent::Done { reason, usage, session_id, .. } => {
            assert_eq!(*reason, DoneReason::Complete);
            assert_eq!(usage.unwrap().completion_tokens, 3, "usage reported by the model is passed on");
            assert_eq!(session_id.as_ref().unwrap().to_string(), turn.session_id());
        }
        _ => unreachable!(),
    }
}

#[tokio::test]
async fn agent_state_is_sent_before_the_model_answers() {
    let t = TestApp::new().await;
    // The model sends nothing, ever: agent_state must reach the client
    // anyway. Causal, not timed (a loaded machine may take any time; a
    // buffered first frame would never come and the read times out).
    t.llm.push(Reply::Stream(vec![Step::Hang]));
    let resp = t.post(Some(&token("alice")), serde_json::to_vec(&json!({"message": "hi"})).unwrap()).await;
    let mut body = resp.into_body();
    let mut dec = shared::sse::SseDecoder::new();
    let first = loop {
        let chunk = tokio::time::timeout(Duration::from_secs(20), http_body_util::BodyExt::frame(&mut body))
            .await
            .expect("the first frame came while the model had sent nothing")
            .expect("a frame")
            .unwrap();
        if let Some(f) = dec.feed(&chunk.into_data().unwrap_or_default()).unwrap().into_iter().next() {
            break f;
        }
    };
    assert_eq!(first.event.as_deref(), Some("agent_state"), "first, and while the model has sent nothing");
}

#[tokio::test]
async fn session_is_created_then_reused_and_both_messages_persist() {
    let t = TestApp::new().await;
    t.llm.push(Reply::text(&["first answer"]));
    t.llm.push(Reply::text(&["second answer"]));
    let a = t.turn("alice", json!({"message": "Plan my launch week", "context_type": "general"})).await;
    let sid = a.session_id();
    let session = match &a.events[1] {
        StreamEvent::Session { session } => session.clone(),
        e => panic!("{e:?}"),
    };
    assert_eq!(session.context_type.as_str(), "global", "general normalises to global");
    assert_eq!(session.message_count, 0);

    let b = t.turn("alice", json!({"message": "and the week after?", "session_id": sid})).await;
    assert_eq!(b.session_id(), sid, "same session");
    match &b.events[1] {
        StreamEvent::Session { session } => {
            assert_eq!(session.message_count, 2);
            assert_eq!(session.title.as_deref(), Some("Plan my launch week"), "title from the first message");
        }
        e => panic!("{e:?}"),
    }

    let store = t.store();
    let sid = SessionId::parse(sid).unwrap();
    let msgs = store.recent_messages(&user("alice"), &sid, 10).await.unwrap();
    let got: Vec<(Role, Option<&str>, u64)> = msgs.iter().map(|m| (m.role, m.content.as_deref(), m.seq)).collect();
    assert_eq!(
        got,
        vec![
            (Role::User, Some("Plan my launch week"), 1),
            (Role::Assistant, Some("first answer"), 2),
            (Role::User, Some("and the week after?"), 3),
            (Role::Assistant, Some("second answer"), 4),
        ]
    );
    let s = store.get_session(&user("alice"), &sid).await.unwrap().unwrap();
    assert_eq!(s.view.message_count, 4, "stats agree with the messages");
    assert!(s.lease.is_none(), "lease released");
    assert!(s.completion_tokens >= 2);
}

#[tokio::test]
async fn the_last_n_messages_are_sent_to_the_model() {
    let t = TestApp::with_config(|c| c.history_limit = Some(4)).await;
    let first = t.turn("alice", json!({"message": "m1"})).await;
    let sid = first.session_id();
    for i in 2..=4 {
        t.turn("alice", json!({"message": format!("m{i}"), "session_id": sid})).await;
    }
    t.turn("alice", json!({"message": "m5", "session_id": sid, "context_type": "project"})).await;
    let reqs = t.llm.requests();
    assert_eq!(reqs.len(), 5);
    let last = roles_and_contents(&reqs[4]);
    // system prompt, the last 4 stored messages (u3 a3 u4 a4), then the new user message.
    let roles: Vec<&str> = last.iter().map(|(r, _)| r.as_str()).collect();
    assert_eq!(roles, vec!["system", "user", "assistant", "user", "assistant", "user"]);
    assert_eq!(last[1].1, "m3");
    assert_eq!(last[3].1, "m4");
    assert_eq!(last[5].1, "m5");
    assert!(last[0].1.contains("Scope: project"), "the request's context_type wins: {}", last[0].1);
    assert!(roles_and_contents(&reqs[0])[0].1.contains("Scope: global"));
    assert_eq!(reqs[4]["stream"], json!(true));
    assert_eq!(reqs[4]["model"], json!("scripted"));
}

#[tokio::test]
async fn a_model_error_mid_stream_keeps_the_partial_answer() {
    let t = TestApp::new().await;
    t.llm.push(Reply::Stream(vec![Step::Text("The plan has thr".into()), Step::Drop]));
    let turn = t.turn("alice", json!({"message": "plan?"})).await;
    let kinds = turn.kinds();
    assert_eq!(&kinds[kinds.len() - 2..], &["error", "done"]);
    assert_eq!(turn.text(), "The plan has thr");
    assert_eq!(turn.error_code().as_deref(), Some("llm_stream_error"));
    let sid = SessionId::parse(turn.session_id()).unwrap();
    let msgs = t.store().recent_messages(&user("alice"), &sid, 10).await.unwrap();
    assert_eq!(msgs.len(), 2);
    assert_eq!(msgs[1].content.as_deref(), Some("The plan has thr"));
    assert_eq!(msgs[1].error.as_ref().unwrap().code, "llm_stream_error");

    // "continue" sees the partial answer as the assistant's words, and what
    // cut it off as a system note just before it: never a marker in the
    // assistant's own text, which a small model then imitates (issue 25).
    t.llm.push(Reply::text(&["ee steps."]));
    let next = t.turn("alice", json!({"message": "continue", "session_id": sid.to_string()})).await;
    assert_eq!(next.error_code(), None);
    let sent = roles_and_contents(&t.llm.requests()[1]);
    assert_eq!((sent[1].0.as_str(), sent[1].1.as_str()), ("user", "plan?"), "{sent:?}");
    assert_eq!(sent[2].0, "system", "{sent:?}");
    assert!(sent[2].1.contains("llm_stream_error") && sent[2].1.contains("next answer"), "{sent:?}");
    assert_eq!((sent[3].0.as_str(), sent[3].1.as_str()), ("assistant", "The plan has thr"), "{sent:?}");
    assert_eq!((sent[4].0.as_str(), sent[4].1.as_str()), ("user", "continue"));
    assert!(sent.iter().all(|(_, c)| !c.contains("[LLM_ERROR")), "{sent:?}");
}

#[tokio::test]
async fn an_error_frame_from_the_model_becomes_an_error_event() {
    let t = TestApp::new().await;
    t.llm.push(Reply::Stream(vec![Step::Text("par".into()), Step::ErrorFrame("overloaded".into())]));
    let turn = t.turn("alice", json!({"message": "x"})).await;
    assert_eq!(turn.error_code().as_deref(), Some("llm_error"));
    assert!(matches!(turn.done(), StreamEvent::Done { reason: DoneReason::Error, .. }));
}

#[tokio::test]
async fn transient_http_errors_are_retried_before_the_first_token() {
    let t = TestApp::new().await;
    t.llm.push(Reply::Status(429, r#"{"error":{"message":"slow down"}}"#.into()));
    t.llm.push(Reply::Status(500, r#"{"error":{"message":"boom"}}"#.into()));
    t.llm.push(Reply::text(&["fine"]));
    let turn = t.turn("alice", json!({"message": "x"})).await;
    assert_eq!(turn.error_code(), None);
    assert_eq!(turn.text(), "fine");
    assert_eq!(t.llm.request_count(), 3);
}

#[tokio::test]
async fn a_model_that_keeps_failing_ends_the_turn_with_an_error_and_a_valid_log() {
    let t = TestApp::with_config(|c| c.llm.max_retries = 1).await;
    t.llm.set_default(Reply::Status(500, r#"{"error":{"message":"down"}}"#.into()));
    let turn = t.turn("alice", json!({"message": "x"})).await;
    assert_eq!(turn.error_code().as_deref(), Some("llm_http_error"));
    assert_eq!(t.llm.request_count(), 2, "one try and one retry");
    let sid = SessionId::parse(turn.session_id()).unwrap();
    let msgs = t.store().recent_messages(&user("alice"), &sid, 10).await.unwrap();
    assert_eq!(msgs.iter().map(|m| m.role).collect::<Vec<_>>(), vec![Role::User, Role::Assistant]);
    assert!(msgs[1].error.is_some());
    // The lease is released: the next turn is not busy.
    t.llm.set_default(Reply::text(&["back"]));
    let next = t.turn("alice", json!({"message": "again", "session_id": sid.to_string()})).await;
    assert_eq!(next.text(), "back");
}

#[tokio::test]
async fn a_client_disconnect_stops_the_model_and_keeps_what_was_generated() {
    use http_body_util::BodyExt;
    let mut t = TestApp::new().await;
    // A turn whose frames are not kept; one whose are goes on without its
    // client, who can come back (tests/tests/resume.rs).
    t.app.deps.frames = None;
    t.llm.push(Reply::paced(&["one ", "two ", "three ", "four ", "five "], Duration::from_millis(150)));
    let resp = t.post(Some(&token("alice")), serde_json::to_vec(&json!({"message": "count"})).unwrap()).await;
    let mut body = resp.into_body();
    let mut dec = shared::sse::SseDecoder::new();
    let mut sid = None;
    let mut seen_text = false;
    while !(seen_text && sid.is_some()) {
        let f = body.frame().await.unwrap().unwrap().into_data().unwrap();
        for fr in dec.feed(&f).unwrap() {
            match serde_json::from_str::<StreamEvent>(&fr.data).unwrap() {
                StreamEvent::Session { session } => sid = Some(session.id),
                StreamEvent::TextDelta { .. } => seen_text = true,
                _ => {}
            }
        }
    }
    drop(body);
    let sid = sid.unwrap();
    // The turn notices, persists the partial answer, and releases the session
    // (after the message: polled for both, so a loaded machine only waits longer).
    let store = t.store();
    let mut msgs = vec![];
    let mut released = false;
    for _ in 0..600 {
        msgs = store.recent_messages(&user("alice"), &sid, 10).await.unwrap();
        released = store.get_session(&user("alice"), &sid).await.unwrap().unwrap().lease.is_none();
        if msgs.len() == 2 && released {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(msgs.len(), 2, "user and partial assistant message persisted");
    let partial = msgs[1].content.clone().unwrap_or_default();
    assert!(partial.starts_with("one "), "{partial:?}");
    assert!(!partial.contains("five"), "the model call was stopped early: {partial:?}");
    assert!(msgs[1].stopped);
    assert!(released, "the session's lease is released");
}

#[tokio::test]
async fn a_second_concurrent_turn_on_the_same_session_is_busy_and_writes_nothing() {
    let t = TestApp::new().await;
    let first = t.turn("alice", json!({"message": "hello"})).await;
    let sid = first.session_id();
    // 20 words 250 ms apart: a 5 s window for the second turn to land in,
    // a margin a loaded machine meets (one 5 s pause would trip the model
    // client's idle timeout).
    let words: Vec<String> = (0..20).map(|i| format!("w{i} ")).collect();
    t.llm.push(Reply::paced(&words.iter().map(String::as_str).collect::<Vec<_>>(), Duration::from_millis(250)));
    let long = {
        let body = json!({"message": "long one", "session_id": sid});
        let resp = t.post(Some(&token("alice")), serde_json::to_vec(&body).unwrap()).await;
        tokio::spawn(Turn::read(resp))
    };
    // The long turn holds the session once its model request is out (no
    // fixed sleep: a loaded machine may not be there yet).
    while t.llm.request_count() < 2 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let busy = t.turn("alice", json!({"message": "interrupting", "session_id": sid})).await;
    assert_eq!(busy.kinds(), vec!["agent_state", "error", "done"]);
    assert_eq!(busy.error_code().as_deref(), Some("session_busy"));
    let long = long.await.unwrap();
    assert_eq!(long.text(), words.concat());
    let msgs = t.store().recent_messages(&user("alice"), &SessionId::parse(sid).unwrap(), 10).await.unwrap();
    let contents: Vec<_> = msgs.iter().map(|m| m.content.clone().unwrap_or_default()).collect();
    assert_eq!(contents.len(), 4, "{contents:?}");
    assert!(!contents.iter().any(|c| c == "interrupting"));
}

#[tokio::test]
async fn a_lease_left_by_a_crashed_turn_expires() {
    let t = TestApp::with_config(|c| c.session_lease = Duration::from_millis(600)).await;
    let first = t.turn("alice", json!({"message": "hello"})).await;
    let sid = SessionId::parse(first.session_id()).unwrap();
    // A turn that took the lease and died; 5 s for the turn below to meet it
    // (a margin a loaded machine meets).
    let ghost =
        shared::session::store::Lease { turn_id: shared::ids::TurnId::new(), until_ms: shared::now_ms() + 5_000 };
    t.store().acquire_lease(&user("alice"), &sid, &ghost).await.unwrap();
    let busy = t.turn("alice", json!({"message": "now?", "session_id": sid.to_string()})).await;
    assert_eq!(busy.error_code().as_deref(), Some("session_busy"));
    while shared::now_ms() <= ghost.until_ms {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let ok = t.turn("alice", json!({"message": "now?", "session_id": sid.to_string()})).await;
    assert_eq!(ok.error_code(), None, "{:?}", ok.events);
}

#[tokio::test]
async fn a_repeated_stream_run_id_never_stores_a_second_user_message() {
    let t = TestApp::new().await;
    let first = t.turn("alice", json!({"message": "hello", "stream_run_id": 41})).await;
    let sid = first.session_id();
    let a = t.turn("alice", json!({"message": "do it", "session_id": sid, "stream_run_id": "run-7"})).await;
    assert_eq!(a.error_code(), None);
    let before = t.llm.request_count();
    let again = t.turn("alice", json!({"message": "do it", "session_id": sid, "stream_run_id": "run-7"})).await;
    // The retry gets the first turn's stored outcome, replayed, not a new answer.
    assert_eq!(again.error_code(), None, "{:?}", again.events);
    assert_eq!(again.session_id(), sid);
    assert_eq!(again.text(), a.text());
    match (again.done(), a.done()) {
        (
            StreamEvent::Done { reason: DoneReason::Complete, turn_id, replayed: true, .. },
            StreamEvent::Done { turn_id: first, replayed: false, .. },
        ) => assert_eq!(turn_id, first, "the done names the first turn"),
        other => panic!("{other:?}"),
    }
    assert_eq!(t.llm.request_count(), before, "the model is not called again");
    let msgs = t.store().recent_messages(&user("alice"), &SessionId::parse(sid.clone()).unwrap(), 20).await.unwrap();
    assert_eq!(msgs.iter().filter(|m| m.content.as_deref() == Some("do it")).count(), 1);
    // The session is not left leased.
    let next = t.turn("alice", json!({"message": "next", "session_id": sid, "stream_run_id": "run-8"})).await;
    assert_eq!(next.error_code(), None);
}

#[tokio::test]
async fn no_valid_token_is_401_json_before_any_streaming() {
    let t = TestApp::new().await;
    let body = serde_json::to_vec(&json!({"message": "hi"})).unwrap();
    let wrong_secret = shared::auth::mint_hs256("wrong-secret", "alice", Duration::from_secs(60)).unwrap();
    for tok in [None, Some("not-a-jwt"), Some(wrong_secret.as_str())] {
        let turn = Turn::read(t.post(tok, body.clone()).await).await;
        assert_eq!(turn.status, 401, "{tok:?}");
        assert!(turn.content_type.starts_with("application/json"));
        assert!(turn.json.as_ref().unwrap()["error"]["code"].is_string());
        assert!(turn.events.is_empty());
    }
    assert_eq!(t.llm.request_count(), 0);
}

#[tokio::test]
async fn no_auth_configuration_refuses_everything() {
    let t = TestApp::with_config(|c| {
        c.auth.jwt_secret = None;
        c.auth.jwks_url = None;
    })
    .await;
    let turn =
        Turn::read(t.post(Some(&token("alice")), serde_json::to_vec(&json!({"message": "hi"})).unwrap()).await).await;
    assert_eq!(turn.status, 401);
    assert_eq!(turn.json.unwrap()["error"]["code"], json!("auth_not_configured"));
    assert_eq!(t.llm.request_count(), 0);
}

#[tokio::test]
async fn bad_input_is_a_400_json_and_writes_nothing() {
    let t = TestApp::with_config(|c| c.max_message_bytes = 1024).await;
    let cases: Vec<(Vec<u8>, u16, &str)> = vec![
        (b"{not json".to_vec(), 400, "invalid_json"),
        (b"".to_vec(), 400, "invalid_json"),
        (serde_json::to_vec(&json!({})).unwrap(), 400, "invalid_json"),
        (serde_json::to_vec(&json!({"message": "   "})).unwrap(), 400, "missing_message"),
        (serde_json::to_vec(&json!({"message": 5})).unwrap(), 400, "invalid_json"),
        (serde_json::to_vec(&json!({"message": "x".repeat(1025)})).unwrap(), 413, "message_too_large"),
        (
            serde_json::to_vec(&json!({"message": "hi", "context_type": "astrology"})).unwrap(),
            400,
            "unknown_context_type",
        ),
        (serde_json::to_vec(&json!({"message": "hi", "session_id": "a#b"})).unwrap(), 400, "invalid_id"),
        (
            serde_json::to_vec(&json!({"message": "hi", "stream_run_id": {"x": 1}})).unwrap(),
            400,
            "invalid_stream_run_id",
        ),
    ];
    for (body, status, code) in cases {
        let turn = Turn::read(t.post(Some(&token("alice")), body.clone()).await).await;
        assert_eq!(turn.status, status, "{}", String::from_utf8_lossy(&body));
        assert_eq!(turn.json.as_ref().unwrap()["error"]["code"], json!(code), "{}", String::from_utf8_lossy(&body));
    }
    assert_eq!(t.llm.request_count(), 0);
    let scan = t.dynamo.scan().table_name(&t.table).send().await.unwrap();
    assert_eq!(scan.count, 0, "nothing written");
}

#[tokio::test]
async fn another_users_session_id_answers_like_a_missing_one() {
    let t = TestApp::new().await;
    let alices = t.turn("alice", json!({"message": "secret plans"})).await.session_id();
    let as_bob = t.turn("bob", json!({"message": "let me in", "session_id": alices})).await;
    let missing = t.turn("bob", json!({"message": "let me in", "session_id": SessionId::new().to_string()})).await;
    assert_eq!(as_bob.kinds(), missing.kinds());
    assert_eq!(as_bob.error_code().as_deref(), Some("session_not_found"));
    assert_eq!(missing.error_code().as_deref(), Some("session_not_found"));
    let strip = |t: &Turn| match &t.events[1] {
        StreamEvent::Error { code, message, retryable } => (code.clone(), message.clone(), *retryable),
        e => panic!("{e:?}"),
    };
    assert_eq!(strip(&as_bob), strip(&missing), "same words for both");
    // Alice's session is untouched.
    let msgs = t.store().recent_messages(&user("alice"), &SessionId::parse(alices).unwrap(), 10).await.unwrap();
    assert_eq!(msgs.len(), 2);
    assert_eq!(t.llm.request_count(), 1);
}

#[tokio::test]
async fn the_deadline_stops_the_turn_and_keeps_the_partial() {
    let t = TestApp::with_config(|c| {
        c.turn_timeout = Duration::from_millis(1500);
        c.deadline_margin = Duration::from_millis(500);
    })
    .await;
    // The model never finishes: only the deadline ends the turn (no
    // wall-clock bound on `done`: a loaded machine misses any, issue 25).
    t.llm.push(Reply::Stream(vec![Step::Text("start ".into()), Step::Hang]));
    let turn = t.turn("alice", json!({"message": "long"})).await;
    assert_eq!(turn.error_code().as_deref(), Some("deadline_exceeded"));
    let sid = SessionId::parse(turn.session_id()).unwrap();
    let msgs = t.store().recent_messages(&user("alice"), &sid, 10).await.unwrap();
    assert_eq!(msgs[1].content.as_deref(), Some("start "));
    assert_eq!(msgs[1].error.as_ref().unwrap().code, "deadline_exceeded");
}

#[tokio::test]
async fn the_stream_accepts_post_on_any_path_and_refuses_other_methods() {
    let t = TestApp::new().await;
    for path in ["/", "/api/agent/v2/stream", "/anything"] {
        let req = http::Request::builder()
            .method("POST")
            .uri(path)
            .header("authorization", format!("Bearer {}", token("alice")))
            .body(lambda_http::Body::from(json!({"message": "hi"}).to_string()))
            .unwrap();
        let turn = Turn::read(shared::edge::stream::handle_stream(&t.app, lambda_http::Request::from(req)).await).await;
        assert_eq!(turn.status, 200, "{path}");
        assert_eq!(turn.kinds().last(), Some(&"done"));
    }
    let req = http::Request::builder().method("PUT").uri("/").body(lambda_http::Body::Empty).unwrap();
    let turn = Turn::read(shared::edge::stream::handle_stream(&t.app, lambda_http::Request::from(req)).await).await;
    assert_eq!(turn.status, 405);
}

#[tokio::test]
async fn focus_changed_is_sent_once_when_the_focus_moves() {
    let t = TestApp::new().await;
    let first = t.turn("alice", json!({"message": "hi"})).await;
    assert!(!first.kinds().contains(&"focus_changed"), "a new session has no earlier focus");
    let sid = first.session_id();
    let same = t.turn("alice", json!({"message": "again", "session_id": sid})).await;
    assert!(!same.kinds().contains(&"focus_changed"));
    let focus = json!({"projectId": "p-1"});
    let moved = t
        .turn(
            "alice",
            json!({"message": "project now", "session_id": sid, "context_type": "project", "projectFocus": focus}),
        )
        .await;
    assert_eq!(&moved.kinds()[..3], &["agent_state", "session", "focus_changed"]);
    match &moved.events[2] {
        StreamEvent::FocusChanged { previous, current } => {
            assert_eq!(previous.context_type.as_str(), "global");
            assert_eq!(current.context_type.as_str(), "project");
            assert_eq!(current.focus, Some(focus.clone()));
        }
        e => panic!("{e:?}"),
    }
    let stays = t
        .turn("alice", json!({"message": "still", "session_id": sid, "context_type": "project", "projectFocus": focus}))
        .await;
    assert!(!stays.kinds().contains(&"focus_changed"), "sent once, not on every turn");
}

/// A turn whose client named no `stream_run_id` writes its messages and its
/// session's count apart (`session::store::dynamo::plain`): cut off between
/// the two, the count is left one behind the log. The next turn counts from
/// the log: it is answered, and every message keeps its own seq.
#[tokio::test]
async fn a_count_left_behind_its_log_is_repaired_by_the_next_turn() {
    count_left_behind(None).await;
}

/// The same, when the next turn names a `stream_run_id` (its start is one
/// transaction, which needs the count right before the message).
#[tokio::test]
async fn a_count_left_behind_its_log_is_repaired_by_a_next_turn_with_a_stream_run_id() {
    count_left_behind(Some("run-b")).await;
}

async fn count_left_behind(run: Option<&str>) {
    use aws_sdk_dynamodb::types::AttributeValue;
    let t = TestApp::new().await;
    t.llm.push(Reply::text(&["first answer"]));
    t.llm.push(Reply::text(&["second answer"]));
    let a = t.turn("alice", json!({"message": "one"})).await;
    let sid = SessionId::parse(a.session_id()).unwrap();
    // The finish's message landed, its session write did not.
    t.dynamo
        .update_item()
        .table_name(&t.table)
        .key("pk", AttributeValue::S(shared::store::keys::session_pk(&user("alice"), &sid)))
        .key("sk", AttributeValue::S(shared::store::keys::SESSION_SK.into()))
        .update_expression("SET message_count = :one")
        .expression_attribute_values(":one", AttributeValue::N("1".into()))
        .send()
        .await
        .unwrap();
    let mut next = json!({"message": "two", "session_id": sid.to_string()});
    if let Some(run) = run {
        next["stream_run_id"] = json!(run);
    }
    let b = t.turn("alice", next).await;
    assert!(matches!(b.done(), StreamEvent::Done { reason: DoneReason::Complete, .. }), "{:?}", b.events);
    assert_eq!(b.text(), "second answer");
    let msgs = t.store().recent_messages(&user("alice"), &sid, 10).await.unwrap();
    let got: Vec<(u64, Option<&str>)> = msgs.iter().map(|m| (m.seq, m.content.as_deref())).collect();
    assert_eq!(got, vec![(1, Some("one")), (2, Some("first answer")), (3, Some("two")), (4, Some("second answer"))]);
    let s = t.store().get_session(&user("alice"), &sid).await.unwrap().unwrap();
    assert_eq!(s.view.message_count, 4, "the count caught up with the log");
}

/// The head of a new turn's request, its first system message (the rules)
/// and its tools, per scope whose rules and tools differ: what the local
/// model server computes ahead of the first turn (`server.mjs --warm`, from
/// `scripts/local_llm_node/warm/{global,project,calendar}.json`), so a
/// scope's first turn computes only its own part. Kept as the product sends
/// it, with the local stack's settings (no web search provider): a change to
/// the rules or the tools fails here until `UPDATE_WARM_HEAD=1` rewrites the
/// files (a stale file costs the first turn time, never correctness). The
/// head must be the same for every project (the pack goes in the second
/// system message), or one warm file could not serve them all.
#[tokio::test]
async fn the_model_servers_warm_heads_are_what_a_new_turn_of_each_scope_sends() {
    use shared::entities::{store::DynamoEntityStore, EntityService, NewProject};
    let t = TestApp::with_config(|c| c.web.search = None).await;
    let entities = EntityService::new(DynamoEntityStore::new(t.dynamo.clone(), t.table.clone()));
    let mut projects = Vec::new();
    for (name, context) in [("Launch", Some("Ship v1 in May")), ("Garden", None)] {
        let p = NewProject {
            name: name.into(),
            description: None,
            state: Default::default(),
            context: context.map(Into::into),
        };
        projects.push(entities.create_project(&user("alice"), p).await.unwrap().data.project.id.to_string());
    }
    let in_project = |p: &str| json!({"message": "Add a task to write the spec", "context_type": "project", "projectFocus": {"projectId": p}});
    let turns = [
        ("global", json!({"message": "Create a project called Launch"})),
        ("project", in_project(&projects[0])),
        (
            "calendar",
            json!({"message": "What is on tomorrow?", "context_type": "calendar", "timezone": "Europe/Paris"}),
        ),
    ];
    let mut heads = Vec::new();
    for (scope, body) in turns {
        let head = new_turns_head(&t, body).await;
        let path = format!("{}/../scripts/local_llm_node/warm/{scope}.json", env!("CARGO_MANIFEST_DIR"));
        let text = serde_json::to_string_pretty(&head).unwrap() + "\n";
        if std::env::var_os("UPDATE_WARM_HEAD").is_some() {
            std::fs::write(&path, &text).unwrap();
        }
        let kept = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            kept == text,
            "{path} is not the head a new {scope} turn sends; rewrite it with \
             UPDATE_WARM_HEAD=1 scripts/test.sh --test stream_turn -E 'test(warm_head)'"
        );
        heads.push(head);
    }
    assert_ne!(heads[0], heads[1]);
    assert_ne!(heads[0], heads[2]);
    assert_ne!(heads[1], heads[2], "each scope's head is its own");
    let other = new_turns_head(&t, in_project(&projects[1])).await;
    assert_eq!(other, heads[1], "another project, without a context document, sends the same head");
}

/// A new session's first turn: the first system message and the tools of
/// its first model request.
async fn new_turns_head(t: &TestApp, body: serde_json::Value) -> serde_json::Value {
    t.llm.push(Reply::text(&["ok"]));
    let turn = t.turn("alice", body).await;
    assert_eq!(turn.error_code(), None, "{:?}", turn.events);
    let req = t.llm.requests().last().cloned().unwrap();
    assert_eq!(req["messages"][0]["role"], "system");
    json!({"messages": [req["messages"][0]], "tools": req["tools"]})
}
