//! [`EntityService::reorganize`]: a batch of document moves and edge changes
//! applied against one project version, all or nothing.
//!
//! The contract:
//! - The whole batch is one [`Commit`]: the tree (in the project's meta item)
//!   after every move, plus two items per edge change. Nothing is written
//!   unless all of it is.
//! - `expected_version` other than the current one is `version_conflict`
//!   (409), also when a concurrent write lands between the batch's reads and
//!   its commit. Without one, such a write makes the batch plan again from
//!   fresh reads (and meet any refusal that write caused).
//! - A batch must fit one transaction: more than [`MAX_REORGANIZE_EDGES`]
//!   edge changes is `too_many_changes` (400), refused before anything is
//!   read. Splitting it over several transactions could leave half of it
//!   applied, which is what the route exists to avoid.

use super::{backoff, bumped, patch, tree_error, EntityService, MAX_ATTEMPTS};
use crate::entities::error::{EntityError, Missing};
use crate::entities::model::*;
use crate::entities::rules;
use crate::entities::store::{Commit, CommitError, Op};
use crate::entities::tree;
use crate::ids::{ProjectId, UserId};
use std::collections::HashSet;

/// The most moves one reorganize takes (they cost no item: the tree is in the
/// project's meta item).
pub const MAX_REORGANIZE_MOVES: usize = 100;
/// The most edge changes (links and unlinks together) one reorganize takes:
/// two items each beside the meta item, within [`Commit::MAX_ITEMS`].
pub const MAX_REORGANIZE_EDGES: usize = (Commit::MAX_ITEMS - 1) / 2;

/// The batch's own rules, before anything is read.
fn check_batch(r: &Reorganize) -> Result<(), EntityError> {
    if r.changes() == 0 {
        return Err(EntityError::bad("invalid_value", "a reorganize names at least one move, link or unlink"));
    }
    if r.moves.len() > MAX_REORGANIZE_MOVES {
        return Err(EntityError::bad("invalid_value", format!("at most {MAX_REORGANIZE_MOVES} moves")));
    }
    let edges = r.unlink.len() + r.link.len();
    if edges > MAX_REORGANIZE_EDGES {
        return Err(EntityError::TooManyChanges { edges, limit: MAX_REORGANIZE_EDGES, items: Commit::MAX_ITEMS });
    }
    let mut seen = HashSet::new();
    for e in r.unlink.iter().chain(&r.link) {
        rules::check_relation(&e.relation)?;
        // One transaction cannot touch an item twice; naming an edge twice
        // (or linking and unlinking it) says nothing a single mention does not.
        if !seen.insert(e) {
            let (f, t) = (&e.from.id, &e.to.id);
            return Err(EntityError::bad("invalid_value", format!("the edge {f} {} {t} is named twice", e.relation)));
        }
    }
    if r.link.iter().any(|e| e.from.id == e.to.id) {
        return Err(EntityError::SelfEdge);
    }
    Ok(())
}

impl EntityService {
    /// Applies `r` to the project at once (see the module's contract).
    pub async fn reorganize(
        &self,
        user: &UserId,
        project: &ProjectId,
        r: Reorganize,
    ) -> Result<Write<Reorganized>, EntityError> {
        check_batch(&r)?;
        for attempt in 0..MAX_ATTEMPTS {
            let row = self.project(user, project).await?;
            if let Some(expected) = r.expected_version.filter(|v| *v != row.project.version) {
                return Err(EntityError::Conflict { expected, current_version: row.project.version });
            }
            let mut next = bumped(&row, crate::now_ms());
            for mv in &r.moves {
                tree::move_node(&mut next.tree, &mv.document_id, mv.new_parent_id.as_ref(), mv.position)
                    .map_err(tree_error)?;
            }
            self.check_edges(user, project, &r).await?;
            let ops = r.unlink.iter().cloned().map(Op::DeleteEdge).chain(r.link.iter().cloned().map(Op::PutEdge));
            let c = Commit { expected_version: Some(row.project.version), meta: next, ops: ops.collect() };
            match self.store.commit(user, &c).await {
                Ok(()) => {
                    let changes = r.unlink.iter().map(|e| Change::Unlinked { edge: e.clone() });
                    let changes = changes.chain(r.link.iter().map(|e| Change::Linked { edge: e.clone() })).collect();
                    let patch = patch(&c.meta, changes, !r.moves.is_empty());
                    let doc_structure = DocStructure { version: c.meta.project.version, root: c.meta.tree };
                    let data = Reorganized { doc_structure, unlinked: r.unlink, linked: r.link };
                    return Ok(Write { data, patch });
                }
                Err(CommitError::ProjectChanged) => backoff(attempt).await,
                // The reads below were at the version the commit held, so
                // these only answer a store that broke that promise.
                Err(CommitError::OpFailed(i)) if i < r.unlink.len() => {
                    return Err(EntityError::NotFound(Missing::Edge))
                }
                Err(CommitError::OpFailed(_)) => return Err(EntityError::EdgeExists),
                Err(CommitError::Store(e)) => return Err(e.into()),
            }
        }
        Err(EntityError::Busy)
    }

    /// Every unlinked edge exists; every linked one does not, and joins two
    /// live entities of the project. Read after the project's meta item, and
    /// the commit holds that version: any write in between (a delete, a
    /// link) bumps it and the batch is planned again, so these reads stand in
    /// for `Op::Check`s, which would cost an item per end.
    async fn check_edges(&self, user: &UserId, project: &ProjectId, r: &Reorganize) -> Result<(), EntityError> {
        let live = |end: &EdgeEnd| {
            let (kind, id) = (end.kind, end.id.clone());
            async move {
                Ok::<_, EntityError>(self.entity_row(user, project, kind, &id).await?.is_some_and(|e| !e.deleting))
            }
        };
        for e in &r.unlink {
            if !self.store.edge_exists(user, project, e).await? {
                return Err(EntityError::NotFound(Missing::Edge));
            }
        }
        for e in &r.link {
            if !live(&e.from).await? {
                return Err(EntityError::EdgeEndpointMissing("from"));
            }
            if !live(&e.to).await? {
                return Err(EntityError::EdgeEndpointMissing("to"));
            }
            if self.store.edge_exists(user, project, e).await? {
                return Err(EntityError::EdgeExists);
            }
        }
        Ok(())
    }
}
