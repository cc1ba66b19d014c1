//! Context packs (AGENTIC_CHAT_V2_SPEC §4.2–4.3, §9): what the system prompt
//! says about where the user is.
//!
//! - global: a light list of the user's projects (name, id);
//! - project: the project (name, description, version), its `doc_structure`
//!   as one line per document in tree order (path of titles, description,
//!   content length, id — never content) and the first few entities of each
//!   other kind, named with their ids;
//! - entity: the project, the entity itself and the entities linked to it;
//! - in `project_audit`, `project_forecast`, `daily_brief_update` and
//!   `brain_dump`, the scope's pack plus the mode's computed block (`mode`,
//!   [`crate::context::modes`]), built by [`build_keyed`]. A pack is named
//!   by its [`PackKey`]: the scope and the mode.
//!
//! Built with as few DynamoDB round trips as possible, in parallel: project
//! scope is the project item (project + tree), one batch of document
//! metadata and one page per entity kind. A pack that cannot be built (a project the user cannot see, a
//! store error) is empty: the turn goes on without it.

use crate::context::modes::{build_block, Mode, ModeBlock, Sources};
use crate::entities::service::MAX_METADATA_IDS;
use crate::entities::{DocNode, DocumentMetadata, EntityKind, EntityService, PageRequest};
use crate::ids::{EntityId, ProjectId, UserId};
use crate::tools::ToolScope;
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::HashMap;

/// Projects listed in a global pack.
pub const GLOBAL_PROJECTS: usize = 20;
/// Linked entities described in an entity pack.
pub const LINKED_ENTITIES: usize = 12;
/// Entities of each kind (other than documents) named in a project pack.
pub const PROJECT_ENTITIES_PER_KIND: usize = 10;

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ContextPack {
    /// `global`, `project` or `entity`.
    pub scope: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub project: Option<Value>,
    /// The document tree with titles; hierarchy and `order` as stored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub doc_structure: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entity: Option<Value>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub linked: Vec<Value>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub projects: Vec<Value>,
    /// A project pack's tasks, goals, plans, milestones, risks and
    /// requirements (`task “Write the post”: id …`; the first few of each
    /// kind): the ids a link or an update needs, without a listing round first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub entities: Vec<Value>,
    /// The project version the pack was built from (caches compare against it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<u64>,
    /// The mode's computed block (audit, forecast, brief, dump).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<ModeBlock>,
}

impl ContextPack {
    pub fn is_empty(&self) -> bool {
        self.project.is_none()
            && self.projects.is_empty()
            && self.entity.is_none()
            && self.entities.is_empty()
            && self.mode.is_none()
    }
}

/// Which pack: a scope's, with a mode's block or without. Caches are kept per key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackKey {
    pub scope: ToolScope,
    pub mode: Option<Mode>,
}

impl PackKey {
    /// The pack a turn in `context` reads in `scope`.
    pub fn new(scope: ToolScope, context: crate::session::ContextType) -> PackKey {
        PackKey { scope, mode: Mode::of(context) }
    }
}

impl From<&ToolScope> for PackKey {
    fn from(scope: &ToolScope) -> Self {
        PackKey { scope: scope.clone(), mode: None }
    }
}

impl From<&PackKey> for PackKey {
    fn from(key: &PackKey) -> Self {
        key.clone()
    }
}

/// The pack of `key`: the scope's pack and, with a mode, its block (read
/// in parallel). Never fails, as [`build_pack`].
pub async fn build_keyed(src: &Sources<'_>, user: &UserId, key: &PackKey) -> ContextPack {
    let block = futures::future::OptionFuture::from(key.mode.map(|m| build_block(src, user, m, &key.scope)));
    let (mut pack, block) = tokio::join!(build_pack(src.entities, user, &key.scope), block);
    pack.mode = block.flatten();
    pack
}

/// Builds the pack for a scope. Never fails: what cannot be read is left out.
pub async fn build_pack(service: &EntityService, user: &UserId, scope: &ToolScope) -> ContextPack {
    match scope {
        ToolScope::Global => global(service, user).await,
        ToolScope::Project { project } => project_pack(service, user, project).await,
        ToolScope::Entity { project, kind, entity } => entity_pack(service, user, project, *kind, entity).await,
    }
}

async fn global(service: &EntityService, user: &UserId) -> ContextPack {
    let page = PageRequest { limit: Some(GLOBAL_PROJECTS), cursor: None };
    let projects = match service.list_projects(user, page).await {
        Ok(p) => p.items.into_iter().map(|p| json!({"id": p.id, "name": p.name})).collect(),
        Err(e) => {
            tracing::warn!(error = %e, "context pack: projects not listed");
            vec![]
        }
    };
    ContextPack { scope: "global", projects, ..Default::default() }
}

async fn project_pack(service: &EntityService, user: &UserId, project: &ProjectId) -> ContextPack {
    let (p, tree) = tokio::join!(service.get_project(user, project), service.doc_structure(user, project));
    let (p, tree) = match (p, tree) {
        (Ok(p), Ok(t)) => (p, t),
        (Err(e), _) | (_, Err(e)) => {
            tracing::warn!(error = %e, "context pack: project not readable");
            return ContextPack { scope: "project", ..Default::default() };
        }
    };
    let ids: Vec<EntityId> = flatten(&tree.root);
    let (meta, entities) = tokio::join!(metadata(service, user, project, &ids), named_entities(service, user, project));
    ContextPack {
        scope: "project",
        project: Some(json!({"id": p.id, "name": p.name, "description": p.description, "state": p.state,
            "context_document_id": p.context_document_id})),
        doc_structure: Some(json!({"version": tree.version, "documents": document_lines(&tree.root, &meta)})),
        entities,
        version: Some(p.version),
        ..Default::default()
    }
}

/// The first few entities of each kind but documents (those are the tree),
/// read in parallel; a kind that cannot be read is left out.
async fn named_entities(service: &EntityService, user: &UserId, project: &ProjectId) -> Vec<Value> {
    let kinds = EntityKind::ALL.into_iter().filter(|k| *k != EntityKind::Document);
    let pages = futures::future::join_all(kinds.map(|kind| async move {
        let page = PageRequest { limit: Some(PROJECT_ENTITIES_PER_KIND), cursor: None };
        (kind, service.list(user, project, kind, page).await)
    }))
    .await;
    pages
        .into_iter()
        .flat_map(|(kind, page)| page.map(|p| p.items).unwrap_or_default().into_iter().map(move |e| (kind, e)))
        // One string per entity, kind and name before the id: as JSON objects
        // (keys sorted: id, kind, name) a small model paired an id with the
        // name of the entity before it (issue 16's eval).
        .map(|(kind, e)| Value::String(format!("{} “{}”: id {}", kind.as_str(), e.fields.name(), e.id)))
        .collect()
}

async fn entity_pack(
    service: &EntityService,
    user: &UserId,
    project: &ProjectId,
    kind: Option<EntityKind>,
    entity: &EntityId,
) -> ContextPack {
    let entity_read = async {
        match kind {
            Some(k) => {
                service.get(user, project, k, entity).await.ok().map(|e| serde_json::to_value(e).unwrap_or_default())
            }
            None => None,
        }
    };
    let (p, e, edges) =
        tokio::join!(service.get_project(user, project), entity_read, service.edges(user, project, Some(entity)));
    let Ok(p) = p else {
        return ContextPack { scope: "entity", ..Default::default() };
    };
    let mut linked = Vec::new();
    for edge in edges.unwrap_or_default().into_iter().take(LINKED_ENTITIES) {
        let (dir, other) = if &edge.from.id == entity { ("to", edge.to) } else { ("from", edge.from) };
        linked.push(json!({"relation": edge.relation, "direction": dir, "kind": other.kind, "id": other.id}));
    }
    // Name the linked entities in one more round trip per kind, in parallel.
    let mut by_kind: HashMap<EntityKind, Vec<EntityId>> = HashMap::new();
    for l in &linked {
        if let (Ok(k), Some(id)) = (serde_json::from_value::<EntityKind>(l["kind"].clone()), l["id"].as_str()) {
            if let Ok(id) = EntityId::parse(id) {
                by_kind.entry(k).or_default().push(id);
            }
        }
    }
    let names = futures::future::join_all(by_kind.into_iter().flat_map(|(k, ids)| {
        ids.into_iter().map(move |id| async move {
            let n = service.get(user, project, k, &id).await.ok().map(|e| e.fields.name().to_string());
            (id.to_string(), n)
        })
    }))
    .await;
    let names: HashMap<String, Option<String>> = names.into_iter().collect();
    for l in &mut linked {
        if let Some(Some(n)) = l["id"].as_str().and_then(|id| names.get(id)) {
            l["name"] = Value::String(n.clone());
        }
    }
    ContextPack {
        scope: "entity",
        project: Some(json!({"id": p.id, "name": p.name, "description": p.description})),
        entity: e.or_else(|| Some(json!({"id": entity}))),
        linked,
        version: Some(p.version),
        ..Default::default()
    }
}

fn flatten(nodes: &[DocNode]) -> Vec<EntityId> {
    let mut out = Vec::new();
    let mut stack: Vec<&DocNode> = nodes.iter().collect();
    while let Some(n) = stack.pop() {
        out.push(n.id.clone());
        stack.extend(n.children.iter());
    }
    out
}

async fn metadata(
    service: &EntityService,
    user: &UserId,
    project: &ProjectId,
    ids: &[EntityId],
) -> HashMap<String, DocumentMetadata> {
    let batches = ids.chunks(MAX_METADATA_IDS).map(|c| service.document_metadata(user, project, c));
    futures::future::join_all(batches)
        .await
        .into_iter()
        .filter_map(Result::ok)
        .flatten()
        .map(|m| (m.id.to_string(), m))
        .collect()
}

/// The tree as one line per document, in tree order (each parent before its
/// children, siblings in their order): `document “Specs / API / Auth” — its
/// description (64 chars): id …`. The path says where a document is (the
/// user names documents by it); title before id, as in
/// [`named_entities`]: as nested JSON objects (keys sorted: `children`
/// first, the id before the title) a small model read or put documents
/// under the wrong node (issue 31's eval: `read_deep_document`,
/// `add_document_under_parent`).
fn document_lines(root: &[DocNode], meta: &HashMap<String, DocumentMetadata>) -> Vec<Value> {
    fn walk(nodes: &[DocNode], path: &str, meta: &HashMap<String, DocumentMetadata>, out: &mut Vec<Value>) {
        for n in nodes {
            let m = meta.get(n.id.as_str());
            let title = m.map(|m| m.title.as_str()).unwrap_or("");
            let path = if path.is_empty() { title.to_string() } else { format!("{path} / {title}") };
            let description = m.and_then(|m| m.description.as_deref()).map(|d| format!(" — {d}")).unwrap_or_default();
            let length = m.map(|m| format!(" ({} chars)", m.content_length)).unwrap_or_default();
            out.push(Value::String(format!("document “{path}”{description}{length}: id {}", n.id)));
            walk(&n.children, &path, meta, out);
        }
    }
    let mut out = Vec::new();
    walk(root, "", meta, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entities::store::MemoryEntityStore;
    use crate::entities::{CreateEntity, EntityFields, NewProject};

    async fn document(
        svc: &EntityService,
        u: &UserId,
        p: &ProjectId,
        title: &str,
        parent: Option<&EntityId>,
    ) -> EntityId {
        let serde_json::Value::Object(f) = json!({"title": title}) else { unreachable!() };
        let new = CreateEntity {
            fields: EntityFields::from_object(EntityKind::Document, f).unwrap(),
            content: Some("Access tokens expire after 17 minutes.".into()),
            parent_id: parent.cloned(),
            position: None,
        };
        svc.create(u, p, new).await.unwrap().data.id
    }

    #[tokio::test]
    async fn a_project_pack_names_each_document_by_its_path_before_its_id() {
        let svc = EntityService::new(MemoryEntityStore::new());
        let u = UserId::parse("alice").unwrap();
        let new = NewProject { name: "Platform".into(), description: None, state: Default::default(), context: None };
        let p = svc.create_project(&u, new).await.unwrap().data.project.id;
        let specs = document(&svc, &u, &p, "Specs", None).await;
        let api = document(&svc, &u, &p, "API", Some(&specs)).await;
        let auth = document(&svc, &u, &p, "Auth", Some(&api)).await;
        let roadmap = document(&svc, &u, &p, "Roadmap", None).await;
        let pack = build_pack(&svc, &u, &ToolScope::Project { project: p }).await;
        let lines: Vec<String> = pack.doc_structure.unwrap()["documents"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l.as_str().unwrap().to_string())
            .collect();
        // The context document first (with its description), then the tree in order.
        assert!(lines[0].starts_with("document “Project context” — "), "{lines:?}");
        assert_eq!(
            lines[1..],
            [
                format!("document “Specs” (38 chars): id {specs}"),
                format!("document “Specs / API” (38 chars): id {api}"),
                format!("document “Specs / API / Auth” (38 chars): id {auth}"),
                format!("document “Roadmap” (38 chars): id {roadmap}"),
            ]
        );
    }
}
