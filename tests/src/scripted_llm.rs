//! A scripted OpenAI-compatible streaming Chat Completions server on loopback.
//!
//! Each request to `POST /v1/chat/completions` takes the next [`Reply`] from the
//! queue (or the default reply) and plays it: chunks of text, tool-call deltas,
//! usage, delays, an error frame, an HTTP error status, a dropped connection or
//! a hang. Every request body is recorded so tests can assert on exactly what
//! the product sent to the model, and every chunk's send time is recorded so
//! benchmarks can compare the client's arrival times with the model's.

use bytes::Bytes;
use http_body::{Body, Frame};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::json;
use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;

#[derive(Debug, Clone)]
pub enum Step {
    Text(String),
    /// A tool-call delta; `index: None` omits the field, as some servers do.
    ToolCall {
        index: Option<u32>,
        id: Option<String>,
        name: Option<String>,
        arguments: String,
    },
    Usage {
        prompt: u64,
        completion: u64,
    },
    /// Usage whose `prompt_tokens` the scripted model counts from the request
    /// ([`prompt_tokens`]), as a real server reports its tokenizer's count.
    UsageCounted {
        completion: u64,
    },
    Finish(String),
    Delay(Duration),
    KeepAlive,
    /// `data: {"error": {...}}` inside the stream.
    ErrorFrame(String),
    /// `data: [DONE]`.
    Done,
    /// Cut the connection here, mid-body.
    Drop,
    /// Send nothing more, keep the connection open.
    Hang,
}

#[derive(Debug, Clone)]
pub enum Reply {
    Stream(Vec<Step>),
    Status(u16, String),
    /// Answers `echo: <the last user message>`, word by word, `gap` apart: lets
    /// concurrent tests tell whose answer reached which stream.
    Echo {
        gap: Duration,
    },
    /// Decided when the request arrives, from its body (e.g. to use an id a
    /// tool result just returned).
    Dynamic(Dynamic),
}

/// A reply computed from the request body.
#[derive(Clone)]
pub struct Dynamic(pub Arc<dyn Fn(&serde_json::Value) -> Reply + Send + Sync>);

impl std::fmt::Debug for Dynamic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Dynamic(..)")
    }
}

impl Reply {
    pub fn dynamic(f: impl Fn(&serde_json::Value) -> Reply + Send + Sync + 'static) -> Reply {
        Reply::Dynamic(Dynamic(Arc::new(f)))
    }

    /// One assistant message that calls tools: `(name, arguments JSON)` each,
    /// as streamed deltas (id and name first, arguments in two pieces).
    pub fn tool_calls(calls: &[(&str, serde_json::Value)]) -> Reply {
        let mut steps = Vec::new();
        for (i, (name, args)) in calls.iter().enumerate() {
            let args = args.to_string();
            let (a, b) = args.split_at(args.len() / 2);
            steps.push(Step::ToolCall {
                index: Some(i as u32),
                id: Some(format!("call_{i}_{name}")),
                name: Some(name.to_string()),
                arguments: a.to_string(),
            });
            steps.push(Step::ToolCall { index: Some(i as u32), id: None, name: None, arguments: b.to_string() });
        }
        steps.push(Step::Finish("tool_calls".into()));
        steps.push(Step::Done);
        Reply::Stream(steps)
    }
}

impl Reply {
    /// A whole answer in the given pieces, then usage, finish and `[DONE]`.
    pub fn text(pieces: &[&str]) -> Reply {
        let mut steps: Vec<Step> = pieces.iter().map(|p| Step::Text(p.to_string())).collect();
        steps.push(Step::Finish("stop".into()));
        steps.push(Step::UsageCounted { completion: pieces.len() as u64 });
        steps.push(Step::Done);
        Reply::Stream(steps)
    }

    /// Pieces spaced `gap` apart.
    pub fn paced(pieces: &[&str], gap: Duration) -> Reply {
        let mut steps = Vec::new();
        for (i, p) in pieces.iter().enumerate() {
            if i > 0 {
                steps.push(Step::Delay(gap));
            }
            steps.push(Step::Text(p.to_string()));
        }
        steps.push(Step::Finish("stop".into()));
        steps.push(Step::Done);
        Reply::Stream(steps)
    }

    /// A model with a time to first token and a steady token rate: the role
    /// chunk at once, the first piece after `ttft`, the rest `gap` apart, then
    /// finish, usage and `[DONE]` with no further delay (so the last piece is
    /// the model's last token, which benchmarks time `done` against).
    pub fn timed(ttft: Duration, pieces: &[&str], gap: Duration) -> Reply {
        let mut steps = Vec::with_capacity(pieces.len() * 2 + 4);
        if !ttft.is_zero() {
            steps.push(Step::Delay(ttft));
        }
        for (i, p) in pieces.iter().enumerate() {
            if i > 0 && !gap.is_zero() {
                steps.push(Step::Delay(gap));
            }
            steps.push(Step::Text(p.to_string()));
        }
        steps.push(Step::Finish("stop".into()));
        steps.push(Step::UsageCounted { completion: pieces.len() as u64 });
        steps.push(Step::Done);
        Reply::Stream(steps)
    }
}

#[derive(Default)]
struct State {
    replies: VecDeque<Reply>,
    default: Option<Reply>,
    requests: Vec<serde_json::Value>,
    /// (when, text) for every text chunk written.
    sent: Vec<(Instant, String)>,
    in_flight: usize,
    max_in_flight: usize,
}

#[derive(Clone)]
pub struct ScriptedLlm {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
}

impl ScriptedLlm {
    pub async fn start() -> ScriptedLlm {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(Mutex::new(State::default()));
        let st = state.clone();
        tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else { return };
                let _ = tcp.set_nodelay(true);
                let st = st.clone();
                tokio::spawn(async move {
                    let svc = service_fn(move |req| handle(st.clone(), req));
                    let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tcp), svc).await;
                });
            }
        });
        ScriptedLlm { addr, state }
    }

    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn push(&self, reply: Reply) {
        self.state.lock().unwrap().replies.push_back(reply);
    }

    pub fn set_default(&self, reply: Reply) {
        self.state.lock().unwrap().default = Some(reply);
    }

    /// Every request body received, in order.
    pub fn requests(&self) -> Vec<serde_json::Value> {
        self.state.lock().unwrap().requests.clone()
    }

    pub fn request_count(&self) -> usize {
        self.state.lock().unwrap().requests.len()
    }

    /// The most streams that were being answered at the same moment.
    pub fn max_in_flight(&self) -> usize {
        self.state.lock().unwrap().max_in_flight
    }

    /// When each text chunk was written.
    pub fn sent(&self) -> Vec<(Instant, String)> {
        self.state.lock().unwrap().sent.clone()
    }
}

/// The scripted model's tokenizer: a token per 4 bytes of each message's
/// content and tool calls, 4 per message for the chat template, and a token
/// per 4 bytes of the tools' JSON.
pub fn prompt_tokens(request: &serde_json::Value) -> u64 {
    let messages = request["messages"].as_array().map_or(&[][..], Vec::as_slice);
    let per_message: u64 = messages
        .iter()
        .map(|m| {
            let content = m["content"].as_str().map_or(0, str::len);
            let calls = m.get("tool_calls").map_or(0, |c| c.to_string().len());
            4 + (content + calls).div_ceil(4) as u64
        })
        .sum();
    let tools = request.get("tools").filter(|t| t.as_array().is_some_and(|a| !a.is_empty()));
    per_message + tools.map_or(0, |t| t.to_string().len().div_ceil(4) as u64)
}

/// The `messages` of a recorded request as (role, content) pairs.
pub fn roles_and_contents(request: &serde_json::Value) -> Vec<(String, String)> {
    request["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| (m["role"].as_str().unwrap_or("").to_string(), m["content"].as_str().unwrap_or("").to_string()))
        .collect()
}

struct InFlight(Arc<Mutex<State>>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.lock().unwrap().in_flight -= 1;
    }
}

enum Chunk {
    Data(Bytes),
    Abort,
}

struct ChunkBody(mpsc::Receiver<Chunk>);

impl Body for ChunkBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        match self.0.poll_recv(cx) {
            Poll::Ready(Some(Chunk::Data(b))) => Poll::Ready(Some(Ok(Frame::data(b)))),
            // An error from the body makes hyper cut the connection mid-stream.
            Poll::Ready(Some(Chunk::Abort)) => Poll::Ready(Some(Err(std::io::Error::other("scripted drop")))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

enum Either {
    Stream(ChunkBody),
    Full(Option<Bytes>),
}

impl Body for Either {
    type Data = Bytes;
    type Error = std::io::Error;
    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        match self.get_mut() {
            Either::Stream(s) => Pin::new(s).poll_frame(cx),
            Either::Full(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
        }
    }
}

fn chunk(delta: serde_json::Value, finish: Option<&str>) -> Bytes {
    let v = json!({
        "id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": 0, "model": "scripted",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
    });
    Bytes::from(format!("data: {v}\n\n"))
}

async fn handle(
    state: Arc<Mutex<State>>,
    req: hyper::Request<hyper::body::Incoming>,
) -> Result<hyper::Response<Either>, Infallible> {
    use http_body_util::BodyExt;
    let path = req.uri().path().to_string();
    let body = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    if !path.ends_with("/chat/completions") {
        return Ok(hyper::Response::builder().status(404).body(Either::Full(Some(Bytes::from_static(b"{}")))).unwrap());
    }
    let reply = {
        let mut st = state.lock().unwrap();
        st.requests.push(serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null));
        st.replies.pop_front().or_else(|| st.default.clone()).unwrap_or_else(|| Reply::text(&["ok"]))
    };
    let reply = match reply {
        Reply::Dynamic(Dynamic(f)) => f(&serde_json::from_slice(&body).unwrap_or_default()),
        other => other,
    };
    let reply = match reply {
        Reply::Echo { gap } => {
            let req: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
            let last_user = req["messages"]
                .as_array()
                .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
                .and_then(|m| m["content"].as_str())
                .unwrap_or("")
                .to_string();
            let text = format!("echo: {last_user}");
            let words: Vec<String> = text.split_inclusive(' ').map(str::to_string).collect();
            Reply::paced(&words.iter().map(String::as_str).collect::<Vec<_>>(), gap)
        }
        other => other,
    };
    let steps = match reply {
        Reply::Echo { .. } | Reply::Dynamic(_) => unreachable!("resolved above"),
        Reply::Status(code, body) => {
            return Ok(hyper::Response::builder()
                .status(code)
                .header("content-type", "application/json")
                .body(Either::Full(Some(Bytes::from(body))))
                .unwrap())
        }
        Reply::Stream(steps) => steps,
    };
    let counted_prompt = prompt_tokens(&serde_json::from_slice(&body).unwrap_or_default());
    let (tx, rx) = mpsc::channel(16);
    {
        let mut st = state.lock().unwrap();
        st.in_flight += 1;
        st.max_in_flight = st.max_in_flight.max(st.in_flight);
    }
    tokio::spawn(async move {
        let _guard = InFlight(state.clone());
        // Some servers send the role first, on its own.
        let _ = tx.send(Chunk::Data(chunk(json!({"role": "assistant"}), None))).await;
        for step in steps {
            let data = match step {
                Step::Text(t) => {
                    state.lock().unwrap().sent.push((Instant::now(), t.clone()));
                    chunk(json!({"content": t}), None)
                }
                Step::ToolCall { index, id, name, arguments } => {
                    let mut call = serde_json::Map::new();
                    if let Some(i) = index {
                        call.insert("index".into(), json!(i));
                    }
                    if let Some(id) = id {
                        call.insert("id".into(), json!(id));
                        call.insert("type".into(), json!("function"));
                    }
                    let mut f = serde_json::Map::new();
                    if let Some(n) = name {
                        f.insert("name".into(), json!(n));
                    }
                    f.insert("arguments".into(), json!(arguments));
                    call.insert("function".into(), serde_json::Value::Object(f));
                    chunk(json!({"tool_calls": [call]}), None)
                }
                Step::Usage { .. } | Step::UsageCounted { .. } => {
                    let (prompt, completion) = match step {
                        Step::Usage { prompt, completion } => (prompt, completion),
                        Step::UsageCounted { completion } => (counted_prompt, completion),
                        _ => unreachable!("matched above"),
                    };
                    Bytes::from(format!(
                        "data: {}\n\n",
                        json!({"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "choices": [],
                           "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}})
                    ))
                }
                Step::Finish(r) => chunk(json!({}), Some(&r)),
                Step::Delay(d) => {
                    tokio::time::sleep(d).await;
                    continue;
                }
                Step::KeepAlive => Bytes::from_static(b": keep-alive\n\n"),
                Step::ErrorFrame(m) => {
                    Bytes::from(format!("data: {}\n\n", json!({"error": {"message": m, "type": "server_error"}})))
                }
                Step::Done => Bytes::from_static(b"data: [DONE]\n\n"),
                Step::Drop => {
                    // Let what came before reach the wire first: hyper drops
                    // buffered chunks when the body fails.
                    tokio::time::sleep(Duration::from_millis(30)).await;
                    let _ = tx.send(Chunk::Abort).await;
                    return;
                }
                Step::Hang => {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    return;
                }
            };
            if tx.send(Chunk::Data(data)).await.is_err() {
                return;
            }
        }
    });
    Ok(hyper::Response::builder()
        .status(200)
        .header("content-type", "text/event-stream")
        .body(Either::Stream(ChunkBody(rx)))
        .unwrap())
}
