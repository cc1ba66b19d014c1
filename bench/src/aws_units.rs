//! Request units by AWS's published rules, from the items a request reads and
//! writes (issue 42 #4): DynamoDB Local's `ConsumedCapacity` differs from
//! AWS's (it bills an empty `Query` 0, and a transaction's items by other
//! sizes), so the bench computes AWS's figure itself.
//!
//! The rules (docs/cost.md cites AWS's pages):
//! - item size: attribute names' UTF-8 bytes + values (string: UTF-8 bytes;
//!   number: 1 byte per two significant digits + 1; binary: raw bytes;
//!   bool/null: 1; list/map: 3 + each element + 1 byte per element);
//! - a write: 1 WRU per started KB of the larger of the item before and
//!   after, ×2 in a transaction; a keys-only index entry put or deleted
//!   costs 1 WRU each (moving its key: a delete and a put);
//! - a read: per started 4 KB, 1 RRU strongly consistent, 0.5 eventually; a
//!   `Query` sums its items' sizes before rounding, a `GetItem` or
//!   `BatchGetItem` rounds each item; an empty read still costs the minimum.
//!   A projection does not lower the size billed: the whole item is.

use aws_sdk_dynamodb::types::AttributeValue;
use std::collections::HashMap;

pub type Item = HashMap<String, AttributeValue>;

/// The size AWS bills for `item`, in bytes.
pub fn item_size(item: &Item) -> usize {
    item.iter().map(|(k, v)| k.len() + value_size(v)).sum()
}

fn value_size(v: &AttributeValue) -> usize {
    match v {
        AttributeValue::S(s) => s.len(),
        AttributeValue::N(n) => number_size(n),
        AttributeValue::B(b) => b.as_ref().len(),
        AttributeValue::Bool(_) | AttributeValue::Null(_) => 1,
        AttributeValue::L(l) => 3 + l.iter().map(|e| 1 + value_size(e)).sum::<usize>(),
        AttributeValue::M(m) => 3 + m.iter().map(|(k, e)| 1 + k.len() + value_size(e)).sum::<usize>(),
        AttributeValue::Ss(ss) => ss.iter().map(String::len).sum(),
        AttributeValue::Ns(ns) => ns.iter().map(|n| number_size(n)).sum(),
        AttributeValue::Bs(bs) => bs.iter().map(|b| b.as_ref().len()).sum(),
        _ => 0,
    }
}

/// 1 byte per two significant digits, plus 1 (leading and trailing zeroes trimmed).
fn number_size(n: &str) -> usize {
    let digits: String = n.chars().filter(char::is_ascii_digit).collect();
    let significant = digits.trim_start_matches('0').trim_end_matches('0').len().max(1);
    significant.div_ceil(2) + 1
}

/// WRU of one standard write of an item `old` → `new` bytes.
pub fn write_units(old: usize, new: usize) -> f64 {
    old.max(new).div_ceil(1024).max(1) as f64
}

/// RRU of reading `bytes` (rounded up as one).
pub fn read_units(bytes: usize, consistent: bool) -> f64 {
    let units = bytes.div_ceil(4096).max(1) as f64;
    if consistent {
        units
    } else {
        units / 2.0
    }
}

/// The sizes of the items seen so far, by key: what a write replaces, what a
/// projected read is billed for.
#[derive(Debug, Default)]
pub struct Sizes(HashMap<String, (usize, Option<String>)>);

/// `pk|sk` of an item or key.
pub fn key_of(item: &Item) -> String {
    let s = |k: &str| item.get(k).and_then(|v| v.as_s().ok()).cloned().unwrap_or_default();
    format!("{}|{}", s("pk"), s("sk"))
}

fn gsi2(item: &Item) -> Option<String> {
    item.get("gsi2sk").and_then(|v| v.as_s().ok()).cloned()
}

impl Sizes {
    /// A whole item read or written: remembered. Returns the size before.
    pub fn saw(&mut self, item: &Item) -> (usize, Option<String>) {
        let before = self.0.insert(key_of(item), (item_size(item), gsi2(item)));
        before.unwrap_or((0, None))
    }

    /// The size billed for reading `item`: the whole item's, as last seen,
    /// when the read was projected (it holds fewer attributes than that).
    pub fn billed(&mut self, item: &Item) -> usize {
        let key = key_of(item);
        let size = item_size(item);
        match self.0.get(&key) {
            Some((whole, _)) if *whole > size => *whole,
            _ if item.contains_key("pk") && item.contains_key("sk") => {
                self.saw(item);
                size
            }
            _ => size,
        }
    }

    pub fn size(&self, key: &str) -> Option<usize> {
        self.0.get(key).map(|(s, _)| *s)
    }

    /// WRU of a standard write leaving `new` (deleted: `None`) at `key`, as
    /// (the table's, the index's): the sessions' keys-only index (`gsi2`)
    /// costs a put when its key appears, a delete when it goes, both when it
    /// moves, nothing when it stays.
    pub fn written(&mut self, key: &str, new: Option<&Item>) -> (f64, f64) {
        let (old, old_gsi) = self.0.get(key).cloned().unwrap_or((0, None));
        let new_gsi = new.and_then(gsi2);
        let index = match (&old_gsi, &new_gsi) {
            (Some(a), Some(b)) if a == b => 0.0,
            (Some(_), Some(_)) => 2.0,
            (None, None) => 0.0,
            _ => 1.0,
        };
        let new_size = new.map_or(0, item_size);
        match new {
            Some(_) => self.0.insert(key.to_string(), (new_size, new_gsi)),
            None => self.0.remove(key),
        };
        (write_units(old, new_size), index)
    }
}

/// What a request will be billed for, taken from its input before it is
/// sent; [`Plan::units`] finishes the sum from its output.
#[derive(Debug, Clone)]
pub enum Plan {
    Put(Item),
    /// Sent with `ReturnValues = ALL_NEW` (set by the meter when the caller
    /// asked for nothing), so the item after is known.
    Update(String),
    Delete(String),
    /// Each item: its key and, for a put, the item.
    Transact(Vec<(String, Option<Item>)>),
    Get {
        consistent: bool,
    },
    Query {
        consistent: bool,
        index: bool,
    },
    BatchGet {
        consistent: bool,
    },
    BatchWrite(Vec<(String, Option<Item>)>),
}

impl Plan {
    /// The plan of `input` (`None`: not an operation a turn makes). Asks an
    /// `UpdateItem` that asked for nothing back for the item after.
    pub fn of(input: &mut aws_smithy_runtime_api::client::interceptors::context::Input) -> Option<Plan> {
        use aws_sdk_dynamodb::operation::*;
        use aws_sdk_dynamodb::types::ReturnValue;
        if let Some(i) = input.downcast_mut::<update_item::UpdateItemInput>() {
            if matches!(i.return_values, None | Some(ReturnValue::None)) {
                i.return_values = Some(ReturnValue::AllNew);
            }
            return Some(Plan::Update(key_of(i.key.as_ref()?)));
        }
        if let Some(i) = input.downcast_ref::<put_item::PutItemInput>() {
            return Some(Plan::Put(i.item.clone()?));
        }
        if let Some(i) = input.downcast_ref::<delete_item::DeleteItemInput>() {
            return Some(Plan::Delete(key_of(i.key.as_ref()?)));
        }
        if let Some(i) = input.downcast_ref::<get_item::GetItemInput>() {
            return Some(Plan::Get { consistent: i.consistent_read == Some(true) });
        }
        if let Some(i) = input.downcast_ref::<query::QueryInput>() {
            return Some(Plan::Query { consistent: i.consistent_read == Some(true), index: i.index_name.is_some() });
        }
        if let Some(i) = input.downcast_ref::<batch_get_item::BatchGetItemInput>() {
            let consistent = i.request_items.iter().flatten().all(|(_, k)| k.consistent_read == Some(true));
            return Some(Plan::BatchGet { consistent });
        }
        if let Some(i) = input.downcast_ref::<transact_write_items::TransactWriteItemsInput>() {
            let parts = i
                .transact_items
                .iter()
                .flatten()
                .filter_map(|t| match (&t.put, &t.update, &t.condition_check, &t.delete) {
                    (Some(p), ..) => Some((key_of(&p.item), Some(p.item.clone()))),
                    (_, Some(u), ..) => Some((key_of(&u.key), None)),
                    (_, _, Some(c), _) => Some((key_of(&c.key), None)),
                    (.., Some(d)) => Some((key_of(&d.key), None)),
                    _ => None,
                })
                .collect();
            return Some(Plan::Transact(parts));
        }
        if let Some(i) = input.downcast_ref::<batch_write_item::BatchWriteItemInput>() {
            let parts = i
                .request_items
                .iter()
                .flatten()
                .flat_map(|(_, w)| w.iter())
                .filter_map(|w| match (&w.put_request, &w.delete_request) {
                    (Some(p), _) => Some((key_of(&p.item), Some(p.item.clone()))),
                    (_, Some(d)) => Some((key_of(&d.key), None)),
                    _ => None,
                })
                .collect();
            return Some(Plan::BatchWrite(parts));
        }
        None
    }

    /// (RRU, WRU) by AWS's rules, given the request's output.
    pub fn units(
        &self,
        sizes: &mut Sizes,
        output: &aws_smithy_runtime_api::client::interceptors::context::Output,
    ) -> (f64, f64) {
        use aws_sdk_dynamodb::operation::*;
        let sum = |(t, i): (f64, f64)| t + i;
        match self {
            Plan::Put(item) => (0.0, sum(sizes.written(&key_of(item), Some(item)))),
            Plan::Update(key) => {
                let after = output.downcast_ref::<update_item::UpdateItemOutput>().and_then(|o| o.attributes.clone());
                match after {
                    Some(item) => (0.0, sum(sizes.written(key, Some(&item)))),
                    // Asked for something else back: billed as the item seen before.
                    None => (0.0, write_units(sizes.size(key).unwrap_or(0), 0)),
                }
            }
            Plan::Delete(key) => (0.0, sum(sizes.written(key, None))),
            // Each item twice; an update's item as last seen (its size after
            // is not returned by a transaction).
            Plan::Transact(parts) => {
                let units = parts
                    .iter()
                    .map(|(key, put)| match put {
                        Some(item) => {
                            let (table, index) = sizes.written(key, Some(item));
                            2.0 * table + index
                        }
                        None => 2.0 * write_units(sizes.size(key).unwrap_or(0), 0),
                    })
                    .sum();
                (0.0, units)
            }
            Plan::BatchWrite(parts) => {
                (0.0, parts.iter().map(|(key, put)| sum(sizes.written(key, put.as_ref()))).sum())
            }
            Plan::Get { consistent } => {
                let item = output.downcast_ref::<get_item::GetItemOutput>().and_then(|o| o.item.as_ref());
                (read_units(item.map_or(0, |i| sizes.billed(i)), *consistent), 0.0)
            }
            Plan::Query { consistent, index } => {
                let items = output.downcast_ref::<query::QueryOutput>().map(|o| o.items()).unwrap_or_default();
                // A keys-only index's entries are what is read there.
                let bytes: usize = items.iter().map(|i| if *index { item_size(i) } else { sizes.billed(i) }).sum();
                (read_units(bytes, *consistent), 0.0)
            }
            Plan::BatchGet { consistent } => {
                let out = output.downcast_ref::<batch_get_item::BatchGetItemOutput>();
                let items: Vec<&Item> =
                    out.and_then(|o| o.responses.as_ref()).into_iter().flat_map(|r| r.values().flatten()).collect();
                (items.iter().map(|i| read_units(sizes.billed(i), *consistent)).sum(), 0.0)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> AttributeValue {
        AttributeValue::S(v.into())
    }

    /// AWS's own examples (CapacityUnitCalculations, read-write-operations).
    #[test]
    fn sizes_and_units_follow_aws_examples() {
        // A string attribute: name bytes + value bytes.
        let item: Item = [("pk".to_string(), s("abc")), ("n".to_string(), AttributeValue::N("123.45".into()))].into();
        // "pk" 2 + "abc" 3; "n" 1 + 5 digits → 3 + 1 = 4.
        assert_eq!(item_size(&item), 2 + 3 + 1 + 4);
        assert_eq!(number_size("1000"), 2, "trailing zeroes trimmed");
        let l: Item = [("l".to_string(), AttributeValue::L(vec![s("ab"), AttributeValue::Bool(true)]))].into();
        assert_eq!(item_size(&l), 1 + 3 + (1 + 2) + (1 + 1));
        // "reading a 3,500-byte item consumes the same as a 4 KB item";
        // an 8 KB item: 2 strongly consistent, 1 eventually consistent.
        assert_eq!(read_units(3500, true), 1.0);
        assert_eq!(read_units(8192, true), 2.0);
        assert_eq!(read_units(8192, false), 1.0);
        assert_eq!(read_units(0, false), 0.5, "an empty read still costs the minimum");
        // A write: per started KB of the larger of before and after.
        assert_eq!(write_units(0, 500), 1.0);
        assert_eq!(write_units(1500, 900), 2.0);
    }

    #[test]
    fn the_index_key_costs_only_when_it_appears_moves_or_goes() {
        let mut sizes = Sizes::default();
        let at =
            |g: &str| -> Item { [("pk".into(), s("P")), ("sk".into(), s("SESSION")), ("gsi2sk".into(), s(g))].into() };
        assert_eq!(sizes.written("P|SESSION", Some(&at("1"))), (1.0, 1.0), "put + index put");
        assert_eq!(sizes.written("P|SESSION", Some(&at("1"))), (1.0, 0.0), "unchanged key: no index write");
        assert_eq!(sizes.written("P|SESSION", Some(&at("2"))), (1.0, 2.0), "moved: index delete + put");
        assert_eq!(sizes.written("P|SESSION", None), (1.0, 1.0), "deleted: index delete");
    }
}
