//! [`BudgetStore`] over DynamoDB: one item per user, `pk = U#<user>#BUDGET`,
//! `sk = BUDGET` (key scheme in [`crate::store`]), holding
//!
//! - `day` (`YYYY-MM-DD`, UTC), `tokens` and `web`: that day's counts. A
//!   day's counts are not reset by a timer: an update that finds another
//!   `day` starts the day again (conditions on `day` decide);
//! - `active`, a string set of `<expires_ms>|<turn id>`, one per running turn;
//! - `m<minute>` (minutes since the epoch): the turns started in that clock
//!   minute. An update expression has no if/else, so the count of a new
//!   minute is a new attribute (`ADD` starts it at 0) rather than a reset.
//!
//! Admission is ONE conditional `UpdateItem` (one write unit): the slot, the
//! minute's count and the tokens check together, so a refusal takes nothing
//! and of racing admissions exactly the limit pass. `ReturnValues = ALL_NEW`
//! tells the turn its tokens left and the past minutes' counts still on the
//! item, which the turn's release (its one write after `done`) removes. A
//! refused admission is attributed from the item as it was (`ALL_OLD`; a
//! consistent read on DynamoDB Local, which returns none): slots past their
//! expiry (a crashed turn's) are removed and the admission tried again.
//!
//! A web call is ONE conditional `ADD web 1` too (today's counts, under the
//! limit), through the same loop ([`DynamoBudgetStore::spend`]): refused,
//! the item says why — today's calls spent (a refusal), an earlier day's
//! counts or none (today is started, the call tried again), or nothing
//! spent any more (tried again). No refusal is decided without its count.
//!
//! Before, the minute's count was a second item `sk = MIN#<minute>` with a
//! second `UpdateItem` per admission; such items left in a deployed table are
//! read by nothing and expire by their TTL (`ttl`, one hour).

use super::{
    day_of, minute_of, over_concurrent, over_minute, over_tokens, over_web, slot_entry, slot_expires, usage_of,
    Admitted, BudgetConfig, BudgetStore, BudgetUsage, OverBudget, Refusal,
};
use crate::ids::{TurnId, UserId};
use crate::store::attr::{backend, get_n, get_s, n, s, Item};
use crate::store::keys;
use crate::store::StoreError;
use aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue, ReturnValuesOnConditionCheckFailure};
use aws_sdk_dynamodb::Client;
use tracing::Instrument;

/// At most this many past minutes' counts are removed by one release (the
/// rest by the next: an expression stays small).
const TIDY_AT_MOST: usize = 32;

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

/// The attribute counting the turns started in clock minute `minute`.
fn minute_attr(minute: i64) -> String {
    format!("m{minute}")
}

/// The turns `item` counts in clock minute `minute`.
fn turns_in(item: &Item, minute: i64) -> u64 {
    get_n(item, &minute_attr(minute)).unwrap_or(0).max(0) as u64
}

/// The minutes before `minute` whose counts `item` still holds.
fn past_minutes(item: &Item, minute: i64) -> Vec<i64> {
    let mut past: Vec<i64> =
        item.keys().filter_map(|k| k.strip_prefix('m')?.parse::<i64>().ok()).filter(|m| *m < minute).collect();
    past.sort_unstable();
    past
}

/// What a budget update counts: a turn's admission (its slot, the minute's
/// turn, the tokens check) or one web call.
#[derive(Clone, Copy)]
enum Ask<'a> {
    Turn { slot: &'a str },
    WebCall,
}

/// How many times a budget update is tried: a first refusal may find
/// something to tidy (expired slots, another day's counts) or nothing spent
/// any more; the second try after a tidy decides, the third is slack.
const TRIES: usize = 3;

/// Why an update's condition failed, read from the item it found.
enum Refused {
    Over(OverBudget),
    /// The slots are full only of turns past their expiry: these.
    Expired(Vec<String>),
    /// The item holds an earlier day's counts (or none): the web call's
    /// update counts only in today's.
    PastDay,
    /// Nothing is spent in the item read: it changed after the refusal
    /// (DynamoDB Local's read comes later), e.g. a parallel call started the
    /// day or a turn gave its slot back.
    Nothing,
}

/// Which budget refused `ask`, judged from the item as the refusal found it.
fn refused_by(ask: Ask<'_>, old: &Item, now_ms: i64, limits: &BudgetConfig) -> Refused {
    match ask {
        Ask::Turn { .. } => turn_refused_by(old, now_ms, limits),
        Ask::WebCall => web_refused_by(old, now_ms, limits),
    }
}

/// In the order the twin checks them: the day's tokens, then the running
/// turns, then the minute's turns.
fn turn_refused_by(old: &Item, now_ms: i64, limits: &BudgetConfig) -> Refused {
    let spent = |used: u64, limit: u64| limit > 0 && used >= limit;
    if spent(today_counts(old, &day_of(now_ms)).0, limits.tokens_per_day) {
        return Refused::Over(over_tokens(now_ms, limits));
    }
    let (live, expired): (Vec<String>, Vec<String>) = active(old).into_iter().partition(|e| slot_expires(e) >= now_ms);
    if spent(live.len() as u64, limits.concurrent_turns) {
        return Refused::Over(over_concurrent(limits));
    }
    if spent(turns_in(old, minute_of(now_ms)), limits.turns_per_minute) {
        return Refused::Over(over_minute(now_ms, limits));
    }
    match spent((live.len() + expired.len()) as u64, limits.concurrent_turns) {
        true => Refused::Expired(expired),
        false => Refused::Nothing,
    }
}

/// Today's calls at the limit refuse; an earlier day's count is no count.
fn web_refused_by(old: &Item, now_ms: i64, limits: &BudgetConfig) -> Refused {
    let today = day_of(now_ms);
    match get_s(old, "day") {
        Some(day) if day == today => match today_counts(old, &today).1 >= limits.web_calls_per_day {
            true => Refused::Over(over_web(now_ms, limits)),
            false => Refused::Nothing,
        },
        // A later day (this call's clock is behind another's): nothing to
        // start; tried again, then refused as spent until its midnight.
        Some(day) if *day > *today => Refused::Nothing,
        _ => Refused::PastDay,
    }
}

/// Refused on every try, the last item read showing nothing spent (only when
/// the item keeps changing between the refusal and the read, on DynamoDB
/// Local): the budget most likely to change in between, of those that are on.
fn still_refused(ask: Ask<'_>, now_ms: i64, limits: &BudgetConfig) -> OverBudget {
    match (ask, limits.concurrent_turns, limits.turns_per_minute) {
        (Ask::WebCall, _, _) => over_web(now_ms, limits),
        (Ask::Turn { .. }, 1.., _) => over_concurrent(limits),
        (Ask::Turn { .. }, 0, 1..) => over_minute(now_ms, limits),
        (Ask::Turn { .. }, 0, 0) => over_tokens(now_ms, limits),
    }
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

/// The admission: `ADD` the slot and the minute's turn, if every turn
/// budget that is on allows it.
fn admission(
    mut req: UpdateItemFluentBuilder,
    slot: &str,
    now_ms: i64,
    limits: &BudgetConfig,
) -> UpdateItemFluentBuilder {
    let mut cond = Vec::new();
    if limits.concurrent_turns > 0 {
        cond.push("(attribute_not_exists(active) OR size(active) < :cl)");
        req = req.expression_attribute_values(":cl", n(limits.concurrent_turns));
    }
    if limits.tokens_per_day > 0 {
        cond.push("(attribute_not_exists(#day) OR #day <> :today OR tokens < :tl)");
        req = req
            .expression_attribute_names("#day", "day")
            .expression_attribute_values(":today", s(day_of(now_ms)))
            .expression_attribute_values(":tl", n(limits.tokens_per_day));
    }
    if limits.turns_per_minute > 0 {
        cond.push("(attribute_not_exists(#tm) OR #tm < :tpm)");
        req = req.expression_attribute_values(":tpm", n(limits.turns_per_minute));
    }
    if !cond.is_empty() {
        req = req.condition_expression(cond.join(" AND "));
    }
    req.update_expression("ADD active :me, #tm :one")
        .expression_attribute_names("#tm", minute_attr(minute_of(now_ms)))
        .expression_attribute_values(":me", ss(slot))
        .expression_attribute_values(":one", n(1))
}

/// One web call: `ADD web 1`, if the item holds today's counts and today's
/// calls are under the limit (another day's count is started first:
/// [`DynamoBudgetStore::start_day`]).
fn web_call(req: UpdateItemFluentBuilder, now_ms: i64, limits: &BudgetConfig) -> UpdateItemFluentBuilder {
    req.update_expression("ADD web :one")
        .condition_expression("#day = :today AND (attribute_not_exists(web) OR web < :wl)")
        .expression_attribute_names("#day", "day")
        .expression_attribute_values(":today", s(day_of(now_ms)))
        .expression_attribute_values(":one", n(1))
        .expression_attribute_values(":wl", n(limits.web_calls_per_day))
}

impl DynamoBudgetStore {
    fn budget_key(&self, user: &UserId) -> [(String, AttributeValue); 2] {
        [("pk".into(), s(keys::budget_pk(user))), ("sk".into(), s(keys::BUDGET_SK))]
    }

    /// One try at `ask`'s conditional update: `Ok` the item after it;
    /// `Err(Ok(item))` the condition failed on `item` (empty when DynamoDB
    /// Local returned none).
    async fn try_update(
        &self,
        user: &UserId,
        ask: Ask<'_>,
        now_ms: i64,
        limits: &BudgetConfig,
    ) -> Result<Item, Result<Item, StoreError>> {
        let req = self.client.update_item().table_name(&self.table).set_key(Some(self.budget_key(user).into()));
        let (req, what) = match ask {
            Ask::Turn { slot } => (admission(req, slot, now_ms, limits), "budget_admit"),
            Ask::WebCall => (web_call(req, now_ms, limits), "budget_web"),
        };
        let out = req
            .return_values(ReturnValue::AllNew)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .instrument(tracing::debug_span!("ddb.update_item", what))
            .await;
        match out {
            Ok(o) => Ok(o.attributes.unwrap_or_default()),
            Err(e) => Err(refused_item(&e).ok_or_else(|| backend(e))),
        }
    }

    /// `ask`'s update, tried until it passes or the item it failed on shows
    /// a budget spent — for turns and web calls alike, so no refusal is ever
    /// decided without the count that refused. Between tries, what the
    /// refusal found in the way is tidied: expired slots removed, today
    /// started.
    async fn spend(&self, user: &UserId, ask: Ask<'_>, now_ms: i64, limits: &BudgetConfig) -> Result<Item, Refusal> {
        for _ in 0..TRIES {
            let old = match self.try_update(user, ask, now_ms, limits).await {
                Ok(new) => return Ok(new),
                Err(refused) => refused.map_err(Refusal::Store)?,
            };
            let old = self.or_read(user, old).await.map_err(Refusal::Store)?;
            match refused_by(ask, &old, now_ms, limits) {
                Refused::Over(o) => return Err(o.into()),
                Refused::Expired(expired) => self.forget_slots(user, expired).await.map_err(Refusal::Store)?,
                Refused::PastDay => self.start_day(user, &day_of(now_ms)).await.map_err(Refusal::Store)?,
                // What refused is gone by now: once more.
                Refused::Nothing => {}
            }
        }
        Err(still_refused(ask, now_ms, limits).into())
    }

    /// Starts `today`'s counts at nothing, unless the item already holds
    /// them (a parallel call started it: fine) or a later day's.
    async fn start_day(&self, user: &UserId, today: &str) -> Result<(), StoreError> {
        let out = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(self.budget_key(user).into()))
            .update_expression("SET #day = :today, tokens = :zero, web = :zero")
            .condition_expression("attribute_not_exists(#day) OR #day < :today")
            .expression_attribute_names("#day", "day")
            .expression_attribute_values(":today", s(today))
            .expression_attribute_values(":zero", n(0))
            .send()
            .instrument(tracing::debug_span!("ddb.update_item", what = "budget_day"))
            .await;
        match out {
            Err(e) if refused_item(&e).is_none() => Err(backend(e)),
            _ => Ok(()),
        }
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

    /// The slot's removal, with the turn's tokens counted for today (starting
    /// the day again when the item holds another day's counts) and the counts
    /// of `past` minutes removed.
    async fn give_back(
        &self,
        user: &UserId,
        entry: String,
        tokens: u64,
        today: &str,
        past: &[i64],
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
            expr.push_str(" DELETE active :me");
            req = req.expression_attribute_values(":me", ss(entry.clone()));
            let past = &past[..past.len().min(TIDY_AT_MOST)];
            for (i, m) in past.iter().enumerate() {
                expr.push_str(if i == 0 { " REMOVE " } else { ", " });
                expr.push_str(&format!("#p{i}"));
                req = req.expression_attribute_names(format!("#p{i}"), minute_attr(*m));
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
        let slot = slot_entry(turn, expires_ms);
        let new = self.spend(user, Ask::Turn { slot: &slot }, now_ms, limits).await?;
        let (used, _) = today_counts(&new, &day_of(now_ms));
        let tokens_left = (limits.tokens_per_day > 0).then(|| limits.tokens_per_day.saturating_sub(used));
        Ok(Admitted { tokens_left, past_minutes: past_minutes(&new, minute_of(now_ms)) })
    }

    async fn release(
        &self,
        user: &UserId,
        turn: &TurnId,
        expires_ms: i64,
        tokens: u64,
        now_ms: i64,
        past_minutes: &[i64],
    ) -> Result<(), StoreError> {
        self.give_back(user, slot_entry(turn, expires_ms), tokens, &day_of(now_ms), past_minutes).await
    }

    async fn spend_web_call(&self, user: &UserId, now_ms: i64, limits: &BudgetConfig) -> Result<(), Refusal> {
        self.spend(user, Ask::WebCall, now_ms, limits).await.map(|_| ())
    }

    async fn usage(&self, user: &UserId, now_ms: i64, limits: &BudgetConfig) -> Result<BudgetUsage, StoreError> {
        let item = self.read(user).await?;
        let turns = turns_in(&item, minute_of(now_ms));
        let (tokens, web) = today_counts(&item, &day_of(now_ms));
        let running = active(&item).iter().filter(|e| slot_expires(e) >= now_ms).count() as u64;
        Ok(usage_of(now_ms, limits, tokens, turns, running, web))
    }
}
