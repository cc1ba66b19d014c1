//! [`ContextCache`] in memory: the DynamoDB cache's rules (one entry per user
//! and scope, never replaced by a pack of an older project version, nothing
//! cached that cannot be served, expiry after `CACHE_TTL_SECS` unused)
//! without a table. Packs go through their JSON, as they do in the table.

use super::{cache_sk, pack_from_json, CachedPack, ContextCache, PutOutcome, CACHE_TTL_SECS, MAX_PACK_BYTES};
use crate::context::pack::ContextPack;
use crate::ids::UserId;
use crate::store::StoreError;
use crate::tools::ToolScope;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

#[derive(Clone, Default)]
pub struct MemoryContextCache {
    entries: Arc<Mutex<HashMap<(UserId, String), CachedPack>>>,
}

impl MemoryContextCache {
    pub fn new() -> Self {
        Self::default()
    }

    fn key(user: &UserId, scope: &ToolScope) -> (UserId, String) {
        (user.clone(), cache_sk(scope))
    }
}

#[async_trait::async_trait]
impl ContextCache for MemoryContextCache {
    async fn cached_pack(&self, user: &UserId, scope: &ToolScope) -> Result<Option<CachedPack>, StoreError> {
        let entries = self.entries.lock().expect("cache lock");
        let expired = |e: &CachedPack| e.last_used / 1000 + CACHE_TTL_SECS < crate::now_ms() / 1000;
        Ok(entries.get(&Self::key(user, scope)).filter(|e| !expired(e)).cloned())
    }

    async fn put_pack(
        &self,
        user: &UserId,
        scope: &ToolScope,
        pack: &ContextPack,
        build_ms: u64,
    ) -> Result<PutOutcome, StoreError> {
        let data = serde_json::to_string(pack).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let bytes = data.len();
        let mut entries = self.entries.lock().expect("cache lock");
        if scope.project().is_some() && pack.version.is_none() {
            return Ok(PutOutcome { bytes, stored: false });
        }
        if bytes > MAX_PACK_BYTES {
            entries.remove(&Self::key(user, scope));
            return Ok(PutOutcome { bytes, stored: false });
        }
        let version = pack.version.unwrap_or(0);
        if entries.get(&Self::key(user, scope)).is_some_and(|e| e.version > version) {
            return Ok(PutOutcome { bytes, stored: false });
        }
        let now = crate::now_ms();
        let entry =
            CachedPack { pack: pack_from_json(&data)?, version, bytes, build_ms, built_at: now, last_used: now };
        entries.insert(Self::key(user, scope), entry);
        Ok(PutOutcome { bytes, stored: true })
    }

    async fn touch(&self, user: &UserId, scope: &ToolScope) -> Result<(), StoreError> {
        if let Some(e) = self.entries.lock().expect("cache lock").get_mut(&Self::key(user, scope)) {
            e.last_used = crate::now_ms();
        }
        Ok(())
    }
}
