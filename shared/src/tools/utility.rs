//! The utility tools: what an entity kind's fields are (`get_field_info`),
//! and how an entity is linked (`get_entity_relationships`,
//! `get_linked_entities`).
//!
//! `get_field_info` is generated from the field types' `ToSchema` derives,
//! the single source of the entities API's validation and OpenAPI document,
//! so it cannot drift from them (a test compares it with the document's
//! component). The link tools read edges in both directions, name the other
//! side (kind and name), stay within the scope's project and the caller's
//! data, and are bounded: [`MAX_LINKED`] entities, depth at most 2. An id
//! that is not the caller's reads exactly like a missing one.

use super::call::{entity_id, Call};
use super::outcome::{Done, Op, Refusal};
use super::schema;
use super::{Tool, ToolName};
use crate::entities::{
    DocumentFields, Edge, EntityError, EntityKind, GoalFields, MilestoneFields, Missing, PlanFields, ProjectFields,
    RequirementFields, RiskFields, TaskFields,
};
use crate::ids::EntityId;
use crate::sse::OperationAction;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::HashSet;
use utoipa::ToSchema;

#[allow(non_upper_case_globals)]
impl ToolName {
    pub const GetFieldInfo: ToolName = ToolName::of(&GetFieldInfo);
    pub const GetEntityRelationships: ToolName = ToolName::of(&GetEntityRelationships);
    pub const GetLinkedEntities: ToolName = ToolName::of(&GetLinkedEntities);
}

/// Entities a link tool names at most (the rest is cut, and the result says so).
pub const MAX_LINKED: usize = 40;

/// What `get_field_info` describes: the project or one entity kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum FieldKind {
    Project,
    Document,
    Task,
    Goal,
    Plan,
    Milestone,
    Risk,
    Requirement,
}

/// The OpenAPI component name of `kind`'s fields, and its full schema.
pub fn field_schema(kind: FieldKind) -> (&'static str, Value) {
    match kind {
        FieldKind::Project => ("ProjectFields", schema::full::<ProjectFields>()),
        FieldKind::Document => ("DocumentFields", schema::full::<DocumentFields>()),
        FieldKind::Task => ("TaskFields", schema::full::<TaskFields>()),
        FieldKind::Goal => ("GoalFields", schema::full::<GoalFields>()),
        FieldKind::Plan => ("PlanFields", schema::full::<PlanFields>()),
        FieldKind::Milestone => ("MilestoneFields", schema::full::<MilestoneFields>()),
        FieldKind::Risk => ("RiskFields", schema::full::<RiskFields>()),
        FieldKind::Requirement => ("RequirementFields", schema::full::<RequirementFields>()),
    }
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FieldInfoArgs {
    pub kind: FieldKind,
}

pub struct GetFieldInfo;

#[async_trait::async_trait]
impl Tool for GetFieldInfo {
    type Args = FieldInfoArgs;
    const NAME: &'static str = "get_field_info";
    const DESCRIPTION: &'static str = "The fields of a kind: types, allowed values, limits, required.";
    const NEEDS_PROJECT: bool = false;

    async fn run(&self, _: &Call<'_>, a: FieldInfoArgs) -> Result<Done, Refusal> {
        let (name, fields) = field_schema(a.kind);
        Ok(Done::quiet(Ok(json!({ "kind": a.kind, "schema": name, "fields": fields }))))
    }
}

/// One end of a link, named.
#[derive(Debug, Clone, Serialize)]
struct Linked {
    id: String,
    kind: EntityKind,
    name: String,
    relation: String,
    /// `out`: this entity → it; `in`: it → this entity.
    direction: &'static str,
    /// 1: linked to the entity itself; 2: to one linked to it (`via`).
    depth: u8,
    #[serde(skip_serializing_if = "Option::is_none")]
    via: Option<String>,
}

/// The entity at the centre: its kind (found on an edge, else looked up
/// across the kinds) and its edges. Missing or another user's: `NotFound`.
async fn centre(c: &Call<'_>, id: &EntityId) -> Result<(EntityKind, Vec<Edge>), Refusal> {
    let project = c.project()?;
    let edges = c.svc.edges(c.user, project, Some(id)).await?;
    let seen = edges.iter().flat_map(|e| [&e.from, &e.to]).find(|end| &end.id == id).map(|end| end.kind);
    let kind = match seen {
        Some(k) => k,
        None => {
            let tries = EntityKind::ALL.map(|k| async move { c.svc.get(c.user, project, k, id).await.ok().map(|_| k) });
            let found = futures::future::join_all(tries).await.into_iter().flatten().next();
            found.ok_or(EntityError::NotFound(Missing::Entity))?
        }
    };
    // An edge may outlive nothing: the entity must still be there.
    c.svc.get(c.user, project, kind, id).await?;
    Ok((kind, edges))
}

/// The other side of each edge of `from` (filtered by relation).
fn sides(from: &EntityId, edges: &[Edge], relation: Option<&str>) -> Vec<(EntityKind, EntityId, String, &'static str)> {
    edges
        .iter()
        .filter(|e| relation.is_none_or(|r| e.relation == r))
        .filter_map(|e| {
            if &e.from.id == from {
                Some((e.to.kind, e.to.id.clone(), e.relation.clone(), "out"))
            } else if &e.to.id == from {
                Some((e.from.kind, e.from.id.clone(), e.relation.clone(), "in"))
            } else {
                None
            }
        })
        .collect()
}

/// Names every linked entity (one cheap read each, concurrently).
async fn named(c: &Call<'_>, links: Vec<(Linked, EntityId)>) -> Result<Vec<Linked>, Refusal> {
    let project = c.project()?;
    let names = futures::future::join_all(links.iter().map(|(l, id)| c.name_of(project, l.kind, id))).await;
    Ok(links.into_iter().zip(names).map(|((l, _), name)| Linked { name, ..l }).collect())
}

/// The links of `id` to `depth` (1 or 2), at most [`MAX_LINKED`]; whether it cut some.
async fn walk(
    c: &Call<'_>,
    id: &EntityId,
    first: Vec<Edge>,
    relation: Option<&str>,
    depth: u8,
) -> Result<(Vec<(Linked, EntityId)>, bool), Refusal> {
    let mut seen: HashSet<EntityId> = HashSet::from([id.clone()]);
    let mut out = vec![];
    let mut cut = false;
    let mut frontier: Vec<(EntityId, Vec<Edge>)> = vec![(id.clone(), first)];
    for level in 1..=depth {
        let mut next = vec![];
        for (from, edges) in &frontier {
            for (kind, other, relation, direction) in sides(from, edges, relation) {
                if !seen.insert(other.clone()) {
                    continue;
                }
                if out.len() == MAX_LINKED {
                    cut = true;
                    continue;
                }
                let via = (level > 1).then(|| from.to_string());
                let l =
                    Linked { id: other.to_string(), kind, name: String::new(), relation, direction, depth: level, via };
                out.push((l, other.clone()));
                next.push(other);
            }
        }
        if level == depth || next.is_empty() {
            break;
        }
        let project = c.project()?;
        let reads = next.iter().map(|n| c.svc.edges(c.user, project, Some(n)));
        let edges: Vec<Vec<Edge>> = futures::future::join_all(reads).await.into_iter().collect::<Result<_, _>>()?;
        frontier = next.into_iter().zip(edges).collect();
    }
    Ok((out, cut))
}

async fn links(c: &Call<'_>, a: LinkArgs, depth: u8) -> Result<Done, Refusal> {
    let id = entity_id("entity_id", &a.entity_id)?;
    let (kind, edges) = match centre(c, &id).await {
        Ok(found) => found,
        Err(Refusal::Entity(e)) => {
            let op = Op {
                action: OperationAction::Read,
                entity_type: "entity",
                name: id.to_string(),
                id: Some(id.to_string()),
            };
            return Ok(Done::read(Err(e), op));
        }
        Err(r) => return Err(r),
    };
    let relation = a.relation.as_deref().map(str::trim).filter(|r| !r.is_empty());
    let (found, cut) = walk(c, &id, edges, relation, depth).await?;
    let linked = named(c, found).await?;
    let name = c.name_of(c.project()?, kind, &id).await;
    let op =
        Op { action: OperationAction::Read, entity_type: kind.as_str(), name: name.clone(), id: Some(id.to_string()) };
    let entity = json!({ "id": id.to_string(), "kind": kind, "name": name });
    Ok(Done::read(Ok(json!({ "entity": entity, "linked": linked, "truncated": cut })), op))
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RelationshipArgs {
    pub entity_id: String,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LinkArgs {
    pub entity_id: String,
    /// Only this relation (e.g. supports).
    #[serde(default)]
    pub relation: Option<String>,
    /// 1 (default) or 2: links of links too.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 2)]
    pub depth: Option<u8>,
}

pub struct GetEntityRelationships;

#[async_trait::async_trait]
impl Tool for GetEntityRelationships {
    type Args = RelationshipArgs;
    const NAME: &'static str = "get_entity_relationships";
    const DESCRIPTION: &'static str = "An entity's relations, both directions, with each other side's kind and name.";
    const NEEDS_PROJECT: bool = true;

    async fn run(&self, c: &Call<'_>, a: RelationshipArgs) -> Result<Done, Refusal> {
        links(c, LinkArgs { entity_id: a.entity_id, relation: None, depth: None }, 1).await
    }
}

pub struct GetLinkedEntities;

#[async_trait::async_trait]
impl Tool for GetLinkedEntities {
    type Args = LinkArgs;
    const NAME: &'static str = "get_linked_entities";
    const DESCRIPTION: &'static str = "Entities linked to one entity, to depth 2, with kind, name and relation.";
    const NEEDS_PROJECT: bool = true;

    async fn run(&self, c: &Call<'_>, a: LinkArgs) -> Result<Done, Refusal> {
        let depth = a.depth.unwrap_or(1);
        if !(1..=2).contains(&depth) {
            return Err(Refusal::Args("depth must be 1 or 2".into()));
        }
        links(c, a, depth).await
    }
}
