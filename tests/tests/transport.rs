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
        async move { Ok::<_, Error>(shared::http::handle_stream(&app, req).await) }
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
