//! The session's agent state: the [`AgentStateStore`] trait,
//! [`DynamoAgentStateStore`] and the in-memory [`MemoryAgentStateStore`], which
//! pass one contract suite (`contract`, under the `testkit` feature). In
//! DynamoDB: one item, `sk=AGENT_STATE`, under
//! the session's partition, with its version next to it.
//!
//! Contract: [`AgentStateStore::save`] is a compare-and-set, a conditional
//! PutItem: it writes only if the stored version is `expected_version` (or,
//! for 0, if there is no item yet), and the stored version becomes
//! `expected_version + 1`. Two writers that loaded the same version cannot
//! both win: the loser gets [`SaveError::Conflict`] and nothing is written, so
//! it reloads, reapplies its (deterministic) update and saves again. Never
//! last-writer-wins. [`AgentStateStore::clear`] deletes the item (session
//! close or an explicit request); deleting a session removes it with the rest
//! of the partition, and a save to a session that is gone or being deleted
//! fails with `NotFound` and leaves nothing (so a turn still running when its
//! session is deleted cannot bring its state back).
//! [`AgentStateStore::save_settling`] is the same compare-and-set, made in one
//! transaction with settling a summary's pending deltas (see
//! [`crate::summary::store`]): what applies them exactly once.

#[cfg(any(test, feature = "testkit"))]
pub mod contract;
mod dynamo;
mod memory;

pub use dynamo::DynamoAgentStateStore;
pub(crate) use dynamo::{from_item, settle_update, DELTAS_PENDING};
pub use memory::{MemoryAgentStateStore, SummaryMarks};

use crate::agent_state::{AgentState, DeltaError};
use crate::ids::{SessionId, UserId};
use crate::store::StoreError;

/// Why a save wrote nothing.
#[derive(Debug, thiserror::Error)]
pub enum SaveError {
    /// The stored version is not the expected one: someone saved first.
    #[error("the agent state was changed concurrently")]
    Conflict,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Why [`update`] wrote nothing.
#[derive(Debug, thiserror::Error)]
pub enum UpdateError {
    /// The change itself was refused (nothing written).
    #[error(transparent)]
    Delta(#[from] DeltaError),
    /// Still conflicting after every attempt.
    #[error("the agent state kept changing concurrently")]
    Conflict,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Load, change, compare-and-set save; on a conflict, reload and apply
/// `change` again (it must be deterministic over the state it is given), up
/// to `attempts` times. A missing state starts as `AgentState::new(session)`.
/// Returns the saved state and its version.
pub async fn update<S, F>(
    store: &S,
    user: &UserId,
    session: &SessionId,
    attempts: usize,
    mut change: F,
) -> Result<(AgentState, u64), UpdateError>
where
    S: AgentStateStore + ?Sized,
    F: FnMut(&mut AgentState) -> Result<(), DeltaError>,
{
    for _ in 0..attempts.max(1) {
        let (mut state, version) =
            store.load(user, session).await?.unwrap_or_else(|| (AgentState::new(session.to_string()), 0));
        change(&mut state)?;
        match store.save(user, session, &state, version).await {
            Ok(v) => return Ok((state, v)),
            Err(SaveError::Conflict) => continue,
            Err(SaveError::Store(e)) => return Err(e.into()),
        }
    }
    Err(UpdateError::Conflict)
}

#[async_trait::async_trait]
pub trait AgentStateStore: Send + Sync {
    /// The state and its version (consistent read); `None` when never saved
    /// or cleared (save it with `expected_version` 0).
    async fn load(&self, user: &UserId, session: &SessionId) -> Result<Option<(AgentState, u64)>, StoreError>;

    /// Compare-and-set: writes `state` if the stored version is
    /// `expected_version` (0: no item). Returns the new version. `NotFound`
    /// (nothing written) when the session is gone or being deleted.
    async fn save(
        &self,
        user: &UserId,
        session: &SessionId,
        state: &AgentState,
        expected_version: u64,
    ) -> Result<u64, SaveError>;

    /// Deletes the state (a no-op when there is none).
    async fn clear(&self, user: &UserId, session: &SessionId) -> Result<(), StoreError>;

    /// [`save`](Self::save) and, in the same transaction, settle the pending
    /// agent-state deltas of summary version `summary_version` (`state` is
    /// the state with them applied). `Ok(None)`: they were not pending any
    /// more (settled by someone else), nothing written. `Conflict`: the
    /// state changed; reload, reapply, retry.
    async fn save_settling(
        &self,
        user: &UserId,
        session: &SessionId,
        state: &AgentState,
        expected_version: u64,
        summary_version: u64,
    ) -> Result<Option<u64>, SaveError>;
}
