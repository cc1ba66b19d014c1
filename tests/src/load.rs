//! The load test (issue 30): `users` users at once, each running a
//! `turns`-turn conversation in one session against the stream function's
//! real handler over real HTTP (hyper on loopback, reqwest clients on tokio
//! tasks), with DynamoDB Local behind a fault proxy that throttles some
//! requests (the SDK's retries absorb them) and the scripted model answering
//! every turn with a tool call (`list_projects`) and then an echo of the
//! user's message. Mixed in: every `resume_every`-th turn the client drops
//! its stream after the first `text_delta` and resumes it
//! (`GET /sessions/{id}/stream`, `Last-Event-ID`); every `stop_every`-th turn
//! it presses Stop (`POST /sessions/{id}/stop`) after the first `text_delta`.
//!
//! Afterwards every conversation's stored log is checked: each turn's user
//! message exactly once and in order (0 lost, 0 duplicated), each answered
//! turn's answer the echo of its own message, nothing of another user's in
//! it (0 cross-user). Reported: throughput, first byte and pre-model
//! (request sent → the model has the request) percentiles, throttles
//! absorbed. `tests/tests/load.rs` runs it small; `scripts/load.sh` runs
//! N = 50 (docs/performance.md).

use crate::fault_proxy::{Action, Fault, FaultProxy, Op, Throttle, When};
use crate::{Reply, TestApp};
use shared::edge::stream::StreamRouter;
use shared::message::Role;
use shared::sse::{SseDecoder, StreamEvent};
use std::collections::HashMap;
use std::time::Duration;
use tokio::time::Instant;

#[derive(Debug, Clone)]
pub struct LoadConfig {
    pub users: usize,
    pub turns: usize,
    pub resume_every: usize,
    pub stop_every: usize,
    /// Requests the proxy answers with a throttling error (spread over the run).
    pub throttles: usize,
    /// Between the echo's words.
    pub word_gap: Duration,
}

impl LoadConfig {
    pub fn small() -> LoadConfig {
        LoadConfig {
            users: 4,
            turns: 3,
            resume_every: 2,
            stop_every: 3,
            throttles: 4,
            word_gap: Duration::from_millis(5),
        }
    }

    pub fn full() -> LoadConfig {
        LoadConfig {
            users: 50,
            turns: 10,
            resume_every: 4,
            stop_every: 7,
            throttles: 40,
            word_gap: Duration::from_millis(5),
        }
    }
}

/// What a turn was, as the client drove it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Plain,
    Resumed,
    Stopped,
}

/// One turn as the client saw it.
#[derive(Debug)]
struct Seen {
    sent: Instant,
    first_byte: Option<Duration>,
    done: bool,
    errors: Vec<String>,
}

/// Each user's session id and turns as the client saw them.
type Conversations = HashMap<usize, (Option<String>, Vec<(Kind, Seen)>)>;

#[derive(Debug, Default)]
pub struct LoadReport {
    pub turns: usize,
    pub wall: Duration,
    pub first_byte: Vec<Duration>,
    pub pre_model: Vec<Duration>,
    pub throttles_absorbed: usize,
    pub resumed: usize,
    pub stopped: usize,
    pub lost: usize,
    pub duplicated: usize,
    pub cross_user: usize,
    pub wrong_answer: usize,
    pub stream_errors: Vec<String>,
    pub problems: Vec<String>,
}

fn pct(v: &[Duration], p: f64) -> f64 {
    let mut v = v.to_vec();
    v.sort();
    if v.is_empty() {
        return f64::NAN;
    }
    let i = ((p / 100.0) * v.len() as f64).ceil() as usize;
    v[i.clamp(1, v.len()) - 1].as_secs_f64() * 1000.0
}

impl LoadReport {
    pub fn clean(&self) -> bool {
        self.lost == 0 && self.duplicated == 0 && self.cross_user == 0 && self.wrong_answer == 0
    }

    pub fn render(&self, cfg: &LoadConfig) -> String {
        let row = |name: &str, v: &[Duration]| {
            format!("| {name} | {} | {:.1} | {:.1} | {:.1} |\n", v.len(), pct(v, 50.0), pct(v, 95.0), pct(v, 99.0))
        };
        format!(
            "{} users × {} turns at once (every turn a tool call then the answer; every {}th turn resumed, every {}th stopped), \
             {} turns in {:.1} s: **{:.1} turns/s**; {} throttles injected and absorbed; {} resumed, {} stopped.\n\n\
             | ms | n | p50 | p95 | p99 |\n|---|--:|--:|--:|--:|\n{}{}\n\
             Log check: **{} lost, {} duplicated, {} cross-user**, {} answers not their turn's echo; stream errors: {:?}.\n",
            cfg.users,
            cfg.turns,
            cfg.resume_every,
            cfg.stop_every,
            self.turns,
            self.wall.as_secs_f64(),
            self.turns as f64 / self.wall.as_secs_f64().max(1e-9),
            self.throttles_absorbed,
            self.resumed,
            self.stopped,
            row("first byte (request sent → first body byte)", &self.first_byte),
            row("pre-model (request sent → the model has the request)", &self.pre_model),
            self.lost,
            self.duplicated,
            self.cross_user,
            self.wrong_answer,
            self.stream_errors,
        )
    }
}

/// The scripted model: a tool call first, then the echo of the user's message.
fn model(gap: Duration) -> Reply {
    Reply::dynamic(move |req| {
        let last = req["messages"].as_array().and_then(|m| m.last()).cloned().unwrap_or_default();
        match last["role"].as_str() {
            Some("tool") => Reply::Echo { gap },
            _ => Reply::tool_calls(&[("list_projects", serde_json::json!({}))]),
        }
    })
}

/// The message of `user`'s turn `i`: what the log check looks for.
fn message(user: usize, i: usize) -> String {
    format!("load-user-{user} turn-{i} says hello")
}

fn user_id(user: usize) -> String {
    format!("load-user-{user}")
}

/// Serves the stream function over HTTP on loopback.
async fn serve(app: shared::edge::stream::StreamApp) -> String {
    use http_body_util::BodyExt;
    let router = StreamRouter::new(app);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else { return };
            let router = router.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let router = router.clone();
                    async move {
                        let (parts, body) = req.into_parts();
                        let bytes = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
                        let req = http::Request::from_parts(parts, lambda_http::Body::Binary(bytes.to_vec()));
                        Ok::<_, std::convert::Infallible>(router.handle(lambda_http::Request::from(req)).await)
                    }
                });
                let io = hyper_util::rt::TokioIo::new(tcp);
                let _ = hyper::server::conn::http1::Builder::new().serve_connection(io, svc).await;
            });
        }
    });
    format!("http://{addr}/")
}

/// Runs the load test; the report says what was found.
pub async fn run(cfg: LoadConfig) -> LoadReport {
    let proxy = FaultProxy::start().await;
    let t = TestApp::with_dynamo_client(proxy.client().await, |c| {
        // The product's own budgets (each user's turns run one at a time).
        c.budgets = shared::config::BudgetConfig::from_env().expect("budgets");
    })
    .await;
    t.llm.set_default(model(cfg.word_gap));
    // Throttles spread over the run, on the turn's hottest requests.
    let total = cfg.users * cfg.turns;
    for k in 0..cfg.throttles {
        let op = if k % 2 == 0 { Op::Query } else { Op::UpdateItem };
        let nth = 3 + (k / 2) * (total * 2 / cfg.throttles.max(1)).max(1);
        proxy.inject(Fault::on(op).when(When::Nth(nth)).then(Action::Throttle(Throttle::ThrottlingException)));
    }
    let url = serve(t.app.clone()).await;
    let mark = proxy.mark();
    let started = Instant::now();
    let tasks: Vec<_> = (0..cfg.users).map(|u| tokio::spawn(conversation(url.clone(), u, cfg.clone()))).collect();
    let mut seen: Conversations = HashMap::new();
    for (u, task) in tasks.into_iter().enumerate() {
        seen.insert(u, task.await.expect("a conversation task does not panic"));
    }
    let wall = started.elapsed();
    let throttles_absorbed = proxy.since(mark).iter().filter(|s| s.fault.is_some()).count();
    let mut report = LoadReport { turns: total, wall, throttles_absorbed, ..Default::default() };
    pre_model(&t, &seen, &mut report);
    check_logs(&t, &cfg, &seen, &mut report).await;
    report
}

/// Request sent → the model has the request, per turn (its first model request).
fn pre_model(t: &TestApp, seen: &Conversations, report: &mut LoadReport) {
    let mut first: HashMap<String, Instant> = HashMap::new();
    for (req, at) in t.llm.requests().iter().zip(t.llm.arrivals()) {
        let user_msgs = req["messages"].as_array().cloned().unwrap_or_default();
        let Some(last_user) = user_msgs.iter().rev().find(|m| m["role"] == "user") else { continue };
        let text = last_user["content"].as_str().unwrap_or("").to_string();
        first.entry(text).or_insert(at);
    }
    for (u, (_, turns)) in seen {
        for (i, (_, s)) in turns.iter().enumerate() {
            report.first_byte.extend(s.first_byte);
            if let Some(at) = first.get(&message(*u, i)) {
                report.pre_model.push(at.saturating_duration_since(s.sent));
            }
        }
    }
}

/// One user's conversation: its session id and each turn as seen.
async fn conversation(url: String, user: usize, cfg: LoadConfig) -> (Option<String>, Vec<(Kind, Seen)>) {
    let client = reqwest::Client::builder().no_proxy().build().expect("client");
    let token = crate::token(&user_id(user));
    let mut session: Option<String> = None;
    let mut out = Vec::new();
    for i in 0..cfg.turns {
        let kind = match i + 1 {
            n if cfg.stop_every > 0 && n % cfg.stop_every == 0 => Kind::Stopped,
            n if cfg.resume_every > 0 && n % cfg.resume_every == 0 => Kind::Resumed,
            _ => Kind::Plain,
        };
        let mut body = serde_json::json!({"message": message(user, i), "context_type": "global"});
        if let Some(s) = &session {
            body["session_id"] = serde_json::json!(s);
        }
        let seen = turn(&client, &url, &token, &body, kind, &mut session).await;
        out.push((kind, seen));
    }
    (session, out)
}

/// One turn, driven as `kind` says.
async fn turn(
    client: &reqwest::Client,
    url: &str,
    token: &str,
    body: &serde_json::Value,
    kind: Kind,
    session: &mut Option<String>,
) -> Seen {
    let sent = Instant::now();
    let mut seen = Seen { sent, first_byte: None, done: false, errors: Vec::new() };
    let resp = match client.post(url).bearer_auth(token).json(body).send().await {
        Ok(r) if r.status() == 200 => r,
        Ok(r) => {
            seen.errors.push(format!("status {}", r.status()));
            return seen;
        }
        Err(e) => {
            seen.errors.push(e.to_string());
            return seen;
        }
    };
    let until_text = kind != Kind::Plain;
    let last = read(resp, &mut seen, session, until_text).await;
    if !until_text || seen.done {
        return seen;
    }
    let Some(sid) = session.clone() else { return seen };
    if kind == Kind::Stopped {
        let stop = client.post(format!("{url}sessions/{sid}/stop")).bearer_auth(token).json(&serde_json::json!({}));
        if let Err(e) = stop.send().await {
            seen.errors.push(format!("stop: {e}"));
        }
    }
    // The stream was dropped after its first text: resume it to its end.
    let resumed = client
        .get(format!("{url}sessions/{sid}/stream"))
        .bearer_auth(token)
        .header("last-event-id", last.to_string())
        .send()
        .await;
    match resumed {
        Ok(r) if r.status() == 200 => {
            read(r, &mut seen, session, false).await;
        }
        Ok(r) if r.status() == 204 => seen.done = true,
        Ok(r) => seen.errors.push(format!("resume status {}", r.status())),
        Err(e) => seen.errors.push(format!("resume: {e}")),
    }
    seen
}

/// Reads a stream to `done` (or to its first `text_delta` when
/// `until_text`); returns the last frame id read.
async fn read(mut resp: reqwest::Response, seen: &mut Seen, session: &mut Option<String>, until_text: bool) -> u64 {
    let mut dec = SseDecoder::new();
    let mut last = 0;
    loop {
        let chunk = match tokio::time::timeout(Duration::from_secs(60), resp.chunk()).await {
            Ok(Ok(Some(c))) => c,
            Ok(Ok(None)) => return last,
            Ok(Err(e)) => {
                seen.errors.push(e.to_string());
                return last;
            }
            Err(_) => {
                seen.errors.push("no frame in 60 s".into());
                return last;
            }
        };
        seen.first_byte.get_or_insert(seen.sent.elapsed());
        let Ok(frames) = dec.feed(&chunk) else {
            seen.errors.push("undecodable stream".into());
            return last;
        };
        for f in frames {
            last = f.id.as_deref().and_then(|i| i.parse().ok()).unwrap_or(last);
            match serde_json::from_str::<StreamEvent>(&f.data) {
                Ok(StreamEvent::Session { session: s }) => *session = Some(s.id.to_string()),
                Ok(StreamEvent::Error { code, .. }) => seen.errors.push(code),
                Ok(StreamEvent::Done { .. }) => {
                    seen.done = true;
                    return last;
                }
                Ok(StreamEvent::TextDelta { .. }) if until_text => return last,
                _ => {}
            }
        }
    }
}

/// The stored logs against what was sent.
async fn check_logs(t: &TestApp, cfg: &LoadConfig, seen: &Conversations, report: &mut LoadReport) {
    use shared::session::store::{MessagesFrom, SessionLog};
    let store = t.store();
    for (u, (sid, turns)) in seen {
        report.resumed += turns.iter().filter(|(k, _)| *k == Kind::Resumed).count();
        report.stopped += turns.iter().filter(|(k, _)| *k == Kind::Stopped).count();
        for (i, (_, s)) in turns.iter().enumerate() {
            report.stream_errors.extend(s.errors.iter().map(|e| format!("user {u} turn {i}: {e}")));
            if !s.done {
                report.problems.push(format!("user {u} turn {i}: no done"));
            }
        }
        let Some(sid) = sid.as_ref().and_then(|s| shared::ids::SessionId::parse(s).ok()) else {
            report.lost += cfg.turns;
            continue;
        };
        let user = shared::ids::UserId::parse(user_id(*u)).expect("user id");
        let log = store.messages_page(&user, &sid, MessagesFrom::After(0), 1000).await.unwrap_or_default();
        check_log(*u, cfg, turns, &log, report);
    }
}

/// One conversation's log: each user message once, in order; each answer
/// of a turn that ran to its end the echo of its own message; no other
/// user's words anywhere.
fn check_log(
    u: usize,
    cfg: &LoadConfig,
    turns: &[(Kind, Seen)],
    log: &[shared::message::StoredMessage],
    report: &mut LoadReport,
) {
    let own = format!("load-user-{u} ");
    for m in log {
        let text = m.content.clone().unwrap_or_default();
        if text.contains("load-user-") && !text.contains(&own) {
            report.cross_user += 1;
        }
    }
    let users: Vec<&str> = log.iter().filter(|m| m.role == Role::User).filter_map(|m| m.content.as_deref()).collect();
    for i in 0..cfg.turns {
        let want = message(u, i);
        match users.iter().filter(|c| **c == want).count() {
            0 => report.lost += 1,
            1 => {}
            n => report.duplicated += n - 1,
        }
    }
    let expected: Vec<String> = (0..cfg.turns).map(|i| message(u, i)).collect();
    if users.iter().map(|s| s.to_string()).collect::<Vec<_>>() != expected {
        report.problems.push(format!("user {u}: user messages out of order or extra: {users:?}"));
    }
    // Each turn ran to its end (not stopped): its last assistant text is the echo.
    let mut by_turn: Vec<Vec<&shared::message::StoredMessage>> = Vec::new();
    for m in log {
        if m.role == Role::User {
            by_turn.push(Vec::new());
        } else if let Some(cur) = by_turn.last_mut() {
            cur.push(m);
        }
    }
    for (i, (kind, _)) in turns.iter().enumerate() {
        if *kind == Kind::Stopped {
            continue;
        }
        let answer = by_turn.get(i).and_then(|ms| ms.iter().rev().find(|m| m.role == Role::Assistant));
        let text = answer.and_then(|m| m.content.clone()).unwrap_or_default();
        if text.trim() != format!("echo: {}", message(u, i)) {
            report.wrong_answer += 1;
            report.problems.push(format!("user {u} turn {i}: answer {text:?}"));
        }
    }
}
