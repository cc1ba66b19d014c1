//! [`EntityStore`] over DynamoDB: the key scheme and access patterns above.

use super::{chunks, Commit, CommitError, ContentRef, EntityRow, EntityStore, Op, ProjectRow};
use crate::entities::model::{Edge, EdgeEnd, Entity, EntityFields, EntityKind, Project, ProjectFields};
use crate::ids::{EntityId, ProjectId, UserId};
use crate::store::attr::{backend, cancellation_codes, get_n, get_s, n, s};
use crate::store::StoreError;
use aws_sdk_dynamodb::types::{
    AttributeValue, ConditionCheck, Delete, DeleteRequest, Put, TransactWriteItem, WriteRequest,
};
use aws_sdk_dynamodb::Client;
use std::collections::HashMap;
use tracing::Instrument;

type Item = HashMap<String, AttributeValue>;

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

#[derive(Clone)]
pub struct DynamoEntityStore {
    client: Client,
    table: String,
}

fn corrupt(what: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(what.to_string())
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

impl DynamoEntityStore {
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
}

#[async_trait::async_trait]
impl EntityStore for DynamoEntityStore {
    async fn get_project(&self, user: &UserId, project: &ProjectId) -> Result<Option<ProjectRow>, StoreError> {
        self.get(keys::project_pk(user, project), keys::PROJECT_SK.into(), "project")
            .await?
            .map(|i| project_from_item(&i))
            .transpose()
    }

    /// A page of the user's projects, oldest first; `after` is the previous
    /// page's last project. Projects being deleted are left out.
    async fn list_projects(
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
            .index_name(crate::store::keys::GSI1)
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
    async fn all_projects(&self, user: &UserId) -> Result<Vec<ProjectRow>, StoreError> {
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

    async fn get_entity(
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
    async fn list_entities(
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
    async fn edges_of(&self, user: &UserId, project: &ProjectId, id: &EntityId) -> Result<Vec<Edge>, StoreError> {
        let pk = keys::project_pk(user, project);
        let mut out = self.query_all(pk.clone(), &format!("X#{id}#"), None).await?;
        out.extend(self.query_all(pk, &format!("Y#{id}#"), None).await?);
        out.iter().map(edge_from_item).collect()
    }

    async fn all_edges(&self, user: &UserId, project: &ProjectId) -> Result<Vec<Edge>, StoreError> {
        self.query_all(keys::project_pk(user, project), "X#", None).await?.iter().map(edge_from_item).collect()
    }

    async fn edge_exists(&self, user: &UserId, project: &ProjectId, e: &Edge) -> Result<bool, StoreError> {
        let sk = keys::edge_out_sk(&e.from.id, &e.relation, &e.to.id);
        Ok(self.get(keys::project_pk(user, project), sk, "edge").await?.is_some())
    }

    /// Writes `content` as chunks under a fresh revision, before the commit that
    /// makes them visible. `None` for empty content (no chunks at all).
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
    async fn read_content(
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
    async fn delete_content(&self, user: &UserId, project: &ProjectId, doc: &EntityId, c: &ContentRef) {
        let pk = keys::project_pk(user, project);
        let keys: Vec<Item> = (0..c.chunks).map(|i| key(pk.clone(), keys::chunk_sk(doc, &c.rev, i))).collect();
        if let Err(e) = self.batch_delete(keys).await {
            tracing::warn!(error = %e, doc = %doc, "unreferenced content chunks left behind");
        }
    }

    /// Every live entity of a project with its content (documents), for search.
    /// Reads the whole partition's entity and chunk range: cost grows with the
    /// project's size.
    async fn project_contents(
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
    async fn delete_project_items(&self, user: &UserId, project: &ProjectId) -> Result<(), StoreError> {
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
    async fn delete_project_meta(&self, user: &UserId, project: &ProjectId) -> Result<(), StoreError> {
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
    async fn commit(&self, user: &UserId, c: &Commit) -> Result<(), CommitError> {
        if c.items() > Commit::MAX_ITEMS {
            return Err(StoreError::Backend(format!("a commit of {} items is over the limit", c.items())).into());
        }
        let mut items = Vec::with_capacity(c.items());
        // Which op each transaction item belongs to (0 = the meta item).
        let mut owner = vec![0usize];
        items.push(self.meta_item(user, c)?);
        for (i, op) in c.ops.iter().enumerate() {
            for item in self.op_items(user, &c.meta.project.id, op)? {
                items.push(item);
                owner.push(i + 1);
            }
        }
        let res = self
            .client
            .transact_write_items()
            .set_transact_items(Some(items))
            .send()
            .instrument(tracing::debug_span!("ddb.transact_write_items", what = "project_commit"))
            .await;
        match res {
            Ok(_) => Ok(()),
            Err(e) => Err(match cancellation_codes(&e) {
                Some(codes) => commit_refused(&codes, &owner).unwrap_or_else(|| backend(e).into()),
                None => backend(e).into(),
            }),
        }
    }
}

/// Why a cancelled commit was refused, from its items' cancellation codes
/// (`owner`: the op of each item, 0 for the meta item); `None` when no
/// condition explains it.
fn commit_refused(codes: &[String], owner: &[usize]) -> Option<CommitError> {
    if codes.first().map(String::as_str) == Some("ConditionalCheckFailed") {
        return Some(CommitError::ProjectChanged);
    }
    if let Some(at) = codes.iter().position(|c| c == "ConditionalCheckFailed") {
        return Some(CommitError::OpFailed(owner[at] - 1));
    }
    // A conflict with a concurrent transaction: as if the project moved.
    codes.iter().any(|c| c == "TransactionConflict").then_some(CommitError::ProjectChanged)
}

impl DynamoEntityStore {
    /// The meta item's put: conditioned on the version read (or on being new).
    fn meta_item(&self, user: &UserId, c: &Commit) -> Result<TransactWriteItem, StoreError> {
        let meta = Put::builder().table_name(&self.table).set_item(Some(project_item(user, &c.meta)?));
        let meta = match c.expected_version {
            None => meta.condition_expression("attribute_not_exists(pk)"),
            Some(v) => meta
                .condition_expression("version = :v AND attribute_not_exists(deleting)")
                .expression_attribute_values(":v", n(v)),
        };
        Ok(TransactWriteItem::builder().put(built(meta.build())?).build())
    }

    /// The transaction items of one op (two for an edge: both copies).
    fn op_items(&self, user: &UserId, project: &ProjectId, op: &Op) -> Result<Vec<TransactWriteItem>, StoreError> {
        let pk = keys::project_pk(user, project);
        let put = |item: Item, cond: &str| -> Result<TransactWriteItem, StoreError> {
            let p = Put::builder().table_name(&self.table).set_item(Some(item)).condition_expression(cond);
            Ok(TransactWriteItem::builder().put(built(p.build())?).build())
        };
        let delete = |sk: String, cond: Option<&str>| -> Result<TransactWriteItem, StoreError> {
            let d = Delete::builder().table_name(&self.table).set_key(Some(key(pk.clone(), sk)));
            Ok(TransactWriteItem::builder()
                .delete(built(d.set_condition_expression(cond.map(str::to_string)).build())?)
                .build())
        };
        Ok(match op {
            Op::PutEntity { row, create } => {
                let cond = if *create { "attribute_not_exists(pk)" } else { "attribute_exists(pk)" };
                vec![put(entity_item(user, row)?, cond)?]
            }
            Op::DeleteEntity { kind, id } => vec![delete(keys::entity_sk(*kind, id), Some("attribute_exists(pk)"))?],
            Op::PutEdge(e) => {
                let [out, back] = edge_items(user, project, e);
                vec![put(out, "attribute_not_exists(pk)")?, put(back, "attribute_not_exists(pk)")?]
            }
            Op::DeleteEdge(e) => vec![
                delete(keys::edge_out_sk(&e.from.id, &e.relation, &e.to.id), None)?,
                delete(keys::edge_in_sk(&e.from.id, &e.relation, &e.to.id), None)?,
            ],
            Op::Check(end) => {
                let cc = ConditionCheck::builder()
                    .table_name(&self.table)
                    .set_key(Some(key(pk.clone(), keys::entity_sk(end.kind, &end.id))))
                    .condition_expression("attribute_exists(pk) AND attribute_not_exists(deleting)");
                vec![TransactWriteItem::builder().condition_check(built(cc.build())?).build()]
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entities::store::CHUNK_BYTES;

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
