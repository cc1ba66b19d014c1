//! The [`PlanStore`] contract, written once and run against both
//! implementations: the in-memory twin in `cargo test -p shared --lib`, the
//! DynamoDB store against DynamoDB Local (`tests/tests/contract_features.rs`,
//! through [`crate::plan_store_contract`]). Each case takes a store and the
//! [`SessionFixture`] of the same world, and uses a user of its own.

use super::PlanStore;
use crate::ids::{SessionId, TurnId, UserId};
use crate::plan::*;
use crate::store::gate::{fresh_user, SessionFixture};
use crate::store::StoreError;

/// A valid one-step plan; `n` orders plans (ids sort by it, as v7 ids do by time).
pub fn record(n: u32) -> PlanRecord {
    let step = PlanStep {
        id: "a".into(),
        title: "look around".into(),
        intent: StepIntent::Research,
        executor: ExecutorKind::Research,
        tools: vec![],
        inputs: vec![],
        outputs: vec![],
    };
    let stage = PlanStage { id: "s".into(), name: "only".into(), mode: StageMode::Sequence, steps: vec![step] };
    let plan = AgentPlan { goal: "goal".into(), stages: vec![stage], constraints: vec![], mode: PlanMode::DraftOnly };
    // The step names no tool, so every tool check passes.
    let valid = validate(plan, |_| crate::plan::StepTool::Allowed).expect("a valid plan");
    let mut rec = PlanRecord::new(&valid, TurnId::new());
    rec.id = format!("{n:04}-{}", uuid::Uuid::new_v4().simple());
    rec
}

async fn open(sessions: &dyn SessionFixture) -> (UserId, SessionId) {
    let (user, session) = (fresh_user(), SessionId::new());
    sessions.open(&user, &session).await;
    (user, session)
}

pub async fn save_is_compare_and_set(store: &dyn PlanStore, sessions: &dyn SessionFixture) {
    let (u, s) = open(sessions).await;
    let mut p = record(1);
    assert_eq!(store.save(&u, &s, &p, 0).await.unwrap(), 1);
    assert!(matches!(store.save(&u, &s, &p, 0).await, Err(StoreError::LeaseLost)), "a second create loses");
    p.status = PlanStatus::Running;
    assert_eq!(store.save(&u, &s, &p, 1).await.unwrap(), 2);
    assert!(matches!(store.save(&u, &s, &p, 1).await, Err(StoreError::LeaseLost)), "a stale version loses");
    assert!(matches!(store.save(&u, &s, &p, 5).await, Err(StoreError::LeaseLost)), "a future version loses");
    let (loaded, v) = store.load(&u, &s, &p.id).await.unwrap().expect("saved");
    assert_eq!((loaded, v), (p, 2));
}

pub async fn a_missing_plan_is_none(store: &dyn PlanStore, sessions: &dyn SessionFixture) {
    let (u, s) = open(sessions).await;
    assert!(store.load(&u, &s, "0001-nothing").await.unwrap().is_none());
    assert!(store.list(&u, &s, 10).await.unwrap().is_empty());
    assert!(store.current(&u, &s).await.unwrap().is_none());
}

pub async fn a_session_being_deleted_takes_no_plan(store: &dyn PlanStore, sessions: &dyn SessionFixture) {
    let (u, s) = open(sessions).await;
    let p = record(1);
    store.save(&u, &s, &p, 0).await.unwrap();
    sessions.begin_delete(&u, &s).await;
    assert!(matches!(store.save(&u, &s, &p, 1).await, Err(StoreError::NotFound)));
    assert!(matches!(store.create(&u, &s, &record(2), &[]).await, Err(StoreError::NotFound)));
    let left: Vec<String> = store.list(&u, &s, 10).await.unwrap().into_iter().map(|(p, _)| p.id).collect();
    assert!(!left.iter().any(|id| id.starts_with("0002")), "the refused create wrote nothing: {left:?}");
    // A session never opened is no better.
    let never = SessionId::new();
    assert!(matches!(store.save(&u, &never, &record(3), 0).await, Err(StoreError::NotFound)));
    assert!(store.list(&u, &never, 10).await.unwrap().is_empty());
}

pub async fn create_supersedes_the_replaced_plans_at_once(store: &dyn PlanStore, sessions: &dyn SessionFixture) {
    let (u, s) = open(sessions).await;
    let (first, second) = (record(1), record(2));
    assert_eq!(store.create(&u, &s, &first, &[]).await.unwrap(), 1);
    assert_eq!(store.create(&u, &s, &second, &[(first.clone(), 1)]).await.unwrap(), 1);
    let (old, v) = store.load(&u, &s, &first.id).await.unwrap().expect("kept as history");
    assert_eq!((old.status, old.superseded_by.as_deref(), v), (PlanStatus::Superseded, Some(second.id.as_str()), 2));
    let listed: Vec<String> = store.list(&u, &s, 10).await.unwrap().into_iter().map(|(p, _)| p.id).collect();
    assert_eq!(listed, vec![second.id.clone(), first.id.clone()], "newest first");
    assert_eq!(store.current(&u, &s).await.unwrap().map(|(p, _)| p.id), Some(second.id));
}

pub async fn create_over_a_changed_plan_writes_nothing(store: &dyn PlanStore, sessions: &dyn SessionFixture) {
    let (u, s) = open(sessions).await;
    let first = record(1);
    store.create(&u, &s, &first, &[]).await.unwrap();
    let mut moved = first.clone();
    moved.status = PlanStatus::Running;
    store.save(&u, &s, &moved, 1).await.unwrap();
    let second = record(2);
    let r = store.create(&u, &s, &second, &[(first.clone(), 1)]).await;
    assert!(matches!(r, Err(StoreError::LeaseLost)), "{r:?}");
    assert!(store.load(&u, &s, &second.id).await.unwrap().is_none(), "the new plan was not stored");
    let (kept, v) = store.load(&u, &s, &first.id).await.unwrap().unwrap();
    assert_eq!((kept.status, v), (PlanStatus::Running, 2), "the other writer's save stands");
    // An id already taken is refused the same way.
    assert!(matches!(store.create(&u, &s, &moved, &[]).await, Err(StoreError::LeaseLost)));
}

pub async fn list_is_newest_first_and_limited(store: &dyn PlanStore, sessions: &dyn SessionFixture) {
    let (u, s) = open(sessions).await;
    let plans: Vec<PlanRecord> = (1..=3).map(record).collect();
    for p in &plans {
        store.save(&u, &s, p, 0).await.unwrap();
    }
    let two: Vec<String> = store.list(&u, &s, 2).await.unwrap().into_iter().map(|(p, _)| p.id).collect();
    assert_eq!(two, vec![plans[2].id.clone(), plans[1].id.clone()]);
}

pub async fn plans_are_the_sessions_own(store: &dyn PlanStore, sessions: &dyn SessionFixture) {
    let (u, s) = open(sessions).await;
    let p = record(1);
    store.save(&u, &s, &p, 0).await.unwrap();
    let (other_user, other_session) = (fresh_user(), SessionId::new());
    sessions.open(&other_user, &s).await;
    sessions.open(&u, &other_session).await;
    assert!(store.load(&other_user, &s, &p.id).await.unwrap().is_none(), "another user's plan is not there");
    assert!(store.list(&other_user, &s, 10).await.unwrap().is_empty());
    assert!(store.load(&u, &other_session, &p.id).await.unwrap().is_none(), "nor another session's");
}

/// One `#[tokio::test]` per contract case, each on a fresh world from
/// `$setup().await` (a `(impl PlanStore, impl SessionFixture)`).
#[macro_export]
macro_rules! plan_store_contract {
    ($setup:path) => {
        #[tokio::test]
        async fn save_is_compare_and_set() {
            let (store, sessions) = $setup().await;
            $crate::plan::store::contract::save_is_compare_and_set(&store, &sessions).await;
        }
        #[tokio::test]
        async fn a_missing_plan_is_none() {
            let (store, sessions) = $setup().await;
            $crate::plan::store::contract::a_missing_plan_is_none(&store, &sessions).await;
        }
        #[tokio::test]
        async fn a_session_being_deleted_takes_no_plan() {
            let (store, sessions) = $setup().await;
            $crate::plan::store::contract::a_session_being_deleted_takes_no_plan(&store, &sessions).await;
        }
        #[tokio::test]
        async fn create_supersedes_the_replaced_plans_at_once() {
            let (store, sessions) = $setup().await;
            $crate::plan::store::contract::create_supersedes_the_replaced_plans_at_once(&store, &sessions).await;
        }
        #[tokio::test]
        async fn create_over_a_changed_plan_writes_nothing() {
            let (store, sessions) = $setup().await;
            $crate::plan::store::contract::create_over_a_changed_plan_writes_nothing(&store, &sessions).await;
        }
        #[tokio::test]
        async fn list_is_newest_first_and_limited() {
            let (store, sessions) = $setup().await;
            $crate::plan::store::contract::list_is_newest_first_and_limited(&store, &sessions).await;
        }
        #[tokio::test]
        async fn plans_are_the_sessions_own() {
            let (store, sessions) = $setup().await;
            $crate::plan::store::contract::plans_are_the_sessions_own(&store, &sessions).await;
        }
    };
}

#[cfg(test)]
mod memory {
    use crate::plan::store::MemoryPlanStore;
    use crate::store::gate::MemorySessions;

    async fn world() -> (MemoryPlanStore, MemorySessions) {
        let sessions = MemorySessions::default();
        (MemoryPlanStore::new(sessions.clone()), sessions)
    }

    crate::plan_store_contract!(world);
}

/// The same cases with the session store's twin as the plan twin's gate:
/// sessions opened and deletes begun through the session store itself.
#[cfg(test)]
mod over_the_session_twin {
    use crate::plan::store::MemoryPlanStore;
    use crate::session::store::MemoryStore;
    use std::sync::Arc;

    async fn world() -> (MemoryPlanStore, Arc<MemoryStore>) {
        let sessions = Arc::new(MemoryStore::new());
        (MemoryPlanStore::new(sessions.clone()), sessions)
    }

    crate::plan_store_contract!(world);
}
