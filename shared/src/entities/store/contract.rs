//! The [`EntityStore`] contract, written once and run against both
//! implementations: the in-memory twin in `cargo test -p shared --lib`, the
//! DynamoDB store against DynamoDB Local (`tests/tests/contract_features.rs`,
//! through [`crate::entity_store_contract`]). Each case uses a user of its own.

mod reorganize;
pub use reorganize::{a_reorganize_commit_is_one_transaction, a_reorganize_is_all_or_nothing};

use super::{Commit, CommitError, EntityRow, EntityStore, Op, ProjectRow, CHUNK_BYTES};
use crate::entities::model::*;
use crate::entities::tree;
use crate::ids::{EntityId, ProjectId, UserId};
use crate::store::gate::fresh_user;
use crate::store::StoreError;

/// A project at `version`, created at `created_at`, its tree one document.
pub fn project(version: u64, created_at: i64) -> ProjectRow {
    let doc = EntityId::new();
    ProjectRow {
        project: Project {
            id: ProjectId::new(),
            name: "Launch".into(),
            description: Some("the launch".into()),
            state: Default::default(),
            context_document_id: doc.clone(),
            version,
            created_at,
            updated_at: created_at,
        },
        tree: vec![tree::leaf(doc)],
        deleting: false,
    }
}

/// The same project, one write later.
pub fn next(row: &ProjectRow) -> ProjectRow {
    let mut next = row.clone();
    next.project.version += 1;
    next
}

pub fn task(project: &ProjectId, id: &str) -> EntityRow {
    let fields = serde_json::json!({"title": format!("task {id}")});
    let serde_json::Value::Object(fields) = fields else { unreachable!() };
    EntityRow {
        entity: Entity {
            id: EntityId::parse(id).expect("a valid id"),
            project_id: project.clone(),
            fields: EntityFields::from_object(EntityKind::Task, fields).expect("task fields"),
            version: 1,
            created_at: 1,
            updated_at: 1,
            content_length: None,
            content: None,
        },
        content: None,
        deleting: false,
    }
}

pub fn edge(from: &EntityRow, relation: &str, to: &EntityRow) -> Edge {
    let end = |r: &EntityRow| EdgeEnd { kind: r.entity.kind(), id: r.entity.id.clone() };
    Edge { from: end(from), relation: relation.into(), to: end(to) }
}

fn put(row: &EntityRow, create: bool) -> Op {
    Op::PutEntity { row: Box::new(row.clone()), create }
}

/// Creates `p` with `rows` in it; returns the project as now stored.
async fn seeded(store: &dyn EntityStore, user: &UserId, p: ProjectRow, rows: &[&EntityRow]) -> ProjectRow {
    let ops = rows.iter().map(|r| put(r, true)).collect();
    store.commit(user, &Commit { expected_version: None, meta: p.clone(), ops }).await.expect("seeded");
    p
}

pub async fn a_project_is_created_once(store: &dyn EntityStore) {
    let u = fresh_user();
    let p = project(1, 10);
    store.commit(&u, &Commit { expected_version: None, meta: p.clone(), ops: vec![] }).await.unwrap();
    assert_eq!(store.get_project(&u, &p.project.id).await.unwrap(), Some(p.clone()), "read back as written");
    let again = store.commit(&u, &Commit { expected_version: None, meta: p.clone(), ops: vec![] }).await;
    assert!(matches!(again, Err(CommitError::ProjectChanged)), "{again:?}");
    assert!(store.get_project(&u, &ProjectId::new()).await.unwrap().is_none());
}

pub async fn commits_are_compare_and_set_on_the_project_version(store: &dyn EntityStore) {
    let u = fresh_user();
    let p = seeded(store, &u, project(1, 10), &[]).await;
    let t = task(&p.project.id, "t1");
    let v2 = next(&p);
    store.commit(&u, &Commit { expected_version: Some(1), meta: v2.clone(), ops: vec![] }).await.unwrap();
    for stale in [1, 3] {
        let c = Commit { expected_version: Some(stale), meta: next(&v2), ops: vec![put(&t, true)] };
        assert!(matches!(store.commit(&u, &c).await, Err(CommitError::ProjectChanged)), "version {stale}");
    }
    assert_eq!(store.get_project(&u, &p.project.id).await.unwrap().unwrap().project.version, 2);
    assert!(store.get_entity(&u, &p.project.id, EntityKind::Task, &t.entity.id).await.unwrap().is_none());
    let missing = Commit { expected_version: Some(1), meta: project(2, 10), ops: vec![] };
    assert!(matches!(store.commit(&u, &missing).await, Err(CommitError::ProjectChanged)), "no such project");
}

pub async fn a_failed_step_writes_nothing_and_is_named(store: &dyn EntityStore) {
    let u = fresh_user();
    let p = seeded(store, &u, project(1, 10), &[]).await;
    let pid = p.project.id.clone();
    let (a, ghost) = (task(&pid, "a"), task(&pid, "ghost"));
    let ops = vec![put(&a, true), Op::Check(edge(&a, "r", &ghost).to)];
    let r = store.commit(&u, &Commit { expected_version: Some(1), meta: next(&p), ops }).await;
    assert!(matches!(r, Err(CommitError::OpFailed(1))), "{r:?}");
    assert!(store.get_entity(&u, &pid, EntityKind::Task, &a.entity.id).await.unwrap().is_none(), "all or nothing");
    assert_eq!(store.get_project(&u, &pid).await.unwrap().unwrap().project.version, 1);
    // Creating what exists, updating or deleting what does not: each refused at its index.
    let p = project(1, 10);
    let pid = p.project.id.clone();
    let a = task(&pid, "a");
    let p = seeded(store, &u, p, &[&a]).await;
    for op in [
        put(&a, true),
        put(&task(&pid, "nobody"), false),
        Op::DeleteEntity { kind: EntityKind::Task, id: EntityId::parse("nobody").unwrap() },
    ] {
        let r = store.commit(&u, &Commit { expected_version: Some(1), meta: next(&p), ops: vec![op.clone()] }).await;
        assert!(matches!(r, Err(CommitError::OpFailed(0))), "{op:?}: {r:?}");
    }
}

pub async fn edges_are_stored_both_ways_and_once(store: &dyn EntityStore) {
    let u = fresh_user();
    let p = project(1, 10);
    let pid = p.project.id.clone();
    let (a, b, c) = (task(&pid, "a"), task(&pid, "b"), task(&pid, "c"));
    let p = seeded(store, &u, p, &[&a, &b, &c]).await;
    let (ab, ca) = (edge(&a, "blocks", &b), edge(&c, "informs", &a));
    let ops =
        vec![Op::Check(ab.from.clone()), Op::Check(ab.to.clone()), Op::PutEdge(ab.clone()), Op::PutEdge(ca.clone())];
    store.commit(&u, &Commit { expected_version: Some(1), meta: next(&p), ops }).await.unwrap();
    assert!(store.edge_exists(&u, &pid, &ab).await.unwrap());
    assert!(!store.edge_exists(&u, &pid, &edge(&b, "blocks", &a)).await.unwrap(), "edges have a direction");
    assert_eq!(store.edges_of(&u, &pid, &a.entity.id).await.unwrap(), vec![ab.clone(), ca.clone()], "out, then in");
    assert_eq!(store.edges_of(&u, &pid, &b.entity.id).await.unwrap(), vec![ab.clone()]);
    assert_eq!(store.all_edges(&u, &pid).await.unwrap(), vec![ab.clone(), ca.clone()]);
    let twice = Commit { expected_version: Some(2), meta: next(&next(&p)), ops: vec![Op::PutEdge(ab.clone())] };
    assert!(matches!(store.commit(&u, &twice).await, Err(CommitError::OpFailed(0))), "an edge exists once");
    let unlink = Commit { expected_version: Some(2), meta: next(&next(&p)), ops: vec![Op::DeleteEdge(ab.clone())] };
    store.commit(&u, &unlink).await.unwrap();
    assert!(!store.edge_exists(&u, &pid, &ab).await.unwrap());
    assert_eq!(store.edges_of(&u, &pid, &b.entity.id).await.unwrap(), vec![]);
}

pub async fn an_entity_being_deleted_cannot_be_linked(store: &dyn EntityStore) {
    let u = fresh_user();
    let p = project(1, 10);
    let pid = p.project.id.clone();
    let (a, mut b) = (task(&pid, "a"), task(&pid, "b"));
    let p = seeded(store, &u, p, &[&a, &b]).await;
    b.deleting = true;
    store.commit(&u, &Commit { expected_version: Some(1), meta: next(&p), ops: vec![put(&b, false)] }).await.unwrap();
    let ab = edge(&a, "blocks", &b);
    let ops = vec![Op::Check(ab.from.clone()), Op::Check(ab.to.clone()), Op::PutEdge(ab.clone())];
    let r = store.commit(&u, &Commit { expected_version: Some(2), meta: next(&next(&p)), ops }).await;
    assert!(matches!(r, Err(CommitError::OpFailed(1))), "{r:?}");
    let listed = store.project_contents(&u, &pid).await.unwrap();
    assert_eq!(listed.iter().map(|(r, _)| r.entity.id.as_str()).collect::<Vec<_>>(), vec!["a"], "search skips it");
}

pub async fn a_project_being_deleted_takes_no_write_and_is_not_listed(store: &dyn EntityStore) {
    let u = fresh_user();
    let p = seeded(store, &u, project(1, 10), &[]).await;
    let other = seeded(store, &u, project(1, 20), &[]).await;
    let mut marked = next(&p);
    marked.deleting = true;
    store.commit(&u, &Commit { expected_version: Some(1), meta: marked.clone(), ops: vec![] }).await.unwrap();
    let r = store.commit(&u, &Commit { expected_version: Some(2), meta: next(&marked), ops: vec![] }).await;
    assert!(matches!(r, Err(CommitError::ProjectChanged)), "{r:?}");
    assert!(store.get_project(&u, &p.project.id).await.unwrap().unwrap().deleting, "read as it is");
    let (listed, _) = store.list_projects(&u, 10, None).await.unwrap();
    assert_eq!(listed, vec![other.clone()]);
    assert_eq!(store.all_projects(&u).await.unwrap(), vec![other]);
}

pub async fn another_users_project_is_not_there(store: &dyn EntityStore) {
    let (alice, bob) = (fresh_user(), fresh_user());
    let p = project(1, 10);
    let pid = p.project.id.clone();
    let (a, b) = (task(&pid, "a"), task(&pid, "b"));
    let p = seeded(store, &alice, p, &[&a, &b]).await;
    let ops = vec![Op::PutEdge(edge(&a, "r", &b))];
    store.commit(&alice, &Commit { expected_version: Some(1), meta: next(&p), ops }).await.unwrap();
    assert!(store.get_project(&bob, &pid).await.unwrap().is_none());
    assert!(store.get_entity(&bob, &pid, EntityKind::Task, &a.entity.id).await.unwrap().is_none());
    assert!(store.list_entities(&bob, &pid, EntityKind::Task, 10, None).await.unwrap().0.is_empty());
    assert!(store.all_edges(&bob, &pid).await.unwrap().is_empty());
    assert!(store.project_contents(&bob, &pid).await.unwrap().is_empty());
    assert!(store.all_projects(&bob).await.unwrap().is_empty());
    // Bob writing "to" Alice's project id writes to his own, empty, partition.
    let r = store.commit(&bob, &Commit { expected_version: Some(2), meta: next(&next(&p)), ops: vec![] }).await;
    assert!(matches!(r, Err(CommitError::ProjectChanged)), "{r:?}");
}

pub async fn content_round_trips_by_revision(store: &dyn EntityStore) {
    let u = fresh_user();
    let (pid, doc) = (ProjectId::new(), EntityId::new());
    assert_eq!(store.write_content(&u, &pid, &doc, "").await.unwrap(), None, "no revision for nothing");
    let small = store.write_content(&u, &pid, &doc, "hello").await.unwrap().expect("a revision");
    let big_text = "é".repeat(CHUNK_BYTES);
    let big = store.write_content(&u, &pid, &doc, &big_text).await.unwrap().expect("a revision");
    assert_ne!(small.rev, big.rev, "every write is a fresh revision");
    assert_eq!((small.chunks, big.chunks), (1, 2));
    assert_eq!(store.read_content(&u, &pid, &doc, &small).await.unwrap().as_deref(), Some("hello"));
    assert_eq!(store.read_content(&u, &pid, &doc, &big).await.unwrap(), Some(big_text));
    store.delete_content(&u, &pid, &doc, &small).await;
    assert_eq!(store.read_content(&u, &pid, &doc, &small).await.unwrap(), None, "a deleted revision is gone");
    assert_eq!(store.read_content(&fresh_user(), &pid, &doc, &big).await.unwrap(), None, "and no one else's");
}

pub async fn search_reads_live_entities_with_their_content(store: &dyn EntityStore) {
    let u = fresh_user();
    let p = project(1, 10);
    let pid = p.project.id.clone();
    let doc_id = EntityId::new();
    let content = store.write_content(&u, &pid, &doc_id, "the body").await.unwrap();
    let mut doc = task(&pid, "x");
    let serde_json::Value::Object(f) = serde_json::json!({"title": "Notes"}) else { unreachable!() };
    doc.entity.id = doc_id;
    doc.entity.fields = EntityFields::from_object(EntityKind::Document, f).unwrap();
    doc.content = content;
    let t = task(&pid, "t");
    seeded(store, &u, p, &[&doc, &t]).await;
    let mut found: Vec<(String, Option<String>)> = store
        .project_contents(&u, &pid)
        .await
        .unwrap()
        .into_iter()
        .map(|(r, body)| (r.entity.fields.name().to_string(), body))
        .collect();
    found.sort();
    assert_eq!(found, vec![("Notes".into(), Some("the body".into())), ("task t".into(), None)]);
}

pub async fn listings_page_in_key_order(store: &dyn EntityStore) {
    let u = fresh_user();
    let p = project(1, 10);
    let pid = p.project.id.clone();
    let rows: Vec<EntityRow> = ["a1", "a2", "a3"].iter().map(|id| task(&pid, id)).collect();
    seeded(store, &u, p, &rows.iter().collect::<Vec<_>>()).await;
    let (page, more) = store.list_entities(&u, &pid, EntityKind::Task, 2, None).await.unwrap();
    assert_eq!(page.iter().map(|r| r.entity.id.as_str()).collect::<Vec<_>>(), vec!["a1", "a2"]);
    assert!(more);
    let (rest, more) = store.list_entities(&u, &pid, EntityKind::Task, 2, Some(&page[1].entity.id)).await.unwrap();
    assert_eq!(rest.iter().map(|r| r.entity.id.as_str()).collect::<Vec<_>>(), vec!["a3"]);
    assert!(!more);
    assert!(store.list_entities(&u, &pid, EntityKind::Goal, 10, None).await.unwrap().0.is_empty(), "by kind");
    // Projects: oldest first.
    let (second, first) = (seeded(store, &u, project(1, 20), &[]).await, project(1, 30));
    let third = seeded(store, &u, first, &[]).await;
    let (page, more) = store.list_projects(&u, 2, None).await.unwrap();
    assert_eq!(page.iter().map(|r| r.project.created_at).collect::<Vec<_>>(), vec![10, 20]);
    assert!(more);
    let (rest, _) = store.list_projects(&u, 2, Some(&second)).await.unwrap();
    assert_eq!(rest, vec![third]);
}

pub async fn a_project_delete_removes_everything(store: &dyn EntityStore) {
    let u = fresh_user();
    let p = project(1, 10);
    let pid = p.project.id.clone();
    let (a, b) = (task(&pid, "a"), task(&pid, "b"));
    let p = seeded(store, &u, p, &[&a, &b]).await;
    let ops = vec![Op::PutEdge(edge(&a, "r", &b))];
    store.commit(&u, &Commit { expected_version: Some(1), meta: next(&p), ops }).await.unwrap();
    store.delete_project_items(&u, &pid).await.unwrap();
    assert!(store.get_entity(&u, &pid, EntityKind::Task, &a.entity.id).await.unwrap().is_none());
    assert!(store.all_edges(&u, &pid).await.unwrap().is_empty());
    assert!(store.get_project(&u, &pid).await.unwrap().is_some(), "the meta item goes last");
    store.delete_project_meta(&u, &pid).await.unwrap();
    assert!(store.get_project(&u, &pid).await.unwrap().is_none());
}

pub async fn a_commit_over_the_item_limit_is_refused(store: &dyn EntityStore) {
    let u = fresh_user();
    let p = project(1, 10);
    let pid = p.project.id.clone();
    let rows: Vec<EntityRow> = (0..Commit::MAX_ITEMS).map(|i| task(&pid, &format!("t{i}"))).collect();
    let ops = rows.iter().map(|r| put(r, true)).collect();
    let r = store.commit(&u, &Commit { expected_version: None, meta: p, ops }).await;
    assert!(matches!(r, Err(CommitError::Store(StoreError::Backend(_)))), "{r:?}");
    assert!(store.get_project(&u, &pid).await.unwrap().is_none());
}

/// One `#[tokio::test]` per contract case, each on the store `$setup().await` returns.
#[macro_export]
macro_rules! entity_store_contract {
    ($setup:path) => {
        #[tokio::test]
        async fn a_project_is_created_once() {
            let store = $setup().await;
            $crate::entities::store::contract::a_project_is_created_once(&store).await;
        }
        #[tokio::test]
        async fn commits_are_compare_and_set_on_the_project_version() {
            let store = $setup().await;
            $crate::entities::store::contract::commits_are_compare_and_set_on_the_project_version(&store).await;
        }
        #[tokio::test]
        async fn a_failed_step_writes_nothing_and_is_named() {
            let store = $setup().await;
            $crate::entities::store::contract::a_failed_step_writes_nothing_and_is_named(&store).await;
        }
        #[tokio::test]
        async fn edges_are_stored_both_ways_and_once() {
            let store = $setup().await;
            $crate::entities::store::contract::edges_are_stored_both_ways_and_once(&store).await;
        }
        #[tokio::test]
        async fn an_entity_being_deleted_cannot_be_linked() {
            let store = $setup().await;
            $crate::entities::store::contract::an_entity_being_deleted_cannot_be_linked(&store).await;
        }
        #[tokio::test]
        async fn a_project_being_deleted_takes_no_write_and_is_not_listed() {
            let store = $setup().await;
            $crate::entities::store::contract::a_project_being_deleted_takes_no_write_and_is_not_listed(&store).await;
        }
        #[tokio::test]
        async fn another_users_project_is_not_there() {
            let store = $setup().await;
            $crate::entities::store::contract::another_users_project_is_not_there(&store).await;
        }
        #[tokio::test]
        async fn content_round_trips_by_revision() {
            let store = $setup().await;
            $crate::entities::store::contract::content_round_trips_by_revision(&store).await;
        }
        #[tokio::test]
        async fn search_reads_live_entities_with_their_content() {
            let store = $setup().await;
            $crate::entities::store::contract::search_reads_live_entities_with_their_content(&store).await;
        }
        #[tokio::test]
        async fn listings_page_in_key_order() {
            let store = $setup().await;
            $crate::entities::store::contract::listings_page_in_key_order(&store).await;
        }
        #[tokio::test]
        async fn a_project_delete_removes_everything() {
            let store = $setup().await;
            $crate::entities::store::contract::a_project_delete_removes_everything(&store).await;
        }
        #[tokio::test]
        async fn a_commit_over_the_item_limit_is_refused() {
            let store = $setup().await;
            $crate::entities::store::contract::a_commit_over_the_item_limit_is_refused(&store).await;
        }
        #[tokio::test]
        async fn a_reorganize_commit_is_one_transaction() {
            let store = $setup().await;
            $crate::entities::store::contract::a_reorganize_commit_is_one_transaction(&store).await;
        }
        #[tokio::test]
        async fn a_reorganize_is_all_or_nothing() {
            let store = $setup().await;
            $crate::entities::store::contract::a_reorganize_is_all_or_nothing(&store).await;
        }
    };
}

#[cfg(test)]
mod memory {
    async fn store() -> crate::entities::store::MemoryEntityStore {
        crate::entities::store::MemoryEntityStore::new()
    }

    crate::entity_store_contract!(store);
}
