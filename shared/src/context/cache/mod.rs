//! The context-pack cache (prewarm, issue 6): the [`ContextCache`] trait,
//! [`DynamoContextCache`] and the in-memory [`MemoryContextCache`], which pass
//! one contract suite (`contract`, under the `testkit` feature). In DynamoDB: one item per user,
//! scope and focus, holding the serialized [`ContextPack`] and the project
//! version it was built from.
//!
//! | item | `pk` | `sk` | GSI1 `gsi1pk` / `gsi1sk` |
//! |---|---|---|---|
//! | context-pack cache | `U#<user>#CACHE` | `<scope>#<project or ->#<entity or ->#<entity kind or ->`, then `#<mode>` for a mode's pack | `CACHE#ACTIVE` / `<last_used_ms, 13 digits>#<user>#<sk>` |
//! | refresh sweep checkpoint | `PREWARM#SWEEP` | `CHECKPOINT` | — |
//!
//! The key starts with the user, so a cache is never served to anyone else.
//!
//! **Freshness is the caller's job.** [`ContextCache::cached_pack`] is one
//! `GetItem` and answers the pack with the project version it was built from;
//! the caller serves it only if that version equals the project's current
//! version (`EntityService::get_project(..).version`, which every write
//! bumps), and otherwise rebuilds and calls [`ContextCache::put_pack`]. A
//! project the user can no longer read has no current version, so its cache
//! is never served. Global packs (the project list) have no project: they are
//! stored with version 0 and kept exact up to one schedule period by the
//! refresh, which compares a digest of the rebuilt pack.
//!
//! `last_used` (and the sparse GSI1 key derived from it) says when a user
//! last prewarmed, wrote or touched the cache; the scheduled refresh walks
//! `gsi1pk = CACHE#ACTIVE` by that time, so idle caches are never looked at.
//! A refresh keeps `last_used` as it was: refreshing is not activity.

#[cfg(any(test, feature = "testkit"))]
pub mod contract;
mod dynamo;
mod memory;

pub use dynamo::{
    active_gsi_sk, cache_pk, cache_sk, digest, key_from_sk, key_sk, pack_from_json, scope_from_sk, ActiveEntry,
    ActivePage, DynamoContextCache, CACHE_ACTIVE_GSI_PK, CACHE_TTL_SECS, MAX_PACK_BYTES, SWEEP_PK, SWEEP_SK,
};
pub use memory::MemoryContextCache;

use crate::context::pack::{ContextPack, PackKey};
use crate::ids::UserId;
use crate::store::StoreError;
use crate::tools::ToolScope;

/// A cached pack with what was stored next to it.
#[derive(Debug, Clone, PartialEq)]
pub struct CachedPack {
    pub pack: ContextPack,
    /// The project version the pack was built from (0: global scope).
    pub version: u64,
    pub bytes: usize,
    pub build_ms: u64,
    pub built_at: i64,
    pub last_used: i64,
}

/// What [`ContextCache::put_pack`] stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PutOutcome {
    /// Size of the serialized pack.
    pub bytes: usize,
    /// `false`: too large to cache, or a newer version was already stored.
    pub stored: bool,
}

/// The cache as the stream and prewarm use it (a trait so tests can count
/// reads). Items are per [`PackKey`]: a scope's pack, or a mode's; the
/// `*_pack` and `touch` forms are for a scope's pack without a mode.
#[async_trait::async_trait]
pub trait ContextCache: Send + Sync {
    /// The cached pack for this user and key and the project version it was
    /// built from: one `GetItem` (eventually consistent). Serve it only if the
    /// version equals the project's current one (see the module docs).
    async fn cached(&self, user: &UserId, key: &PackKey) -> Result<Option<CachedPack>, StoreError>;

    /// Stores a pack built just now (`build_ms`: how long it took), stamped
    /// with `pack.version`, and marks the cache used now. Never replaces a
    /// pack built from a newer project version.
    async fn put(
        &self,
        user: &UserId,
        key: &PackKey,
        pack: &ContextPack,
        build_ms: u64,
    ) -> Result<PutOutcome, StoreError>;

    /// Marks the cache used now (after a hit), so the schedule keeps it warm.
    /// A no-op when there is no cache item.
    async fn touch_key(&self, user: &UserId, key: &PackKey) -> Result<(), StoreError>;

    /// [`ContextCache::cached`] of a scope's pack.
    async fn cached_pack(&self, user: &UserId, scope: &ToolScope) -> Result<Option<CachedPack>, StoreError> {
        self.cached(user, &scope.into()).await
    }

    /// [`ContextCache::put`] of a scope's pack.
    async fn put_pack(
        &self,
        user: &UserId,
        scope: &ToolScope,
        pack: &ContextPack,
        build_ms: u64,
    ) -> Result<PutOutcome, StoreError> {
        self.put(user, &scope.into(), pack, build_ms).await
    }

    /// [`ContextCache::touch_key`] of a scope's pack.
    async fn touch(&self, user: &UserId, scope: &ToolScope) -> Result<(), StoreError> {
        self.touch_key(user, &scope.into()).await
    }
}
