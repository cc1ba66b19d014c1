//! The dates the model gives the entity tools (a task's or milestone's
//! `due_at`, a goal's `target_at`): as text, read in the user's zone, never
//! as a number.
//!
//! The stored field is milliseconds since the epoch (the HTTP API's shape is
//! unchanged), but a model cannot do that arithmetic: asked for "a task
//! Order compost" a small model sent `due_at: 1633072800000` (October 2021),
//! a date nobody gave. So in the chat tools:
//! - a date is `2026-12-10`, a local time `2026-12-10T17:00` (the user's
//!   zone) or an instant with an offset; the schema the model sees says so;
//! - a number is refused (`invalid_arguments`: give the date as text, or
//!   leave the field out when the user named none);
//! - a date before today (a time before now) is refused the same way: a
//!   past due date is almost always invented. The user can still set one in
//!   the entity's own form.
//!
//! `null` stays `null` (an update clears the field with it); an empty text
//! is the field left out.

use super::outcome::Refusal;
use crate::calendar::{EventTime, Zone};
use chrono::{DateTime, Utc};
use serde_json::{json, Map, Value};

/// The description the model reads for a date field.
pub const DESCRIBED: &str = "A date as text: 2026-12-10, or a local time 2026-12-10T17:00 in the user's zone. \
    Only a date the user gave; omit it otherwise. Not a number, not in the past.";

/// Reads each of `fields` present in `raw` into milliseconds (see the
/// module's rules); `now_ms` is the present.
pub fn read(raw: &mut Map<String, Value>, fields: &[&str], zone: Zone, now_ms: i64) -> Result<(), Refusal> {
    for &f in fields {
        let Some(v) = raw.get(f) else { continue };
        // An empty text is the field left out: the local model filled
        // `due_at: ""` into "Add a task called Book the venue", was refused
        // and gave the task up.
        if v.as_str().is_some_and(|s| s.trim().is_empty()) {
            raw.remove(f);
            continue;
        }
        let ms = match v {
            Value::Null => continue,
            Value::String(s) => at(f, s, zone, now_ms)?,
            Value::Number(_) => {
                return Err(Refusal::Args(format!(
                    "{f}: give the date as text (2026-12-10, or 2026-12-10T17:00 in the user's zone), not a \
                     number; leave {f} out when the user named no date"
                )))
            }
            _ => return Err(Refusal::Args(format!("{f}: a date as text, such as 2026-12-10"))),
        };
        raw.insert(f.to_string(), json!(ms));
    }
    Ok(())
}

/// One date's instant in ms, refused when it is not a date or is past.
fn at(field: &str, s: &str, zone: Zone, now_ms: i64) -> Result<i64, Refusal> {
    let t = EventTime::parse_in(s, zone).map_err(|e| Refusal::Args(format!("{field}: {e}")))?;
    let now = DateTime::<Utc>::from_timestamp_millis(now_ms).unwrap_or_default();
    let today = zone.local(now).date_naive();
    let past = match t {
        EventTime::Date(d) => d < today,
        EventTime::At(i) => i < now,
    };
    if past {
        return Err(Refusal::Args(format!(
            "{field}: {} is in the past (today is {today}); use the date the user gave, or leave {field} out",
            s.trim()
        )));
    }
    Ok(t.instant(zone).timestamp_millis())
}

/// `schema` (a tool's parameters) with each of `fields` described as a date
/// in text, as [`read`] takes it.
pub fn described(mut schema: Value, fields: &[&str]) -> Value {
    for &f in fields {
        if let Some(p) = schema.pointer_mut(&format!("/properties/{f}")) {
            *p = json!({ "type": "string", "description": DESCRIBED });
        }
    }
    schema
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-12-07T12:00:00Z.
    const NOW: i64 = 1_796_644_800_000;

    fn berlin() -> Zone {
        Zone::parse("Europe/Berlin").unwrap()
    }

    fn read_one(v: Value) -> Result<Value, String> {
        let mut raw = json!({ "title": "Order compost", "due_at": v }).as_object().unwrap().clone();
        match read(&mut raw, &["due_at"], berlin(), NOW) {
            Ok(()) => Ok(raw["due_at"].clone()),
            Err(Refusal::Args(m)) => Err(m),
            Err(other) => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_date_in_text_is_read_in_the_users_zone() {
        // Midnight of 10 Dec in Berlin is 23:00 UTC the day before.
        assert_eq!(read_one(json!("2026-12-10")), Ok(json!(1_796_857_200_000_i64)));
        assert_eq!(read_one(json!("2026-12-10T17:00")), Ok(json!(1_796_918_400_000_i64)));
        assert_eq!(read_one(json!("2026-12-07")), Ok(json!(1_796_598_000_000_i64)), "today is not past");
        assert_eq!(read_one(Value::Null), Ok(Value::Null), "null clears");
    }

    /// The local model's `due_at: ""` for a task with no date: left out, not refused.
    #[test]
    fn an_empty_text_is_the_field_left_out() {
        for empty in ["", "  "] {
            let mut raw = json!({ "title": "Book the venue", "due_at": empty }).as_object().unwrap().clone();
            assert!(read(&mut raw, &["due_at"], berlin(), NOW).is_ok(), "{empty:?}");
            assert!(!raw.contains_key("due_at"), "{raw:?}");
        }
    }

    #[test]
    fn an_epoch_number_or_a_past_date_is_refused_with_words_the_model_reads() {
        // The invented value of issue 40.
        let number = read_one(json!(1_633_072_800_000_i64)).unwrap_err();
        assert!(number.contains("not a number") && number.contains("leave due_at out"), "{number}");
        let past = read_one(json!("2021-10-01")).unwrap_err();
        assert!(past.contains("in the past") && past.contains("today is 2026-12-07"), "{past}");
        assert!(read_one(json!("2026-12-07T09:00")).unwrap_err().contains("in the past"));
        assert!(read_one(json!("next friday")).unwrap_err().starts_with("due_at: "));
        assert!(read_one(json!(true)).is_err());
    }

    #[test]
    fn the_schema_describes_the_date_as_text() {
        let s = json!({"properties": {"due_at": {"type": "integer"}, "title": {"type": "string"}}});
        let s = described(s, &["due_at", "target_at"]);
        assert_eq!(s["properties"]["due_at"]["type"], "string");
        assert_eq!(s["properties"]["title"]["type"], "string");
        assert!(s["properties"].get("target_at").is_none());
    }
}
