//! The edge: an HTTP request in, either a JSON error or a streamed SSE body out.
//!
//! This is the one place where domain errors become HTTP statuses. Everything
//! that can be refused without I/O beyond auth (method, token, body) is refused
//! here with a JSON body and nothing written; once the stream is open, failures
//! travel as `error` then `done` events.

use crate::agent_state::store::{AgentStateStore, DynamoAgentStateStore};
use crate::auth::Authenticator;
use crate::config::{Config, ConfigError};
use crate::context::cache::DynamoContextCache;
use crate::context::ContextConfig;
use crate::edge::{json_error, no_content, with_cors, ResponseBody};
use crate::entities::store::DynamoEntityStore;
use crate::entities::EntityService;
use crate::frames::{DynamoFrameLog, Recorder};
use crate::ids::{TurnId, UserId};
use crate::llm::{OpenAiClient, OpenAiConfig};
use crate::sse::{EventSink, SseBody, WireFormat};
use crate::store::dynamo::DynamoStore;
use crate::summary::{NoTurnEvents, SqsTurnEvents, SummaryConfig, TurnEvents};
use crate::tools::ToolRegistry;
use crate::turn::{self, TurnDeps, ValidTurn};
use crate::turn::{TokenCounterCell, TurnTools};
use http::{header, Method, Response, StatusCode};
use lambda_http::RequestExt;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// Everything the stream function needs, built once per container and shared
/// by every invocation (and every concurrent one on Managed Instances).
#[derive(Clone)]
pub struct StreamApp {
    pub deps: TurnDeps,
    pub auth: Authenticator,
}

impl StreamApp {
    /// Builds the clients from config: one DynamoDB client, one SQS client for
    /// turn-end events, one HTTP client for the model, one for JWKS.
    pub async fn from_config(config: Config) -> Result<StreamApp, ConfigError> {
        let sdk = aws_config::load_from_env().await;
        let dynamo = aws_sdk_dynamodb::Client::new(&sdk);
        let summary = SummaryConfig::from_env(&config.llm.model)?;
        let events: Arc<dyn TurnEvents> = match &summary.queue_url {
            Some(url) => Arc::new(SqsTurnEvents::new(aws_sdk_sqs::Client::new(&sdk), url.clone())),
            None => Arc::new(NoTurnEvents),
        };
        StreamApp::with_parts(config, ContextConfig::from_env()?, dynamo, events, summary.event_wait)
    }

    /// For tests and local adapters: no turn-end events, context settings from env.
    pub fn with_dynamo(config: Config, dynamo: aws_sdk_dynamodb::Client) -> StreamApp {
        let context = ContextConfig::from_env().expect("context config from env");
        StreamApp::with_parts(config, context, dynamo, Arc::new(NoTurnEvents), Duration::from_millis(20))
            .expect("valid config")
    }

    pub fn with_parts(
        config: Config,
        context: ContextConfig,
        dynamo: aws_sdk_dynamodb::Client,
        events: Arc<dyn TurnEvents>,
        event_wait: Duration,
    ) -> Result<StreamApp, ConfigError> {
        let store = Arc::new(DynamoStore::new(dynamo.clone(), config.table_name.clone()));
        let entities = EntityService::new(DynamoEntityStore::new(dynamo.clone(), config.table_name.clone()));
        let tools: Option<Arc<dyn TurnTools>> = Some(Arc::new(ToolRegistry::new(entities.clone())));
        let (dynamo_for_cache, table_for_cache) = (dynamo.clone(), config.table_name.clone());
        let agent_state: Arc<dyn AgentStateStore> =
            Arc::new(DynamoAgentStateStore::new(dynamo.clone(), config.table_name.clone()));
        let plans: Arc<dyn crate::plan::store::PlanStore> =
            Arc::new(crate::plan::store::DynamoPlanStore::new(dynamo.clone(), config.table_name.clone()));
        let llm = Arc::new(OpenAiClient::new(OpenAiConfig::from(&config.llm)));
        let deps_table = config.table_name.clone();
        let auth = crate::edge::authenticator(&config.auth);
        let counter = TokenCounterCell::load(&context, &config.llm.model)?;
        let deps = TurnDeps {
            store,
            llm,
            config: Arc::new(config),
            tools,
            entities: Some(entities),
            cache: Some(Arc::new(DynamoContextCache::new(dynamo_for_cache, table_for_cache))),
            agent_state: Some(agent_state),
            plans: Some(plans),
            context: Arc::new(context),
            counter,
            events,
            event_wait,
            frames: Some(Arc::new(DynamoFrameLog::new(dynamo.clone(), deps_table))),
        };
        Ok(StreamApp { deps, auth })
    }
}

/// The stream function's handler: `POST` on any path starts a turn, except
/// under `/sessions`, which is the sessions API (`crate::session::http`), and
/// under `/chat`, the AI SDK's chat protocol (`crate::chat`). Every answer,
/// preflight included, carries CORS headers when `CORS_ALLOW_ORIGIN` is set
/// (local stacks; see [`crate::edge::with_cors`]).
pub async fn handle_stream(app: &StreamApp, req: lambda_http::Request) -> Response<ResponseBody> {
    let cors = app.deps.config.cors_allow_origin.clone();
    with_cors(cors.as_deref(), crate::edge::or_internal_error(route_stream(app, req)).await)
}

async fn route_stream(app: &StreamApp, req: lambda_http::Request) -> Response<ResponseBody> {
    let started = std::time::Instant::now();
    // Before anything is streamed: Nagle off on the Runtime API connection.
    crate::transport::nodelay_runtime_api();
    if req.method() == Method::OPTIONS {
        // A preflight: on AWS the function URL's `Cors` answers it before us;
        // this keeps one that reaches us (a local stack) from being refused.
        return no_content();
    }
    let sessions_api = crate::session::http::is_sessions_path(req.uri().path());
    let chat = crate::chat::is_chat_path(req.uri().path());
    if req.method() != Method::POST && !sessions_api && !chat {
        return json_error(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", "POST a chat turn to this URL");
    }
    let user = match app.auth.authenticate(req.headers()).await {
        Ok(u) => u,
        Err(e) => {
            tracing::info!(code = e.code(), "refused: unauthenticated");
            return json_error(
                StatusCode::from_u16(e.status()).unwrap_or(StatusCode::UNAUTHORIZED),
                e.code(),
                e.to_string(),
            );
        }
    };
    if sessions_api {
        let deadline = invocation_deadline(&req, app.deps.config.turn_timeout);
        let api = crate::session::http::Api {
            store: app.deps.store.as_ref(),
            agent_state: app.deps.agent_state.as_deref(),
            frames: app.deps.frames.as_ref(),
            deadline,
        };
        return crate::session::http::handle(&api, &user, &req).await;
    }
    if chat {
        return crate::chat::handle(app, user, &req, started).await;
    }
    let cfg = &app.deps.config;
    let valid = match ValidTurn::parse(req.body().as_ref(), cfg.max_message_bytes) {
        Ok(v) => v,
        Err(e) => {
            let status = match e {
                turn::BadTurn::MessageTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
                _ => StatusCode::BAD_REQUEST,
            };
            return json_error(status, e.code(), e.to_string());
        }
    };
    stream_turn(app, user, valid, TurnId::new(), WireFormat::Native, &req, started).await
}

/// Runs a validated turn and answers with its stream in `format`.
pub(crate) async fn stream_turn(
    app: &StreamApp,
    user: UserId,
    valid: ValidTurn,
    turn_id: TurnId,
    format: WireFormat,
    req: &lambda_http::Request,
    started: std::time::Instant,
) -> Response<ResponseBody> {
    let deadline = invocation_deadline(req, app.deps.config.turn_timeout);
    let ui = format != WireFormat::Native;
    let (mut sink, body) = EventSink::channel_with(format);
    if let Some(log) = &app.deps.frames {
        // Holds frames until the turn begins; nothing is written before.
        sink.tee(Box::new(Recorder::new(log.clone(), user.clone())));
    }
    // `agent_state` goes into the fresh channel before the turn is spawned, so
    // it leaves with the response head: queued from inside the task, it waited
    // until the task's first DynamoDB request had been built and signed
    // (measured: first frame 0.48 / 4.02 ms p50 / p95 after entry, 0.06 / 0.09
    // with this order; docs/performance.md, finding 1).
    if sink.send(turn::thinking()).await.is_ok() {
        let deps = app.deps.clone();
        tokio::spawn(turn::run_turn(deps, user, valid, turn_id, started, deadline, sink));
    }
    sse_response(body, ui)
}

/// The head of a streamed answer; `ui`: the AI SDK's UI message stream.
pub(crate) fn sse_response(body: SseBody, ui: bool) -> Response<ResponseBody> {
    let mut head = Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .header("x-accel-buffering", "no");
    if ui {
        head = head.header(crate::sse::ui::HEADER.0, crate::sse::ui::HEADER.1);
    }
    head.body(ResponseBody::Sse(body)).expect("static response parts are valid")
}

/// When the runtime will stop this invocation; `fallback` from now when it
/// does not say (local adapters, tests).
pub(crate) fn invocation_deadline(req: &lambda_http::Request, fallback: Duration) -> Instant {
    let now = Instant::now();
    match req.lambda_context_ref().map(|c| c.deadline as i64) {
        // `cargo lambda watch` (1.9) sends the invoke timeout itself (600000)
        // where Lambda sends an epoch time; no real deadline is before 2001.
        Some(timeout_ms) if (1..1_000_000_000_000).contains(&timeout_ms) => {
            now + Duration::from_millis(timeout_ms as u64)
        }
        Some(deadline_ms) if deadline_ms > 0 => {
            let left = deadline_ms - crate::now_ms();
            now + Duration::from_millis(left.max(0) as u64)
        }
        _ => now + fallback,
    }
}
