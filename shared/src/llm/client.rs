//! [`OpenAiClient`]: [`Llm`] over HTTP, against any OpenAI-compatible
//! streaming `/chat/completions` endpoint.
//!
//! One attempt is: POST, status, then body chunks until the first
//! [`LlmEvent`], all under one `first_token_timeout` deadline (keep-alive
//! comments and role-only chunks do not count). Transient failures of an
//! attempt ([`LlmError::is_transient`]: connect errors, no status line in
//! time, 429, 5xx, and a connection that breaks before the first event; not
//! a server that answered 200 and is still computing) are retried up to
//! `max_retries` times with exponential backoff and jitter, or after the
//! server's `Retry-After` (capped). Once an event has arrived nothing is
//! retried: the stream yields that event and the rest, each chunk under
//! `idle_timeout`, and ends at `[DONE]`, at the end of a body that carried a
//! `finish_reason`, or with one error.

use super::parse::{error_message_from_text, snippet, ChunkParser};
use super::{ChatRequest, Llm, LlmError, LlmEvent, LlmStream, TIMEOUT_FIRST_TOKEN, TIMEOUT_RESPONSE};
use crate::config::LlmConfig;
use bytes::Bytes;
use futures::{FutureExt, StreamExt};
use reqwest::header::{HeaderMap, ACCEPT, CONTENT_TYPE};
use serde::Serialize;
use std::collections::VecDeque;
use std::fmt;
use std::time::Duration;
use tokio::time::{timeout_at, Instant};
use tracing::Instrument;

/// How much of an error body is read and kept.
const ERROR_BODY_LIMIT: usize = 4 * 1024;
/// The first retry waits about this long, doubling each time up to [`BACKOFF_CAP`].
const BACKOFF_BASE: Duration = Duration::from_millis(200);
const BACKOFF_CAP: Duration = Duration::from_secs(2);
/// The longest `Retry-After` honoured; longer ones are shortened to this.
const RETRY_AFTER_CAP: Duration = Duration::from_secs(5);
/// Idle pooled connections are closed after this (below common load balancer idle timeouts).
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(55);

/// The client's settings; usually `OpenAiConfig::from(&config.llm)`.
#[derive(Clone)]
pub struct OpenAiConfig {
    /// The part before `/chat/completions`, e.g. `https://api.openai.com/v1`.
    pub base_url: String,
    /// Sent as a bearer token when set.
    pub api_key: Option<String>,
    /// Used when a [`ChatRequest`] leaves `model` empty.
    pub model: String,
    /// TCP (and TLS) connect.
    pub connect_timeout: Duration,
    /// From sending the request to the first event, per attempt.
    pub first_token_timeout: Duration,
    /// The longest silence between two body chunks after the first event.
    pub idle_timeout: Duration,
    /// Retries before the first event (so at most `max_retries + 1` attempts).
    pub max_retries: u32,
    /// Used when a [`ChatRequest`] leaves `max_tokens` unset.
    pub max_tokens: Option<u32>,
}

impl fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("model", &self.model)
            .field("connect_timeout", &self.connect_timeout)
            .field("first_token_timeout", &self.first_token_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .field("max_retries", &self.max_retries)
            .field("max_tokens", &self.max_tokens)
            .finish()
    }
}

impl From<&LlmConfig> for OpenAiConfig {
    fn from(c: &LlmConfig) -> Self {
        OpenAiConfig {
            base_url: c.base_url.clone(),
            api_key: c.api_key.clone(),
            model: c.model.clone(),
            connect_timeout: c.connect_timeout,
            first_token_timeout: c.first_token_timeout,
            idle_timeout: c.idle_timeout,
            max_retries: c.max_retries,
            max_tokens: c.max_tokens,
        }
    }
}

/// The HTTP [`Llm`]. Build one per process and share it: it holds the
/// connection pool.
#[derive(Debug, Clone)]
pub struct OpenAiClient {
    http: reqwest::Client,
    cfg: OpenAiConfig,
    url: String,
}

impl OpenAiClient {
    /// Builds the client and its one `reqwest::Client`. Panics only if the TLS
    /// backend cannot be initialised.
    pub fn new(cfg: OpenAiConfig) -> Self {
        let http = reqwest::Client::builder()
            .connect_timeout(cfg.connect_timeout)
            // Frames are small and latency-critical: no Nagle delay.
            .tcp_nodelay(true)
            .tcp_keepalive(Some(Duration::from_secs(30)))
            .pool_idle_timeout(Some(POOL_IDLE_TIMEOUT))
            .pool_max_idle_per_host(16)
            .user_agent(concat!("agentic-chat/", env!("CARGO_PKG_VERSION")))
            // No overall timeout: streams are long; the first-token and idle
            // timeouts bound them instead.
            .build()
            .expect("the HTTP client could not be built (TLS backend)");
        let url = format!("{}/chat/completions", cfg.base_url.trim_end_matches('/'));
        OpenAiClient { http, cfg, url }
    }

    pub fn config(&self) -> &OpenAiConfig {
        &self.cfg
    }

    /// Attempts and retries, up to the first event.
    async fn call(&self, body: Bytes) -> Result<LlmStream, LlmError> {
        let span = tracing::Span::current();
        let started = std::time::Instant::now();
        let mut attempt: u32 = 0;
        loop {
            attempt += 1;
            match self.attempt(body.clone(), span.clone()).await {
                Ok(stream) => {
                    let ttft_ms = started.elapsed().as_millis() as u64;
                    span.record("attempts", attempt);
                    span.record("ttft_ms", ttft_ms);
                    tracing::debug!(attempt, ttft_ms, "model: first event");
                    return Ok(stream);
                }
                Err(Failure { error, retry_after }) => {
                    if !error.is_transient() || attempt > self.cfg.max_retries {
                        span.record("attempts", attempt);
                        tracing::warn!(error = %error, code = error.code(), attempt, "model call failed");
                        return Err(error);
                    }
                    let delay = match retry_after {
                        Some(d) => d.min(RETRY_AFTER_CAP),
                        None => backoff(attempt - 1),
                    };
                    tracing::warn!(
                        error = %error,
                        code = error.code(),
                        attempt,
                        delay_ms = delay.as_millis() as u64,
                        "model call failed; retrying"
                    );
                    tokio::time::sleep(delay).await;
                }
            }
        }
    }

    /// One attempt: request, status, and the body up to its first event.
    async fn attempt(&self, body: Bytes, span: tracing::Span) -> Result<LlmStream, Failure> {
        let deadline = Instant::now() + self.cfg.first_token_timeout;
        let mut rb = self
            .http
            .post(&self.url)
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "text/event-stream")
            .body(body);
        if let Some(key) = &self.cfg.api_key {
            rb = rb.bearer_auth(key);
        }
        // The span marks when the request leaves (the bench's pre-model time).
        let sent = rb.send().instrument(tracing::debug_span!("llm.request"));
        let resp = match timeout_at(deadline, sent).await {
            Err(_) => return Err(LlmError::Timeout(TIMEOUT_RESPONSE).into()),
            Ok(Err(e)) if e.is_timeout() => return Err(LlmError::Timeout("connect").into()),
            Ok(Err(e)) => return Err(LlmError::Connect(error_chain(&e)).into()),
            Ok(Ok(resp)) => resp,
        };

        let status = resp.status();
        if !status.is_success() {
            let retry_after = retry_after(resp.headers());
            let text = read_bounded(resp, deadline).await;
            let body = if text.trim().is_empty() {
                status.canonical_reason().unwrap_or_default().to_string()
            } else {
                error_message_from_text(&text)
            };
            return Err(Failure { error: LlmError::Http { status: status.as_u16(), body }, retry_after });
        }
        if is_json(resp.headers()) {
            // Not a stream: an error some proxies send with 200, or a server that
            // ignored `stream: true`.
            let text = read_bounded(resp, deadline).await;
            let has_error = serde_json::from_str::<serde_json::Value>(&text)
                .map(|v| v.get("error").is_some_and(|e| !e.is_null()))
                .unwrap_or(false);
            return Err(if has_error {
                LlmError::Api(error_message_from_text(&text))
            } else {
                LlmError::Decode(format!("expected an event stream, got application/json: {}", snippet(&text, 200)))
            }
            .into());
        }

        let mut reader = BodyReader::new(resp, self.cfg.idle_timeout, span);
        loop {
            match reader.queue.front() {
                Some(Ok(_)) => break,
                Some(Err(_)) => match reader.queue.pop_front() {
                    Some(Err(e)) => return Err(e.into()),
                    _ => unreachable!("the front was an error"),
                },
                // `[DONE]` before any event: an empty answer.
                None if reader.ended => break,
                None => reader.pull(deadline).await,
            }
        }
        Ok(reader.into_stream())
    }
}

#[async_trait::async_trait]
impl Llm for OpenAiClient {
    async fn stream_chat(&self, mut req: ChatRequest) -> Result<LlmStream, LlmError> {
        if req.model.is_empty() {
            req.model = self.cfg.model.clone();
        }
        if req.max_tokens.is_none() {
            req.max_tokens = self.cfg.max_tokens;
        }
        let span = tracing::info_span!(
            "llm.chat",
            model = %req.model,
            messages = req.messages.len(),
            tools = req.tools.len(),
            attempts = tracing::field::Empty,
            ttft_ms = tracing::field::Empty,
        );
        let wire = WireRequest { req: &req, stream: true, stream_options: StreamOptions { include_usage: true } };
        let body =
            serde_json::to_vec(&wire).map_err(|e| LlmError::Decode(format!("could not encode the request: {e}")))?;
        self.call(Bytes::from(body)).instrument(span).await
    }
}

/// The request as sent: the [`ChatRequest`] plus the streaming switches.
#[derive(Serialize)]
struct WireRequest<'a> {
    #[serde(flatten)]
    req: &'a ChatRequest,
    stream: bool,
    stream_options: StreamOptions,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

/// A failed attempt, with the server's `Retry-After` if it gave one.
struct Failure {
    error: LlmError,
    retry_after: Option<Duration>,
}

impl From<LlmError> for Failure {
    fn from(error: LlmError) -> Self {
        Failure { error, retry_after: None }
    }
}

/// The response body, parsed into a queue of items. Owns the response, so
/// dropping it (or the stream made from it) cancels the request.
struct BodyReader {
    resp: reqwest::Response,
    parser: ChunkParser,
    scratch: Vec<LlmEvent>,
    /// Items ready to yield; an error, if any, is last.
    queue: VecDeque<Result<LlmEvent, LlmError>>,
    /// Nothing more will be read.
    ended: bool,
    /// Some event has been queued (so we are past the first token).
    seen_event: bool,
    idle: Duration,
    events: u64,
    span: tracing::Span,
}

impl BodyReader {
    fn new(resp: reqwest::Response, idle: Duration, span: tracing::Span) -> Self {
        BodyReader {
            resp,
            parser: ChunkParser::new(),
            scratch: Vec::new(),
            queue: VecDeque::new(),
            ended: false,
            seen_event: false,
            idle,
            events: 0,
            span,
        }
    }

    /// Reads one body chunk (waiting until `deadline` at most) and queues what it completes.
    async fn pull(&mut self, deadline: Instant) {
        match timeout_at(deadline, self.resp.chunk()).await {
            Err(_) => self.fail(LlmError::Timeout(if self.seen_event { "idle" } else { TIMEOUT_FIRST_TOKEN })),
            Ok(Err(e)) => self.fail(if self.seen_event {
                LlmError::Stream(error_chain(&e))
            } else {
                // Nothing has reached the user yet: as retryable as a failed connect.
                LlmError::Connect(format!("the connection broke before the first token: {}", error_chain(&e)))
            }),
            Ok(Ok(Some(bytes))) => {
                let r = self.parser.feed(&bytes, &mut self.scratch);
                self.take_events();
                if let Err(e) = r {
                    self.fail(e);
                } else if self.parser.is_done() {
                    self.ended = true;
                    // Let the connection go back to the pool if the body's end is
                    // already here; never wait for it.
                    let _ = self.resp.chunk().now_or_never();
                }
            }
            Ok(Ok(None)) => {
                self.ended = true;
                let r = self.parser.finish(&mut self.scratch);
                self.take_events();
                if let Err(e) = r {
                    self.fail(e);
                } else if !self.parser.is_done() && !self.parser.saw_finish() {
                    self.fail(LlmError::Stream("stream ended before [DONE]".into()));
                }
            }
        }
    }

    fn take_events(&mut self) {
        if !self.scratch.is_empty() {
            self.seen_event = true;
            self.events += self.scratch.len() as u64;
            self.queue.extend(self.scratch.drain(..).map(Ok));
        }
    }

    fn fail(&mut self, e: LlmError) {
        self.queue.push_back(Err(e));
        self.ended = true;
    }

    fn into_stream(self) -> LlmStream {
        futures::stream::unfold(self, |mut r| {
            let span = r.span.clone();
            async move {
                loop {
                    if let Some(item) = r.queue.pop_front() {
                        if let Err(e) = &item {
                            tracing::warn!(error = %e, code = e.code(), events = r.events, "model stream failed");
                        }
                        return Some((item, r));
                    }
                    if r.ended {
                        tracing::debug!(events = r.events, "model stream ended");
                        return None;
                    }
                    let deadline = Instant::now() + r.idle;
                    r.pull(deadline).await;
                }
            }
            .instrument(span)
        })
        // Polling after the end stays at the end.
        .fuse()
        .boxed()
    }
}

/// `base · 2^retry`, capped, with "equal jitter": between half and all of it.
fn backoff(retry: u32) -> Duration {
    let full = BACKOFF_BASE.saturating_mul(1u32 << retry.min(16)).min(BACKOFF_CAP);
    let half = full / 2;
    half + half.mul_f64(rand::random::<f64>())
}

/// `Retry-After-Ms` (Azure) or `Retry-After` in seconds; HTTP dates are ignored.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let get = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    if let Some(ms) = get("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        if ms.is_finite() && ms >= 0.0 {
            return Some(Duration::from_secs_f64(ms.min(3_600_000.0) / 1000.0));
        }
    }
    get("retry-after").and_then(|v| v.parse::<u64>().ok()).map(Duration::from_secs)
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().to_ascii_lowercase().starts_with("application/json"))
}

/// The first [`ERROR_BODY_LIMIT`] bytes of the body, or what arrived by `deadline`.
async fn read_bounded(mut resp: reqwest::Response, deadline: Instant) -> String {
    let mut buf = Vec::new();
    while buf.len() < ERROR_BODY_LIMIT {
        match timeout_at(deadline, resp.chunk()).await {
            Ok(Ok(Some(b))) => {
                let take = b.len().min(ERROR_BODY_LIMIT - buf.len());
                buf.extend_from_slice(&b[..take]);
            }
            _ => break,
        }
    }
    String::from_utf8_lossy(&buf).into_owned()
}

/// An error and its sources, for messages that say what actually happened.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let m = cause.to_string();
        if !s.contains(&m) {
            s.push_str(": ");
            s.push_str(&m);
        }
        source = cause.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{ChatMessage, Usage};
    use serde_json::json;
    use std::sync::{Arc, Mutex};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    // ---- a tiny scripted HTTP/1.1 server ----

    #[derive(Clone)]
    enum Step {
        /// One HTTP chunk.
        Send(String),
        Sleep(Duration),
    }

    #[derive(Clone, Copy)]
    enum End {
        /// The chunked terminator, then close.
        Finish,
        /// Close mid-body.
        Drop,
        /// Keep the connection open until the client closes it.
        Hang,
    }

    #[derive(Clone)]
    enum Reply {
        Status {
            code: u16,
            headers: Vec<(&'static str, String)>,
            body: String,
        },
        Stream {
            steps: Vec<Step>,
            end: End,
        },
        /// Read the request, answer nothing, wait for the client to go.
        Silent,
    }

    struct Recorded {
        head: String,
        body: serde_json::Value,
    }

    struct TestServer {
        url: String,
        requests: Arc<Mutex<Vec<Recorded>>>,
        /// Connections the client closed while the server was waiting on it.
        client_closes: Arc<tokio::sync::Notify>,
    }

    impl TestServer {
        fn count(&self) -> usize {
            self.requests.lock().unwrap().len()
        }
    }

    async fn serve(script: impl Fn(usize) -> Reply + Send + Sync + 'static) -> TestServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let client_closes = Arc::new(tokio::sync::Notify::new());
        let script = Arc::new(script);
        let (reqs, closes) = (requests.clone(), client_closes.clone());
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                let (reqs, closes, script) = (reqs.clone(), closes.clone(), script.clone());
                tokio::spawn(async move {
                    let Some(req) = read_request(&mut sock).await else { return };
                    let n = {
                        let mut r = reqs.lock().unwrap();
                        r.push(req);
                        r.len() - 1
                    };
                    if respond(&mut sock, script(n)).await {
                        closes.notify_one();
                    }
                });
            }
        });
        TestServer { url: format!("http://{addr}/v1"), requests, client_closes }
    }

    async fn read_request(sock: &mut TcpStream) -> Option<Recorded> {
        let mut buf = Vec::new();
        let mut tmp = [0u8; 4096];
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let n = sock.read(&mut tmp).await.ok()?;
            if n == 0 {
                return None;
            }
            buf.extend_from_slice(&tmp[..n]);
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .map(|v| v.trim().parse().unwrap())
            .unwrap_or(0);
        while buf.len() < head_end + len {
            let n = sock.read(&mut tmp).await.ok()?;
            if n == 0 {
                return None;
            }
            buf.extend_from_slice(&tmp[..n]);
        }
        let body = serde_json::from_slice(&buf[head_end..head_end + len]).unwrap_or(serde_json::Value::Null);
        Some(Recorded { head, body })
    }

    /// Answers; returns true when it waited for, and saw, the client close.
    async fn respond(sock: &mut TcpStream, reply: Reply) -> bool {
        match reply {
            Reply::Status { code, headers, body } => {
                let mut out = format!(
                    "HTTP/1.1 {code} Whatever\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
                    body.len()
                );
                for (k, v) in headers {
                    out.push_str(&format!("{k}: {v}\r\n"));
                }
                out.push_str("\r\n");
                out.push_str(&body);
                let _ = sock.write_all(out.as_bytes()).await;
                false
            }
            Reply::Silent => wait_for_close(sock).await,
            Reply::Stream { steps, end } => {
                let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n";
                if sock.write_all(head.as_bytes()).await.is_err() {
                    return false;
                }
                for step in steps {
                    match step {
                        Step::Send(s) => {
                            let chunk = format!("{:x}\r\n{s}\r\n", s.len());
                            if sock.write_all(chunk.as_bytes()).await.is_err() {
                                return false;
                            }
                        }
                        Step::Sleep(d) => tokio::time::sleep(d).await,
                    }
                }
                match end {
                    End::Finish => {
                        let _ = sock.write_all(b"0\r\n\r\n").await;
                        false
                    }
                    End::Drop => false,
                    End::Hang => wait_for_close(sock).await,
                }
            }
        }
    }

    async fn wait_for_close(sock: &mut TcpStream) -> bool {
        let mut tmp = [0u8; 64];
        loop {
            match sock.read(&mut tmp).await {
                Ok(0) | Err(_) => return true,
                Ok(_) => {}
            }
        }
    }

    // ---- helpers ----

    fn send(s: impl Into<String>) -> Step {
        Step::Send(s.into())
    }

    fn chunk(v: serde_json::Value) -> Step {
        send(format!("data: {v}\n\n"))
    }

    fn role() -> Step {
        chunk(json!({"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}))
    }

    fn text(t: &str) -> Step {
        chunk(json!({"choices":[{"index":0,"delta":{"content":t},"finish_reason":null}]}))
    }

    fn finish(reason: &str) -> Step {
        chunk(json!({"choices":[{"index":0,"delta":{},"finish_reason":reason}]}))
    }

    fn done() -> Step {
        send("data: [DONE]\n\n")
    }

    fn keep_alive() -> Step {
        send(": keep-alive\n\n")
    }

    fn stream(steps: Vec<Step>, end: End) -> Reply {
        Reply::Stream { steps, end }
    }

    fn status(code: u16, body: &str) -> Reply {
        Reply::Status { code, headers: vec![], body: body.into() }
    }

    fn cfg(server: &TestServer) -> OpenAiConfig {
        OpenAiConfig {
            base_url: format!("{}/", server.url),
            api_key: Some("sk-test".into()),
            model: "test-model".into(),
            connect_timeout: Duration::from_secs(1),
            first_token_timeout: Duration::from_secs(1),
            idle_timeout: Duration::from_secs(1),
            max_retries: 2,
            max_tokens: Some(64),
        }
    }

    fn request() -> ChatRequest {
        ChatRequest {
            model: String::new(),
            messages: vec![ChatMessage::system("be brief"), ChatMessage::user("hi")],
            tools: vec![],
            max_tokens: None,
            temperature: None,
        }
    }

    fn ev_text(t: &str) -> LlmEvent {
        LlmEvent::TextDelta(t.into())
    }

    /// All items of a stream, checking that an error, if any, is the last.
    async fn collect(mut s: LlmStream) -> (Vec<LlmEvent>, Option<LlmError>) {
        let mut events = Vec::new();
        while let Some(item) = s.next().await {
            match item {
                Ok(e) => events.push(e),
                Err(e) => {
                    assert!(s.next().await.is_none(), "items after the error {e:?}");
                    assert!(s.next().await.is_none());
                    return (events, Some(e));
                }
            }
        }
        (events, None)
    }

    async fn chat(cfg: OpenAiConfig) -> Result<(Vec<LlmEvent>, Option<LlmError>), LlmError> {
        let client = OpenAiClient::new(cfg);
        let s = client.stream_chat(request()).await?;
        Ok(collect(s).await)
    }

    // ---- tests ----

    #[tokio::test]
    async fn streams_text_tool_calls_and_usage() {
        let server = serve(|_| {
            let usage = json!({"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}});
            stream(
                vec![
                    keep_alive(),
                    role(),
                    text("Hel"),
                    // One frame split across two HTTP chunks.
                    send("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\""),
                    send(":\"lo\"}}]}\n\n: ping\n\n"),
                    chunk(json!({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"search","arguments":"{\"q\":"}}]}}]})),
                    chunk(json!({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"1}"}}]}}]})),
                    finish("tool_calls"),
                    chunk(usage),
                    done(),
                ],
                End::Finish,
            )
        })
        .await;
        let (events, err) = chat(cfg(&server)).await.unwrap();
        assert_eq!(err, None);
        assert_eq!(
            events,
            vec![
                ev_text("Hel"),
                ev_text("lo"),
                LlmEvent::ToolCallDelta {
                    index: 0,
                    id: Some("call_1".into()),
                    name: Some("search".into()),
                    arguments: "{\"q\":".into()
                },
                LlmEvent::ToolCallDelta { index: 0, id: None, name: None, arguments: "1}".into() },
                LlmEvent::Finish { reason: "tool_calls".into() },
                LlmEvent::Usage(Usage { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 }),
            ]
        );

        assert_eq!(server.count(), 1);
        let reqs = server.requests.lock().unwrap();
        let r = &reqs[0];
        assert!(r.head.starts_with("post /v1/chat/completions http/1.1\r\n"), "{}", r.head);
        assert!(r.head.contains("\r\nauthorization: bearer sk-test\r\n"), "{}", r.head);
        assert!(r.head.contains("\r\naccept: text/event-stream\r\n"), "{}", r.head);
        assert_eq!(r.body["stream"], json!(true));
        assert_eq!(r.body["stream_options"], json!({"include_usage": true}));
        assert_eq!(r.body["model"], json!("test-model"));
        assert_eq!(r.body["max_tokens"], json!(64));
        assert_eq!(r.body["messages"][1], json!({"role":"user","content":"hi"}));
        assert!(r.body.get("tools").is_none());
    }

    #[tokio::test]
    async fn no_api_key_means_no_authorization_header() {
        let server = serve(|_| stream(vec![text("a"), done()], End::Finish)).await;
        let mut cfg = cfg(&server);
        cfg.api_key = None;
        let (events, err) = chat(cfg).await.unwrap();
        assert_eq!((events, err), (vec![ev_text("a")], None));
        assert!(!server.requests.lock().unwrap()[0].head.contains("authorization"));
    }

    #[tokio::test]
    async fn retries_a_429_then_streams() {
        let server = serve(|n| match n {
            0 => Reply::Status {
                code: 429,
                headers: vec![("retry-after", "0".into())],
                body: r#"{"error":{"message":"slow down","type":"rate_limit"}}"#.into(),
            },
            _ => stream(vec![role(), text("ok"), finish("stop"), done()], End::Finish),
        })
        .await;
        let (events, err) = chat(cfg(&server)).await.unwrap();
        assert_eq!(err, None);
        assert_eq!(events, vec![ev_text("ok"), LlmEvent::Finish { reason: "stop".into() }]);
        assert_eq!(server.count(), 2);
    }

    #[tokio::test]
    async fn a_persistent_500_is_tried_max_retries_plus_one_times() {
        let server = serve(|_| status(500, r#"{"error":{"message":"boom","type":"server_error"}}"#)).await;
        let err = chat(cfg(&server)).await.unwrap_err();
        assert_eq!(err, LlmError::Http { status: 500, body: "boom".into() });
        assert_eq!(server.count(), 3);
    }

    #[tokio::test]
    async fn a_400_is_not_retried() {
        let server = serve(|_| status(400, r#"{"error":{"message":"messages: required","code":"invalid"}}"#)).await;
        let err = chat(cfg(&server)).await.unwrap_err();
        assert_eq!(err, LlmError::Http { status: 400, body: "messages: required".into() });
        assert!(!err.is_transient());
        assert_eq!(server.count(), 1);

        // A body that is not JSON is kept as text; an empty one gives the reason.
        let server = serve(|n| if n == 0 { status(404, "no such route\n") } else { status(401, "") }).await;
        let err = chat(cfg(&server)).await.unwrap_err();
        assert_eq!(err, LlmError::Http { status: 404, body: "no such route".into() });
        let err = chat(cfg(&server)).await.unwrap_err();
        assert_eq!(err, LlmError::Http { status: 401, body: "Unauthorized".into() });
    }

    #[tokio::test]
    async fn a_long_error_body_is_bounded() {
        let server = serve(|_| status(400, &"x".repeat(100_000))).await;
        match chat(cfg(&server)).await.unwrap_err() {
            LlmError::Http { status: 400, body } => assert!(body.len() <= ERROR_BODY_LIMIT + 4, "{}", body.len()),
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn a_connection_dropped_mid_stream_is_a_stream_error_after_the_text() {
        let server = serve(|_| stream(vec![role(), text("a"), text("b")], End::Drop)).await;
        let (events, err) = chat(cfg(&server)).await.unwrap();
        assert_eq!(events, vec![ev_text("a"), ev_text("b")]);
        assert!(matches!(err, Some(LlmError::Stream(_))), "{err:?}");
        assert_eq!(server.count(), 1);
    }

    #[tokio::test]
    async fn a_connection_dropped_before_the_first_token_is_retried() {
        let server = serve(|n| match n {
            0 => stream(vec![keep_alive(), role()], End::Drop),
            _ => stream(vec![text("second try"), done()], End::Finish),
        })
        .await;
        let (events, err) = chat(cfg(&server)).await.unwrap();
        assert_eq!((events, err), (vec![ev_text("second try")], None));
        assert_eq!(server.count(), 2);
    }

    /// The server answered 200 and is computing: a retry would compute the
    /// same prompt again (a local model: after finishing the abandoned one).
    #[tokio::test]
    async fn no_first_token_times_out_is_not_retried_and_keep_alives_do_not_count() {
        let server = serve(|_| {
            let mut steps = vec![role()];
            for _ in 0..20 {
                steps.push(Step::Sleep(Duration::from_millis(50)));
                steps.push(keep_alive());
            }
            stream(steps, End::Hang)
        })
        .await;
        let mut cfg = cfg(&server);
        cfg.first_token_timeout = Duration::from_millis(200);
        cfg.max_retries = 1;
        let err = chat(cfg).await.unwrap_err();
        assert_eq!(err, LlmError::Timeout("first token"));
        assert_eq!(server.count(), 1, "not retried");
    }

    #[tokio::test]
    async fn no_response_headers_times_out_and_is_retried() {
        let server = serve(|_| Reply::Silent).await;
        let mut cfg = cfg(&server);
        cfg.first_token_timeout = Duration::from_millis(200);
        cfg.max_retries = 1;
        assert_eq!(chat(cfg).await.unwrap_err(), LlmError::Timeout("response"));
        assert_eq!(server.count(), 2);
    }

    #[tokio::test]
    async fn silence_after_the_first_token_is_an_idle_timeout() {
        let server = serve(|_| stream(vec![text("a")], End::Hang)).await;
        let mut cfg = cfg(&server);
        cfg.idle_timeout = Duration::from_millis(200);
        let (events, err) = chat(cfg).await.unwrap();
        assert_eq!(events, vec![ev_text("a")]);
        assert_eq!(err, Some(LlmError::Timeout("idle")));
        assert_eq!(server.count(), 1);
    }

    #[tokio::test]
    async fn an_error_frame_mid_stream_ends_it() {
        let server = serve(|_| {
            stream(
                vec![
                    text("partial"),
                    chunk(json!({"error":{"message":"context length exceeded","type":"invalid_request_error"}})),
                    text("never"),
                    done(),
                ],
                End::Finish,
            )
        })
        .await;
        let (events, err) = chat(cfg(&server)).await.unwrap();
        assert_eq!(events, vec![ev_text("partial")]);
        assert_eq!(err, Some(LlmError::Api("context length exceeded".into())));
    }

    #[tokio::test]
    async fn an_error_frame_before_the_first_token_is_not_retried() {
        let server =
            serve(|_| stream(vec![role(), chunk(json!({"error":{"message":"bad model"}}))], End::Finish)).await;
        assert_eq!(chat(cfg(&server)).await.unwrap_err(), LlmError::Api("bad model".into()));
        assert_eq!(server.count(), 1);
    }

    #[tokio::test]
    async fn invalid_json_is_a_decode_error() {
        let server = serve(|_| stream(vec![text("a"), send("data: {nope\n\n")], End::Finish)).await;
        let (events, err) = chat(cfg(&server)).await.unwrap();
        assert_eq!(events, vec![ev_text("a")]);
        assert!(matches!(err, Some(LlmError::Decode(_))), "{err:?}");
    }

    #[tokio::test]
    async fn the_end_without_done_is_fine_after_a_finish_reason() {
        let server = serve(|_| stream(vec![text("a"), finish("stop")], End::Finish)).await;
        let (events, err) = chat(cfg(&server)).await.unwrap();
        assert_eq!(events, vec![ev_text("a"), LlmEvent::Finish { reason: "stop".into() }]);
        assert_eq!(err, None);
    }

    #[tokio::test]
    async fn the_end_without_done_or_finish_is_an_error() {
        let server = serve(|_| stream(vec![text("a")], End::Finish)).await;
        let (events, err) = chat(cfg(&server)).await.unwrap();
        assert_eq!(events, vec![ev_text("a")]);
        assert_eq!(err, Some(LlmError::Stream("stream ended before [DONE]".into())));
    }

    #[tokio::test]
    async fn a_last_frame_without_blank_line_still_counts() {
        let server = serve(|_| stream(vec![text("a"), send("data: [DONE]")], End::Finish)).await;
        let (events, err) = chat(cfg(&server)).await.unwrap();
        assert_eq!((events, err), (vec![ev_text("a")], None));
    }

    #[tokio::test]
    async fn done_without_events_is_an_empty_answer() {
        let server = serve(|_| stream(vec![role(), done()], End::Finish)).await;
        let (events, err) = chat(cfg(&server)).await.unwrap();
        assert_eq!((events, err), (vec![], None));
    }

    #[tokio::test]
    async fn a_json_200_is_not_a_stream() {
        let server = serve(|n| match n {
            0 => Reply::Status { code: 200, headers: vec![], body: r#"{"error":{"message":"quota"}}"#.into() },
            _ => Reply::Status { code: 200, headers: vec![], body: r#"{"choices":[]}"#.into() },
        })
        .await;
        assert_eq!(chat(cfg(&server)).await.unwrap_err(), LlmError::Api("quota".into()));
        assert!(matches!(chat(cfg(&server)).await.unwrap_err(), LlmError::Decode(_)));
        assert_eq!(server.count(), 2);
    }

    #[tokio::test]
    async fn an_unreachable_server_is_a_connect_error() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let cfg = OpenAiConfig {
            base_url: format!("http://{addr}/v1"),
            api_key: None,
            model: "m".into(),
            connect_timeout: Duration::from_secs(1),
            first_token_timeout: Duration::from_secs(1),
            idle_timeout: Duration::from_secs(1),
            max_retries: 0,
            max_tokens: None,
        };
        let err = chat(cfg).await.unwrap_err();
        assert!(matches!(err, LlmError::Connect(_)), "{err:?}");
        assert!(err.is_transient());
    }

    #[tokio::test]
    async fn dropping_the_stream_closes_the_connection() {
        let server = serve(|_| stream(vec![text("a")], End::Hang)).await;
        let client = OpenAiClient::new(cfg(&server));
        let mut s = client.stream_chat(request()).await.unwrap();
        assert_eq!(s.next().await, Some(Ok(ev_text("a"))));
        drop(s);
        // The server is parked reading the socket; it sees the close only if the
        // request was aborted. (A generous bound, only so a bug cannot hang the test.)
        tokio::time::timeout(Duration::from_secs(10), server.client_closes.notified())
            .await
            .expect("the connection was not closed");
    }

    #[test]
    fn config_from_llm_config_and_debug_redacts_the_key() {
        let c = LlmConfig {
            base_url: "http://x/v1".into(),
            api_key: Some("sk-secret".into()),
            model: "m".into(),
            connect_timeout: Duration::from_millis(1),
            first_token_timeout: Duration::from_millis(2),
            idle_timeout: Duration::from_millis(3),
            max_retries: 4,
            max_tokens: Some(5),
        };
        let o = OpenAiConfig::from(&c);
        assert_eq!(o.base_url, "http://x/v1");
        assert_eq!(o.api_key.as_deref(), Some("sk-secret"));
        assert_eq!(
            (o.first_token_timeout, o.idle_timeout, o.max_retries, o.max_tokens),
            (c.first_token_timeout, c.idle_timeout, 4, Some(5))
        );
        assert!(!format!("{o:?}").contains("sk-secret"));
        assert_eq!(OpenAiClient::new(o).url, "http://x/v1/chat/completions");
    }

    #[test]
    fn backoff_doubles_with_jitter_and_is_capped() {
        for _ in 0..100 {
            let d0 = backoff(0);
            assert!(d0 >= Duration::from_millis(100) && d0 <= Duration::from_millis(200), "{d0:?}");
            let d1 = backoff(1);
            assert!(d1 >= Duration::from_millis(200) && d1 <= Duration::from_millis(400), "{d1:?}");
            assert!(backoff(30) <= BACKOFF_CAP);
        }
    }

    #[test]
    fn retry_after_headers() {
        let mut h = HeaderMap::new();
        assert_eq!(retry_after(&h), None);
        h.insert("retry-after", "3".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_secs(3)));
        h.insert("retry-after-ms", "250".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_millis(250)));
        let mut h = HeaderMap::new();
        h.insert("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT".parse().unwrap());
        assert_eq!(retry_after(&h), None);
    }
}
