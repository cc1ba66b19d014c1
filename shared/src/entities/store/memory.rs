//! [`EntityStore`] in memory: the DynamoDB store's semantics (one partition
//! per user and project, a commit all or nothing with its conditions read
//! before any write, items in key order) without a table, so the entities
//! service and the ontology tools can be unit-tested alone.

use super::keys;
use super::{chunks, Commit, CommitError, ContentRef, EntityRow, EntityStore, Op, ProjectRow};
use crate::entities::model::{Edge, EntityKind};
use crate::ids::{EntityId, ProjectId, UserId};
use crate::store::StoreError;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

/// Everything under one project's partition key, by sort key.
#[derive(Default)]
struct Partition {
    meta: Option<ProjectRow>,
    entities: BTreeMap<String, EntityRow>,
    /// By the outgoing copy's key; the incoming copy is derived.
    edges: BTreeMap<String, Edge>,
    /// Content by document and revision.
    content: HashMap<(EntityId, String), String>,
}

#[derive(Clone, Default)]
pub struct MemoryEntityStore {
    partitions: Arc<Mutex<HashMap<(UserId, ProjectId), Partition>>>,
}

fn out_sk(e: &Edge) -> String {
    keys::edge_out_sk(&e.from.id, &e.relation, &e.to.id)
}

impl MemoryEntityStore {
    pub fn new() -> Self {
        Self::default()
    }

    fn with<T>(&self, user: &UserId, project: &ProjectId, f: impl FnOnce(&mut Partition) -> T) -> T {
        let mut all = self.partitions.lock().expect("entities lock");
        f(all.entry((user.clone(), project.clone())).or_default())
    }

    /// The user's projects in the order of the projects index: creation time, then id.
    fn projects_in_order(&self, user: &UserId) -> Vec<ProjectRow> {
        let all = self.partitions.lock().expect("entities lock");
        let mut rows: Vec<ProjectRow> =
            all.iter().filter(|((u, _), _)| u == user).filter_map(|(_, p)| p.meta.clone()).collect();
        rows.sort_by_key(|r| keys::projects_gsi_sk(r.project.created_at, &r.project.id));
        rows
    }
}

/// Whether op `op` of a commit meets its condition in `p` as it was read.
fn op_allowed(p: &Partition, op: &Op) -> bool {
    let live = |kind: EntityKind, id: &EntityId| p.entities.get(&keys::entity_sk(kind, id));
    match op {
        Op::PutEntity { row, create } => live(row.entity.kind(), &row.entity.id).is_some() != *create,
        Op::DeleteEntity { kind, id } => live(*kind, id).is_some(),
        Op::PutEdge(e) => !p.edges.contains_key(&out_sk(e)),
        Op::DeleteEdge(_) => true,
        Op::Check(end) => live(end.kind, &end.id).is_some_and(|r| !r.deleting),
    }
}

fn apply(p: &mut Partition, op: &Op) {
    match op {
        Op::PutEntity { row, .. } => {
            p.entities.insert(keys::entity_sk(row.entity.kind(), &row.entity.id), (**row).clone());
        }
        Op::DeleteEntity { kind, id } => {
            p.entities.remove(&keys::entity_sk(*kind, id));
        }
        Op::PutEdge(e) => {
            p.edges.insert(out_sk(e), e.clone());
        }
        Op::DeleteEdge(e) => {
            p.edges.remove(&out_sk(e));
        }
        Op::Check(_) => {}
    }
}

#[async_trait::async_trait]
impl EntityStore for MemoryEntityStore {
    async fn get_project(&self, user: &UserId, project: &ProjectId) -> Result<Option<ProjectRow>, StoreError> {
        Ok(self.with(user, project, |p| p.meta.clone()))
    }

    async fn list_projects(
        &self,
        user: &UserId,
        limit: usize,
        after: Option<&ProjectRow>,
    ) -> Result<(Vec<ProjectRow>, bool), StoreError> {
        let from = after.map(|r| keys::projects_gsi_sk(r.project.created_at, &r.project.id));
        let page: Vec<ProjectRow> = self
            .projects_in_order(user)
            .into_iter()
            .filter(|r| from.as_ref().is_none_or(|f| &keys::projects_gsi_sk(r.project.created_at, &r.project.id) > f))
            .take(limit)
            .collect();
        // As a query with `Limit`: a full page says more may follow.
        let more = page.len() == limit;
        Ok((page.into_iter().filter(|r| !r.deleting).collect(), more))
    }

    async fn all_projects(&self, user: &UserId) -> Result<Vec<ProjectRow>, StoreError> {
        Ok(self.projects_in_order(user).into_iter().filter(|r| !r.deleting).collect())
    }

    async fn get_entity(
        &self,
        user: &UserId,
        project: &ProjectId,
        kind: EntityKind,
        id: &EntityId,
    ) -> Result<Option<EntityRow>, StoreError> {
        Ok(self.with(user, project, |p| p.entities.get(&keys::entity_sk(kind, id)).cloned()))
    }

    async fn list_entities(
        &self,
        user: &UserId,
        project: &ProjectId,
        kind: EntityKind,
        limit: usize,
        after: Option<&EntityId>,
    ) -> Result<(Vec<EntityRow>, bool), StoreError> {
        let limit = limit.clamp(1, 1000);
        let prefix = keys::entity_prefix(kind);
        let from = after.map(|id| keys::entity_sk(kind, id));
        let rows: Vec<EntityRow> = self.with(user, project, |p| {
            p.entities
                .iter()
                .filter(|(sk, _)| sk.starts_with(&prefix) && from.as_ref().is_none_or(|f| *sk > f))
                .take(limit)
                .map(|(_, r)| r.clone())
                .collect()
        });
        let more = rows.len() == limit;
        Ok((rows, more))
    }

    async fn edges_of(&self, user: &UserId, project: &ProjectId, id: &EntityId) -> Result<Vec<Edge>, StoreError> {
        Ok(self.with(user, project, |p| {
            let mut out: Vec<Edge> = p.edges.values().filter(|e| &e.from.id == id).cloned().collect();
            let mut incoming: Vec<Edge> = p.edges.values().filter(|e| &e.to.id == id).cloned().collect();
            incoming.sort_by_key(|e| keys::edge_in_sk(&e.from.id, &e.relation, &e.to.id));
            out.extend(incoming);
            out
        }))
    }

    async fn all_edges(&self, user: &UserId, project: &ProjectId) -> Result<Vec<Edge>, StoreError> {
        Ok(self.with(user, project, |p| p.edges.values().cloned().collect()))
    }

    async fn edge_exists(&self, user: &UserId, project: &ProjectId, e: &Edge) -> Result<bool, StoreError> {
        Ok(self.with(user, project, |p| p.edges.contains_key(&out_sk(e))))
    }

    async fn write_content(
        &self,
        user: &UserId,
        project: &ProjectId,
        doc: &EntityId,
        content: &str,
    ) -> Result<Option<ContentRef>, StoreError> {
        if content.is_empty() {
            return Ok(None);
        }
        let rev = uuid::Uuid::new_v4().simple().to_string();
        self.with(user, project, |p| p.content.insert((doc.clone(), rev.clone()), content.to_string()));
        Ok(Some(ContentRef { rev, chunks: chunks(content).len() as u32 }))
    }

    async fn read_content(
        &self,
        user: &UserId,
        project: &ProjectId,
        doc: &EntityId,
        c: &ContentRef,
    ) -> Result<Option<String>, StoreError> {
        Ok(self.with(user, project, |p| p.content.get(&(doc.clone(), c.rev.clone())).cloned()))
    }

    async fn delete_content(&self, user: &UserId, project: &ProjectId, doc: &EntityId, c: &ContentRef) {
        self.with(user, project, |p| p.content.remove(&(doc.clone(), c.rev.clone())));
    }

    async fn project_contents(
        &self,
        user: &UserId,
        project: &ProjectId,
    ) -> Result<Vec<(EntityRow, Option<String>)>, StoreError> {
        Ok(self.with(user, project, |p| {
            let body = |r: &EntityRow| {
                r.content.as_ref().and_then(|c| p.content.get(&(r.entity.id.clone(), c.rev.clone())).cloned())
            };
            p.entities.values().filter(|r| !r.deleting).map(|r| (r.clone(), body(r))).collect()
        }))
    }

    async fn delete_project_items(&self, user: &UserId, project: &ProjectId) -> Result<(), StoreError> {
        self.with(user, project, |p| {
            p.entities.clear();
            p.edges.clear();
            p.content.clear();
        });
        Ok(())
    }

    async fn delete_project_meta(&self, user: &UserId, project: &ProjectId) -> Result<(), StoreError> {
        self.with(user, project, |p| p.meta = None);
        Ok(())
    }

    async fn commit(&self, user: &UserId, c: &Commit) -> Result<(), CommitError> {
        if c.items() > Commit::MAX_ITEMS {
            return Err(StoreError::Backend(format!("a commit of {} items is over the limit", c.items())).into());
        }
        self.with(user, &c.meta.project.id, |p| {
            let meta_ok = match (&p.meta, c.expected_version) {
                (None, None) => true,
                (Some(m), Some(v)) => m.project.version == v && !m.deleting,
                _ => false,
            };
            if !meta_ok {
                return Err(CommitError::ProjectChanged);
            }
            if let Some(i) = c.ops.iter().position(|op| !op_allowed(p, op)) {
                return Err(CommitError::OpFailed(i));
            }
            p.meta = Some(c.meta.clone());
            c.ops.iter().for_each(|op| apply(p, op));
            Ok(())
        })
    }
}
