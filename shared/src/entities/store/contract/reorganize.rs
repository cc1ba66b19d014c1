//! The contract cases of a reorganize (`crate::entities::service::reorganize`):
//! its one commit (the tree in the meta item, edges beside it) against the
//! store, and the service's all-or-nothing answer to a stale version and to a
//! concurrent edit, on both implementations.

use super::{edge, next, project, seeded, task};
use crate::entities::model::*;
use crate::entities::store::interleaved::Interleaved;
use crate::entities::store::{Commit, CommitError, EntityStore, Op, ProjectRow};
use crate::entities::{tree, EntityError, EntityService, Missing};
use crate::ids::{EntityId, ProjectId, UserId};
use crate::store::gate::fresh_user;
use serde_json::json;

/// A reorganize's commit shape at the item limit: the moved tree, an unlink
/// and links, refused whole for one failed step or a stale version.
pub async fn a_reorganize_commit_is_one_transaction(store: &dyn EntityStore) {
    let u = fresh_user();
    let p = project(1, 10);
    let pid = p.project.id.clone();
    let (a, b, c) = (task(&pid, "a"), task(&pid, "b"), task(&pid, "c"));
    let p = seeded(store, &u, p, &[&a, &b, &c]).await;
    let (ab, ba) = (edge(&a, "blocks", &b), edge(&b, "blocks", &a));
    let ops = vec![Op::PutEdge(ab.clone()), Op::PutEdge(ba.clone())];
    store.commit(&u, &Commit { expected_version: Some(1), meta: next(&p), ops }).await.unwrap();
    let at = store.get_project(&u, &pid).await.unwrap().unwrap();
    let mut moved = next(&at);
    tree::insert(&mut moved.tree, Some(&at.project.context_document_id), tree::leaf(EntityId::new()), None).unwrap();
    let (ac, bc, ca) = (edge(&a, "supports", &c), edge(&b, "supports", &c), edge(&c, "blocks", &a));
    let batch = |last: &Edge, expected| Commit {
        expected_version: Some(expected),
        meta: moved.clone(),
        ops: vec![
            Op::DeleteEdge(ab.clone()),
            Op::PutEdge(ac.clone()),
            Op::PutEdge(bc.clone()),
            Op::PutEdge(last.clone()),
        ],
    };
    assert_eq!(batch(&ba, 2).items(), 9, "within Commit::MAX_ITEMS");
    async fn unchanged(store: &dyn EntityStore, u: &UserId, at: &ProjectRow, ab: &Edge, what: &str) {
        let pid = &at.project.id;
        assert_eq!(store.get_project(u, pid).await.unwrap().as_ref(), Some(at), "{what}: the tree and version");
        assert_eq!(store.all_edges(u, pid).await.unwrap().len(), 2, "{what}: the edges");
        assert!(store.edge_exists(u, pid, ab).await.unwrap(), "{what}: not unlinked");
    }
    let r = store.commit(&u, &batch(&ba, 2)).await;
    assert!(matches!(r, Err(CommitError::OpFailed(3))), "linking what exists: {r:?}");
    unchanged(store, &u, &at, &ab, "a failed last step").await;
    let r = store.commit(&u, &batch(&ca, 1)).await;
    assert!(matches!(r, Err(CommitError::ProjectChanged)), "stale: {r:?}");
    unchanged(store, &u, &at, &ab, "a stale version").await;
    store.commit(&u, &batch(&ca, 2)).await.unwrap();
    assert_eq!(store.get_project(&u, &pid).await.unwrap().unwrap(), moved, "the tree moved with the edges");
    let key = |e: &Edge| format!("{}{}{}", e.from.id, e.relation, e.to.id);
    let (mut edges, mut want) = (store.all_edges(&u, &pid).await.unwrap(), vec![ba.clone(), ac, bc, ca]);
    edges.sort_by_key(key);
    want.sort_by_key(key);
    assert_eq!(edges, want);
}

fn fields(kind: EntityKind, v: serde_json::Value) -> EntityFields {
    let serde_json::Value::Object(m) = v else { panic!("an object") };
    EntityFields::from_object(kind, m).expect("fields")
}

async fn create(svc: &EntityService, u: &UserId, p: &ProjectId, kind: EntityKind, name: &str) -> EdgeEnd {
    let f = if kind == EntityKind::Goal { json!({"name": name}) } else { json!({"title": name}) };
    let e = svc.create(u, p, CreateEntity::new(fields(kind, f))).await.expect("created").data;
    EdgeEnd { kind, id: e.id }
}

fn link(from: &EdgeEnd, relation: &str, to: &EdgeEnd) -> Edge {
    Edge { from: from.clone(), relation: relation.into(), to: to.clone() }
}

/// What a reorganize may change, to compare before and after a refusal.
async fn state(svc: &EntityService, u: &UserId, p: &ProjectId) -> (Project, DocStructure, Vec<Edge>) {
    let mut edges = svc.edges(u, p, None).await.unwrap();
    edges.sort_by_key(|e| format!("{}{}{}", e.from.id, e.relation, e.to.id));
    (svc.get_project(u, p).await.unwrap(), svc.doc_structure(u, p).await.unwrap(), edges)
}

/// The project a reorganize works on: two root documents, two tasks and a
/// goal, with t1 supporting the goal.
struct Launch {
    pid: ProjectId,
    d1: EntityId,
    d2: EntityId,
    t1: EdgeEnd,
    t2: EdgeEnd,
    g: EdgeEnd,
}

async fn launch(svc: &EntityService, u: &UserId) -> Launch {
    let new = NewProject { name: "Launch".into(), description: None, state: Default::default(), context: None };
    let pid = svc.create_project(u, new).await.unwrap().data.project.id;
    let doc = |title: &str| {
        CreateEntity::from(NewDocument {
            title: title.into(),
            description: None,
            content: String::new(),
            parent_id: None,
            position: None,
        })
    };
    let d1 = svc.create(u, &pid, doc("Specs")).await.unwrap().data.id;
    let d2 = svc.create(u, &pid, doc("API notes")).await.unwrap().data.id;
    let (t1, t2) =
        (create(svc, u, &pid, EntityKind::Task, "t1").await, create(svc, u, &pid, EntityKind::Task, "t2").await);
    let g = create(svc, u, &pid, EntityKind::Goal, "Ship").await;
    svc.link(u, &pid, link(&t1, "supports", &g)).await.unwrap();
    Launch { pid, d1, d2, t1, t2, g }
}

/// The service's reorganize over `store`: refused whole (stale version, over
/// the limit, one bad part, a concurrent edit), else applied whole.
pub async fn a_reorganize_is_all_or_nothing<S: EntityStore + Clone + 'static>(store: &S) {
    let u = fresh_user();
    let racy = Interleaved::new(store.clone());
    let (svc, other) = (EntityService::new(racy.clone()), EntityService::new(store.clone()));
    let Launch { pid, d1, d2, t1, t2, g } = launch(&svc, &u).await;
    let batch = |expected_version| Reorganize {
        expected_version,
        moves: vec![MoveDocument { document_id: d2.clone(), new_parent_id: Some(d1.clone()), position: None }],
        unlink: vec![link(&t1, "supports", &g)],
        link: vec![link(&t2, "supports", &g)],
    };
    let before = state(&svc, &u, &pid).await;
    let v = before.0.version;

    let r = svc.reorganize(&u, &pid, batch(Some(v - 1))).await;
    assert!(
        matches!(r, Err(EntityError::Conflict { expected, current_version }) if expected == v - 1 && current_version == v),
        "{r:?}"
    );
    assert_eq!(state(&svc, &u, &pid).await, before, "a stale version writes nothing");

    let mut wide = batch(Some(v));
    wide.link.extend([link(&t1, "blocks", &t2), link(&t2, "blocks", &t1), link(&g, "needs", &t1)]);
    let r = svc.reorganize(&u, &pid, wide).await;
    assert!(matches!(r, Err(EntityError::TooManyChanges { edges: 5, limit: 4, .. })), "{r:?}");
    assert_eq!(state(&svc, &u, &pid).await, before, "over the limit writes nothing");

    let mut bad_move = batch(Some(v));
    bad_move.moves.push(MoveDocument { document_id: EntityId::new(), new_parent_id: None, position: None });
    let r = svc.reorganize(&u, &pid, bad_move).await;
    assert!(matches!(r, Err(EntityError::NotFound(Missing::Entity))), "{r:?}");
    assert_eq!(state(&svc, &u, &pid).await, before, "one missing document writes nothing");

    // Another tab renames the project between the batch's reads and its commit.
    let (o, ou, op) = (other.clone(), u.clone(), pid.clone());
    racy.before_next_commit(async move {
        let rename = json!({"name": "Renamed"}).as_object().cloned().unwrap();
        o.update_project(&ou, &op, rename, None).await.expect("the concurrent edit");
    });
    let r = svc.reorganize(&u, &pid, batch(Some(v))).await;
    assert!(
        matches!(r, Err(EntityError::Conflict { expected, current_version }) if expected == v && current_version == v + 1),
        "{r:?}"
    );
    let after_rename = state(&svc, &u, &pid).await;
    assert_eq!((after_rename.0.name.as_str(), after_rename.0.version), ("Renamed", v + 1), "the other edit stands");
    assert_eq!((&after_rename.1.root, &after_rename.2), (&before.1.root, &before.2), "and nothing of the batch");

    // Without a version, the batch plans again and meets what the other edit did.
    let (o, ou, op, gone) = (other.clone(), u.clone(), pid.clone(), t2.id.clone());
    racy.before_next_commit(async move {
        o.delete(&ou, &op, EntityKind::Task, &gone, None).await.expect("the concurrent delete");
    });
    let r = svc.reorganize(&u, &pid, batch(None)).await;
    assert!(matches!(r, Err(EntityError::EdgeEndpointMissing("from"))), "{r:?}");
    let after_delete = state(&svc, &u, &pid).await;
    assert_eq!(after_delete.0.version, v + 2);
    assert_eq!((&after_delete.1.root, &after_delete.2), (&before.1.root, &before.2), "nothing of the batch");

    // Whole: every part lands in one version, and the patch names each change.
    let t3 = create(&svc, &u, &pid, EntityKind::Task, "t3").await;
    let v = svc.get_project(&u, &pid).await.unwrap().version;
    let mut ok = batch(Some(v));
    ok.link = vec![link(&t3, "supports", &g)];
    let w = svc.reorganize(&u, &pid, ok.clone()).await.unwrap();
    assert_eq!(w.patch.version, v + 1, "one version for the whole batch");
    let named = vec![Change::Unlinked { edge: ok.unlink[0].clone() }, Change::Linked { edge: ok.link[0].clone() }];
    assert_eq!(w.patch.changes, named);
    let (_, tree, edges) = state(&svc, &u, &pid).await;
    assert_eq!(Some(&tree), w.patch.doc_structure.as_ref(), "the patch carries the tree");
    assert_eq!(tree, w.data.doc_structure);
    let specs = tree::find(&tree.root, &d1).expect("Specs");
    assert_eq!(specs.children.iter().map(|n| &n.id).collect::<Vec<_>>(), [&d2], "moved under Specs");
    assert_eq!(edges, ok.link, "t1's edge gone, t3's there");
}
