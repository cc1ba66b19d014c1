//! The ontology's records: one typed record per kind, edges, the document
//! tree, and the [`EntityPatch`] every write returns.
//!
//! Field structs are both the stored shape and the create body of their kind
//! (`deny_unknown_fields`: a misspelt field is refused, not dropped). A partial
//! update is a JSON object merged over the stored fields and parsed again, so
//! it is validated by the same struct.

use super::rules;
use crate::ids::{EntityId, ProjectId};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The kinds of entity that live inside a project.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum EntityKind {
    Document,
    Task,
    Goal,
    Plan,
    Milestone,
    Risk,
    Requirement,
}

impl EntityKind {
    pub const ALL: [EntityKind; 7] = [
        EntityKind::Document,
        EntityKind::Task,
        EntityKind::Goal,
        EntityKind::Plan,
        EntityKind::Milestone,
        EntityKind::Risk,
        EntityKind::Requirement,
    ];

    /// The singular name, as in JSON and in keys.
    pub fn as_str(self) -> &'static str {
        match self {
            EntityKind::Document => "document",
            EntityKind::Task => "task",
            EntityKind::Goal => "goal",
            EntityKind::Plan => "plan",
            EntityKind::Milestone => "milestone",
            EntityKind::Risk => "risk",
            EntityKind::Requirement => "requirement",
        }
    }

    /// The plural name, as in routes (`/projects/{id}/tasks`).
    pub fn plural(self) -> &'static str {
        match self {
            EntityKind::Document => "documents",
            EntityKind::Task => "tasks",
            EntityKind::Goal => "goals",
            EntityKind::Plan => "plans",
            EntityKind::Milestone => "milestones",
            EntityKind::Risk => "risks",
            EntityKind::Requirement => "requirements",
        }
    }

    pub fn parse(s: &str) -> Option<EntityKind> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }

    pub fn from_plural(s: &str) -> Option<EntityKind> {
        Self::ALL.into_iter().find(|k| k.plural() == s)
    }
}

/// What a change or a search hit is about: a project or one of its entities.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RecordKind {
    Project,
    Document,
    Task,
    Goal,
    Plan,
    Milestone,
    Risk,
    Requirement,
}

impl From<EntityKind> for RecordKind {
    fn from(k: EntityKind) -> Self {
        match k {
            EntityKind::Document => RecordKind::Document,
            EntityKind::Task => RecordKind::Task,
            EntityKind::Goal => RecordKind::Goal,
            EntityKind::Plan => RecordKind::Plan,
            EntityKind::Milestone => RecordKind::Milestone,
            EntityKind::Risk => RecordKind::Risk,
            EntityKind::Requirement => RecordKind::Requirement,
        }
    }
}

macro_rules! state_enum {
    ($(#[$m:meta])* $name:ident { $first:ident $(, $rest:ident)* $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
        #[serde(rename_all = "snake_case")]
        pub enum $name {
            #[default]
            $first,
            $($rest,)*
        }
    };
}

state_enum!(
    /// A project's lifecycle.
    ProjectState { Active, Planning, Paused, Completed, Archived }
);
state_enum!(TaskState { Todo, InProgress, Blocked, Done });
state_enum!(GoalState { Active, Draft, Achieved, Abandoned });
state_enum!(PlanState { Draft, Active, Completed, Cancelled });
state_enum!(MilestoneState { Pending, InProgress, Completed, Missed });
state_enum!(RiskState { Open, Mitigated, Accepted, Closed });
state_enum!(RequirementState { Proposed, Accepted, Implemented, Rejected });
state_enum!(
    /// How bad a risk would be.
    Impact { Medium, Low, High, Critical }
);
state_enum!(
    /// MoSCoW priority of a requirement.
    Priority { Should, Must, Could, Wont }
);

/// A project's own fields: its create body (with [`NewProject`]) and what a
/// `PATCH /projects/{id}` may change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ProjectFields {
    #[schema(schema_with = rules::name_schema)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = rules::description_schema)]
    pub description: Option<String>,
    #[serde(default)]
    pub state: ProjectState,
}

impl Project {
    pub fn fields(&self) -> ProjectFields {
        ProjectFields { name: self.name.clone(), description: self.description.clone(), state: self.state }
    }
}

/// `POST /projects`: the project, and what its context document says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewProject {
    #[schema(schema_with = rules::name_schema)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = rules::description_schema)]
    pub description: Option<String>,
    #[serde(default)]
    pub state: ProjectState,
    /// Content of the project's context document (spec §9.6): purpose, vision
    /// and scope in the user's words. Empty when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = rules::context_schema)]
    pub context: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Project {
    pub id: ProjectId,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = rules::description_schema)]
    pub description: Option<String>,
    pub state: ProjectState,
    /// The project's "where we left off" document, created with it.
    pub context_document_id: EntityId,
    /// The project's change counter: bumped by every write to the project or
    /// anything in it. Caches compare against it.
    pub version: u64,
    /// Milliseconds since the Unix epoch.
    pub created_at: i64,
    pub updated_at: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DocumentFields {
    #[schema(schema_with = rules::name_schema)]
    pub title: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = rules::description_schema)]
    pub description: Option<String>,
}

/// `POST /projects/{id}/documents`: a document and where it goes in the tree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewDocument {
    #[schema(schema_with = rules::name_schema)]
    pub title: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = rules::description_schema)]
    pub description: Option<String>,
    #[serde(default)]
    #[schema(schema_with = rules::content_schema)]
    pub content: String,
    /// The parent document; the tree's root when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<EntityId>,
    /// Position among the parent's children; last when absent.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "rules::opt_position")]
    #[schema(schema_with = rules::position_schema)]
    pub position: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskFields {
    #[schema(schema_with = rules::name_schema)]
    pub title: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = rules::description_schema)]
    pub description: Option<String>,
    #[serde(default)]
    pub state: TaskState,
    /// 1 (highest) to 5.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "rules::opt_task_priority")]
    #[schema(schema_with = rules::task_priority_schema)]
    pub priority: Option<u8>,
    /// Milliseconds since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "rules::opt_timestamp")]
    #[schema(schema_with = rules::opt_timestamp_schema)]
    pub due_at: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct GoalFields {
    #[schema(schema_with = rules::name_schema)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = rules::description_schema)]
    pub description: Option<String>,
    #[serde(default)]
    pub state: GoalState,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "rules::opt_timestamp")]
    #[schema(schema_with = rules::opt_timestamp_schema)]
    pub target_at: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PlanFields {
    #[schema(schema_with = rules::name_schema)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = rules::description_schema)]
    pub description: Option<String>,
    #[serde(default)]
    pub state: PlanState,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MilestoneFields {
    #[schema(schema_with = rules::name_schema)]
    pub title: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = rules::description_schema)]
    pub description: Option<String>,
    #[serde(default)]
    pub state: MilestoneState,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "rules::opt_timestamp")]
    #[schema(schema_with = rules::opt_timestamp_schema)]
    pub due_at: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RiskFields {
    #[schema(schema_with = rules::name_schema)]
    pub title: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = rules::description_schema)]
    pub description: Option<String>,
    #[serde(default)]
    pub state: RiskState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub impact: Option<Impact>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RequirementFields {
    #[schema(schema_with = rules::name_schema)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = rules::description_schema)]
    pub description: Option<String>,
    #[serde(default)]
    pub state: RequirementState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<Priority>,
}

/// The kind-specific fields of an entity: `{"kind": "task", "fields": {...}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "kind", content = "fields", rename_all = "snake_case")]
pub enum EntityFields {
    Document(DocumentFields),
    Task(TaskFields),
    Goal(GoalFields),
    Plan(PlanFields),
    Milestone(MilestoneFields),
    Risk(RiskFields),
    Requirement(RequirementFields),
}

impl EntityFields {
    pub fn kind(&self) -> EntityKind {
        match self {
            EntityFields::Document(_) => EntityKind::Document,
            EntityFields::Task(_) => EntityKind::Task,
            EntityFields::Goal(_) => EntityKind::Goal,
            EntityFields::Plan(_) => EntityKind::Plan,
            EntityFields::Milestone(_) => EntityKind::Milestone,
            EntityFields::Risk(_) => EntityKind::Risk,
            EntityFields::Requirement(_) => EntityKind::Requirement,
        }
    }

    /// The name or title, whichever the kind has.
    pub fn name(&self) -> &str {
        match self {
            EntityFields::Document(f) => &f.title,
            EntityFields::Task(f) => &f.title,
            EntityFields::Goal(f) => &f.name,
            EntityFields::Plan(f) => &f.name,
            EntityFields::Milestone(f) => &f.title,
            EntityFields::Risk(f) => &f.title,
            EntityFields::Requirement(f) => &f.name,
        }
    }

    pub fn description(&self) -> Option<&str> {
        match self {
            EntityFields::Document(f) => f.description.as_deref(),
            EntityFields::Task(f) => f.description.as_deref(),
            EntityFields::Goal(f) => f.description.as_deref(),
            EntityFields::Plan(f) => f.description.as_deref(),
            EntityFields::Milestone(f) => f.description.as_deref(),
            EntityFields::Risk(f) => f.description.as_deref(),
            EntityFields::Requirement(f) => f.description.as_deref(),
        }
    }

    /// The fields alone, without the `kind` tag: the stored `data` attribute
    /// and the object a partial update is merged over.
    pub fn to_object(&self) -> serde_json::Map<String, serde_json::Value> {
        match serde_json::to_value(self) {
            Ok(serde_json::Value::Object(mut m)) => match m.remove("fields") {
                Some(serde_json::Value::Object(f)) => f,
                _ => serde_json::Map::new(),
            },
            _ => serde_json::Map::new(),
        }
    }

    /// Parses the fields of `kind` from an object without the tag.
    pub fn from_object(
        kind: EntityKind,
        obj: serde_json::Map<String, serde_json::Value>,
    ) -> Result<EntityFields, serde_json::Error> {
        let v = serde_json::Value::Object(obj);
        Ok(match kind {
            EntityKind::Document => EntityFields::Document(serde_json::from_value(v)?),
            EntityKind::Task => EntityFields::Task(serde_json::from_value(v)?),
            EntityKind::Goal => EntityFields::Goal(serde_json::from_value(v)?),
            EntityKind::Plan => EntityFields::Plan(serde_json::from_value(v)?),
            EntityKind::Milestone => EntityFields::Milestone(serde_json::from_value(v)?),
            EntityKind::Risk => EntityFields::Risk(serde_json::from_value(v)?),
            EntityKind::Requirement => EntityFields::Requirement(serde_json::from_value(v)?),
        })
    }
}

/// One entity of a project, as stored and as answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Entity {
    pub id: EntityId,
    pub project_id: ProjectId,
    #[serde(flatten)]
    pub fields: EntityFields,
    /// The entity's own version: 1 when created, bumped by each update. An
    /// update's `If-Match` / `expected_version` is compared with it.
    pub version: u64,
    pub created_at: i64,
    pub updated_at: i64,
    /// Documents only: the content's length in bytes (UTF-8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_length: Option<u64>,
    /// Documents only, and only when one document is read by id: the content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
}

impl Entity {
    pub fn kind(&self) -> EntityKind {
        self.fields.kind()
    }
}

/// What the service needs to create an entity of any kind.
#[derive(Debug, Clone, PartialEq)]
pub struct CreateEntity {
    pub fields: EntityFields,
    /// Documents only.
    pub content: Option<String>,
    /// Documents only: the parent in the tree (root when `None`).
    pub parent_id: Option<EntityId>,
    /// Documents only: position among the siblings (last when `None`).
    pub position: Option<u32>,
}

impl CreateEntity {
    pub fn new(fields: EntityFields) -> Self {
        CreateEntity { fields, content: None, parent_id: None, position: None }
    }
}

impl From<NewDocument> for CreateEntity {
    fn from(d: NewDocument) -> Self {
        CreateEntity {
            fields: EntityFields::Document(DocumentFields { title: d.title, description: d.description }),
            content: Some(d.content),
            parent_id: d.parent_id,
            position: d.position,
        }
    }
}

/// A partial update: the fields to change (a JSON object, `null` clears an
/// optional field; documents also take `content`), and the version the
/// caller last saw.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct UpdateEntity {
    pub patch: serde_json::Map<String, serde_json::Value>,
    pub expected_version: Option<u64>,
}

/// One end of an edge.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EdgeEnd {
    pub kind: EntityKind,
    pub id: EntityId,
}

/// A directed, named relation between two entities of one project. Edges are
/// explicit: creating an entity never creates one.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Edge {
    pub from: EdgeEnd,
    /// Lowercase letters, digits and `_`, starting with a letter, 1 to
    /// [`rules::MAX_RELATION_LEN`] of them (e.g. `supports`, `blocks`).
    #[schema(schema_with = rules::relation_schema)]
    pub relation: String,
    pub to: EdgeEnd,
}

/// One node of the document tree: hierarchy only, never content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct DocNode {
    pub id: EntityId,
    /// Canonical sibling order: 0, 1, 2, ... among the parent's children.
    pub order: u32,
    #[serde(default)]
    #[schema(no_recursion)]
    pub children: Vec<DocNode>,
}

/// A project's `doc_structure`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct DocStructure {
    /// The project version this tree was read at.
    pub version: u64,
    pub root: Vec<DocNode>,
}

/// `POST /projects/{id}/doc-structure/move`: move a document (and its
/// subtree) under a new parent, or reorder it among its siblings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MoveDocument {
    pub document_id: EntityId,
    /// The new parent; the root when absent.
    #[serde(default)]
    pub new_parent_id: Option<EntityId>,
    /// Position among the new siblings; last when absent.
    #[serde(default, deserialize_with = "rules::opt_position")]
    #[schema(schema_with = rules::position_schema)]
    pub position: Option<u32>,
}

/// `POST /projects/{id}/reorganize`: moves in the document tree (re-parenting
/// or reordering) and edge changes, applied together in one transaction or
/// not at all. Moves go first, in order; then the unlinks, then the links.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Reorganize {
    #[serde(default, deserialize_with = "rules::opt_version")]
    #[schema(schema_with = rules::expected_version_schema)]
    pub expected_version: Option<u64>,
    #[serde(default)]
    #[schema(schema_with = rules::reorganize_moves_schema)]
    pub moves: Vec<MoveDocument>,
    #[serde(default)]
    #[schema(schema_with = rules::reorganize_edges_schema)]
    pub unlink: Vec<Edge>,
    #[serde(default)]
    #[schema(schema_with = rules::reorganize_edges_schema)]
    pub link: Vec<Edge>,
}

impl Reorganize {
    /// How many changes the batch names (moves and edges).
    pub fn changes(&self) -> usize {
        self.moves.len() + self.unlink.len() + self.link.len()
    }
}

/// What a reorganize did: the tree after it and the edges it changed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Reorganized {
    pub doc_structure: DocStructure,
    pub unlinked: Vec<Edge>,
    pub linked: Vec<Edge>,
}

/// `POST /projects/{id}/documents/metadata`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MetadataRequest {
    #[schema(schema_with = rules::metadata_ids_schema)]
    pub document_ids: Vec<EntityId>,
}

/// What is known about a document without reading its content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct DocumentMetadata {
    pub id: EntityId,
    pub title: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = rules::description_schema)]
    pub description: Option<String>,
    pub content_length: u64,
    pub updated_at: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MetadataResponse {
    /// In request order; ids that are not documents of this project are left out.
    pub documents: Vec<DocumentMetadata>,
}

/// A record in a change: a project or an entity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum Record {
    Entity(Box<Entity>),
    Project(Box<Project>),
}

/// One thing a write changed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Change {
    Created { kind: RecordKind, id: String, entity: Record },
    Updated { kind: RecordKind, id: String, entity: Record },
    Deleted { kind: RecordKind, id: String },
    Linked { edge: Edge },
    Unlinked { edge: Edge },
}

/// The backend's truth after one write, as the client (and the chat stream's
/// `entity_patch` event) receives it: apply `changes` in order; when
/// `doc_structure` is present it replaces the project's tree. `version` is the
/// project's version after the write; a client holding an older one can apply
/// this, one holding a newer one ignores it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct EntityPatch {
    pub project_id: ProjectId,
    pub version: u64,
    pub changes: Vec<Change>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub doc_structure: Option<DocStructure>,
}

/// A write's result and the patch it caused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Write<T> {
    pub data: T,
    pub patch: EntityPatch,
}

/// What `POST /projects` created.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CreatedProject {
    pub project: Project,
    /// The context document (and any other entity a compound create makes).
    pub entities_created: Vec<Entity>,
    pub edges_created: Vec<Edge>,
}

/// What a delete removed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Deleted {
    pub kind: RecordKind,
    pub id: String,
    /// Edges removed with the entity.
    pub edges_removed: Vec<Edge>,
}

/// One page of a listing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Page<T> {
    pub items: Vec<T>,
    /// Pass as `cursor` for the next page; absent on the last one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// Where a search term was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum MatchedIn {
    Name,
    Description,
    Content,
}

/// A search result: enough to show it and to read it next.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SearchHit {
    pub project_id: ProjectId,
    pub kind: RecordKind,
    pub id: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = rules::description_schema)]
    pub description: Option<String>,
    pub matched_in: MatchedIn,
    pub updated_at: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SearchResults {
    pub hits: Vec<SearchHit>,
    /// True when more matched than `limit`.
    pub truncated: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct EdgeList {
    pub items: Vec<Edge>,
}
