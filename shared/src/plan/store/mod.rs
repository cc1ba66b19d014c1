//! Plan records: the [`PlanStore`] trait, [`DynamoPlanStore`] and the in-memory
//! [`MemoryPlanStore`], which pass one contract suite (`contract`, under the
//! `testkit` feature). In DynamoDB: one item per plan under the session's partition,
//! `sk = PLAN#<plan id>` (UUID v7, so plans sort by creation), the
//! [`PlanRecord`] as JSON in `data` beside a `version`.
//!
//! Contract: [`PlanStore::save`] is a compare-and-set on `version` (0: the item
//! must not exist), so two writers of one plan cannot both win; a plan saved
//! to a session that is gone or being deleted is removed again and the save
//! fails with `NotFound` (checked after the write, as the agent state does:
//! see `attr::session_alive`). [`PlanStore::create`] stores a new plan and
//! marks the plans it replaces `superseded` in one transaction, each replaced
//! one compare-and-set on its version and the session checked in the same
//! transaction: either the new plan is the session's one current plan, or
//! nothing changed. Deleting the session removes its plans with the rest of
//! the partition.

#[cfg(any(test, feature = "testkit"))]
pub mod contract;
mod dynamo;
mod memory;

pub use dynamo::DynamoPlanStore;
pub use memory::MemoryPlanStore;

use crate::ids::{SessionId, UserId};
use crate::plan::PlanRecord;
use crate::store::StoreError;

/// How many of the newest plans [`PlanStore::create`]'s caller looks through
/// for open ones to supersede. Every create supersedes all the open plans it
/// sees, so since plans are superseded (issue 25) a session has at most one
/// open plan and this only matters for sessions from before.
pub const OPEN_LOOKBACK: usize = 10;

#[async_trait::async_trait]
pub trait PlanStore: Send + Sync {
    /// Writes `plan` if its stored version is `expected_version` (0: new).
    /// Returns the new version; `LeaseLost` when someone else saved first.
    async fn save(
        &self,
        user: &UserId,
        session: &SessionId,
        plan: &PlanRecord,
        expected_version: u64,
    ) -> Result<u64, StoreError>;

    /// Stores the new plan `plan` (version 1) and marks each of `replaced`
    /// (a plan and the version it was read at) `superseded` by it, in one
    /// transaction with a check that the session is alive. Returns the new
    /// plan's version. `LeaseLost` when a replaced plan changed since it was
    /// read (or the new one exists); `NotFound` when the session is gone or
    /// being deleted. Nothing is written then.
    async fn create(
        &self,
        user: &UserId,
        session: &SessionId,
        plan: &PlanRecord,
        replaced: &[(PlanRecord, u64)],
    ) -> Result<u64, StoreError>;

    /// A plan and its version (consistent read).
    async fn load(
        &self,
        user: &UserId,
        session: &SessionId,
        plan_id: &str,
    ) -> Result<Option<(PlanRecord, u64)>, StoreError>;

    /// The session's newest plans, newest first, at most `limit` (consistent):
    /// every status, `superseded` ones included (the plan history).
    async fn list(
        &self,
        user: &UserId,
        session: &SessionId,
        limit: usize,
    ) -> Result<Vec<(PlanRecord, u64)>, StoreError>;

    /// The session's current plan: its newest, whatever its status. A
    /// decision that names no plan acts on this one only, and only while it is
    /// open ([`crate::plan::PlanStatus::is_open`]).
    async fn current(&self, user: &UserId, session: &SessionId) -> Result<Option<(PlanRecord, u64)>, StoreError> {
        Ok(self.list(user, session, 1).await?.into_iter().next())
    }
}
