//! Where a turn stands, and which tools it offers there. Offering few tools
//! keeps the prompt small and the model on task; what a scope *allows* is
//! wider: any tool whose requirement (a project) the scope meets.

use super::ToolName;
use crate::entities::EntityKind;
use crate::ids::{EntityId, ProjectId};
use crate::session::ContextType;

/// What `project_create` offers before its project exists (CURRENT_FLOW §6.4).
pub const PROJECT_CREATE_TOOLS: &[ToolName] =
    &[ToolName::AskClarifyingQuestions, ToolName::CreateOntoProject, ToolName::ListProjects, ToolName::SearchWorkspace];

/// What a brain dump offers in a project: reads, and one batch for the
/// user's review (nothing is written before their yes).
pub const BRAIN_DUMP_TOOLS: &[ToolName] =
    &[ToolName::SearchProject, ToolName::ListEntities, ToolName::ReadDocument, ToolName::ProposeEntities];

/// The scope of a turn, as tools see it. A project-bound tool runs against
/// the scope's project, never one the model names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolScope {
    /// No project in focus: the workspace.
    Global,
    Project {
        project: ProjectId,
    },
    /// One entity of a project in focus; its kind when the client said it.
    Entity {
        project: ProjectId,
        kind: Option<EntityKind>,
        entity: EntityId,
    },
}

impl ToolScope {
    /// The scope of a session: its context type and the focus the client
    /// sent. A project or entity context type without its focus falls back to
    /// the widest scope it can honour.
    pub fn from_context(
        context: ContextType,
        project: Option<ProjectId>,
        entity: Option<(Option<EntityKind>, EntityId)>,
    ) -> ToolScope {
        match (context, project, entity) {
            (ContextType::Entity, Some(project), Some((kind, entity))) => ToolScope::Entity { project, kind, entity },
            (_, Some(project), _) => ToolScope::Project { project },
            (_, None, _) => ToolScope::Global,
        }
    }

    /// The scope of a session as the stream sees it: its context type, its
    /// `entity_id`, and the client's focus metadata (`{"projectId": "…",
    /// "entityType": "task"}`, snake_case keys accepted too). Ids that do not
    /// parse are ignored: the scope only narrows on what is certain.
    pub fn from_focus(context: ContextType, entity_id: Option<&str>, focus: Option<&serde_json::Value>) -> ToolScope {
        let field = |camel: &str, snake: &str| {
            focus.and_then(|f| f.get(camel).or_else(|| f.get(snake))).and_then(|v| v.as_str()).map(str::to_owned)
        };
        let project = field("projectId", "project_id").and_then(|p| ProjectId::parse(p).ok());
        let kind = field("entityType", "entity_type").and_then(|k| EntityKind::parse(&k));
        let entity = entity_id.and_then(|e| EntityId::parse(e).ok()).map(|e| (kind, e));
        ToolScope::from_context(context, project, entity)
    }

    /// `global`, `project` or `entity`.
    pub fn kind(&self) -> &'static str {
        match self {
            ToolScope::Global => "global",
            ToolScope::Project { .. } => "project",
            ToolScope::Entity { .. } => "entity",
        }
    }

    pub fn project(&self) -> Option<&ProjectId> {
        match self {
            ToolScope::Global => None,
            ToolScope::Project { project } | ToolScope::Entity { project, .. } => Some(project),
        }
    }

    /// The tools this scope offers the model, in a stable order; the
    /// utility tools (field info, relationships) wherever ontology tools are.
    pub fn offered(&self) -> Vec<ToolName> {
        type T = ToolName;
        match self {
            ToolScope::Global => vec![
                T::ListProjects,
                T::SearchWorkspace,
                T::GetProject,
                T::CreateProject,
                T::UpdateProject,
                T::GetFieldInfo,
                T::GetBuildosOverview,
            ],
            // Not offered here, though allowed: the project itself (the pack
            // names it; a project is renamed from the workspace, so "rename
            // the task" finds one update tool, `update_entity`), the document
            // tree and metadata (the pack has both), `get_entity` (a document
            // is read with `read_document`, other entities are listed whole by
            // `list_entities`: given a kind to guess, a small model read a
            // document as a goal), field info and `get_entity_relationships`
            // (`list_edges` says the same). A small model picks among fewer
            // tools better, and reads a shorter prompt.
            ToolScope::Project { .. } => vec![
                T::SearchProject,
                T::ListEntities,
                T::CreateDocument,
                T::CreateTask,
                T::CreateGoal,
                T::CreatePlan,
                T::CreateMilestone,
                T::CreateRisk,
                T::CreateRequirement,
                T::UpdateEntity,
                T::DeleteEntity,
                T::LinkEntities,
                T::UnlinkEntities,
                T::ListEdges,
                T::ReadDocument,
                T::MoveDocument,
                T::ReorganizeProject,
                T::GetLinkedEntities,
            ],
            ToolScope::Entity { kind, .. } => {
                // A document in focus (or one of unknown kind) may be read.
                let mut v = vec![
                    T::GetEntity,
                    T::UpdateEntity,
                    T::ListEdges,
                    T::LinkEntities,
                    T::UnlinkEntities,
                    T::SearchProject,
                    T::GetFieldInfo,
                    T::GetEntityRelationships,
                    T::GetLinkedEntities,
                ];
                if matches!(kind, None | Some(EntityKind::Document)) {
                    v.extend([T::ReadDocument, T::GetDocumentMetadata]);
                }
                v
            }
        }
    }

    /// The tools a turn offers: [`Self::offered`], except in `project_create`
    /// with no project yet, which offers [`PROJECT_CREATE_TOOLS`] (the model
    /// either asks, the request being too vague, or creates the project), in
    /// `calendar`, which offers the calendar tools, and in a workspace-wide
    /// `daily_brief_update`, which offers the agenda's reads. The web tools
    /// ([`super::WEB_TOOLS`]) come with the global, project and brain-dump
    /// context types (the spec's gating: research belongs there, not in a
    /// focused entity, the calendar or the project's audits). The modes
    /// (docs/modes.md): a forecast adds the calendar's reads; a brain dump
    /// offers reads and [`BRAIN_DUMP_TOOLS`] (its batch waits for the
    /// user's yes), no direct writes.
    pub fn offered_in(&self, context: ContextType) -> Vec<ToolName> {
        match (context, self) {
            (ContextType::ProjectCreate, ToolScope::Global) => PROJECT_CREATE_TOOLS.to_vec(),
            // The calendar: its tools, and the projects events may link to.
            (ContextType::Calendar, _) => [super::CALENDAR_TOOLS, &[ToolName::ListProjects]].concat(),
            // The daily brief reads the day's agenda and free time.
            (ContextType::DailyBriefUpdate, ToolScope::Global) => {
                vec![
                    ToolName::ListCalendarEvents,
                    ToolName::FindFreeTime,
                    ToolName::ListProjects,
                    ToolName::SearchWorkspace,
                ]
            }
            (ContextType::ProjectForecast, ToolScope::Project { .. }) => {
                [self.offered().as_slice(), &[ToolName::ListCalendarEvents, ToolName::FindFreeTime]].concat()
            }
            (ContextType::BrainDump, ToolScope::Project { .. }) => [BRAIN_DUMP_TOOLS, super::WEB_TOOLS].concat(),
            (ContextType::BrainDump, ToolScope::Global) => {
                [&[ToolName::ListProjects, ToolName::SearchWorkspace][..], super::WEB_TOOLS].concat()
            }
            (ContextType::Global | ContextType::Project, ToolScope::Global | ToolScope::Project { .. }) => {
                [self.offered().as_slice(), super::WEB_TOOLS].concat()
            }
            _ => self.offered(),
        }
    }

    /// Whether a tool can run here at all: project-bound tools need a project.
    pub fn allows(&self, tool: ToolName) -> bool {
        !tool.needs_project() || self.project().is_some()
    }
}
