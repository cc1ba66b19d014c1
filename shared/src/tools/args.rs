//! One typed argument struct per tool. Their JSON Schemas (generated with
//! `schemars`, doc comments becoming descriptions) are what the model sees;
//! `deny_unknown_fields` makes a misspelt argument an error the model reads,
//! never a silently dropped field. Ids are plain strings here and parsed at
//! execution, so a malformed id is a readable `invalid_id` result.

use crate::entities::EntityKind;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// An entity kind, as the model names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Document,
    Task,
    Goal,
    Plan,
    Milestone,
    Risk,
    Requirement,
}

impl From<Kind> for EntityKind {
    fn from(k: Kind) -> Self {
        match k {
            Kind::Document => EntityKind::Document,
            Kind::Task => EntityKind::Task,
            Kind::Goal => EntityKind::Goal,
            Kind::Plan => EntityKind::Plan,
            Kind::Milestone => EntityKind::Milestone,
            Kind::Risk => EntityKind::Risk,
            Kind::Requirement => EntityKind::Requirement,
        }
    }
}

/// Tools that take nothing.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListProjectsArgs {
    /// At most this many projects (1..=100, default 50).
    #[serde(default)]
    pub limit: Option<usize>,
    /// `next_cursor` of the previous page.
    #[serde(default)]
    pub cursor: Option<String>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchArgs {
    /// Case-insensitive text to find in names, descriptions and document content.
    pub query: String,
    /// At most this many hits.
    #[serde(default)]
    pub limit: Option<usize>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProjectIdArgs {
    pub project_id: String,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateProjectArgs {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    /// One of active, planning, paused, completed, archived (default active).
    #[serde(default)]
    pub state: Option<String>,
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

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateProjectArgs {
    pub project_id: String,
    /// Fields to change (name, description, state); null clears an optional field.
    pub changes: serde_json::Map<String, serde_json::Value>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListEntitiesArgs {
    pub kind: Kind,
    /// At most this many (1..=100, default 50).
    #[serde(default)]
    pub limit: Option<usize>,
    /// `next_cursor` of the previous page.
    #[serde(default)]
    pub cursor: Option<String>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EntityRefArgs {
    pub kind: Kind,
    pub id: String,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateEntityArgs {
    pub kind: Kind,
    pub id: String,
    /// Fields to change (as the kind has them: title or name, description,
    /// state, ...; documents also take content); null clears an optional field.
    pub changes: serde_json::Map<String, serde_json::Value>,
    /// The entity version you last saw; a stale one is refused.
    #[serde(default)]
    pub expected_version: Option<u64>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateTaskArgs {
    pub title: String,
    #[serde(default)]
    pub description: Option<String>,
    /// One of todo, in_progress, blocked, done (default todo).
    #[serde(default)]
    pub state: Option<String>,
    /// 1 (highest) to 5.
    #[serde(default)]
    pub priority: Option<u8>,
    /// Milliseconds since the Unix epoch.
    #[serde(default)]
    pub due_at: Option<i64>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateGoalArgs {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    /// One of active, draft, achieved, abandoned (default active).
    #[serde(default)]
    pub state: Option<String>,
    /// Milliseconds since the Unix epoch.
    #[serde(default)]
    pub target_at: Option<i64>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreatePlanArgs {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    /// One of draft, active, completed, cancelled (default draft).
    #[serde(default)]
    pub state: Option<String>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateMilestoneArgs {
    pub title: String,
    #[serde(default)]
    pub description: Option<String>,
    /// One of pending, in_progress, completed, missed (default pending).
    #[serde(default)]
    pub state: Option<String>,
    /// Milliseconds since the Unix epoch.
    #[serde(default)]
    pub due_at: Option<i64>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateRiskArgs {
    pub title: String,
    #[serde(default)]
    pub description: Option<String>,
    /// One of open, mitigated, accepted, closed (default open).
    #[serde(default)]
    pub state: Option<String>,
    /// One of low, medium, high, critical.
    #[serde(default)]
    pub impact: Option<String>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateRequirementArgs {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    /// One of proposed, accepted, implemented, rejected (default proposed).
    #[serde(default)]
    pub state: Option<String>,
    /// MoSCoW: one of must, should, could, wont.
    #[serde(default)]
    pub priority: Option<String>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateDocumentArgs {
    pub title: String,
    #[serde(default)]
    pub description: Option<String>,
    /// Markdown content.
    #[serde(default)]
    pub content: String,
    /// The parent document (e.g. the project's context document); the tree's root when absent.
    #[serde(default)]
    pub parent_id: Option<String>,
    /// Position among the parent's children; last when absent.
    #[serde(default)]
    pub position: Option<u32>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EdgeArgs {
    pub from_kind: Kind,
    pub from_id: String,
    /// Lowercase letters, digits and _ (e.g. supports, blocks, part_of).
    pub relation: String,
    pub to_kind: Kind,
    pub to_id: String,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListEdgesArgs {
    /// Only this entity's edges (both directions); all of the project's when absent.
    #[serde(default)]
    pub entity_id: Option<String>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DocumentMetadataArgs {
    /// Up to 100 document ids (e.g. from the doc structure).
    pub document_ids: Vec<String>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadDocumentArgs {
    pub document_id: String,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MoveDocumentArgs {
    pub document_id: String,
    /// The new parent; the tree's root when absent.
    #[serde(default)]
    pub new_parent_id: Option<String>,
    /// Position among the new siblings; last when absent.
    #[serde(default)]
    pub position: Option<u32>,
}

/// The most questions one `ask_clarifying_questions` call asks.
pub const MAX_CLARIFYING_QUESTIONS: usize = 5;
/// The longest question, in characters.
pub const MAX_QUESTION_CHARS: usize = 300;

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClarifyingQuestionsArgs {
    /// 1 to 5 short questions, each answerable in a sentence: what the project is for, its scope, what done looks like.
    pub questions: Vec<String>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateOntoProjectArgs {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    /// One of active, planning, paused, completed, archived (default active).
    #[serde(default)]
    pub state: Option<String>,
    /// The project's context document: purpose, vision and scope in the user's words.
    pub context: String,
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
