//! The chat's tools over the ontology: what the model may call, the JSON
//! Schema it sees for each, which ones a scope offers, and running a call
//! through [`EntityService`] (the same validation, authorization, versions and
//! patches as the entities API).
//!
//! The contract:
//! - Every tool has one typed argument struct ([`args`]); its schema is
//!   generated from it and sent as an OpenAI `tools` entry
//!   ([`ToolName::definition`]). Names are unique ([`ToolName::ALL`]).
//! - A scope ([`ToolScope`]) *offers* a small set ([`ToolScope::offered`]);
//!   a call outside it still runs when the scope *allows* it (project-bound
//!   tools need a project) and is logged. Project-bound tools always act on
//!   the scope's project: the model cannot point them elsewhere.
//! - [`ToolRegistry::execute`] never panics and never fails: bad JSON, a
//!   schema mismatch, an unknown tool, a missing entity, another user's id
//!   (answered exactly like a missing one), or a service error all become an
//!   `ok: false` [`ToolOutcome`] whose `content` the model can read. Refused
//!   arguments write nothing.
//! - An outcome carries the `operation` events of the step (start, then
//!   success or error, with a human-readable name, resolved through the
//!   service when the call did not reveal it) and the [`EntityPatch`]es the
//!   service returned, unchanged. Listing edges and the document tree are not
//!   entity operations and emit none; neither does a call refused before it
//!   reached the service (bad arguments, unknown tool, scope).

pub mod args;
pub mod plan;
pub mod scope;
mod turn;

pub use scope::ToolScope;

use crate::entities::service::validate_fields;
use crate::entities::{
    CreateEntity, DocumentFields, Edge, EdgeEnd, EntityError, EntityFields, EntityKind, EntityPatch, EntityService,
    MoveDocument, NewProject, PageRequest, UpdateEntity,
};
use crate::ids::{EntityId, ProjectId, UserId};
use crate::message::ToolCall;
use crate::sse::{OperationAction, OperationStatus, StreamEvent};
use args::*;
use serde::de::DeserializeOwned;
use serde_json::{json, Map, Value};

/// The most characters of a result shown in `tool_result` and the UI.
pub const PREVIEW_CHARS: usize = 400;

macro_rules! tools {
    ($($variant:ident = $name:literal, $args:ty, project: $needs:literal, $desc:literal;)*) => {
        /// Every tool the model can call.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum ToolName { $($variant,)* }

        impl ToolName {
            pub const ALL: &'static [ToolName] = &[$(ToolName::$variant,)*];

            pub fn as_str(self) -> &'static str {
                match self { $(ToolName::$variant => $name,)* }
            }

            pub fn parse(s: &str) -> Option<ToolName> {
                match s { $($name => Some(ToolName::$variant),)* _ => None }
            }

            pub fn description(self) -> &'static str {
                match self { $(ToolName::$variant => $desc,)* }
            }

            /// Whether the tool acts inside the scope's project.
            pub fn needs_project(self) -> bool {
                match self { $(ToolName::$variant => $needs,)* }
            }

            /// The JSON Schema of the tool's arguments.
            pub fn parameters(self) -> Value {
                match self { $(ToolName::$variant => schema::<$args>(),)* }
            }
        }
    };
}

tools! {
    ListProjects = "list_projects", ListProjectsArgs, project: false,
        "List the user's projects (id, name, state), oldest first, paged.";
    SearchWorkspace = "search_workspace", SearchArgs, project: false,
        "Search names, descriptions and document content across all the user's projects. Returns summaries with ids for follow-up reads.";
    GetProject = "get_project", ProjectIdArgs, project: false,
        "Read one project by id.";
    CreateProject = "create_project", CreateProjectArgs, project: false,
        "Create a project together with its context document.";
    UpdateProject = "update_project", UpdateProjectArgs, project: false,
        "Change a project's name, description or state.";
    SearchProject = "search_project", SearchArgs, project: true,
        "Search names, descriptions and document content in this project. Returns summaries with ids for follow-up reads.";
    ListEntities = "list_entities", ListEntitiesArgs, project: true,
        "List this project's entities of one kind (documents without content), paged.";
    GetEntity = "get_entity", EntityRefArgs, project: true,
        "Read one entity of this project by kind and id (documents include their content).";
    CreateDocument = "create_document", CreateDocumentArgs, project: true,
        "Create a document in this project's tree, under a parent document (root when none).";
    CreateTask = "create_task", CreateTaskArgs, project: true, "Create a task in this project.";
    CreateGoal = "create_goal", CreateGoalArgs, project: true, "Create a goal in this project.";
    CreatePlan = "create_plan", CreatePlanArgs, project: true, "Create a plan in this project.";
    CreateMilestone = "create_milestone", CreateMilestoneArgs, project: true, "Create a milestone in this project.";
    CreateRisk = "create_risk", CreateRiskArgs, project: true, "Create a risk in this project.";
    CreateRequirement = "create_requirement", CreateRequirementArgs, project: true,
        "Create a requirement in this project.";
    UpdateEntity = "update_entity", UpdateEntityArgs, project: true,
        "Change fields of one entity of this project (documents: content too).";
    DeleteEntity = "delete_entity", EntityRefArgs, project: true,
        "Delete one entity of this project and its edges. A deleted document's children move up to its place.";
    LinkEntities = "link_entities", EdgeArgs, project: true,
        "Link two entities of this project with a named, directed relation (e.g. task supports goal).";
    UnlinkEntities = "unlink_entities", EdgeArgs, project: true, "Remove a relation between two entities.";
    ListEdges = "list_edges", ListEdgesArgs, project: true,
        "List this project's relations, or one entity's (both directions).";
    GetDocStructure = "get_doc_structure", NoArgs, project: true,
        "Read this project's document tree (ids and order, no content).";
    GetDocumentMetadata = "get_document_metadata", DocumentMetadataArgs, project: true,
        "Titles, descriptions and lengths of several documents at once, without content.";
    ReadDocument = "read_document", ReadDocumentArgs, project: true, "Read one document with its content.";
    MoveDocument = "move_document", MoveDocumentArgs, project: true,
        "Move a document (with its subtree) under another parent, or reorder it among its siblings.";
    AskClarifyingQuestions = "ask_clarifying_questions", ClarifyingQuestionsArgs, project: false,
        "Ask the user what you need to know before creating anything, when the request is too vague to act on \
         (no clear purpose or scope). The questions are sent to the user and this turn ends; nothing is created.";
    CreateOntoProject = "create_onto_project", CreateOntoProjectArgs, project: false,
        "Create the project the user described, with its context document (purpose, vision and scope in their \
         words) and any first tasks, goals and documents; the conversation then moves into the new project.";
}

impl ToolName {
    /// The OpenAI `tools` entry for this tool.
    pub fn definition(self) -> Value {
        json!({
            "type": "function",
            "function": { "name": self.as_str(), "description": self.description(), "parameters": self.parameters() }
        })
    }
}

/// Inlined (no `$ref`s) and without `$schema`/`title`: what model APIs take;
/// then [`compact`]ed, since every definition is sent on every request.
fn schema<T: schemars::JsonSchema>() -> Value {
    let gen = schemars::generate::SchemaSettings::draft2020_12()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .into_generator();
    let mut v = gen.into_root_schema_for::<T>().to_value();
    if let Some(o) = v.as_object_mut() {
        o.remove("title");
    }
    compact(&mut v);
    v
}

/// Drops what tells the model nothing it needs, to keep the prompt small for
/// small local windows (docs/local-stack.md, "Prompt size"): an optional
/// field's `"default": null` and the `"null"` in its type (not `required`
/// already says it may be left out, and absent and null read the same), and
/// integer `format`s (`uint`, `int64`: Rust's widths, not the model's
/// concern; ranges that matter are in `minimum`/`maximum` or the description).
fn compact(v: &mut Value) {
    match v {
        Value::Object(o) => {
            if o.get("default") == Some(&Value::Null) {
                o.remove("default");
            }
            o.remove("format");
            if let Some(Value::Array(types)) = o.get_mut("type") {
                types.retain(|t| t != "null");
                if types.len() == 1 {
                    let only = types.remove(0);
                    o.insert("type".into(), only);
                }
            }
            o.values_mut().for_each(compact);
        }
        Value::Array(items) => items.iter_mut().for_each(compact),
        _ => {}
    }
}

/// Who calls, and where.
#[derive(Debug, Clone)]
pub struct ToolContext {
    pub user: UserId,
    pub scope: ToolScope,
}

/// The result of one tool call, ready for the log and the stream.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutcome {
    pub ok: bool,
    /// The full result (or `{"error": {"code", "message"}}`) as JSON text:
    /// the `role=tool` message's content.
    pub content: String,
    /// At most [`PREVIEW_CHARS`] characters of `content`, for `tool_result`.
    pub preview: String,
    /// The machine code of a failure (`invalid_arguments`, `unknown_tool`,
    /// `out_of_scope`, or an [`EntityError::code`]).
    pub error_code: Option<String>,
    /// `StreamEvent::Operation`s, in order: start, then success or error.
    pub operations: Vec<StreamEvent>,
    /// What the service's writes returned, in order, unchanged.
    pub patches: Vec<EntityPatch>,
    /// Events about the turn itself, after the patches: `clarifying_questions`
    /// (`ask_clarifying_questions`), `context_shift` (`create_onto_project`).
    pub turn_events: Vec<StreamEvent>,
}

impl ToolOutcome {
    /// The stream events of this call, in order: the operation's start and
    /// end, then each `entity_patch`, then the turn events (`tool_call`
    /// before and `tool_result` after are the caller's).
    pub fn events(&self) -> Vec<StreamEvent> {
        let patches = self.patches.iter().map(|p| StreamEvent::EntityPatch { patch: p.clone() });
        self.operations.iter().cloned().chain(patches).chain(self.turn_events.iter().cloned()).collect()
    }
}

/// A step in human terms, before its status is known.
struct Op {
    action: OperationAction,
    entity_type: &'static str,
    name: String,
    id: Option<String>,
}

impl Op {
    fn event(&self, status: OperationStatus) -> StreamEvent {
        StreamEvent::Operation {
            action: self.action,
            entity_type: self.entity_type.to_string(),
            entity_name: self.name.clone(),
            status,
            entity_id: self.id.clone(),
        }
    }
}

/// Why a call did not reach (or was refused by) the service.
enum Refusal {
    Args(String),
    Entity(EntityError),
}

impl From<EntityError> for Refusal {
    fn from(e: EntityError) -> Self {
        Refusal::Entity(e)
    }
}

/// What a handler did: its result, the steps it took (each with whether it
/// succeeded; a compound create takes several), and the patches.
struct Done {
    result: Result<Value, EntityError>,
    ops: Vec<(Op, bool)>,
    patches: Vec<EntityPatch>,
}

impl Done {
    fn read(result: Result<Value, EntityError>, op: Op) -> Self {
        let ok = result.is_ok();
        Done { result, ops: vec![(op, ok)], patches: vec![] }
    }
}

fn to_json<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

fn project_id(s: &str) -> Result<ProjectId, EntityError> {
    ProjectId::parse(s).map_err(|e| EntityError::InvalidId(format!("project_id: {e}")))
}

fn entity_id(what: &str, s: &str) -> Result<EntityId, EntityError> {
    EntityId::parse(s).map_err(|e| EntityError::InvalidId(format!("{what}: {e}")))
}

fn parse<T: DeserializeOwned>(raw: &Map<String, Value>) -> Result<T, Refusal> {
    serde_json::from_value(Value::Object(raw.clone())).map_err(|e| Refusal::Args(e.to_string()))
}

/// The argument object without `null`s, which the stored shapes read as
/// "absent" only when the key is missing.
fn without_nulls(raw: &Map<String, Value>) -> Map<String, Value> {
    raw.iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k.clone(), v.clone())).collect()
}

fn preview(content: &str) -> String {
    if content.chars().count() <= PREVIEW_CHARS {
        return content.to_string();
    }
    let mut p: String = content.chars().take(PREVIEW_CHARS - 1).collect();
    p.push('…');
    p
}

fn failure(code: &str, message: &str) -> ToolOutcome {
    let content = json!({ "error": { "code": code, "message": message } }).to_string();
    ToolOutcome {
        ok: false,
        preview: preview(&content),
        content,
        error_code: Some(code.to_string()),
        operations: vec![],
        patches: vec![],
        turn_events: vec![],
    }
}

/// What the model is told about a refused operation. Store failures say no
/// more than "unavailable": their details are for logs, not prompts.
fn entity_failure(e: &EntityError) -> (String, String) {
    let message = match e {
        EntityError::Store(_) => "the ontology store is unavailable right now; try again later".to_string(),
        e => e.to_string(),
    };
    (e.code().to_string(), message)
}

/// The `create_project` arguments that are entities to create in the new
/// project, not fields of the project.
const INITIAL_ENTITY_KEYS: [&str; 3] = ["tasks", "goals", "documents"];

/// The entities `create_project` makes in the new project, validated: tasks
/// and goals by the same rules as their own create tools, documents (titles,
/// empty content) at the tree's root.
fn initial_entities(a: &CreateProjectArgs) -> Result<Vec<CreateEntity>, Refusal> {
    let mut out = vec![];
    for (kind, key, titles) in [(EntityKind::Task, "title", &a.tasks), (EntityKind::Goal, "name", &a.goals)] {
        for t in titles.iter().flatten() {
            let mut m = Map::new();
            m.insert(key.into(), Value::String(t.clone()));
            let fields =
                EntityFields::from_object(kind, m).map_err(|e| Refusal::Args(format!("{}: {e}", kind.plural())))?;
            validate_fields(&fields)?;
            out.push(CreateEntity::new(fields));
        }
    }
    for t in a.documents.iter().flatten() {
        let fields = EntityFields::Document(DocumentFields { title: t.clone(), description: None });
        validate_fields(&fields)?;
        out.push(CreateEntity { content: Some(String::new()), ..CreateEntity::new(fields) });
    }
    Ok(out)
}

/// The questions, trimmed; refused unless there are 1 to
/// [`MAX_CLARIFYING_QUESTIONS`], none blank or over [`MAX_QUESTION_CHARS`].
fn clarifying_questions(a: ClarifyingQuestionsArgs) -> Result<Vec<String>, Refusal> {
    let questions: Vec<String> = a.questions.iter().map(|q| q.trim().to_string()).collect();
    if questions.is_empty() || questions.len() > MAX_CLARIFYING_QUESTIONS {
        return Err(Refusal::Args(format!("ask 1 to {MAX_CLARIFYING_QUESTIONS} questions, not {}", questions.len())));
    }
    if questions.iter().any(|q| q.is_empty() || q.chars().count() > MAX_QUESTION_CHARS) {
        return Err(Refusal::Args(format!("each question must be 1 to {MAX_QUESTION_CHARS} characters")));
    }
    Ok(questions)
}

/// The turn events of a call that succeeded with `result`: the questions
/// asked, or the move into the project `create_onto_project` made
/// (its `projectFocus` as a client sends it: id and name).
fn turn_events(tool: ToolName, result: &Value) -> Vec<StreamEvent> {
    match tool {
        ToolName::AskClarifyingQuestions => {
            let questions = result["questions"].as_array().into_iter().flatten();
            vec![StreamEvent::ClarifyingQuestions {
                questions: questions.filter_map(|q| q.as_str().map(String::from)).collect(),
            }]
        }
        ToolName::CreateOntoProject => {
            let (Some(id), Some(name)) = (result["project"]["id"].as_str(), result["project"]["name"].as_str()) else {
                return vec![];
            };
            vec![StreamEvent::ContextShift {
                current: crate::sse::Focus {
                    context_type: crate::session::ContextType::Project,
                    entity_id: None,
                    focus: Some(json!({ "projectId": id, "projectName": name })),
                },
                reason: crate::sse::ShiftReason::ProjectCreated,
                entity_name: name.to_string(),
            }]
        }
        _ => vec![],
    }
}

/// Appends `v` to the array `key` of `obj` (made when missing).
fn push_json(obj: &mut Map<String, Value>, key: &str, v: Value) {
    match obj.entry(key).or_insert_with(|| Value::Array(vec![])) {
        Value::Array(items) => items.push(v),
        other => *other = Value::Array(vec![v]),
    }
}

/// The chat's tools, over one [`EntityService`].
#[derive(Clone)]
pub struct ToolRegistry {
    service: EntityService,
}

impl ToolRegistry {
    pub fn new(service: EntityService) -> Self {
        ToolRegistry { service }
    }

    /// The `tools` array for a turn in `scope` (`ChatRequest.tools`).
    pub fn definitions(&self, scope: &ToolScope) -> Vec<Value> {
        scope.offered().into_iter().map(ToolName::definition).collect()
    }

    /// Runs one call. Never fails: see the module contract.
    pub async fn execute(&self, ctx: &ToolContext, call: &ToolCall) -> ToolOutcome {
        let name = call.function.name.as_str();
        let Some(tool) = ToolName::parse(name) else {
            return failure("unknown_tool", &format!("there is no tool named {name:?}"));
        };
        if !ctx.scope.allows(tool) {
            return failure("out_of_scope", &format!("{name} works inside a project; this conversation has none"));
        }
        // `project_create`'s tools are offered by context type, which the
        // tool context does not carry (`ToolScope::offered_in`).
        if !ctx.scope.offered().contains(&tool) && !scope::PROJECT_CREATE_TOOLS.contains(&tool) {
            tracing::warn!(tool = name, call_id = %call.id, scope = ?ctx.scope, "tool called outside the offered set");
        }
        let raw = match call.function.arguments.trim() {
            // Models send "" for a tool without arguments.
            "" => Map::new(),
            text => match serde_json::from_str::<Value>(text) {
                Ok(Value::Object(m)) => m,
                Ok(_) => return failure("invalid_arguments", "arguments must be a JSON object"),
                Err(e) => return failure("invalid_arguments", &format!("arguments are not valid JSON: {e}")),
            },
        };
        let done = match self.run(ctx, tool, &raw).await {
            Ok(done) => done,
            Err(Refusal::Args(m)) => return failure("invalid_arguments", &format!("{name}: {m}")),
            Err(Refusal::Entity(e)) => {
                let (code, message) = entity_failure(&e);
                return failure(&code, &message);
            }
        };
        let mut outcome = match &done.result {
            Ok(v) => {
                let content = v.to_string();
                ToolOutcome {
                    ok: true,
                    preview: preview(&content),
                    content,
                    error_code: None,
                    operations: vec![],
                    patches: vec![],
                    turn_events: turn_events(tool, v),
                }
            }
            Err(e) => {
                if matches!(e, EntityError::Store(_)) {
                    tracing::error!(tool = name, error = %e, "tool call failed in the store");
                }
                let (code, message) = entity_failure(e);
                failure(&code, &message)
            }
        };
        outcome.operations = done
            .ops
            .iter()
            .flat_map(|(op, ok)| {
                let end = if *ok { OperationStatus::Success } else { OperationStatus::Error };
                [op.event(OperationStatus::Start), op.event(end)]
            })
            .collect();
        outcome.patches = done.patches;
        outcome
    }

    /// The display name of an entity, through the cheapest read that has it
    /// (metadata for documents: no content); its id when it cannot be read.
    async fn name_of(&self, user: &UserId, project: &ProjectId, kind: EntityKind, id: &EntityId) -> String {
        let name = if kind == EntityKind::Document {
            self.service
                .document_metadata(user, project, std::slice::from_ref(id))
                .await
                .ok()
                .and_then(|m| m.into_iter().next().map(|d| d.title))
        } else {
            self.service.get(user, project, kind, id).await.ok().map(|e| e.fields.name().to_string())
        };
        name.unwrap_or_else(|| id.to_string())
    }

    async fn run(&self, ctx: &ToolContext, tool: ToolName, raw: &Map<String, Value>) -> Result<Done, Refusal> {
        use OperationAction as A;
        let svc = &self.service;
        let user = &ctx.user;
        // `allows` was checked: project-bound tools have a project here.
        let scope_project = ctx.scope.project();
        let project = || scope_project.ok_or(Refusal::Args("this tool needs a project".into()));
        Ok(match tool {
            ToolName::ListProjects => {
                let a: ListProjectsArgs = parse(raw)?;
                let r = svc.list_projects(user, PageRequest { limit: a.limit, cursor: a.cursor }).await;
                let op = Op { action: A::List, entity_type: "project", name: "projects".into(), id: None };
                Done::read(r.map(|p| to_json(&p)), op)
            }
            ToolName::SearchWorkspace | ToolName::SearchProject => {
                let a: SearchArgs = parse(raw)?;
                let in_project = if tool == ToolName::SearchProject { Some(project()?) } else { None };
                let r = svc.search(user, &a.query, in_project, a.limit).await;
                let op = Op { action: A::Search, entity_type: "project", name: format!("“{}”", a.query), id: None };
                Done::read(r.map(|s| to_json(&s)), op)
            }
            ToolName::GetProject => {
                let a: ProjectIdArgs = parse(raw)?;
                let id = project_id(&a.project_id)?;
                let r = svc.get_project(user, &id).await;
                let name = r.as_ref().map(|p| p.name.clone()).unwrap_or_else(|_| id.to_string());
                let op = Op { action: A::Read, entity_type: "project", name, id: Some(id.to_string()) };
                Done::read(r.map(|p| to_json(&p)), op)
            }
            ToolName::CreateProject => self.create_project(user, raw).await?,
            ToolName::CreateOntoProject => {
                let _: CreateOntoProjectArgs = parse(raw)?;
                self.create_project(user, raw).await?
            }
            ToolName::AskClarifyingQuestions => {
                let a: ClarifyingQuestionsArgs = parse(raw)?;
                let questions = clarifying_questions(a)?;
                Done {
                    result: Ok(json!({ "questions": questions, "sent_to_user": true })),
                    ops: vec![],
                    patches: vec![],
                }
            }
            ToolName::UpdateProject => {
                let a: UpdateProjectArgs = parse(raw)?;
                let id = project_id(&a.project_id)?;
                let r = svc.update_project(user, &id, a.changes, None).await;
                let name = match &r {
                    Ok(w) => w.data.name.clone(),
                    Err(_) => svc.get_project(user, &id).await.map(|p| p.name).unwrap_or_else(|_| id.to_string()),
                };
                let op = Op { action: A::Update, entity_type: "project", name, id: Some(id.to_string()) };
                self.write(r, op)
            }
            ToolName::ListEntities => {
                let a: ListEntitiesArgs = parse(raw)?;
                let kind = EntityKind::from(a.kind);
                let r = svc.list(user, project()?, kind, PageRequest { limit: a.limit, cursor: a.cursor }).await;
                let op = Op { action: A::List, entity_type: kind.as_str(), name: kind.plural().into(), id: None };
                Done::read(r.map(|p| to_json(&p)), op)
            }
            ToolName::GetEntity => {
                let a: EntityRefArgs = parse(raw)?;
                let (kind, id) = (EntityKind::from(a.kind), entity_id("id", &a.id)?);
                self.read_entity(user, project()?, kind, id).await
            }
            ToolName::ReadDocument => {
                let a: ReadDocumentArgs = parse(raw)?;
                let id = entity_id("document_id", &a.document_id)?;
                self.read_entity(user, project()?, EntityKind::Document, id).await
            }
            ToolName::CreateDocument => {
                let a: CreateDocumentArgs = parse(raw)?;
                let parent_id = a.parent_id.as_deref().map(|p| entity_id("parent_id", p)).transpose()?;
                let new = CreateEntity {
                    fields: EntityFields::Document(DocumentFields { title: a.title, description: a.description }),
                    content: Some(a.content),
                    parent_id,
                    position: a.position,
                };
                self.create(user, project()?, new).await
            }
            ToolName::CreateTask => self.create_kind::<CreateTaskArgs>(user, project()?, EntityKind::Task, raw).await?,
            ToolName::CreateGoal => self.create_kind::<CreateGoalArgs>(user, project()?, EntityKind::Goal, raw).await?,
            ToolName::CreatePlan => self.create_kind::<CreatePlanArgs>(user, project()?, EntityKind::Plan, raw).await?,
            ToolName::CreateMilestone => {
                self.create_kind::<CreateMilestoneArgs>(user, project()?, EntityKind::Milestone, raw).await?
            }
            ToolName::CreateRisk => self.create_kind::<CreateRiskArgs>(user, project()?, EntityKind::Risk, raw).await?,
            ToolName::CreateRequirement => {
                self.create_kind::<CreateRequirementArgs>(user, project()?, EntityKind::Requirement, raw).await?
            }
            ToolName::UpdateEntity => {
                let a: UpdateEntityArgs = parse(raw)?;
                let (kind, id, project) = (EntityKind::from(a.kind), entity_id("id", &a.id)?, project()?);
                let update = UpdateEntity { patch: a.changes, expected_version: a.expected_version };
                let r = svc.update(user, project, kind, &id, update).await;
                let name = match &r {
                    Ok(w) => w.data.fields.name().to_string(),
                    Err(_) => self.name_of(user, project, kind, &id).await,
                };
                let op = Op { action: A::Update, entity_type: kind.as_str(), name, id: Some(id.to_string()) };
                self.write(r, op)
            }
            ToolName::DeleteEntity => {
                let a: EntityRefArgs = parse(raw)?;
                let (kind, id, project) = (EntityKind::from(a.kind), entity_id("id", &a.id)?, project()?);
                // Resolved first: afterwards there is nothing left to name.
                let name = self.name_of(user, project, kind, &id).await;
                let r = svc.delete(user, project, kind, &id, None).await;
                let op = Op { action: A::Delete, entity_type: kind.as_str(), name, id: Some(id.to_string()) };
                self.write(r, op)
            }
            ToolName::LinkEntities | ToolName::UnlinkEntities => {
                let a: EdgeArgs = parse(raw)?;
                let project = project()?;
                let edge = Edge {
                    from: EdgeEnd { kind: a.from_kind.into(), id: entity_id("from_id", &a.from_id)? },
                    relation: a.relation,
                    to: EdgeEnd { kind: a.to_kind.into(), id: entity_id("to_id", &a.to_id)? },
                };
                let (from, to) = futures::join!(
                    self.name_of(user, project, edge.from.kind, &edge.from.id),
                    self.name_of(user, project, edge.to.kind, &edge.to.id)
                );
                let op = Op {
                    action: A::Update,
                    entity_type: edge.from.kind.as_str(),
                    name: format!("{from} {} {to}", edge.relation.replace('_', " ")),
                    id: Some(edge.from.id.to_string()),
                };
                let r = if tool == ToolName::LinkEntities {
                    svc.link(user, project, edge).await
                } else {
                    svc.unlink(user, project, edge).await
                };
                self.write(r, op)
            }
            ToolName::ListEdges => {
                let a: ListEdgesArgs = parse(raw)?;
                let id = a.entity_id.as_deref().map(|e| entity_id("entity_id", e)).transpose()?;
                let r = svc.edges(user, project()?, id.as_ref()).await;
                Done { result: r.map(|items| json!({ "items": items })), ops: vec![], patches: vec![] }
            }
            ToolName::GetDocStructure => {
                let _: NoArgs = parse(raw)?;
                let r = svc.doc_structure(user, project()?).await;
                Done { result: r.map(|d| to_json(&d)), ops: vec![], patches: vec![] }
            }
            ToolName::GetDocumentMetadata => {
                let a: DocumentMetadataArgs = parse(raw)?;
                let ids = a.document_ids.iter().map(|d| entity_id("document_ids", d)).collect::<Result<Vec<_>, _>>()?;
                let r = svc.document_metadata(user, project()?, &ids).await;
                let name = match &r {
                    Ok(docs) if !docs.is_empty() => {
                        docs.iter().map(|d| d.title.as_str()).collect::<Vec<_>>().join(", ")
                    }
                    _ => format!("{} documents", ids.len()),
                };
                let op = Op { action: A::Read, entity_type: "document", name, id: None };
                Done::read(r.map(|documents| json!({ "documents": documents })), op)
            }
            ToolName::MoveDocument => {
                let a: MoveDocumentArgs = parse(raw)?;
                let project = project()?;
                let mv = MoveDocument {
                    document_id: entity_id("document_id", &a.document_id)?,
                    new_parent_id: a.new_parent_id.as_deref().map(|p| entity_id("new_parent_id", p)).transpose()?,
                    position: a.position,
                };
                let name = self.name_of(user, project, EntityKind::Document, &mv.document_id).await;
                let id = Some(mv.document_id.to_string());
                let r = svc.move_document(user, project, mv).await;
                self.write(r, Op { action: A::Update, entity_type: "document", name, id })
            }
        })
    }

    fn write<T: serde::Serialize>(&self, r: Result<crate::entities::Write<T>, EntityError>, op: Op) -> Done {
        match r {
            Ok(w) => Done { result: Ok(to_json(&w.data)), ops: vec![(op, true)], patches: vec![w.patch] },
            Err(e) => Done { result: Err(e), ops: vec![(op, false)], patches: vec![] },
        }
    }

    async fn read_entity(&self, user: &UserId, project: &ProjectId, kind: EntityKind, id: EntityId) -> Done {
        let r = self.service.get(user, project, kind, &id).await;
        // A failed read names what it could: the id (another user's entity
        // reads as missing, so there is no name to leak).
        let name = r.as_ref().map(|e| e.fields.name().to_string()).unwrap_or_else(|_| id.to_string());
        let op = Op { action: OperationAction::Read, entity_type: kind.as_str(), name, id: Some(id.to_string()) };
        Done::read(r.map(|e| to_json(&e)), op)
    }

    async fn create(&self, user: &UserId, project: &ProjectId, new: CreateEntity) -> Done {
        let (kind, name) = (new.fields.kind(), new.fields.name().to_string());
        let r = self.service.create(user, project, new).await;
        let id = r.as_ref().ok().map(|w| w.data.id.to_string());
        self.write(r, Op { action: OperationAction::Create, entity_type: kind.as_str(), name, id })
    }

    /// Creates a project and, in it, the tasks, goals and documents the call
    /// names, so "a project with a task" finishes in one call from global
    /// scope (which offers no project writers, having no project). Every
    /// initial entity is validated before anything is written: refused
    /// arguments write nothing. The project is then one commit and each
    /// entity one more; a failure among those is reported in the result
    /// (`errors`) and as that step's error operation, after the project.
    async fn create_project(&self, user: &UserId, raw: &Map<String, Value>) -> Result<Done, Refusal> {
        let a: CreateProjectArgs = parse(raw)?;
        let initial = initial_entities(&a)?;
        let mut fields = without_nulls(raw);
        for k in INITIAL_ENTITY_KEYS {
            fields.remove(k);
        }
        let new: NewProject =
            serde_json::from_value(Value::Object(fields)).map_err(|e| Refusal::Args(e.to_string()))?;
        let r = self.service.create_project(user, new).await;
        let id = r.as_ref().ok().map(|w| w.data.project.id.clone());
        let op = Op {
            action: OperationAction::Create,
            entity_type: "project",
            name: a.name,
            id: id.as_ref().map(|p| p.to_string()),
        };
        let mut done = self.write(r, op);
        let (Some(project), Ok(Value::Object(result))) = (id, &mut done.result) else { return Ok(done) };
        let mut errors = vec![];
        for new in initial {
            let title = new.fields.name().to_string();
            let child = self.create(user, &project, new).await;
            match child.result {
                Ok(entity) => push_json(result, "entities_created", entity),
                Err(e) => {
                    let (code, message) = entity_failure(&e);
                    errors.push(json!({ "title": title, "error": { "code": code, "message": message } }));
                }
            }
            done.ops.extend(child.ops);
            done.patches.extend(child.patches);
        }
        if !errors.is_empty() {
            result.insert("errors".into(), Value::Array(errors));
        }
        Ok(done)
    }

    /// Creates a non-document entity: the typed arguments check the shape the
    /// model sent; the kind's stored fields then parse (and validate) values.
    async fn create_kind<A: DeserializeOwned>(
        &self,
        user: &UserId,
        project: &ProjectId,
        kind: EntityKind,
        raw: &Map<String, Value>,
    ) -> Result<Done, Refusal> {
        let _: A = parse(raw)?;
        let fields = EntityFields::from_object(kind, without_nulls(raw)).map_err(|e| Refusal::Args(e.to_string()))?;
        Ok(self.create(user, project, CreateEntity::new(fields)).await)
    }
}
