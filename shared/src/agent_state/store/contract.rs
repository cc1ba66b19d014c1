//! The [`AgentStateStore`] contract, written once and run against both
//! implementations: the in-memory twin in `cargo test -p shared --lib`, the
//! DynamoDB store against DynamoDB Local (`tests/tests/contract_features.rs`,
//! through [`crate::agent_state_store_contract`]). Settling a summary's
//! deltas is in the summary store's contract, which has both stores.

use super::{update, AgentStateStore, SaveError};
use crate::agent_state::AgentState;
use crate::ids::{SessionId, UserId};
use crate::store::gate::{fresh_user, SessionFixture};
use crate::store::StoreError;

/// A state told apart from others by `n`.
pub fn state(session: &SessionId, n: i64) -> AgentState {
    AgentState { last_summarized_at: Some(n), ..AgentState::new(session.to_string()) }
}

async fn open(sessions: &dyn SessionFixture) -> (UserId, SessionId) {
    let (user, session) = (fresh_user(), SessionId::new());
    sessions.open(&user, &session).await;
    (user, session)
}

pub async fn save_is_compare_and_set(store: &dyn AgentStateStore, sessions: &dyn SessionFixture) {
    let (u, s) = open(sessions).await;
    assert!(store.load(&u, &s).await.unwrap().is_none());
    assert_eq!(store.save(&u, &s, &state(&s, 1), 0).await.unwrap(), 1);
    assert!(matches!(store.save(&u, &s, &state(&s, 2), 0).await, Err(SaveError::Conflict)), "not new any more");
    assert_eq!(store.save(&u, &s, &state(&s, 3), 1).await.unwrap(), 2);
    for stale in [1, 7] {
        assert!(matches!(store.save(&u, &s, &state(&s, 4), stale).await, Err(SaveError::Conflict)), "{stale}");
    }
    assert_eq!(store.load(&u, &s).await.unwrap(), Some((state(&s, 3), 2)), "the winner's state, never the loser's");
}

pub async fn clear_forgets_the_state(store: &dyn AgentStateStore, sessions: &dyn SessionFixture) {
    let (u, s) = open(sessions).await;
    store.clear(&u, &s).await.unwrap();
    store.save(&u, &s, &state(&s, 1), 0).await.unwrap();
    store.clear(&u, &s).await.unwrap();
    assert!(store.load(&u, &s).await.unwrap().is_none());
    assert_eq!(store.save(&u, &s, &state(&s, 2), 0).await.unwrap(), 1, "starts again from nothing");
}

pub async fn a_session_being_deleted_gets_no_state(store: &dyn AgentStateStore, sessions: &dyn SessionFixture) {
    let (u, s) = open(sessions).await;
    store.save(&u, &s, &state(&s, 1), 0).await.unwrap();
    sessions.begin_delete(&u, &s).await;
    let r = store.save(&u, &s, &state(&s, 2), 1).await;
    assert!(matches!(r, Err(SaveError::Store(StoreError::NotFound))), "{r:?}");
    assert!(store.load(&u, &s).await.unwrap().is_none(), "nothing left behind");
    let never = SessionId::new();
    let r = store.save(&u, &never, &state(&never, 1), 0).await;
    assert!(matches!(r, Err(SaveError::Store(StoreError::NotFound))), "{r:?}");
    assert!(store.load(&u, &never).await.unwrap().is_none());
}

pub async fn states_are_the_sessions_own(store: &dyn AgentStateStore, sessions: &dyn SessionFixture) {
    let (u, s) = open(sessions).await;
    store.save(&u, &s, &state(&s, 1), 0).await.unwrap();
    let other = fresh_user();
    sessions.open(&other, &s).await;
    assert!(store.load(&other, &s).await.unwrap().is_none(), "another user's state is not there");
    assert_eq!(store.save(&other, &s, &state(&s, 9), 0).await.unwrap(), 1, "and does not version theirs");
    assert_eq!(store.load(&u, &s).await.unwrap(), Some((state(&s, 1), 1)));
    assert!(store.load(&u, &SessionId::new()).await.unwrap().is_none());
}

pub async fn update_starts_from_a_new_state_and_saves_it(store: &dyn AgentStateStore, sessions: &dyn SessionFixture) {
    let (u, s) = open(sessions).await;
    let mut calls = 0;
    let (saved, v) = update(store, &u, &s, 3, |st| {
        calls += 1;
        st.last_summarized_at = Some(st.last_summarized_at.unwrap_or(0) + 1);
        Ok(())
    })
    .await
    .unwrap();
    assert_eq!((saved.last_summarized_at, v, calls), (Some(1), 1, 1));
    assert_eq!(store.load(&u, &s).await.unwrap(), Some((saved, 1)));
}

pub async fn settling_without_pending_deltas_writes_nothing(
    store: &dyn AgentStateStore,
    sessions: &dyn SessionFixture,
) {
    let (u, s) = open(sessions).await;
    assert_eq!(store.save_settling(&u, &s, &state(&s, 1), 0, 1).await.unwrap(), None);
    assert!(store.load(&u, &s).await.unwrap().is_none());
}

/// One `#[tokio::test]` per contract case, each on a fresh world from
/// `$setup().await` (a `(impl AgentStateStore, impl SessionFixture)`).
#[macro_export]
macro_rules! agent_state_store_contract {
    ($setup:path) => {
        #[tokio::test]
        async fn save_is_compare_and_set() {
            let (store, sessions) = $setup().await;
            $crate::agent_state::store::contract::save_is_compare_and_set(&store, &sessions).await;
        }
        #[tokio::test]
        async fn clear_forgets_the_state() {
            let (store, sessions) = $setup().await;
            $crate::agent_state::store::contract::clear_forgets_the_state(&store, &sessions).await;
        }
        #[tokio::test]
        async fn a_session_being_deleted_gets_no_state() {
            let (store, sessions) = $setup().await;
            $crate::agent_state::store::contract::a_session_being_deleted_gets_no_state(&store, &sessions).await;
        }
        #[tokio::test]
        async fn states_are_the_sessions_own() {
            let (store, sessions) = $setup().await;
            $crate::agent_state::store::contract::states_are_the_sessions_own(&store, &sessions).await;
        }
        #[tokio::test]
        async fn update_starts_from_a_new_state_and_saves_it() {
            let (store, sessions) = $setup().await;
            $crate::agent_state::store::contract::update_starts_from_a_new_state_and_saves_it(&store, &sessions).await;
        }
        #[tokio::test]
        async fn settling_without_pending_deltas_writes_nothing() {
            let (store, sessions) = $setup().await;
            $crate::agent_state::store::contract::settling_without_pending_deltas_writes_nothing(&store, &sessions)
                .await;
        }
    };
}

#[cfg(test)]
mod memory {
    use crate::agent_state::store::MemoryAgentStateStore;
    use crate::store::gate::MemorySessions;

    async fn world() -> (MemoryAgentStateStore, MemorySessions) {
        let sessions = MemorySessions::default();
        (MemoryAgentStateStore::new(sessions.clone()), sessions)
    }

    crate::agent_state_store_contract!(world);
}
