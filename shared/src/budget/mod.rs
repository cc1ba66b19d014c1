//! Per-user budgets (issue 30): model tokens per UTC day (in + out, as the
//! model reports them), turns started per clock minute, turns running at once,
//! and web tool calls per UTC day. Limits come from [`BudgetConfig`]
//! (`BUDGET_*`; `0` turns one off).
//!
//! Contract:
//! - a turn is **admitted** ([`BudgetStore::admit`]) in the round trip it
//!   already makes before the model (one conditional update of the user's
//!   budget item, sent beside the lease and the log: the slot, the minute's
//!   count and the tokens check together), or refused with the budget that
//!   ran out and when the user can go on ([`OverBudget`]); a refusal counts
//!   nothing (the one update either takes everything or nothing);
//! - a turn is counted in the clock minute it started in; the counts of past
//!   minutes an admission finds still stored ([`Admitted::past_minutes`]) are
//!   removed by that turn's release, a write it makes anyway;
//! - an admitted turn holds a **slot** among the user's concurrent turns until
//!   its [`Slot`] is released — after `done`, with the turn's tokens counted
//!   in the same write — or, when the process died, until the invocation's
//!   deadline it was taken with (a slot past it is reclaimed by the next
//!   admission that finds the user full);
//! - tokens are counted at the end of the turn; a turn is admitted while the
//!   day's count is under the limit and is told how many are left
//!   ([`Admitted::tokens_left`]): the model loop caps its requests at that and
//!   ends the turn `error quota_exceeded` when it is spent;
//! - web tools call [`spend_web_call`] before each call: one conditional
//!   update; refused, the tool answers the model that the day's web budget is
//!   spent (and when it comes back);
//! - a failing budget store does not stop chat: the turn is admitted without
//!   a slot and the failure is logged (budgets protect spend, not safety).
//!
//! Rooms: [`dynamo`] (the items and their updates), [`memory`] (the twin),
//! [`contract`] (one suite for both).

#[cfg(any(test, feature = "testkit"))]
pub mod contract;
pub mod dynamo;
pub mod memory;

pub use crate::config::BudgetConfig;
pub use dynamo::DynamoBudgetStore;
pub use memory::MemoryBudgetStore;

use crate::ids::{TurnId, UserId};
use crate::store::StoreError;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// How long a refused concurrent turn is told to wait: turns end on their
/// own time, so this is a polite poll interval, not a promise.
pub const CONCURRENT_RETRY_SECS: u64 = 5;

/// Which budget ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum BudgetKind {
    TokensPerDay,
    TurnsPerMinute,
    ConcurrentTurns,
    WebCallsPerDay,
}

impl BudgetKind {
    pub fn as_str(&self) -> &'static str {
        match self {
            BudgetKind::TokensPerDay => "tokens_per_day",
            BudgetKind::TurnsPerMinute => "turns_per_minute",
            BudgetKind::ConcurrentTurns => "concurrent_turns",
            BudgetKind::WebCallsPerDay => "web_calls_per_day",
        }
    }
}

/// A budget ran out: which, its limit, and in how many seconds the user can
/// go on (`Retry-After`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the {} budget ({limit}) is spent; try again in {retry_after_secs} s", budget.as_str())]
pub struct OverBudget {
    pub budget: BudgetKind,
    pub limit: u64,
    pub retry_after_secs: u64,
}

/// Why a budget request did not admit.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    #[error(transparent)]
    Over(#[from] OverBudget),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What an admission grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admitted {
    /// Tokens left today before this turn; `None`: no token budget.
    pub tokens_left: Option<u64>,
    /// Past clock minutes whose turn counts the store still holds, for the
    /// turn's release to remove (they no longer limit anything; removed,
    /// they keep the user's item small).
    pub past_minutes: Vec<i64>,
}

/// The user's use and limits (`GET /me/usage`). A limit of 0 is no limit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct BudgetUsage {
    /// The UTC day the daily counts are for (`YYYY-MM-DD`).
    pub day: String,
    pub tokens_today: u64,
    pub tokens_per_day: u64,
    pub turns_this_minute: u64,
    pub turns_per_minute: u64,
    /// Turns holding a slot now (expired slots of crashed turns not counted).
    pub concurrent_turns: u64,
    pub concurrent_limit: u64,
    pub web_calls_today: u64,
    pub web_calls_per_day: u64,
    /// When the daily counts start again (ms since the epoch, UTC midnight).
    pub day_resets_at_ms: i64,
    /// When a budget that is spent now lets the user go on (ms since the
    /// epoch); `None`: nothing is spent.
    pub blocked_until_ms: Option<i64>,
}

/// The counters, on the user's own partition. Times are passed in so the
/// contract can cross minutes and days.
#[async_trait::async_trait]
pub trait BudgetStore: Send + Sync {
    /// Takes a concurrent slot for `turn` (held until `expires_ms` at most)
    /// and counts a turn in this minute, if every turn budget allows it.
    async fn admit(
        &self,
        user: &UserId,
        turn: &TurnId,
        now_ms: i64,
        expires_ms: i64,
        limits: &BudgetConfig,
    ) -> Result<Admitted, Refusal>;

    /// Gives `turn`'s slot (taken until `expires_ms`) back, counts its
    /// `tokens` for today and forgets the counts of `past_minutes` (what its
    /// admission returned).
    async fn release(
        &self,
        user: &UserId,
        turn: &TurnId,
        expires_ms: i64,
        tokens: u64,
        now_ms: i64,
        past_minutes: &[i64],
    ) -> Result<(), StoreError>;

    /// Counts one web tool call today, if the budget allows it.
    async fn spend_web_call(&self, user: &UserId, now_ms: i64, limits: &BudgetConfig) -> Result<(), Refusal>;

    /// What the user used, as of `now_ms`.
    async fn usage(&self, user: &UserId, now_ms: i64, limits: &BudgetConfig) -> Result<BudgetUsage, StoreError>;
}

/// For the web tools: counts one call for `user` now. `Ok` when there is no
/// budget store or no web budget; `Err(OverBudget)` when the day's calls are
/// spent (tell the model, do not call the web). A failing store admits.
pub async fn spend_web_call(
    store: Option<&Arc<dyn BudgetStore>>,
    user: &UserId,
    limits: &BudgetConfig,
) -> Result<(), OverBudget> {
    let Some(store) = store.filter(|_| limits.web_calls_per_day > 0) else { return Ok(()) };
    match store.spend_web_call(user, crate::now_ms(), limits).await {
        Ok(()) => Ok(()),
        Err(Refusal::Over(o)) => Err(o),
        Err(Refusal::Store(e)) => {
            tracing::warn!(error = %e, "web call budget not checked");
            Ok(())
        }
    }
}

/// The UTC day of `now_ms`, as `YYYY-MM-DD`.
pub fn day_of(now_ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(now_ms).unwrap_or_default().format("%Y-%m-%d").to_string()
}

/// The next UTC midnight after `now_ms`.
pub fn next_day_ms(now_ms: i64) -> i64 {
    (now_ms.div_euclid(DAY_MS) + 1) * DAY_MS
}

/// The clock minute of `now_ms` (minutes since the epoch).
pub fn minute_of(now_ms: i64) -> i64 {
    now_ms.div_euclid(60_000)
}

const DAY_MS: i64 = 86_400_000;

/// Whole seconds from `now_ms` to `at_ms`, at least 1.
pub fn secs_until(now_ms: i64, at_ms: i64) -> u64 {
    ((at_ms - now_ms).max(0) as u64).div_ceil(1000).max(1)
}

/// Refusals, built the same way by both stores.
pub fn over_tokens(now_ms: i64, limits: &BudgetConfig) -> OverBudget {
    let retry_after_secs = secs_until(now_ms, next_day_ms(now_ms));
    OverBudget { budget: BudgetKind::TokensPerDay, limit: limits.tokens_per_day, retry_after_secs }
}

pub fn over_minute(now_ms: i64, limits: &BudgetConfig) -> OverBudget {
    let retry_after_secs = secs_until(now_ms, (minute_of(now_ms) + 1) * 60_000);
    OverBudget { budget: BudgetKind::TurnsPerMinute, limit: limits.turns_per_minute, retry_after_secs }
}

pub fn over_concurrent(limits: &BudgetConfig) -> OverBudget {
    OverBudget {
        budget: BudgetKind::ConcurrentTurns,
        limit: limits.concurrent_turns,
        retry_after_secs: CONCURRENT_RETRY_SECS,
    }
}

pub fn over_web(now_ms: i64, limits: &BudgetConfig) -> OverBudget {
    let retry_after_secs = secs_until(now_ms, next_day_ms(now_ms));
    OverBudget { budget: BudgetKind::WebCallsPerDay, limit: limits.web_calls_per_day, retry_after_secs }
}

/// The usage report from the counters, with when a spent budget lets the
/// user go on.
pub fn usage_of(now_ms: i64, limits: &BudgetConfig, tokens: u64, turns: u64, active: u64, web: u64) -> BudgetUsage {
    let spent = |used: u64, limit: u64| limit > 0 && used >= limit;
    let mut blocked: Option<i64> = None;
    let mut block = |until: i64| blocked = Some(blocked.map_or(until, |b| b.max(until)));
    if spent(tokens, limits.tokens_per_day) {
        block(next_day_ms(now_ms));
    }
    if spent(turns, limits.turns_per_minute) {
        block((minute_of(now_ms) + 1) * 60_000);
    }
    if spent(active, limits.concurrent_turns) {
        block(now_ms + CONCURRENT_RETRY_SECS as i64 * 1000);
    }
    BudgetUsage {
        day: day_of(now_ms),
        tokens_today: tokens,
        tokens_per_day: limits.tokens_per_day,
        turns_this_minute: turns,
        turns_per_minute: limits.turns_per_minute,
        concurrent_turns: active,
        concurrent_limit: limits.concurrent_turns,
        web_calls_today: web,
        web_calls_per_day: limits.web_calls_per_day,
        day_resets_at_ms: next_day_ms(now_ms),
        blocked_until_ms: blocked,
    }
}

/// One entry of the concurrent set: `<expires_ms, 13 digits>|<turn id>`.
pub fn slot_entry(turn: &TurnId, expires_ms: i64) -> String {
    format!("{:013}|{turn}", expires_ms.max(0))
}

/// The expiry of an entry (unreadable: expired).
pub fn slot_expires(entry: &str) -> i64 {
    entry.split('|').next().and_then(|t| t.parse().ok()).unwrap_or(0)
}

/// The tokens a turn may still spend, shared between the turn (which learns
/// it from the admission) and its model loop (which caps requests at it).
/// `u64::MAX`: no limit (or not known yet).
#[derive(Debug)]
pub struct TokenAllowance(AtomicU64);

impl Default for TokenAllowance {
    fn default() -> Self {
        TokenAllowance(AtomicU64::new(u64::MAX))
    }
}

impl TokenAllowance {
    pub fn set(&self, left: Option<u64>) {
        self.0.store(left.unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    /// What is left; `None`: no limit.
    pub fn left(&self) -> Option<u64> {
        Some(self.0.load(Ordering::Relaxed)).filter(|n| *n != u64::MAX)
    }

    /// Whether `used` tokens spend it.
    pub fn spent_by(&self, used: u64) -> bool {
        self.left().is_some_and(|left| used >= left)
    }
}

/// A turn's concurrent slot: given back with the turn's tokens by
/// [`Slot::release`]; a slot dropped unreleased (an early exit, a panic) is
/// given back in a spawned write, with no tokens counted.
pub struct Slot {
    store: Arc<dyn BudgetStore>,
    user: UserId,
    turn: TurnId,
    expires_ms: i64,
    past_minutes: Vec<i64>,
    held: bool,
}

impl Slot {
    /// `past_minutes`: what the admission returned ([`Admitted::past_minutes`]).
    pub fn new(
        store: Arc<dyn BudgetStore>,
        user: &UserId,
        turn: &TurnId,
        expires_ms: i64,
        past_minutes: Vec<i64>,
    ) -> Slot {
        Slot { store, user: user.clone(), turn: turn.clone(), expires_ms, past_minutes, held: true }
    }

    pub async fn release(mut self, tokens: u64) {
        self.held = false;
        let (user, turn, past) = (&self.user, &self.turn, &self.past_minutes);
        if let Err(e) = self.store.release(user, turn, self.expires_ms, tokens, crate::now_ms(), past).await {
            tracing::warn!(error = %e, "budget slot not released; it expires with the invocation");
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if !self.held {
            return;
        }
        let (store, user, turn, expires) = (self.store.clone(), self.user.clone(), self.turn.clone(), self.expires_ms);
        let past = std::mem::take(&mut self.past_minutes);
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let _ = store.release(&user, &turn, expires, 0, crate::now_ms(), &past).await;
            });
        }
    }
}

/// A turn's admission as the rest of the turn sees it: pending until the
/// turn's [`Gate`] tells. Whoever must not go on before the verdict (a new
/// session's model loop, before it relays its first token) waits on it.
#[derive(Clone)]
pub struct Verdict(tokio::sync::watch::Receiver<Option<Result<(), OverBudget>>>);

/// The turn's side: tells once. Dropped without a word (the turn was refused
/// for another reason, or there is no budget): the verdict is "admitted".
pub struct Gate(Option<tokio::sync::watch::Sender<Option<Result<(), OverBudget>>>>);

/// A gate and its verdict.
pub fn gate() -> (Gate, Verdict) {
    let (tx, rx) = tokio::sync::watch::channel(None);
    (Gate(Some(tx)), Verdict(rx))
}

impl Gate {
    pub fn tell(&mut self, verdict: Result<(), OverBudget>) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(Some(verdict));
        }
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.tell(Ok(()));
    }
}

impl Verdict {
    /// `Err`: the turn was refused for this budget; anything else goes on.
    pub async fn wait(&self) -> Result<(), OverBudget> {
        let mut rx = self.0.clone();
        let verdict = match rx.wait_for(Option::is_some).await {
            Ok(v) => v.unwrap_or(Ok(())),
            Err(_) => Ok(()),
        };
        verdict
    }

    /// The refusal, when the verdict is in and it is one.
    pub fn refused(&self) -> Option<OverBudget> {
        (*self.0.borrow()).and_then(|v| v.err())
    }

    /// The refusal, once the verdict is in.
    pub async fn refused_after_wait(&self) -> Option<OverBudget> {
        self.wait().await.err()
    }
}

/// Refusals that stand until a known time, remembered by the process that
/// saw them, so that the user's next turn before then is refused without
/// I/O — a 429 before the stream opens — instead of `error quota_exceeded`
/// in the stream after an admission. Only the budgets whose refusal cannot
/// lift early are kept: a day's tokens (counts only grow until midnight) and
/// a minute's turns (a refused turn counts nothing; the count only grows
/// until the minute ends). A concurrent slot may free at any moment: never
/// kept. Bounded: past entries go first, then the map starts over (an
/// entry lost only costs that user one admission).
#[derive(Default)]
pub struct KnownRefusals(std::sync::Mutex<std::collections::HashMap<UserId, (i64, OverBudget)>>);

/// At most this many users' refusals are kept.
const KNOWN_REFUSALS_MAX: usize = 10_000;

impl KnownRefusals {
    /// Remembers `over`, refused at `now_ms`, when it stands until a known time.
    pub fn remember(&self, user: &UserId, over: OverBudget, now_ms: i64) {
        if !matches!(over.budget, BudgetKind::TokensPerDay | BudgetKind::TurnsPerMinute) {
            return;
        }
        let until = now_ms + over.retry_after_secs as i64 * 1000;
        let mut known = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if known.len() >= KNOWN_REFUSALS_MAX {
            known.retain(|_, (u, _)| *u > now_ms);
            if known.len() >= KNOWN_REFUSALS_MAX {
                known.clear();
            }
        }
        known.insert(user.clone(), (until, over));
    }

    /// The refusal that still stands for `user` at `now_ms`, its wait counted from now.
    pub fn standing(&self, user: &UserId, now_ms: i64) -> Option<OverBudget> {
        let mut known = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match known.get(user) {
            Some((until, over)) if *until > now_ms => {
                Some(OverBudget { retry_after_secs: secs_until(now_ms, *until), ..*over })
            }
            Some(_) => {
                known.remove(user);
                None
            }
            None => None,
        }
    }
}

/// Admits a turn (a no-op without a store or turn budgets): the slot to
/// release at its end and the tokens it may spend. A failing store admits
/// (logged) without a slot.
pub async fn admit(
    store: Option<&Arc<dyn BudgetStore>>,
    limits: &BudgetConfig,
    user: &UserId,
    turn: &TurnId,
    expires_ms: i64,
) -> Result<(Option<Slot>, Option<u64>), OverBudget> {
    let Some(store) = store.filter(|_| limits.checks_turns()) else { return Ok((None, None)) };
    match store.admit(user, turn, crate::now_ms(), expires_ms, limits).await {
        Ok(a) => Ok((Some(Slot::new(store.clone(), user, turn, expires_ms, a.past_minutes)), a.tokens_left)),
        Err(Refusal::Over(o)) => Err(o),
        Err(Refusal::Store(e)) => {
            tracing::warn!(error = %e, "budget not checked; the turn goes on");
            Ok((None, None))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_minutes_and_waits() {
        let t = 1_764_115_200_000; // 2025-11-26T00:00:00Z
        assert_eq!(day_of(t), "2025-11-26");
        assert_eq!(day_of(t - 1), "2025-11-25");
        assert_eq!(next_day_ms(t - 1), t);
        assert_eq!(next_day_ms(t), t + DAY_MS);
        assert_eq!(secs_until(t, t + 1), 1);
        assert_eq!(secs_until(t, t + 1001), 2);
        assert_eq!(over_minute(t + 59_500, &BudgetConfig::OFF).retry_after_secs, 1);
        assert_eq!(over_tokens(t + DAY_MS - 3_600_000, &BudgetConfig::OFF).retry_after_secs, 3600);
    }

    #[test]
    fn slot_entries_carry_their_expiry() {
        let turn = TurnId::new();
        let e = slot_entry(&turn, 1_764_115_200_000);
        assert_eq!(slot_expires(&e), 1_764_115_200_000);
        assert!(e.ends_with(&turn.to_string()));
        assert_eq!(slot_expires("garbage"), 0);
    }

    #[test]
    fn only_refusals_that_cannot_lift_early_are_known() {
        let (known, t) = (KnownRefusals::default(), 1_764_115_200_000);
        let (alice, bob) = (UserId::parse("alice").unwrap(), UserId::parse("bob").unwrap());
        let limits = BudgetConfig { turns_per_minute: 3, concurrent_turns: 1, ..BudgetConfig::OFF };
        known.remember(&alice, over_minute(t + 20_000, &limits), t + 20_000);
        known.remember(&bob, over_concurrent(&limits), t + 20_000);
        let standing = known.standing(&alice, t + 30_000).expect("the minute's refusal stands");
        assert_eq!((standing.budget, standing.retry_after_secs), (BudgetKind::TurnsPerMinute, 30));
        assert_eq!(known.standing(&alice, t + 60_000), None, "the next minute admits again");
        assert_eq!(known.standing(&bob, t + 20_001), None, "a slot may free at any moment");
    }

    #[tokio::test]
    async fn a_verdict_is_admitted_unless_the_gate_refuses() {
        let (gate, verdict) = gate();
        drop(gate);
        assert_eq!(verdict.wait().await, Ok(()));
        let (mut gate, verdict) = super::gate();
        assert_eq!(verdict.refused(), None, "pending");
        let over = over_concurrent(&BudgetConfig::OFF);
        gate.tell(Err(over));
        assert_eq!((verdict.wait().await, verdict.refused()), (Err(over), Some(over)));
    }

    #[test]
    fn an_allowance_is_spent_at_its_limit() {
        let a = TokenAllowance::default();
        assert!(!a.spent_by(u64::MAX - 1), "no limit");
        a.set(Some(100));
        assert!(!a.spent_by(99));
        assert!(a.spent_by(100));
    }
}
