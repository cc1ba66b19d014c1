//! [`ContextCache`] in memory: the DynamoDB cache's rules (one entry per user
//! and scope, never replaced by a pack of an older project version, nothing
//! cached that cannot be served, expiry after `CACHE_TTL_SECS` unused)
//! without a table. Packs go through their JSON, as they do in the table.

use super::{key_sk, pack_from_json, CachedPack, ContextCache, PutOutcome, CACHE_TTL_SECS, MAX_PACK_BYTES};
use crate::context::pack::{ContextPack, PackKey};
use crate::ids::UserId;
use crate::store::StoreError;
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

    fn key(user: &UserId, key: &PackKey) -> (UserId, String) {
        (user.clone(), key_sk(key))
    }
}

#[async_trait::async_trait]
impl ContextCache for MemoryContextCache {
    async fn cached(&self, user: &UserId, key: &PackKey) -> Result<Option<CachedPack>, StoreError> {
        let entries = self.entries.lock().expect("cache lock");
        let expired = |e: &CachedPack| e.last_used / 1000 + CACHE_TTL_SECS < crate::now_ms() / 1000;
        Ok(entries.get(&Self::key(user, key)).filter(|e| !expired(e)).cloned())
    }

    async fn put(
        &self,
        user: &UserId,
        key: &PackKey,
        pack: &ContextPack,
        build_ms: u64,
    ) -> Result<PutOutcome, StoreError> {
        let data = serde_json::to_string(pack).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let bytes = data.len();
        let mut entries = self.entries.lock().expect("cache lock");
        if key.scope.project().is_some() && pack.version.is_none() {
            return Ok(PutOutcome { bytes, stored: false });
        }
        if bytes > MAX_PACK_BYTES {
            entries.remove(&Self::key(user, key));
            return Ok(PutOutcome { bytes, stored: false });
        }
        let version = pack.version.unwrap_or(0);
        if entries.get(&Self::key(user, key)).is_some_and(|e| e.version > version) {
            return Ok(PutOutcome { bytes, stored: false });
        }
        let now = crate::now_ms();
        let entry =
            CachedPack { pack: pack_from_json(&data)?, version, bytes, build_ms, built_at: now, last_used: now };
        entries.insert(Self::key(user, key), entry);
        Ok(PutOutcome { bytes, stored: true })
    }

    async fn touch_key(&self, user: &UserId, key: &PackKey) -> Result<(), StoreError> {
        if let Some(e) = self.entries.lock().expect("cache lock").get_mut(&Self::key(user, key)) {
            e.last_used = crate::now_ms();
        }
        Ok(())
    }
}
