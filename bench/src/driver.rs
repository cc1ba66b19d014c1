//! The client side of a benchmark: one user posting turns into one session
//! over a real HTTP connection (kept alive, so every measured turn is warm),
//! reading the SSE body as it arrives and timing each frame against the
//! scripted model's own write times.
//!
//! Every time is an `Instant` of this process: the scripted model runs here
//! too, so "the model wrote token k" and "the client received frame j" are on
//! the same monotonic clock, whether the function runs in this process
//! (adapter) or in its own (cargo lambda).

use crate::adapter::Probes;
use shared::sse::{SseDecoder, StreamEvent};
use std::time::Duration;
use tests::ScriptedLlm;
use tokio::time::Instant;

/// What one turn cost, as the client saw it.
#[derive(Debug, Clone)]
pub struct TurnTiming {
    /// From just before the request was sent to the first body byte.
    pub send_to_first_byte: Duration,
    /// From the handler's entry to the first body byte at the client (adapter only).
    pub entry_to_first_byte: Option<Duration>,
    /// From the handler's entry to hyper taking the first frame (adapter only).
    pub entry_to_first_frame: Option<Duration>,
    /// First `text_delta` at the client minus the model's first token write.
    pub server_ttft: Duration,
    /// `done` at the client minus the model's last token write.
    pub done_after_last_token: Duration,
    /// `done` at the client minus the last `text_delta` at the client.
    pub done_after_last_delta: Duration,
    /// |client gap − model gap| for each pair of consecutive text frames.
    pub spacing_errors: Vec<Duration>,
    /// For each text frame, (model wrote its last piece, client received it),
    /// both from the model's first token write.
    pub arrivals: Vec<(Duration, Duration)>,
    pub text_frames: usize,
    pub tokens: usize,
}

pub struct Driver {
    pub client: reqwest::Client,
    pub url: String,
    pub token: String,
    pub llm: ScriptedLlm,
    /// The pieces the scripted model answers with, in order.
    pub pieces: Vec<String>,
    /// Set by the first turn; every later turn continues the same session.
    pub session_id: Option<String>,
    pub probes: Option<Probes>,
    pub turns_done: u64,
}

impl Driver {
    pub fn new(url: String, user: &str, llm: ScriptedLlm, pieces: Vec<String>, probes: Option<Probes>) -> Driver {
        let client = reqwest::Client::builder()
            // Loopback only: a proxy from the environment would measure itself.
            .no_proxy()
            .tcp_nodelay(true)
            .pool_max_idle_per_host(1)
            .build()
            .expect("a plain reqwest client builds");
        Driver {
            client,
            url,
            token: tests::token(user),
            llm,
            pieces,
            session_id: None,
            probes,
            turns_done: 0,
        }
    }

    /// Posts one turn and reads it to its `done`. `timeout` bounds the whole
    /// turn (the first one under cargo lambda may include a build).
    pub async fn turn(&mut self, timeout: Duration) -> Result<TurnTiming, String> {
        tokio::time::timeout(timeout, self.turn_inner())
            .await
            .map_err(|_| format!("turn {} did not finish within {timeout:?}", self.turns_done + 1))?
    }

    async fn turn_inner(&mut self) -> Result<TurnTiming, String> {
        self.turns_done += 1;
        let turn_no = self.turns_done;
        let mut body = serde_json::json!({"message": format!("benchmark turn {turn_no}"), "context_type": "global"});
        if let Some(s) = &self.session_id {
            body["session_id"] = serde_json::Value::String(s.clone());
        }
        let sent_before = self.llm.sent().len();

        let t0 = Instant::now();
        let mut resp = self
            .client
            .post(&self.url)
            .header("authorization", format!("Bearer {}", self.token))
            .header("x-bench-turn", turn_no.to_string())
            .json(&body)
            .send()
            .await
            .map_err(|e| format!("request failed: {e}"))?;
        if resp.status() != 200 {
            let status = resp.status();
            let text = resp.text().await.unwrap_or_default();
            return Err(format!("status {status}: {text}"));
        }
        let mut dec = SseDecoder::new();
        let mut first_byte = None;
        let mut events: Vec<(Instant, StreamEvent)> = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(|e| format!("body: {e}"))? {
            let now = Instant::now();
            first_byte.get_or_insert(now);
            for f in dec.feed(&chunk).map_err(|e| format!("SSE: {e}"))? {
                let ev: StreamEvent = serde_json::from_str(&f.data).map_err(|e| format!("event {f:?}: {e}"))?;
                events.push((now, ev));
            }
        }
        let first_byte = first_byte.ok_or("an empty body")?;

        // The model's side of this turn.
        let sent: Vec<(Instant, String)> = self.llm.sent().split_off(sent_before);
        let expected: String = self.pieces.concat();
        let model_text: String = sent.iter().map(|(_, t)| t.as_str()).collect();
        if model_text != expected {
            return Err(format!("the model sent {} pieces, not the scripted {}", sent.len(), self.pieces.len()));
        }

        let kinds: Vec<&str> = events.iter().map(|(_, e)| e.kind()).collect();
        let Some((done_at, StreamEvent::Done { reason, .. })) = events.last() else {
            return Err(format!("the stream did not end with done: {kinds:?}"));
        };
        if *reason != shared::sse::DoneReason::Complete {
            return Err(format!("done with {reason:?}: {:?}", events.iter().rev().nth(1)));
        }
        if self.session_id.is_none() {
            self.session_id = events.iter().find_map(|(_, e)| match e {
                StreamEvent::Session { session } => Some(session.id.to_string()),
                _ => None,
            });
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
        for (_, p) in &sent {
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

        let (entry_to_first_byte, entry_to_first_frame) = match self.probes.as_ref().and_then(|p| p.take(turn_no)) {
            Some(p) => (
                Some(first_byte.saturating_duration_since(p.handler_entry)),
                p.first_frame.map(|f| f.saturating_duration_since(p.handler_entry)),
            ),
            None => (None, None),
        };
        let origin = sent[0].0;
        let arrivals = mapped
            .iter()
            .map(|(client, model)| (model.saturating_duration_since(origin), client.saturating_duration_since(origin)))
            .collect();
        let (last_delta, _) = texts.last().ok_or("no text_delta")?;
        Ok(TurnTiming {
            send_to_first_byte: first_byte - t0,
            entry_to_first_byte,
            entry_to_first_frame,
            server_ttft: texts[0].0.saturating_duration_since(sent[0].0),
            done_after_last_token: done_at.saturating_duration_since(sent[sent.len() - 1].0),
            done_after_last_delta: done_at.saturating_duration_since(*last_delta),
            spacing_errors,
            arrivals,
            text_frames: texts.len(),
            tokens: sent.len(),
        })
    }
}

/// The scripted answer: `n` short word pieces, about the size of real tokens.
pub fn pieces(n: usize) -> Vec<String> {
    const WORDS: [&str; 8] = ["The ", "answer ", "is ", "a ", "stream ", "of ", "small ", "tokens, "];
    (0..n).map(|i| WORDS[i % WORDS.len()].to_string()).collect()
}
