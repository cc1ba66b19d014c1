//! The entities function's edge: a function-URL request in, a JSON response
//! out. Routing, body and query parsing, and the one mapping of
//! [`EntityError`] to HTTP; everything else is [`EntityService`].
//!
//! Errors are `{"error": {"code", "message"}}` (409s add `current_version`).
//! `GET /openapi.json` is public; every other route needs a bearer token.
//! Routes are listed once, in [`routes`], which both the OpenAPI document and
//! the tests read.

use super::error::EntityError;
use super::model::*;
use super::service::{EntityService, PageRequest};
use crate::auth::Authenticator;
use crate::config::Config;
use crate::edge::{json, json_error, query_params, ResponseBody};
use crate::ids::{EntityId, ProjectId, UserId};
use crate::store::entities::EntityStore;
use http::{Method, Response, StatusCode};
use serde::Serialize;
use std::collections::HashMap;
use std::sync::Arc;
use utoipa::openapi::path::{HttpMethod, OperationBuilder, ParameterBuilder, ParameterIn};
use utoipa::openapi::request_body::RequestBodyBuilder;
use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, Ref, Schema, Type};
use utoipa::openapi::{Content, Required, ResponseBuilder};
use utoipa::openapi::{OpenApi as OpenApiDoc, RefOr};
use utoipa::OpenApi;

/// The largest request body accepted (a document of up to
/// [`super::service::MAX_CONTENT_BYTES`] fits, JSON-escaped).
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// Everything the entities function needs, built once per container.
#[derive(Clone)]
pub struct EntitiesApp {
    pub service: EntityService,
    pub auth: Authenticator,
    openapi: Arc<String>,
}

impl EntitiesApp {
    pub async fn from_config(config: Config) -> EntitiesApp {
        let sdk = aws_config::load_from_env().await;
        EntitiesApp::with_dynamo(config, aws_sdk_dynamodb::Client::new(&sdk))
    }

    pub fn with_dynamo(config: Config, dynamo: aws_sdk_dynamodb::Client) -> EntitiesApp {
        EntitiesApp {
            service: EntityService::new(EntityStore::new(dynamo, config.table_name.clone())),
            auth: crate::edge::authenticator(&config.auth),
            openapi: Arc::new(openapi_json()),
        }
    }
}

/// One route of the API.
#[derive(Clone)]
pub struct RouteDoc {
    pub method: Method,
    /// OpenAPI path template, e.g. `/projects/{project_id}/tasks/{entity_id}`.
    pub path: String,
    pub summary: String,
    /// Component name of the request body, if any.
    pub body: Option<String>,
    /// The success status and the response's schema.
    pub status: u16,
    pub response: RefOr<Schema>,
    pub query: &'static [&'static str],
}

fn r(name: &str) -> RefOr<Schema> {
    RefOr::Ref(Ref::from_schema_name(name))
}

fn write_of(data: RefOr<Schema>) -> RefOr<Schema> {
    ObjectBuilder::new()
        .property("data", data)
        .property("patch", r("EntityPatch"))
        .required("data")
        .required("patch")
        .into()
}

fn page_of(name: &str) -> RefOr<Schema> {
    ObjectBuilder::new()
        .property("items", ArrayBuilder::new().items(r(name)))
        .property("next_cursor", ObjectBuilder::new().schema_type(Type::String))
        .required("items")
        .into()
}

fn fields_schema(kind: EntityKind) -> &'static str {
    match kind {
        EntityKind::Document => "DocumentFields",
        EntityKind::Task => "TaskFields",
        EntityKind::Goal => "GoalFields",
        EntityKind::Plan => "PlanFields",
        EntityKind::Milestone => "MilestoneFields",
        EntityKind::Risk => "RiskFields",
        EntityKind::Requirement => "RequirementFields",
    }
}

/// Every route, in the order the OpenAPI document lists them.
pub fn routes() -> Vec<RouteDoc> {
    let route = |method: Method, path: &str, summary: &str, body: Option<&str>, status: u16, response| RouteDoc {
        method,
        path: path.to_string(),
        summary: summary.to_string(),
        body: body.map(str::to_string),
        status,
        response,
        query: &[],
    };
    let page = &["limit", "cursor"];
    let mut v = vec![
        route(Method::GET, "/openapi.json", "This document", None, 200, ObjectBuilder::new().into()),
        RouteDoc {
            query: page,
            ..route(Method::GET, "/projects", "The user's projects", None, 200, page_of("Project"))
        },
        route(
            Method::POST,
            "/projects",
            "Create a project with its context document",
            Some("NewProject"),
            201,
            write_of(r("CreatedProject")),
        ),
        route(Method::GET, "/projects/{project_id}", "A project", None, 200, r("Project")),
        route(
            Method::PATCH,
            "/projects/{project_id}",
            "Update a project's fields (partial; If-Match or expected_version)",
            Some("ProjectFields"),
            200,
            write_of(r("Project")),
        ),
        route(
            Method::DELETE,
            "/projects/{project_id}",
            "Delete a project and everything in it",
            None,
            200,
            write_of(r("Deleted")),
        ),
        RouteDoc {
            query: &["entity_id"],
            ..route(
                Method::GET,
                "/projects/{project_id}/edges",
                "Edges of the project, or of one entity",
                None,
                200,
                r("EdgeList"),
            )
        },
        route(
            Method::POST,
            "/projects/{project_id}/edges",
            "Link two entities",
            Some("Edge"),
            201,
            write_of(r("Edge")),
        ),
        route(
            Method::DELETE,
            "/projects/{project_id}/edges",
            "Unlink two entities",
            Some("Edge"),
            200,
            write_of(r("Edge")),
        ),
        route(Method::GET, "/projects/{project_id}/doc-structure", "The document tree", None, 200, r("DocStructure")),
        route(
            Method::POST,
            "/projects/{project_id}/doc-structure/move",
            "Move or reorder a document in the tree",
            Some("MoveDocument"),
            200,
            write_of(r("DocStructure")),
        ),
        route(
            Method::POST,
            "/projects/{project_id}/documents/metadata",
            "Title, description, length and update time of documents (never content)",
            Some("MetadataRequest"),
            200,
            r("MetadataResponse"),
        ),
        RouteDoc {
            query: &["q", "project_id", "limit"],
            ..route(
                Method::GET,
                "/search",
                "Search names, descriptions and content (case-insensitive)",
                None,
                200,
                r("SearchResults"),
            )
        },
    ];
    for kind in EntityKind::ALL {
        let list = format!("/projects/{{project_id}}/{}", kind.plural());
        let one = format!("{list}/{{entity_id}}");
        let create_body = if kind == EntityKind::Document { "NewDocument" } else { fields_schema(kind) };
        v.push(RouteDoc {
            query: page,
            ..route(Method::GET, &list, &format!("List {}", kind.plural()), None, 200, page_of("Entity"))
        });
        v.push(route(
            Method::POST,
            &list,
            &format!("Create a {}", kind.as_str()),
            Some(create_body),
            201,
            write_of(r("Entity")),
        ));
        v.push(route(
            Method::GET,
            &one,
            &format!("A {} (documents with content)", kind.as_str()),
            None,
            200,
            r("Entity"),
        ));
        v.push(route(
            Method::PATCH,
            &one,
            &format!("Update a {} (partial; If-Match or expected_version)", kind.as_str()),
            Some(fields_schema(kind)),
            200,
            write_of(r("Entity")),
        ));
        v.push(route(
            Method::DELETE,
            &one,
            &format!("Delete a {} and its edges", kind.as_str()),
            None,
            200,
            write_of(r("Deleted")),
        ));
    }
    v
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "agentic-chat entities",
        description = "The ontology over HTTP: projects, their entities, edges and document tree."
    ),
    components(schemas(
        Project,
        ProjectFields,
        NewProject,
        ProjectState,
        CreatedProject,
        Entity,
        EntityFields,
        EntityKind,
        RecordKind,
        NewDocument,
        DocumentFields,
        TaskFields,
        GoalFields,
        PlanFields,
        MilestoneFields,
        RiskFields,
        RequirementFields,
        TaskState,
        GoalState,
        PlanState,
        MilestoneState,
        RiskState,
        RequirementState,
        Impact,
        Priority,
        Edge,
        EdgeEnd,
        EdgeList,
        DocNode,
        DocStructure,
        MoveDocument,
        MetadataRequest,
        MetadataResponse,
        DocumentMetadata,
        EntityPatch,
        Change,
        Record,
        Deleted,
        SearchResults,
        SearchHit,
        MatchedIn,
    ))
)]
struct ApiDoc;

fn method(m: &Method) -> HttpMethod {
    match *m {
        Method::POST => HttpMethod::Post,
        Method::PATCH => HttpMethod::Patch,
        Method::DELETE => HttpMethod::Delete,
        _ => HttpMethod::Get,
    }
}

/// The OpenAPI document, generated from the Rust types and [`routes`].
pub fn openapi() -> OpenApiDoc {
    let mut doc = ApiDoc::openapi();
    let error = ObjectBuilder::new()
        .property(
            "error",
            ObjectBuilder::new()
                .property("code", ObjectBuilder::new().schema_type(Type::String))
                .property("message", ObjectBuilder::new().schema_type(Type::String))
                .property(
                    "current_version",
                    ObjectBuilder::new().schema_type(Type::Integer).description(Some("409 only")),
                )
                .required("code")
                .required("message"),
        )
        .required("error");
    if let Some(c) = doc.components.as_mut() {
        c.schemas.insert("Error".into(), error.into());
    }
    for rt in routes() {
        let mut op = OperationBuilder::new()
            .summary(Some(rt.summary.clone()))
            .response(
                rt.status.to_string(),
                ResponseBuilder::new().description("OK").content("application/json", Content::new(Some(rt.response))),
            )
            .response(
                "default",
                ResponseBuilder::new()
                    .description("An error: see docs/entities.md for the codes")
                    .content("application/json", Content::new(Some(r("Error")))),
            );
        for p in ["project_id", "entity_id"] {
            if rt.path.contains(&format!("{{{p}}}")) {
                op = op.parameter(
                    ParameterBuilder::new()
                        .name(p)
                        .parameter_in(ParameterIn::Path)
                        .required(Required::True)
                        .schema(Some(ObjectBuilder::new().schema_type(Type::String))),
                );
            }
        }
        for q in rt.query {
            op = op.parameter(
                ParameterBuilder::new()
                    .name(*q)
                    .parameter_in(ParameterIn::Query)
                    .required(if *q == "q" { Required::True } else { Required::False })
                    .schema(Some(ObjectBuilder::new().schema_type(Type::String))),
            );
        }
        if rt.method == Method::PATCH || rt.method == Method::DELETE && rt.body.is_none() {
            op = op.parameter(
                ParameterBuilder::new()
                    .name("If-Match")
                    .parameter_in(ParameterIn::Header)
                    .required(Required::False)
                    .description(Some("The version last seen; a stale one gets 409"))
                    .schema(Some(ObjectBuilder::new().schema_type(Type::String))),
            );
        }
        if let Some(b) = &rt.body {
            op = op.request_body(Some(
                RequestBodyBuilder::new()
                    .required(Some(Required::True))
                    .content("application/json", Content::new(Some(r(b))))
                    .build(),
            ));
        }
        doc.paths.add_path_operation(&rt.path, vec![method(&rt.method)], op);
    }
    doc
}

/// The OpenAPI document as served (pretty JSON, stable order).
pub fn openapi_json() -> String {
    openapi().to_pretty_json().expect("the OpenAPI document serializes")
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
    serde_json::from_slice(b).map_err(|e| EntityError::from_json(&e))
}

fn object(req: &lambda_http::Request) -> Result<serde_json::Map<String, serde_json::Value>, EntityError> {
    match body::<serde_json::Value>(req)? {
        serde_json::Value::Object(m) => Ok(m),
        _ => Err(EntityError::bad("wrong_type", "the body must be a JSON object")),
    }
}

fn limit(q: &HashMap<String, String>) -> Result<Option<usize>, EntityError> {
    q.get("limit")
        .map(|l| l.parse().map_err(|_| EntityError::bad("invalid_value", "limit: expected a number")))
        .transpose()
}

fn page(q: &HashMap<String, String>) -> Result<PageRequest, EntityError> {
    Ok(PageRequest { limit: limit(q)?, cursor: q.get("cursor").cloned() })
}

/// `If-Match: 7`, `"7"` or `W/"7"`.
fn if_match(req: &lambda_http::Request) -> Result<Option<u64>, EntityError> {
    let Some(v) = req.headers().get(http::header::IF_MATCH) else { return Ok(None) };
    let s = v.to_str().unwrap_or("").trim().trim_start_matches("W/").trim_matches('"');
    s.parse()
        .map(Some)
        .map_err(|_| EntityError::bad("invalid_value", "If-Match: expected a version number, e.g. \"7\""))
}

/// The expected version from `If-Match` or the body's `expected_version`
/// (removed from the patch); both present and different is refused.
fn expected_version(
    req: &lambda_http::Request,
    patch: &mut serde_json::Map<String, serde_json::Value>,
) -> Result<Option<u64>, EntityError> {
    let header = if_match(req)?;
    let field = match patch.remove("expected_version") {
        None | Some(serde_json::Value::Null) => None,
        Some(v) => Some(
            v.as_u64().ok_or_else(|| EntityError::bad("wrong_type", "expected_version: expected a version number"))?,
        ),
    };
    match (header, field) {
        (Some(h), Some(f)) if h != f => {
            Err(EntityError::bad("invalid_value", "If-Match and expected_version disagree"))
        }
        (h, f) => Ok(h.or(f)),
    }
}

fn ok<T: Serialize>(status: StatusCode, v: &T) -> Result<Response<ResponseBody>, EntityError> {
    Ok(json(status, v))
}

/// The path below the function URL: `cargo lambda watch` serves functions
/// under `/lambda-url/<name>`, a function URL at `/`.
fn segments(path: &str) -> Vec<&str> {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    if segs.first() == Some(&"lambda-url") {
        segs.into_iter().skip(2).collect()
    } else {
        segs
    }
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
            let expected = expected_version(req, &mut changes)?;
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
            let expected = expected_version(req, &mut changes)?;
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
        _ => Ok(not_routed(segs)),
    }
}

/// 405 for a known path with another method, 404 otherwise.
fn not_routed(segs: &[&str]) -> Response<ResponseBody> {
    let known = matches!(
        segs,
        ["projects"]
            | ["projects", _]
            | ["projects", _, "edges" | "doc-structure"]
            | ["projects", _, "doc-structure", "move"]
            | ["projects", _, "documents", "metadata"]
            | ["search"]
            | ["openapi.json"]
    ) || matches!(segs, ["projects", _, k] | ["projects", _, k, _] if EntityKind::from_plural(k).is_some());
    if known {
        json_error(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", "this route does not take that method")
    } else {
        json_error(StatusCode::NOT_FOUND, "route_not_found", "no such route: see GET /openapi.json")
    }
}

/// The entities function's handler.
pub async fn handle_entities(app: &EntitiesApp, req: lambda_http::Request) -> Response<ResponseBody> {
    if req.method() == Method::OPTIONS {
        // CORS is answered by the function URL's configuration.
        return Response::builder().status(StatusCode::NO_CONTENT).body(ResponseBody::Full(None)).expect("valid");
    }
    let path = req.uri().path().to_string();
    let segs = segments(&path);
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
}
