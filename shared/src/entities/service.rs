//! [`EntityService`]: every ontology operation as a plain async method. The
//! entities function calls it over HTTP; chat tools call it in process. Both
//! get the same validation, authorization (keys scoped to the user), versions
//! and [`EntityPatch`].
//!
//! Every write reads the project's meta item, plans its items, and commits
//! them in one transaction conditioned on the version it read, writing
//! `version + 1`. A concurrent write to the same project makes the condition
//! fail; the write is then planned again from fresh reads (up to
//! [`MAX_ATTEMPTS`] times, then `project_busy`). Writes to one project are thus
//! serialized and its version never skips or repeats.

use super::error::{EntityError, Missing};
use super::model::*;
use super::rules::{self, DESCRIPTION, NAME, SEARCH_QUERY, TASK_PRIORITY};
use super::store::{Commit, CommitError, ContentRef, EntityRow, EntityStore, Op, ProjectRow};
use super::tree::{self, TreeError};
use crate::ids::{EntityId, ProjectId, UserId};
use std::sync::Arc;
use std::time::Duration;

mod reorganize;
pub use reorganize::{MAX_REORGANIZE_EDGES, MAX_REORGANIZE_MOVES};

/// Attempts of one write against concurrent writers before `project_busy`.
pub const MAX_ATTEMPTS: usize = 8;
/// The largest document content accepted, in bytes.
pub const MAX_CONTENT_BYTES: usize = 2 * 1024 * 1024;
/// Edges removed in one transaction: two items each, plus the meta item and
/// the entity delete, within DynamoDB's (Local) 10-item cap.
pub const EDGES_PER_COMMIT: usize = 4;
pub const MAX_PAGE: usize = 100;
pub const MAX_METADATA_IDS: usize = 100;

/// The service over any [`EntityStore`]: DynamoDB in the functions, the
/// in-memory twin in unit tests. Cloning shares the store.
#[derive(Clone)]
pub struct EntityService {
    store: Arc<dyn EntityStore>,
}

/// A listing request: at most `limit` items after `cursor`.
#[derive(Debug, Clone, Default)]
pub struct PageRequest {
    pub limit: Option<usize>,
    pub cursor: Option<String>,
}

impl PageRequest {
    fn limit(&self) -> Result<usize, EntityError> {
        match self.limit {
            None => Ok(50),
            Some(l) => rules::PAGE_LIMIT.check("limit", l as i128).map(|()| l),
        }
    }
}

fn patch(project: &ProjectRow, changes: Vec<Change>, tree_changed: bool) -> EntityPatch {
    EntityPatch {
        project_id: project.project.id.clone(),
        version: project.project.version,
        changes,
        doc_structure: tree_changed
            .then(|| DocStructure { version: project.project.version, root: project.tree.clone() }),
    }
}

fn entity_change(created: bool, e: &Entity) -> Change {
    let (kind, id, entity) = (e.kind().into(), e.id.to_string(), Record::Entity(Box::new(e.clone())));
    if created {
        Change::Created { kind, id, entity }
    } else {
        Change::Updated { kind, id, entity }
    }
}

fn bumped(row: &ProjectRow, now: i64) -> ProjectRow {
    let mut next = row.clone();
    next.project.version += 1;
    next.project.updated_at = now;
    next
}

/// The rules every create and update of an entity's fields meets (names,
/// descriptions, task priority); public so a compound create can check all
/// of its parts before it writes any.
pub fn validate_fields(f: &EntityFields) -> Result<(), EntityError> {
    let name_field = match f.kind() {
        EntityKind::Document | EntityKind::Task | EntityKind::Milestone | EntityKind::Risk => "title",
        _ => "name",
    };
    NAME.check(name_field, f.name())?;
    DESCRIPTION.check("description", f.description().unwrap_or_default())?;
    // The one check of the range: parsing reads any u8, so HTTP and chat tools
    // both get `invalid_value` from here.
    if let EntityFields::Task(TaskFields { priority: Some(p), .. }) = f {
        TASK_PRIORITY.check("priority", (*p).into())?;
    }
    Ok(())
}

fn validate_project(f: &ProjectFields) -> Result<(), EntityError> {
    NAME.check("name", &f.name)?;
    DESCRIPTION.check("description", f.description.as_deref().unwrap_or_default())
}

fn check_content(c: &str) -> Result<(), EntityError> {
    if c.len() > MAX_CONTENT_BYTES {
        return Err(EntityError::TooLarge { what: "content", limit: MAX_CONTENT_BYTES });
    }
    Ok(())
}

/// A partial update: `null` removes a field, anything else replaces it.
fn merge(
    mut base: serde_json::Map<String, serde_json::Value>,
    patch: &serde_json::Map<String, serde_json::Value>,
) -> serde_json::Map<String, serde_json::Value> {
    for (k, v) in patch {
        if v.is_null() {
            base.remove(k);
        } else {
            base.insert(k.clone(), v.clone());
        }
    }
    base
}

fn tree_error(e: TreeError) -> EntityError {
    match e {
        TreeError::NotFound => EntityError::NotFound(Missing::Entity),
        TreeError::ParentNotFound => EntityError::ParentNotFound,
        TreeError::Cycle => EntityError::Cycle,
    }
}

async fn backoff(attempt: usize) {
    let jitter = rand::random::<u64>() % 10;
    tokio::time::sleep(Duration::from_millis(5 * (1 << attempt.min(5)) as u64 + jitter)).await;
}

impl EntityService {
    pub fn new(store: impl EntityStore + 'static) -> Self {
        EntityService { store: Arc::new(store) }
    }

    pub fn store(&self) -> &dyn EntityStore {
        self.store.as_ref()
    }

    /// The project, unless it is missing, another user's, or being deleted.
    async fn project(&self, user: &UserId, id: &ProjectId) -> Result<ProjectRow, EntityError> {
        match self.store.get_project(user, id).await? {
            Some(row) if !row.deleting => Ok(row),
            _ => Err(EntityError::NotFound(Missing::Project)),
        }
    }

    async fn entity_row(
        &self,
        user: &UserId,
        project: &ProjectId,
        kind: EntityKind,
        id: &EntityId,
    ) -> Result<Option<EntityRow>, EntityError> {
        Ok(self.store.get_entity(user, project, kind, id).await?)
    }

    /// Commits `ops` with a version bump (removing `leaves_tree` from the tree
    /// when given), replanning only the meta item on contention. For steps
    /// whose ops do not depend on what else is in the project.
    async fn commit_ops(
        &self,
        user: &UserId,
        project: &ProjectId,
        ops: Vec<Op>,
        leaves_tree: Option<&EntityId>,
    ) -> Result<ProjectRow, EntityError> {
        for attempt in 0..MAX_ATTEMPTS {
            let row = self.project(user, project).await?;
            let mut next = bumped(&row, crate::now_ms());
            if let Some(id) = leaves_tree {
                // Already gone when an earlier step removed it: nothing to do.
                let _ = tree::remove_promoting_children(&mut next.tree, id);
            }
            let c = Commit { expected_version: Some(row.project.version), meta: next.clone(), ops: ops.clone() };
            match self.store.commit(user, &c).await {
                Ok(()) => return Ok(next),
                Err(CommitError::ProjectChanged) => backoff(attempt).await,
                Err(CommitError::OpFailed(_)) => return Err(EntityError::NotFound(Missing::Entity)),
                Err(CommitError::Store(e)) => return Err(e.into()),
            }
        }
        Err(EntityError::Busy)
    }

    // ---- projects ---------------------------------------------------------

    /// Creates a project with its context document (spec §9.6) at the root of
    /// its tree: a compound create, so the result lists `entities_created`.
    pub async fn create_project(&self, user: &UserId, new: NewProject) -> Result<Write<CreatedProject>, EntityError> {
        let fields = ProjectFields { name: new.name, description: new.description, state: new.state };
        validate_project(&fields)?;
        let context = new.context.unwrap_or_default();
        check_content(&context)?;
        let now = crate::now_ms();
        let (pid, doc_id) = (ProjectId::new(), EntityId::new());
        let content = self.store.write_content(user, &pid, &doc_id, &context).await?;
        let doc = Entity {
            id: doc_id.clone(),
            project_id: pid.clone(),
            fields: EntityFields::Document(DocumentFields {
                title: "Project context".into(),
                description: Some("Purpose, vision and scope, in the user's words".into()),
            }),
            version: 1,
            created_at: now,
            updated_at: now,
            content_length: Some(context.len() as u64),
            content: None,
        };
        let meta = ProjectRow {
            project: Project {
                id: pid.clone(),
                name: fields.name,
                description: fields.description,
                state: fields.state,
                context_document_id: doc_id.clone(),
                version: 1,
                created_at: now,
                updated_at: now,
            },
            tree: vec![tree::leaf(doc_id.clone())],
            deleting: false,
        };
        let row = EntityRow { entity: doc.clone(), content: content.clone(), deleting: false };
        let c = Commit { expected_version: None, meta, ops: vec![Op::PutEntity { row: Box::new(row), create: true }] };
        if let Err(e) = self.store.commit(user, &c).await {
            if let Some(cr) = &content {
                self.store.delete_content(user, &pid, &doc_id, cr).await;
            }
            return Err(match e {
                CommitError::Store(e) => e.into(),
                // Fresh v7 ids do not collide; a failed condition means a replay.
                _ => EntityError::Busy,
            });
        }
        let project = c.meta.project.clone();
        let changes = vec![
            Change::Created {
                kind: RecordKind::Project,
                id: pid.to_string(),
                entity: Record::Project(Box::new(project.clone())),
            },
            entity_change(true, &doc),
        ];
        Ok(Write {
            patch: patch(&c.meta, changes, true),
            data: CreatedProject { project, entities_created: vec![doc], edges_created: vec![] },
        })
    }

    pub async fn get_project(&self, user: &UserId, id: &ProjectId) -> Result<Project, EntityError> {
        Ok(self.project(user, id).await?.project)
    }

    /// The user's projects, oldest first. The cursor is the last project's id.
    pub async fn list_projects(&self, user: &UserId, page: PageRequest) -> Result<Page<Project>, EntityError> {
        let limit = page.limit()?;
        let after = match &page.cursor {
            None => None,
            Some(c) => {
                let id = ProjectId::parse(c.as_str()).map_err(|e| EntityError::InvalidId(format!("cursor: {e}")))?;
                // Well-formed but gone (deleted, or never the caller's): the
                // listing cannot continue from it.
                Some(self.store.get_project(user, &id).await?.ok_or(EntityError::NotFound(Missing::Cursor))?)
            }
        };
        let (rows, more) = self.store.list_projects(user, limit, after.as_ref()).await?;
        let next_cursor = if more { rows.last().map(|r| r.project.id.to_string()) } else { None };
        Ok(Page { items: rows.into_iter().map(|r| r.project).collect(), next_cursor })
    }

    /// A partial update of the project's own fields.
    pub async fn update_project(
        &self,
        user: &UserId,
        id: &ProjectId,
        changes: serde_json::Map<String, serde_json::Value>,
        expected_version: Option<u64>,
    ) -> Result<Write<Project>, EntityError> {
        for attempt in 0..MAX_ATTEMPTS {
            let row = self.project(user, id).await?;
            if let Some(expected) = expected_version.filter(|v| *v != row.project.version) {
                return Err(EntityError::Conflict { expected, current_version: row.project.version });
            }
            let base = match serde_json::to_value(row.project.fields()) {
                Ok(serde_json::Value::Object(m)) => m,
                _ => serde_json::Map::new(),
            };
            let fields: ProjectFields = serde_json::from_value(serde_json::Value::Object(merge(base, &changes)))
                .map_err(|e| EntityError::from_json(&e))?;
            validate_project(&fields)?;
            let mut next = bumped(&row, crate::now_ms());
            next.project.name = fields.name;
            next.project.description = fields.description;
            next.project.state = fields.state;
            let c = Commit { expected_version: Some(row.project.version), meta: next, ops: vec![] };
            match self.store.commit(user, &c).await {
                Ok(()) => {
                    let p = c.meta.project.clone();
                    let change = Change::Updated {
                        kind: RecordKind::Project,
                        id: p.id.to_string(),
                        entity: Record::Project(Box::new(p.clone())),
                    };
                    return Ok(Write { patch: patch(&c.meta, vec![change], false), data: p });
                }
                Err(CommitError::ProjectChanged) => backoff(attempt).await,
                Err(CommitError::OpFailed(_)) => return Err(EntityError::NotFound(Missing::Project)),
                Err(CommitError::Store(e)) => return Err(e.into()),
            }
        }
        Err(EntityError::Busy)
    }

    /// Deletes a project and everything in it. First the meta item is marked
    /// (one transaction, bumping the version): from then on the project reads
    /// as missing. Then its items are deleted in batches, then the meta item.
    /// An interrupted delete is finished by repeating it.
    pub async fn delete_project(
        &self,
        user: &UserId,
        id: &ProjectId,
        expected_version: Option<u64>,
    ) -> Result<Write<Deleted>, EntityError> {
        let mut marked = None;
        for attempt in 0..MAX_ATTEMPTS {
            let row = self.store.get_project(user, id).await?.ok_or(EntityError::NotFound(Missing::Project))?;
            if row.deleting {
                marked = Some(row);
                break;
            }
            if let Some(expected) = expected_version.filter(|v| *v != row.project.version) {
                return Err(EntityError::Conflict { expected, current_version: row.project.version });
            }
            let mut next = bumped(&row, crate::now_ms());
            next.deleting = true;
            let c = Commit { expected_version: Some(row.project.version), meta: next, ops: vec![] };
            match self.store.commit(user, &c).await {
                Ok(()) => {
                    marked = Some(c.meta);
                    break;
                }
                Err(CommitError::ProjectChanged) => backoff(attempt).await,
                Err(CommitError::OpFailed(_)) => return Err(EntityError::NotFound(Missing::Project)),
                Err(CommitError::Store(e)) => return Err(e.into()),
            }
        }
        let row = marked.ok_or(EntityError::Busy)?;
        self.store.delete_project_items(user, id).await?;
        self.store.delete_project_meta(user, id).await?;
        let change = Change::Deleted { kind: RecordKind::Project, id: id.to_string() };
        Ok(Write {
            patch: patch(&row, vec![change], false),
            data: Deleted { kind: RecordKind::Project, id: id.to_string(), edges_removed: vec![] },
        })
    }

    // ---- entities ---------------------------------------------------------

    /// Creates an entity. Documents are placed in the tree under `parent_id`
    /// (root when absent) in the same transaction; their content is written
    /// first, as chunks nothing points to until the transaction commits.
    pub async fn create(
        &self,
        user: &UserId,
        project: &ProjectId,
        new: CreateEntity,
    ) -> Result<Write<Entity>, EntityError> {
        validate_fields(&new.fields)?;
        let kind = new.fields.kind();
        if kind != EntityKind::Document && (new.content.is_some() || new.parent_id.is_some() || new.position.is_some())
        {
            return Err(EntityError::bad("unknown_field", "content, parent_id and position are for documents only"));
        }
        let content = new.content.clone().unwrap_or_default();
        check_content(&content)?;
        let id = EntityId::new();
        let mut written: Option<Option<ContentRef>> = None;
        let result = async {
            for attempt in 0..MAX_ATTEMPTS {
                let row = self.project(user, project).await?;
                let now = crate::now_ms();
                let mut next = bumped(&row, now);
                if kind == EntityKind::Document {
                    tree::insert(&mut next.tree, new.parent_id.as_ref(), tree::leaf(id.clone()), new.position)
                        .map_err(tree_error)?;
                }
                if written.is_none() {
                    written = Some(self.store.write_content(user, project, &id, &content).await?);
                }
                let entity = Entity {
                    id: id.clone(),
                    project_id: project.clone(),
                    fields: new.fields.clone(),
                    version: 1,
                    created_at: now,
                    updated_at: now,
                    content_length: (kind == EntityKind::Document).then_some(content.len() as u64),
                    content: None,
                };
                let er = EntityRow { entity: entity.clone(), content: written.clone().flatten(), deleting: false };
                let c = Commit {
                    expected_version: Some(row.project.version),
                    meta: next,
                    ops: vec![Op::PutEntity { row: Box::new(er), create: true }],
                };
                match self.store.commit(user, &c).await {
                    Ok(()) => {
                        let changes = vec![entity_change(true, &entity)];
                        return Ok(Write {
                            patch: patch(&c.meta, changes, kind == EntityKind::Document),
                            data: entity,
                        });
                    }
                    Err(CommitError::ProjectChanged) => backoff(attempt).await,
                    Err(CommitError::OpFailed(_)) => return Err(EntityError::Busy),
                    Err(CommitError::Store(e)) => return Err(e.into()),
                }
            }
            Err(EntityError::Busy)
        }
        .await;
        if let (Err(_), Some(Some(cr))) = (&result, &written) {
            self.store.delete_content(user, project, &id, cr).await;
        }
        result
    }

    /// One entity; documents come with their content.
    pub async fn get(
        &self,
        user: &UserId,
        project: &ProjectId,
        kind: EntityKind,
        id: &EntityId,
    ) -> Result<Entity, EntityError> {
        self.project(user, project).await?;
        for _ in 0..3 {
            let row = match self.entity_row(user, project, kind, id).await? {
                Some(r) if !r.deleting => r,
                _ => return Err(EntityError::NotFound(Missing::Entity)),
            };
            let mut e = row.entity;
            if kind != EntityKind::Document {
                return Ok(e);
            }
            match &row.content {
                None => {
                    e.content = Some(String::new());
                    return Ok(e);
                }
                Some(c) => {
                    if let Some(body) = self.store.read_content(user, project, id, c).await? {
                        e.content = Some(body);
                        return Ok(e);
                    }
                    // The revision was replaced while we read: read the entity again.
                }
            }
        }
        Err(EntityError::Busy)
    }

    /// A page of a project's entities of one kind (documents without content).
    /// The cursor is the last entity's id.
    pub async fn list(
        &self,
        user: &UserId,
        project: &ProjectId,
        kind: EntityKind,
        page: PageRequest,
    ) -> Result<Page<Entity>, EntityError> {
        let limit = page.limit()?;
        let after = page
            .cursor
            .as_deref()
            .map(EntityId::parse)
            .transpose()
            .map_err(|e| EntityError::InvalidId(format!("cursor: {e}")))?;
        self.project(user, project).await?;
        let (rows, more) = self.store.list_entities(user, project, kind, limit, after.as_ref()).await?;
        let last = rows.last().map(|r| r.entity.id.to_string());
        let items = rows.into_iter().filter(|r| !r.deleting).map(|r| r.entity).collect();
        Ok(Page { items, next_cursor: if more { last } else { None } })
    }

    /// A partial update: the patch's fields are merged over the stored ones
    /// and the result is validated as a whole. Documents take `content` too.
    pub async fn update(
        &self,
        user: &UserId,
        project: &ProjectId,
        kind: EntityKind,
        id: &EntityId,
        mut update: UpdateEntity,
    ) -> Result<Write<Entity>, EntityError> {
        let new_content = match update.patch.remove("content") {
            None => None,
            Some(_) if kind != EntityKind::Document => {
                return Err(EntityError::bad("unknown_field", "unknown field `content`: documents only"))
            }
            Some(serde_json::Value::String(c)) => Some(c),
            Some(_) => return Err(EntityError::bad("wrong_type", "content: expected a string")),
        };
        if let Some(c) = &new_content {
            check_content(c)?;
        }
        let mut written: Option<Option<ContentRef>> = None;
        let result = async {
            for attempt in 0..MAX_ATTEMPTS {
                let row = self.project(user, project).await?;
                let current = match self.entity_row(user, project, kind, id).await? {
                    Some(r) if !r.deleting => r,
                    _ => return Err(EntityError::NotFound(Missing::Entity)),
                };
                if let Some(expected) = update.expected_version.filter(|v| *v != current.entity.version) {
                    return Err(EntityError::Conflict { expected, current_version: current.entity.version });
                }
                let fields = EntityFields::from_object(kind, merge(current.entity.fields.to_object(), &update.patch))
                    .map_err(|e| EntityError::from_json(&e))?;
                validate_fields(&fields)?;
                if let (Some(c), None) = (&new_content, &written) {
                    written = Some(self.store.write_content(user, project, id, c).await?);
                }
                let now = crate::now_ms();
                let mut next = current.clone();
                next.entity.fields = fields;
                next.entity.version += 1;
                next.entity.updated_at = now;
                if let (Some(c), Some(w)) = (&new_content, &written) {
                    next.entity.content_length = Some(c.len() as u64);
                    next.content = w.clone();
                }
                let meta = bumped(&row, now);
                let c = Commit {
                    expected_version: Some(row.project.version),
                    meta,
                    ops: vec![Op::PutEntity { row: Box::new(next.clone()), create: false }],
                };
                match self.store.commit(user, &c).await {
                    Ok(()) => {
                        if let (Some(_), Some(old)) = (&new_content, &current.content) {
                            self.store.delete_content(user, project, id, old).await;
                        }
                        let e = next.entity;
                        return Ok(Write { patch: patch(&c.meta, vec![entity_change(false, &e)], false), data: e });
                    }
                    Err(CommitError::ProjectChanged) => backoff(attempt).await,
                    Err(CommitError::OpFailed(_)) => return Err(EntityError::NotFound(Missing::Entity)),
                    Err(CommitError::Store(e)) => return Err(e.into()),
                }
            }
            Err(EntityError::Busy)
        }
        .await;
        if let (Err(_), Some(Some(cr))) = (&result, &written) {
            self.store.delete_content(user, project, id, cr).await;
        }
        result
    }

    /// Deletes an entity and every edge to or from it. A document leaves the
    /// tree with it; its children take its place under its parent (in order),
    /// so no node is orphaned. The project's context document cannot be
    /// deleted.
    ///
    /// With at most [`EDGES_PER_COMMIT`] edges this is one transaction. With
    /// more, the entity is first marked as being deleted (it reads as missing
    /// and cannot be linked; a document leaves the tree then), its edges are
    /// removed [`EDGES_PER_COMMIT`] at a time, and the last transaction removes
    /// the entity. Each step bumps the version; the returned patch carries the
    /// final one and every change. Until the last step, other entities' edge
    /// lists may still show edges to it; repeating an interrupted delete
    /// finishes it.
    pub async fn delete(
        &self,
        user: &UserId,
        project: &ProjectId,
        kind: EntityKind,
        id: &EntityId,
        expected_version: Option<u64>,
    ) -> Result<Write<Deleted>, EntityError> {
        let is_doc = kind == EntityKind::Document;
        for attempt in 0..MAX_ATTEMPTS {
            let row = self.project(user, project).await?;
            if &row.project.context_document_id == id {
                return Err(EntityError::ContextDocumentProtected);
            }
            let current =
                self.entity_row(user, project, kind, id).await?.ok_or(EntityError::NotFound(Missing::Entity))?;
            if let Some(expected) = expected_version.filter(|v| *v != current.entity.version && !current.deleting) {
                return Err(EntityError::Conflict { expected, current_version: current.entity.version });
            }
            let edges = self.store.edges_of(user, project, id).await?;
            let mut next = bumped(&row, crate::now_ms());
            let _ = tree::remove_promoting_children(&mut next.tree, id);
            let single = !current.deleting && edges.len() <= EDGES_PER_COMMIT;
            let ops = if single {
                let mut ops = vec![Op::DeleteEntity { kind, id: id.clone() }];
                ops.extend(edges.iter().cloned().map(Op::DeleteEdge));
                ops
            } else if current.deleting {
                vec![]
            } else {
                let mut marked = current.clone();
                marked.deleting = true;
                vec![Op::PutEntity { row: Box::new(marked), create: false }]
            };
            let c = Commit { expected_version: Some(row.project.version), meta: next, ops };
            match self.store.commit(user, &c).await {
                Ok(()) => {}
                Err(CommitError::ProjectChanged) => {
                    backoff(attempt).await;
                    continue;
                }
                Err(CommitError::OpFailed(_)) => return Err(EntityError::NotFound(Missing::Entity)),
                Err(CommitError::Store(e)) => return Err(e.into()),
            }
            let mut last = c.meta;
            if !single {
                for batch in edges.chunks(EDGES_PER_COMMIT) {
                    let ops = batch.iter().cloned().map(Op::DeleteEdge).collect();
                    self.commit_ops(user, project, ops, None).await?;
                }
                let ops = vec![Op::DeleteEntity { kind, id: id.clone() }];
                last = self.commit_ops(user, project, ops, Some(id)).await?;
            }
            if let Some(cr) = &current.content {
                self.store.delete_content(user, project, id, cr).await;
            }
            let mut changes: Vec<Change> = edges.iter().map(|e| Change::Unlinked { edge: e.clone() }).collect();
            changes.push(Change::Deleted { kind: kind.into(), id: id.to_string() });
            return Ok(Write {
                patch: patch(&last, changes, is_doc),
                data: Deleted { kind: kind.into(), id: id.to_string(), edges_removed: edges },
            });
        }
        Err(EntityError::Busy)
    }

    // ---- edges ------------------------------------------------------------

    /// Links two entities of the project. Both must exist (checked in the
    /// transaction that writes the edge).
    pub async fn link(&self, user: &UserId, project: &ProjectId, edge: Edge) -> Result<Write<Edge>, EntityError> {
        rules::check_relation(&edge.relation)?;
        if edge.from.id == edge.to.id {
            return Err(EntityError::SelfEdge);
        }
        for attempt in 0..MAX_ATTEMPTS {
            let row = self.project(user, project).await?;
            if self.store.edge_exists(user, project, &edge).await? {
                return Err(EntityError::EdgeExists);
            }
            let ops = vec![Op::Check(edge.from.clone()), Op::Check(edge.to.clone()), Op::PutEdge(edge.clone())];
            let c = Commit { expected_version: Some(row.project.version), meta: bumped(&row, crate::now_ms()), ops };
            match self.store.commit(user, &c).await {
                Ok(()) => {
                    let changes = vec![Change::Linked { edge: edge.clone() }];
                    return Ok(Write { patch: patch(&c.meta, changes, false), data: edge });
                }
                Err(CommitError::ProjectChanged) => backoff(attempt).await,
                Err(CommitError::OpFailed(0)) => return Err(EntityError::EdgeEndpointMissing("from")),
                Err(CommitError::OpFailed(1)) => return Err(EntityError::EdgeEndpointMissing("to")),
                Err(CommitError::OpFailed(_)) => return Err(EntityError::EdgeExists),
                Err(CommitError::Store(e)) => return Err(e.into()),
            }
        }
        Err(EntityError::Busy)
    }

    pub async fn unlink(&self, user: &UserId, project: &ProjectId, edge: Edge) -> Result<Write<Edge>, EntityError> {
        rules::check_relation(&edge.relation)?;
        for attempt in 0..MAX_ATTEMPTS {
            let row = self.project(user, project).await?;
            if !self.store.edge_exists(user, project, &edge).await? {
                return Err(EntityError::NotFound(Missing::Edge));
            }
            let ops = vec![Op::DeleteEdge(edge.clone())];
            let c = Commit { expected_version: Some(row.project.version), meta: bumped(&row, crate::now_ms()), ops };
            match self.store.commit(user, &c).await {
                Ok(()) => {
                    let changes = vec![Change::Unlinked { edge: edge.clone() }];
                    return Ok(Write { patch: patch(&c.meta, changes, false), data: edge });
                }
                Err(CommitError::ProjectChanged) => backoff(attempt).await,
                Err(CommitError::OpFailed(_)) => return Err(EntityError::NotFound(Missing::Edge)),
                Err(CommitError::Store(e)) => return Err(e.into()),
            }
        }
        Err(EntityError::Busy)
    }

    /// The edges of one entity (both directions), or of the whole project.
    pub async fn edges(
        &self,
        user: &UserId,
        project: &ProjectId,
        entity: Option<&EntityId>,
    ) -> Result<Vec<Edge>, EntityError> {
        self.project(user, project).await?;
        Ok(match entity {
            Some(id) => self.store.edges_of(user, project, id).await?,
            None => self.store.all_edges(user, project).await?,
        })
    }

    // ---- the document tree ------------------------------------------------

    pub async fn doc_structure(&self, user: &UserId, project: &ProjectId) -> Result<DocStructure, EntityError> {
        let row = self.project(user, project).await?;
        Ok(DocStructure { version: row.project.version, root: row.tree })
    }

    /// Moves a document (with its subtree) or reorders it among its siblings.
    pub async fn move_document(
        &self,
        user: &UserId,
        project: &ProjectId,
        mv: MoveDocument,
    ) -> Result<Write<DocStructure>, EntityError> {
        for attempt in 0..MAX_ATTEMPTS {
            let row = self.project(user, project).await?;
            let mut next = bumped(&row, crate::now_ms());
            tree::move_node(&mut next.tree, &mv.document_id, mv.new_parent_id.as_ref(), mv.position)
                .map_err(tree_error)?;
            let c = Commit { expected_version: Some(row.project.version), meta: next, ops: vec![] };
            match self.store.commit(user, &c).await {
                Ok(()) => {
                    let p = patch(&c.meta, vec![], true);
                    let data = p.doc_structure.clone().unwrap_or(DocStructure { version: 0, root: vec![] });
                    return Ok(Write { data, patch: p });
                }
                Err(CommitError::ProjectChanged) => backoff(attempt).await,
                Err(CommitError::OpFailed(_)) => return Err(EntityError::Busy),
                Err(CommitError::Store(e)) => return Err(e.into()),
            }
        }
        Err(EntityError::Busy)
    }

    /// Title, description, content length and update time of documents, in
    /// request order, never their content. Ids that are not documents of the
    /// project are left out.
    pub async fn document_metadata(
        &self,
        user: &UserId,
        project: &ProjectId,
        ids: &[EntityId],
    ) -> Result<Vec<DocumentMetadata>, EntityError> {
        if ids.len() > MAX_METADATA_IDS {
            return Err(EntityError::bad("invalid_value", format!("at most {MAX_METADATA_IDS} document_ids")));
        }
        self.project(user, project).await?;
        let rows = futures::future::join_all(
            ids.iter().map(|id| self.store.get_entity(user, project, EntityKind::Document, id)),
        )
        .await;
        let mut out = vec![];
        for row in rows {
            if let Some(r) = row?.filter(|r| !r.deleting) {
                if let EntityFields::Document(d) = r.entity.fields {
                    out.push(DocumentMetadata {
                        id: r.entity.id,
                        title: d.title,
                        description: d.description,
                        content_length: r.entity.content_length.unwrap_or(0),
                        updated_at: r.entity.updated_at,
                    });
                }
            }
        }
        Ok(out)
    }

    // ---- search -----------------------------------------------------------

    /// Case-insensitive substring search over names, descriptions and document
    /// content, in one project or across all of the user's projects.
    ///
    /// Cost: reads every entity and content chunk of each project searched
    /// (paged `Query`s on its partition, never a table `Scan`), so it grows
    /// with the workspace. Fine at the sizes we have; an index comes when it
    /// is not.
    pub async fn search(
        &self,
        user: &UserId,
        query: &str,
        project: Option<&ProjectId>,
        limit: Option<usize>,
    ) -> Result<SearchResults, EntityError> {
        SEARCH_QUERY.check("q", query)?;
        let q = query.trim().to_lowercase();
        let limit = PageRequest { limit, cursor: None }.limit()?;
        let projects = match project {
            Some(p) => vec![self.project(user, p).await?],
            None => self.store.all_projects(user).await?,
        };
        let has = |s: &str| s.to_lowercase().contains(&q);
        let mut hits = vec![];
        for p in projects {
            let pr = &p.project;
            let matched = if has(&pr.name) {
                Some(MatchedIn::Name)
            } else if pr.description.as_deref().is_some_and(has) {
                Some(MatchedIn::Description)
            } else {
                None
            };
            if let Some(m) = matched {
                hits.push(SearchHit {
                    project_id: pr.id.clone(),
                    kind: RecordKind::Project,
                    id: pr.id.to_string(),
                    name: pr.name.clone(),
                    description: pr.description.clone(),
                    matched_in: m,
                    updated_at: pr.updated_at,
                });
            }
            for (row, body) in self.store.project_contents(user, &pr.id).await? {
                let e = &row.entity;
                let matched = if has(e.fields.name()) {
                    Some(MatchedIn::Name)
                } else if e.fields.description().is_some_and(has) {
                    Some(MatchedIn::Description)
                } else if body.as_deref().is_some_and(has) {
                    Some(MatchedIn::Content)
                } else {
                    None
                };
                if let Some(m) = matched {
                    hits.push(SearchHit {
                        project_id: pr.id.clone(),
                        kind: e.kind().into(),
                        id: e.id.to_string(),
                        name: e.fields.name().to_string(),
                        description: e.fields.description().map(str::to_string),
                        matched_in: m,
                        updated_at: e.updated_at,
                    });
                }
            }
            if hits.len() > limit {
                break;
            }
        }
        let truncated = hits.len() > limit;
        hits.truncate(limit);
        Ok(SearchResults { hits, truncated })
    }
}

#[cfg(test)]
#[path = "service_tests.rs"]
mod tests;
