//! [`ContextCache`] over DynamoDB (the items are described above), with
//! what the scheduled refresh reads beside it: the active index and the
//! sweep's checkpoint.

use super::{CachedPack, ContextCache, PutOutcome};
use crate::context::modes::Mode;
use crate::context::pack::{ContextPack, PackKey};
use crate::ids::UserId;
use crate::store::attr::{backend, get_n, get_s, is_conditional, n, s};
use crate::store::keys::GSI1;
use crate::store::StoreError;
use crate::tools::ToolScope;
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;
use serde_json::Value;
use std::collections::HashMap;
use tracing::Instrument;

type Item = HashMap<String, AttributeValue>;

/// The partition key of the sparse index over every cache item.
pub const CACHE_ACTIVE_GSI_PK: &str = "CACHE#ACTIVE";
/// The refresh's resume point (one item; not under a user: it holds no data).
pub const SWEEP_PK: &str = "PREWARM#SWEEP";
pub const SWEEP_SK: &str = "CHECKPOINT";
/// Packs larger than this are not cached (DynamoDB items stop at 400 KB).
pub const MAX_PACK_BYTES: usize = 350_000;
/// Cache items expire (DynamoDB TTL on `ttl`) this long after their last use.
pub const CACHE_TTL_SECS: i64 = 24 * 3600;

pub fn cache_pk(user: &UserId) -> String {
    format!("U#{user}#CACHE")
}

/// `<scope>#<project or ->#<entity or ->#<entity kind or ->`: one item per focus.
pub fn cache_sk(scope: &ToolScope) -> String {
    match scope {
        ToolScope::Global => "global#-#-#-".to_string(),
        ToolScope::Project { project } => format!("project#{project}#-#-"),
        ToolScope::Entity { project, kind, entity } => {
            format!("entity#{project}#{entity}#{}", kind.map(|k| k.as_str()).unwrap_or("-"))
        }
    }
}

/// A key's sort key: its scope's, and `#<mode>` after it for a mode's pack
/// (`project#p1#-#-#audit`).
pub fn key_sk(key: &PackKey) -> String {
    match key.mode {
        Some(m) => format!("{}#{}", cache_sk(&key.scope), m.as_str()),
        None => cache_sk(&key.scope),
    }
}

/// Parses a sort key back into its key (`None` if malformed).
pub fn key_from_sk(sk: &str) -> Option<PackKey> {
    match sk.rsplit_once('#') {
        Some((scope, mode)) if sk.split('#').count() == 5 => {
            Some(PackKey { scope: scope_from_sk(scope)?, mode: Some(Mode::parse(mode)?) })
        }
        _ => Some(PackKey { scope: scope_from_sk(sk)?, mode: None }),
    }
}

/// Parses a cache sort key back into its scope (`None` if malformed).
pub fn scope_from_sk(sk: &str) -> Option<ToolScope> {
    use crate::entities::EntityKind;
    use crate::ids::{EntityId, ProjectId};
    let parts: Vec<&str> = sk.split('#').collect();
    match parts.as_slice() {
        ["global", "-", "-", "-"] => Some(ToolScope::Global),
        ["project", p, "-", "-"] => Some(ToolScope::Project { project: ProjectId::parse(*p).ok()? }),
        ["entity", p, e, k] => Some(ToolScope::Entity {
            project: ProjectId::parse(*p).ok()?,
            kind: if *k == "-" { None } else { Some(EntityKind::parse(k)?) },
            entity: EntityId::parse(*e).ok()?,
        }),
        _ => None,
    }
}

pub fn active_gsi_sk(last_used_ms: i64, user: &UserId, sk: &str) -> String {
    format!("{:013}#{user}#{sk}", last_used_ms.max(0))
}

#[derive(Clone)]
pub struct DynamoContextCache {
    client: Client,
    table: String,
}

/// One entry of the active index, as the refresh reads it (no pack data).
#[derive(Debug, Clone)]
pub struct ActiveEntry {
    pub user: UserId,
    pub scope: ToolScope,
    /// The mode of a mode's pack (the refresh leaves those alone).
    pub mode: Option<Mode>,
    pub version: u64,
    pub digest: String,
    pub last_used: i64,
    /// Its `gsi1sk`: the sweep's position.
    pub position: String,
}

/// One page of the active index.
#[derive(Debug, Clone)]
pub struct ActivePage {
    pub entries: Vec<ActiveEntry>,
    /// More entries in the range after this page.
    pub more: bool,
    /// The position of the page's last index entry (unreadable ones included):
    /// where the next page starts.
    pub last: Option<String>,
}

impl DynamoContextCache {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self { client, table: table.into() }
    }

    fn key(user: &UserId, key: &PackKey) -> Item {
        HashMap::from([("pk".to_string(), s(cache_pk(user))), ("sk".to_string(), s(key_sk(key)))])
    }

    /// The whole cache entry, or `None` (missing, expired, unreadable).
    pub async fn cached_entry(&self, user: &UserId, key: impl Into<PackKey>) -> Result<Option<CachedPack>, StoreError> {
        let key = key.into();
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(Self::key(user, &key)))
            .send()
            .instrument(tracing::debug_span!("ddb.get_item", what = "context_cache"))
            .await
            .map_err(backend)?;
        let Some(item) = out.item else { return Ok(None) };
        // TTL deletion is lazy: an expired item is a miss.
        if get_n(&item, "ttl").is_some_and(|t| t < crate::now_ms() / 1000) {
            return Ok(None);
        }
        let data = get_s(&item, "data").ok_or_else(|| StoreError::Corrupt("cache data".into()))?;
        let pack = pack_from_json(data)?;
        Ok(Some(CachedPack {
            pack,
            version: get_n(&item, "version").unwrap_or(0).max(0) as u64,
            bytes: data.len(),
            build_ms: get_n(&item, "build_ms").unwrap_or(0).max(0) as u64,
            built_at: get_n(&item, "built_at").unwrap_or(0),
            last_used: get_n(&item, "last_used").unwrap_or(0),
        }))
    }

    /// Stores `pack` with `last_used` as given (the refresh keeps the old one).
    pub async fn put_pack_used_at(
        &self,
        user: &UserId,
        key: impl Into<PackKey>,
        pack: &ContextPack,
        build_ms: u64,
        last_used: i64,
    ) -> Result<PutOutcome, StoreError> {
        let key = key.into();
        let data = serde_json::to_string(pack).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let bytes = data.len();
        if key.scope.project().is_some() && pack.version.is_none() {
            // A pack that could not be built (no project read): nothing to cache.
            return Ok(PutOutcome { bytes, stored: false });
        }
        if bytes > MAX_PACK_BYTES {
            tracing::warn!(bytes, "context pack too large to cache");
            // Never leave an older pack behind to be served instead.
            self.delete(user, &key).await?;
            return Ok(PutOutcome { bytes, stored: false });
        }
        let version = pack.version.unwrap_or(0);
        let sk = key_sk(&key);
        let mut item = Self::key(user, &key);
        item.insert("kind".into(), s("context_cache"));
        item.insert("user_id".into(), s(user.as_str()));
        item.insert("scope".into(), s(pack.scope));
        item.insert("data".into(), s(data.clone()));
        item.insert("digest".into(), s(digest(&data)));
        item.insert("version".into(), n(version));
        item.insert("bytes".into(), n(bytes));
        item.insert("build_ms".into(), n(build_ms));
        item.insert("built_at".into(), n(crate::now_ms()));
        item.insert("last_used".into(), n(last_used));
        item.insert("ttl".into(), n(last_used / 1000 + CACHE_TTL_SECS));
        item.insert("gsi1pk".into(), s(CACHE_ACTIVE_GSI_PK));
        item.insert("gsi1sk".into(), s(active_gsi_sk(last_used, user, &sk)));
        let res = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(pk) OR version <= :v")
            .expression_attribute_values(":v", n(version))
            .send()
            .instrument(tracing::debug_span!("ddb.put_item", what = "context_cache"))
            .await;
        match res {
            Ok(_) => Ok(PutOutcome { bytes, stored: true }),
            Err(e) if is_conditional(&e) => Ok(PutOutcome { bytes, stored: false }),
            Err(e) => Err(backend(e)),
        }
    }

    pub async fn delete(&self, user: &UserId, key: impl Into<PackKey>) -> Result<(), StoreError> {
        let key = key.into();
        self.client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(Self::key(user, &key)))
            .send()
            .instrument(tracing::debug_span!("ddb.delete_item", what = "context_cache"))
            .await
            .map_err(backend)?;
        Ok(())
    }

    /// Entries of the active index with `after < gsi1sk < before`, oldest
    /// first, at most `limit`, without the pack data.
    pub async fn active_page(&self, after: &str, before: &str, limit: usize) -> Result<ActivePage, StoreError> {
        let out = self
            .client
            .query()
            .table_name(&self.table)
            .index_name(GSI1)
            .key_condition_expression("gsi1pk = :pk AND gsi1sk BETWEEN :a AND :b")
            .expression_attribute_values(":pk", s(CACHE_ACTIVE_GSI_PK))
            // BETWEEN is inclusive; the bounds are adjusted to be exclusive below.
            .expression_attribute_values(":a", s(format!("{after}\u{0}")))
            .expression_attribute_values(":b", s(before))
            .projection_expression("pk, sk, gsi1sk, user_id, version, digest, last_used")
            .limit(limit.clamp(1, 1000) as i32)
            .send()
            .instrument(tracing::debug_span!("ddb.query", what = "context_cache_active"))
            .await
            .map_err(backend)?;
        let mut entries = Vec::new();
        let mut last = None;
        for item in out.items.unwrap_or_default() {
            let position = get_s(&item, "gsi1sk").unwrap_or_default().to_string();
            if position.as_str() >= before {
                continue;
            }
            last = Some(position.clone());
            let user = get_s(&item, "user_id").and_then(|u| UserId::parse(u).ok());
            let key = get_s(&item, "sk").and_then(key_from_sk);
            let (Some(user), Some(PackKey { scope, mode })) = (user, key) else {
                tracing::warn!(position, "unreadable cache index entry skipped");
                continue;
            };
            entries.push(ActiveEntry {
                user,
                scope,
                mode,
                version: get_n(&item, "version").unwrap_or(0).max(0) as u64,
                digest: get_s(&item, "digest").unwrap_or_default().to_string(),
                last_used: get_n(&item, "last_used").unwrap_or(0),
                position,
            });
        }
        Ok(ActivePage { entries, more: out.last_evaluated_key.is_some_and(|k| !k.is_empty()), last })
    }

    /// Where the last refresh stopped (a `gsi1sk`), if it did not finish.
    pub async fn sweep_checkpoint(&self) -> Result<Option<String>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("pk", s(SWEEP_PK))
            .key("sk", s(SWEEP_SK))
            .consistent_read(true)
            .send()
            .instrument(tracing::debug_span!("ddb.get_item", what = "prewarm_checkpoint"))
            .await
            .map_err(backend)?;
        Ok(out.item.as_ref().and_then(|i| get_s(i, "after")).map(str::to_string))
    }

    /// Saves the resume point (`None`: the sweep finished, start over next time).
    pub async fn set_sweep_checkpoint(&self, after: Option<&str>) -> Result<(), StoreError> {
        match after {
            Some(a) => {
                self.client
                    .put_item()
                    .table_name(&self.table)
                    .item("pk", s(SWEEP_PK))
                    .item("sk", s(SWEEP_SK))
                    .item("after", s(a))
                    .item("updated_at", n(crate::now_ms()))
                    .send()
                    .instrument(tracing::debug_span!("ddb.put_item", what = "prewarm_checkpoint"))
                    .await
                    .map_err(backend)?;
            }
            None => {
                self.client
                    .delete_item()
                    .table_name(&self.table)
                    .key("pk", s(SWEEP_PK))
                    .key("sk", s(SWEEP_SK))
                    .send()
                    .instrument(tracing::debug_span!("ddb.delete_item", what = "prewarm_checkpoint"))
                    .await
                    .map_err(backend)?;
            }
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl ContextCache for DynamoContextCache {
    async fn cached(&self, user: &UserId, key: &PackKey) -> Result<Option<CachedPack>, StoreError> {
        self.cached_entry(user, key).await
    }

    async fn put(
        &self,
        user: &UserId,
        key: &PackKey,
        pack: &ContextPack,
        build_ms: u64,
    ) -> Result<PutOutcome, StoreError> {
        self.put_pack_used_at(user, key, pack, build_ms, crate::now_ms()).await
    }

    async fn touch_key(&self, user: &UserId, key: &PackKey) -> Result<(), StoreError> {
        let now = crate::now_ms();
        let res = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(Self::key(user, key)))
            .update_expression("SET last_used = :u, gsi1sk = :g, #ttl = :t")
            .condition_expression("attribute_exists(pk)")
            .expression_attribute_names("#ttl", "ttl")
            .expression_attribute_values(":u", n(now))
            .expression_attribute_values(":g", s(active_gsi_sk(now, user, &key_sk(key))))
            .expression_attribute_values(":t", n(now / 1000 + CACHE_TTL_SECS))
            .send()
            .instrument(tracing::debug_span!("ddb.update_item", what = "context_cache_touch"))
            .await;
        match res {
            Ok(_) => Ok(()),
            Err(e) if is_conditional(&e) => Ok(()),
            Err(e) => Err(backend(e)),
        }
    }
}

/// A pack read back from its JSON (`ContextPack::scope` is a `&'static str`,
/// so it is matched rather than deserialized).
pub fn pack_from_json(data: &str) -> Result<ContextPack, StoreError> {
    let corrupt = |what: &str| StoreError::Corrupt(format!("cached pack: {what}"));
    let mut v: serde_json::Map<String, Value> = serde_json::from_str(data).map_err(|e| corrupt(&e.to_string()))?;
    let scope = match v.get("scope").and_then(Value::as_str) {
        Some("global") => "global",
        Some("project") => "project",
        Some("entity") => "entity",
        _ => return Err(corrupt("scope")),
    };
    let list = |v: Option<Value>| match v {
        Some(Value::Array(a)) => a,
        _ => Vec::new(),
    };
    Ok(ContextPack {
        scope,
        project: v.remove("project"),
        doc_structure: v.remove("doc_structure"),
        entity: v.remove("entity"),
        linked: list(v.remove("linked")),
        projects: list(v.remove("projects")),
        entities: list(v.remove("entities")),
        version: v.get("version").and_then(Value::as_u64),
        mode: match v.remove("mode") {
            Some(m) => Some(serde_json::from_value(m).map_err(|e| corrupt(&format!("mode: {e}")))?),
            None => None,
        },
    })
}

/// A stable digest of a serialized pack (FNV-1a, 64 bits): enough to tell a
/// changed global pack from an unchanged one.
pub fn digest(data: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in data.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entities::EntityKind;
    use crate::ids::{EntityId, ProjectId};
    use serde_json::json;

    #[test]
    fn sort_keys_round_trip_for_every_scope() {
        let project = ProjectId::new();
        let entity = EntityId::new();
        for scope in [
            ToolScope::Global,
            ToolScope::Project { project: project.clone() },
            ToolScope::Entity { project: project.clone(), kind: None, entity: entity.clone() },
            ToolScope::Entity { project: project.clone(), kind: Some(EntityKind::Task), entity: entity.clone() },
        ] {
            assert_eq!(scope_from_sk(&cache_sk(&scope)), Some(scope.clone()));
        }
        assert_eq!(scope_from_sk("project#x"), None);
    }

    #[test]
    fn packs_round_trip_through_json() {
        let pack = ContextPack {
            scope: "project",
            project: Some(json!({"id": "p", "name": "Launch"})),
            doc_structure: Some(json!({"version": 3, "root": []})),
            version: Some(7),
            ..Default::default()
        };
        let data = serde_json::to_string(&pack).unwrap();
        assert_eq!(pack_from_json(&data).unwrap(), pack);
        assert!(pack_from_json(r#"{"scope":"other"}"#).is_err());
        assert_ne!(digest(&data), digest("{}"));
    }

    #[test]
    fn the_active_index_orders_by_last_use() {
        let u = UserId::parse("alice").unwrap();
        assert!(active_gsi_sk(999, &u, "a") < active_gsi_sk(1000, &u, "a"));
    }
}
