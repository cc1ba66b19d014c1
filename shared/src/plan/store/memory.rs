//! [`PlanStore`] in memory: the DynamoDB store's semantics (compare-and-set
//! on versions, supersede in one step, a session being deleted takes no
//! plan) without a table, for unit tests of plan logic.

use super::PlanStore;
use crate::ids::{SessionId, UserId};
use crate::plan::{PlanRecord, PlanStatus};
use crate::store::gate::SessionGate;
use crate::store::StoreError;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

/// One session's plans by id (UUID v7 ids sort by creation, as their keys do).
type Plans = BTreeMap<String, (PlanRecord, u64)>;

#[derive(Clone)]
pub struct MemoryPlanStore {
    plans: Arc<Mutex<HashMap<(UserId, SessionId), Plans>>>,
    sessions: Arc<dyn SessionGate>,
}

impl MemoryPlanStore {
    pub fn new(sessions: impl SessionGate + 'static) -> Self {
        Self { plans: Arc::default(), sessions: Arc::new(sessions) }
    }

    fn with<T>(&self, user: &UserId, session: &SessionId, f: impl FnOnce(&mut Plans) -> T) -> T {
        let mut all = self.plans.lock().expect("plans lock");
        f(all.entry((user.clone(), session.clone())).or_default())
    }
}

/// Whether `plan` may be written over `expected` (0: it must be new).
fn version_matches(plans: &Plans, id: &str, expected: u64) -> bool {
    plans.get(id).map(|(_, v)| *v) == (expected != 0).then_some(expected)
}

#[async_trait::async_trait]
impl PlanStore for MemoryPlanStore {
    async fn save(
        &self,
        user: &UserId,
        session: &SessionId,
        plan: &PlanRecord,
        expected_version: u64,
    ) -> Result<u64, StoreError> {
        let alive = self.sessions.alive(user, session);
        self.with(user, session, |plans| {
            if !version_matches(plans, &plan.id, expected_version) {
                return Err(StoreError::LeaseLost);
            }
            if !alive {
                // The DynamoDB store writes, sees the delete, and removes the item.
                plans.remove(&plan.id);
                return Err(StoreError::NotFound);
            }
            plans.insert(plan.id.clone(), (plan.clone(), expected_version + 1));
            Ok(expected_version + 1)
        })
    }

    async fn create(
        &self,
        user: &UserId,
        session: &SessionId,
        plan: &PlanRecord,
        replaced: &[(PlanRecord, u64)],
    ) -> Result<u64, StoreError> {
        if !self.sessions.alive(user, session) {
            return Err(StoreError::NotFound);
        }
        self.with(user, session, |plans| {
            let conflict =
                plans.contains_key(&plan.id) || replaced.iter().any(|(old, v)| !version_matches(plans, &old.id, *v));
            if conflict {
                return Err(StoreError::LeaseLost);
            }
            for (old, version) in replaced {
                let mut old = old.clone();
                old.status = PlanStatus::Superseded;
                old.superseded_by = Some(plan.id.clone());
                old.updated_at = crate::now_ms();
                plans.insert(old.id.clone(), (old, version + 1));
            }
            plans.insert(plan.id.clone(), (plan.clone(), 1));
            Ok(1)
        })
    }

    async fn load(
        &self,
        user: &UserId,
        session: &SessionId,
        plan_id: &str,
    ) -> Result<Option<(PlanRecord, u64)>, StoreError> {
        Ok(self.with(user, session, |plans| plans.get(plan_id).cloned()))
    }

    async fn list(
        &self,
        user: &UserId,
        session: &SessionId,
        limit: usize,
    ) -> Result<Vec<(PlanRecord, u64)>, StoreError> {
        Ok(self.with(user, session, |plans| plans.values().rev().take(limit.clamp(1, 100)).cloned().collect()))
    }
}
