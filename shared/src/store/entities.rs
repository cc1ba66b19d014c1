//! The ontology's side of the one table: projects, their entities, edges,
//! document content and the document tree. The rules (validation, versions,
//! patches) live in [`crate::entities`]; this module only reads and writes.
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

use crate::entities::model::{DocNode, Edge, EdgeEnd, Entity, EntityFields, EntityKind, Project, ProjectFields};
use crate::ids::{EntityId, ProjectId, UserId};
use crate::store::StoreError;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::types::{
    AttributeValue, ConditionCheck, Delete, DeleteRequest, Put, TransactWriteItem, WriteRequest,
};
use aws_sdk_dynamodb::Client;
use std::collections::HashMap;
use tracing::Instrument;

type Item = HashMap<String, AttributeValue>;

/// Content is split into chunks of at most this many bytes, well under the
/// 400 KB item limit.
pub const CHUNK_BYTES: usize = 300_000;

/// The key builders of this module's scheme: the only place that spells them.
pub mod keys {
    use crate::entities::model::EntityKind;
    use crate::ids::{EntityId, ProjectId, UserId};

    pub const PROJECT_SK: &str = "PROJECT";

    pub fn project_pk(user: &UserId, project: &ProjectId) -> String {
        format!("U#{user}#P#{project}")
    }
    pub fn projects_gsi_pk(user: &UserId) -> String {
        format!("U#{user}#PROJECTS")
    }
    pub fn projects_gsi_sk(created_at: i64, project: &ProjectId) -> String {
        format!("{:013}#{project}", created_at.max(0))
    }
    pub fn entity_prefix(kind: EntityKind) -> String {
        format!("E#{}#", kind.as_str())
    }
    pub fn entity_sk(kind: EntityKind, id: &EntityId) -> String {
        format!("E#{}#{id}", kind.as_str())
    }
    pub fn edge_out_sk(from: &EntityId, relation: &str, to: &EntityId) -> String {
        format!("X#{from}#{relation}#{to}")
    }
    pub fn edge_in_sk(from: &EntityId, relation: &str, to: &EntityId) -> String {
        format!("Y#{to}#{relation}#{from}")
    }
    pub fn chunk_prefix(doc: &EntityId, rev: &str) -> String {
        format!("C#{doc}#{rev}#")
    }
    pub fn chunk_sk(doc: &EntityId, rev: &str, n: u32) -> String {
        format!("C#{doc}#{rev}#{n:04}")
    }
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

#[derive(Clone)]
pub struct EntityStore {
    client: Client,
    table: String,
}

fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

fn n(v: impl ToString) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

fn get_s<'a>(item: &'a Item, k: &str) -> Option<&'a str> {
    item.get(k).and_then(|v| v.as_s().ok()).map(String::as_str)
}

fn get_n(item: &Item, k: &str) -> Option<i64> {
    item.get(k).and_then(|v| v.as_n().ok()).and_then(|v| v.parse().ok())
}

fn corrupt(what: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(what.to_string())
}

fn backend<E: ProvideErrorMetadata + std::fmt::Debug, R: std::fmt::Debug>(e: SdkError<E, R>) -> StoreError {
    let detail = match e.as_service_error() {
        Some(se) => format!("{}: {}", se.code().unwrap_or("unknown"), se.message().unwrap_or("")),
        None => format!("{e:?}"),
    };
    StoreError::Backend(detail)
}

fn built<T, E: std::fmt::Display>(r: Result<T, E>) -> Result<T, StoreError> {
    r.map_err(|e| StoreError::Backend(e.to_string()))
}

fn key(pk: String, sk: String) -> Item {
    HashMap::from([("pk".to_string(), s(pk)), ("sk".to_string(), s(sk))])
}

fn project_item(user: &UserId, row: &ProjectRow) -> Result<Item, StoreError> {
    let p = &row.project;
    let mut item = key(keys::project_pk(user, &p.id), keys::PROJECT_SK.into());
    item.insert("type".into(), s("project"));
    item.insert("gsi1pk".into(), s(keys::projects_gsi_pk(user)));
    item.insert("gsi1sk".into(), s(keys::projects_gsi_sk(p.created_at, &p.id)));
    item.insert("id".into(), s(p.id.as_str()));
    item.insert("data".into(), s(serde_json::to_string(&p.fields()).map_err(corrupt)?));
    item.insert("context_document_id".into(), s(p.context_document_id.as_str()));
    item.insert("version".into(), n(p.version));
    item.insert("created_at".into(), n(p.created_at));
    item.insert("updated_at".into(), n(p.updated_at));
    item.insert("tree".into(), s(serde_json::to_string(&row.tree).map_err(corrupt)?));
    if row.deleting {
        item.insert("deleting".into(), AttributeValue::Bool(true));
    }
    Ok(item)
}

fn project_from_item(item: &Item) -> Result<ProjectRow, StoreError> {
    let id = ProjectId::parse(get_s(item, "id").ok_or_else(|| corrupt("project id"))?).map_err(corrupt)?;
    let fields: ProjectFields =
        serde_json::from_str(get_s(item, "data").ok_or_else(|| corrupt("project data"))?).map_err(corrupt)?;
    let tree = serde_json::from_str(get_s(item, "tree").unwrap_or("[]")).map_err(corrupt)?;
    Ok(ProjectRow {
        project: Project {
            id,
            name: fields.name,
            description: fields.description,
            state: fields.state,
            context_document_id: EntityId::parse(get_s(item, "context_document_id").unwrap_or_default())
                .map_err(corrupt)?,
            version: get_n(item, "version").unwrap_or(0).max(0) as u64,
            created_at: get_n(item, "created_at").unwrap_or(0),
            updated_at: get_n(item, "updated_at").unwrap_or(0),
        },
        tree,
        deleting: item.get("deleting").is_some(),
    })
}

fn entity_item(user: &UserId, row: &EntityRow) -> Result<Item, StoreError> {
    let e = &row.entity;
    let mut item = key(keys::project_pk(user, &e.project_id), keys::entity_sk(e.kind(), &e.id));
    item.insert("type".into(), s("entity"));
    item.insert("kind".into(), s(e.kind().as_str()));
    item.insert("id".into(), s(e.id.as_str()));
    item.insert("project_id".into(), s(e.project_id.as_str()));
    item.insert("data".into(), s(serde_json::Value::Object(e.fields.to_object()).to_string()));
    item.insert("version".into(), n(e.version));
    item.insert("created_at".into(), n(e.created_at));
    item.insert("updated_at".into(), n(e.updated_at));
    if let Some(len) = e.content_length {
        item.insert("content_length".into(), n(len));
    }
    if let Some(c) = &row.content {
        item.insert("content_rev".into(), s(c.rev.clone()));
        item.insert("content_chunks".into(), n(c.chunks));
    }
    if row.deleting {
        item.insert("deleting".into(), AttributeValue::Bool(true));
    }
    Ok(item)
}

fn entity_from_item(item: &Item) -> Result<EntityRow, StoreError> {
    let kind = EntityKind::parse(get_s(item, "kind").unwrap_or_default()).ok_or_else(|| corrupt("entity kind"))?;
    let data: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(get_s(item, "data").ok_or_else(|| corrupt("entity data"))?).map_err(corrupt)?;
    let fields = EntityFields::from_object(kind, data).map_err(corrupt)?;
    let content = match (get_s(item, "content_rev"), get_n(item, "content_chunks")) {
        (Some(rev), Some(chunks)) => Some(ContentRef { rev: rev.to_string(), chunks: chunks.max(0) as u32 }),
        _ => None,
    };
    Ok(EntityRow {
        entity: Entity {
            id: EntityId::parse(get_s(item, "id").unwrap_or_default()).map_err(corrupt)?,
            project_id: ProjectId::parse(get_s(item, "project_id").unwrap_or_default()).map_err(corrupt)?,
            fields,
            version: get_n(item, "version").unwrap_or(0).max(0) as u64,
            created_at: get_n(item, "created_at").unwrap_or(0),
            updated_at: get_n(item, "updated_at").unwrap_or(0),
            content_length: get_n(item, "content_length").map(|l| l.max(0) as u64),
            content: None,
        },
        content,
        deleting: item.get("deleting").is_some(),
    })
}

fn edge_items(user: &UserId, project: &ProjectId, e: &Edge) -> [Item; 2] {
    let pk = keys::project_pk(user, project);
    let mk = |sk: String| {
        let mut item = key(pk.clone(), sk);
        item.insert("type".into(), s("edge"));
        item.insert("from_kind".into(), s(e.from.kind.as_str()));
        item.insert("from_id".into(), s(e.from.id.as_str()));
        item.insert("relation".into(), s(e.relation.clone()));
        item.insert("to_kind".into(), s(e.to.kind.as_str()));
        item.insert("to_id".into(), s(e.to.id.as_str()));
        item
    };
    [mk(keys::edge_out_sk(&e.from.id, &e.relation, &e.to.id)), mk(keys::edge_in_sk(&e.from.id, &e.relation, &e.to.id))]
}

fn edge_from_item(item: &Item) -> Result<Edge, StoreError> {
    let end = |k: &str, i: &str| -> Result<EdgeEnd, StoreError> {
        Ok(EdgeEnd {
            kind: EntityKind::parse(get_s(item, k).unwrap_or_default()).ok_or_else(|| corrupt("edge kind"))?,
            id: EntityId::parse(get_s(item, i).unwrap_or_default()).map_err(corrupt)?,
        })
    };
    Ok(Edge {
        from: end("from_kind", "from_id")?,
        relation: get_s(item, "relation").ok_or_else(|| corrupt("edge relation"))?.to_string(),
        to: end("to_kind", "to_id")?,
    })
}

/// Splits on char boundaries into pieces of at most `CHUNK_BYTES` bytes.
fn chunks(content: &str) -> Vec<&str> {
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

impl EntityStore {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self { client, table: table.into() }
    }

    async fn get(&self, pk: String, sk: String, what: &'static str) -> Result<Option<Item>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(key(pk, sk)))
            .consistent_read(true)
            .send()
            .instrument(tracing::debug_span!("ddb.get_item", what))
            .await
            .map_err(backend)?;
        Ok(out.item)
    }

    /// One page of a query over a project's partition: `begins_with(sk, prefix)`,
    /// or `sk BETWEEN a AND b` when `between` is given.
    async fn query_page(
        &self,
        pk: String,
        prefix: &str,
        between: Option<(&str, &str)>,
        limit: Option<i32>,
        start: Option<Item>,
    ) -> Result<(Vec<Item>, Option<Item>), StoreError> {
        let mut q = self
            .client
            .query()
            .table_name(&self.table)
            .consistent_read(true)
            .expression_attribute_values(":pk", s(pk))
            .set_limit(limit)
            .set_exclusive_start_key(start);
        q = match between {
            Some((a, b)) => q
                .key_condition_expression("pk = :pk AND sk BETWEEN :a AND :b")
                .expression_attribute_values(":a", s(a))
                .expression_attribute_values(":b", s(b)),
            None => q
                .key_condition_expression("pk = :pk AND begins_with(sk, :p)")
                .expression_attribute_values(":p", s(prefix)),
        };
        let out = q.send().instrument(tracing::debug_span!("ddb.query", prefix)).await.map_err(backend)?;
        Ok((out.items.unwrap_or_default(), out.last_evaluated_key))
    }

    /// Every item of a query, following pages.
    async fn query_all(
        &self,
        pk: String,
        prefix: &str,
        between: Option<(&str, &str)>,
    ) -> Result<Vec<Item>, StoreError> {
        let mut all = vec![];
        let mut start = None;
        loop {
            let (items, next) = self.query_page(pk.clone(), prefix, between, None, start).await?;
            all.extend(items);
            match next {
                Some(k) => start = Some(k),
                None => return Ok(all),
            }
        }
    }

    pub async fn get_project(&self, user: &UserId, project: &ProjectId) -> Result<Option<ProjectRow>, StoreError> {
        self.get(keys::project_pk(user, project), keys::PROJECT_SK.into(), "project")
            .await?
            .map(|i| project_from_item(&i))
            .transpose()
    }

    /// A page of the user's projects, oldest first; `after` is the previous
    /// page's last project. Projects being deleted are left out.
    pub async fn list_projects(
        &self,
        user: &UserId,
        limit: usize,
        after: Option<&ProjectRow>,
    ) -> Result<(Vec<ProjectRow>, bool), StoreError> {
        let start = after.map(|r| {
            let mut k = key(keys::project_pk(user, &r.project.id), keys::PROJECT_SK.into());
            k.insert("gsi1pk".into(), s(keys::projects_gsi_pk(user)));
            k.insert("gsi1sk".into(), s(keys::projects_gsi_sk(r.project.created_at, &r.project.id)));
            k
        });
        let out = self
            .client
            .query()
            .table_name(&self.table)
            .index_name(super::keys::GSI1)
            .key_condition_expression("gsi1pk = :g")
            .expression_attribute_values(":g", s(keys::projects_gsi_pk(user)))
            .limit(limit as i32)
            .set_exclusive_start_key(start)
            .send()
            .instrument(tracing::debug_span!("ddb.query", what = "projects"))
            .await
            .map_err(backend)?;
        let rows = out.items.unwrap_or_default().iter().map(project_from_item).collect::<Result<Vec<_>, _>>()?;
        let more = out.last_evaluated_key.is_some();
        Ok((rows.into_iter().filter(|r| !r.deleting).collect(), more))
    }

    /// All of the user's projects (search across the workspace).
    pub async fn all_projects(&self, user: &UserId) -> Result<Vec<ProjectRow>, StoreError> {
        let mut all = vec![];
        let mut after: Option<ProjectRow> = None;
        loop {
            let (rows, more) = self.list_projects(user, 100, after.as_ref()).await?;
            after = rows.last().cloned();
            all.extend(rows);
            if !more || after.is_none() {
                return Ok(all);
            }
        }
    }

    pub async fn get_entity(
        &self,
        user: &UserId,
        project: &ProjectId,
        kind: EntityKind,
        id: &EntityId,
    ) -> Result<Option<EntityRow>, StoreError> {
        self.get(keys::project_pk(user, project), keys::entity_sk(kind, id), "entity")
            .await?
            .map(|i| entity_from_item(&i))
            .transpose()
    }

    /// A page of a project's entities of one kind, in id order (creation order
    /// for the ids we mint); `after` is the previous page's last id. Returns
    /// whether more may follow.
    pub async fn list_entities(
        &self,
        user: &UserId,
        project: &ProjectId,
        kind: EntityKind,
        limit: usize,
        after: Option<&EntityId>,
    ) -> Result<(Vec<EntityRow>, bool), StoreError> {
        let pk = keys::project_pk(user, project);
        let start = after.map(|id| key(pk.clone(), keys::entity_sk(kind, id)));
        let (items, next) =
            self.query_page(pk, &keys::entity_prefix(kind), None, Some(limit.clamp(1, 1000) as i32), start).await?;
        let rows = items.iter().map(entity_from_item).collect::<Result<Vec<_>, _>>()?;
        Ok((rows, next.is_some()))
    }

    /// An entity's edges, outgoing and incoming.
    pub async fn edges_of(&self, user: &UserId, project: &ProjectId, id: &EntityId) -> Result<Vec<Edge>, StoreError> {
        let pk = keys::project_pk(user, project);
        let mut out = self.query_all(pk.clone(), &format!("X#{id}#"), None).await?;
        out.extend(self.query_all(pk, &format!("Y#{id}#"), None).await?);
        out.iter().map(edge_from_item).collect()
    }

    pub async fn all_edges(&self, user: &UserId, project: &ProjectId) -> Result<Vec<Edge>, StoreError> {
        self.query_all(keys::project_pk(user, project), "X#", None).await?.iter().map(edge_from_item).collect()
    }

    pub async fn edge_exists(&self, user: &UserId, project: &ProjectId, e: &Edge) -> Result<bool, StoreError> {
        let sk = keys::edge_out_sk(&e.from.id, &e.relation, &e.to.id);
        Ok(self.get(keys::project_pk(user, project), sk, "edge").await?.is_some())
    }

    /// Writes `content` as chunks under a fresh revision, before the commit that
    /// makes them visible. `None` for empty content (no chunks at all).
    pub async fn write_content(
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
        let pk = keys::project_pk(user, project);
        let parts = chunks(content);
        // One PutItem per chunk: a batch of 25 would exceed the 16 MB request cap
        // long before it helps, and content writes are rare.
        for (i, part) in parts.iter().enumerate() {
            let mut item = key(pk.clone(), keys::chunk_sk(doc, &rev, i as u32));
            item.insert("type".into(), s("chunk"));
            item.insert("doc_id".into(), s(doc.as_str()));
            item.insert("rev".into(), s(rev.clone()));
            item.insert("body".into(), s(*part));
            self.client
                .put_item()
                .table_name(&self.table)
                .set_item(Some(item))
                .send()
                .instrument(tracing::debug_span!("ddb.put_item", what = "content_chunk"))
                .await
                .map_err(backend)?;
        }
        Ok(Some(ContentRef { rev, chunks: parts.len() as u32 }))
    }

    /// The content of a revision; `None` if its chunks are not all there (the
    /// revision was replaced and is being deleted: read the entity again).
    pub async fn read_content(
        &self,
        user: &UserId,
        project: &ProjectId,
        doc: &EntityId,
        c: &ContentRef,
    ) -> Result<Option<String>, StoreError> {
        let items = self.query_all(keys::project_pk(user, project), &keys::chunk_prefix(doc, &c.rev), None).await?;
        if items.len() != c.chunks as usize {
            return Ok(None);
        }
        Ok(Some(items.iter().filter_map(|i| get_s(i, "body")).collect()))
    }

    /// Deletes a revision's chunks, best effort (they are unreferenced).
    pub async fn delete_content(&self, user: &UserId, project: &ProjectId, doc: &EntityId, c: &ContentRef) {
        let pk = keys::project_pk(user, project);
        let keys: Vec<Item> = (0..c.chunks).map(|i| key(pk.clone(), keys::chunk_sk(doc, &c.rev, i))).collect();
        if let Err(e) = self.batch_delete(keys).await {
            tracing::warn!(error = %e, doc = %doc, "unreferenced content chunks left behind");
        }
    }

    async fn batch_delete(&self, keys: Vec<Item>) -> Result<(), StoreError> {
        for batch in keys.chunks(25) {
            let mut requests: Vec<WriteRequest> = batch
                .iter()
                .map(|k| {
                    Ok(WriteRequest::builder()
                        .delete_request(built(DeleteRequest::builder().set_key(Some(k.clone())).build())?)
                        .build())
                })
                .collect::<Result<_, StoreError>>()?;
            for attempt in 0..8 {
                let out = self
                    .client
                    .batch_write_item()
                    .request_items(&self.table, requests)
                    .send()
                    .instrument(tracing::debug_span!("ddb.batch_write_item", what = "delete"))
                    .await
                    .map_err(backend)?;
                requests = out.unprocessed_items.and_then(|mut m| m.remove(&self.table)).unwrap_or_default();
                if requests.is_empty() {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(20 << attempt)).await;
            }
            if !requests.is_empty() {
                return Err(StoreError::Backend("batch delete left unprocessed items".into()));
            }
        }
        Ok(())
    }

    /// Every live entity of a project with its content (documents), for search.
    /// Reads the whole partition's entity and chunk range: cost grows with the
    /// project's size.
    pub async fn project_contents(
        &self,
        user: &UserId,
        project: &ProjectId,
    ) -> Result<Vec<(EntityRow, Option<String>)>, StoreError> {
        let items = self.query_all(keys::project_pk(user, project), "", Some(("C#", "E$"))).await?;
        let mut bodies: HashMap<(String, String), Vec<(String, String)>> = HashMap::new();
        let mut rows = vec![];
        for item in &items {
            match get_s(item, "type") {
                Some("chunk") => {
                    let doc = get_s(item, "doc_id").unwrap_or_default().to_string();
                    let rev = get_s(item, "rev").unwrap_or_default().to_string();
                    let sk = get_s(item, "sk").unwrap_or_default().to_string();
                    bodies.entry((doc, rev)).or_default().push((sk, get_s(item, "body").unwrap_or_default().into()));
                }
                Some("entity") => {
                    let row = entity_from_item(item)?;
                    if !row.deleting {
                        rows.push(row);
                    }
                }
                _ => {}
            }
        }
        Ok(rows
            .into_iter()
            .map(|row| {
                let body = row.content.as_ref().and_then(|c| {
                    let mut parts = bodies.remove(&(row.entity.id.to_string(), c.rev.clone()))?;
                    parts.sort();
                    Some(parts.into_iter().map(|(_, b)| b).collect::<String>())
                });
                (row, body)
            })
            .collect())
    }

    /// Deletes every item of a project but its meta item (a project delete's
    /// second step, once the meta item marks it as being deleted).
    pub async fn delete_project_items(&self, user: &UserId, project: &ProjectId) -> Result<(), StoreError> {
        let items = self.query_all(keys::project_pk(user, project), "", Some(("A", "O"))).await?;
        let mut keys: Vec<Item> = items
            .into_iter()
            .filter_map(|mut i| Some(key(i.remove("pk")?.as_s().ok()?.clone(), i.remove("sk")?.as_s().ok()?.clone())))
            .collect();
        let tail = self.query_all(keys::project_pk(user, project), "", Some(("Q", "Z~"))).await?;
        keys.extend(
            tail.into_iter().filter_map(|mut i| {
                Some(key(i.remove("pk")?.as_s().ok()?.clone(), i.remove("sk")?.as_s().ok()?.clone()))
            }),
        );
        self.batch_delete(keys).await
    }

    /// Deletes a project's meta item (the last step of a project delete).
    pub async fn delete_project_meta(&self, user: &UserId, project: &ProjectId) -> Result<(), StoreError> {
        self.client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(key(keys::project_pk(user, project), keys::PROJECT_SK.into())))
            .send()
            .instrument(tracing::debug_span!("ddb.delete_item", what = "project"))
            .await
            .map_err(backend)?;
        Ok(())
    }

    /// Writes the meta item and the ops in one transaction.
    pub async fn commit(&self, user: &UserId, c: &Commit) -> Result<(), CommitError> {
        if c.items() > Commit::MAX_ITEMS {
            return Err(StoreError::Backend(format!("a commit of {} items is over the limit", c.items())).into());
        }
        let project = &c.meta.project.id;
        let pk = keys::project_pk(user, project);
        let mut items = Vec::with_capacity(c.items());
        // Which op each transaction item belongs to (0 = the meta item).
        let mut owner = vec![0usize];
        let meta = Put::builder().table_name(&self.table).set_item(Some(project_item(user, &c.meta)?));
        let meta = match c.expected_version {
            None => meta.condition_expression("attribute_not_exists(pk)"),
            Some(v) => meta
                .condition_expression("version = :v AND attribute_not_exists(deleting)")
                .expression_attribute_values(":v", n(v)),
        };
        items.push(TransactWriteItem::builder().put(built(meta.build())?).build());
        for (i, op) in c.ops.iter().enumerate() {
            match op {
                Op::PutEntity { row, create } => {
                    let cond = if *create { "attribute_not_exists(pk)" } else { "attribute_exists(pk)" };
                    let p = Put::builder()
                        .table_name(&self.table)
                        .set_item(Some(entity_item(user, row)?))
                        .condition_expression(cond);
                    items.push(TransactWriteItem::builder().put(built(p.build())?).build());
                    owner.push(i + 1);
                }
                Op::DeleteEntity { kind, id } => {
                    let d = Delete::builder()
                        .table_name(&self.table)
                        .set_key(Some(key(pk.clone(), keys::entity_sk(*kind, id))))
                        .condition_expression("attribute_exists(pk)");
                    items.push(TransactWriteItem::builder().delete(built(d.build())?).build());
                    owner.push(i + 1);
                }
                Op::PutEdge(e) => {
                    for item in edge_items(user, project, e) {
                        let p = Put::builder()
                            .table_name(&self.table)
                            .set_item(Some(item))
                            .condition_expression("attribute_not_exists(pk)");
                        items.push(TransactWriteItem::builder().put(built(p.build())?).build());
                        owner.push(i + 1);
                    }
                }
                Op::DeleteEdge(e) => {
                    for sk in [
                        keys::edge_out_sk(&e.from.id, &e.relation, &e.to.id),
                        keys::edge_in_sk(&e.from.id, &e.relation, &e.to.id),
                    ] {
                        let d = Delete::builder().table_name(&self.table).set_key(Some(key(pk.clone(), sk)));
                        items.push(TransactWriteItem::builder().delete(built(d.build())?).build());
                        owner.push(i + 1);
                    }
                }
                Op::Check(end) => {
                    let cc = ConditionCheck::builder()
                        .table_name(&self.table)
                        .set_key(Some(key(pk.clone(), keys::entity_sk(end.kind, &end.id))))
                        .condition_expression("attribute_exists(pk) AND attribute_not_exists(deleting)");
                    items.push(TransactWriteItem::builder().condition_check(built(cc.build())?).build());
                    owner.push(i + 1);
                }
            }
        }
        let res = self
            .client
            .transact_write_items()
            .set_transact_items(Some(items))
            .send()
            .instrument(tracing::debug_span!("ddb.transact_write_items", what = "project_commit"))
            .await;
        let e = match res {
            Ok(_) => return Ok(()),
            Err(e) => e,
        };
        use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError as TxError;
        let codes: Option<Vec<String>> = match e.as_service_error() {
            Some(TxError::TransactionCanceledException(t)) => {
                Some(t.cancellation_reasons().iter().map(|r| r.code().unwrap_or("None").to_string()).collect())
            }
            _ => None,
        };
        match codes {
            Some(codes) => {
                if codes.first().map(String::as_str) == Some("ConditionalCheckFailed") {
                    return Err(CommitError::ProjectChanged);
                }
                if let Some(at) = codes.iter().position(|c| c == "ConditionalCheckFailed") {
                    return Err(CommitError::OpFailed(owner[at] - 1));
                }
                // A conflict with a concurrent transaction: as if the project moved.
                if codes.iter().any(|c| c == "TransactionConflict") {
                    return Err(CommitError::ProjectChanged);
                }
                Err(backend(e).into())
            }
            None => Err(backend(e).into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_split_on_char_boundaries_and_rejoin() {
        let s = "é".repeat(CHUNK_BYTES); // 2 bytes each
        let parts = chunks(&s);
        assert_eq!(parts.len(), 2);
        assert!(parts.iter().all(|p| p.len() <= CHUNK_BYTES));
        assert_eq!(parts.concat(), s);
        assert!(chunks("").is_empty());
    }

    #[test]
    fn key_ranges_do_not_overlap() {
        let id = EntityId::parse("a").unwrap();
        let chunk = keys::chunk_sk(&id, "r", 0);
        let ent = keys::entity_sk(EntityKind::Task, &id);
        assert!(chunk.as_str() > "C#" && ent.as_str() < "E$");
        assert!(keys::PROJECT_SK > "O" && keys::PROJECT_SK < "Q");
        assert!(keys::edge_out_sk(&id, "r", &id).as_str() > "Q");
    }
}
