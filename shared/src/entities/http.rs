//! The entities function's edge: a function-URL request in, a JSON response
//! out. Routing, body and query parsing, and the one mapping of
//! [`EntityError`] to HTTP; everything else is [`EntityService`].
//!
//! Errors are `{"error": {"code", "message"}}` (409s add `current_version`).
//! `GET /openapi.json` is public; every other route needs a bearer token.
//! Routes are listed once, in [`routes`] ([`super::openapi`]), which the
//! OpenAPI document, the 405 answers' `Allow` header and the tests read.
//! Query strings and headers are read with the grammar the document states
//! (integers by [`super::rules`], `If-Match` by [`IF_MATCH_PATTERN`]).

use super::error::EntityError;
use super::model::*;
use super::rules::{PAGE_LIMIT, VERSION};
use super::service::{EntityService, PageRequest};
use crate::auth::Authenticator;
use crate::config::Config;
use crate::edge::{json, json_error, query_params, ResponseBody};
use crate::entities::store::DynamoEntityStore;
use crate::ids::{EntityId, ProjectId, UserId};
use http::{Method, Response, StatusCode};
use serde::Serialize;
use std::collections::HashMap;
use std::sync::Arc;

pub use super::openapi::{openapi, openapi_json, routes, RouteDoc, IF_MATCH_PATTERN};

/// The largest request body accepted (a document of up to
/// [`super::service::MAX_CONTENT_BYTES`] fits, JSON-escaped).
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// Everything the entities function needs, built once per container.
#[derive(Clone)]
pub struct EntitiesApp {
    pub service: EntityService,
    pub auth: Authenticator,
    openapi: Arc<String>,
    /// `CORS_ALLOW_ORIGIN` (local stacks; see [`crate::edge::with_cors`]).
    cors_allow_origin: Option<String>,
}

impl EntitiesApp {
    pub async fn from_config(config: Config) -> EntitiesApp {
        let sdk = aws_config::load_from_env().await;
        EntitiesApp::with_dynamo(config, aws_sdk_dynamodb::Client::new(&sdk))
    }

    pub fn with_dynamo(config: Config, dynamo: aws_sdk_dynamodb::Client) -> EntitiesApp {
        EntitiesApp {
            service: EntityService::new(DynamoEntityStore::new(dynamo, config.table_name.clone())),
            auth: crate::edge::authenticator(&config.auth),
            openapi: Arc::new(openapi_json()),
            cors_allow_origin: config.cors_allow_origin.clone(),
        }
    }
}

#[derive(Serialize)]
struct ErrorOut<'a> {
    error: ErrorDetailOut<'a>,
}

#[derive(Serialize)]
struct ErrorDetailOut<'a> {
    code: &'a str,
    message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    current_version: Option<u64>,
}

/// The one mapping of [`EntityError`] to a response.
pub fn error_response(e: &EntityError) -> Response<ResponseBody> {
    let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if status.is_server_error() {
        tracing::error!(code = e.code(), error = %e, "entities request failed");
    } else {
        tracing::info!(code = e.code(), "entities request refused");
    }
    let current_version = match e {
        EntityError::Conflict { current_version, .. } => Some(*current_version),
        _ => None,
    };
    json(status, &ErrorOut { error: ErrorDetailOut { code: e.code(), message: e.to_string(), current_version } })
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

fn body<T: serde::de::DeserializeOwned>(req: &lambda_http::Request) -> Result<T, EntityError> {
    let b = req.body().as_ref();
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

fn object(req: &lambda_http::Request) -> Result<serde_json::Map<String, serde_json::Value>, EntityError> {
    match body::<serde_json::Value>(req)? {
        serde_json::Value::Object(m) => Ok(m),
        _ => Err(EntityError::bad("wrong_type", "the body must be a JSON object")),
    }
}

fn limit(q: &HashMap<String, String>) -> Result<Option<usize>, EntityError> {
    let Some(l) = q.get("limit") else { return Ok(None) };
    let n = PAGE_LIMIT.from_text(l).ok_or_else(|| {
        EntityError::bad(
            "invalid_value",
            format!("limit: expected an integer from {} to {}", PAGE_LIMIT.min, PAGE_LIMIT.max),
        )
    })?;
    Ok(Some(n as usize))
}

fn page(q: &HashMap<String, String>) -> Result<PageRequest, EntityError> {
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
fn if_match(req: &lambda_http::Request) -> Result<Option<u64>, EntityError> {
    let Some(v) = req.headers().get(http::header::IF_MATCH) else { return Ok(None) };
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
    req: &lambda_http::Request,
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

fn ok<T: Serialize>(status: StatusCode, v: &T) -> Result<Response<ResponseBody>, EntityError> {
    Ok(json(status, v))
}

/// The path below the function URL, one percent-decoded segment each:
/// `cargo lambda watch` serves functions under `/lambda-url/<name>`, a
/// function URL at `/`.
fn segments(path: &str) -> Vec<String> {
    let segs: Vec<String> = path.split('/').filter(|s| !s.is_empty()).map(decode_segment).collect();
    if segs.first().map(String::as_str) == Some("lambda-url") {
        segs.into_iter().skip(2).collect()
    } else {
        segs
    }
}

/// A path segment with its `%XX` escapes decoded (RFC 3986: ids may hold
/// `:`, `|` and `@`, which clients escape). Bytes that are not UTF-8 become
/// U+FFFD, which no id accepts.
fn decode_segment(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = b.get(i + 1..i + 3).filter(|h| h.iter().all(u8::is_ascii_hexdigit));
        match (b[i], hex) {
            (b'%', Some(h)) => {
                out.push(u8::from_str_radix(std::str::from_utf8(h).expect("hex digits are ASCII"), 16).expect("hex"));
                i += 3;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

async fn route(
    svc: &EntityService,
    user: &UserId,
    req: &lambda_http::Request,
    segs: &[&str],
) -> Result<Response<ResponseBody>, EntityError> {
    let q = query_params(req.uri().query());
    let m = req.method().clone();
    let (get, post, patch, delete) = (Method::GET, Method::POST, Method::PATCH, Method::DELETE);
    match segs {
        ["projects"] if m == get => ok(StatusCode::OK, &svc.list_projects(user, page(&q)?).await?),
        ["projects"] if m == post => ok(StatusCode::CREATED, &svc.create_project(user, body(req)?).await?),
        ["projects", p] if m == get => ok(StatusCode::OK, &svc.get_project(user, &project_id(p)?).await?),
        ["projects", p] if m == patch => {
            let p = project_id(p)?;
            let mut changes = object(req)?;
            let expected = match expected_version(req, &mut changes)? {
                Expected::One(v) => v,
                Expected::Both(h, b) => return Err(conflict((h, b), svc.get_project(user, &p).await?.version)),
            };
            ok(StatusCode::OK, &svc.update_project(user, &p, changes, expected).await?)
        }
        ["projects", p] if m == delete => {
            ok(StatusCode::OK, &svc.delete_project(user, &project_id(p)?, if_match(req)?).await?)
        }
        ["projects", p, "edges"] if m == get => {
            let p = project_id(p)?;
            let of = q.get("entity_id").map(|e| entity_id(e)).transpose()?;
            ok(StatusCode::OK, &EdgeList { items: svc.edges(user, &p, of.as_ref()).await? })
        }
        ["projects", p, "edges"] if m == post => {
            let p = project_id(p)?;
            ok(StatusCode::CREATED, &svc.link(user, &p, body(req)?).await?)
        }
        ["projects", p, "edges"] if m == delete => {
            let p = project_id(p)?;
            ok(StatusCode::OK, &svc.unlink(user, &p, body(req)?).await?)
        }
        ["projects", p, "doc-structure"] if m == get => {
            ok(StatusCode::OK, &svc.doc_structure(user, &project_id(p)?).await?)
        }
        ["projects", p, "doc-structure", "move"] if m == post => {
            let p = project_id(p)?;
            ok(StatusCode::OK, &svc.move_document(user, &p, body(req)?).await?)
        }
        ["projects", p, "documents", "metadata"] if m == post => {
            let p = project_id(p)?;
            let r: MetadataRequest = body(req)?;
            ok(StatusCode::OK, &MetadataResponse { documents: svc.document_metadata(user, &p, &r.document_ids).await? })
        }
        ["projects", p, k] if m == get => {
            let (p, k) = (project_id(p)?, kind(k)?);
            ok(StatusCode::OK, &svc.list(user, &p, k, page(&q)?).await?)
        }
        ["projects", p, k] if m == post => {
            let (p, k) = (project_id(p)?, kind(k)?);
            let new = if k == EntityKind::Document {
                CreateEntity::from(body::<NewDocument>(req)?)
            } else {
                let fields = EntityFields::from_object(k, object(req)?).map_err(|e| EntityError::from_json(&e))?;
                CreateEntity::new(fields)
            };
            ok(StatusCode::CREATED, &svc.create(user, &p, new).await?)
        }
        ["projects", p, k, e] if m == get => {
            let (p, k, e) = (project_id(p)?, kind(k)?, entity_id(e)?);
            ok(StatusCode::OK, &svc.get(user, &p, k, &e).await?)
        }
        ["projects", p, k, e] if m == patch => {
            let (p, k, e) = (project_id(p)?, kind(k)?, entity_id(e)?);
            let mut changes = object(req)?;
            let expected = match expected_version(req, &mut changes)? {
                Expected::One(v) => v,
                Expected::Both(h, b) => return Err(conflict((h, b), svc.get(user, &p, k, &e).await?.version)),
            };
            let update = UpdateEntity { patch: changes, expected_version: expected };
            ok(StatusCode::OK, &svc.update(user, &p, k, &e, update).await?)
        }
        ["projects", p, k, e] if m == delete => {
            let (p, k, e) = (project_id(p)?, kind(k)?, entity_id(e)?);
            ok(StatusCode::OK, &svc.delete(user, &p, k, &e, if_match(req)?).await?)
        }
        ["search"] if m == get => {
            let text = q.get("q").ok_or_else(|| EntityError::bad("missing_field", "q is required"))?;
            let p = q.get("project_id").map(|p| project_id(p)).transpose()?;
            ok(StatusCode::OK, &svc.search(user, text, p.as_ref(), limit(&q)?).await?)
        }
        _ => Ok(json_error(StatusCode::NOT_FOUND, "route_not_found", "no such route: see GET /openapi.json")),
    }
}

/// Each route of [`routes`] as (method, path template segments), built once.
fn route_table() -> &'static [(Method, Vec<String>)] {
    static TABLE: std::sync::OnceLock<Vec<(Method, Vec<String>)>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let split = |p: &str| p.split('/').filter(|s| !s.is_empty()).map(str::to_string).collect();
        routes().into_iter().map(|rt| (rt.method, split(&rt.path))).collect()
    })
}

/// The methods [`routes`] lists for the path the segments name (none when
/// no route has it), in the document's order. As OpenAPI matches paths, a
/// template with more literal segments wins: `/projects/{id}/documents/metadata`
/// is not a document named `metadata`.
pub fn allowed_methods(segs: &[&str]) -> Vec<Method> {
    let matches = |t: &[String]| t.len() == segs.len() && t.iter().zip(segs).all(|(t, s)| t.starts_with('{') || t == s);
    let literals = |t: &[String]| t.iter().filter(|s| !s.starts_with('{')).count();
    let found: Vec<&(Method, Vec<String>)> = route_table().iter().filter(|(_, t)| matches(t)).collect();
    let most = found.iter().map(|(_, t)| literals(t)).max().unwrap_or(0);
    let mut methods: Vec<Method> = vec![];
    for (m, _) in found.into_iter().filter(|(_, t)| literals(t) == most) {
        if !methods.contains(m) {
            methods.push(m.clone());
        }
    }
    methods
}

/// 405 with `Allow` (RFC 9110 §15.5.6) naming the methods the path takes.
fn method_not_allowed(allowed: &[Method]) -> Response<ResponseBody> {
    let allow = allowed.iter().map(Method::as_str).collect::<Vec<_>>().join(", ");
    let mut resp =
        json_error(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", format!("this route takes {allow}"));
    let value = http::HeaderValue::from_str(&allow).expect("method names are header text");
    resp.headers_mut().insert(http::header::ALLOW, value);
    resp
}

/// The entities function's handler.
/// Every answer, preflight included, carries CORS headers when
/// `CORS_ALLOW_ORIGIN` is set (local stacks; see [`crate::edge::with_cors`]).
pub async fn handle_entities(app: &EntitiesApp, req: lambda_http::Request) -> Response<ResponseBody> {
    let resp = crate::edge::or_internal_error(route_entities(app, req)).await;
    crate::edge::with_cors(app.cors_allow_origin.as_deref(), resp)
}

async fn route_entities(app: &EntitiesApp, req: lambda_http::Request) -> Response<ResponseBody> {
    if req.method() == Method::OPTIONS {
        // A preflight: on AWS the function URL's `Cors` answers it before us.
        return crate::edge::no_content();
    }
    let path = req.uri().path().to_string();
    let owned = segments(&path);
    let segs: Vec<&str> = owned.iter().map(String::as_str).collect();
    if segs == ["openapi.json"] && req.method() == Method::GET {
        return Response::builder()
            .status(StatusCode::OK)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(ResponseBody::Full(Some(bytes::Bytes::from(app.openapi.as_bytes().to_vec()))))
            .expect("valid");
    }
    let user = match app.auth.authenticate(req.headers()).await {
        Ok(u) => u,
        Err(e) => {
            let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::UNAUTHORIZED);
            return json_error(status, e.code(), e.to_string());
        }
    };
    if req.body().len() > MAX_BODY_BYTES {
        return error_response(&EntityError::TooLarge { what: "the request body", limit: MAX_BODY_BYTES });
    }
    // A documented path answers an undocumented method with 405 before any
    // route reads it (`/projects/{id}/doc-structure` is not a kind to POST to).
    let allowed = allowed_methods(&segs);
    if !allowed.is_empty() && !allowed.contains(req.method()) {
        return method_not_allowed(&allowed);
    }
    match route(&app.service, &user, &req, &segs).await {
        Ok(resp) => resp,
        Err(e) => error_response(&e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lambda_url_prefix_is_ignored() {
        assert_eq!(segments("/lambda-url/entities/projects/x"), vec!["projects", "x"]);
        assert_eq!(segments("/projects/"), vec!["projects"]);
    }

    #[test]
    fn path_segments_are_percent_decoded() {
        assert_eq!(segments("/projects/a%3Ab%7Cc%40d"), vec!["projects", "a:b|c@d"]);
        assert_eq!(segments("/projects/a%2Fb+c"), vec!["projects", "a/b+c"], "an escaped / stays in its segment");
        assert_eq!(segments("/projects/%zz%4%+1"), vec!["projects", "%zz%4%+1"], "broken escapes are kept");
        assert_eq!(segments("/projects/%FF"), vec!["projects", "\u{fffd}"]);
    }

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

    #[test]
    fn allow_lists_the_methods_of_the_path() {
        let allow = |p: &str| {
            let segs: Vec<&str> = p.split('/').filter(|s| !s.is_empty()).collect();
            allowed_methods(&segs).iter().map(|m| m.to_string()).collect::<Vec<_>>().join(", ")
        };
        assert_eq!(allow("/projects/p/tasks/t"), "GET, PATCH, DELETE");
        assert_eq!(allow("/projects/p/edges"), "GET, POST, DELETE");
        assert_eq!(allow("/projects"), "GET, POST");
        assert_eq!(allow("/openapi.json"), "GET");
        assert_eq!(allow("/projects/p/documents/metadata"), "POST", "the literal path wins");
        assert_eq!(allow("/projects/p/documents/d"), "GET, PATCH, DELETE");
        assert_eq!(allow("/projects/p/widgets"), "");
    }
}
