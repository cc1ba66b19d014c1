//! [`BudgetStore`] over DynamoDB, on the user's own partition
//! `U#<user>#BUDGET` (key scheme in [`crate::store`]):
//!
//! - `sk = BUDGET`: `day` (`YYYY-MM-DD`, UTC), `tokens` and `web` (that day's
//!   counts) and `active`, a string set of `<expires_ms>|<turn id>`, one per
//!   running turn. A day's counts are not reset by a timer: an update that
//!   finds another `day` starts the day again (conditions on `day` decide);
//! - `sk = MIN#<minute>`: `turns` started in that clock minute (TTL `ttl`).
//!
//! Admission is two conditional `UpdateItem`s sent together (the slot and the
//! tokens on `BUDGET`, `ReturnValues = ALL_NEW` for the tokens left; the
//! minute's count); when one refuses, what the other took is given back. A
//! refused slot update returns the item (`ALL_OLD`): slots past their expiry
//! (a crashed turn's) are removed and the admission tried once more.

use super::{
    day_of, minute_of, over_concurrent, over_minute, over_tokens, over_web, slot_entry, slot_expires, usage_of,
    Admitted, BudgetConfig, BudgetStore, BudgetUsage, Refusal,
};
use crate::ids::{TurnId, UserId};
use crate::store::attr::{backend, get_n, get_s, n, s, Item};
use crate::store::keys;
use crate::store::StoreError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue, ReturnValuesOnConditionCheckFailure};
use aws_sdk_dynamodb::Client;
use tracing::Instrument;

/// How long a minute's count is kept (DynamoDB's TTL deletes it later).
const MINUTE_TTL_SECS: i64 = 3_600;

#[derive(Clone)]
pub struct DynamoBudgetStore {
    client: Client,
    table: String,
}

impl DynamoBudgetStore {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self { client, table: table.into() }
    }
}

fn ss(v: impl Into<String>) -> AttributeValue {
    AttributeValue::Ss(vec![v.into()])
}

/// The daily counts of `item` for `today` (another day's count as nothing).
fn today_counts(item: &Item, today: &str) -> (u64, u64) {
    match get_s(item, "day") == Some(today) {
        true => (get_n(item, "tokens").unwrap_or(0).max(0) as u64, get_n(item, "web").unwrap_or(0).max(0) as u64),
        false => (0, 0),
    }
}

fn active(item: &Item) -> Vec<String> {
    item.get("active").and_then(|v| v.as_ss().ok()).cloned().unwrap_or_default()
}

/// What a refused update returned (`ALL_OLD`), when it was a failed condition.
fn refused_item<R>(
    e: &aws_sdk_dynamodb::error::SdkError<aws_sdk_dynamodb::operation::update_item::UpdateItemError, R>,
) -> Option<Item> {
    match e.as_service_error()? {
        aws_sdk_dynamodb::operation::update_item::UpdateItemError::ConditionalCheckFailedException(c) => {
            Some(c.item.clone().unwrap_or_default())
        }
        _ => None,
    }
}

impl DynamoBudgetStore {
    fn budget_key(&self, user: &UserId) -> [(String, AttributeValue); 2] {
        [("pk".into(), s(keys::budget_pk(user))), ("sk".into(), s(keys::BUDGET_SK))]
    }

    /// The slot and the token check: `Ok(tokens left)`, or the refusal.
    async fn take_slot(
        &self,
        user: &UserId,
        turn: &TurnId,
        now_ms: i64,
        expires_ms: i64,
        limits: &BudgetConfig,
    ) -> Result<Option<u64>, Refusal> {
        let today = day_of(now_ms);
        for attempt in 0..2 {
            let mut cond = Vec::new();
            let mut req = self.client.update_item().table_name(&self.table).set_key(Some(self.budget_key(user).into()));
            if limits.concurrent_turns > 0 {
                cond.push("(attribute_not_exists(active) OR size(active) < :cl)");
                req = req.expression_attribute_values(":cl", n(limits.concurrent_turns));
            }
            if limits.tokens_per_day > 0 {
                cond.push("(attribute_not_exists(#day) OR #day <> :today OR tokens < :tl)");
                req = req
                    .expression_attribute_names("#day", "day")
                    .expression_attribute_values(":today", s(&today))
                    .expression_attribute_values(":tl", n(limits.tokens_per_day));
            }
            if !cond.is_empty() {
                req = req.condition_expression(cond.join(" AND "));
            }
            let out = req
                .update_expression("ADD active :me")
                .expression_attribute_values(":me", ss(slot_entry(turn, expires_ms)))
                .return_values(ReturnValue::AllNew)
                .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
                .send()
                .instrument(tracing::debug_span!("ddb.update_item", what = "budget_admit"))
                .await;
            let e = match out {
                Ok(o) => {
                    let (used, _) = today_counts(&o.attributes.unwrap_or_default(), &today);
                    return Ok((limits.tokens_per_day > 0).then(|| limits.tokens_per_day.saturating_sub(used)));
                }
                Err(e) => e,
            };
            let Some(old) = refused_item(&e) else { return Err(Refusal::Store(backend(e))) };
            let old = self.or_read(user, old).await.map_err(Refusal::Store)?;
            if limits.tokens_per_day > 0 && today_counts(&old, &today).0 >= limits.tokens_per_day {
                return Err(over_tokens(now_ms, limits).into());
            }
            let expired: Vec<String> = active(&old).into_iter().filter(|e| slot_expires(e) < now_ms).collect();
            if expired.is_empty() || attempt == 1 {
                return Err(over_concurrent(limits).into());
            }
            self.forget_slots(user, expired).await.map_err(Refusal::Store)?;
        }
        Err(over_concurrent(limits).into())
    }

    /// Removes slots of turns whose invocation is over (a crashed turn's).
    async fn forget_slots(&self, user: &UserId, entries: Vec<String>) -> Result<(), StoreError> {
        self.client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(self.budget_key(user).into()))
            .update_expression("DELETE active :gone")
            .expression_attribute_values(":gone", AttributeValue::Ss(entries))
            .send()
            .instrument(tracing::debug_span!("ddb.update_item", what = "budget_reclaim"))
            .await
            .map(|_| ())
            .map_err(backend)
    }

    /// Counts a turn in this minute: `Ok(true)` counted, `Ok(false)` full.
    async fn count_minute(&self, user: &UserId, now_ms: i64, limits: &BudgetConfig, by: i64) -> Result<bool, Refusal> {
        let minute = minute_of(now_ms);
        let mut req = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(keys::budget_pk(user)))
            .key("sk", s(keys::budget_minute_sk(minute)))
            .update_expression("ADD turns :by SET #ttl = :ttl")
            .expression_attribute_names("#ttl", "ttl")
            .expression_attribute_values(":by", n(by))
            .expression_attribute_values(":ttl", n(now_ms / 1000 + MINUTE_TTL_SECS));
        if by > 0 {
            req = req
                .condition_expression("attribute_not_exists(turns) OR turns < :tpm")
                .expression_attribute_values(":tpm", n(limits.turns_per_minute));
        }
        match req.send().instrument(tracing::debug_span!("ddb.update_item", what = "budget_minute")).await {
            Ok(_) => Ok(true),
            Err(e) if refused_item(&e).is_some() => Ok(false),
            Err(e) => Err(Refusal::Store(backend(e))),
        }
    }

    /// The slot's removal, with the turn's tokens counted for today (starting
    /// the day again when the item holds another day's counts).
    async fn give_back(
        &self,
        user: &UserId,
        entry: Option<String>,
        tokens: u64,
        today: &str,
    ) -> Result<(), StoreError> {
        for attempt in 0..3 {
            let same_day = attempt % 2 == 0;
            let mut req = self
                .client
                .update_item()
                .table_name(&self.table)
                .set_key(Some(self.budget_key(user).into()))
                .expression_attribute_names("#day", "day")
                .expression_attribute_values(":today", s(today))
                .expression_attribute_values(":n", n(tokens));
            let mut expr = match same_day {
                true => "ADD tokens :n".to_string(),
                false => "SET #day = :today, tokens = :n, web = :zero".to_string(),
            };
            req = match same_day {
                true => req.condition_expression("#day = :today"),
                false => req
                    .condition_expression("attribute_not_exists(#day) OR #day <> :today")
                    .expression_attribute_values(":zero", n(0)),
            };
            if let Some(e) = &entry {
                expr.push_str(" DELETE active :me");
                req = req.expression_attribute_values(":me", ss(e.clone()));
            }
            let out = req
                .update_expression(expr)
                .send()
                .instrument(tracing::debug_span!("ddb.update_item", what = "budget_release"))
                .await;
            match out {
                Ok(_) => return Ok(()),
                Err(e) if refused_item(&e).is_some() => continue,
                Err(e) => return Err(backend(e)),
            }
        }
        Err(StoreError::Backend("the budget's day kept changing under the release".into()))
    }

    /// The item a refused update returned; read when it returned none
    /// (DynamoDB Local ignores `ReturnValuesOnConditionCheckFailure`; on AWS
    /// this read never happens: the refused item exists).
    async fn or_read(&self, user: &UserId, returned: Item) -> Result<Item, StoreError> {
        match returned.is_empty() {
            true => self.read(user).await,
            false => Ok(returned),
        }
    }

    async fn read(&self, user: &UserId) -> Result<Item, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(self.budget_key(user).into()))
            .consistent_read(true)
            .send()
            .instrument(tracing::debug_span!("ddb.get_item", what = "budget"))
            .await
            .map_err(backend)?;
        Ok(out.item.unwrap_or_default())
    }
}

#[async_trait::async_trait]
impl BudgetStore for DynamoBudgetStore {
    async fn admit(
        &self,
        user: &UserId,
        turn: &TurnId,
        now_ms: i64,
        expires_ms: i64,
        limits: &BudgetConfig,
    ) -> Result<Admitted, Refusal> {
        let minute = async {
            match limits.turns_per_minute {
                0 => Ok(true),
                _ => self.count_minute(user, now_ms, limits, 1).await,
            }
        };
        let (slot, minute) = tokio::join!(self.take_slot(user, turn, now_ms, expires_ms, limits), minute);
        match (slot, minute) {
            (Ok(tokens_left), Ok(true)) => Ok(Admitted { tokens_left }),
            (Ok(_), minute) => {
                // The slot is given back: a refused turn holds nothing.
                self.give_back(user, Some(slot_entry(turn, expires_ms)), 0, &day_of(now_ms)).await?;
                Err(match minute {
                    Ok(_) => over_minute(now_ms, limits).into(),
                    Err(e) => e,
                })
            }
            (Err(refused), Ok(true)) if limits.turns_per_minute > 0 => {
                self.count_minute(user, now_ms, limits, -1).await?;
                Err(refused)
            }
            (Err(refused), _) => Err(refused),
        }
    }

    async fn release(
        &self,
        user: &UserId,
        turn: &TurnId,
        expires_ms: i64,
        tokens: u64,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        self.give_back(user, Some(slot_entry(turn, expires_ms)), tokens, &day_of(now_ms)).await
    }

    async fn spend_web_call(&self, user: &UserId, now_ms: i64, limits: &BudgetConfig) -> Result<(), Refusal> {
        let today = day_of(now_ms);
        for _ in 0..3 {
            let out = self
                .client
                .update_item()
                .table_name(&self.table)
                .set_key(Some(self.budget_key(user).into()))
                .update_expression("ADD web :one")
                .condition_expression("#day = :today AND (attribute_not_exists(web) OR web < :wl)")
                .expression_attribute_names("#day", "day")
                .expression_attribute_values(":today", s(&today))
                .expression_attribute_values(":one", n(1))
                .expression_attribute_values(":wl", n(limits.web_calls_per_day))
                .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
                .send()
                .instrument(tracing::debug_span!("ddb.update_item", what = "budget_web"))
                .await;
            let e = match out {
                Ok(_) => return Ok(()),
                Err(e) => e,
            };
            let Some(old) = refused_item(&e) else { return Err(Refusal::Store(backend(e))) };
            let old = self.or_read(user, old).await.map_err(Refusal::Store)?;
            if get_s(&old, "day") == Some(today.as_str()) {
                return Err(over_web(now_ms, limits).into());
            }
            // Another day's counts: start today (with this call), unless a
            // concurrent update just did.
            let reset = self
                .client
                .update_item()
                .table_name(&self.table)
                .set_key(Some(self.budget_key(user).into()))
                .update_expression("SET #day = :today, tokens = :zero, web = :one")
                .condition_expression("attribute_not_exists(#day) OR #day <> :today")
                .expression_attribute_names("#day", "day")
                .expression_attribute_values(":today", s(&today))
                .expression_attribute_values(":zero", n(0))
                .expression_attribute_values(":one", n(1))
                .send()
                .instrument(tracing::debug_span!("ddb.update_item", what = "budget_web"))
                .await;
            match reset {
                Ok(_) => return Ok(()),
                Err(e) if refused_item(&e).is_some() => continue,
                Err(e) => return Err(Refusal::Store(backend(e))),
            }
        }
        Err(Refusal::Store(StoreError::Backend("the budget's day kept changing under the web call".into())))
    }

    async fn usage(&self, user: &UserId, now_ms: i64, limits: &BudgetConfig) -> Result<BudgetUsage, StoreError> {
        let minute = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("pk", s(keys::budget_pk(user)))
            .key("sk", s(keys::budget_minute_sk(minute_of(now_ms))))
            .consistent_read(true)
            .send()
            .instrument(tracing::debug_span!("ddb.get_item", what = "budget_minute"));
        let (item, minute) = tokio::join!(self.read(user), minute);
        let item = item?;
        let turns = minute.map_err(backend)?.item.and_then(|i| get_n(&i, "turns")).unwrap_or(0).max(0) as u64;
        let (tokens, web) = today_counts(&item, &day_of(now_ms));
        let running = active(&item).iter().filter(|e| slot_expires(e) >= now_ms).count() as u64;
        Ok(usage_of(now_ms, limits, tokens, turns, running, web))
    }
}
