//! The [`ContextCache`] contract, written once and run against both
//! implementations: the in-memory twin in `cargo test -p shared --lib`, the
//! DynamoDB cache against DynamoDB Local (`tests/tests/contract_features.rs`,
//! through [`crate::context_cache_contract`]). Each case uses a user of its own.

use super::{ContextCache, MAX_PACK_BYTES};
use crate::context::pack::ContextPack;
use crate::ids::{EntityId, ProjectId};
use crate::store::gate::fresh_user;
use crate::tools::ToolScope;
use serde_json::json;

/// A project pack built from project version `version`.
pub fn pack(version: Option<u64>, name: &str) -> ContextPack {
    ContextPack {
        scope: "project",
        project: Some(json!({"name": name})),
        doc_structure: Some(json!({"root": []})),
        linked: vec![json!({"id": "t1"})],
        version,
        ..Default::default()
    }
}

fn project_scope() -> ToolScope {
    ToolScope::Project { project: ProjectId::new() }
}

pub async fn a_pack_is_read_back_as_stored(cache: &dyn ContextCache) {
    let (u, scope) = (fresh_user(), project_scope());
    assert!(cache.cached_pack(&u, &scope).await.unwrap().is_none());
    let p = pack(Some(3), "Launch");
    let put = cache.put_pack(&u, &scope, &p, 12).await.unwrap();
    assert!(put.stored);
    assert_eq!(put.bytes, serde_json::to_string(&p).unwrap().len());
    let hit = cache.cached_pack(&u, &scope).await.unwrap().expect("a hit");
    assert_eq!((hit.pack, hit.version, hit.bytes, hit.build_ms), (p, 3, put.bytes, 12));
    assert!(hit.last_used > 0 && hit.built_at > 0);
}

pub async fn an_older_version_never_replaces_a_newer_one(cache: &dyn ContextCache) {
    let (u, scope) = (fresh_user(), project_scope());
    assert!(cache.put_pack(&u, &scope, &pack(Some(5), "five"), 1).await.unwrap().stored);
    assert!(!cache.put_pack(&u, &scope, &pack(Some(4), "four"), 1).await.unwrap().stored);
    assert_eq!(cache.cached_pack(&u, &scope).await.unwrap().unwrap().pack, pack(Some(5), "five"));
    assert!(cache.put_pack(&u, &scope, &pack(Some(5), "rebuilt"), 1).await.unwrap().stored, "the same version may");
    assert!(cache.put_pack(&u, &scope, &pack(Some(6), "six"), 1).await.unwrap().stored);
    assert_eq!(cache.cached_pack(&u, &scope).await.unwrap().unwrap().version, 6);
}

pub async fn what_cannot_be_served_is_not_cached(cache: &dyn ContextCache) {
    let (u, scope) = (fresh_user(), project_scope());
    assert!(!cache.put_pack(&u, &scope, &pack(None, "unread"), 1).await.unwrap().stored, "no project version");
    assert!(cache.cached_pack(&u, &scope).await.unwrap().is_none());
    cache.put_pack(&u, &scope, &pack(Some(1), "small"), 1).await.unwrap();
    let mut big = pack(Some(2), "big");
    big.linked = vec![json!("x".repeat(MAX_PACK_BYTES))];
    let put = cache.put_pack(&u, &scope, &big, 1).await.unwrap();
    assert!(!put.stored && put.bytes > MAX_PACK_BYTES);
    assert!(cache.cached_pack(&u, &scope).await.unwrap().is_none(), "the older pack is not left to be served");
}

pub async fn caches_are_per_user_and_scope(cache: &dyn ContextCache) {
    let (u, scope) = (fresh_user(), project_scope());
    cache.put_pack(&u, &scope, &pack(Some(1), "mine"), 1).await.unwrap();
    assert!(cache.cached_pack(&fresh_user(), &scope).await.unwrap().is_none(), "another user's is not there");
    assert!(cache.cached_pack(&u, &project_scope()).await.unwrap().is_none(), "nor another project's");
    let ToolScope::Project { project } = &scope else { unreachable!() };
    let entity = ToolScope::Entity { project: project.clone(), kind: None, entity: EntityId::new() };
    assert!(cache.cached_pack(&u, &entity).await.unwrap().is_none(), "nor an entity's in it");
    let global = ContextPack { scope: "global", projects: vec![json!({"name": "mine"})], ..Default::default() };
    assert!(cache.put_pack(&u, &ToolScope::Global, &global, 1).await.unwrap().stored, "global packs have no version");
    assert_eq!(cache.cached_pack(&u, &ToolScope::Global).await.unwrap().unwrap().version, 0);
}

pub async fn touch_marks_a_cache_used(cache: &dyn ContextCache) {
    let (u, scope) = (fresh_user(), project_scope());
    cache.touch(&u, &scope).await.unwrap();
    assert!(cache.cached_pack(&u, &scope).await.unwrap().is_none(), "touching nothing creates nothing");
    cache.put_pack(&u, &scope, &pack(Some(1), "p"), 1).await.unwrap();
    let before = cache.cached_pack(&u, &scope).await.unwrap().unwrap().last_used;
    // Wait for the clock to move on, so a touch has a later time to write.
    while crate::now_ms() <= before {
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    cache.touch(&u, &scope).await.unwrap();
    let after = cache.cached_pack(&u, &scope).await.unwrap().unwrap();
    assert!(after.last_used > before, "used again now");
    assert_eq!(after.pack, pack(Some(1), "p"), "the pack is kept");
}

/// One `#[tokio::test]` per contract case, each on the cache `$setup().await` returns.
#[macro_export]
macro_rules! context_cache_contract {
    ($setup:path) => {
        #[tokio::test]
        async fn a_pack_is_read_back_as_stored() {
            let cache = $setup().await;
            $crate::context::cache::contract::a_pack_is_read_back_as_stored(&cache).await;
        }
        #[tokio::test]
        async fn an_older_version_never_replaces_a_newer_one() {
            let cache = $setup().await;
            $crate::context::cache::contract::an_older_version_never_replaces_a_newer_one(&cache).await;
        }
        #[tokio::test]
        async fn what_cannot_be_served_is_not_cached() {
            let cache = $setup().await;
            $crate::context::cache::contract::what_cannot_be_served_is_not_cached(&cache).await;
        }
        #[tokio::test]
        async fn caches_are_per_user_and_scope() {
            let cache = $setup().await;
            $crate::context::cache::contract::caches_are_per_user_and_scope(&cache).await;
        }
        #[tokio::test]
        async fn touch_marks_a_cache_used() {
            let cache = $setup().await;
            $crate::context::cache::contract::touch_marks_a_cache_used(&cache).await;
        }
    };
}

#[cfg(test)]
mod memory {
    async fn cache() -> crate::context::cache::MemoryContextCache {
        crate::context::cache::MemoryContextCache::new()
    }

    crate::context_cache_contract!(cache);
}
