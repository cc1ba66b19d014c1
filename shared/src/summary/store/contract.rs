//! The [`SummaryStore`] contract, written once and run against both
//! implementations: the in-memory twins in `cargo test -p shared --lib`, the
//! DynamoDB stores against DynamoDB Local (`tests/tests/contract_features.rs`,
//! through [`crate::summary_store_contract`]). The agent-state store is part
//! of the world: it settles the deltas a summary leaves pending.
//!
//! Not covered here: `running_turn`, which reads the turn lease on the
//! session item (the sessions store's contract owns leases).

use super::{Backlog, CommitOutcome, Rejections, SessionSummary, SummaryStore};
use crate::agent_state::store::contract::state;
use crate::agent_state::store::{AgentStateStore, SaveError};
use crate::ids::{SessionId, UserId};
use crate::store::gate::{fresh_user, SessionFixture};
use crate::store::StoreError;

/// Version `version` of a summary; `pending`: its deltas are still to apply.
pub fn summary(version: u64, pending: bool) -> SessionSummary {
    SessionSummary {
        version,
        text: format!("summary {version}"),
        through_seq: version * 10,
        source_last_seq: version * 10 + 2,
        model: "m".into(),
        created_at: 1,
        kept_message_ids: vec![],
        dropped_message_ids: vec![],
        agent_state_item_updates: vec![],
        agent_state_updates: serde_json::Value::Null,
        deltas_pending: pending,
    }
}

/// What a world hands each case.
pub struct World<'a> {
    pub summaries: &'a dyn SummaryStore,
    pub states: &'a dyn AgentStateStore,
    pub sessions: &'a dyn SessionFixture,
}

impl World<'_> {
    async fn open(&self) -> (UserId, SessionId) {
        let (user, session) = (fresh_user(), SessionId::new());
        self.sessions.open(&user, &session).await;
        (user, session)
    }
}

pub async fn commit_is_compare_and_set_on_the_version(w: World<'_>) {
    let (u, s) = w.open().await;
    let store = w.summaries;
    assert!(store.current(&u, &s).await.unwrap().is_none());
    assert_eq!(store.commit(&u, &s, &summary(1, false)).await.unwrap(), CommitOutcome::Committed);
    for (v, why) in [(1, "a version commits once"), (3, "no version is skipped")] {
        assert_eq!(store.commit(&u, &s, &summary(v, false)).await.unwrap(), CommitOutcome::Superseded, "{why}");
    }
    assert_eq!(store.commit(&u, &s, &summary(2, false)).await.unwrap(), CommitOutcome::Committed);
    assert_eq!(store.current(&u, &s).await.unwrap(), Some(summary(2, false)));
    assert_eq!(store.versions(&u, &s).await.unwrap(), vec![summary(1, false), summary(2, false)], "oldest first");
}

pub async fn a_session_being_deleted_takes_no_summary(w: World<'_>) {
    let (u, s) = w.open().await;
    w.sessions.begin_delete(&u, &s).await;
    assert!(matches!(w.summaries.commit(&u, &s, &summary(1, false)).await, Err(StoreError::NotFound)));
    let backlog = Backlog { after_seq: 0, last_seq: 4 };
    assert!(matches!(w.summaries.record_rejection(&u, &s, backlog, "no").await, Err(StoreError::NotFound)));
    assert!(w.summaries.current(&u, &s).await.unwrap().is_none());
    assert!(w.summaries.versions(&u, &s).await.unwrap().is_empty());
    assert!(w.summaries.rejections(&u, &s).await.unwrap().is_none(), "the count was removed again");
    let never = SessionId::new();
    assert!(matches!(w.summaries.commit(&u, &never, &summary(1, false)).await, Err(StoreError::NotFound)));
}

pub async fn pending_deltas_hold_the_next_version_until_settled(w: World<'_>) {
    let (u, s) = w.open().await;
    let store = w.summaries;
    store.commit(&u, &s, &summary(1, true)).await.unwrap();
    assert!(store.current(&u, &s).await.unwrap().unwrap().deltas_pending);
    assert!(!store.versions(&u, &s).await.unwrap()[0].deltas_pending, "audit copies carry no mark");
    assert_eq!(store.commit(&u, &s, &summary(2, false)).await.unwrap(), CommitOutcome::Superseded);
    assert!(!store.settle(&u, &s, 2).await.unwrap(), "not the current version");
    assert!(store.settle(&u, &s, 1).await.unwrap());
    assert!(!store.settle(&u, &s, 1).await.unwrap(), "settled once");
    assert!(!store.current(&u, &s).await.unwrap().unwrap().deltas_pending);
    assert_eq!(store.commit(&u, &s, &summary(2, false)).await.unwrap(), CommitOutcome::Committed);
}

pub async fn deltas_apply_to_the_agent_state_exactly_once(w: World<'_>) {
    let (u, s) = w.open().await;
    w.summaries.commit(&u, &s, &summary(1, true)).await.unwrap();
    let stale = w.states.save_settling(&u, &s, &state(&s, 1), 4, 1).await;
    assert!(matches!(stale, Err(SaveError::Conflict)), "{stale:?}");
    assert!(w.summaries.current(&u, &s).await.unwrap().unwrap().deltas_pending, "a conflict settles nothing");
    assert_eq!(w.states.save_settling(&u, &s, &state(&s, 1), 0, 1).await.unwrap(), Some(1));
    assert!(!w.summaries.current(&u, &s).await.unwrap().unwrap().deltas_pending);
    assert_eq!(w.states.save_settling(&u, &s, &state(&s, 2), 1, 1).await.unwrap(), None, "applied already");
    assert_eq!(w.states.load(&u, &s).await.unwrap(), Some((state(&s, 1), 1)));
}

pub async fn rejections_are_counted_per_backlog(w: World<'_>) {
    let (u, s) = w.open().await;
    let store = w.summaries;
    let (first, later) = (Backlog { after_seq: 0, last_seq: 4 }, Backlog { after_seq: 0, last_seq: 6 });
    assert!(store.rejections(&u, &s).await.unwrap().is_none());
    assert_eq!(store.record_rejection(&u, &s, first, "not json").await.unwrap(), 1);
    assert_eq!(store.record_rejection(&u, &s, first, "no text").await.unwrap(), 2);
    let seen = store.rejections(&u, &s).await.unwrap();
    assert_eq!(seen, Some(Rejections { backlog: first, attempts: 2, reason: "no text".into() }), "the last reason");
    assert_eq!(store.record_rejection(&u, &s, later, "again").await.unwrap(), 1, "a new backlog starts over");
    let long = "x".repeat(5000);
    store.record_rejection(&u, &s, later, &long).await.unwrap();
    assert_eq!(store.rejections(&u, &s).await.unwrap().unwrap().reason.len(), 1000, "reasons are cut");
}

pub async fn summaries_are_the_sessions_own(w: World<'_>) {
    let (u, s) = w.open().await;
    w.summaries.commit(&u, &s, &summary(1, false)).await.unwrap();
    w.summaries.record_rejection(&u, &s, Backlog { after_seq: 10, last_seq: 12 }, "no").await.unwrap();
    let other = fresh_user();
    w.sessions.open(&other, &s).await;
    assert!(w.summaries.current(&other, &s).await.unwrap().is_none());
    assert!(w.summaries.versions(&other, &s).await.unwrap().is_empty());
    assert!(w.summaries.rejections(&other, &s).await.unwrap().is_none());
    assert_eq!(w.summaries.commit(&other, &s, &summary(1, false)).await.unwrap(), CommitOutcome::Committed);
}

/// One `#[tokio::test]` per contract case, each on a fresh world from
/// `$setup().await`: `(impl SummaryStore, impl AgentStateStore, impl SessionFixture)`
/// over the same sessions.
#[macro_export]
macro_rules! summary_store_contract {
    ($setup:path) => {
        #[tokio::test]
        async fn commit_is_compare_and_set_on_the_version() {
            let (summaries, states, sessions) = $setup().await;
            let world =
                $crate::summary::store::contract::World { summaries: &summaries, states: &states, sessions: &sessions };
            $crate::summary::store::contract::commit_is_compare_and_set_on_the_version(world).await;
        }
        #[tokio::test]
        async fn a_session_being_deleted_takes_no_summary() {
            let (summaries, states, sessions) = $setup().await;
            let world =
                $crate::summary::store::contract::World { summaries: &summaries, states: &states, sessions: &sessions };
            $crate::summary::store::contract::a_session_being_deleted_takes_no_summary(world).await;
        }
        #[tokio::test]
        async fn pending_deltas_hold_the_next_version_until_settled() {
            let (summaries, states, sessions) = $setup().await;
            let world =
                $crate::summary::store::contract::World { summaries: &summaries, states: &states, sessions: &sessions };
            $crate::summary::store::contract::pending_deltas_hold_the_next_version_until_settled(world).await;
        }
        #[tokio::test]
        async fn deltas_apply_to_the_agent_state_exactly_once() {
            let (summaries, states, sessions) = $setup().await;
            let world =
                $crate::summary::store::contract::World { summaries: &summaries, states: &states, sessions: &sessions };
            $crate::summary::store::contract::deltas_apply_to_the_agent_state_exactly_once(world).await;
        }
        #[tokio::test]
        async fn rejections_are_counted_per_backlog() {
            let (summaries, states, sessions) = $setup().await;
            let world =
                $crate::summary::store::contract::World { summaries: &summaries, states: &states, sessions: &sessions };
            $crate::summary::store::contract::rejections_are_counted_per_backlog(world).await;
        }
        #[tokio::test]
        async fn summaries_are_the_sessions_own() {
            let (summaries, states, sessions) = $setup().await;
            let world =
                $crate::summary::store::contract::World { summaries: &summaries, states: &states, sessions: &sessions };
            $crate::summary::store::contract::summaries_are_the_sessions_own(world).await;
        }
    };
}

#[cfg(test)]
mod memory {
    use crate::agent_state::store::MemoryAgentStateStore;
    use crate::store::gate::MemorySessions;
    use crate::summary::store::MemorySummaryStore;

    async fn world() -> (MemorySummaryStore, MemoryAgentStateStore, MemorySessions) {
        let sessions = MemorySessions::default();
        let states = MemoryAgentStateStore::new(sessions.clone());
        (MemorySummaryStore::new(sessions.clone(), states.summary_marks()), states, sessions)
    }

    crate::summary_store_contract!(world);
}
