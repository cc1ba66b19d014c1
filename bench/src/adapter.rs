//! A local HTTP adapter for the stream function's real handler: a hyper
//! server that turns each request into a `lambda_http::Request`, calls
//! the stream function's router ([`shared::edge::stream::StreamRouter`]) and streams its `ResponseBody` back frame
//! by frame, as a function URL does.
//!
//! Like the Lambda runtime, the adapter reads the whole request body before
//! the handler runs; "the request reaches the handler" is the instant just
//! before the router is called. The adapter records, per request tagged
//! with an `x-bench-turn` header, that instant and when hyper first polled a
//! data frame out of the body, so the driver can time the first SSE byte from
//! the handler's entry on the same monotonic clock.

use bytes::Bytes;
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use shared::edge::stream::{StreamApp, StreamRouter};
use shared::edge::ResponseBody;
use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use tokio::time::Instant;

/// What the adapter saw of one tagged request.
#[derive(Debug, Clone, Copy)]
pub struct Probe {
    /// Just before the router was called.
    pub handler_entry: Instant,
    /// When it returned the response (auth, validation, the turn spawned).
    pub handler_return: Instant,
    /// When hyper took the body's first data frame to write it.
    pub first_frame: Option<Instant>,
}

#[derive(Clone, Default)]
pub struct Probes(Arc<Mutex<HashMap<u64, Probe>>>);

impl Probes {
    pub fn take(&self, turn: u64) -> Option<Probe> {
        self.0.lock().unwrap().remove(&turn)
    }
}

/// What the adapter serves.
#[derive(Clone)]
pub enum Handler {
    /// The stream function's real router, built once as the function's
    /// `main.rs` builds it.
    Stream(Box<StreamRouter>),
    /// The harness's own floor: one static SSE frame at once, behind the same
    /// server, connection settings, probes and body wrapper. What its clients
    /// see between the handler's entry and the first byte is hyper, loopback
    /// and the client being scheduled on this machine, with no product code.
    Floor,
}

impl Handler {
    pub fn stream(app: StreamApp) -> Self {
        Handler::Stream(Box::new(StreamRouter::new(app)))
    }
}

/// Serves `handler` on a free loopback port until the process ends.
pub async fn serve(handler: Handler) -> (SocketAddr, Probes) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the adapter");
    let addr = listener.local_addr().expect("local addr");
    let probes = Probes::default();
    let p = probes.clone();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else { return };
            // A function URL's front end is not ours to tune; Nagle off keeps
            // the adapter from adding stalls the product does not have.
            let _ = tcp.set_nodelay(true);
            let handler = handler.clone();
            let probes = p.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |req| handle(handler.clone(), probes.clone(), req));
                let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tcp), svc).await;
            });
        }
    });
    (addr, probes)
}

async fn handle(
    handler: Handler,
    probes: Probes,
    req: hyper::Request<hyper::body::Incoming>,
) -> Result<hyper::Response<ProbedBody>, Infallible> {
    let (parts, body) = req.into_parts();
    let bytes = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    let turn = parts.headers.get("x-bench-turn").and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    let req = http::Request::from_parts(parts, lambda_http::Body::Binary(bytes.to_vec()));
    let handler_entry = Instant::now();
    let resp = match &handler {
        Handler::Stream(router) => router.handle(lambda_http::Request::from(req)).await,
        Handler::Floor => http::Response::builder()
            .header("content-type", "text/event-stream")
            .body(ResponseBody::from(Bytes::from_static(
                b"id: 1\nevent: agent_state\ndata: {\"type\":\"agent_state\"}\n\n",
            )))
            .expect("a static response"),
    };
    let handler_return = Instant::now();
    if let Some(t) = turn {
        probes.0.lock().unwrap().insert(t, Probe { handler_entry, handler_return, first_frame: None });
    }
    let (parts, body) = resp.into_parts();
    Ok(hyper::Response::from_parts(parts, ProbedBody { inner: body, turn, probes, seen: false }))
}

/// The handler's body, noting when its first data frame is taken.
pub struct ProbedBody {
    inner: ResponseBody,
    turn: Option<u64>,
    probes: Probes,
    seen: bool,
}

impl Body for ProbedBody {
    type Data = Bytes;
    type Error = <ResponseBody as Body>::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_frame(cx);
        if !this.seen {
            if let Poll::Ready(Some(Ok(f))) = &r {
                if f.is_data() {
                    this.seen = true;
                    if let Some(t) = this.turn {
                        if let Some(p) = this.probes.0.lock().unwrap().get_mut(&t) {
                            p.first_frame = Some(Instant::now());
                        }
                    }
                }
            }
        }
        r
    }
}
