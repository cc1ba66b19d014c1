//! `reorganize_project`: several document moves and relation changes of the
//! scope's project in one step, all or nothing
//! ([`crate::entities::EntityService::reorganize`]: one version, `409` when
//! `expected_version` is stale). Each change is one `operation` (moves as
//! `move_document` names them, relations as `link_entities` does), all
//! succeeding or failing together; the one patch lists the relations changed
//! and carries the new tree. A batch of more than [`ASK_ABOVE`] changes waits
//! for the user's yes (`approval::policy`).

use super::call::{to_json, without_nulls, Call};
use super::documents::MoveDocumentArgs;
use super::edges::{edge_op, EdgeArgs};
use super::outcome::{Done, Op, Refusal};
use super::{Tool, ToolName};
use crate::entities::{EntityKind, MoveDocument, Reorganize};
use crate::sse::OperationAction;
use serde::Deserialize;
use serde_json::{Map, Value};
use utoipa::ToSchema;

/// A batch with more changes (moves, links and unlinks together) than this
/// waits for the user's yes: up to three is a small tidy-up the user asked
/// for in so many words; past that the model is restructuring on its own
/// reading, and the question lists what it would do.
pub const ASK_ABOVE: usize = 3;

#[allow(non_upper_case_globals)]
impl ToolName {
    pub const ReorganizeProject: ToolName = ToolName::of(&ReorganizeProject);
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReorganizeArgs {
    /// The tree's `version` you planned against; refused if the project changed since.
    #[serde(default)]
    pub expected_version: Option<u64>,
    /// Documents to move or reorder, applied in order.
    #[serde(default)]
    pub moves: Vec<MoveDocumentArgs>,
    /// Relations to remove (at most 4 link + unlink).
    #[serde(default)]
    pub unlink: Vec<EdgeArgs>,
    /// Relations to add.
    #[serde(default)]
    pub link: Vec<EdgeArgs>,
}

impl ReorganizeArgs {
    /// How many changes the call names (what the approval policy counts).
    pub fn changes(&self) -> usize {
        self.moves.len() + self.unlink.len() + self.link.len()
    }

    fn batch(self) -> Result<Reorganize, Refusal> {
        let moves = self.moves.into_iter().map(|m| m.into_move()).collect::<Result<_, _>>()?;
        let edges = |v: Vec<EdgeArgs>| v.into_iter().map(EdgeArgs::edge).collect::<Result<Vec<_>, _>>();
        Ok(Reorganize {
            expected_version: self.expected_version,
            moves,
            unlink: edges(self.unlink)?,
            link: edges(self.link)?,
        })
    }
}

/// A move as an operation: "<title> under <parent>" (or "at the top").
async fn move_op(c: &Call<'_>, mv: &MoveDocument) -> Result<Op, Refusal> {
    let project = c.project()?;
    let name = c.name_of(project, EntityKind::Document, &mv.document_id).await;
    let place = match &mv.new_parent_id {
        Some(p) => format!("under {}", c.name_of(project, EntityKind::Document, p).await),
        None => "at the top".to_string(),
    };
    let id = Some(mv.document_id.to_string());
    Ok(Op { action: OperationAction::Update, entity_type: "document", name: format!("{name} {place}"), id })
}

pub struct ReorganizeProject;

#[async_trait::async_trait]
impl Tool for ReorganizeProject {
    type Args = ReorganizeArgs;
    const NAME: &'static str = "reorganize_project";
    const DESCRIPTION: &'static str = "Move several documents and add or remove relations in one step, all or nothing.";
    const NEEDS_PROJECT: bool = true;

    fn parse(raw: &Map<String, Value>) -> Result<ReorganizeArgs, Refusal> {
        super::call::parse(&without_nulls(raw))
    }

    async fn run(&self, c: &Call<'_>, a: ReorganizeArgs) -> Result<Done, Refusal> {
        let batch = a.batch()?;
        let mut ops = vec![];
        for mv in &batch.moves {
            ops.push(move_op(c, mv).await?);
        }
        for e in batch.unlink.iter().chain(&batch.link) {
            ops.push(edge_op(c, e).await?);
        }
        let r = c.svc.reorganize(c.user, c.project()?, batch).await;
        let ok = r.is_ok();
        let ops = ops.into_iter().map(|op| (op, ok)).collect();
        Ok(match r {
            Ok(w) => Done { result: Ok(to_json(&w.data)), ops, patches: vec![w.patch], turn_events: vec![] },
            Err(e) => Done { result: Err(e), ops, patches: vec![], turn_events: vec![] },
        })
    }
}
