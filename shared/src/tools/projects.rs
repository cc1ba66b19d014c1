//! The project tools: list, read, create (with first entities) and update
//! the user's projects. None needs a project in scope: each names its own.
//!
//! `create_project` is compound: the project, then each task, goal and
//! document the call names, every one validated before anything is written.

use super::call::{project_id, to_json, write, Call};
use super::outcome::{Done, Op, Refusal};
use super::{Tool, ToolName};
use crate::entities::service::validate_fields;
use crate::entities::{
    rules, CreateEntity, DocumentFields, EntityFields, EntityKind, NewProject, PageRequest, ProjectState,
};
use crate::sse::OperationAction;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use utoipa::ToSchema;

#[allow(non_upper_case_globals)]
impl ToolName {
    pub const ListProjects: ToolName = ToolName::of(&ListProjects);
    pub const GetProject: ToolName = ToolName::of(&GetProject);
    pub const CreateProject: ToolName = ToolName::of(&CreateProject);
    pub const UpdateProject: ToolName = ToolName::of(&UpdateProject);
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ListProjectsArgs {
    /// At most this many projects (1..=100, default 50).
    #[serde(default)]
    pub limit: Option<usize>,
    /// `next_cursor` of the previous page.
    #[serde(default)]
    pub cursor: Option<String>,
}

pub struct ListProjects;

#[async_trait::async_trait]
impl Tool for ListProjects {
    type Args = ListProjectsArgs;
    const NAME: &'static str = "list_projects";
    const DESCRIPTION: &'static str = "List the user's projects (id, name, state), oldest first, paged.";
    const NEEDS_PROJECT: bool = false;

    async fn run(&self, c: &Call<'_>, a: ListProjectsArgs) -> Result<Done, Refusal> {
        let r = c.svc.list_projects(c.user, PageRequest { limit: a.limit, cursor: a.cursor }).await;
        let op = Op { action: OperationAction::List, entity_type: "project", name: "projects".into(), id: None };
        Ok(Done::read(r.map(|p| to_json(&p)), op))
    }
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ProjectIdArgs {
    pub project_id: String,
}

pub struct GetProject;

#[async_trait::async_trait]
impl Tool for GetProject {
    type Args = ProjectIdArgs;
    const NAME: &'static str = "get_project";
    const DESCRIPTION: &'static str = "Read one project by id.";
    const NEEDS_PROJECT: bool = false;

    async fn run(&self, c: &Call<'_>, a: ProjectIdArgs) -> Result<Done, Refusal> {
        let id = project_id(&a.project_id)?;
        let r = c.svc.get_project(c.user, &id).await;
        let name = r.as_ref().map(|p| p.name.clone()).unwrap_or_else(|_| id.to_string());
        let op = Op { action: OperationAction::Read, entity_type: "project", name, id: Some(id.to_string()) };
        Ok(Done::read(r.map(|p| to_json(&p)), op))
    }
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateProjectArgs {
    pub project_id: String,
    /// Fields to change (name, description, state); null clears an optional field.
    #[schema(value_type = Object)]
    pub changes: Map<String, Value>,
}

pub struct UpdateProject;

#[async_trait::async_trait]
impl Tool for UpdateProject {
    type Args = UpdateProjectArgs;
    const NAME: &'static str = "update_project";
    const DESCRIPTION: &'static str =
        "Change a project itself: its name, description or state (never a task or document in it).";
    const NEEDS_PROJECT: bool = false;

    async fn run(&self, c: &Call<'_>, a: UpdateProjectArgs) -> Result<Done, Refusal> {
        let id = project_id(&a.project_id)?;
        let r = c.svc.update_project(c.user, &id, a.changes, None).await;
        let name = match &r {
            Ok(w) => w.data.name.clone(),
            Err(_) => c.svc.get_project(c.user, &id).await.map(|p| p.name).unwrap_or_else(|_| id.to_string()),
        };
        Ok(write(r, Op { action: OperationAction::Update, entity_type: "project", name, id: Some(id.to_string()) }))
    }
}

// The arguments of `create_project`: the project's own fields (as in
// [`NewProject`]) and the titles of the entities to create in it.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateProjectArgs {
    #[schema(schema_with = rules::name_schema)]
    pub name: String,
    #[serde(default)]
    #[schema(schema_with = rules::description_schema)]
    pub description: Option<String>,
    #[serde(default)]
    pub state: Option<ProjectState>,
    /// The project's context document: purpose, vision and scope in the user's words.
    #[serde(default)]
    pub context: Option<String>,
    /// Titles of tasks to create in the new project.
    #[serde(default)]
    pub tasks: Option<Vec<String>>,
    /// Names of goals to create in the new project.
    #[serde(default)]
    pub goals: Option<Vec<String>>,
    /// Titles of documents to create in the new project.
    #[serde(default)]
    pub documents: Option<Vec<String>>,
}

pub struct CreateProject;

#[async_trait::async_trait]
impl Tool for CreateProject {
    type Args = CreateProjectArgs;
    const NAME: &'static str = "create_project";
    const DESCRIPTION: &'static str = "Create a project together with its context document.";
    const NEEDS_PROJECT: bool = false;

    async fn run(&self, c: &Call<'_>, a: CreateProjectArgs) -> Result<Done, Refusal> {
        create_project(c, a).await
    }
}

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

/// Creates a project and, in it, the tasks, goals and documents the call
/// names, so "a project with a task" finishes in one call from global scope
/// (which offers no project writers, having no project). Every initial
/// entity is validated before anything is written: refused arguments write
/// nothing. The project is then one commit and each entity one more; a
/// failure among those is reported in the result (`errors`) and as that
/// step's error operation, after the project.
pub async fn create_project(c: &Call<'_>, a: CreateProjectArgs) -> Result<Done, Refusal> {
    let initial = initial_entities(&a)?;
    let new =
        NewProject { name: a.name, description: a.description, state: a.state.unwrap_or_default(), context: a.context };
    let name = new.name.clone();
    let r = c.svc.create_project(c.user, new).await;
    let id = r.as_ref().ok().map(|w| w.data.project.id.clone());
    let op =
        Op { action: OperationAction::Create, entity_type: "project", name, id: id.as_ref().map(|p| p.to_string()) };
    let mut done = write(r, op);
    let (Some(project), Ok(Value::Object(result))) = (id, &mut done.result) else { return Ok(done) };
    let mut errors = vec![];
    for new in initial {
        let title = new.fields.name().to_string();
        let child = c.create(&project, new).await;
        match child.result {
            Ok(entity) => push_json(result, "entities_created", entity),
            Err(e) => {
                let (code, message) = super::outcome::entity_failure(&e);
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

/// Appends `v` to the array `key` of `obj` (made when missing).
fn push_json(obj: &mut Map<String, Value>, key: &str, v: Value) {
    match obj.entry(key).or_insert_with(|| Value::Array(vec![])) {
        Value::Array(items) => items.push(v),
        other => *other = Value::Array(vec![v]),
    }
}
