//! The edge tools: link and unlink two entities of the scope's project with
//! a named, directed relation, and list relations. An edge's ends are named
//! by [`EntityKind`] and id, as in the stored [`Edge`].

use super::call::{entity_id, write, Call};
use super::outcome::{Done, Op, Refusal};
use super::{Tool, ToolName};
use crate::entities::{Edge, EdgeEnd, EntityKind};
use crate::sse::OperationAction;
use serde::Deserialize;
use serde_json::json;
use utoipa::ToSchema;

#[allow(non_upper_case_globals)]
impl ToolName {
    pub const LinkEntities: ToolName = ToolName::of(&LinkEntities);
    pub const UnlinkEntities: ToolName = ToolName::of(&UnlinkEntities);
    pub const ListEdges: ToolName = ToolName::of(&ListEdges);
}

// An [`Edge`] as the model writes it, ids as strings (parsed at execution,
// so a malformed one is a readable `invalid_id`). Doc comments on argument
// types reach the model.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EdgeArgs {
    pub from_kind: EntityKind,
    pub from_id: String,
    /// Lowercase letters, digits and _ (e.g. supports, blocks, part_of).
    pub relation: String,
    pub to_kind: EntityKind,
    pub to_id: String,
}

impl EdgeArgs {
    pub(super) fn edge(self) -> Result<Edge, Refusal> {
        Ok(Edge {
            from: EdgeEnd { kind: self.from_kind, id: entity_id("from_id", &self.from_id)? },
            relation: self.relation,
            to: EdgeEnd { kind: self.to_kind, id: entity_id("to_id", &self.to_id)? },
        })
    }
}

/// The step of linking or unlinking: "<from> <relation> <to>", by name.
pub(super) async fn edge_op(c: &Call<'_>, edge: &Edge) -> Result<Op, Refusal> {
    let project = c.project()?;
    let (from, to) = futures::join!(
        c.name_of(project, edge.from.kind, &edge.from.id),
        c.name_of(project, edge.to.kind, &edge.to.id)
    );
    Ok(Op {
        action: OperationAction::Update,
        entity_type: edge.from.kind.as_str(),
        name: format!("{from} {} {to}", edge.relation.replace('_', " ")),
        id: Some(edge.from.id.to_string()),
    })
}

pub struct LinkEntities;

#[async_trait::async_trait]
impl Tool for LinkEntities {
    type Args = EdgeArgs;
    const NAME: &'static str = "link_entities";
    const DESCRIPTION: &'static str =
        "Link two entities of this project with a named, directed relation (e.g. task supports goal).";
    const NEEDS_PROJECT: bool = true;

    async fn run(&self, c: &Call<'_>, a: EdgeArgs) -> Result<Done, Refusal> {
        let edge = a.edge()?;
        let op = edge_op(c, &edge).await?;
        Ok(write(c.svc.link(c.user, c.project()?, edge).await, op))
    }
}

pub struct UnlinkEntities;

#[async_trait::async_trait]
impl Tool for UnlinkEntities {
    type Args = EdgeArgs;
    const NAME: &'static str = "unlink_entities";
    const DESCRIPTION: &'static str = "Remove a relation between two entities.";
    const NEEDS_PROJECT: bool = true;

    async fn run(&self, c: &Call<'_>, a: EdgeArgs) -> Result<Done, Refusal> {
        let edge = a.edge()?;
        let op = edge_op(c, &edge).await?;
        Ok(write(c.svc.unlink(c.user, c.project()?, edge).await, op))
    }
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ListEdgesArgs {
    /// Only this entity's edges (both directions); all of the project's when absent.
    #[serde(default)]
    pub entity_id: Option<String>,
}

pub struct ListEdges;

#[async_trait::async_trait]
impl Tool for ListEdges {
    type Args = ListEdgesArgs;
    const NAME: &'static str = "list_edges";
    const DESCRIPTION: &'static str = "List this project's relations, or one entity's (both directions).";
    const NEEDS_PROJECT: bool = true;

    async fn run(&self, c: &Call<'_>, a: ListEdgesArgs) -> Result<Done, Refusal> {
        let id = a.entity_id.as_deref().map(|e| entity_id("entity_id", e)).transpose()?;
        let r = c.svc.edges(c.user, c.project()?, id.as_ref()).await;
        Ok(Done::quiet(r.map(|items| json!({ "items": items }))))
    }
}
