//! A scripted OpenAI-compatible streaming Chat Completions server on loopback.
//!
//! Each request to `POST /v1/chat/completions` takes the next [`Reply`] from the
//! queue (or the default reply) and plays it: chunks of text, tool-call deltas,
//! usage, delays, an error frame, an HTTP error status, a dropped connection or
//! a hang. Every request body is recorded so tests can assert on exactly what
//! the product sent to the model, and every chunk's send time is recorded so
//! benchmarks can compare the client's arrival times with the model's.
//!
//! The server is as strict about the conversation as the strict real servers
//! are (llama.cpp chat templates, vLLM, OpenAI): every request's `messages` go
//! through [`validate_history`] first, and an invalid history is answered HTTP
//! 400 with an OpenAI-style error body, without taking a scripted reply. Each
//! rejection is recorded; one that a test has not taken with
//! [`ScriptedLlm::take_rejections`] fails the test when the last handle to the
//! server is dropped, so every test also checks the history the product sends.

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
    /// These bytes as they are (a malformed chunk, a frame split oddly).
    Raw(String),
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
    /// When each request's head arrived (for the bench's pre-model time).
    arrived: Vec<Instant>,
    in_flight: usize,
    max_in_flight: usize,
    /// Requests refused by the history validator, not yet taken by the test.
    rejected: Vec<Rejection>,
}

/// A request the scripted model refused (HTTP 400) because its history was invalid.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejection {
    /// Its position in [`ScriptedLlm::requests`].
    pub request: usize,
    pub error: InvalidHistory,
}

/// Fails the test when the server answered an invalid history with a 400 that
/// the test never looked at.
struct RejectionGuard(Arc<Mutex<State>>);

impl Drop for RejectionGuard {
    fn drop(&mut self) {
        if std::thread::panicking() {
            return;
        }
        let rejected = std::mem::take(&mut self.0.lock().unwrap().rejected);
        if !rejected.is_empty() {
            panic!(
                "the scripted model refused {} request(s) whose history a strict server refuses: {rejected:#?}",
                rejected.len()
            );
        }
    }
}

#[derive(Clone)]
pub struct ScriptedLlm {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    _guard: Arc<RejectionGuard>,
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
        let guard = Arc::new(RejectionGuard(state.clone()));
        ScriptedLlm { addr, state, _guard: guard }
    }

    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn push(&self, reply: Reply) {
        self.state.lock().unwrap().replies.push_back(reply);
    }

    /// Drops the replies queued and not taken (e.g. the rounds of a turn that
    /// failed before asking for them).
    pub fn clear_replies(&self) {
        self.state.lock().unwrap().replies.clear();
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

    /// The streams being answered now (one ends when its script ends or its
    /// client goes away).
    pub fn in_flight(&self) -> usize {
        self.state.lock().unwrap().in_flight
    }

    /// The most streams that were being answered at the same moment.
    pub fn max_in_flight(&self) -> usize {
        self.state.lock().unwrap().max_in_flight
    }

    /// When each text chunk was written.
    /// When each request's head arrived, in order.
    pub fn arrivals(&self) -> Vec<Instant> {
        self.state.lock().unwrap().arrived.clone()
    }

    pub fn sent(&self) -> Vec<(Instant, String)> {
        self.state.lock().unwrap().sent.clone()
    }

    /// The requests refused for an invalid history so far, without taking them.
    pub fn rejections(&self) -> Vec<Rejection> {
        self.state.lock().unwrap().rejected.clone()
    }

    /// Takes the rejections so far: a test that expects one says so this way
    /// (an untaken rejection fails the test when the server is dropped).
    pub fn take_rejections(&self) -> Vec<Rejection> {
        std::mem::take(&mut self.state.lock().unwrap().rejected)
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
    state.lock().unwrap().arrived.push(Instant::now());
    let path = req.uri().path().to_string();
    let body = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    if !path.ends_with("/chat/completions") {
        return Ok(hyper::Response::builder().status(404).body(Either::Full(Some(Bytes::from_static(b"{}")))).unwrap());
    }
    let request: serde_json::Value = serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
    let verdict = validate_history(&request);
    let reply = {
        let mut st = state.lock().unwrap();
        st.requests.push(request);
        if let Err(error) = verdict {
            let request = st.requests.len() - 1;
            st.rejected.push(Rejection { request, error: error.clone() });
            drop(st);
            return Ok(invalid_request(&error));
        }
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
                Step::Raw(raw) => Bytes::from(raw),
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

/// Why a strict server refuses a request's history: what OpenAI calls the
/// `param` (where) and the `message` (what).
#[derive(Debug, Clone, PartialEq)]
pub struct InvalidHistory {
    pub param: String,
    pub message: String,
}

impl std::fmt::Display for InvalidHistory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.param, self.message)
    }
}

/// The 400 a strict OpenAI-compatible server answers an invalid history with.
fn invalid_request(error: &InvalidHistory) -> hyper::Response<Either> {
    let body = json!({"error": {
        "message": error.message, "type": "invalid_request_error", "param": error.param, "code": null
    }});
    hyper::Response::builder()
        .status(400)
        .header("content-type", "application/json")
        .body(Either::Full(Some(Bytes::from(body.to_string()))))
        .unwrap()
}

/// Checks a Chat Completions request the way strict servers do (llama.cpp's
/// chat templates raise, vLLM and OpenAI answer 400):
/// - `messages` is a non-empty array, each with a role of `system`, `user`,
///   `assistant` or `tool`;
/// - `system`, `user` and `tool` messages have string content; an `assistant`
///   message has string content or `tool_calls`;
/// - every assistant `tool_calls` entry has an id (unique in the request), type
///   `function`, a function name, and `arguments` that are a JSON object;
///   the calls of one message have distinct ids (later messages may reuse
///   one: servers that number their calls do);
/// - the calls of an assistant message are answered by exactly one `tool`
///   message each, with its `tool_call_id`, before the next non-tool message;
/// - no `tool` message answers a call that no preceding assistant message made
///   (or one already answered);
/// - the last message is `user` or `tool` (the model answers them).
pub fn validate_history(request: &serde_json::Value) -> Result<(), InvalidHistory> {
    let bad = |param: String, message: String| Err(InvalidHistory { param, message });
    let Some(messages) = request["messages"].as_array().filter(|m| !m.is_empty()) else {
        return bad("messages".into(), "`messages` must be a non-empty array".into());
    };
    // Calls of the last assistant message that still wait for their tool message.
    let mut open: Vec<String> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let at = |field: &str| format!("messages.[{i}].{field}");
        let role = m["role"].as_str().unwrap_or_default();
        let content = &m["content"];
        if role != "tool" && !open.is_empty() {
            return bad(
                at("role"),
                format!("an assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'; missing: {open:?}"),
            );
        }
        match role {
            "system" | "user" => {
                if !content.is_string() {
                    return bad(at("content"), format!("a {role} message needs string content"));
                }
            }
            "assistant" => {
                let calls = match &m["tool_calls"] {
                    serde_json::Value::Null => &[][..],
                    serde_json::Value::Array(calls) => calls.as_slice(),
                    _ => return bad(at("tool_calls"), "`tool_calls` must be an array".into()),
                };
                if calls.is_empty() && !content.is_string() {
                    return bad(at("content"), "an assistant message needs content or tool_calls".into());
                }
                for (j, call) in calls.iter().enumerate() {
                    let at = |field: &str| format!("messages.[{i}].tool_calls.[{j}].{field}");
                    let Some(id) = call["id"].as_str().filter(|id| !id.is_empty()) else {
                        return bad(at("id"), "a tool call needs an id".into());
                    };
                    if open.iter().any(|o| o == id) {
                        return bad(at("id"), format!("two calls of one message share the id {id:?}"));
                    }
                    if call["type"] != "function" {
                        return bad(at("type"), "a tool call's type must be \"function\"".into());
                    }
                    if call["function"]["name"].as_str().is_none_or(str::is_empty) {
                        return bad(at("function.name"), "a tool call needs a function name".into());
                    }
                    let args = call["function"]["arguments"].as_str().unwrap_or_default();
                    match serde_json::from_str::<serde_json::Value>(args) {
                        Ok(serde_json::Value::Object(_)) => {}
                        _ => {
                            return bad(
                                at("function.arguments"),
                                format!("the arguments of tool call {id:?} are not a JSON object: {args:?}"),
                            )
                        }
                    }
                    open.push(id.to_string());
                }
            }
            "tool" => {
                let id = m["tool_call_id"].as_str().unwrap_or_default();
                let Some(pos) = open.iter().position(|o| o == id) else {
                    return bad(
                        at("tool_call_id"),
                        format!("a tool message must respond to a preceding assistant tool call; {id:?} is not one (or is answered already)"),
                    );
                };
                open.remove(pos);
                if !content.is_string() {
                    return bad(at("content"), "a tool message needs string content".into());
                }
            }
            other => return bad(at("role"), format!("unknown role {other:?}")),
        }
    }
    if !open.is_empty() {
        return bad(format!("messages.[{}]", messages.len()), format!("tool calls without results: {open:?}"));
    }
    let last = messages.last().and_then(|m| m["role"].as_str()).unwrap_or_default();
    if last != "user" && last != "tool" {
        return bad(
            format!("messages.[{}].role", messages.len() - 1),
            format!("the last message must be from the user or a tool, not {last:?}"),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: &str, args: &str) -> serde_json::Value {
        json!({"id": id, "type": "function", "function": {"name": "create_task", "arguments": args}})
    }

    fn with(messages: serde_json::Value) -> Result<(), InvalidHistory> {
        validate_history(&json!({"model": "m", "messages": messages}))
    }

    fn refused_at(messages: serde_json::Value) -> String {
        with(messages).expect_err("a strict server refuses this").param
    }

    #[test]
    fn a_valid_tool_round_and_plain_turns_pass() {
        let ok = json!([
            {"role": "system", "content": "s"},
            {"role": "user", "content": "u"},
            {"role": "assistant", "content": null, "tool_calls": [call("a", "{}"), call("b", "{\"x\":1}")]},
            {"role": "tool", "tool_call_id": "b", "content": "{}"},
            {"role": "tool", "tool_call_id": "a", "content": "{}"},
            {"role": "assistant", "content": "done"},
            {"role": "user", "content": "again"},
        ]);
        assert_eq!(with(ok), Ok(()));
        let ends_with_tool = json!([
            {"role": "user", "content": "u"},
            {"role": "assistant", "content": "", "tool_calls": [call("a", "{}")]},
            {"role": "tool", "tool_call_id": "a", "content": "r"},
        ]);
        assert_eq!(with(ends_with_tool), Ok(()));
    }

    #[test]
    fn an_unanswered_call_is_refused_at_the_next_message() {
        let m = json!([
            {"role": "user", "content": "u"},
            {"role": "assistant", "content": null, "tool_calls": [call("a", "{}"), call("b", "{}")]},
            {"role": "tool", "tool_call_id": "a", "content": "r"},
            {"role": "user", "content": "next"},
        ]);
        assert_eq!(refused_at(m), "messages.[3].role");
        let at_end = json!([
            {"role": "user", "content": "u"},
            {"role": "assistant", "content": null, "tool_calls": [call("a", "{}")]},
        ]);
        assert_eq!(refused_at(at_end), "messages.[2]");
    }

    #[test]
    fn orphan_and_twice_answered_tool_messages_are_refused() {
        let orphan = json!([
            {"role": "user", "content": "u"},
            {"role": "tool", "tool_call_id": "nobody", "content": "r"},
        ]);
        assert_eq!(refused_at(orphan), "messages.[1].tool_call_id");
        let twice = json!([
            {"role": "user", "content": "u"},
            {"role": "assistant", "content": null, "tool_calls": [call("a", "{}")]},
            {"role": "tool", "tool_call_id": "a", "content": "r"},
            {"role": "tool", "tool_call_id": "a", "content": "r"},
        ]);
        assert_eq!(refused_at(twice), "messages.[3].tool_call_id");
        let after_a_text = json!([
            {"role": "user", "content": "u"},
            {"role": "assistant", "content": null, "tool_calls": [call("a", "{}")]},
            {"role": "tool", "tool_call_id": "a", "content": "r"},
            {"role": "assistant", "content": "text"},
            {"role": "tool", "tool_call_id": "a", "content": "r"},
        ]);
        assert_eq!(refused_at(after_a_text), "messages.[4].tool_call_id");
    }

    #[test]
    fn arguments_must_be_a_json_object() {
        for args in ["{\"title\": \"sec", "", "[1]", "\"s\"", "null"] {
            let m = json!([
                {"role": "user", "content": "u"},
                {"role": "assistant", "content": null, "tool_calls": [call("a", args)]},
                {"role": "tool", "tool_call_id": "a", "content": "r"},
            ]);
            assert_eq!(refused_at(m), "messages.[1].tool_calls.[0].function.arguments", "{args:?}");
        }
    }

    #[test]
    fn roles_shapes_and_the_last_message_are_checked() {
        assert_eq!(refused_at(json!([])), "messages");
        assert_eq!(refused_at(json!([{"role": "robot", "content": "x"}])), "messages.[0].role");
        assert_eq!(refused_at(json!([{"role": "user", "content": null}])), "messages.[0].content");
        let empty_assistant = json!([{"role": "user", "content": "u"}, {"role": "assistant", "content": null}, {"role": "user", "content": "u"}]);
        assert_eq!(refused_at(empty_assistant), "messages.[1].content");
        let ends_with_assistant = json!([{"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}]);
        assert_eq!(refused_at(ends_with_assistant), "messages.[1].role");
        let duplicate_ids = json!([
            {"role": "user", "content": "u"},
            {"role": "assistant", "content": null, "tool_calls": [call("a", "{}"), call("a", "{}")]},
        ]);
        assert_eq!(refused_at(duplicate_ids), "messages.[1].tool_calls.[1].id");
    }
}
