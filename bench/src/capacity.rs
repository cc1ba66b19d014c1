//! What a turn costs in DynamoDB (issue 30): an interceptor on the bench's
//! DynamoDB client asks every request for `ReturnConsumedCapacity = TOTAL`
//! and records what each answer says it consumed, with when it answered and
//! whether it was a frame log batch. [`by_phase`] sums a turn's records:
//! before the model (answered before the model request left), the frame log
//! (its batch `PutItem`s), and the rest of the turn (the start record beside
//! the model, the closing transaction, the budget's release after `done`).
//!
//! On-demand prices (us-east-1): read request units $0.125 per million,
//! write request units $0.625 per million. A record's `read`/`write` are
//! AWS's units by its published rules ([`crate::aws_units`], from the items
//! read and written); `local_*` are what DynamoDB Local reported, kept beside
//! them (Local bills an empty `Query` 0 and a transaction's items its own way).

use crate::aws_units::{Plan, Sizes};
use aws_sdk_dynamodb::config::interceptors::{
    AfterDeserializationInterceptorContextRef, BeforeSerializationInterceptorContextMut,
};
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_dynamodb::operation;
use aws_sdk_dynamodb::types::{ConsumedCapacity, ReturnConsumedCapacity};
use aws_smithy_types::config_bag::{Storable, StoreReplace};
use std::sync::{Arc, Mutex};
use tokio::time::Instant;

/// $ per million read request units, on demand, us-east-1.
pub const RRU_PER_MILLION: f64 = 0.125;
/// $ per million write request units, on demand, us-east-1.
pub const WRU_PER_MILLION: f64 = 0.625;

/// One answered request.
#[derive(Debug, Clone)]
pub struct Consumed {
    pub at: Instant,
    /// The operation and what it was for (`ddb.*` span's `what` when the
    /// request ran in one).
    pub op: String,
    pub frames: bool,
    /// AWS's units ([`crate::aws_units`]).
    pub read: f64,
    pub write: f64,
    /// DynamoDB Local's `ConsumedCapacity`.
    pub local_read: f64,
    pub local_write: f64,
}

#[derive(Debug, Clone, Default)]
pub struct Meter(Arc<Mutex<Vec<Consumed>>>, Arc<Mutex<Sizes>>);

impl Meter {
    /// Everything recorded so far, which is then forgotten.
    pub fn take(&self) -> Vec<Consumed> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }

    /// A DynamoDB client like `tests::dynamo_client`, metered.
    pub async fn client(&self) -> aws_sdk_dynamodb::Client {
        let base = tests::dynamo_client().await;
        let conf = base.config().to_builder().interceptor(self.clone()).build();
        aws_sdk_dynamodb::Client::from_conf(conf)
    }
}

/// What the request was, kept between serialization and the answer.
#[derive(Debug, Clone)]
struct Label {
    op: String,
    frames: bool,
    plan: Option<Plan>,
}

impl Storable for Label {
    type Storer = StoreReplace<Self>;
}

macro_rules! with_capacity {
    ($input:expr, $($ty:ty => $op:literal),*) => {{
        $(
            if let Some(i) = $input.downcast_mut::<$ty>() {
                i.return_consumed_capacity = Some(ReturnConsumedCapacity::Total);
                Some($op)
            } else
        )* { None }
    }};
}

fn units(c: &[ConsumedCapacity]) -> f64 {
    c.iter().map(|c| c.capacity_units.unwrap_or(0.0)).sum()
}

/// The capacity an answer reports, and whether it was a read.
fn consumed(output: &aws_smithy_runtime_api::client::interceptors::context::Output) -> Option<(f64, bool)> {
    use operation::*;
    let one = |c: Option<&ConsumedCapacity>| c.and_then(|c| c.capacity_units).unwrap_or(0.0);
    if let Some(o) = output.downcast_ref::<get_item::GetItemOutput>() {
        return Some((one(o.consumed_capacity.as_ref()), true));
    }
    if let Some(o) = output.downcast_ref::<query::QueryOutput>() {
        return Some((one(o.consumed_capacity.as_ref()), true));
    }
    if let Some(o) = output.downcast_ref::<batch_get_item::BatchGetItemOutput>() {
        return Some((units(o.consumed_capacity.as_deref().unwrap_or_default()), true));
    }
    if let Some(o) = output.downcast_ref::<put_item::PutItemOutput>() {
        return Some((one(o.consumed_capacity.as_ref()), false));
    }
    if let Some(o) = output.downcast_ref::<update_item::UpdateItemOutput>() {
        return Some((one(o.consumed_capacity.as_ref()), false));
    }
    if let Some(o) = output.downcast_ref::<delete_item::DeleteItemOutput>() {
        return Some((one(o.consumed_capacity.as_ref()), false));
    }
    if let Some(o) = output.downcast_ref::<transact_write_items::TransactWriteItemsOutput>() {
        return Some((units(o.consumed_capacity.as_deref().unwrap_or_default()), false));
    }
    if let Some(o) = output.downcast_ref::<batch_write_item::BatchWriteItemOutput>() {
        return Some((units(o.consumed_capacity.as_deref().unwrap_or_default()), false));
    }
    None
}

impl Intercept for Meter {
    fn name(&self) -> &'static str {
        "bench capacity meter"
    }

    fn modify_before_serialization(
        &self,
        context: &mut BeforeSerializationInterceptorContextMut<'_>,
        _rc: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), aws_smithy_runtime_api::box_error::BoxError> {
        use operation::*;
        let input = context.input_mut();
        let frames = input
            .downcast_ref::<put_item::PutItemInput>()
            .and_then(|p| p.item.as_ref()?.get("sk")?.as_s().ok().map(|sk| sk.starts_with("FRAMES#")))
            .unwrap_or(false);
        let op = with_capacity!(input,
            get_item::GetItemInput => "GetItem",
            query::QueryInput => "Query",
            batch_get_item::BatchGetItemInput => "BatchGetItem",
            put_item::PutItemInput => "PutItem",
            update_item::UpdateItemInput => "UpdateItem",
            delete_item::DeleteItemInput => "DeleteItem",
            transact_write_items::TransactWriteItemsInput => "TransactWriteItems",
            batch_write_item::BatchWriteItemInput => "BatchWriteItem");
        if let Some(op) = op {
            let op = format!("{op} {}", what(context.input_mut()));
            let plan = Plan::of(context.input_mut());
            cfg.interceptor_state().store_put(Label { op: op.trim().to_string(), frames, plan });
        }
        Ok(())
    }

    fn read_after_deserialization(
        &self,
        context: &AfterDeserializationInterceptorContextRef<'_>,
        _rc: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), aws_smithy_runtime_api::box_error::BoxError> {
        let Some(label) = cfg.load::<Label>().cloned() else { return Ok(()) };
        let Ok(output) = context.output_or_error() else { return Ok(()) };
        if let Some((units, read)) = consumed(output) {
            let (local_read, local_write) = if read { (units, 0.0) } else { (0.0, units) };
            let (read, write) = match &label.plan {
                Some(plan) => plan.units(&mut self.1.lock().unwrap(), output),
                None => (local_read, local_write),
            };
            let (at, op, frames) = (Instant::now(), label.op.clone(), label.frames);
            self.0.lock().unwrap().push(Consumed { at, op, frames, read, write, local_read, local_write });
        }
        Ok(())
    }
}

/// What a request is for: its item's sort key up to the first `#` (`SESSION`,
/// `MSG`, `TURN`, `BUDGET`, …), the items of a transaction.
fn what(input: &mut aws_smithy_runtime_api::client::interceptors::context::Input) -> String {
    use aws_sdk_dynamodb::types::AttributeValue;
    use operation::*;
    let sk = |m: Option<&std::collections::HashMap<String, AttributeValue>>| {
        m.and_then(|m| m.get("sk")?.as_s().ok()).map(|s| s.split('#').next().unwrap_or("").to_string())
    };
    let one = if let Some(i) = input.downcast_ref::<update_item::UpdateItemInput>() {
        sk(i.key.as_ref())
    } else if let Some(i) = input.downcast_ref::<put_item::PutItemInput>() {
        sk(i.item.as_ref())
    } else if let Some(i) = input.downcast_ref::<get_item::GetItemInput>() {
        sk(i.key.as_ref())
    } else if let Some(i) = input.downcast_ref::<transact_write_items::TransactWriteItemsInput>() {
        let parts: Vec<String> = i
            .transact_items
            .iter()
            .flatten()
            .filter_map(|t| {
                let (kind, key) = match (&t.put, &t.update, &t.condition_check, &t.delete) {
                    (Some(p), _, _, _) => ("put", sk(Some(&p.item))),
                    (_, Some(u), _, _) => ("update", sk(Some(&u.key))),
                    (_, _, Some(c), _) => ("check", sk(Some(&c.key))),
                    (_, _, _, Some(d)) => ("delete", sk(Some(&d.key))),
                    _ => return None,
                };
                Some(format!("{kind} {}", key.unwrap_or_default()))
            })
            .collect();
        Some(format!("[{}]", parts.join(", ")))
    } else {
        None
    };
    one.unwrap_or_default()
}

/// One phase's sum over a turn.
#[derive(Debug, Clone, Copy, Default)]
pub struct Phase {
    pub requests: f64,
    /// AWS's units.
    pub read: f64,
    pub write: f64,
    /// DynamoDB Local's.
    pub local_read: f64,
    pub local_write: f64,
}

impl Phase {
    fn add(&mut self, c: &Consumed) {
        self.requests += 1.0;
        self.read += c.read;
        self.write += c.write;
        self.local_read += c.local_read;
        self.local_write += c.local_write;
    }

    fn plus(mut self, p: &Phase) -> Phase {
        self.requests += p.requests;
        self.read += p.read;
        self.write += p.write;
        self.local_read += p.local_read;
        self.local_write += p.local_write;
        self
    }

    fn over(self, n: f64) -> Phase {
        Phase {
            requests: self.requests / n,
            read: self.read / n,
            write: self.write / n,
            local_read: self.local_read / n,
            local_write: self.local_write / n,
        }
    }

    /// $ per 1,000 turns of this phase, at on-demand prices.
    pub fn dollars_per_1000(&self) -> f64 {
        1000.0 * (self.read * RRU_PER_MILLION + self.write * WRU_PER_MILLION) / 1e6
    }
}

/// A turn's phases: before the model, the frame log, the rest of the turn.
#[derive(Debug, Clone, Copy, Default)]
pub struct Phases {
    pub before_model: Phase,
    pub frame_log: Phase,
    pub rest: Phase,
}

impl Phases {
    pub fn total(&self) -> Phase {
        [self.before_model, self.frame_log, self.rest].iter().fold(Phase::default(), Phase::plus)
    }
}

/// The records answered in `[from, to)`, by phase, `model` being when the
/// turn's model request left (`None`: everything counts as the rest).
pub fn by_phase(records: &[Consumed], from: Instant, to: Instant, model: Option<Instant>) -> Phases {
    let mut p = Phases::default();
    for c in records.iter().filter(|c| c.at >= from && c.at < to) {
        if c.frames {
            p.frame_log.add(c);
        } else if model.is_some_and(|m| c.at <= m) {
            p.before_model.add(c);
        } else {
            p.rest.add(c);
        }
    }
    p
}

/// The mean of phases over turns.
pub fn mean(turns: &[Phases]) -> Phases {
    let n = turns.len().max(1) as f64;
    let avg = |f: &dyn Fn(&Phases) -> Phase| turns.iter().map(f).fold(Phase::default(), |a, p| a.plus(&p)).over(n);
    Phases { before_model: avg(&|p| p.before_model), frame_log: avg(&|p| p.frame_log), rest: avg(&|p| p.rest) }
}

/// Request units by operation over `records` divided by `turns`: which
/// requests a turn's units go to.
pub fn by_op(records: &[Consumed], turns: usize) -> Vec<(String, f64, f64, f64)> {
    let mut m: std::collections::BTreeMap<String, (f64, f64, f64)> = Default::default();
    for c in records {
        let e = m.entry(if c.frames { "PutItem FRAMES (frame log)".into() } else { c.op.clone() }).or_default();
        e.0 += 1.0;
        e.1 += c.read;
        e.2 += c.write;
    }
    let n = turns.max(1) as f64;
    m.into_iter().map(|(k, (r, rd, w))| (k, r / n, rd / n, w / n)).collect()
}
