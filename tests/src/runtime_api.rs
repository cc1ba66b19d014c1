//! A fake Lambda Runtime API on loopback, so the real runtime
//! (`lambda_http::run_with_streaming_response*`) can run a real handler in a
//! test: it hands out queued invocations on `GET …/invocation/next` (and holds
//! the request open when there are none, as Lambda does), and records each
//! streamed response's bytes with their arrival times.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, Notify};
use tokio::time::Instant;

/// One streamed response, as the Runtime API received it.
#[derive(Debug, Default, Clone)]
pub struct Received {
    pub request_id: String,
    /// (arrival, bytes) of every body chunk, in order.
    pub chunks: Vec<(Instant, Bytes)>,
}

impl Received {
    /// The HTTP body the function streamed, without lambda_http's prelude
    /// (status and headers as JSON, then 8 NUL bytes).
    pub fn body_with_times(&self) -> Vec<(Instant, Bytes)> {
        let mut out = Vec::new();
        let mut seen_prelude = false;
        let mut buf = Vec::new();
        for (t, c) in &self.chunks {
            if seen_prelude {
                out.push((*t, c.clone()));
                continue;
            }
            buf.extend_from_slice(c);
            if let Some(i) = buf.windows(8).position(|w| w == [0u8; 8]) {
                seen_prelude = true;
                let rest = Bytes::copy_from_slice(&buf[i + 8..]);
                if !rest.is_empty() {
                    out.push((*t, rest));
                }
            }
        }
        out
    }
}

struct State {
    queue: VecDeque<(String, String)>,
    queued: Arc<Notify>,
    done: mpsc::UnboundedSender<Received>,
}

pub struct FakeRuntimeApi {
    pub addr: SocketAddr,
    state: Arc<Mutex<State>>,
    queued: Arc<Notify>,
    pub responses: mpsc::UnboundedReceiver<Received>,
}

impl FakeRuntimeApi {
    pub async fn start() -> FakeRuntimeApi {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = mpsc::unbounded_channel();
        let queued = Arc::new(Notify::new());
        let state = Arc::new(Mutex::new(State { queue: VecDeque::new(), queued: queued.clone(), done: tx }));
        let st = state.clone();
        tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else { return };
                let st = st.clone();
                tokio::spawn(async move {
                    let svc = service_fn(move |req| handle(st.clone(), req));
                    let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tcp), svc).await;
                });
            }
        });
        FakeRuntimeApi { addr, state, queued, responses: rx }
    }

    /// Queues an invocation with a function-URL (API Gateway v2) event.
    pub fn invoke(&self, request_id: &str, event: serde_json::Value) {
        self.state.lock().unwrap().queue.push_back((request_id.to_string(), event.to_string()));
        self.queued.notify_waiters();
        self.queued.notify_one();
    }

    /// The environment the runtime reads at start.
    pub fn set_env(&self) {
        // Set once, before the runtime starts, in a process of its own (nextest
        // runs every test in its own process).
        std::env::set_var("AWS_LAMBDA_RUNTIME_API", self.addr.to_string());
        std::env::set_var("AWS_LAMBDA_FUNCTION_NAME", "stream");
        std::env::set_var("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256");
        std::env::set_var("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST");
    }
}

/// A function-URL event for a `POST` with a JSON body.
pub fn function_url_post(token: &str, body: &serde_json::Value) -> serde_json::Value {
    serde_json::json!({
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": "/",
        "rawQueryString": "",
        "headers": {"content-type": "application/json", "authorization": format!("Bearer {token}")},
        "requestContext": {
            "accountId": "anonymous", "apiId": "local", "domainName": "localhost", "domainPrefix": "local",
            "http": {"method": "POST", "path": "/", "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1", "userAgent": "test"},
            "requestId": "r", "routeKey": "$default", "stage": "$default", "time": "22/Nov/2026:16:00:00 +0000",
            "timeEpoch": 0
        },
        "body": body.to_string(),
        "isBase64Encoded": false
    })
}

async fn handle(
    state: Arc<Mutex<State>>,
    req: hyper::Request<hyper::body::Incoming>,
) -> Result<hyper::Response<Full<Bytes>>, Infallible> {
    let path = req.uri().path().to_string();
    if path.ends_with("/invocation/next") {
        loop {
            let (next, notify) = {
                let mut st = state.lock().unwrap();
                (st.queue.pop_front(), st.queued.clone())
            };
            if let Some((id, event)) = next {
                let deadline = shared::now_ms() + 60_000;
                return Ok(hyper::Response::builder()
                    .header("lambda-runtime-aws-request-id", id)
                    .header("lambda-runtime-deadline-ms", deadline.to_string())
                    .header(
                        "lambda-runtime-invoked-function-arn",
                        "arn:aws:lambda:us-east-1:000000000000:function:stream",
                    )
                    .body(Full::new(Bytes::from(event)))
                    .unwrap());
            }
            // Lambda holds `next` open until there is work.
            tokio::select! {
                _ = notify.notified() => {}
                _ = tokio::time::sleep(Duration::from_millis(50)) => {}
            }
        }
    }
    if path.ends_with("/response") || path.ends_with("/error") {
        let request_id = path.split('/').rev().nth(1).unwrap_or("").to_string();
        let mut received = Received { request_id, chunks: vec![] };
        let mut body = req.into_body();
        while let Some(Ok(frame)) = body.frame().await {
            if let Ok(data) = frame.into_data() {
                received.chunks.push((Instant::now(), data));
            }
        }
        let _ = state.lock().unwrap().done.send(received);
        return Ok(hyper::Response::builder().status(202).body(Full::new(Bytes::from_static(b"{}"))).unwrap());
    }
    Ok(hyper::Response::builder().status(404).body(Full::new(Bytes::new())).unwrap())
}
