//! Values as a person reads them: the one place the approval card, the
//! operation lines and the history word dates, priorities, field names and
//! listings, so none of them shows an epoch number or an id.
//!
//! - A timestamp (ms since the epoch) is a date in the user's zone
//!   (`Thu 10 Dec 2026`), with its local time when it is not midnight
//!   (`Thu 10 Dec 2026, 17:00`).
//! - A task's priority is named (`1` is `highest`); a field is named by what
//!   it means (`due_at` is `due`).
//! - A listing says how many it found over what range: `Listed 3 events,
//!   1–7 Dec`, never a made-up entity name.

use crate::calendar::{EventTime, Zone};
use chrono::{DateTime, Datelike, NaiveDate, Timelike, Utc};
use serde_json::Value;

/// The fields whose value is a date: a timestamp (ms since the epoch) or,
/// as the tools take them, text (`2026-12-10`, `2026-12-10T17:00`).
pub const DATE_FIELDS: &[&str] = &["due_at", "target_at", "start", "end"];

/// A timestamp in `zone`: the date, and the local time unless it is midnight.
/// One outside chrono's range reads as the number it is.
pub fn when(ms: i64, zone: Zone) -> String {
    let Some(t) = DateTime::<Utc>::from_timestamp_millis(ms) else { return ms.to_string() };
    let local = zone.local(t);
    if local.hour() == 0 && local.minute() == 0 {
        local.format("%a %-d %b %Y").to_string()
    } else {
        local.format("%a %-d %b %Y, %H:%M").to_string()
    }
}

/// A task's priority by name: 1 `highest` … 5 `lowest`.
pub fn priority(p: i64) -> Option<&'static str> {
    Some(match p {
        1 => "highest",
        2 => "high",
        3 => "medium",
        4 => "low",
        5 => "lowest",
        _ => return None,
    })
}

/// A field's name as the card shows it.
pub fn field(key: &str) -> String {
    match key {
        "due_at" => "due".into(),
        "target_at" => "target date".into(),
        "parent_id" => "parent".into(),
        "project_id" => "project".into(),
        "duration_minutes" => "duration (minutes)".into(),
        k => k.trim_end_matches("_id").replace('_', " "),
    }
}

/// A field's new value as the card shows it: dates in `zone`, priorities
/// named, text quoted (at most 80 characters), `null` as cleared.
pub fn value(key: &str, v: &Value, zone: Zone) -> String {
    match v {
        Value::Null => "(cleared)".into(),
        Value::Number(n) if DATE_FIELDS.contains(&key) => match n.as_i64() {
            Some(ms) => when(ms, zone),
            None => n.to_string(),
        },
        Value::Number(n) if key == "priority" => match n.as_i64().and_then(priority) {
            Some(name) => name.into(),
            None => n.to_string(),
        },
        Value::String(s) if DATE_FIELDS.contains(&key) => match EventTime::parse_in(s, zone) {
            Ok(EventTime::Date(d)) => d.format("%a %-d %b %Y").to_string(),
            Ok(EventTime::At(t)) => when(t.timestamp_millis(), zone),
            Err(_) => format!("\"{}\"", s.chars().take(80).collect::<String>()),
        },
        Value::String(s) => format!("\"{}\"", s.chars().take(80).collect::<String>()),
        other => other.to_string().chars().take(80).collect(),
    }
}

/// `due → Thu 10 Dec 2026, priority → highest`: each change, worded.
pub fn changes(m: &serde_json::Map<String, Value>, zone: Zone) -> String {
    let shown: Vec<String> = m.iter().map(|(k, v)| format!("{} → {}", field(k), value(k, v, zone))).collect();
    if shown.is_empty() {
        "no changes named".into()
    } else {
        shown.join(", ")
    }
}

/// A range of days as a sentence ends it: `1–7 Dec`, `28 Nov – 4 Dec`,
/// `1 Dec`, the year added when it is not `this_year`. `from` and `to` are
/// the tools' forms (a date, a local time, an instant); what does not parse
/// is shown as given.
pub fn days(from: &str, to: &str, zone: Zone, this_year: i32) -> String {
    let day = |s: &str| {
        EventTime::parse_in(s, zone).ok().map(|t| match t {
            EventTime::Date(d) => d,
            EventTime::At(t) => zone.local(t).date_naive(),
        })
    };
    let (Some(a), Some(b)) = (day(from), day(to)) else { return format!("{from} – {to}") };
    let year = |d: NaiveDate| if d.year() == this_year { String::new() } else { format!(" {}", d.year()) };
    if a == b {
        format!("{}{}", a.format("%-d %b"), year(a))
    } else if (a.year(), a.month()) == (b.year(), b.month()) {
        format!("{}–{}{}", a.day(), b.format("%-d %b"), year(b))
    } else if a.year() == b.year() {
        format!("{} – {}{}", a.format("%-d %b"), b.format("%-d %b"), year(b))
    } else {
        format!("{} {} – {} {}", a.format("%-d %b"), a.year(), b.format("%-d %b"), b.year())
    }
}

/// `3 events`, `1 event`, `no events`.
pub fn count(n: usize, one: &str, many: &str) -> String {
    match n {
        0 => format!("no {many}"),
        1 => format!("1 {one}"),
        n => format!("{n} {many}"),
    }
}

/// A listing's two sentences, from what it found: while it runs
/// (`Listing events, 1–7 Dec`) and when done (`Listed 3 events, 1–7 Dec`,
/// `Listed 2 tasks`, `Listed the first 50 tasks` when there are more). A
/// calendar listing is known by its `events`, `from`, `to` and `timezone`;
/// a page of entities or projects by its `items`, named `plural`.
pub fn listing(plural: &str, result: &Value) -> Option<(String, String)> {
    if let (Some(events), Some(from), Some(to)) =
        (result["events"].as_array(), result["from"].as_str(), result["to"].as_str())
    {
        let zone = result["timezone"].as_str().and_then(|z| Zone::parse(z).ok()).unwrap_or(Zone::UTC);
        let this_year = zone.local(Utc::now()).year();
        let range = days(from, to, zone, this_year);
        let found = count(events.len(), "event", "events");
        let more = if result["truncated"].as_bool() == Some(true) { " (more not shown)" } else { "" };
        return Some((format!("Listing events, {range}"), format!("Listed {found}, {range}{more}")));
    }
    let items = result["items"].as_array()?;
    let one = plural.strip_suffix('s').unwrap_or(plural);
    let done = match (items.len(), result["next_cursor"].is_string()) {
        (n, true) => format!("Listed the first {n} {plural}"),
        (n, false) => format!("Listed {}", count(n, one, plural)),
    };
    Some((format!("Listing {plural}"), done))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn berlin() -> Zone {
        Zone::parse("Europe/Berlin").unwrap()
    }

    #[test]
    fn a_timestamp_reads_as_a_date_in_the_users_zone() {
        // The card of issue 40: 1633072800000 is 2021-10-01T07:20:00Z.
        assert_eq!(when(1_633_072_800_000, Zone::UTC), "Fri 1 Oct 2021, 07:20");
        assert_eq!(when(1_633_072_800_000, berlin()), "Fri 1 Oct 2021, 09:20");
        // Midnight in the zone is a date alone: 2026-12-09T23:00Z is 10 Dec in Berlin.
        assert_eq!(when(1_796_857_200_000, berlin()), "Thu 10 Dec 2026");
        assert_eq!(when(1_796_857_200_000, Zone::UTC), "Wed 9 Dec 2026, 23:00");
    }

    #[test]
    fn changes_name_fields_dates_and_priorities() {
        let m = json!({"due_at": 1_796_857_200_000_i64, "priority": 1, "title": "Order compost", "description": null});
        let words = changes(m.as_object().unwrap(), berlin());
        assert_eq!(
            words,
            "description → (cleared), due → Thu 10 Dec 2026, priority → highest, title → \"Order compost\""
        );
        assert!(!words.contains("1796857200000") && !words.contains("due_at"));
        assert_eq!(value("priority", &json!(9), berlin()), "9", "out of range reads as given");
        // As the tools take dates: text in the user's zone.
        assert_eq!(value("due_at", &json!("2026-12-10"), berlin()), "Thu 10 Dec 2026");
        assert_eq!(value("start", &json!("2026-12-10T17:00"), berlin()), "Thu 10 Dec 2026, 17:00");
        assert_eq!(value("due_at", &json!("soon"), berlin()), "\"soon\"");
        assert_eq!(changes(&serde_json::Map::new(), berlin()), "no changes named");
    }

    #[test]
    fn a_range_of_days_reads_like_a_person_says_it() {
        let z = berlin();
        assert_eq!(days("2026-12-01", "2026-12-07", z, 2026), "1–7 Dec");
        assert_eq!(days("2026-11-28", "2026-12-04", z, 2026), "28 Nov – 4 Dec");
        assert_eq!(days("2026-12-01", "2026-12-01", z, 2026), "1 Dec");
        assert_eq!(days("2026-12-01T09:00", "2026-12-01T17:00", z, 2026), "1 Dec");
        assert_eq!(days("2027-01-04", "2027-01-10", z, 2026), "4–10 Jan 2027");
        assert_eq!(days("2026-12-28", "2027-01-03", z, 2026), "28 Dec 2026 – 3 Jan 2027");
        assert_eq!(days("soon", "later", z, 2026), "soon – later");
        assert_eq!(count(3, "event", "events"), "3 events");
        assert_eq!(count(1, "event", "events"), "1 event");
        assert_eq!(count(0, "event", "events"), "no events");
    }

    #[test]
    fn a_listing_says_how_many_over_what_not_a_fake_entity() {
        let week = json!({"from": "2026-12-01", "to": "2026-12-07", "timezone": "Europe/Berlin",
            "events": [{}, {}, {}], "truncated": false});
        let (start, done) = listing("calendar", &week).unwrap();
        assert_eq!(start, "Listing events, 1–7 Dec");
        assert!(done == "Listed 3 events, 1–7 Dec" || done == "Listed 3 events, 1–7 Dec 2026", "{done}");
        let page = json!({"items": [{}, {}]});
        assert_eq!(listing("tasks", &page).unwrap().1, "Listed 2 tasks");
        assert_eq!(listing("projects", &json!({"items": [{}]})).unwrap().1, "Listed 1 project");
        let more = json!({"items": [{}, {}], "next_cursor": "c"});
        assert_eq!(listing("tasks", &more).unwrap().1, "Listed the first 2 tasks");
        assert_eq!(listing("tasks", &json!({"done": 1})), None);
    }
}
