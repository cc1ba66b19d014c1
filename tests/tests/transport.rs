//! The stream function's transport under the real Lambda runtime: the runtime
//! runs our real handler against a fake Runtime API on loopback.

use lambda_http::{service_fn, Error};
use shared::sse::{SseDecoder, StreamEvent};
use shared::transport::nodelay_of_sockets_to;
use std::time::Duration;
use tests::runtime_api::{function_url_post, FakeRuntimeApi};
use tests::{token, Reply, TestApp};

/// Regression test for the Nagle stall: every connection the runtime holds to
/// the Runtime API has `TCP_NODELAY` set once a turn has streamed. Without
/// `shared::transport::nodelay_runtime_api` in the handler, the runtime's
/// connector leaves it off and this fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runtime_api_connections_have_nagle_off_and_frames_stream() {
    let mut api = FakeRuntimeApi::start().await;
    api.set_env();
    let t = TestApp::new().await;
    let pieces = ["a", "b", "c", "d", "e", "f", "g", "h"];
    t.llm.push(Reply::paced(&pieces, Duration::from_millis(10)));
    let app = t.app.clone();
    let runtime = tokio::spawn(lambda_http::run_with_streaming_response(service_fn(move |req| {
        let app = app.clone();
        async move { Ok::<_, Error>(shared::edge::stream::handle_stream(&app, req).await) }
    })));

    api.invoke("req-1", function_url_post(&token("alice"), &serde_json::json!({"message": "count"})));
    let received = tokio::time::timeout(Duration::from_secs(20), api.responses.recv())
        .await
        .expect("a response within 20 s")
        .expect("a response");
    assert_eq!(received.request_id, "req-1");

    // The response streamed through the runtime is the whole turn.
    let mut dec = SseDecoder::new();
    let mut events = Vec::new();
    for (_, chunk) in received.body_with_times() {
        for f in dec.feed(&chunk).unwrap() {
            events.push(serde_json::from_str::<StreamEvent>(&f.data).unwrap());
        }
    }
    let text: String = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::TextDelta { content } => Some(content.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, pieces.concat());
    assert_eq!(events.last().map(StreamEvent::kind), Some("done"));

    let sockets = nodelay_of_sockets_to(&[api.addr]);
    assert!(!sockets.is_empty(), "the runtime is connected to the Runtime API");
    assert!(sockets.iter().all(|(_, nodelay)| *nodelay), "Nagle is off on every Runtime API connection: {sockets:?}");
    runtime.abort();
}

/// One process, many streams: the concurrent runtime (Lambda Managed
/// Instances' `AWS_LAMBDA_MAX_CONCURRENCY`) serves 8 turns at once on 8
/// sessions of 2 users; each stream carries only its own session's events,
/// every message is stored once, and a second turn on a busy session is still
/// refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_process_serves_many_concurrent_streams() {
    use shared::ids::{SessionId, UserId};
    use shared::session::store::SessionLog;
    let mut api = FakeRuntimeApi::start().await;
    api.set_env();
    // Room for the 8 turns and the one that must be refused.
    std::env::set_var("AWS_LAMBDA_MAX_CONCURRENCY", "10");
    let t = TestApp::new().await;
    // Eight sessions, four per user, created through the handler.
    let mut sessions = Vec::new();
    for i in 0..8 {
        let user = if i % 2 == 0 { "alice" } else { "bob" };
        let turn = t.turn(user, serde_json::json!({"message": format!("open {i}")})).await;
        sessions.push((user, turn.session_id()));
    }
    // 500 ms a word: the busy request below lands while the turns stream.
    t.llm.set_default(Reply::Echo { gap: Duration::from_millis(500) });
    let app = t.app.clone();
    let runtime = tokio::spawn(lambda_http::run_with_streaming_response_concurrent(service_fn(move |req| {
        let app = app.clone();
        async move { Ok::<_, Error>(shared::edge::stream::handle_stream(&app, req).await) }
    })));
    for (i, (user, sid)) in sessions.iter().enumerate() {
        let body =
            serde_json::json!({"message": format!("turn for session {i} with several words"), "session_id": sid});
        api.invoke(&format!("req-{i}"), function_url_post(&token(user), &body));
    }
    // While those run (all eight have asked the model, so each holds its
    // session), a second turn on session 0 must be refused.
    while t.llm.request_count() < 16 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (user0, sid0) = &sessions[0];
    api.invoke(
        "req-busy",
        function_url_post(&token(user0), &serde_json::json!({"message": "me too", "session_id": sid0})),
    );

    let mut by_request = std::collections::HashMap::new();
    for _ in 0..9 {
        let r = tokio::time::timeout(Duration::from_secs(30), api.responses.recv()).await.expect("in time").unwrap();
        let mut dec = SseDecoder::new();
        let mut events = Vec::new();
        for (_, chunk) in r.body_with_times() {
            for f in dec.feed(&chunk).unwrap() {
                events.push(serde_json::from_str::<StreamEvent>(&f.data).unwrap());
            }
        }
        by_request.insert(r.request_id.clone(), events);
    }
    let busy = &by_request["req-busy"];
    assert!(busy.iter().any(|e| matches!(e, StreamEvent::Error { code, .. } if code == "session_busy")), "{busy:?}");
    for (i, (user, sid)) in sessions.iter().enumerate() {
        let events = &by_request[&format!("req-{i}")];
        let text: String = events
            .iter()
            .filter_map(|e| match e {
                StreamEvent::TextDelta { content } => Some(content.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(text, format!("echo: turn for session {i} with several words"), "stream {i} carries its own answer");
        for e in events {
            if let StreamEvent::Session { session } = e {
                assert_eq!(&session.id.to_string(), sid);
            }
            if let StreamEvent::Done { session_id, .. } = e {
                assert_eq!(&session_id.as_ref().unwrap().to_string(), sid);
            }
        }
        let msgs = t
            .store()
            .recent_messages(&UserId::parse(*user).unwrap(), &SessionId::parse(sid.clone()).unwrap(), 50)
            .await
            .unwrap();
        assert_eq!(msgs.len(), 4, "two turns, each stored once, in session {i}");
        assert_eq!(msgs[2].content.as_deref(), Some(format!("turn for session {i} with several words").as_str()));
    }
    assert!(t.llm.max_in_flight() >= 8, "the 8 turns ran at once: {} streams at most", t.llm.max_in_flight());
    runtime.abort();
}
