//! The in-memory twin of [`super::DynamoBudgetStore`]: the same counters
//! under one lock, for unit tests and the contract — one record per user, as
//! the DynamoDB store keeps one item: the day's counts, the slots and the
//! turns of each clock minute not yet forgotten (a release forgets the past
//! minutes its admission returned).

use super::{
    day_of, minute_of, over_concurrent, over_minute, over_tokens, over_web, slot_entry, slot_expires, Admitted,
    BudgetConfig, BudgetStore, BudgetUsage, Refusal,
};
use crate::ids::{TurnId, UserId};
use crate::store::StoreError;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Mutex;

#[derive(Default)]
struct Daily {
    day: String,
    tokens: u64,
    web: u64,
    active: BTreeSet<String>,
    /// Turns started per clock minute.
    minutes: BTreeMap<i64, u64>,
}

#[derive(Default)]
pub struct MemoryBudgetStore {
    daily: Mutex<HashMap<UserId, Daily>>,
}

impl MemoryBudgetStore {
    pub fn new() -> Self {
        Self::default()
    }
}

impl Daily {
    fn tokens_on(&self, day: &str) -> u64 {
        if self.day == day {
            self.tokens
        } else {
            0
        }
    }

    fn roll(&mut self, day: &str) {
        if self.day != day {
            let (active, minutes) = (std::mem::take(&mut self.active), std::mem::take(&mut self.minutes));
            *self = Daily { day: day.to_string(), tokens: 0, web: 0, active, minutes };
        }
    }
}

#[async_trait::async_trait]
impl BudgetStore for MemoryBudgetStore {
    async fn admit(
        &self,
        user: &UserId,
        turn: &TurnId,
        now_ms: i64,
        expires_ms: i64,
        limits: &BudgetConfig,
    ) -> Result<Admitted, Refusal> {
        let mut daily = self.daily.lock().unwrap_or_else(|p| p.into_inner());
        let d = daily.entry(user.clone()).or_default();
        let today = day_of(now_ms);
        let used = d.tokens_on(&today);
        if limits.tokens_per_day > 0 && used >= limits.tokens_per_day {
            return Err(over_tokens(now_ms, limits).into());
        }
        if limits.concurrent_turns > 0 && d.active.len() as u64 >= limits.concurrent_turns {
            // Slots of turns whose invocation is over are reclaimed.
            d.active.retain(|e| slot_expires(e) >= now_ms);
            if d.active.len() as u64 >= limits.concurrent_turns {
                return Err(over_concurrent(limits).into());
            }
        }
        let minute = minute_of(now_ms);
        let count = d.minutes.entry(minute).or_default();
        if limits.turns_per_minute > 0 && *count >= limits.turns_per_minute {
            return Err(over_minute(now_ms, limits).into());
        }
        *count += 1;
        d.active.insert(slot_entry(turn, expires_ms));
        let tokens_left = (limits.tokens_per_day > 0).then(|| limits.tokens_per_day - used);
        Ok(Admitted { tokens_left, past_minutes: d.minutes.range(..minute).map(|(m, _)| *m).collect() })
    }

    async fn release(
        &self,
        user: &UserId,
        turn: &TurnId,
        _expires_ms: i64,
        tokens: u64,
        now_ms: i64,
        past_minutes: &[i64],
    ) -> Result<(), StoreError> {
        let mut daily = self.daily.lock().unwrap_or_else(|p| p.into_inner());
        let d = daily.entry(user.clone()).or_default();
        let suffix = format!("|{turn}");
        d.active.retain(|e| !e.ends_with(&suffix));
        for m in past_minutes {
            d.minutes.remove(m);
        }
        if tokens > 0 {
            d.roll(&day_of(now_ms));
            d.tokens += tokens;
        }
        Ok(())
    }

    async fn spend_web_call(&self, user: &UserId, now_ms: i64, limits: &BudgetConfig) -> Result<(), Refusal> {
        let mut daily = self.daily.lock().unwrap_or_else(|p| p.into_inner());
        let d = daily.entry(user.clone()).or_default();
        d.roll(&day_of(now_ms));
        if limits.web_calls_per_day > 0 && d.web >= limits.web_calls_per_day {
            return Err(over_web(now_ms, limits).into());
        }
        d.web += 1;
        Ok(())
    }

    async fn usage(&self, user: &UserId, now_ms: i64, limits: &BudgetConfig) -> Result<BudgetUsage, StoreError> {
        let daily = self.daily.lock().unwrap_or_else(|p| p.into_inner());
        let today = day_of(now_ms);
        let (tokens, web, active) = match daily.get(user) {
            Some(d) if d.day == today => {
                (d.tokens, d.web, d.active.iter().filter(|e| slot_expires(e) >= now_ms).count())
            }
            Some(d) => (0, 0, d.active.iter().filter(|e| slot_expires(e) >= now_ms).count()),
            None => (0, 0, 0),
        };
        let turns = daily.get(user).and_then(|d| d.minutes.get(&minute_of(now_ms)).copied()).unwrap_or(0);
        Ok(super::usage_of(now_ms, limits, tokens, turns, active as u64, web))
    }
}

#[cfg(test)]
mod tests {
    async fn world() -> super::MemoryBudgetStore {
        super::MemoryBudgetStore::new()
    }

    crate::budget_store_contract!(world);
}
