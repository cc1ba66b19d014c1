//! The stream's side of prewarmed context packs: served only when built from
//! the project's current version, rebuilt and written back otherwise.

use serde_json::json;
use shared::context::cache::DynamoContextCache;
use shared::entities::store::DynamoEntityStore;
use shared::entities::{EntityService, NewProject};
use shared::ids::{ProjectId, UserId};
use shared::sse::{CacheStatus, StreamEvent};
use shared::tools::ToolScope;
use tests::{TestApp, Turn};

fn user(u: &str) -> UserId {
    UserId::parse(u).unwrap()
}

fn cache_of(turn: &Turn) -> Option<CacheStatus> {
    turn.events.iter().find_map(|e| match e {
        StreamEvent::ContextUsage(u) => Some(u.cache),
        _ => None,
    })?
}

async fn project(t: &TestApp, u: &str) -> ProjectId {
    let svc = EntityService::new(DynamoEntityStore::new(t.dynamo.clone(), t.table.clone()));
    let p = NewProject { name: "Launch".into(), description: None, state: Default::default(), context: None };
    svc.create_project(&user(u), p).await.unwrap().data.project.id
}

#[tokio::test]
async fn a_cached_pack_is_served_until_a_write_moves_the_version() {
    let t = TestApp::new().await;
    let p = project(&t, "alice").await;
    let cache = DynamoContextCache::new(t.dynamo.clone(), t.table.clone());
    let scope = ToolScope::Project { project: p.clone() };
    let body = |sid: Option<String>| {
        let mut b =
            json!({"message": "status?", "context_type": "project", "projectFocus": {"projectId": p.to_string()}});
        if let Some(s) = sid {
            b["session_id"] = json!(s);
        }
        b
    };
    let first = t.turn("alice", body(None)).await;
    assert_eq!(cache_of(&first), Some(CacheStatus::Miss), "nothing cached yet: built and written back");
    let stored = cache.cached_entry(&user("alice"), &scope).await.unwrap().expect("written back");
    let sid = first.session_id();

    let second = t.turn("alice", body(Some(sid.clone()))).await;
    assert_eq!(cache_of(&second), Some(CacheStatus::Hit));
    let after_hit = cache.cached_entry(&user("alice"), &scope).await.unwrap().unwrap();
    assert_eq!(after_hit.built_at, stored.built_at, "a hit does not rebuild");

    // A write through the entities service moves the project's version.
    let svc = EntityService::new(DynamoEntityStore::new(t.dynamo.clone(), t.table.clone()));
    let changes = serde_json::Map::from_iter([("description".to_string(), json!("moved on"))]);
    let created = svc.update_project(&user("alice"), &p, changes, None).await.map(|_| ());
    created.unwrap();
    let third = t.turn("alice", body(Some(sid.clone()))).await;
    assert_eq!(cache_of(&third), Some(CacheStatus::Miss), "stale: rebuilt");
    let rebuilt = cache.cached_entry(&user("alice"), &scope).await.unwrap().unwrap();
    assert!(rebuilt.version > stored.version);
    let fourth = t.turn("alice", body(Some(sid))).await;
    assert_eq!(cache_of(&fourth), Some(CacheStatus::Hit));
    // The model saw the fresh pack.
    let system = tests::system_text(t.llm.requests().last().unwrap());
    assert!(system.contains(&format!("\"version\":{}", rebuilt.version)), "{system}");
}

#[tokio::test]
async fn another_users_project_is_never_served_from_a_cache() {
    let t = TestApp::new().await;
    let p = project(&t, "alice").await;
    let body = json!({"message": "peek", "context_type": "project", "projectFocus": {"projectId": p.to_string()}});
    t.turn("alice", body.clone()).await;
    let bob = t.turn("bob", body).await;
    assert_eq!(cache_of(&bob), None, "no cache for a project bob cannot see");
    let system = tests::system_text(t.llm.requests().last().unwrap());
    assert!(!system.contains("Launch"), "nothing of alice's project reaches bob's prompt");
}

/// The first test: prewarm, then the first turn of that session finds
/// its context ready — a hit, and no rebuild.
#[tokio::test]
async fn prewarm_then_the_first_turn_hits() {
    use shared::edge::prewarm::handle_prewarm;
    use shared::prewarm::{PrewarmApp, PrewarmConfig};
    let t = TestApp::new().await;
    let p = project(&t, "alice").await;
    let prewarm = PrewarmApp::with_dynamo(
        tests::test_config(&t.table, "http://127.0.0.1:9/unused"),
        PrewarmConfig::from_env().unwrap(),
        t.dynamo.clone(),
    );
    let req = http::Request::builder()
        .method("POST")
        .uri("/")
        .header("authorization", format!("Bearer {}", tests::token("alice")))
        .body(lambda_http::Body::from(json!({"context_type": "project", "project_id": p.to_string()}).to_string()))
        .unwrap();
    let resp = Turn::read(handle_prewarm(&prewarm, lambda_http::Request::from(req)).await).await;
    assert_eq!(resp.status, 200, "{:?}", resp.json);
    let body = resp.json.unwrap();
    let sid = body["session"]["id"].as_str().unwrap().to_string();
    let cache = DynamoContextCache::new(t.dynamo.clone(), t.table.clone());
    let scope = ToolScope::Project { project: p.clone() };
    let warmed = cache.cached_entry(&user("alice"), &scope).await.unwrap().expect("prewarmed");

    // The session carries the focus: the turn names nothing but the session.
    let turn = t.turn("alice", json!({"message": "where were we?", "session_id": sid})).await;
    assert_eq!(turn.error_code(), None, "{:?}", turn.events);
    assert_eq!(cache_of(&turn), Some(CacheStatus::Hit));
    let after = cache.cached_entry(&user("alice"), &scope).await.unwrap().unwrap();
    assert_eq!(after.built_at, warmed.built_at, "not rebuilt");
}

/// A hit renews the cache's use mark (what keeps it on the prewarm schedule)
/// once it is a minute old, beside the model call; a fresher mark is left as
/// it is, so a turn on a warm cache costs no extra write.
#[tokio::test]
async fn a_hit_renews_the_use_mark_only_once_it_is_a_minute_old() {
    use aws_sdk_dynamodb::types::AttributeValue;
    let t = TestApp::new().await;
    let p = project(&t, "alice").await;
    let cache = DynamoContextCache::new(t.dynamo.clone(), t.table.clone());
    let scope = ToolScope::Project { project: p.clone() };
    let body = json!({"message": "status?", "context_type": "project", "projectFocus": {"projectId": p.to_string()}});
    let first = t.turn("alice", body.clone()).await;
    let mut again = body;
    again["session_id"] = json!(first.session_id());
    let marked = cache.cached_entry(&user("alice"), &scope).await.unwrap().unwrap().last_used;

    assert_eq!(cache_of(&t.turn("alice", again.clone()).await), Some(CacheStatus::Hit));
    assert_eq!(cache.cached_entry(&user("alice"), &scope).await.unwrap().unwrap().last_used, marked, "fresh: kept");

    let (pk, sk) = (shared::context::cache::cache_pk(&user("alice")), shared::context::cache::cache_sk(&scope));
    let old = shared::now_ms() - 5 * 60_000;
    t.dynamo
        .update_item()
        .table_name(&t.table)
        .key("pk", AttributeValue::S(pk))
        .key("sk", AttributeValue::S(sk))
        .update_expression("SET last_used = :u")
        .expression_attribute_values(":u", AttributeValue::N(old.to_string()))
        .send()
        .await
        .unwrap();
    assert_eq!(cache_of(&t.turn("alice", again).await), Some(CacheStatus::Hit));
    let renewed = cache.cached_entry(&user("alice"), &scope).await.unwrap().unwrap().last_used;
    assert!(renewed > old + 60_000, "renewed by the turn, before its done: {renewed} vs {old}");
}
