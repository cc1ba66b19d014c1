//! The entities function's router: the routes of [`super::entities_doc`]
//! (listed once) become the axum routes and the OpenAPI operations together;
//! each runs the [`EntityService`] call its [`Op`] names. Body, query and
//! `If-Match` parsing, with the grammar the document states (integers by
//! [`crate::entities::rules`], `If-Match` by [`IF_MATCH_PATTERN`]); errors
//! are [`EntityError`]'s one answer (`super::error`). The calendar's
//! `/events` routes are in the same list and run by [`super::events`].
//!
//! `GET /openapi.json` is public; every other route needs a bearer token.

use super::body::JsonBody;
use super::entities_doc::{base_document, http_method, operation, Op};
use super::extract::{HasAuth, Params, Segments, User};
use super::{json, json_error, OpenApiRouter, ResponseBody};
use crate::auth::Authenticator;
use crate::calendar::CalendarService;
use crate::config::Config;
use crate::entities::model::*;
use crate::entities::rules::{PAGE_LIMIT, VERSION};
use crate::entities::service::PageRequest;
use crate::entities::store::DynamoEntityStore;
use crate::entities::{EntityError, EntityService};
use crate::ids::{EntityId, ProjectId, UserId};
use axum::extract::{FromRequestParts, Request, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, MethodRouter};
use bytes::Bytes;
use http::StatusCode;
use serde::Serialize;
use std::sync::Arc;
use tower::ServiceExt;
use utoipa::openapi::path::Paths;

pub use super::entities_doc::{routes, RouteDoc, ERROR_CODES, IF_MATCH_PATTERN};

/// The largest request body accepted (a document of up to
/// [`crate::entities::service::MAX_CONTENT_BYTES`] fits, JSON-escaped).
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// Everything the entities function needs, built once per container.
#[derive(Clone)]
pub struct EntitiesApp {
    pub service: EntityService,
    /// The calendar (`/events`), over the same table.
    pub calendar: CalendarService,
    pub auth: Authenticator,
    openapi: Arc<String>,
    /// `CORS_ALLOW_ORIGIN` (local stacks; see [`super::cors`]).
    cors_allow_origin: Option<String>,
}

impl EntitiesApp {
    pub async fn from_config(config: Config) -> EntitiesApp {
        let sdk = crate::store::aws::load_from_env().await;
        EntitiesApp::with_dynamo(config, aws_sdk_dynamodb::Client::new(&sdk))
    }

    pub fn with_dynamo(config: Config, dynamo: aws_sdk_dynamodb::Client) -> EntitiesApp {
        let service = EntityService::new(DynamoEntityStore::new(dynamo.clone(), config.table_name.clone()));
        EntitiesApp {
            calendar: super::stream::calendar_service(&dynamo, &config.table_name, &service),
            service,
            auth: Authenticator::from_config(&config.auth),
            openapi: Arc::new(openapi_json()),
            cors_allow_origin: config.cors_allow_origin.clone(),
        }
    }
}

impl HasAuth for EntitiesApp {
    fn authenticator(&self) -> &Authenticator {
        &self.auth
    }
}

/// Every route of [`routes`] with its operation, one method router per path
/// (in the document's order), and the paths no route names answered 404.
pub fn api() -> OpenApiRouter<EntitiesApp> {
    let mut by_path: Vec<(String, Vec<RouteDoc>)> = vec![];
    for rt in routes() {
        match by_path.iter_mut().find(|(p, _)| *p == rt.path) {
            Some((_, rts)) => rts.push(rt),
            None => by_path.push((rt.path.clone(), vec![rt])),
        }
    }
    let mut router = OpenApiRouter::with_openapi(base_document());
    for (path, rts) in by_path {
        let mut paths = Paths::new();
        let mut methods: MethodRouter<EntitiesApp> = MethodRouter::new();
        for rt in rts {
            paths.add_path_operation(&path, vec![http_method(&rt.method)], operation(&rt));
            let filter = axum::routing::MethodFilter::try_from(rt.method.clone()).expect("the API's methods");
            let (op, takes_body) = (rt.op, rt.body.is_some());
            methods =
                methods.on(filter, move |state: State<EntitiesApp>, req: Request| serve(op, takes_body, state, req));
        }
        router = router.routes((vec![], paths, methods));
    }
    router
}

/// The OpenAPI document, generated with the routes.
pub fn openapi() -> utoipa::openapi::OpenApi {
    api().into_openapi()
}

/// The OpenAPI document as served (pretty JSON, stable order).
pub fn openapi_json() -> String {
    openapi().to_pretty_json().expect("the OpenAPI document serializes")
}

/// The entities function's router. Every answer, preflight included, carries
/// CORS headers when `CORS_ALLOW_ORIGIN` is set (local stacks).
pub fn router(app: EntitiesApp) -> axum::Router {
    let cors = app.cors_allow_origin.clone();
    let (routes, _) = api().split_for_parts();
    // A kind that is not one of the seven: refused as such, not as a missing route.
    let routes = routes
        .route("/projects/{project_id}/{kind}", any(unknown_kind))
        .route("/projects/{project_id}/{kind}/{entity_id}", any(unknown_kind))
        .fallback(no_route)
        .with_state(app);
    super::finish(routes, cors.as_deref())
}

/// One request through the entities router, in process (tests, local adapters).
pub async fn handle_entities(app: &EntitiesApp, req: lambda_http::Request) -> http::Response<ResponseBody> {
    let resp = router(app.clone()).oneshot(req.map(ResponseBody::new)).await;
    resp.unwrap_or_else(|never| match never {})
}

async fn no_route(State(app): State<EntitiesApp>, req: Request) -> Response {
    let (mut parts, _) = req.into_parts();
    if let Err(e) = User::from_request_parts(&mut parts, &app).await {
        return e.into_response();
    }
    json_error(StatusCode::NOT_FOUND, "route_not_found", "no such route: see GET /openapi.json")
}

async fn unknown_kind(State(app): State<EntitiesApp>, req: Request) -> Response {
    let (mut parts, _) = req.into_parts();
    if let Err(e) = User::from_request_parts(&mut parts, &app).await {
        return e.into_response();
    }
    let segs = match Segments::from_request_parts(&mut parts, &app).await {
        Ok(Segments(s)) => s,
        Err(e) => return e.into_response(),
    };
    let method = parts.method.clone();
    if ![http::Method::GET, http::Method::POST, http::Method::PATCH, http::Method::DELETE].contains(&method)
        || (segs.len() == 2 && method == http::Method::PATCH)
    {
        return no_route_found();
    }
    match project_id(&segs[0]).and_then(|_| kind(&segs[1])) {
        Ok(_) => no_route_found(),
        Err(e) => e.into_response(),
    }
}

fn no_route_found() -> Response {
    json_error(StatusCode::NOT_FOUND, "route_not_found", "no such route: see GET /openapi.json")
}

/// A request's parts the operations read.
pub(super) struct Input {
    pub(super) segs: Vec<String>,
    pub(super) q: Params,
    pub(super) headers: http::HeaderMap,
    pub(super) body: Bytes,
}

/// One route: the document is public; everything else is the user's, with a
/// bounded body (a JSON object where the route takes one: [`JsonBody`]),
/// run by [`run`].
async fn serve(op: Op, takes_body: bool, State(app): State<EntitiesApp>, req: Request) -> Response {
    if op == Op::OpenApi {
        return (StatusCode::OK, [(http::header::CONTENT_TYPE, "application/json")], app.openapi.as_bytes().to_vec())
            .into_response();
    }
    let (mut parts, body) = req.into_parts();
    let user = match User::from_request_parts(&mut parts, &app).await {
        Ok(User(u)) => u,
        Err(e) => return e.into_response(),
    };
    let body = if takes_body {
        JsonBody::read(body, MAX_BODY_BYTES).await.map(|JsonBody(b)| b)
    } else {
        super::body::read(body, MAX_BODY_BYTES).await
    };
    let body = match body {
        Ok(body) => body,
        Err(e) => return e.into_response(),
    };
    let input = async {
        let Segments(segs) = Segments::from_request_parts(&mut parts, &app).await?;
        let q = Params::from_request_parts(&mut parts, &app).await?;
        Ok::<_, super::ApiError>(Input { segs, q, headers: parts.headers.clone(), body })
    };
    match input.await {
        Ok(input) if op.is_event() => {
            super::events::run(op, &app.calendar, &user, &input).await.unwrap_or_else(IntoResponse::into_response)
        }
        Ok(input) => run(op, &app.service, &user, &input).await.unwrap_or_else(IntoResponse::into_response),
        Err(e) => e.into_response(),
    }
}

fn ok<T: Serialize>(status: StatusCode, v: &T) -> Result<Response, EntityError> {
    Ok(json(status, v))
}

/// The service call of `op`, on the request's ids, query and body.
async fn run(op: Op, svc: &EntityService, user: &UserId, req: &Input) -> Result<Response, EntityError> {
    match op {
        Op::List(k) | Op::Create(k) | Op::Get(k) | Op::Update(k) | Op::Delete(k) => {
            run_kind(op, k, svc, user, req).await
        }
        _ => run_project(op, svc, user, req).await,
    }
}

async fn run_project(op: Op, svc: &EntityService, user: &UserId, req: &Input) -> Result<Response, EntityError> {
    let q = &req.q;
    let p = || project_id(&req.segs[0]);
    match op {
        Op::ListProjects => ok(StatusCode::OK, &svc.list_projects(user, page(q)?).await?),
        Op::CreateProject => ok(StatusCode::CREATED, &svc.create_project(user, body(req)?).await?),
        Op::GetProject => ok(StatusCode::OK, &svc.get_project(user, &p()?).await?),
        Op::UpdateProject => {
            let p = p()?;
            let mut changes = object(req)?;
            let expected = match expected_version(req, &mut changes)? {
                Expected::One(v) => v,
                Expected::Both(h, b) => return Err(conflict((h, b), svc.get_project(user, &p).await?.version)),
            };
            ok(StatusCode::OK, &svc.update_project(user, &p, changes, expected).await?)
        }
        Op::DeleteProject => ok(StatusCode::OK, &svc.delete_project(user, &p()?, if_match(req)?).await?),
        Op::Edges => {
            let p = p()?;
            let of = q.get("entity_id").map(|e| entity_id(e)).transpose()?;
            ok(StatusCode::OK, &EdgeList { items: svc.edges(user, &p, of.as_ref()).await? })
        }
        Op::Link => ok(StatusCode::CREATED, &svc.link(user, &p()?, body(req)?).await?),
        Op::Unlink => ok(StatusCode::OK, &svc.unlink(user, &p()?, body(req)?).await?),
        Op::DocStructure => ok(StatusCode::OK, &svc.doc_structure(user, &p()?).await?),
        Op::MoveDocument => ok(StatusCode::OK, &svc.move_document(user, &p()?, body(req)?).await?),
        Op::Reorganize => ok(StatusCode::OK, &svc.reorganize(user, &p()?, body(req)?).await?),
        Op::DocumentMetadata => {
            let p = p()?;
            let r: MetadataRequest = body(req)?;
            ok(StatusCode::OK, &MetadataResponse { documents: svc.document_metadata(user, &p, &r.document_ids).await? })
        }
        Op::Search => {
            let text = q.get("q").ok_or_else(|| EntityError::bad("missing_field", "q is required"))?;
            let p = q.get("project_id").map(|p| project_id(p)).transpose()?;
            ok(StatusCode::OK, &svc.search(user, text, p.as_ref(), limit(q)?).await?)
        }
        Op::OpenApi | Op::List(_) | Op::Create(_) | Op::Get(_) | Op::Update(_) | Op::Delete(_) => {
            unreachable!("served elsewhere")
        }
        Op::ListEvents | Op::FreeTime | Op::CreateEvent | Op::GetEvent | Op::UpdateEvent | Op::DeleteEvent => {
            unreachable!("the calendar's: super::events")
        }
    }
}

async fn run_kind(
    op: Op,
    k: EntityKind,
    svc: &EntityService,
    user: &UserId,
    req: &Input,
) -> Result<Response, EntityError> {
    let p = project_id(&req.segs[0])?;
    let e = || entity_id(&req.segs[1]);
    match op {
        Op::List(_) => ok(StatusCode::OK, &svc.list(user, &p, k, page(&req.q)?).await?),
        Op::Create(_) => {
            let new = if k == EntityKind::Document {
                CreateEntity::from(body::<NewDocument>(req)?)
            } else {
                let fields = EntityFields::from_object(k, object(req)?).map_err(|e| EntityError::from_json(&e))?;
                CreateEntity::new(fields)
            };
            ok(StatusCode::CREATED, &svc.create(user, &p, new).await?)
        }
        Op::Get(_) => ok(StatusCode::OK, &svc.get(user, &p, k, &e()?).await?),
        Op::Update(_) => {
            let e = e()?;
            let mut changes = object(req)?;
            let expected = match expected_version(req, &mut changes)? {
                Expected::One(v) => v,
                Expected::Both(h, b) => return Err(conflict((h, b), svc.get(user, &p, k, &e).await?.version)),
            };
            let update = UpdateEntity { patch: changes, expected_version: expected };
            ok(StatusCode::OK, &svc.update(user, &p, k, &e, update).await?)
        }
        _ => ok(StatusCode::OK, &svc.delete(user, &p, k, &e()?, if_match(req)?).await?),
    }
}

fn project_id(s: &str) -> Result<ProjectId, EntityError> {
    ProjectId::parse(s).map_err(|e| EntityError::InvalidId(e.to_string()))
}

fn entity_id(s: &str) -> Result<EntityId, EntityError> {
    EntityId::parse(s).map_err(|e| EntityError::InvalidId(e.to_string()))
}

fn kind(s: &str) -> Result<EntityKind, EntityError> {
    EntityKind::from_plural(s).ok_or_else(|| EntityError::UnknownKind(s.to_string()))
}

pub(super) fn body<T: serde::de::DeserializeOwned>(req: &Input) -> Result<T, EntityError> {
    let b = req.body.as_ref();
    if b.is_empty() {
        return Err(EntityError::bad("invalid_json", "a JSON body is required"));
    }
    // JSON is UTF-8 (RFC 8259 §8.1): say so before any field is read, so the
    // answer does not depend on where the first bad byte sits.
    if let Err(e) = std::str::from_utf8(b) {
        return Err(EntityError::bad("invalid_json", format!("the body is not UTF-8: {e}")));
    }
    serde_json::from_slice(b).map_err(|e| EntityError::from_json(&e))
}

/// The body as an object (the edge lets no other JSON through: [`JsonBody`]).
fn object(req: &Input) -> Result<serde_json::Map<String, serde_json::Value>, EntityError> {
    match body::<serde_json::Value>(req)? {
        serde_json::Value::Object(m) => Ok(m),
        _ => Err(EntityError::bad("invalid_json", "the body must be a JSON object")),
    }
}

fn limit(q: &Params) -> Result<Option<usize>, EntityError> {
    let Some(l) = q.get("limit") else { return Ok(None) };
    let n = PAGE_LIMIT.from_text(l).ok_or_else(|| {
        EntityError::bad(
            "invalid_value",
            format!("limit: expected an integer from {} to {}", PAGE_LIMIT.min, PAGE_LIMIT.max),
        )
    })?;
    Ok(Some(n as usize))
}

fn page(q: &Params) -> Result<PageRequest, EntityError> {
    Ok(PageRequest { limit: limit(q)?, cursor: q.get("cursor").cloned() })
}

/// A version as [`IF_MATCH_PATTERN`] writes it: `7`, `"7"` or `W/"7"`.
fn version_tag(s: &str) -> Option<u64> {
    fn unquote(t: &str) -> Option<&str> {
        t.strip_prefix('"')?.strip_suffix('"')
    }
    let digits = match s.strip_prefix("W/") {
        Some(weak) => unquote(weak)?,
        None => unquote(s).unwrap_or(s),
    };
    let ok = (1..=19).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_digit());
    ok.then(|| digits.parse().ok()).flatten()
}

/// `If-Match`: `*` (no check) or one version ([`version_tag`]).
pub(super) fn if_match(req: &Input) -> Result<Option<u64>, EntityError> {
    let Some(v) = req.headers.get(http::header::IF_MATCH) else { return Ok(None) };
    let s = v.to_str().unwrap_or("");
    if s == "*" {
        return Ok(None);
    }
    version_tag(s)
        .map(Some)
        .ok_or_else(|| EntityError::bad("invalid_value", "If-Match: expected `*` or a version, as 7, \"7\" or W/\"7\""))
}

/// The version a caller expects.
enum Expected {
    /// From `If-Match` or `expected_version` (or both, agreeing), or none.
    One(Option<u64>),
    /// `If-Match` and `expected_version` disagree: at least one is stale.
    Both(u64, u64),
}

/// Reads `If-Match` and the body's `expected_version` (removed from the patch).
fn expected_version(
    req: &Input,
    patch: &mut serde_json::Map<String, serde_json::Value>,
) -> Result<Expected, EntityError> {
    let header = if_match(req)?;
    let field = match patch.remove("expected_version") {
        None | Some(serde_json::Value::Null) => None,
        Some(v) => Some(VERSION.from_json(&v).ok_or_else(|| {
            let code = if v.is_number() { "invalid_value" } else { "wrong_type" };
            EntityError::bad(code, format!("expected_version: expected an integer from 0 to {}", VERSION.max))
        })? as u64),
    };
    Ok(match (header, field) {
        (Some(h), Some(f)) if h != f => Expected::Both(h, f),
        (h, f) => Expected::One(h.or(f)),
    })
}

/// Two different expected versions cannot both be current: a conflict, named
/// by the one that is stale.
fn conflict((header, body): (u64, u64), current_version: u64) -> EntityError {
    let expected = if header != current_version { header } else { body };
    EntityError::Conflict { expected, current_version }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn if_match_reads_exactly_the_documented_grammar() {
        for (v, n) in [("7", 7), ("\"7\"", 7), ("W/\"7\"", 7), ("0000000000000000007", 7)] {
            assert_eq!(version_tag(v), Some(n), "{v}");
        }
        for v in [
            "",
            "\"",
            "\"\"",
            "W/7",
            "w/\"7\"",
            "\"7",
            "7\"",
            " 7",
            "-7",
            "7.0",
            "12345678901234567890",
            "\"1\", \"2\"",
        ] {
            assert_eq!(version_tag(v), None, "{v}");
        }
    }
}
