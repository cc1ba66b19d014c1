//! The JSON Schema a model sees for a tool's arguments, generated from the
//! argument type's `utoipa::ToSchema` derive (the same derive, field types
//! and input rules as the HTTP edge's OpenAPI document).
//!
//! The contract: [`of`] returns one self-contained object schema: every
//! `$ref` inlined (model APIs take no `$ref`s), no `title`, and
//! [`compact`]ed, since every definition is sent on every request.

use crate::entities::rules;
use crate::ids::{EntityId, ProjectId};
use serde_json::{Map, Value};
use std::collections::HashMap;
use utoipa::openapi::schema::Schema;
use utoipa::openapi::RefOr;
use utoipa::{PartialSchema, ToSchema};

/// How deep references may nest: the argument types are shallow, so this
/// only stops a recursive type from looping.
const MAX_DEPTH: usize = 8;

const REF_PREFIX: &str = "#/components/schemas/";

/// The self-contained JSON Schema of `T`.
pub fn of<T: ToSchema>() -> Value {
    let defs = definitions::<T>();
    let mut v = json(T::schema());
    inline(&mut v, &defs, 0);
    if let Some(o) = v.as_object_mut() {
        o.remove("title");
    }
    compact(&mut v);
    v
}

/// The full JSON Schema of `T`, every `$ref` inlined but nothing left out:
/// types, allowed values, patterns and limits, as the entities API's OpenAPI
/// document has them (`get_field_info`).
pub fn full<T: ToSchema>() -> Value {
    let mut v = json(T::schema());
    resolve(&mut v, &definitions_of::<T>(true));
    v
}

/// Inlines every `$ref` of `v` to a schema of `defs` (by component name).
pub fn resolve(v: &mut Value, defs: &HashMap<String, Value>) {
    inline(v, defs, 0)
}

fn definitions<T: ToSchema>() -> HashMap<String, Value> {
    definitions_of::<T>(false)
}

/// Every schema `T` may refer to by name: what its derive collects, and the
/// text rules and ids its `schema_with` functions point at. Those stand for
/// their type alone: their descriptions explain the patterns and lengths
/// [`compact`] leaves out (kept only with `described`).
fn definitions_of<T: ToSchema>(described: bool) -> HashMap<String, Value> {
    let mut named: Vec<(String, RefOr<Schema>)> = vec![];
    T::schemas(&mut named);
    let mut defs: HashMap<String, Value> = named.into_iter().map(|(n, s)| (n, json(s))).collect();
    let rules = rules::components().into_iter().map(|(n, s)| (n.to_string(), s));
    let ids =
        [(EntityId::name().into_owned(), EntityId::schema()), (ProjectId::name().into_owned(), ProjectId::schema())];
    for (name, schema) in rules.chain(ids) {
        let mut v = json(schema);
        if let Some(o) = v.as_object_mut().filter(|_| !described) {
            o.remove("description");
        }
        defs.insert(name, v);
    }
    defs
}

fn json(s: RefOr<Schema>) -> Value {
    // A utoipa schema is plain data: serializing it cannot fail.
    serde_json::to_value(s).unwrap_or(Value::Null)
}

/// Replaces each `{"$ref": …}` by the schema it names; the reference's own
/// keys (a field's `description`) win over the named schema's.
fn inline(v: &mut Value, defs: &HashMap<String, Value>, depth: usize) {
    match v {
        Value::Object(o) => {
            let target = o.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix(REF_PREFIX));
            if let Some(named) = target.and_then(|n| defs.get(n)).filter(|_| depth < MAX_DEPTH) {
                let mut resolved = named.clone();
                inline(&mut resolved, defs, depth + 1);
                o.remove("$ref");
                if let Value::Object(base) = resolved {
                    let siblings = std::mem::replace(o, base);
                    o.extend(siblings);
                }
            }
            o.values_mut().for_each(|c| inline(c, defs, depth));
        }
        Value::Array(items) => items.iter_mut().for_each(|c| inline(c, defs, depth)),
        _ => {}
    }
}

/// The keys that tell a model nothing it needs (docs/local-stack.md, "Prompt
/// size"): integer `format`s are Rust's widths; a `pattern` restates a rule
/// the server enforces and answers readably; text lengths are limits no
/// reasonable call reaches. A list's `maxItems` stays when it is at most
/// [`MEANINGFUL_ITEMS`]: a plan's stages and steps are bounds a call does
/// reach, and a model server that constrains output to the schema closes the
/// list there instead of repeating an item until the token limit.
const NOISE: [&str; 5] = ["format", "pattern", "minLength", "maxLength", "title"];

/// The largest `maxItems` that still says something about a call; wider
/// ones (`document_ids`' 100) are limits no reasonable call reaches.
const MEANINGFUL_ITEMS: u64 = 16;

/// The largest bound that still says something about a value; wider ones
/// only restate a storage width (`u32`, JavaScript's safe integers).
const MEANINGFUL_BOUND: i64 = u16::MAX as i64;

/// Drops what tells the model nothing it needs, to keep the prompt small for
/// small local windows: the [`NOISE`] keys, an optional field's
/// `"default": null` and the `null` in its type or `oneOf` (not `required`
/// already says it may be left out, and absent and null read the same), and
/// bounds beyond [`MEANINGFUL_BOUND`]. Property names are data, never noise.
pub fn compact(v: &mut Value) {
    let Value::Object(o) = v else { return };
    drop_null_alternatives(o);
    if o.get("default") == Some(&Value::Null) {
        o.remove("default");
    }
    for k in NOISE {
        o.remove(k);
    }
    if o.get("maxItems").and_then(Value::as_u64).is_some_and(|n| n > MEANINGFUL_ITEMS) {
        o.remove("maxItems");
    }
    for k in ["minimum", "maximum"] {
        if o.get(k).and_then(Value::as_f64).is_some_and(|b| b.abs() > MEANINGFUL_BOUND as f64) {
            o.remove(k);
        }
    }
    if let Some(Value::Object(properties)) = o.get_mut("properties") {
        properties.values_mut().for_each(compact);
    }
    for k in ["items", "additionalProperties"] {
        if let Some(sub) = o.get_mut(k) {
            compact(sub);
        }
    }
    for k in ["oneOf", "anyOf", "allOf"] {
        if let Some(Value::Array(alternatives)) = o.get_mut(k) {
            alternatives.iter_mut().for_each(compact);
        }
    }
}

fn is_null_type(v: &Value) -> bool {
    v.as_object().is_some_and(|o| o.len() == 1 && o.get("type") == Some(&Value::String("null".into())))
}

/// `"type": ["string", "null"]` becomes `"type": "string"`, a `null` in an
/// `enum` goes, and `oneOf: [{"type": "null"}, X]` becomes X (keeping the
/// field's own keys, such as its description).
fn drop_null_alternatives(o: &mut Map<String, Value>) {
    // The `oneOf` first: the alternative it leaves may bring its own `null`s.
    if let Some(Value::Array(alternatives)) = o.get_mut("oneOf") {
        alternatives.retain(|a| !is_null_type(a));
        if alternatives.len() == 1 {
            if let Some(Value::Object(only)) = alternatives.pop() {
                o.remove("oneOf");
                for (k, v) in only {
                    o.entry(k).or_insert(v);
                }
            }
        }
    }
    if let Some(Value::Array(types)) = o.get_mut("type") {
        types.retain(|t| t != "null");
        if types.len() == 1 {
            let only = types.remove(0);
            o.insert("type".into(), only);
        }
    }
    if let Some(Value::Array(values)) = o.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }
}
