//! The entity tools: list, read, create, update and delete the entities of
//! the scope's project, whatever their kind. The create tools of the
//! non-document kinds take exactly their kind's field struct
//! ([`TaskFields`] and the rest): the stored shape, its rules and its schema
//! are the model's arguments too.

use super::call::{entity_id, to_json, without_nulls, write, Call};
use super::outcome::{Done, Op, Refusal};
use super::{Tool, ToolName};
use crate::entities::{
    CreateEntity, EntityFields, EntityKind, GoalFields, MilestoneFields, PageRequest, PlanFields, RequirementFields,
    RiskFields, TaskFields, UpdateEntity as Update,
};
use crate::sse::OperationAction;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{Map, Value};
use utoipa::ToSchema;

#[allow(non_upper_case_globals)]
impl ToolName {
    pub const ListEntities: ToolName = ToolName::of(&ListEntities);
    pub const GetEntity: ToolName = ToolName::of(&GetEntity);
    pub const CreateTask: ToolName = ToolName::of(&CreateTask);
    pub const CreateGoal: ToolName = ToolName::of(&CreateGoal);
    pub const CreatePlan: ToolName = ToolName::of(&CreatePlan);
    pub const CreateMilestone: ToolName = ToolName::of(&CreateMilestone);
    pub const CreateRisk: ToolName = ToolName::of(&CreateRisk);
    pub const CreateRequirement: ToolName = ToolName::of(&CreateRequirement);
    pub const UpdateEntity: ToolName = ToolName::of(&UpdateEntity);
    pub const DeleteEntity: ToolName = ToolName::of(&DeleteEntity);
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ListEntitiesArgs {
    pub kind: EntityKind,
    /// At most this many (1..=100, default 50).
    #[serde(default)]
    pub limit: Option<usize>,
    /// `next_cursor` of the previous page.
    #[serde(default)]
    pub cursor: Option<String>,
}

pub struct ListEntities;

#[async_trait::async_trait]
impl Tool for ListEntities {
    type Args = ListEntitiesArgs;
    const NAME: &'static str = "list_entities";
    const DESCRIPTION: &'static str = "List this project's entities of one kind (documents without content), paged.";
    const NEEDS_PROJECT: bool = true;

    async fn run(&self, c: &Call<'_>, a: ListEntitiesArgs) -> Result<Done, Refusal> {
        let kind = a.kind;
        let r = c.svc.list(c.user, c.project()?, kind, PageRequest { limit: a.limit, cursor: a.cursor }).await;
        let op = Op { action: OperationAction::List, entity_type: kind.as_str(), name: kind.plural().into(), id: None };
        Ok(Done::read(r.map(|p| to_json(&p)), op))
    }
}

// One entity of the scope's project, by kind and id.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EntityRefArgs {
    pub kind: EntityKind,
    pub id: String,
}

pub struct GetEntity;

#[async_trait::async_trait]
impl Tool for GetEntity {
    type Args = EntityRefArgs;
    const NAME: &'static str = "get_entity";
    const DESCRIPTION: &'static str =
        "Read one entity of this project by kind and id (documents include their content).";
    const NEEDS_PROJECT: bool = true;

    async fn run(&self, c: &Call<'_>, a: EntityRefArgs) -> Result<Done, Refusal> {
        let id = entity_id("id", &a.id)?;
        Ok(c.read_entity(c.project()?, a.kind, id).await)
    }
}

pub struct DeleteEntity;

#[async_trait::async_trait]
impl Tool for DeleteEntity {
    type Args = EntityRefArgs;
    const NAME: &'static str = "delete_entity";
    const DESCRIPTION: &'static str = "Delete one entity of this project and its edges. A deleted document's \
        children move up to its place.";
    const NEEDS_PROJECT: bool = true;

    async fn run(&self, c: &Call<'_>, a: EntityRefArgs) -> Result<Done, Refusal> {
        let (kind, id, project) = (a.kind, entity_id("id", &a.id)?, c.project()?);
        // Resolved first: afterwards there is nothing left to name.
        let name = c.name_of(project, kind, &id).await;
        let r = c.svc.delete(c.user, project, kind, &id, None).await;
        Ok(write(r, Op { action: OperationAction::Delete, entity_type: kind.as_str(), name, id: Some(id.to_string()) }))
    }
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateEntityArgs {
    pub kind: EntityKind,
    pub id: String,
    /// Fields to change (as the kind has them: title or name, description,
    /// state, ...; documents also take content); null clears an optional field.
    /// A due or target date is text (2026-12-10), never a number.
    #[schema(value_type = Object)]
    pub changes: Map<String, Value>,
    /// The entity version you last saw; a stale one is refused.
    #[serde(default)]
    pub expected_version: Option<u64>,
}

pub struct UpdateEntity;

#[async_trait::async_trait]
impl Tool for UpdateEntity {
    type Args = UpdateEntityArgs;
    const NAME: &'static str = "update_entity";
    const DESCRIPTION: &'static str = "Change one task, document, goal, plan, milestone, risk or requirement \
        of this project, by kind and id: rename it (its title or name), change its description or state, or a \
        document's content.";
    const NEEDS_PROJECT: bool = true;

    async fn run(&self, c: &Call<'_>, a: UpdateEntityArgs) -> Result<Done, Refusal> {
        let (kind, id, project) = (a.kind, entity_id("id", &a.id)?, c.project()?);
        let mut changes = a.changes;
        super::dates::read(&mut changes, date_fields(kind), c.zone_or_utc(), crate::now_ms())?;
        let update = Update { patch: changes, expected_version: a.expected_version };
        let r = c.svc.update(c.user, project, kind, &id, update).await;
        let name = match &r {
            Ok(w) => w.data.fields.name().to_string(),
            Err(_) => c.name_of(project, kind, &id).await,
        };
        Ok(write(r, Op { action: OperationAction::Update, entity_type: kind.as_str(), name, id: Some(id.to_string()) }))
    }
}

/// The fields of `kind` the model gives as dates in text (`dates.rs`).
pub(super) fn date_fields(kind: EntityKind) -> &'static [&'static str] {
    match kind {
        EntityKind::Task | EntityKind::Milestone => &["due_at"],
        EntityKind::Goal => &["target_at"],
        _ => &[],
    }
}

/// A kind's fields as create arguments: `null`s read as absent (models send
/// them for fields they leave out; the stored shape takes only a missing key).
fn fields<F: DeserializeOwned>(raw: &Map<String, Value>) -> Result<F, Refusal> {
    super::call::parse(&without_nulls(raw))
}

async fn create(c: &Call<'_>, fields: EntityFields) -> Result<Done, Refusal> {
    Ok(c.create(c.project()?, CreateEntity::new(fields)).await)
}

pub struct CreateTask;

#[async_trait::async_trait]
impl Tool for CreateTask {
    type Args = TaskFields;
    const NAME: &'static str = "create_task";
    const DESCRIPTION: &'static str = "Create a task in this project. Set only what the user said: no \
        invented due date or priority.";
    const NEEDS_PROJECT: bool = true;
    const DATES: &'static [&'static str] = &["due_at"];

    fn parse(raw: &Map<String, Value>) -> Result<TaskFields, Refusal> {
        fields(raw)
    }
    async fn run(&self, c: &Call<'_>, a: TaskFields) -> Result<Done, Refusal> {
        create(c, EntityFields::Task(a)).await
    }
}

pub struct CreateGoal;

#[async_trait::async_trait]
impl Tool for CreateGoal {
    type Args = GoalFields;
    const NAME: &'static str = "create_goal";
    const DESCRIPTION: &'static str = "Create a goal in this project.";
    const NEEDS_PROJECT: bool = true;
    const DATES: &'static [&'static str] = &["target_at"];

    fn parse(raw: &Map<String, Value>) -> Result<GoalFields, Refusal> {
        fields(raw)
    }
    async fn run(&self, c: &Call<'_>, a: GoalFields) -> Result<Done, Refusal> {
        create(c, EntityFields::Goal(a)).await
    }
}

pub struct CreatePlan;

#[async_trait::async_trait]
impl Tool for CreatePlan {
    type Args = PlanFields;
    const NAME: &'static str = "create_plan";
    const DESCRIPTION: &'static str = "Create a plan in this project.";
    const NEEDS_PROJECT: bool = true;

    fn parse(raw: &Map<String, Value>) -> Result<PlanFields, Refusal> {
        fields(raw)
    }
    async fn run(&self, c: &Call<'_>, a: PlanFields) -> Result<Done, Refusal> {
        create(c, EntityFields::Plan(a)).await
    }
}

pub struct CreateMilestone;

#[async_trait::async_trait]
impl Tool for CreateMilestone {
    type Args = MilestoneFields;
    const NAME: &'static str = "create_milestone";
    const DESCRIPTION: &'static str = "Create a milestone in this project.";
    const NEEDS_PROJECT: bool = true;
    const DATES: &'static [&'static str] = &["due_at"];

    fn parse(raw: &Map<String, Value>) -> Result<MilestoneFields, Refusal> {
        fields(raw)
    }
    async fn run(&self, c: &Call<'_>, a: MilestoneFields) -> Result<Done, Refusal> {
        create(c, EntityFields::Milestone(a)).await
    }
}

pub struct CreateRisk;

#[async_trait::async_trait]
impl Tool for CreateRisk {
    type Args = RiskFields;
    const NAME: &'static str = "create_risk";
    const DESCRIPTION: &'static str = "Create a risk in this project.";
    const NEEDS_PROJECT: bool = true;

    fn parse(raw: &Map<String, Value>) -> Result<RiskFields, Refusal> {
        fields(raw)
    }
    async fn run(&self, c: &Call<'_>, a: RiskFields) -> Result<Done, Refusal> {
        create(c, EntityFields::Risk(a)).await
    }
}

pub struct CreateRequirement;

#[async_trait::async_trait]
impl Tool for CreateRequirement {
    type Args = RequirementFields;
    const NAME: &'static str = "create_requirement";
    const DESCRIPTION: &'static str = "Create a requirement in this project.";
    const NEEDS_PROJECT: bool = true;

    fn parse(raw: &Map<String, Value>) -> Result<RequirementFields, Refusal> {
        fields(raw)
    }
    async fn run(&self, c: &Call<'_>, a: RequirementFields) -> Result<Done, Refusal> {
        create(c, EntityFields::Requirement(a)).await
    }
}
