//! A fault-injecting HTTP proxy in front of DynamoDB Local.
//!
//! It listens on `127.0.0.1:0` and forwards every request to
//! [`crate::dynamo_endpoint`] unchanged, except where a [`Fault`] says
//! otherwise. A fault matches on the operation (the `X-Amz-Target` header,
//! e.g. `DynamoDB_20120810.TransactWriteItems`), optionally on a piece of the
//! request body (to tell one `UpdateItem` from another: see [`TurnWrite`]), and
//! and on which matching request it is (the n-th, the first n, or every one). Its
//! action is what DynamoDB (or the network) would do:
//! - [`Action::Throttle`]: HTTP 400 with the body and `x-amzn-ErrorType` that
//!   DynamoDB sends for `ThrottlingException` /
//!   `ProvisionedThroughputExceededException` (nothing applied);
//! - [`Action::ServerError`]: HTTP 500 `InternalServerError` (nothing applied);
//! - [`Action::LostResponse`]: the request is forwarded and applied, then the
//!   client gets a 500 or a dropped connection, so the SDK retries a write
//!   that in fact happened;
//! - [`Action::Delay`]: a pause before forwarding;
//! - [`Action::Hold`]: held before forwarding until [`FaultProxy::release`]
//!   (for "X happens before Y is answered", without a clock).
//!
//! Every request is recorded (operation, body, the fault applied), so tests
//! can count requests per operation and check whose partitions were addressed.
//! [`FaultProxy::client`] builds the SDK client the way production does
//! (`aws_config` defaults: standard retry mode, 3 attempts), so tests see what
//! production would.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A DynamoDB operation, as named by the `X-Amz-Target` header.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Op {
    GetItem,
    PutItem,
    UpdateItem,
    DeleteItem,
    Query,
    Scan,
    BatchWriteItem,
    BatchGetItem,
    TransactWriteItems,
    TransactGetItems,
    Other(String),
}

impl Op {
    /// From `X-Amz-Target` (`DynamoDB_20120810.<Operation>`).
    pub fn from_target(target: &str) -> Op {
        match target.rsplit('.').next().unwrap_or(target) {
            "GetItem" => Op::GetItem,
            "PutItem" => Op::PutItem,
            "UpdateItem" => Op::UpdateItem,
            "DeleteItem" => Op::DeleteItem,
            "Query" => Op::Query,
            "Scan" => Op::Scan,
            "BatchWriteItem" => Op::BatchWriteItem,
            "BatchGetItem" => Op::BatchGetItem,
            "TransactWriteItems" => Op::TransactWriteItems,
            "TransactGetItems" => Op::TransactGetItems,
            other => Op::Other(other.to_string()),
        }
    }

    /// Whether the operation changes the table.
    pub fn is_write(&self) -> bool {
        matches!(self, Op::PutItem | Op::UpdateItem | Op::DeleteItem | Op::BatchWriteItem | Op::TransactWriteItems)
    }
}

/// The writes of one turn (docs of `shared::store`), each told apart by a piece
/// of its request body: the update expression the store sends. A fault on one
/// that never fires fails the test ([`FaultProxy::fired`]), so a changed
/// expression cannot make a row pass without its fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnWrite {
    /// `UpdateItem` taking the lease of an existing session.
    Lease,
    /// `PutItem`: the user message of a turn whose client named no
    /// `stream_run_id` (its start is two plain writes: `dynamo::plain`).
    StartMessage,
    /// `UpdateItem`: that start's session write (count, scope, title).
    Start,
    /// `UpdateItem`: a tool round's session write (its count), after the
    /// round's messages' plain `PutItem`s (`dynamo::plain`).
    ToolRound,
    /// `PutItem`: an assistant's message: the turn's last (and a tool
    /// round's call, which goes before).
    FinishMessage,
    /// `UpdateItem`: the end's session write (count, tokens, lease release).
    Finish,
}

impl TurnWrite {
    pub fn op(self) -> Op {
        match self {
            TurnWrite::Lease | TurnWrite::Start | TurnWrite::ToolRound | TurnWrite::Finish => Op::UpdateItem,
            TurnWrite::StartMessage | TurnWrite::FinishMessage => Op::PutItem,
        }
    }

    /// A piece of the JSON request body that only this write has.
    pub fn marker(self) -> &'static str {
        match self {
            TurnWrite::Lease => "SET lease_turn = :t, lease_until = :u",
            TurnWrite::StartMessage => "\"role\":{\"S\":\"user\"}",
            TurnWrite::Start => "message_count <= :count",
            TurnWrite::ToolRound => "\"SET message_count = :last\"",
            TurnWrite::FinishMessage => "\"role\":{\"S\":\"assistant\"}",
            TurnWrite::Finish => "REMOVE lease_turn, lease_until, stop_turn",
        }
    }
}

/// Which of the matching requests a fault applies to (1-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    Nth(usize),
    FirstN(usize),
    Every,
}

impl When {
    fn applies(self, occurrence: usize) -> bool {
        match self {
            When::Nth(n) => occurrence == n,
            When::FirstN(n) => occurrence <= n,
            When::Every => true,
        }
    }
}

/// The throttling errors DynamoDB sends (both retried by the SDK as throttling).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Throttle {
    ThrottlingException,
    ProvisionedThroughputExceeded,
}

/// How a response is lost after DynamoDB applied the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lost {
    /// The client gets HTTP 500 `InternalServerError`.
    Answer500,
    /// The connection is closed without a response.
    DropConnection,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Throttle(Throttle),
    ServerError,
    LostResponse(Lost),
    Delay(Duration),
    /// Held before forwarding until [`FaultProxy::release`].
    Hold,
}

/// One injectable fault: on which requests, and what happens to them.
#[derive(Debug, Clone, PartialEq)]
pub struct Fault {
    pub op: Op,
    /// Pieces the request body must all contain.
    pub body_contains: Vec<String>,
    pub when: When,
    pub action: Action,
}

impl Fault {
    /// On every request of `op`, with [`Action::ServerError`] until told otherwise.
    pub fn on(op: Op) -> Fault {
        Fault { op, body_contains: vec![], when: When::Every, action: Action::ServerError }
    }

    /// On one of a turn's writes.
    pub fn on_write(write: TurnWrite) -> Fault {
        let fault = Fault::on(write.op()).containing(write.marker());
        match write {
            // A tool round's call is an assistant's message too, stored
            // before: only the turn's answer carries its usage.
            TurnWrite::FinishMessage => fault.containing("usage"),
            _ => fault,
        }
    }

    /// Only requests whose body contains `piece` (and any piece given before).
    pub fn containing(mut self, piece: &str) -> Fault {
        self.body_contains.push(piece.to_string());
        self
    }

    pub fn when(mut self, when: When) -> Fault {
        self.when = when;
        self
    }

    pub fn nth(self, n: usize) -> Fault {
        self.when(When::Nth(n))
    }

    pub fn then(mut self, action: Action) -> Fault {
        self.action = action;
        self
    }
}

/// The handle of an injected fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultId(usize);

/// One request the proxy received.
#[derive(Debug, Clone)]
pub struct Seen {
    pub op: Op,
    pub body: String,
    /// The fault applied to it, if any.
    pub fault: Option<Action>,
    /// When it came in.
    pub at: tokio::time::Instant,
    /// When its answer went out (`None`: not yet, or dropped).
    pub answered: Option<tokio::time::Instant>,
    /// DynamoDB's answer, as forwarded (`None`: not forwarded, or not yet).
    pub reply: Option<String>,
}

impl Seen {
    /// The users whose partitions (`U#<user>#…` keys) the request names.
    pub fn users(&self) -> BTreeSet<String> {
        self.body
            .match_indices("\"U#")
            .filter_map(|(at, _)| {
                let rest = &self.body[at + 3..];
                let end = rest.find(['#', '"'])?;
                Some(rest[..end].to_string())
            })
            .collect()
    }
}

struct Rule {
    fault: Fault,
    active: bool,
    matched: usize,
    fired: usize,
}

#[derive(Default)]
struct State {
    rules: Vec<Rule>,
    seen: Vec<Seen>,
    /// Bumped by [`FaultProxy::release`]: held requests go on.
    released: Option<tokio::sync::watch::Sender<u64>>,
}

impl State {
    /// What a held request waits on: the next [`FaultProxy::release`].
    fn hold(&mut self) -> tokio::sync::watch::Receiver<u64> {
        self.released.get_or_insert_with(|| tokio::sync::watch::channel(0).0).subscribe()
    }
}

impl State {
    /// Records the request and decides its fault; the index of its record.
    fn admit(&mut self, op: Op, body: &str) -> (usize, Option<Action>) {
        let mut action = None;
        for rule in &mut self.rules {
            let f = &rule.fault;
            if !rule.active || f.op != op || !f.body_contains.iter().all(|p| body.contains(p.as_str())) {
                continue;
            }
            rule.matched += 1;
            if action.is_none() && f.when.applies(rule.matched) {
                rule.fired += 1;
                action = Some(f.action);
            }
        }
        let at = tokio::time::Instant::now();
        self.seen.push(Seen { op, body: body.to_string(), fault: action, at, answered: None, reply: None });
        (self.seen.len() - 1, action)
    }
}

/// The proxy; it runs until the test's runtime ends.
#[derive(Clone)]
pub struct FaultProxy {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
}

type Answer = hyper::Response<Full<Bytes>>;

impl FaultProxy {
    pub async fn start() -> FaultProxy {
        let upstream = crate::dynamo_endpoint();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let state = Arc::new(Mutex::new(State::default()));
        let http = reqwest::Client::builder().no_proxy().build().expect("a plain reqwest client builds");
        let st = state.clone();
        tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else { return };
                let (st, http, upstream) = (st.clone(), http.clone(), upstream.clone());
                tokio::spawn(async move {
                    let svc = service_fn(move |req| handle(st.clone(), http.clone(), upstream.clone(), req));
                    let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tcp), svc).await;
                });
            }
        });
        FaultProxy { addr, state }
    }

    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A DynamoDB client through the proxy, configured as production's
    /// (`aws_config` defaults, so the default retry policy: standard mode,
    /// 3 attempts), with the test credentials and region.
    pub async fn client(&self) -> aws_sdk_dynamodb::Client {
        use aws_sdk_dynamodb::config::{Credentials, Region};
        let sdk = shared::store::aws::loader()
            .region(Region::new("us-east-1"))
            .credentials_provider(Credentials::new("local", "local", None, None, "tests"))
            .load()
            .await;
        // Set on the service config, after the shared one: the test run's
        // AWS_ENDPOINT_URL_DYNAMODB would win over an endpoint on the loader.
        let conf = aws_sdk_dynamodb::config::Builder::from(&sdk).endpoint_url(self.endpoint()).build();
        aws_sdk_dynamodb::Client::from_conf(conf)
    }

    pub fn inject(&self, fault: Fault) -> FaultId {
        let mut st = self.state.lock().unwrap();
        st.rules.push(Rule { fault, active: true, matched: 0, fired: 0 });
        FaultId(st.rules.len() - 1)
    }

    /// Lets every request held so far ([`Action::Hold`]) go on.
    pub fn release(&self) {
        if let Some(tx) = &self.state.lock().unwrap().released {
            tx.send_modify(|n| *n += 1);
        }
    }

    /// Turns every fault off (their counts are kept).
    pub fn clear(&self) {
        for rule in &mut self.state.lock().unwrap().rules {
            rule.active = false;
        }
    }

    /// How many requests this fault was applied to.
    pub fn fired(&self, id: FaultId) -> usize {
        self.state.lock().unwrap().rules[id.0].fired
    }

    /// How many requests matched this fault (applied to or not).
    pub fn matched(&self, id: FaultId) -> usize {
        self.state.lock().unwrap().rules[id.0].matched
    }

    /// How many requests of `op` came in (faulted ones included: each SDK attempt counts).
    pub fn count(&self, op: &Op) -> usize {
        self.state.lock().unwrap().seen.iter().filter(|s| &s.op == op).count()
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<Seen> {
        self.state.lock().unwrap().seen.clone()
    }

    /// A point in the request log, for [`Self::since`].
    pub fn mark(&self) -> usize {
        self.state.lock().unwrap().seen.len()
    }

    /// The requests after `mark`.
    pub fn since(&self, mark: usize) -> Vec<Seen> {
        self.state.lock().unwrap().seen[mark..].to_vec()
    }

    /// The users whose partitions the requests after `mark` named.
    pub fn users_since(&self, mark: usize) -> BTreeSet<String> {
        self.since(mark).iter().flat_map(Seen::users).collect()
    }
}

/// The error DynamoDB answers, as the SDK reads it (header first, then `__type`).
fn dynamo_error(status: u16, kind: &str, message: &str) -> Answer {
    let namespace = if kind == "ThrottlingException" {
        "com.amazon.coral.availability"
    } else {
        "com.amazonaws.dynamodb.v20120810"
    };
    let body = serde_json::json!({"__type": format!("{namespace}#{kind}"), "message": message});
    hyper::Response::builder()
        .status(status)
        .header("content-type", "application/x-amz-json-1.0")
        .header("x-amzn-ErrorType", kind)
        .header("x-amzn-RequestId", uuid::Uuid::new_v4().to_string())
        .body(Full::new(Bytes::from(body.to_string())))
        .expect("static response parts are valid")
}

fn server_error() -> Answer {
    dynamo_error(500, "InternalServerError", "Internal server error")
}

/// Why the proxy closed a connection without an answer.
#[derive(Debug)]
struct Dropped;

impl std::fmt::Display for Dropped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("response dropped by the fault proxy")
    }
}

impl std::error::Error for Dropped {}

async fn handle(
    state: Arc<Mutex<State>>,
    http: reqwest::Client,
    upstream: String,
    req: hyper::Request<hyper::body::Incoming>,
) -> Result<Answer, Dropped> {
    let (parts, body) = req.into_parts();
    let body = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    let target = parts.headers.get("x-amz-target").and_then(|v| v.to_str().ok()).unwrap_or_default();
    let (seen, action, held) = {
        let mut st = state.lock().unwrap();
        let (seen, action) = st.admit(Op::from_target(target), &String::from_utf8_lossy(&body));
        (seen, action, (action == Some(Action::Hold)).then(|| st.hold()))
    };
    if let Some(mut held) = held {
        let _ = held.changed().await;
    }
    let (answer, reply) = answer(action, &http, &upstream, &parts, body).await;
    if answer.is_ok() {
        let mut st = state.lock().unwrap();
        st.seen[seen].answered = Some(tokio::time::Instant::now());
        st.seen[seen].reply = reply.map(|b| String::from_utf8_lossy(&b).into_owned());
    }
    answer
}

/// What the client gets for a request under `action`, and DynamoDB's
/// answer when it was forwarded.
async fn answer(
    action: Option<Action>,
    http: &reqwest::Client,
    upstream: &str,
    parts: &http::request::Parts,
    body: Bytes,
) -> (Result<Answer, Dropped>, Option<Bytes>) {
    match action {
        Some(Action::Throttle(Throttle::ThrottlingException)) => {
            let e = dynamo_error(400, "ThrottlingException", "Rate of requests exceeds the allowed throughput.");
            return (Ok(e), None);
        }
        Some(Action::Throttle(Throttle::ProvisionedThroughputExceeded)) => {
            let e = dynamo_error(
                400,
                "ProvisionedThroughputExceededException",
                "The level of configured provisioned throughput for the table was exceeded. \
                 Consider increasing your provisioning level with the UpdateTable API.",
            );
            return (Ok(e), None);
        }
        Some(Action::ServerError) => return (Ok(server_error()), None),
        Some(Action::Delay(d)) => tokio::time::sleep(d).await,
        Some(Action::LostResponse(_)) | Some(Action::Hold) | None => {}
    }
    let (answer, bytes) = forward(http, upstream, parts, body).await;
    match action {
        Some(Action::LostResponse(Lost::Answer500)) => (Ok(server_error()), Some(bytes)),
        Some(Action::LostResponse(Lost::DropConnection)) => (Err(Dropped), Some(bytes)),
        _ => (Ok(answer), Some(bytes)),
    }
}

/// Sends the request on to DynamoDB Local and returns its answer as it came,
/// and its body.
async fn forward(http: &reqwest::Client, upstream: &str, parts: &http::request::Parts, body: Bytes) -> (Answer, Bytes) {
    let url = format!("{upstream}{}", parts.uri.path_and_query().map_or("/", |p| p.as_str()));
    let mut req = http.request(parts.method.clone(), url).body(body);
    for (name, value) in &parts.headers {
        if !matches!(name.as_str(), "host" | "content-length" | "connection" | "transfer-encoding") {
            req = req.header(name, value);
        }
    }
    let resp = match req.send().await {
        Ok(r) => r,
        Err(e) => {
            let e = dynamo_error(500, "InternalServerError", &format!("proxy: upstream unreachable: {e}"));
            return (e, Bytes::new());
        }
    };
    let mut answer = hyper::Response::builder().status(resp.status());
    for (name, value) in resp.headers() {
        if !matches!(name.as_str(), "content-length" | "connection" | "transfer-encoding") {
            answer = answer.header(name, value);
        }
    }
    let bytes = resp.bytes().await.unwrap_or_default();
    (answer.body(Full::new(bytes.clone())).expect("upstream response parts are valid"), bytes)
}
