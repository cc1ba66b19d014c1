//! The [`BudgetStore`] contract, written once and run against both
//! implementations: the in-memory twin in `cargo test -p shared --lib`, the
//! DynamoDB store against DynamoDB Local (`tests/tests/budgets.rs`, through
//! [`crate::budget_store_contract`]). Times are given, so minutes and days
//! pass without waiting.

use super::{minute_of, BudgetConfig, BudgetKind, BudgetStore, Refusal};
use crate::ids::{TurnId, UserId};
use crate::store::gate::fresh_user;

/// 2025-11-26T10:00:00Z.
pub const T0: i64 = 1_764_151_200_000;
const HOUR: i64 = 3_600_000;
const MINUTE: i64 = 60_000;
const DAY: i64 = 24 * HOUR;

/// Races as (N calls at once, limit L): fewer calls than the limit, more,
/// and many far under it.
const RACES: [(usize, u64); 3] = [(3, 2), (8, 5), (20, 200)];

fn limits(tokens: u64, tpm: u64, concurrent: u64, web: u64) -> BudgetConfig {
    BudgetConfig { tokens_per_day: tokens, turns_per_minute: tpm, concurrent_turns: concurrent, web_calls_per_day: web }
}

fn over(r: Result<impl std::fmt::Debug, Refusal>) -> (BudgetKind, u64) {
    match r {
        Err(Refusal::Over(o)) => (o.budget, o.retry_after_secs),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

pub async fn concurrent_turns_are_slots_given_back(store: &dyn BudgetStore) {
    let (u, l) = (fresh_user(), limits(0, 0, 2, 0));
    let (a, b, c) = (TurnId::new(), TurnId::new(), TurnId::new());
    store.admit(&u, &a, T0, T0 + HOUR, &l).await.unwrap();
    store.admit(&u, &b, T0, T0 + HOUR, &l).await.unwrap();
    assert_eq!(over(store.admit(&u, &c, T0, T0 + HOUR, &l).await).0, BudgetKind::ConcurrentTurns);
    assert_eq!(store.usage(&u, T0, &l).await.unwrap().concurrent_turns, 2);
    store.release(&u, &a, T0 + HOUR, 0, T0 + 1, &[]).await.unwrap();
    store.admit(&u, &c, T0 + 2, T0 + HOUR, &l).await.expect("a slot was given back");
    // Another user is not counted.
    store.admit(&fresh_user(), &TurnId::new(), T0, T0 + HOUR, &l).await.unwrap();
}

pub async fn a_crashed_turns_slot_expires_with_its_invocation(store: &dyn BudgetStore) {
    let (u, l) = (fresh_user(), limits(0, 0, 1, 0));
    store.admit(&u, &TurnId::new(), T0, T0 + 1_000, &l).await.unwrap();
    assert_eq!(over(store.admit(&u, &TurnId::new(), T0 + 500, T0 + HOUR, &l).await).0, BudgetKind::ConcurrentTurns);
    // Never released: past its expiry, the slot is taken back.
    store.admit(&u, &TurnId::new(), T0 + 1_001, T0 + HOUR, &l).await.expect("the expired slot was reclaimed");
    assert_eq!(store.usage(&u, T0 + 1_002, &l).await.unwrap().concurrent_turns, 1);
}

pub async fn turns_per_minute_start_again_each_minute(store: &dyn BudgetStore) {
    let (u, l) = (fresh_user(), limits(0, 2, 0, 0));
    let t = T0 + 30_000;
    for _ in 0..2 {
        let turn = TurnId::new();
        store.admit(&u, &turn, t, t + HOUR, &l).await.unwrap();
        store.release(&u, &turn, t + HOUR, 0, t, &[]).await.unwrap();
    }
    let (kind, retry) = over(store.admit(&u, &TurnId::new(), t, t + HOUR, &l).await);
    assert_eq!((kind, retry), (BudgetKind::TurnsPerMinute, 30), "until the next minute");
    assert_eq!(store.usage(&u, t, &l).await.unwrap().turns_this_minute, 2, "the refusal was not counted");
    store.admit(&u, &TurnId::new(), T0 + 60_000, T0 + HOUR, &l).await.expect("a new minute");
}

pub async fn a_refusal_counts_nothing(store: &dyn BudgetStore) {
    let (u, l) = (fresh_user(), limits(0, 5, 1, 0));
    store.admit(&u, &TurnId::new(), T0, T0 + HOUR, &l).await.unwrap();
    for _ in 0..3 {
        assert_eq!(over(store.admit(&u, &TurnId::new(), T0, T0 + HOUR, &l).await).0, BudgetKind::ConcurrentTurns);
    }
    let usage = store.usage(&u, T0, &l).await.unwrap();
    assert_eq!((usage.turns_this_minute, usage.concurrent_turns), (1, 1), "{usage:?}");
    let (u, l) = (fresh_user(), limits(0, 1, 3, 0));
    store.admit(&u, &TurnId::new(), T0, T0 + HOUR, &l).await.unwrap();
    assert_eq!(over(store.admit(&u, &TurnId::new(), T0, T0 + HOUR, &l).await).0, BudgetKind::TurnsPerMinute);
    assert_eq!(store.usage(&u, T0, &l).await.unwrap().concurrent_turns, 1, "the slot was given back");
}

/// A minute's count is one update with the slot: of racing admissions
/// exactly the tighter of the two limits pass, and what refused them is the
/// budget that is spent.
pub async fn racing_admissions_admit_exactly_the_tightest_limit(store: &dyn BudgetStore) {
    for (l, admitted, refused_by) in
        [(limits(0, 3, 5, 0), 3, BudgetKind::TurnsPerMinute), (limits(0, 20, 4, 0), 4, BudgetKind::ConcurrentTurns)]
    {
        let u = fresh_user();
        let turns: Vec<TurnId> = (0..20).map(|_| TurnId::new()).collect();
        let results = futures::future::join_all(turns.iter().map(|t| store.admit(&u, t, T0, T0 + HOUR, &l))).await;
        let (ok, refused): (Vec<_>, Vec<_>) = results.into_iter().partition(|r| r.is_ok());
        assert_eq!(ok.len(), admitted, "{l:?}: {refused:?}");
        for r in refused {
            assert_eq!(over(r).0, refused_by, "{l:?}");
        }
        let usage = store.usage(&u, T0, &l).await.unwrap();
        assert_eq!((usage.turns_this_minute, usage.concurrent_turns), (admitted as u64, admitted as u64), "{l:?}");
    }
}

/// N turns at once against a limit L (turns per minute, or turns at once)
/// admit exactly min(N, L), each refusal naming that budget — on a user's
/// first day, and on a day after one whose tokens were spent. The usage says
/// what was admitted, and a refusal after the race changes nothing of it.
pub async fn racing_turns_admit_exactly_min_of_calls_and_limit(store: &dyn BudgetStore) {
    for (n, limit) in RACES {
        for (l, budget) in [
            (limits(1_000, limit, 0, 0), BudgetKind::TurnsPerMinute),
            (limits(1_000, 0, limit, 0), BudgetKind::ConcurrentTurns),
        ] {
            for after_a_spent_day in [false, true] {
                let u = fresh_user();
                if after_a_spent_day {
                    let turn = TurnId::new();
                    store.admit(&u, &turn, T0 - DAY, T0 - DAY + HOUR, &l).await.unwrap();
                    store.release(&u, &turn, T0 - DAY + HOUR, 1_000, T0 - DAY + 1, &[]).await.unwrap();
                    let spent = over(store.admit(&u, &TurnId::new(), T0 - DAY + 2, T0 - DAY + HOUR, &l).await);
                    assert_eq!(spent.0, BudgetKind::TokensPerDay, "the earlier day's tokens are spent");
                }
                let case = format!("{n} turns, {budget:?} {limit}, after a spent day: {after_a_spent_day}");
                let turns: Vec<TurnId> = (0..n).map(|_| TurnId::new()).collect();
                let results =
                    futures::future::join_all(turns.iter().map(|t| store.admit(&u, t, T0, T0 + HOUR, &l))).await;
                let (ok, refused): (Vec<_>, Vec<_>) = results.into_iter().partition(|r| r.is_ok());
                let admitted = n.min(limit as usize);
                assert_eq!(ok.len(), admitted, "{case}: {refused:?}");
                for r in ok {
                    assert_eq!(r.unwrap().tokens_left, Some(1_000), "{case}: a new day's tokens");
                }
                for r in refused {
                    assert_eq!(over(r).0, budget, "{case}");
                }
                let usage = store.usage(&u, T0, &l).await.unwrap();
                let counted = (usage.turns_this_minute, usage.concurrent_turns, usage.tokens_today);
                assert_eq!(counted, (admitted as u64, admitted as u64, 0), "{case}: {usage:?}");
                if n >= limit as usize {
                    assert_eq!(over(store.admit(&u, &TurnId::new(), T0, T0 + HOUR, &l).await).0, budget, "{case}");
                    assert_eq!(store.usage(&u, T0, &l).await.unwrap(), usage, "{case}: the refusal counted nothing");
                }
            }
        }
    }
}

/// N web calls at once against a limit L count exactly min(N, L), every
/// other refused `web_calls_per_day` — a new user's first calls (the day not
/// yet stored) and the first calls of a day after one whose calls were all
/// spent. The usage says what was counted; a refusal changes nothing of it.
pub async fn racing_web_calls_count_exactly_min_of_calls_and_limit(store: &dyn BudgetStore) {
    for (n, limit) in RACES {
        for after_a_spent_day in [false, true] {
            let (u, l) = (fresh_user(), limits(0, 0, 0, limit));
            let case = format!("{n} web calls, limit {limit}, after a spent day: {after_a_spent_day}");
            if after_a_spent_day {
                for i in 0..limit as i64 {
                    store.spend_web_call(&u, T0 - DAY + i, &l).await.unwrap();
                }
                let spent = over(store.spend_web_call(&u, T0 - DAY + HOUR, &l).await).0;
                assert_eq!(spent, BudgetKind::WebCallsPerDay, "{case}: the earlier day is spent");
            }
            let results = futures::future::join_all((0..n).map(|_| store.spend_web_call(&u, T0, &l))).await;
            let (ok, refused): (Vec<_>, Vec<_>) = results.into_iter().partition(|r| r.is_ok());
            let counted = n.min(limit as usize);
            assert_eq!(ok.len(), counted, "{case}: {refused:?}");
            for r in refused {
                assert_eq!(over(r).0, BudgetKind::WebCallsPerDay, "{case}");
            }
            let usage = store.usage(&u, T0, &l).await.unwrap();
            assert_eq!((usage.day.as_str(), usage.web_calls_today), ("2025-11-26", counted as u64), "{case}");
            if n >= limit as usize {
                assert_eq!(over(store.spend_web_call(&u, T0 + 1, &l).await).0, BudgetKind::WebCallsPerDay);
                assert_eq!(store.usage(&u, T0, &l).await.unwrap(), usage, "{case}: the refusal counted nothing");
            }
        }
    }
}

/// The counts of past minutes: returned by an admission, forgotten by that
/// turn's release — never this minute's count, whichever turn ends when.
pub async fn a_release_forgets_past_minutes_only(store: &dyn BudgetStore) {
    let (u, l) = (fresh_user(), limits(0, 2, 0, 0));
    let (a, b, c) = (TurnId::new(), TurnId::new(), TurnId::new());
    let first = store.admit(&u, &a, T0, T0 + HOUR, &l).await.unwrap();
    assert_eq!(first.past_minutes, Vec::<i64>::new());
    let later = T0 + 3 * MINUTE;
    let second = store.admit(&u, &b, later, T0 + HOUR, &l).await.unwrap();
    assert_eq!(second.past_minutes, [minute_of(T0)], "the first turn's minute is past");
    // The first turn ends in this minute: it forgets nothing.
    store.release(&u, &a, T0 + HOUR, 0, later + 1, &first.past_minutes).await.unwrap();
    let third = store.admit(&u, &c, later + 2, T0 + HOUR, &l).await.unwrap();
    assert_eq!(third.past_minutes, [minute_of(T0)], "not forgotten yet");
    store.release(&u, &b, T0 + HOUR, 0, later + 3, &second.past_minutes).await.unwrap();
    // This minute's two turns still count.
    assert_eq!(store.usage(&u, later + 4, &l).await.unwrap().turns_this_minute, 2);
    assert_eq!(over(store.admit(&u, &TurnId::new(), later + 5, T0 + HOUR, &l).await).0, BudgetKind::TurnsPerMinute);
    let next = later + MINUTE;
    let fourth = store.admit(&u, &TurnId::new(), next, T0 + HOUR, &l).await.unwrap();
    assert_eq!(fourth.past_minutes, [minute_of(later)], "the first minute was forgotten by the second turn's release");
    // Forgetting a minute twice is harmless.
    store.release(&u, &c, T0 + HOUR, 0, next + 1, &third.past_minutes).await.unwrap();
    assert_eq!(store.usage(&u, next + 2, &l).await.unwrap().turns_this_minute, 1);
}

pub async fn tokens_are_counted_per_day(store: &dyn BudgetStore) {
    let (u, l) = (fresh_user(), limits(1_000, 0, 0, 0));
    let turn = TurnId::new();
    let a = store.admit(&u, &turn, T0, T0 + HOUR, &l).await.unwrap();
    assert_eq!(a.tokens_left, Some(1_000));
    store.release(&u, &turn, T0 + HOUR, 600, T0 + 1, &[]).await.unwrap();
    let turn = TurnId::new();
    assert_eq!(store.admit(&u, &turn, T0 + 2, T0 + HOUR, &l).await.unwrap().tokens_left, Some(400));
    store.release(&u, &turn, T0 + HOUR, 500, T0 + 3, &[]).await.unwrap();
    let usage = store.usage(&u, T0 + 4, &l).await.unwrap();
    assert_eq!((usage.tokens_today, usage.blocked_until_ms), (1_100, Some(usage.day_resets_at_ms)));
    let (kind, retry) = over(store.admit(&u, &TurnId::new(), T0 + 4, T0 + HOUR, &l).await);
    assert_eq!(kind, BudgetKind::TokensPerDay);
    assert_eq!(retry, 14 * 3_600, "until UTC midnight");
    // The next day starts from nothing.
    let tomorrow = T0 + 14 * HOUR;
    let turn = TurnId::new();
    assert_eq!(store.admit(&u, &turn, tomorrow, tomorrow + HOUR, &l).await.unwrap().tokens_left, Some(1_000));
    store.release(&u, &turn, tomorrow + HOUR, 10, tomorrow + 1, &[]).await.unwrap();
    assert_eq!(store.usage(&u, tomorrow + 2, &l).await.unwrap().tokens_today, 10);
}

pub async fn web_calls_are_counted_per_day(store: &dyn BudgetStore) {
    let (u, l) = (fresh_user(), limits(0, 0, 0, 2));
    store.spend_web_call(&u, T0, &l).await.unwrap();
    store.spend_web_call(&u, T0 + 1, &l).await.unwrap();
    assert_eq!(over(store.spend_web_call(&u, T0 + 2, &l).await).0, BudgetKind::WebCallsPerDay);
    assert_eq!(store.usage(&u, T0 + 3, &l).await.unwrap().web_calls_today, 2);
    store.spend_web_call(&u, T0 + 14 * HOUR, &l).await.expect("a new day");
    assert_eq!(store.usage(&u, T0 + 14 * HOUR, &l).await.unwrap().web_calls_today, 1);
}

pub async fn a_new_user_has_used_nothing(store: &dyn BudgetStore) {
    let l = limits(1, 2, 3, 4);
    let usage = store.usage(&UserId::parse("nobody-yet").unwrap(), T0, &l).await.unwrap();
    assert_eq!(
        (usage.tokens_today, usage.turns_this_minute, usage.concurrent_turns, usage.web_calls_today),
        (0, 0, 0, 0)
    );
    assert_eq!((usage.tokens_per_day, usage.concurrent_limit, usage.blocked_until_ms), (1, 3, None));
    assert_eq!(usage.day, "2025-11-26");
}

/// The contract as `#[tokio::test]`s over `$setup().await` (a fresh store).
#[macro_export]
macro_rules! budget_store_contract {
    ($setup:path) => {
        $crate::budget_store_contract!(@each $setup,
            concurrent_turns_are_slots_given_back,
            a_crashed_turns_slot_expires_with_its_invocation,
            turns_per_minute_start_again_each_minute,
            a_refusal_counts_nothing,
            racing_admissions_admit_exactly_the_tightest_limit,
            racing_turns_admit_exactly_min_of_calls_and_limit,
            racing_web_calls_count_exactly_min_of_calls_and_limit,
            a_release_forgets_past_minutes_only,
            tokens_are_counted_per_day,
            web_calls_are_counted_per_day,
            a_new_user_has_used_nothing);
    };
    (@each $setup:path, $($name:ident),*) => {
        $(
            #[tokio::test]
            async fn $name() {
                let store = $setup().await;
                $crate::budget::contract::$name(&store).await;
            }
        )*
    };
}
