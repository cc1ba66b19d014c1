//! The entities API's routes ([`routes`], listed once: the router and its
//! OpenAPI document are both built from them, in [`super::entities`]) and
//! the document's parts, generated from the model's types, the input rules
//! of [`rules`] and the route list, so that it states what the server
//! enforces: every parameter's schema, every body's, and every error status
//! each operation can answer with its codes. The handler ([`super::entities`])
//! routes by the same list (its 405 answers name the methods listed here),
//! and `docs/openapi.json` is a copy a test keeps equal to it.

use super::events::{EventDeleted, FreeSlots};
use crate::calendar::{CalendarEvent, CalendarPatch, EditScope, EventChanges, EventList, NewEvent};
use crate::entities::model::*;
use crate::entities::rules;
use crate::entities::service::MAX_PAGE;
use http::Method;
use std::collections::BTreeMap;
use utoipa::openapi::path::{HttpMethod, OperationBuilder, ParameterBuilder, ParameterIn};
use utoipa::openapi::request_body::RequestBodyBuilder;
use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, OneOfBuilder, Ref, Schema, SchemaType, Type};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{Content, Required, ResponseBuilder};
use utoipa::openapi::{OpenApi as OpenApiDoc, RefOr};
use utoipa::OpenApi;

/// A query parameter some routes take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Param {
    /// `limit`: a page size.
    Limit,
    /// `cursor` of `GET /projects`: a project id.
    ProjectCursor,
    /// `cursor` of an entity listing: an entity id.
    EntityCursor,
    /// `entity_id` of `GET .../edges`.
    OfEntity,
    /// `q` of `GET /search`.
    Q,
    /// `project_id` of `GET /search` and `GET /events`.
    InProject,
    /// `from` / `to` of the calendar's ranges (required).
    From,
    To,
    /// `timezone` of the calendar's reads: an IANA name.
    Timezone,
    /// `duration_minutes` of `GET /events/free` (required).
    DurationMinutes,
    /// `day_start` / `day_end` of `GET /events/free`: `HH:MM`.
    DayStart,
    DayEnd,
    /// `include_weekends` of `GET /events/free`.
    IncludeWeekends,
    /// `instance` / `scope` of an event's update or delete: the target.
    Instance,
    Scope,
}

impl Param {
    pub fn name(self) -> &'static str {
        match self {
            Param::Limit => "limit",
            Param::ProjectCursor | Param::EntityCursor => "cursor",
            Param::OfEntity => "entity_id",
            Param::Q => "q",
            Param::InProject => "project_id",
            Param::From => "from",
            Param::To => "to",
            Param::Timezone => "timezone",
            Param::DurationMinutes => "duration_minutes",
            Param::DayStart => "day_start",
            Param::DayEnd => "day_end",
            Param::IncludeWeekends => "include_weekends",
            Param::Instance => "instance",
            Param::Scope => "scope",
        }
    }

    /// Whether a request without it is refused (`missing_field`, or
    /// `invalid_value` for `q`).
    pub fn required(self) -> bool {
        matches!(self, Param::Q | Param::From | Param::To | Param::DurationMinutes)
    }

    /// The code of a refused value of it.
    fn error_code(self) -> &'static str {
        match self {
            Param::Limit | Param::Q | Param::DurationMinutes | Param::IncludeWeekends | Param::Scope => "invalid_value",
            Param::ProjectCursor | Param::EntityCursor | Param::OfEntity | Param::InProject => "invalid_id",
            Param::From | Param::To | Param::DayStart | Param::DayEnd | Param::Instance => "invalid_time",
            Param::Timezone => "invalid_timezone",
        }
    }

    fn schema(self) -> RefOr<Schema> {
        match self {
            Param::Limit => rules::PAGE_LIMIT
                .schema(false)
                .description(Some(format!("Page size, 1 to {MAX_PAGE}; 50 when absent.")))
                .into(),
            Param::ProjectCursor => described_ref("ProjectId", "The `next_cursor` of the previous page."),
            Param::EntityCursor => described_ref("EntityId", "The `next_cursor` of the previous page."),
            Param::OfEntity => described_ref("EntityId", "Only this entity's edges (both directions)."),
            Param::Q => rules::SEARCH_QUERY.schema().description(Some("Searched for, case-insensitively.")).into(),
            Param::InProject => described_ref("ProjectId", "Only this project; every project when absent."),
            _ => super::events::param_schema(self),
        }
    }
}

/// What a route does: the edge's handler runs the service call it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    OpenApi,
    ListProjects,
    CreateProject,
    GetProject,
    UpdateProject,
    DeleteProject,
    Edges,
    Link,
    Unlink,
    DocStructure,
    MoveDocument,
    Reorganize,
    DocumentMetadata,
    Search,
    List(EntityKind),
    Create(EntityKind),
    Get(EntityKind),
    Update(EntityKind),
    Delete(EntityKind),
    /// The calendar's routes ([`super::events`]).
    ListEvents,
    FreeTime,
    CreateEvent,
    GetEvent,
    UpdateEvent,
    DeleteEvent,
}

impl Op {
    /// A route of the calendar, run by [`super::events`].
    pub fn is_event(self) -> bool {
        matches!(
            self,
            Op::ListEvents | Op::FreeTime | Op::CreateEvent | Op::GetEvent | Op::UpdateEvent | Op::DeleteEvent
        )
    }
}

/// One route of the API.
#[derive(Clone)]
pub struct RouteDoc {
    pub op: Op,
    pub method: Method,
    /// OpenAPI path template, e.g. `/projects/{project_id}/tasks/{entity_id}`.
    pub path: String,
    pub summary: String,
    /// Component name of the request body, if any.
    pub body: Option<String>,
    /// The success status and the response's schema.
    pub status: u16,
    pub response: RefOr<Schema>,
    pub query: &'static [Param],
    /// Error codes beyond the ones every route of its shape can answer
    /// (see [`RouteDoc::error_codes`]).
    pub errors: &'static [&'static str],
}

/// Every error code of the API: its status and what it means.
pub const ERROR_CODES: &[(&str, u16, &str)] = &[
    ("invalid_json", 400, "the body is not JSON, is JSON but not an object, or is missing"),
    ("missing_field", 400, "a required field is absent (or null in an update)"),
    ("unknown_field", 400, "a field this body does not have"),
    ("wrong_type", 400, "a field has the wrong JSON type"),
    ("invalid_value", 400, "a value outside what this document allows"),
    ("invalid_id", 400, "a malformed id (path, query or body)"),
    ("unknown_kind", 400, "a kind that is not one of the seven"),
    ("invalid_time", 400, "not a date, a local time or an instant; or a local time the clocks skip"),
    ("invalid_timezone", 400, "not an IANA time zone name"),
    ("end_before_start", 400, "an event's end, or a range's `to`, is not after its start"),
    ("invalid_rrule", 400, "not an RFC 5545 RRULE, or one that repeats without end too often"),
    ("range_too_long", 400, "a range over 366 days"),
    (
        "range_not_covered",
        400,
        "free time over a range in which an event repeats too often to expand whole: ask for a shorter one",
    ),
    ("not_recurring", 400, "`instance` names an occurrence of an event that does not repeat"),
    ("link_not_found", 400, "the event's `project_id` / `task_id` is not the user's"),
    ("missing_token", 401, "no bearer token"),
    ("invalid_token", 401, "the token is malformed or its signature is wrong"),
    ("token_expired", 401, "the token has expired"),
    ("token_not_yet_valid", 401, "the token is not valid yet"),
    ("invalid_issuer", 401, "the token's issuer is not the configured one"),
    ("invalid_audience", 401, "the token's audience is not the configured one"),
    ("invalid_subject", 401, "the token's subject is not a valid user id"),
    ("auth_not_configured", 401, "the server has no way to check tokens"),
    ("project_not_found", 404, "missing, being deleted, or another user's"),
    ("entity_not_found", 404, "missing, being deleted, or another user's"),
    ("edge_not_found", 404, "no such edge"),
    ("event_not_found", 404, "missing, deleted, or another user's"),
    ("instance_not_found", 404, "the series has no instance starting at `instance`"),
    ("cursor_not_found", 404, "the cursor's project is gone: list from the start again"),
    ("route_not_found", 404, "no such route"),
    ("method_not_allowed", 405, "the route does not take this method (`Allow` lists those it takes)"),
    ("version_conflict", 409, "the version sent is not the current one (`current_version`); nothing was written"),
    ("edge_exists", 409, "this edge already exists"),
    ("context_document_protected", 409, "a project's context document cannot be deleted"),
    (
        "calendar_conflict",
        409,
        "the event changed on the user's calendar server since it was read; nothing was written",
    ),
    ("too_large", 413, "the body is over 3 MiB, or a content over 2 MiB"),
    (
        "too_many_changes",
        400,
        "a reorganize naming more edge changes than its one transaction holds (see `Reorganize`); nothing was written",
    ),
    ("edge_endpoint_not_found", 422, "an edge end is not an entity of this project (of that kind)"),
    ("edge_self_loop", 422, "an edge needs two different entities"),
    ("parent_not_found", 422, "the parent document is not in this project's tree"),
    ("tree_cycle", 422, "a document cannot move under itself or its descendant"),
    ("store_corrupt", 500, "a stored record cannot be read"),
    ("calendar_server_error", 502, "the user's calendar server failed or refused"),
    ("project_busy", 503, "concurrent writes kept winning: retry"),
    ("store_unavailable", 503, "the store did not answer: retry"),
    ("jwks_unavailable", 503, "the token keys could not be fetched: retry"),
];

/// The status of an error code of [`ERROR_CODES`].
pub fn code_status(code: &str) -> Option<u16> {
    ERROR_CODES.iter().find(|(c, ..)| *c == code).map(|(_, s, _)| *s)
}

const AUTH: &[&str] = &[
    "missing_token",
    "invalid_token",
    "token_expired",
    "token_not_yet_valid",
    "invalid_issuer",
    "invalid_audience",
    "invalid_subject",
    "auth_not_configured",
    "jwks_unavailable",
];
const BODY: &[&str] = &["invalid_json", "missing_field", "unknown_field", "wrong_type", "invalid_value"];

impl RouteDoc {
    pub fn public(&self) -> bool {
        self.path == "/openapi.json"
    }

    /// `If-Match` applies: updates, and deletes without a body.
    pub fn takes_if_match(&self) -> bool {
        self.method == Method::PATCH || (self.method == Method::DELETE && self.body.is_none())
    }

    fn writes(&self) -> bool {
        self.method != Method::GET && !self.path.ends_with("/documents/metadata")
    }

    /// Every error code this route can answer with.
    pub fn error_codes(&self) -> Vec<&'static str> {
        if self.public() {
            return vec![];
        }
        let mut c: Vec<&'static str> = AUTH.to_vec();
        c.extend(["too_large", "store_unavailable", "store_corrupt"]);
        if self.path.contains("{project_id}") {
            c.extend(["invalid_id", "project_not_found"]);
        }
        if self.path.contains("{entity_id}") {
            c.push("entity_not_found");
        }
        if self.path.contains("{event_id}") {
            c.extend(["invalid_id", "event_not_found"]);
        }
        if self.body.is_some() {
            c.extend(BODY);
        }
        if self.takes_if_match() {
            c.extend(["invalid_value", "version_conflict"]);
        }
        for p in self.query {
            c.extend(p.required().then_some("missing_field"));
            c.push(p.error_code());
        }
        // The calendar is not in a project: no project transaction to lose.
        if self.writes() && !self.op.is_event() {
            c.push("project_busy");
        }
        c.extend(self.errors);
        let mut seen = std::collections::HashSet::new();
        c.retain(|x| seen.insert(*x));
        c
    }
}

pub(super) fn r(name: &str) -> RefOr<Schema> {
    RefOr::Ref(Ref::from_schema_name(name))
}

pub(super) fn described_ref(name: &str, description: &str) -> RefOr<Schema> {
    // A `$ref` with siblings is fine in OpenAPI 3.1.
    let mut r = Ref::from_schema_name(name);
    r.description = description.to_string();
    RefOr::Ref(r)
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

/// The component of a kind's partial update (`PATCH`).
fn patch_schema(kind: EntityKind) -> String {
    fields_schema(kind).replace("Fields", "Patch")
}

pub(super) fn route(
    op: Op,
    method: Method,
    path: &str,
    summary: &str,
    body: Option<&str>,
    status: u16,
    response: RefOr<Schema>,
) -> RouteDoc {
    RouteDoc {
        op,
        method,
        path: path.to_string(),
        summary: summary.to_string(),
        body: body.map(str::to_string),
        status,
        response,
        query: &[],
        errors: &[],
    }
}

const PAGE: &[Param] = &[Param::Limit, Param::EntityCursor];

/// Every route, in the order the OpenAPI document lists them.
pub fn routes() -> Vec<RouteDoc> {
    let mut v = project_routes();
    v.extend(inside_project_routes());
    v.extend(search_routes());
    for kind in EntityKind::ALL {
        v.extend(kind_routes(kind));
    }
    v.extend(super::events::routes());
    v
}

fn project_routes() -> Vec<RouteDoc> {
    use Method as M;
    let p = "/projects/{project_id}";
    vec![
        route(Op::OpenApi, M::GET, "/openapi.json", "This document", None, 200, ObjectBuilder::new().into()),
        RouteDoc {
            query: &[Param::Limit, Param::ProjectCursor],
            errors: &["cursor_not_found"],
            ..route(Op::ListProjects, M::GET, "/projects", "The user's projects", None, 200, page_of("Project"))
        },
        route(
            Op::CreateProject,
            M::POST,
            "/projects",
            "Create a project with its context document",
            Some("NewProject"),
            201,
            write_of(r("CreatedProject")),
        ),
        route(Op::GetProject, M::GET, p, "A project", None, 200, r("Project")),
        route(
            Op::UpdateProject,
            M::PATCH,
            p,
            "Update a project's fields (partial; If-Match or expected_version)",
            Some("ProjectPatch"),
            200,
            write_of(r("Project")),
        ),
        route(
            Op::DeleteProject,
            M::DELETE,
            p,
            "Delete a project and everything in it",
            None,
            200,
            write_of(r("Deleted")),
        ),
    ]
}

/// The search across projects.
fn search_routes() -> Vec<RouteDoc> {
    vec![RouteDoc {
        query: &[Param::Q, Param::InProject, Param::Limit],
        errors: &["project_not_found"],
        ..route(
            Op::Search,
            Method::GET,
            "/search",
            "Search names, descriptions and content (case-insensitive)",
            None,
            200,
            r("SearchResults"),
        )
    }]
}

/// The routes of a project's insides that are not one kind's: edges, the
/// document tree, documents' metadata.
fn inside_project_routes() -> Vec<RouteDoc> {
    let p = "/projects/{project_id}";
    // Two halves, edges then the document tree, in the order they are listed.
    let mut routes = edge_routes(p);
    routes.extend(tree_routes(p));
    routes
}

/// The edge routes of a project: list, link, unlink.
fn edge_routes(p: &str) -> Vec<RouteDoc> {
    use Method as M;
    vec![
        RouteDoc {
            query: &[Param::OfEntity],
            ..route(
                Op::Edges,
                M::GET,
                &format!("{p}/edges"),
                "Edges of the project, or of one entity",
                None,
                200,
                r("EdgeList"),
            )
        },
        RouteDoc {
            errors: &["invalid_id", "edge_exists", "edge_endpoint_not_found", "edge_self_loop"],
            ..route(
                Op::Link,
                M::POST,
                &format!("{p}/edges"),
                "Link two entities",
                Some("Edge"),
                201,
                write_of(r("Edge")),
            )
        },
        RouteDoc {
            errors: &["invalid_id", "edge_not_found"],
            ..route(
                Op::Unlink,
                M::DELETE,
                &format!("{p}/edges"),
                "Unlink two entities",
                Some("Edge"),
                200,
                write_of(r("Edge")),
            )
        },
    ]
}

/// The document tree of a project: read, move, reorganize, metadata.
fn tree_routes(p: &str) -> Vec<RouteDoc> {
    use Method as M;
    vec![
        route(
            Op::DocStructure,
            M::GET,
            &format!("{p}/doc-structure"),
            "The document tree",
            None,
            200,
            r("DocStructure"),
        ),
        RouteDoc {
            errors: &["invalid_id", "entity_not_found", "parent_not_found", "tree_cycle"],
            ..route(
                Op::MoveDocument,
                M::POST,
                &format!("{p}/doc-structure/move"),
                "Move or reorder a document in the tree",
                Some("MoveDocument"),
                200,
                write_of(r("DocStructure")),
            )
        },
        RouteDoc {
            errors: &[
                "invalid_id",
                "version_conflict",
                "too_many_changes",
                "entity_not_found",
                "parent_not_found",
                "tree_cycle",
                "edge_not_found",
                "edge_exists",
                "edge_endpoint_not_found",
                "edge_self_loop",
            ],
            ..route(
                Op::Reorganize,
                M::POST,
                &format!("{p}/reorganize"),
                "Move documents and change edges in one step, all or nothing",
                Some("Reorganize"),
                200,
                write_of(r("Reorganized")),
            )
        },
        RouteDoc {
            errors: &["invalid_id"],
            ..route(
                Op::DocumentMetadata,
                M::POST,
                &format!("{p}/documents/metadata"),
                "Title, description, length and update time of documents (never content)",
                Some("MetadataRequest"),
                200,
                r("MetadataResponse"),
            )
        },
    ]
}

fn kind_routes(kind: EntityKind) -> Vec<RouteDoc> {
    use Method as M;
    let list = format!("/projects/{{project_id}}/{}", kind.plural());
    let one = format!("{list}/{{entity_id}}");
    let is_doc = kind == EntityKind::Document;
    let create_body = if is_doc { "NewDocument" } else { fields_schema(kind) };
    let (a, what) = (kind.as_str(), kind.plural());
    vec![
        RouteDoc {
            query: PAGE,
            ..route(Op::List(kind), M::GET, &list, &format!("List {what}"), None, 200, page_of("Entity"))
        },
        RouteDoc {
            errors: if is_doc { &["invalid_id", "parent_not_found"] } else { &[] },
            ..route(
                Op::Create(kind),
                M::POST,
                &list,
                &format!("Create a {a}"),
                Some(create_body),
                201,
                write_of(r("Entity")),
            )
        },
        route(Op::Get(kind), M::GET, &one, &format!("A {a} (documents with content)"), None, 200, r("Entity")),
        route(
            Op::Update(kind),
            M::PATCH,
            &one,
            &format!("Update a {a} (partial; If-Match or expected_version)"),
            Some(&patch_schema(kind)),
            200,
            write_of(r("Entity")),
        ),
        RouteDoc {
            errors: if is_doc { &["context_document_protected"] } else { &[] },
            ..route(
                Op::Delete(kind),
                M::DELETE,
                &one,
                &format!("Delete a {a} and its edges"),
                None,
                200,
                write_of(r("Deleted")),
            )
        },
    ]
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "agentic-chat entities",
        description = "The ontology over HTTP: projects, their entities, edges and document tree. \
            Every rule the server enforces on input is stated here (patterns, lengths, ranges); \
            each operation lists the error statuses it can answer, with their codes."
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
        Reorganize,
        Reorganized,
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
        CalendarEvent,
        NewEvent,
        EventChanges,
        EditScope,
        EventList,
        CalendarPatch,
        EventDeleted,
        FreeSlots,
    ))
)]
struct ApiDoc;

/// The error body; its `code` lists every code with its status and meaning
/// (each response of an operation names the codes it can carry).
fn error_schema() -> RefOr<Schema> {
    let meanings: Vec<String> = ERROR_CODES.iter().map(|(c, s, m)| format!("`{c}` ({s}): {m}")).collect();
    let code = ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(ERROR_CODES.iter().map(|(c, ..)| *c)))
        .description(Some(format!("Stable, machine-readable. {}.", meanings.join("; "))));
    let detail = ObjectBuilder::new()
        .property("code", code)
        .property("message", ObjectBuilder::new().schema_type(Type::String))
        .property(
            "current_version",
            ObjectBuilder::new()
                .schema_type(Type::Integer)
                .minimum(Some(0))
                .description(Some("`version_conflict` only: the version to retry with.")),
        )
        .required("code")
        .required("message");
    ObjectBuilder::new().property("error", detail).required("error").into()
}

/// `null` allowed too (an update's `null` removes the field).
fn nullable(s: RefOr<Schema>) -> RefOr<Schema> {
    match s {
        RefOr::T(Schema::Object(mut o)) => {
            if let SchemaType::Type(t) = &o.schema_type {
                o.schema_type = [t.clone(), Type::Null].into_iter().collect();
            }
            RefOr::T(Schema::Object(o))
        }
        RefOr::Ref(r) if r.ref_location.ends_with("/Description") => RefOr::Ref(r),
        other => {
            let null = ObjectBuilder::new().schema_type(Type::Null);
            OneOfBuilder::new().item(null).item(other).into()
        }
    }
}

/// A partial update's body: the fields of `fields` (none required; `null`
/// removes an optional one, or resets one with a default such as `state`;
/// required ones cannot be removed), `expected_version`, and `content` for
/// documents.
fn patch_component(doc: &OpenApiDoc, fields: &str, content: bool) -> Option<RefOr<Schema>> {
    let comps = doc.components.as_ref()?;
    let Some(RefOr::T(Schema::Object(mut o))) = comps.schemas.get(fields).cloned() else { return None };
    let required = std::mem::take(&mut o.required);
    for (name, prop) in o.properties.iter_mut() {
        if !required.contains(name) {
            *prop = nullable(prop.clone());
        }
    }
    o.properties.insert(
        "expected_version".into(),
        rules::VERSION
            .schema(true)
            .description(Some("The version last seen (as `If-Match`); if both are sent they must agree."))
            .into(),
    );
    if content {
        o.properties.insert("content".into(), rules::content_schema());
    }
    o.description = Some(format!("A partial update of {fields}: only the fields sent change."));
    Some(RefOr::T(Schema::Object(o)))
}

fn add_components(doc: &mut OpenApiDoc) {
    let mut patches = vec![("ProjectPatch".to_string(), patch_component(doc, "ProjectFields", false))];
    for kind in EntityKind::ALL {
        patches.push((patch_schema(kind), patch_component(doc, fields_schema(kind), kind == EntityKind::Document)));
    }
    let Some(c) = doc.components.as_mut() else { return };
    c.schemas.insert("Error".into(), error_schema());
    for (name, schema) in rules::components() {
        c.schemas.insert(name.into(), schema);
    }
    for (name, schema) in patches {
        c.schemas.insert(name, schema.expect("every fields component is an object"));
    }
    let bearer = HttpBuilder::new().scheme(HttpAuthScheme::Bearer).bearer_format("JWT").build();
    c.add_security_scheme("bearer", SecurityScheme::Http(bearer));
}

/// The document without its paths: info, components, security schemes. The
/// router ([`super::entities::routes`]) adds each route's operation.
pub fn base_document() -> OpenApiDoc {
    let mut doc = ApiDoc::openapi();
    add_components(&mut doc);
    doc
}

/// The route's method as OpenAPI names it.
pub fn http_method(m: &Method) -> HttpMethod {
    match *m {
        Method::POST => HttpMethod::Post,
        Method::PATCH => HttpMethod::Patch,
        Method::DELETE => HttpMethod::Delete,
        _ => HttpMethod::Get,
    }
}

/// The route's operation: parameters, body, the success answer and every error status.
pub fn operation(rt: &RouteDoc) -> OperationBuilder {
    let mut ok =
        ResponseBuilder::new().description("OK").content("application/json", Content::new(Some(rt.response.clone())));
    if rt.op == Op::GetEvent {
        ok = ok.header("ETag", super::events::etag_header());
    }
    let mut op = OperationBuilder::new().summary(Some(rt.summary.clone())).response(rt.status.to_string(), ok);
    for (status, description) in error_responses(rt) {
        let resp =
            ResponseBuilder::new().description(description).content("application/json", Content::new(Some(r("Error"))));
        op = op.response(status.to_string(), resp);
    }
    if !rt.public() {
        op = op.security(SecurityRequirement::new("bearer", Vec::<String>::new()));
    }
    for (p, id) in [("project_id", "ProjectId"), ("entity_id", "EntityId"), ("event_id", "EventId")] {
        if rt.path.contains(&format!("{{{p}}}")) {
            op = op.parameter(
                ParameterBuilder::new()
                    .name(p)
                    .parameter_in(ParameterIn::Path)
                    .required(Required::True)
                    .schema(Some(r(id))),
            );
        }
    }
    for q in rt.query {
        let required = if q.required() { Required::True } else { Required::False };
        op = op.parameter(
            ParameterBuilder::new()
                .name(q.name())
                .parameter_in(ParameterIn::Query)
                .required(required)
                .schema(Some(q.schema())),
        );
    }
    if rt.takes_if_match() {
        op = op.parameter(if_match_parameter());
    }
    if let Some(b) = &rt.body {
        let body = RequestBodyBuilder::new()
            .required(Some(Required::True))
            .content("application/json", Content::new(Some(r(b))));
        op = op.request_body(Some(body.build()));
    }
    op
}

/// The `If-Match` grammar [`super::entities`] reads: `*`, or one version as `7`,
/// `"7"` or `W/"7"` (at most 19 digits).
pub const IF_MATCH_PATTERN: &str = r#"^(\*|[0-9]{1,19}|"[0-9]{1,19}"|W/"[0-9]{1,19}")$"#;

fn if_match_parameter() -> ParameterBuilder {
    ParameterBuilder::new()
        .name("If-Match")
        .parameter_in(ParameterIn::Header)
        .required(Required::False)
        .description(Some(
            "The version last seen, as `7`, `\"7\"` or `W/\"7\"`; a stale one is 409 version_conflict. \
             `*` asks for no check.",
        ))
        .schema(Some(ObjectBuilder::new().schema_type(Type::String).pattern(Some(IF_MATCH_PATTERN))))
}

/// Each error status of the route with the codes it stands for.
fn error_responses(rt: &RouteDoc) -> BTreeMap<u16, String> {
    let mut by_status: BTreeMap<u16, Vec<String>> = BTreeMap::new();
    for code in rt.error_codes() {
        let status = code_status(code).expect("every code is in ERROR_CODES");
        by_status.entry(status).or_default().push(format!("`{code}`"));
    }
    by_status.into_iter().map(|(s, codes)| (s, format!("Error: {}", codes.join(", ")))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::AuthError;
    use crate::entities::{EntityError, Missing};
    use crate::store::StoreError;

    /// Every error the server can answer is in [`ERROR_CODES`] with the
    /// status it is answered with, so the document's lists are the truth.
    #[test]
    fn every_error_code_the_server_answers_is_listed_with_its_status() {
        let mut errors = vec![
            EntityError::NotFound(Missing::Project),
            EntityError::NotFound(Missing::Entity),
            EntityError::NotFound(Missing::Edge),
            EntityError::NotFound(Missing::Cursor),
            EntityError::UnknownKind("x".into()),
            EntityError::InvalidId("x".into()),
            EntityError::TooLarge { what: "x", limit: 1 },
            EntityError::EdgeEndpointMissing("from"),
            EntityError::SelfEdge,
            EntityError::EdgeExists,
            EntityError::ParentNotFound,
            EntityError::Cycle,
            EntityError::Conflict { expected: 1, current_version: 2 },
            EntityError::ContextDocumentProtected,
            EntityError::Busy,
            EntityError::Store(StoreError::Corrupt("x".into())),
            EntityError::Store(StoreError::Backend("x".into())),
        ];
        for code in BODY {
            errors.push(EntityError::bad(code, "x"));
        }
        for e in &errors {
            assert_eq!(code_status(e.code()), Some(e.status()), "{e:?}");
        }
        let auth = [
            AuthError::MissingToken,
            AuthError::Malformed("x"),
            AuthError::AlgorithmNotAllowed,
            AuthError::UnknownKey,
            AuthError::InvalidSignature,
            AuthError::Expired,
            AuthError::NotYetValid,
            AuthError::WrongIssuer,
            AuthError::WrongAudience,
            AuthError::InvalidSubject,
            AuthError::NotConfigured,
            AuthError::JwksUnavailable,
        ];
        for e in &auth {
            assert_eq!(code_status(e.code()), Some(e.status()), "{e:?}");
            assert!(AUTH.contains(&e.code()), "{e:?} is listed on every authenticated route");
        }
        // And every listed code is one some route can answer, or the edge's own.
        let routes = routes();
        for (code, ..) in ERROR_CODES {
            let edge_own = ["route_not_found", "method_not_allowed", "unknown_kind"].contains(code);
            assert!(edge_own || routes.iter().any(|r| r.error_codes().contains(code)), "{code} is answered somewhere");
        }
    }
}
