//! Test support: the real parts (DynamoDB Local, one fresh table per test), a
//! scripted OpenAI-compatible model server, and a driver that calls the stream
//! function's real handler and reads its body frame by frame.
//!
//! DynamoDB Local is started once by `scripts/test.sh`, which exports
//! `AWS_ENDPOINT_URL_DYNAMODB`; each test creates its own table in it.

pub mod caldav;
pub mod entities;
pub mod fault_proxy;
pub mod function_urls;
pub mod load;
pub mod pages;
pub mod runtime_api;
pub mod scripted_llm;
pub mod summary;
pub mod web;

use bytes::Bytes;
use http_body_util::BodyExt;
use shared::config::Config;
use shared::edge::stream::{handle_stream, StreamApp};
use shared::edge::ResponseBody;
use shared::sse::{SseDecoder, SseFrame, StreamEvent};
use std::time::Duration;
use tokio::time::Instant;

pub use scripted_llm::{Reply, ScriptedLlm, Step};

pub const TEST_SECRET: &str = "test-secret-for-hs256-only-in-tests";

/// The DynamoDB endpoint the test run started. Tests fail loudly without one:
/// run them through `scripts/test.sh`.
pub fn dynamo_endpoint() -> String {
    std::env::var("AWS_ENDPOINT_URL_DYNAMODB")
        .expect("AWS_ENDPOINT_URL_DYNAMODB is not set: run the tests with scripts/test.sh, which starts DynamoDB Local")
}

pub async fn dynamo_client() -> aws_sdk_dynamodb::Client {
    let conf = aws_sdk_dynamodb::Config::builder()
        .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
        .endpoint_url(dynamo_endpoint())
        .http_client(shared::store::aws::http_client())
        .region(aws_sdk_dynamodb::config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_dynamodb::config::Credentials::new("local", "local", None, None, "tests"))
        .build();
    aws_sdk_dynamodb::Client::from_conf(conf)
}

/// A new, empty table with the product's key scheme.
pub async fn fresh_table(client: &aws_sdk_dynamodb::Client) -> String {
    let name = format!("t-{}", uuid::Uuid::new_v4().simple());
    shared::store::dynamo::DynamoStore::create_table_if_missing(client, &name).await.expect("create table");
    name
}

/// Config as the stream function would load it, pointed at test parts.
pub fn test_config(table: &str, llm_base_url: &str) -> Config {
    let mut c = Config::from_env().expect("config from env");
    c.table_name = table.to_string();
    c.llm.base_url = llm_base_url.to_string();
    c.llm.api_key = Some("test-key".into());
    c.llm.model = "scripted".into();
    c.llm.first_token_timeout = Duration::from_secs(5);
    c.llm.connect_timeout = Duration::from_secs(2);
    c.llm.idle_timeout = Duration::from_secs(5);
    c.auth.jwt_secret = Some(TEST_SECRET.into());
    c.auth.jwks_url = None;
    // Budgets are tested where they are the subject (tests/tests/budgets.rs,
    // round_trips.rs): elsewhere one test user runs many turns a minute.
    c.budgets = shared::config::BudgetConfig::OFF;
    c
}

/// One stream function with its own table and scripted model.
pub struct TestApp {
    pub app: StreamApp,
    pub llm: ScriptedLlm,
    pub dynamo: aws_sdk_dynamodb::Client,
    pub table: String,
}

impl TestApp {
    pub async fn new() -> TestApp {
        Self::with_config(|_| {}).await
    }

    pub async fn with_config(tweak: impl FnOnce(&mut Config)) -> TestApp {
        let dynamo = dynamo_client().await;
        let table = fresh_table(&dynamo).await;
        let llm = ScriptedLlm::start().await;
        let mut config = test_config(&table, &llm.base_url());
        tweak(&mut config);
        let app = StreamApp::with_dynamo(config, dynamo.clone());
        TestApp { app, llm, dynamo, table }
    }

    /// A stream function whose DynamoDB client is `client` (e.g. one through
    /// a [`fault_proxy::FaultProxy`]). The table is created, and `dynamo` and
    /// [`Self::store`] read back, with a direct client, past any fault.
    pub async fn with_dynamo_client(client: aws_sdk_dynamodb::Client, tweak: impl FnOnce(&mut Config)) -> TestApp {
        let dynamo = dynamo_client().await;
        let table = fresh_table(&dynamo).await;
        let llm = ScriptedLlm::start().await;
        let mut config = test_config(&table, &llm.base_url());
        tweak(&mut config);
        let app = StreamApp::with_dynamo(config, client);
        TestApp { app, llm, dynamo, table }
    }

    pub fn store(&self) -> shared::store::dynamo::DynamoStore {
        shared::store::dynamo::DynamoStore::new(self.dynamo.clone(), self.table.clone())
    }

    /// Starts a turn and returns the response with its body unread.
    pub async fn post(&self, token: Option<&str>, body: impl Into<Vec<u8>>) -> http::Response<ResponseBody> {
        let mut b = http::Request::builder()
            .method("POST")
            .uri("/api/agent/v2/stream")
            .header("content-type", "application/json");
        if let Some(t) = token {
            b = b.header("authorization", format!("Bearer {t}"));
        }
        let req = b.body(lambda_http::Body::Binary(body.into())).expect("request");
        handle_stream(&self.app, lambda_http::Request::from(req)).await
    }

    /// A whole turn: the response, its frames with arrival times, its events.
    pub async fn turn(&self, user: &str, body: serde_json::Value) -> Turn {
        let resp = self.post(Some(&token(user)), serde_json::to_vec(&body).unwrap()).await;
        Turn::read(resp).await
    }
}

pub fn token(user: &str) -> String {
    shared::auth::mint_hs256(TEST_SECRET, user, Duration::from_secs(3600)).expect("mint")
}

/// What a client saw of one response.
#[derive(Debug)]
pub struct Turn {
    pub status: u16,
    pub content_type: String,
    /// For JSON answers.
    pub json: Option<serde_json::Value>,
    pub frames: Vec<(Duration, SseFrame)>,
    pub events: Vec<StreamEvent>,
}

impl Turn {
    pub async fn read(resp: http::Response<ResponseBody>) -> Turn {
        let start = Instant::now();
        let status = resp.status().as_u16();
        let content_type = resp.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
        let mut body = resp.into_body();
        let mut dec = SseDecoder::new();
        let mut frames = Vec::new();
        let mut raw = Vec::new();
        let read = async {
            while let Some(f) = body.frame().await {
                let data: Bytes = f.expect("infallible").into_data().unwrap_or_default();
                raw.extend_from_slice(&data);
                if content_type.starts_with("text/event-stream") {
                    for fr in decode(&mut dec, &data) {
                        frames.push((start.elapsed(), fr));
                    }
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(30), read).await.expect("the body ended within 30 s");
        let json =
            (!content_type.starts_with("text/event-stream")).then(|| serde_json::from_slice(&raw).ok()).flatten();
        let events = frames
            .iter()
            .map(|(_, f)| serde_json::from_str(&f.data).unwrap_or_else(|e| panic!("frame {f:?} is not an event: {e}")))
            .collect();
        Turn { status, content_type, json, frames, events }
    }

    pub fn kinds(&self) -> Vec<&'static str> {
        self.events.iter().map(StreamEvent::kind).collect()
    }

    pub fn text(&self) -> String {
        self.events
            .iter()
            .filter_map(|e| match e {
                StreamEvent::TextDelta { content } => Some(content.as_str()),
                _ => None,
            })
            .collect()
    }

    pub fn session_id(&self) -> String {
        self.events
            .iter()
            .find_map(|e| match e {
                StreamEvent::Session { session } => Some(session.id.to_string()),
                _ => None,
            })
            .expect("a session event")
    }

    pub fn error_code(&self) -> Option<String> {
        self.events.iter().find_map(|e| match e {
            StreamEvent::Error { code, .. } => Some(code.clone()),
            _ => None,
        })
    }

    pub fn done(&self) -> &StreamEvent {
        let last = self.events.last().expect("at least one event");
        assert_eq!(last.kind(), "done", "the last event is done: {:?}", self.kinds());
        last
    }
}

fn decode(dec: &mut SseDecoder, data: &[u8]) -> Vec<SseFrame> {
    dec.feed(data).expect("well-formed SSE")
}

/// A recorded model request is a valid tool-call protocol: every assistant
/// `tool_calls` entry is answered by a tool message right after it (any
/// order within the group), and no tool message is without its call.
/// A recorded model request's system prompt: its leading system messages
/// joined (the rules, then the per-project context: `shared::prompt`).
pub fn system_text(req: &serde_json::Value) -> String {
    let msgs = req["messages"].as_array().map(Vec::as_slice).unwrap_or_default();
    let lead = msgs.iter().take_while(|m| m["role"] == "system");
    lead.map(|m| m["content"].as_str().unwrap_or_default()).collect::<Vec<_>>().join("\n\n")
}

pub fn assert_tool_protocol(req: &serde_json::Value) {
    let mut open: Vec<String> = Vec::new();
    for m in req["messages"].as_array().expect("messages") {
        match m["role"].as_str().expect("a role") {
            "tool" => {
                let id = m["tool_call_id"].as_str().expect("a tool_call_id");
                let at = open.iter().position(|o| o == id).unwrap_or_else(|| panic!("orphan tool message {id}"));
                open.remove(at);
            }
            _ => {
                assert!(open.is_empty(), "calls without results: {open:?}");
                if let Some(calls) = m["tool_calls"].as_array() {
                    open.extend(calls.iter().map(|c| c["id"].as_str().expect("a call id").to_string()));
                }
            }
        }
    }
    assert!(open.is_empty(), "calls without results at the end: {open:?}");
}
