//! Fixtures of the mode packs' tests: a project of alice's over the
//! in-memory store, its entities and edges.

use super::Sources;
use crate::calendar::Zone;
use crate::entities::store::MemoryEntityStore;
use crate::entities::{CreateEntity, Edge, EdgeEnd, EntityFields, EntityKind, EntityService, NewProject};
use crate::ids::{EntityId, ProjectId, UserId};
use chrono::{DateTime, Utc};
use serde_json::Value;

pub async fn project() -> (EntityService, UserId, ProjectId) {
    let svc = EntityService::new(MemoryEntityStore::new());
    let u = UserId::parse("alice").unwrap();
    let p = named_project(&svc, &u, "Launch").await;
    (svc, u, p)
}

pub async fn named_project(svc: &EntityService, u: &UserId, name: &str) -> ProjectId {
    let new = NewProject { name: name.into(), description: None, state: Default::default(), context: None };
    svc.create_project(u, new).await.unwrap().data.project.id
}

pub async fn entity(svc: &EntityService, u: &UserId, p: &ProjectId, kind: EntityKind, fields: Value) -> EntityId {
    let Value::Object(f) = fields else { panic!("fields are an object") };
    let mut new = CreateEntity::new(EntityFields::from_object(kind, f).unwrap());
    if kind == EntityKind::Document {
        new.content = Some(String::new());
    }
    svc.create(u, p, new).await.unwrap().data.id
}

pub async fn link(
    svc: &EntityService,
    u: &UserId,
    p: &ProjectId,
    from: (EntityKind, &EntityId),
    to: (EntityKind, &EntityId),
) {
    let edge = Edge {
        from: EdgeEnd { kind: from.0, id: from.1.clone() },
        relation: "supports".into(),
        to: EdgeEnd { kind: to.0, id: to.1.clone() },
    };
    svc.link(u, p, edge).await.unwrap();
}

pub fn sources(svc: &EntityService, now: DateTime<Utc>) -> Sources<'_> {
    Sources { entities: svc, calendar: None, zone: Some(Zone::UTC), now }
}
