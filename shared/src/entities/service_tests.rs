//! The service's rules over the in-memory store: what the DynamoDB
//! integration tests check end to end, here without a table.

use super::*;
use crate::entities::store::MemoryEntityStore;
use serde_json::json;

fn user(u: &str) -> UserId {
    UserId::parse(u).unwrap()
}

fn service() -> EntityService {
    EntityService::new(MemoryEntityStore::new())
}

fn fields(kind: EntityKind, v: serde_json::Value) -> EntityFields {
    let serde_json::Value::Object(m) = v else { panic!("an object") };
    EntityFields::from_object(kind, m).unwrap()
}

async fn new_project(svc: &EntityService, u: &UserId) -> Project {
    let p = NewProject { name: "Launch".into(), description: None, state: Default::default(), context: None };
    svc.create_project(u, p).await.unwrap().data.project
}

async fn doc(svc: &EntityService, u: &UserId, p: &ProjectId, parent: Option<&EntityId>) -> Entity {
    let new = CreateEntity {
        fields: fields(EntityKind::Document, json!({"title": "Doc"})),
        content: Some("body".into()),
        parent_id: parent.cloned(),
        position: None,
    };
    svc.create(u, p, new).await.unwrap().data
}

async fn task(svc: &EntityService, u: &UserId, p: &ProjectId, title: &str) -> Entity {
    let new = CreateEntity {
        fields: fields(EntityKind::Task, json!({"title": title})),
        content: None,
        parent_id: None,
        position: None,
    };
    svc.create(u, p, new).await.unwrap().data
}

fn end(e: &Entity) -> EdgeEnd {
    EdgeEnd { kind: e.kind(), id: e.id.clone() }
}

#[tokio::test]
async fn a_new_project_has_its_context_document_and_every_write_bumps_the_version() {
    let (svc, u) = (service(), user("alice"));
    let p = new_project(&svc, &u).await;
    assert_eq!(p.version, 1);
    let tree = svc.doc_structure(&u, &p.id).await.unwrap();
    assert_eq!(tree.root.iter().map(|n| &n.id).collect::<Vec<_>>(), vec![&p.context_document_id]);
    let d = doc(&svc, &u, &p.id, None).await;
    assert_eq!(svc.get(&u, &p.id, EntityKind::Document, &d.id).await.unwrap().content.as_deref(), Some("body"));
    assert_eq!(svc.get_project(&u, &p.id).await.unwrap().version, 2);
}

#[tokio::test]
async fn moving_a_document_under_its_own_child_is_refused_and_changes_nothing() {
    let (svc, u) = (service(), user("alice"));
    let p = new_project(&svc, &u).await;
    let parent = doc(&svc, &u, &p.id, None).await;
    let child = doc(&svc, &u, &p.id, Some(&parent.id)).await;
    let before = svc.doc_structure(&u, &p.id).await.unwrap();
    let mv = MoveDocument { document_id: parent.id.clone(), new_parent_id: Some(child.id.clone()), position: None };
    assert!(matches!(svc.move_document(&u, &p.id, mv).await, Err(EntityError::Cycle)));
    let ghost = MoveDocument { document_id: child.id.clone(), new_parent_id: Some(EntityId::new()), position: None };
    assert!(matches!(svc.move_document(&u, &p.id, ghost).await, Err(EntityError::ParentNotFound)));
    assert_eq!(svc.doc_structure(&u, &p.id).await.unwrap(), before, "same tree, same version");
    let up = MoveDocument { document_id: child.id.clone(), new_parent_id: None, position: Some(0) };
    let moved = svc.move_document(&u, &p.id, up).await.unwrap().data;
    assert_eq!((moved.version, moved.root[0].id.clone()), (before.version + 1, child.id));
}

#[tokio::test]
async fn links_need_both_ends_and_exist_once() {
    let (svc, u) = (service(), user("alice"));
    let p = new_project(&svc, &u).await;
    let (a, b) = (task(&svc, &u, &p.id, "a").await, task(&svc, &u, &p.id, "b").await);
    let edge = |from: &Entity, to: EdgeEnd| Edge { from: end(from), relation: "blocks".into(), to };
    let ghost = EdgeEnd { kind: EntityKind::Task, id: EntityId::new() };
    let r = svc.link(&u, &p.id, edge(&a, ghost)).await;
    assert!(matches!(r, Err(EntityError::EdgeEndpointMissing("to"))), "{r:?}");
    assert!(matches!(svc.link(&u, &p.id, edge(&a, end(&a))).await, Err(EntityError::SelfEdge)));
    svc.link(&u, &p.id, edge(&a, end(&b))).await.unwrap();
    assert!(matches!(svc.link(&u, &p.id, edge(&a, end(&b))).await, Err(EntityError::EdgeExists)));
    assert_eq!(svc.edges(&u, &p.id, Some(&b.id)).await.unwrap(), vec![edge(&a, end(&b))]);
}

#[tokio::test]
async fn deleting_a_well_linked_entity_removes_every_edge_in_steps() {
    let (svc, u) = (service(), user("alice"));
    let p = new_project(&svc, &u).await;
    let hub = task(&svc, &u, &p.id, "hub").await;
    let mut others = vec![];
    for i in 0..EDGES_PER_COMMIT + 2 {
        let t = task(&svc, &u, &p.id, &format!("t{i}")).await;
        let e = Edge { from: end(&t), relation: "needs".into(), to: end(&hub) };
        svc.link(&u, &p.id, e).await.unwrap();
        others.push(t);
    }
    let deleted = svc.delete(&u, &p.id, EntityKind::Task, &hub.id, None).await.unwrap();
    assert_eq!(deleted.data.edges_removed.len(), EDGES_PER_COMMIT + 2);
    assert!(svc.edges(&u, &p.id, None).await.unwrap().is_empty(), "no dangling edge");
    let gone = svc.get(&u, &p.id, EntityKind::Task, &hub.id).await;
    assert!(matches!(gone, Err(EntityError::NotFound(Missing::Entity))), "{gone:?}");
    assert_eq!(deleted.patch.version, svc.get_project(&u, &p.id).await.unwrap().version, "the patch's is the last");
}

#[tokio::test]
async fn a_stale_version_is_refused_and_another_users_project_is_missing() {
    let (svc, u) = (service(), user("alice"));
    let p = new_project(&svc, &u).await;
    let t = task(&svc, &u, &p.id, "a").await;
    let mut patch = serde_json::Map::new();
    patch.insert("title".into(), json!("renamed"));
    let stale = UpdateEntity { patch: patch.clone(), expected_version: Some(t.version + 1) };
    let r = svc.update(&u, &p.id, EntityKind::Task, &t.id, stale).await;
    assert!(matches!(r, Err(EntityError::Conflict { current_version: 1, .. })), "{r:?}");
    let bob = user("bob");
    let r = svc.get_project(&bob, &p.id).await;
    assert!(matches!(r, Err(EntityError::NotFound(Missing::Project))), "{r:?}");
    let r = svc.update(&bob, &p.id, EntityKind::Task, &t.id, UpdateEntity { patch, expected_version: None }).await;
    assert!(matches!(r, Err(EntityError::NotFound(Missing::Project))), "{r:?}");
    assert!(svc.search(&bob, "renamed", None, None).await.unwrap().hits.is_empty());
}

#[tokio::test]
async fn a_deleted_project_is_gone_with_everything_in_it() {
    let (svc, u) = (service(), user("alice"));
    let p = new_project(&svc, &u).await;
    task(&svc, &u, &p.id, "a").await;
    svc.delete_project(&u, &p.id, None).await.unwrap();
    assert!(matches!(svc.get_project(&u, &p.id).await, Err(EntityError::NotFound(Missing::Project))));
    assert!(svc.list_projects(&u, PageRequest::default()).await.unwrap().items.is_empty());
    assert!(svc.search(&u, "a", None, None).await.unwrap().hits.is_empty());
}
