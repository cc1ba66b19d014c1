//! Prewarm (issue 6, AGENTIC_CHAT_V2_SPEC §11–12 Phase 4): build a session's
//! context pack before the user types, and keep active ones warm.
//!
//! - `POST {session_id?, context_type, project_id?, entity_id?, entity_type?, timezone?}`
//!   with the user's JWT ([`prewarm`]): resolves the session (or
//!   creates one, with no lease), records the focus on it, builds the pack
//!   with [`build_keyed`] (in `project_audit`, `project_forecast`,
//!   `daily_brief_update` and `brain_dump`, with the mode's block:
//!   docs/modes.md) and stores it in the cache ([`crate::context::cache`]).
//!   Answers `{session, cached: {scope, bytes, version, build_ms, stored}}`.
//! - The EventBridge schedule ([`refresh::refresh_active`]): rebuilds the
//!   caches used in the last `PREWARM_ACTIVE_WINDOW_MINUTES` whose project
//!   version has moved on.
//!
//! One Lambda binary takes both; its edge (`edge::prewarm`) tells the
//! payloads apart ([`is_scheduled_event`]) and routes the requests.

pub mod refresh;

use crate::auth::Authenticator;
use crate::calendar::CalendarService;
use crate::config::{Config, ConfigError};
use crate::context::cache::{ContextCache, DynamoContextCache};
use crate::context::modes::Sources;
use crate::context::pack::{build_keyed, PackKey};
use crate::entities::store::DynamoEntityStore;
use crate::entities::{EntityError, EntityKind, EntityService};
use crate::ids::{EntityId, ProjectId, RunId, SessionId, TurnId, UserId};
use crate::session::store::{Lease, Leases, Sessions};
use crate::session::{ContextType, SessionStatus, SessionView};
use crate::store::dynamo::DynamoStore;
use crate::store::StoreError;
use aws_sdk_dynamodb::types::AttributeValue;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

use tracing::Instrument;

/// The largest prewarm request body accepted.
pub const MAX_BODY_BYTES: usize = 16 * 1024;

/// Settings of the scheduled refresh.
#[derive(Debug, Clone)]
pub struct PrewarmConfig {
    /// `PREWARM_ACTIVE_WINDOW_MINUTES` (default 30): a cache used within this
    /// window counts as active and is kept fresh.
    pub active_window: Duration,
    /// `PREWARM_MAX_PER_RUN` (default 200): cache entries checked per run.
    pub max_per_run: usize,
    /// `PREWARM_DEADLINE_MARGIN_MS` (default 5000): stop this long before the
    /// invocation's deadline.
    pub deadline_margin: Duration,
}

impl Default for PrewarmConfig {
    fn default() -> Self {
        PrewarmConfig {
            active_window: Duration::from_secs(30 * 60),
            max_per_run: 200,
            deadline_margin: Duration::from_secs(5),
        }
    }
}

impl PrewarmConfig {
    pub fn from_env() -> Result<Self, ConfigError> {
        let minutes = crate::config::env_parse("PREWARM_ACTIVE_WINDOW_MINUTES", 30u64)?;
        let max = crate::config::env_parse("PREWARM_MAX_PER_RUN", 200u64)?;
        if minutes == 0 {
            return Err(ConfigError { var: "PREWARM_ACTIVE_WINDOW_MINUTES", reason: "must be at least 1".into() });
        }
        if max == 0 {
            return Err(ConfigError { var: "PREWARM_MAX_PER_RUN", reason: "must be at least 1".into() });
        }
        Ok(PrewarmConfig {
            active_window: Duration::from_secs(minutes * 60),
            max_per_run: max as usize,
            deadline_margin: Duration::from_millis(crate::config::env_parse("PREWARM_DEADLINE_MARGIN_MS", 5_000u64)?),
        })
    }
}

/// Everything the prewarm function needs, built once per container.
#[derive(Clone)]
pub struct PrewarmApp {
    pub store: DynamoStore,
    pub cache: DynamoContextCache,
    pub service: EntityService,
    /// The user's calendar, for the forecast's free time and the brief's events.
    pub calendar: CalendarService,
    pub auth: Authenticator,
    pub config: PrewarmConfig,
}

impl PrewarmApp {
    pub async fn from_config(config: Config) -> Result<PrewarmApp, ConfigError> {
        let sdk = crate::store::aws::load_from_env().await;
        Ok(PrewarmApp::with_dynamo(config, PrewarmConfig::from_env()?, aws_sdk_dynamodb::Client::new(&sdk)))
    }

    pub fn with_dynamo(config: Config, prewarm: PrewarmConfig, dynamo: aws_sdk_dynamodb::Client) -> PrewarmApp {
        let service = EntityService::new(DynamoEntityStore::new(dynamo.clone(), config.table_name.clone()));
        PrewarmApp {
            store: DynamoStore::new(dynamo.clone(), config.table_name.clone()),
            cache: DynamoContextCache::new(dynamo.clone(), config.table_name.clone()),
            calendar: crate::calendar::from_env(&dynamo, &config.table_name, &service),
            service,
            auth: Authenticator::from_config(&config.auth),
            config: prewarm,
        }
    }
}

/// The request body.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrewarmRequest {
    #[serde(default)]
    pub session_id: Option<String>,
    pub context_type: ContextType,
    #[serde(default)]
    pub project_id: Option<String>,
    #[serde(default)]
    pub entity_id: Option<String>,
    /// The focused entity's kind (`task`, `document`, …), when known.
    #[serde(default)]
    pub entity_type: Option<String>,
    /// The user's IANA zone (the forecast's and the brief's days); else
    /// the one the calendar remembers, else UTC.
    #[serde(default)]
    pub timezone: Option<String>,
}

/// What was cached, as answered.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CachedInfo {
    pub scope: String,
    /// `audit`, `forecast`, `brief` or `dump`: the mode whose block the pack holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    pub bytes: usize,
    /// The project version the pack was built from (0 for global scope).
    pub version: u64,
    pub build_ms: u64,
    /// `false` when the pack was too large to cache.
    pub stored: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PrewarmResponse {
    pub session: SessionView,
    pub cached: CachedInfo,
}

/// Why a prewarm was refused; the edge gives each its status.
#[derive(Debug, thiserror::Error)]
pub enum PrewarmError {
    /// The body is not a valid request (`code`: `invalid_json`, `invalid_id`, …).
    #[error("{message}")]
    Invalid { code: &'static str, message: String },
    #[error("project not found")]
    ProjectNotFound,
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The project could not be read or its context built: retry.
    #[error("{0}")]
    Unavailable(String),
}

impl PrewarmError {
    pub fn code(&self) -> &'static str {
        match self {
            PrewarmError::Invalid { code, .. } => code,
            PrewarmError::ProjectNotFound => "project_not_found",
            PrewarmError::Store(e) => e.code(),
            PrewarmError::Unavailable(_) => "store_unavailable",
        }
    }
}

fn bad(code: &'static str, message: impl Into<String>) -> PrewarmError {
    PrewarmError::Invalid { code, message: message.into() }
}

/// What a valid request asks for.
struct Focus {
    session: Option<SessionId>,
    context_type: ContextType,
    entity_id: Option<String>,
    /// Stored on the session, in the shape the stream reads (`ToolScope::from_focus`).
    focus: Option<Value>,
    scope: crate::tools::ToolScope,
    zone: Option<crate::calendar::Zone>,
}

fn parse_request(body: &[u8]) -> Result<Focus, PrewarmError> {
    let req: PrewarmRequest = serde_json::from_slice(body)
        .map_err(|e| bad("invalid_json", format!("the body is not a prewarm request: {e}")))?;
    let session = req
        .session_id
        .map(|s| SessionId::parse(s).map_err(|e| bad("invalid_id", format!("session_id: {e}"))))
        .transpose()?;
    let project = req
        .project_id
        .map(|p| ProjectId::parse(p).map_err(|e| bad("invalid_id", format!("project_id: {e}"))))
        .transpose()?;
    let entity = req
        .entity_id
        .map(|e| EntityId::parse(e).map_err(|e| bad("invalid_id", format!("entity_id: {e}"))))
        .transpose()?;
    let kind = req
        .entity_type
        .map(|k| EntityKind::parse(&k).ok_or_else(|| bad("invalid_value", format!("entity_type: unknown kind {k:?}"))))
        .transpose()?;
    match req.context_type {
        ContextType::Project if project.is_none() => {
            return Err(bad("missing_field", "context_type project needs project_id"));
        }
        ContextType::Entity if project.is_none() || entity.is_none() => {
            return Err(bad("missing_field", "context_type entity needs project_id and entity_id"));
        }
        _ => {}
    }
    let mut focus = serde_json::Map::new();
    if let Some(p) = &project {
        focus.insert("projectId".into(), json!(p));
    }
    if let Some(k) = kind {
        focus.insert("entityType".into(), json!(k.as_str()));
    }
    let zone = req
        .timezone
        .map(|z| crate::calendar::Zone::parse(&z).map_err(|e| bad("invalid_timezone", e.to_string())))
        .transpose()?;
    let focus = (!focus.is_empty()).then_some(Value::Object(focus));
    let entity_id = entity.map(|e| e.to_string());
    let scope = crate::tools::ToolScope::from_focus(req.context_type, entity_id.as_deref(), focus.as_ref());
    Ok(Focus { session, context_type: req.context_type, entity_id, focus, scope, zone })
}

/// Prewarms what the request body asks for, for `user`.
pub async fn prewarm(app: &PrewarmApp, user: &UserId, body: &[u8]) -> Result<PrewarmResponse, PrewarmError> {
    let focus = parse_request(body)?;
    // The project must be the user's: checked before anything is written.
    if let Some(project) = focus.scope.project() {
        match app.service.get_project(user, project).await {
            Ok(_) => {}
            Err(EntityError::NotFound(_)) => return Err(PrewarmError::ProjectNotFound),
            Err(e) => return Err(PrewarmError::Unavailable(e.to_string())),
        }
    }
    let session = resolve_session(app, user, &focus).await?;
    let started = Instant::now();
    let key = PackKey::new(focus.scope.clone(), focus.context_type);
    let src =
        Sources { entities: &app.service, calendar: Some(&app.calendar), zone: focus.zone, now: chrono::Utc::now() };
    let pack = build_keyed(&src, user, &key).await;
    let build_ms = started.elapsed().as_millis() as u64;
    if focus.scope.project().is_some() && pack.version.is_none() {
        // The project vanished (or the store failed) between the check and the build.
        return Err(PrewarmError::Unavailable("the context could not be built".into()));
    }
    let out = app.cache.put(user, &key, &pack, build_ms).await?;
    tracing::info!(scope = pack.scope, bytes = out.bytes, build_ms, stored = out.stored, "prewarmed");
    Ok(PrewarmResponse {
        session,
        cached: CachedInfo {
            scope: pack.scope.to_string(),
            mode: key.mode.map(|m| m.as_str().to_string()),
            bytes: out.bytes,
            version: pack.version.unwrap_or(0),
            build_ms,
            stored: out.stored,
        },
    })
}

/// The named session with the new focus recorded, or a new session (with no
/// lease: it is created with one that is already expired, then released).
async fn resolve_session(app: &PrewarmApp, user: &UserId, focus: &Focus) -> Result<SessionView, StoreError> {
    match &focus.session {
        Some(id) => {
            let mut s = app.store.session(user, id).await?.ok_or(StoreError::NotFound)?;
            if s.view.status == SessionStatus::Closed {
                return Err(StoreError::Closed);
            }
            record_focus(&app.store, user, id, focus).await?;
            s.view.context_type = focus.context_type;
            s.view.entity_id = focus.entity_id.clone();
            s.view.focus = focus.focus.clone();
            Ok(s.view)
        }
        None => {
            let view = SessionView::new(focus.context_type, focus.entity_id.clone(), focus.focus.clone());
            // `create_session` always leases; an expired lease blocks no turn,
            // and releasing it leaves the session as if never leased.
            let lease = Lease { turn_id: TurnId::new(), until_ms: 0 };
            // No turn runs here: the run claim is the lease's own, never retried.
            let run = RunId::parse(lease.turn_id.as_str()).expect("turn ids are valid run ids");
            let s = app.store.create_session(user, &view, &lease, &run).await?;
            app.store.release_lease(user, &view.id, &lease.turn_id).await?;
            Ok(s.view)
        }
    }
}

/// Sets the session's scope and focus (the stream compares a turn's focus with
/// this one). Refused as `NotFound` / `Closed` unless the session is active.
async fn record_focus(
    store: &DynamoStore,
    user: &UserId,
    session: &SessionId,
    focus: &Focus,
) -> Result<(), StoreError> {
    let s = |v: &str| AttributeValue::S(v.to_string());
    let mut set = vec!["context_type = :ct"];
    let mut remove = vec![];
    let mut req = store
        .client()
        .update_item()
        .table_name(store.table())
        .key("pk", s(&crate::store::keys::session_pk(user, session)))
        .key("sk", s(crate::store::keys::SESSION_SK))
        .condition_expression("attribute_exists(pk) AND #st = :active")
        .expression_attribute_names("#st", "status")
        .expression_attribute_values(":active", s("active"))
        .expression_attribute_values(":ct", s(focus.context_type.as_str()));
    match &focus.entity_id {
        Some(e) => {
            set.push("entity_id = :e");
            req = req.expression_attribute_values(":e", s(e));
        }
        None => remove.push("entity_id"),
    }
    match &focus.focus {
        Some(f) => {
            set.push("focus = :f");
            req = req.expression_attribute_values(":f", s(&f.to_string()));
        }
        None => remove.push("focus"),
    }
    let mut expr = format!("SET {}", set.join(", "));
    if !remove.is_empty() {
        expr.push_str(&format!(" REMOVE {}", remove.join(", ")));
    }
    match req.update_expression(expr).send().instrument(tracing::debug_span!("ddb.update_item", what = "focus")).await {
        Ok(_) => Ok(()),
        Err(e) if e.as_service_error().is_some_and(|se| se.is_conditional_check_failed_exception()) => {
            // Deleted or closed since it was read.
            Err(StoreError::NotFound)
        }
        Err(e) => Err(StoreError::Backend(format!("{e:?}"))),
    }
}

/// Whether a Lambda payload is the EventBridge schedule (not a request).
pub fn is_scheduled_event(payload: &Value) -> bool {
    payload.get("source").and_then(Value::as_str) == Some("aws.events")
        || payload.get("detail-type").and_then(Value::as_str) == Some("Scheduled Event")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_validated_before_any_io() {
        assert!(parse_request(br#"{"context_type":"global"}"#).is_ok());
        for body in [
            &b"not json"[..],
            br#"{}"#,
            br#"{"context_type":"nope"}"#,
            br#"{"context_type":"project"}"#,
            br#"{"context_type":"entity","project_id":"p1"}"#,
            br#"{"context_type":"project","project_id":"bad id!"}"#,
            br#"{"context_type":"global","extra":1}"#,
            br#"{"context_type":"daily_brief_update","timezone":"Mars/Olympus"}"#,
            br#"{"context_type":"entity","project_id":"p1","entity_id":"e1","entity_type":"spaceship"}"#,
        ] {
            let e = parse_request(body).err().unwrap_or_else(|| panic!("{:?} accepted", String::from_utf8_lossy(body)));
            assert!(matches!(e, PrewarmError::Invalid { .. }), "{e:?}");
        }
    }

    #[test]
    fn the_recorded_focus_gives_the_stream_the_same_scope() {
        let f = parse_request(br#"{"context_type":"entity","project_id":"p1","entity_id":"e1","entity_type":"task"}"#)
            .unwrap();
        let again = crate::tools::ToolScope::from_focus(f.context_type, f.entity_id.as_deref(), f.focus.as_ref());
        assert_eq!(again, f.scope);
        assert!(matches!(f.scope, crate::tools::ToolScope::Entity { kind: Some(EntityKind::Task), .. }));
    }

    #[test]
    fn scheduled_events_are_told_from_requests() {
        assert!(is_scheduled_event(&json!({"source": "aws.events", "detail-type": "Scheduled Event"})));
        assert!(!is_scheduled_event(&json!({"version": "2.0", "rawPath": "/"})));
    }
}
