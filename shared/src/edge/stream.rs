//! The stream function's router: `POST` on any path starts a turn (the
//! native protocol), except under `/sessions` ([`super::sessions`]) and
//! `/chat` ([`super::chat`], the AI SDK's protocol). Everything that can be
//! refused without I/O beyond auth (method, token, body) is refused with a
//! JSON body and nothing written; once the stream is open, failures travel as
//! `error` then `done` events.

use super::body::JsonBody;
use super::error::ErrorBody;
use super::extract::{Deadline, HasAuth, HasTimeout, User};
use super::{json_error, ApiError, OpenApiRouter, ResponseBody};
use crate::agent_state::store::{AgentStateStore, DynamoAgentStateStore};
use crate::auth::Authenticator;
use crate::chat::ui_stream::UiEncoder;
use crate::config::{Config, ConfigError};
use crate::context::cache::DynamoContextCache;
use crate::context::ContextConfig;
use crate::entities::store::DynamoEntityStore;
use crate::entities::EntityService;
use crate::frames::{DynamoFrameLog, Recorder};
use crate::ids::{TurnId, UserId};
use crate::llm::{OpenAiClient, OpenAiConfig};
use crate::sse::{EventSink, FrameEncoder, NativeEncoder};
use crate::store::dynamo::DynamoStore;
use crate::summary::{NoTurnEvents, SqsTurnEvents, SummaryConfig, TurnEvents};
use crate::tools::ToolRegistry;
use crate::turn::{self, TurnDeps, TurnRequest, ValidTurn};
use crate::turn::{TokenCounterCell, TurnTools};
use axum::extract::{FromRequestParts, State};
use axum::response::{IntoResponse, Response};
use http::{Method, StatusCode};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;
use tower::ServiceExt;
use utoipa_axum::routes;

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
        let sdk = crate::store::aws::load_from_env().await;
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
        let calendar = calendar_service(&dynamo, &config.table_name, &entities);
        let budget = Arc::new(crate::budget::DynamoBudgetStore::new(dynamo.clone(), config.table_name.clone()));
        let web = crate::tools::WebTools::new(&config.web).with_budget(budget.clone(), config.budgets);
        let registry = ToolRegistry::new(entities.clone()).with_calendar(calendar.clone()).with_web(web);
        let tools: Option<Arc<dyn TurnTools>> = Some(Arc::new(registry));
        let (dynamo_for_cache, table_for_cache) = (dynamo.clone(), config.table_name.clone());
        let agent_state: Arc<dyn AgentStateStore> =
            Arc::new(DynamoAgentStateStore::new(dynamo.clone(), config.table_name.clone()));
        let plans: Arc<dyn crate::plan::store::PlanStore> =
            Arc::new(crate::plan::store::DynamoPlanStore::new(dynamo.clone(), config.table_name.clone()));
        let llm = Arc::new(OpenAiClient::new(OpenAiConfig::from(&config.llm)));
        let deps_table = config.table_name.clone();
        let config_table = config.table_name.clone();
        let auth = Authenticator::from_config(&config.auth);
        let counter = TokenCounterCell::load(&context, &config.llm.model)?;
        let deps = TurnDeps {
            history: store.clone(),
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
            calendar: Some(calendar),
            budget: Some(budget),
            refusals: Default::default(),
            approval_settings: Some(Arc::new(crate::approval::settings::DynamoApprovalSettings::new(
                dynamo.clone(),
                config_table,
            ))),
        };
        Ok(StreamApp { deps, auth })
    }
}

pub use crate::calendar::from_env as calendar_service;

impl HasAuth for StreamApp {
    fn authenticator(&self) -> &Authenticator {
        &self.auth
    }
}

impl HasTimeout for StreamApp {
    fn fallback_timeout(&self) -> Duration {
        self.deps.config.turn_timeout
    }
}

/// The stream function's routes with their OpenAPI operations: a turn, the
/// sessions API (a session's message suggestion among them), the AI SDK's
/// chat, the user's budgets (`GET /me/usage`), their "ask first" tools
/// (`GET`/`PUT /me/approvals`) and settings (`GET`/`PUT /me/settings`).
pub fn routes() -> OpenApiRouter<StreamApp> {
    OpenApiRouter::new()
        .routes(routes!(post_turn))
        .merge(super::sessions::routes())
        .merge(super::suggestion::routes())
        .merge(super::chat::routes())
        .merge(super::approvals::routes())
        .merge(super::usage::routes())
        .merge(super::settings::routes())
}

/// The stream function's router: every answer, preflight included, carries
/// CORS headers when `CORS_ALLOW_ORIGIN` is set (local stacks).
pub fn router(app: StreamApp) -> axum::Router {
    let cors = app.deps.config.cors_allow_origin.clone();
    let (routes, _) = routes().split_for_parts();
    // Any other path takes a turn too: the function URL is the turn's URL.
    let routes = routes.fallback(any_path).with_state(app);
    // Before anything is streamed: Nagle off on the Runtime API connection.
    let routes = routes.layer(axum::middleware::map_request(|req: axum::extract::Request| async {
        crate::transport::nodelay_runtime_api();
        req
    }));
    super::finish(routes, cors.as_deref())
}

/// One request through the stream function's router, in process (tests).
/// Builds the router for this one request (about half a millisecond with
/// its OpenAPI routes); a caller serving many requests keeps a
/// [`StreamRouter`] instead, as the function's `main.rs` keeps its router.
pub async fn handle_stream(app: &StreamApp, req: lambda_http::Request) -> http::Response<ResponseBody> {
    StreamRouter::new(app.clone()).handle(req).await
}

/// The stream function's router, built once, for in-process callers that
/// serve many requests (the bench's local HTTP adapter).
#[derive(Clone)]
pub struct StreamRouter(axum::Router);

impl StreamRouter {
    pub fn new(app: StreamApp) -> Self {
        StreamRouter(router(app))
    }

    pub async fn handle(&self, req: lambda_http::Request) -> http::Response<ResponseBody> {
        let resp = self.0.clone().oneshot(req.map(ResponseBody::new)).await;
        resp.unwrap_or_else(|never| match never {})
    }
}

/// A turn in the native protocol: `TurnRequest` in, the turn's events out (SSE).
#[utoipa::path(post, path = "/", tag = "stream", security(("bearer" = [])),
    request_body = TurnRequest,
    responses((status = 200, content_type = "text/event-stream", description = "The turn's events (`StreamEvent`, SSE)"),
        (status = 400, body = ErrorBody, description = "the body is not a valid turn request"),
        (status = 401, body = ErrorBody), (status = 405, body = ErrorBody, description = "`method_not_allowed`"),
        (status = 413, body = ErrorBody, description = "`message_too_large`; `too_large`: the body is over 6 MiB"),
        (status = 429, body = ErrorBody, description = "`quota_exceeded`: a budget of the user's is spent; `Retry-After` says when to come back (`GET /me/usage` says which)"),
        (status = 503, body = ErrorBody)))]
async fn post_turn(
    State(app): State<StreamApp>,
    User(user): User,
    Deadline(deadline): Deadline,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let started = std::time::Instant::now();
    let valid = ValidTurn::parse(&body, app.deps.config.max_message_bytes)?;
    Ok(stream_turn(&app, user, valid, TurnId::new(), WireFormat::Native, deadline, started).await)
}

/// An id from outside as [`crate::ids`] checks it (64 characters at most).
pub(super) const ID_PATTERN: &str = "^[A-Za-z0-9._:|@-]{1,64}$";

/// Unicode `White_Space`, what `str::trim` removes, as a regex class body:
/// the document's "not blank" is a character outside it.
pub(super) const WHITE_SPACE: &str = r"\t\n\u000b\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000";

/// A string that is not blank (as [`ValidTurn`] reads `message`).
pub(super) fn not_blank(description: &str) -> serde_json::Value {
    serde_json::json!({"type": "string", "pattern": format!("[^{WHITE_SPACE}]"), "description": description})
}

/// A `stream_run_id` as [`crate::ids::RunId`] reads it: a string id of up
/// to 128 characters, or a number, whose JSON spelling is the id. A spelling
/// with `+` (`5.2e+16`, as many encoders write 1e16 and above) is refused, so
/// the document bounds numbers below that.
pub(super) fn run_id_schema(description: &str) -> serde_json::Value {
    serde_json::json!({"oneOf": [{"type": "null"},
            {"type": "number", "exclusiveMinimum": -1e16, "exclusiveMaximum": 1e16},
            {"type": "string", "pattern": "^[A-Za-z0-9._:|@-]{1,128}$"}],
        "description": description})
}

/// The turn body's fields past `message`, with the grammar [`ValidTurn`]
/// enforces (`crate::turn::request`): the chat body carries them too. What
/// a field cannot be is a 400 before anything streams.
pub(super) fn turn_extras() -> serde_json::Map<String, serde_json::Value> {
    use crate::entities::EntityKind;
    let kinds: Vec<serde_json::Value> =
        EntityKind::ALL.iter().map(|k| k.as_str().into()).chain([serde_json::Value::Null]).collect();
    let zones: Vec<serde_json::Value> =
        chrono_tz::TZ_VARIANTS.iter().map(|z| z.name().into()).chain([serde_json::Value::Null, "".into()]).collect();
    let json = serde_json::json!({
        "session_id": {"type": ["string", "null"], "pattern": "^([A-Za-z0-9._:|@-]{1,64})?$",
            "description": "The session to continue; empty or absent: a new one."},
        "context_type": {"oneOf": [{"type": "null"}, {"$ref": "#/components/schemas/ContextType"}],
            "description": "`general` is read as `global`; absent: the session's own."},
        "entity_id": {"type": ["string", "null"],
            "pattern": format!("^([{WHITE_SPACE}]*|[A-Za-z0-9._:|@-]{{1,64}})$"),
            "description": "The focused entity; blank: none."},
        "projectFocus": {"type": ["object", "null"],
            "description": "The client's focus (also read as `project_focus`, its ids also in snake case).",
            "properties": {
                "projectId": {"type": ["string", "null"], "pattern": ID_PATTERN},
                "entityType": {"enum": kinds},
            }},
        "stream_run_id": run_id_schema("A string or a number; either way the idempotency key of this turn."),
        "voice_note_group_id": {"type": ["string", "null"],
            "pattern": "^[^\\u0000-\\u001f\\u007f-\\u009f]{0,128}$",
            "description": "Groups the voice notes a message was dictated from; empty: none."},
        "timezone": {"enum": zones,
            "description": "The client's IANA time zone: this turn's calendar reads local times in it; never \
                stored. Empty: the user's chosen zone (PUT /me/settings), else UTC."},
    });
    match json {
        serde_json::Value::Object(m) => m,
        _ => unreachable!("an object literal"),
    }
}

/// The turn body as the stream function's document states it: [`TurnRequest`]
/// with the rules [`ValidTurn::parse`] checks (unknown fields are ignored).
pub(super) fn turn_request_schema() -> serde_json::Value {
    let mut properties = serde_json::Map::new();
    properties.insert(
        "message".into(),
        not_blank("The user's message: not blank; more than `MAX_MESSAGE_BYTES` (32 KiB by default) is 413."),
    );
    properties.extend(turn_extras());
    serde_json::json!({
        "type": "object",
        "description": "The body of `POST` to the stream function. Unknown fields are ignored so \
            older and newer clients keep working; the body must be a JSON object.",
        "required": ["message"],
        "properties": properties,
    })
}

/// Any path no route names: `POST` is a turn, anything else 405; under
/// `/sessions` and `/chat`, a route those APIs do not have (404).
async fn any_path(State(app): State<StreamApp>, req: axum::extract::Request) -> Response {
    let path = req.uri().path();
    let api = ["/sessions", "/chat"].iter().find(|p| path == **p || path.starts_with(&format!("{p}/")));
    if let Some(api) = api {
        let (mut parts, _) = req.into_parts();
        if let Err(e) = User::from_request_parts(&mut parts, &app).await {
            return e.into_response();
        }
        let code = if *api == "/chat" { "not_found" } else { "no_such_route" };
        return json_error(StatusCode::NOT_FOUND, code, "no such route: see docs/openapi-stream.json");
    }
    if req.method() != Method::POST {
        let mut resp = json_error(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", "POST a chat turn to this URL");
        resp.headers_mut().insert(http::header::ALLOW, http::HeaderValue::from_static("POST"));
        return resp;
    }
    let (mut parts, body) = req.into_parts();
    let user = match User::from_request_parts(&mut parts, &app).await {
        Ok(u) => u,
        Err(e) => return e.into_response(),
    };
    let deadline = super::deadline::of_request(&parts.extensions, app.deps.config.turn_timeout);
    match JsonBody::read(body, super::body::MAX_BODY_BYTES).await {
        Ok(body) => post_turn(State(app), user, Deadline(deadline), body).await.into_response(),
        Err(e) => e.into_response(),
    }
}

/// What a turn's answer speaks, chosen by its route: our native events
/// (`POST /`), or the AI SDK's UI message stream for the assistant message
/// `message_id` (`POST /chat`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireFormat {
    Native,
    UiMessageStream { message_id: String },
}

impl WireFormat {
    /// The encoder the turn's sink writes with.
    fn encoder(&self) -> Box<dyn FrameEncoder> {
        match self {
            WireFormat::Native => Box::new(NativeEncoder),
            WireFormat::UiMessageStream { message_id } => Box::new(UiEncoder::new(message_id.clone())),
        }
    }
}

/// Runs a validated turn and answers with its stream in `format`.
pub(super) async fn stream_turn(
    app: &StreamApp,
    user: UserId,
    valid: ValidTurn,
    turn_id: TurnId,
    format: WireFormat,
    deadline: Instant,
    started: std::time::Instant,
) -> Response {
    let ui = format != WireFormat::Native;
    // A refusal this process saw and that still stands is answered without
    // I/O: 429 with `Retry-After`, nothing streamed, nothing written. Any
    // other refusal is decided by the admission, which runs beside the
    // turn's first round trip, after the first event: the stream then ends
    // `error quota_exceeded` (with when to retry), then `done`
    // (docs/budgets.md).
    if let Some(refused) = standing_refusal(app, &user) {
        return refused;
    }
    let (mut sink, body) = EventSink::channel_with(format.encoder());
    if let Some(log) = &app.deps.frames {
        // Holds frames until the turn begins; nothing is written before.
        sink.tee(Box::new(Recorder::new(log.clone(), user.clone()).every(app.deps.config.frame_flush)));
    }
    // `agent_state` goes into the fresh channel before the turn is spawned, so
    // it leaves with the response head: queued from inside the task, it waited
    // until the task's first DynamoDB request had been built and signed
    // (measured: first frame 0.48 / 4.02 ms p50 / p95 after entry, 0.06 / 0.09
    // with this order; docs/performance.md, finding 1).
    if sink.send(turn::thinking()).await.is_err() {
        return super::sse_response(body, ui);
    }
    tokio::spawn(turn::run_turn(app.deps.clone(), user, valid, turn_id, started, deadline, sink));
    super::sse_response(body, ui)
}

/// The 429 for a refusal this process saw and that still stands (no I/O),
/// for a turn or anything the turn budgets admit (a suggestion).
pub(super) fn standing_refusal(app: &StreamApp, user: &crate::ids::UserId) -> Option<Response> {
    if app.deps.budget.is_none() || !app.deps.config.budgets.checks_turns() {
        return None;
    }
    let over = app.deps.refusals.standing(user, crate::now_ms())?;
    Some(super::error::over_budget(&over))
}
