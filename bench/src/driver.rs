//! The client side of a benchmark: one user posting turns into one session,
//! reading the SSE body as it arrives and timing each frame against the
//! scripted model's own write times.
//!
//! Two ways in:
//! - [`Transport::Http`]: a real HTTP client on a kept-alive loopback
//!   connection (the adapter, `cargo lambda watch`);
//! - [`Transport::Runtime`]: the invocation is queued on a Runtime API
//!   stand-in in this process and the function's streamed response is read
//!   as it reaches it, which is where Lambda's own front end would take it.
//!
//! Every time is an `Instant` of this process: the scripted model runs here
//! too, so "the model wrote token k" and "frame j arrived" are on the same
//! monotonic clock, whether the function runs in this process or its own.

use crate::adapter::Probes;
use bytes::Bytes;
use shared::sse::{DoneReason, SseDecoder, StreamEvent};
use std::time::Duration;
use tests::runtime_api::{function_url_post, FakeRuntimeApi};
use tests::ScriptedLlm;
use tokio::time::Instant;

/// What one turn cost.
#[derive(Debug, Clone)]
pub struct TurnTiming {
    /// From just before the request was sent (or the invocation queued) to
    /// the response head: HTTP headers, or the runtime's prelude.
    pub send_to_head: Duration,
    /// From just before the request was sent (or the invocation queued) to
    /// the first SSE byte.
    pub send_to_first_byte: Duration,
    /// From the handler's entry to the first SSE byte at the client (adapter only).
    pub entry_to_first_byte: Option<Duration>,
    /// From the handler's entry to its return (adapter only).
    pub entry_to_return: Option<Duration>,
    /// From the handler's entry to hyper taking the first frame (adapter only).
    pub entry_to_first_frame: Option<Duration>,
    /// First `text_delta` at the client minus the model's first token write.
    pub server_ttft: Duration,
    /// `done` at the client minus the model's last token write.
    pub done_after_last_token: Duration,
    /// `done` at the client minus the last `text_delta` at the client.
    pub done_after_last_delta: Duration,
    /// When the model wrote its last token and the client had `done`.
    pub last_token_at: Instant,
    pub done_at: Instant,
    /// When the request was sent (or the invocation queued).
    pub sent_at: Instant,
    /// When the handler was entered (adapter only).
    pub handler_entry: Option<Instant>,
    /// When the scripted model had the turn's first request.
    pub model_received: Option<Instant>,
    /// When the model wrote its first token, and the client had the first `text_delta`.
    pub first_token_at: Instant,
    pub first_delta_at: Instant,
    /// |client gap − model gap| for each pair of consecutive text frames.
    pub spacing_errors: Vec<Duration>,
    /// For each text frame, (model wrote its last piece, client received it),
    /// both from the model's first token write.
    pub arrivals: Vec<(Duration, Duration)>,
    pub text_frames: usize,
    pub tokens: usize,
}

pub enum Transport {
    Http { client: reqwest::Client, url: String, probes: Option<Probes> },
    Runtime { api: FakeRuntimeApi },
}

pub struct Driver {
    pub transport: Transport,
    pub token: String,
    pub llm: ScriptedLlm,
    /// The pieces the scripted model answers with, in order.
    pub pieces: Vec<String>,
    /// Set by the first turn; every later turn continues the same session
    /// (unless `new_sessions`).
    pub session_id: Option<String>,
    /// Every turn opens a new session.
    pub new_sessions: bool,
    pub turns_done: u64,
}

/// The raw observations of one turn, before analysis.
struct Seen {
    t0: Instant,
    head: Instant,
    first_byte: Instant,
    events: Vec<(Instant, StreamEvent)>,
}

impl Driver {
    pub fn http(url: String, user: &str, llm: ScriptedLlm, pieces: Vec<String>, probes: Option<Probes>) -> Driver {
        let client = reqwest::Client::builder()
            // Loopback only: a proxy from the environment would measure itself.
            .no_proxy()
            .tcp_nodelay(true)
            .pool_max_idle_per_host(1)
            .build()
            .expect("a plain reqwest client builds");
        Driver::new(Transport::Http { client, url, probes }, user, llm, pieces)
    }

    pub fn runtime(api: FakeRuntimeApi, user: &str, llm: ScriptedLlm, pieces: Vec<String>) -> Driver {
        Driver::new(Transport::Runtime { api }, user, llm, pieces)
    }

    fn new(transport: Transport, user: &str, llm: ScriptedLlm, pieces: Vec<String>) -> Driver {
        Driver {
            transport,
            token: tests::token(user),
            llm,
            pieces,
            session_id: None,
            new_sessions: false,
            turns_done: 0,
        }
    }

    /// Runs one turn to its `done`. `timeout` bounds the whole turn (the first
    /// one under cargo lambda may include a build).
    pub async fn turn(&mut self, timeout: Duration) -> Result<TurnTiming, String> {
        tokio::time::timeout(timeout, self.turn_inner())
            .await
            .map_err(|_| format!("turn {} did not finish within {timeout:?}", self.turns_done + 1))?
    }

    async fn turn_inner(&mut self) -> Result<TurnTiming, String> {
        self.turns_done += 1;
        let turn_no = self.turns_done;
        let mut body = serde_json::json!({"message": format!("benchmark turn {turn_no}"), "context_type": "global"});
        if let Some(s) = self.session_id.as_ref().filter(|_| !self.new_sessions) {
            body["session_id"] = serde_json::Value::String(s.clone());
        }
        let sent_before = self.llm.sent().len();
        let arrived_before = self.llm.arrivals().len();
        let seen = match &mut self.transport {
            Transport::Http { client, url, .. } => http_turn(client, url, &self.token, turn_no, &body).await?,
            Transport::Runtime { api } => runtime_turn(api, &self.token, turn_no, &body).await?,
        };
        let probe = match &self.transport {
            Transport::Http { probes: Some(p), .. } => p.take(turn_no),
            _ => None,
        };
        let sent: Vec<(Instant, String)> = self.llm.sent().split_off(sent_before);
        if self.session_id.is_none() {
            self.session_id = seen.events.iter().find_map(|(_, e)| match e {
                StreamEvent::Session { session } => Some(session.id.to_string()),
                _ => None,
            });
        }
        let mut t = analyze(&seen, &sent, &self.pieces)?;
        t.model_received = self.llm.arrivals().get(arrived_before).copied();
        if let Some(p) = probe {
            t.handler_entry = Some(p.handler_entry);
            t.entry_to_first_byte = Some(seen.first_byte.saturating_duration_since(p.handler_entry));
            t.entry_to_return = Some(p.handler_return.saturating_duration_since(p.handler_entry));
            t.entry_to_first_frame = p.first_frame.map(|f| f.saturating_duration_since(p.handler_entry));
        }
        Ok(t)
    }
}

async fn http_turn(
    client: &reqwest::Client,
    url: &str,
    token: &str,
    turn_no: u64,
    body: &serde_json::Value,
) -> Result<Seen, String> {
    let t0 = Instant::now();
    let mut resp = client
        .post(url)
        .header("authorization", format!("Bearer {token}"))
        .header("x-bench-turn", turn_no.to_string())
        .json(body)
        .send()
        .await
        .map_err(|e| format!("request failed: {e}"))?;
    let head = Instant::now();
    if resp.status() != 200 {
        let status = resp.status();
        let text = resp.text().await.unwrap_or_default();
        return Err(format!("status {status}: {text}"));
    }
    let mut chunks = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(|e| format!("body: {e}"))? {
        chunks.push((Instant::now(), chunk));
    }
    seen(t0, head, &chunks)
}

async fn runtime_turn(
    api: &mut FakeRuntimeApi,
    token: &str,
    turn_no: u64,
    body: &serde_json::Value,
) -> Result<Seen, String> {
    let id = format!("bench-{turn_no}");
    let event = function_url_post(token, body);
    let t0 = Instant::now();
    api.invoke(&id, event);
    let received = api.responses.recv().await.ok_or("the Runtime API stand-in stopped")?;
    if received.request_id != id {
        return Err(format!("a response for {} while waiting for {id}", received.request_id));
    }
    let head = received.chunks.first().map(|(t, _)| *t).ok_or("an empty response")?;
    seen(t0, head, &received.body_with_times())
}

fn seen(t0: Instant, head: Instant, chunks: &[(Instant, Bytes)]) -> Result<Seen, String> {
    let mut dec = SseDecoder::new();
    let mut events = Vec::new();
    for (at, chunk) in chunks {
        for f in dec.feed(chunk).map_err(|e| format!("SSE: {e}"))? {
            let ev: StreamEvent = serde_json::from_str(&f.data).map_err(|e| format!("event {f:?}: {e}"))?;
            events.push((*at, ev));
        }
    }
    let first_byte = chunks.iter().find(|(_, c)| !c.is_empty()).map(|(t, _)| *t).ok_or("an empty body")?;
    Ok(Seen { t0, head, first_byte, events })
}

/// Checks the turn (complete, the model's text in order) and times it.
fn analyze(seen: &Seen, sent: &[(Instant, String)], pieces: &[String]) -> Result<TurnTiming, String> {
    let expected: String = pieces.concat();
    let model_text: String = sent.iter().map(|(_, t)| t.as_str()).collect();
    if model_text != expected {
        return Err(format!("the model sent {} pieces, not the scripted {}", sent.len(), pieces.len()));
    }
    let events = &seen.events;
    let kinds: Vec<&str> = events.iter().map(|(_, e)| e.kind()).collect();
    let Some((done_at, StreamEvent::Done { reason, .. })) = events.last() else {
        return Err(format!("the stream did not end with done: {kinds:?}"));
    };
    if *reason != DoneReason::Complete {
        return Err(format!("done with {reason:?}: {:?}", events.iter().rev().nth(1).map(|(_, e)| e)));
    }
    let texts: Vec<(Instant, &str)> = events
        .iter()
        .filter_map(|(t, e)| match e {
            StreamEvent::TextDelta { content } => Some((*t, content.as_str())),
            _ => None,
        })
        .collect();
    let client_text: String = texts.iter().map(|(_, t)| *t).collect();
    if client_text != expected {
        return Err("the client's text is not the model's".into());
    }

    // Map each text frame to the model piece it ends with: the sink may
    // coalesce pieces when the client is behind, and a coalesced frame is
    // on time when it leaves with its last piece.
    let mut ends = Vec::with_capacity(sent.len());
    let mut acc = 0;
    for (_, p) in sent {
        acc += p.len();
        ends.push(acc);
    }
    let mut mapped: Vec<(Instant, Instant)> = Vec::with_capacity(texts.len());
    let mut at = 0;
    for (arrival, t) in &texts {
        at += t.len();
        if let Ok(k) = ends.binary_search(&at) {
            mapped.push((*arrival, sent[k].0));
        }
    }
    let spacing_errors = mapped
        .windows(2)
        .map(|w| {
            let client = w[1].0 - w[0].0;
            let model = w[1].1 - w[0].1;
            client.abs_diff(model)
        })
        .collect();
    let origin = sent[0].0;
    let arrivals = mapped
        .iter()
        .map(|(client, model)| (model.saturating_duration_since(origin), client.saturating_duration_since(origin)))
        .collect();
    let (last_delta, _) = texts.last().ok_or("no text_delta")?;
    Ok(TurnTiming {
        send_to_head: seen.head.saturating_duration_since(seen.t0),
        send_to_first_byte: seen.first_byte.saturating_duration_since(seen.t0),
        entry_to_first_byte: None,
        entry_to_return: None,
        entry_to_first_frame: None,
        server_ttft: texts[0].0.saturating_duration_since(origin),
        done_after_last_token: done_at.saturating_duration_since(sent[sent.len() - 1].0),
        done_after_last_delta: done_at.saturating_duration_since(*last_delta),
        last_token_at: sent[sent.len() - 1].0,
        done_at: *done_at,
        sent_at: seen.t0,
        handler_entry: None,
        model_received: None,
        first_token_at: origin,
        first_delta_at: texts[0].0,
        spacing_errors,
        arrivals,
        text_frames: texts.len(),
        tokens: sent.len(),
    })
}

/// The scripted answer: `n` short word pieces, about the size of real tokens.
pub fn pieces(n: usize) -> Vec<String> {
    const WORDS: [&str; 8] = ["The ", "answer ", "is ", "a ", "stream ", "of ", "small ", "tokens, "];
    (0..n).map(|i| WORDS[i % WORDS.len()].to_string()).collect()
}

/// The first byte after the handler's entry, for `n` requests to the floor
/// adapter (`crate::adapter::Handler::Floor`) with the same client settings as
/// [`Driver::http`]: what the harness itself adds to that figure.
pub async fn floor_first_byte(url: &str, probes: &Probes, n: usize) -> Result<Vec<Duration>, String> {
    let client =
        reqwest::Client::builder().no_proxy().tcp_nodelay(true).pool_max_idle_per_host(1).build().expect("client");
    let mut out = Vec::with_capacity(n);
    for i in 0..n as u64 + 3 {
        let mut resp = client
            .post(url)
            .header("x-bench-turn", i.to_string())
            .body("{}")
            .send()
            .await
            .map_err(|e| format!("floor request: {e}"))?;
        let mut first = None;
        while let Some(chunk) = resp.chunk().await.map_err(|e| format!("floor body: {e}"))? {
            if first.is_none() && !chunk.is_empty() {
                first = Some(Instant::now());
            }
        }
        let entry = probes.take(i).ok_or("the floor adapter saw no request")?.handler_entry;
        // The first three warm the connection up, like the turns' warm-up.
        if i >= 3 {
            out.push(first.ok_or("an empty floor body")?.saturating_duration_since(entry));
        }
    }
    Ok(out)
}
