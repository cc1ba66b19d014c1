//! The ontology's side of the one table: projects, their entities, edges,
//! document content and the document tree. The rules (validation, versions,
//! patches) live in [`crate::entities`]; this module only reads and writes,
//! through the [`EntityStore`] trait: [`DynamoEntityStore`] in the functions,
//! the in-memory [`MemoryEntityStore`] in unit tests, one contract suite for
//! both (`contract`, under the `testkit` feature).
//!
//! # Key scheme
//!
//! Everything of a project shares one partition, scoped to its owner, so
//! another user's project id addresses nothing (404, like a missing one).
//!
//! | item | `pk` | `sk` | GSI1 `gsi1pk` / `gsi1sk` |
//! |---|---|---|---|
//! | project meta (fields, `version`, `tree` = the `doc_structure` JSON, `context_document_id`) | `U#<user>#P#<project>` | `PROJECT` | `U#<user>#PROJECTS` / `<created_at_ms, 13 digits>#<project>` |
//! | entity (`kind`, `data` = the kind's fields as JSON, `version`, times; documents: `content_length`, `content_rev`, `content_chunks`) | `U#<user>#P#<project>` | `E#<kind>#<entity>` | — |
//! | edge, outgoing copy | `U#<user>#P#<project>` | `X#<from>#<relation>#<to>` | — |
//! | edge, incoming copy | `U#<user>#P#<project>` | `Y#<to>#<relation>#<from>` | — |
//! | document content chunk (≤ 300 000 bytes of UTF-8) | `U#<user>#P#<project>` | `C#<document>#<content_rev>#<n, 4 digits>` | — |
//!
//! | access pattern | operation and key condition |
//! |---|---|
//! | a project (meta, version, tree) | `GetItem pk, sk=PROJECT` (consistent) |
//! | a user's projects, oldest first, paged | `Query GSI1 gsi1pk=U#<user>#PROJECTS` |
//! | an entity | `GetItem pk, sk=E#<kind>#<id>` (consistent) |
//! | a project's entities of one kind, paged by id | `Query pk=:pk AND begins_with(sk, "E#<kind>#")` |
//! | an entity's edges, both ways | `Query pk=:pk AND begins_with(sk, "X#<id>#")` and `... "Y#<id>#"` |
//! | a project's edges | `Query pk=:pk AND begins_with(sk, "X#")` |
//! | a document's content | `Query pk=:pk AND begins_with(sk, "C#<doc>#<content_rev>#")` (consistent) |
//! | search a project | `Query pk=:pk AND sk BETWEEN "C#" AND "E$"` (every entity and chunk; filtered in code) |
//! | any write in a project | `TransactWriteItems`: put the meta item with `version = :read_version` as condition (so writes to one project are serialized and each bumps `version` by one), plus its entity / edge items (≤ 9 more) |
//!
//! Two writes happen outside a transaction, and both are invisible until one
//! commits: content chunks are written under a fresh `content_rev` *before* the
//! transaction that points the document at them (a failed transaction leaves
//! unreferenced chunks, deleted best effort, never read), and the chunks of a
//! replaced revision are deleted *after* it. A reader that catches a revision
//! being deleted sees fewer chunks than `content_chunks` and reads again.

#[cfg(any(test, feature = "testkit"))]
pub mod contract;
mod dynamo;
#[cfg(any(test, feature = "testkit"))]
pub mod interleaved;
mod memory;

pub use dynamo::{keys, DynamoEntityStore};
pub use memory::MemoryEntityStore;

use crate::entities::model::{DocNode, Edge, EdgeEnd, Entity, EntityKind, Project};
use crate::ids::{EntityId, ProjectId, UserId};
use crate::store::StoreError;

/// Content is split into chunks of at most this many bytes, well under the
/// 400 KB item limit.
pub const CHUNK_BYTES: usize = 300_000;

/// Splits on char boundaries into pieces of at most `CHUNK_BYTES` bytes.
pub(crate) fn chunks(content: &str) -> Vec<&str> {
    let mut out = vec![];
    let mut rest = content;
    while !rest.is_empty() {
        let mut end = rest.len().min(CHUNK_BYTES);
        while !rest.is_char_boundary(end) {
            end -= 1;
        }
        let (a, b) = rest.split_at(end);
        out.push(a);
        rest = b;
    }
    out
}

/// A project as stored: the record, its tree, and whether a delete is under way.
#[derive(Debug, Clone, PartialEq)]
pub struct ProjectRow {
    pub project: Project,
    pub tree: Vec<DocNode>,
    pub deleting: bool,
}

/// Where a document's content is: its revision and how many chunks it has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContentRef {
    pub rev: String,
    pub chunks: u32,
}

/// An entity as stored. `entity.content` is never filled here.
#[derive(Debug, Clone, PartialEq)]
pub struct EntityRow {
    pub entity: Entity,
    pub content: Option<ContentRef>,
    /// Set while a multi-step delete removes its edges: the entity reads as gone.
    pub deleting: bool,
}

/// One item-level step of a project write.
#[derive(Debug, Clone)]
pub enum Op {
    /// Writes the whole entity item; `create` requires it absent, else present.
    PutEntity {
        row: Box<EntityRow>,
        create: bool,
    },
    DeleteEntity {
        kind: EntityKind,
        id: EntityId,
    },
    /// Both copies; refused if the edge exists.
    PutEdge(Edge),
    /// Both copies.
    DeleteEdge(Edge),
    /// The entity exists and is not being deleted.
    Check(EdgeEnd),
}

impl Op {
    fn items(&self) -> usize {
        match self {
            Op::PutEdge(_) | Op::DeleteEdge(_) => 2,
            _ => 1,
        }
    }
}

/// One atomic write to a project: its meta item (with the new version) and
/// the steps that go with it.
#[derive(Debug, Clone)]
pub struct Commit {
    /// The version the caller read; `None` creates the project.
    pub expected_version: Option<u64>,
    pub meta: ProjectRow,
    pub ops: Vec<Op>,
}

impl Commit {
    /// DynamoDB Local refuses transactions of more than this many items.
    pub const MAX_ITEMS: usize = 10;

    pub fn items(&self) -> usize {
        1 + self.ops.iter().map(Op::items).sum::<usize>()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CommitError {
    /// Someone else wrote to the project since it was read (or it is gone).
    #[error("the project changed")]
    ProjectChanged,
    /// The op at this index failed its condition.
    #[error("step {0} failed its condition")]
    OpFailed(usize),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What [`crate::entities::EntityService`] needs of storage: reads of
/// projects, entities, edges and content, content writes outside the
/// transaction, and one transactional [`Commit`] per write. The rules
/// (validation, versions, the tree) stay in the service, so every
/// implementation answers the same questions the same way.
#[async_trait::async_trait]
pub trait EntityStore: Send + Sync {
    /// The project as stored (also while being deleted), or `None`.
    async fn get_project(&self, user: &UserId, project: &ProjectId) -> Result<Option<ProjectRow>, StoreError>;

    /// A page of the user's projects, oldest first; `after` is the previous
    /// page's last project. Projects being deleted are left out. Returns
    /// whether more may follow.
    async fn list_projects(
        &self,
        user: &UserId,
        limit: usize,
        after: Option<&ProjectRow>,
    ) -> Result<(Vec<ProjectRow>, bool), StoreError>;

    /// All of the user's projects (search across the workspace).
    async fn all_projects(&self, user: &UserId) -> Result<Vec<ProjectRow>, StoreError>;

    async fn get_entity(
        &self,
        user: &UserId,
        project: &ProjectId,
        kind: EntityKind,
        id: &EntityId,
    ) -> Result<Option<EntityRow>, StoreError>;

    /// A page of a project's entities of one kind, in id order (creation order
    /// for the ids we mint); `after` is the previous page's last id. Returns
    /// whether more may follow.
    async fn list_entities(
        &self,
        user: &UserId,
        project: &ProjectId,
        kind: EntityKind,
        limit: usize,
        after: Option<&EntityId>,
    ) -> Result<(Vec<EntityRow>, bool), StoreError>;

    /// An entity's edges, outgoing then incoming.
    async fn edges_of(&self, user: &UserId, project: &ProjectId, id: &EntityId) -> Result<Vec<Edge>, StoreError>;

    async fn all_edges(&self, user: &UserId, project: &ProjectId) -> Result<Vec<Edge>, StoreError>;

    async fn edge_exists(&self, user: &UserId, project: &ProjectId, e: &Edge) -> Result<bool, StoreError>;

    /// Writes `content` under a fresh revision, before the commit that makes
    /// it visible. `None` for empty content (nothing written).
    async fn write_content(
        &self,
        user: &UserId,
        project: &ProjectId,
        doc: &EntityId,
        content: &str,
    ) -> Result<Option<ContentRef>, StoreError>;

    /// The content of a revision; `None` if it is not all there (replaced and
    /// being deleted: read the entity again).
    async fn read_content(
        &self,
        user: &UserId,
        project: &ProjectId,
        doc: &EntityId,
        c: &ContentRef,
    ) -> Result<Option<String>, StoreError>;

    /// Deletes a revision's content, best effort (it is unreferenced).
    async fn delete_content(&self, user: &UserId, project: &ProjectId, doc: &EntityId, c: &ContentRef);

    /// Every live entity of a project with its content (documents), for search.
    async fn project_contents(
        &self,
        user: &UserId,
        project: &ProjectId,
    ) -> Result<Vec<(EntityRow, Option<String>)>, StoreError>;

    /// Deletes every item of a project but its meta item (a project delete's
    /// second step, once the meta item marks it as being deleted).
    async fn delete_project_items(&self, user: &UserId, project: &ProjectId) -> Result<(), StoreError>;

    /// Deletes a project's meta item (the last step of a project delete).
    async fn delete_project_meta(&self, user: &UserId, project: &ProjectId) -> Result<(), StoreError>;

    /// Writes the meta item and the ops atomically: `ProjectChanged` when the
    /// project is not at `expected_version` (or exists, for `None`; or is
    /// being deleted), `OpFailed(i)` when op `i`'s condition fails. Nothing is
    /// written then.
    async fn commit(&self, user: &UserId, c: &Commit) -> Result<(), CommitError>;
}
