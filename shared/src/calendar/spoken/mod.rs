//! What the user's message says in calendar terms, read by the server:
//! clock times ("half past nine" is 09:30), days ("next Tuesday" is
//! 2026-12-08), lengths ("two-hour" is 120 minutes) and how a series repeats
//! ("Mondays, every other week", "three sessions in total") — written under
//! the calendar block as the very values the calendar tools take, so the
//! smallest model shipped copies them instead of working them out. Issue 40:
//! it wrote 10:30 for "half past nine", `until` for "three sessions" and a
//! past time for "at 7", each with the right words in front of it.
//!
//! Contract: deterministic, English, no model; what it does not know it
//! leaves out (the model still has the message); an hour with no am/pm and
//! no part of the day near it is read as office hours (7–12 the morning,
//! 1–6 the afternoon) and the line says it was assumed. The block holds
//! values only, quoted from the message; it gives no instruction a message
//! could smuggle in.

mod words;

#[cfg(test)]
mod tests;

use chrono::{Datelike, Duration, NaiveDate, NaiveDateTime, NaiveTime, Weekday};
use serde_json::{json, Map, Value};
use words::{Day, Every, Taken};

/// One value read from the message: the words, and what they are in the tools' terms.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    pub quote: String,
    pub value: String,
    /// The days it names (first, last), when it names days: the calendar
    /// block writes their events on its line.
    pub days: Option<(NaiveDate, NaiveDate)>,
    /// The moment a clock time names when one day is said with it ("my 3pm
    /// tomorrow"): the calendar block names what starts then.
    pub at: Option<NaiveDateTime>,
    /// A move's old moment ("my 3pm tomorrow … to 4pm"): the block names the
    /// event to move on the line that gives its new start.
    pub moving: Option<NaiveDateTime>,
}

/// What the calendar holds for a reading's days or moment, as the block writes it.
pub trait OnCalendar {
    /// The occurrences starting on `first`..=`last`.
    fn on_days(&self, first: NaiveDate, last: NaiveDate) -> String;
    /// The occurrences starting at `at`, if any.
    fn starting_at(&self, at: NaiveDateTime) -> Option<String>;
}

/// The block's first line (tests and the prompt's readers look for it).
pub const HEADING: &str = "Read from the user's last message by the server (exact values: use them in tool \
calls as they are, do not work them out again):";

/// The block for `message` seen at `now` (local time in the user's zone); empty when it names nothing.
pub fn block(message: &str, now: NaiveDateTime) -> String {
    render(&read(message, now), None)
}

/// The block for `read`; with `calendar`, each line naming days followed by
/// their events, and a time said with a day by what starts then.
pub fn render(read: &[Reading], calendar: Option<&dyn OnCalendar>) -> String {
    if read.is_empty() {
        return String::new();
    }
    let line = |r: &Reading| {
        let on = calendar.and_then(|c| match (r.days, r.at, r.moving) {
            (Some((a, b)), _, _) => Some(format!("; on the calendar then: {}", c.on_days(a, b))),
            (_, Some(at), _) => c.starting_at(at).map(|e| format!("; starting then: {e}")),
            (_, _, Some(from)) => c.starting_at(from).map(|e| format!("; the event to move: {e}")),
            _ => None,
        });
        format!("- \"{}\" = {}{}", r.quote, r.value, on.unwrap_or_default())
    };
    let lines: Vec<String> = read.iter().map(line).collect();
    format!("{HEADING}\n{}", lines.join("\n"))
}

/// The message's words, each phrase taken once, in the order they are read.
struct Phrases {
    t: String,
    until: Option<(String, NaiveDate)>,
    times: Vec<words::Said>,
    length: Option<(String, u32)>,
    days: Vec<(String, Day)>,
}

fn said(message: &str, today: NaiveDate) -> Phrases {
    let t = message.to_lowercase().replace(['’', '‘'], "'");
    let mut taken = Taken::default();
    let until = words::until(&t, today, &mut taken);
    let times = words::times(&t, &mut taken);
    let length = words::length(&t, &mut taken);
    let days = words::days(&t, today, &mut taken);
    Phrases { t, until, times, length, days }
}

/// What the message says of a series, for mending a call's `repeat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaidSeries {
    /// One day said and no word of repeating: one event.
    OneOff,
    /// A number of times and no end date ("six lessons": 6).
    Count(u32),
    /// A series some other way, or nothing known (another language).
    Other,
}

/// Words that say something repeats, beyond what [`hear`] turns into a `repeat`.
const REPEATS: &str = r"\b(every|each|daily|weekly|monthly|yearly|annual\w*|fortnight\w*|biweekly|recurring|repeat\w*|regular\w*|until|till|times|sessions|lessons|classes|weekdays|workdays|weekends|mondays|tuesdays|wednesdays|thursdays|fridays|saturdays|sundays|mornings|afternoons|evenings|nights|for \w+ (weeks|days|months))\b";

/// What a message says of a series: one day and no word of repeating is a
/// one-off (the local model gave "a dentist appointment next Wednesday at
/// 10am" a weekly `repeat`); a count without an end date is that count.
fn of_series(series: Option<&Series>, days: &[(String, Day)], t: &str) -> SaidSeries {
    static REPEATING: std::sync::LazyLock<regex::Regex> =
        std::sync::LazyLock::new(|| regex::Regex::new(REPEATS).expect("a valid pattern"));
    if let Some((_, repeat, _)) = series {
        let count = repeat.get("count").and_then(Value::as_u64).and_then(|n| u32::try_from(n).ok());
        return count.map_or(SaidSeries::Other, SaidSeries::Count);
    }
    match (single_date(days), REPEATING.is_match(t)) {
        (Some(_), false) => SaidSeries::OneOff,
        _ => SaidSeries::Other,
    }
}

/// What a message says, read once: the values for the block, and what it
/// says of a series for mending calls.
#[derive(Debug, Clone, PartialEq)]
pub struct Heard {
    pub reading: Vec<Reading>,
    pub series: SaidSeries,
}

/// What `message` says, in the order: times, length, days, the series, the first start.
pub fn read(message: &str, now: NaiveDateTime) -> Vec<Reading> {
    hear(message, now).reading
}

/// [`read`], and what the message says of a series.
pub fn hear(message: &str, now: NaiveDateTime) -> Heard {
    let today = now.date();
    let Phrases { t, until, times, length, days } = said(message, today);
    let mut out = Vec::new();
    let day = single_date(&days);
    for s in &times {
        let assumed = if s.guessed { " (no am/pm said: assumed)" } else { "" };
        let r = reading(&s.quote, format!("{}{assumed}", s.time.format("%H:%M")));
        out.push(Reading { at: day.map(|d| d.and_time(s.time)), ..r });
    }
    if let Some((q, minutes)) = &length {
        out.push(reading(q, format!("\"duration_minutes\": {minutes}")));
    }
    for (q, d) in &days {
        match d {
            Day::On(date) => out.push(Reading { days: Some((*date, *date)), ..reading(q, on(*date, today)) }),
            Day::Span(first, last, name) => {
                let range = name.map(|n| format!(" (\"range\": \"{n}\")")).unwrap_or_default();
                let value = format!("{} to {}{range}", long(*first), long(*last));
                out.push(Reading { days: Some((*first, *last)), ..reading(q, value) });
            }
            Day::Each(_) => {}
        }
    }
    if times.is_empty() {
        out.extend(window(&t));
    }
    let intent = words::intent(&t);
    out.extend(asked(&t, intent.as_ref()));
    let series = series(&t, &days, until, today);
    let said = of_series(series.as_ref(), &days, &t);
    out.extend(starts(now, &times, &days, series, intent.map(|(_, i)| i)));
    // "Tomorrow … only tomorrow": one line.
    let mut seen = std::collections::HashSet::new();
    out.retain(|r| seen.insert((r.quote.clone(), r.value.clone())));
    Heard { reading: out, series: said }
}

/// What to do and to which occurrences: the local model "cancelled" with
/// an update, and cut a whole series for "just that one".
fn asked(t: &str, intent: Option<&(String, words::Intent)>) -> Vec<Reading> {
    let mut out = Vec::new();
    if let Some((q, intent)) = intent {
        let value = match intent {
            words::Intent::Cancel => "a cancellation: delete_calendar_event",
            words::Intent::Move => "a move: update_calendar_event with the new \"start\"",
        };
        out.push(reading(q, value.into()));
    }
    if let Some((q, scope)) = words::scope(t) {
        let what = match scope {
            "instance" => "that occurrence only: give its \"instance\", the series stays",
            "following" => "it and the later ones",
            _ => "every occurrence",
        };
        out.push(reading(&q, format!("\"scope\": \"{scope}\" ({what})")));
    }
    out
}

/// The series' `repeat` and first start, a one-off's start, or a move's new start.
fn starts(
    now: NaiveDateTime,
    times: &[words::Said],
    days: &[(String, Day)],
    series: Option<Series>,
    intent: Option<words::Intent>,
) -> Vec<Reading> {
    let line = |quote: &str, value| Reading { quote: quote.into(), value, days: None, at: None, moving: None };
    let (time, date) = (one_time(times), single_date(days));
    if let Some((quote, repeat, first_days)) = &series {
        let mut out = vec![reading(quote, format!("\"repeat\": {}", in_order(repeat)))];
        if let Some(time) = time {
            out.push(line("the first one", start_value(first_start(now, date, first_days, time))));
        }
        return out;
    }
    match (time, date, intent, times.last()) {
        (Some(time), Some(date), _, _) => vec![line("when", start_value(date.and_time(time)))],
        // "Move my 3pm tomorrow to 4pm": the time said last is the new one.
        (None, Some(date), Some(words::Intent::Move), Some(to)) => {
            let moving = times.first().filter(|from| from.time != to.time).map(|from| date.and_time(from.time));
            vec![Reading { moving, ..line("the new time", start_value(date.and_time(to.time))) }]
        }
        _ => vec![],
    }
}

fn reading(quote: &str, value: String) -> Reading {
    // "4pm." at a sentence's end; "p.m." keeps its dots.
    let quote = quote.trim();
    let quote = if quote.ends_with(".m.") { quote } else { quote.trim_end_matches('.') };
    Reading { quote: quote.to_string(), value, days: None, at: None, moving: None }
}

fn start_value(at: NaiveDateTime) -> String {
    format!("\"start\": \"{}\" ({})", at.format("%Y-%m-%dT%H:%M"), at.format("%A"))
}

fn long(d: NaiveDate) -> String {
    d.format("%A %Y-%m-%d").to_string()
}

/// A day in words, with the `range` name the tools take for it when it has one.
fn on(date: NaiveDate, today: NaiveDate) -> String {
    let name = match (date - today).num_days() {
        0 => Some("today".to_string()),
        1 => Some("tomorrow".to_string()),
        2..=6 => Some(date.format("%A").to_string().to_lowercase()),
        _ => None,
    };
    let range = name.map(|n| format!(" (\"range\": \"{n}\")")).unwrap_or_default();
    format!("{}{range}", long(date))
}

/// The hours of "Friday afternoon", when no clock time is said.
fn window(t: &str) -> Option<Reading> {
    let (start, end, p, _) = *words::periods(t).first()?;
    let (from, to) = p.window();
    let (from, to) = (from.format("%H:%M"), to.format("%H:%M"));
    Some(reading(&t[start..end], format!("{from} to {to} (\"day_start\": \"{from}\", \"day_end\": \"{to}\")")))
}

/// The one clock time said (a move's "from 3pm to 4pm" gives none: two times).
fn one_time(times: &[words::Said]) -> Option<NaiveTime> {
    let mut distinct: Vec<NaiveTime> = times.iter().map(|s| s.time).collect();
    distinct.dedup();
    (distinct.len() == 1).then(|| distinct[0])
}

/// The one day said, when exactly one is.
fn single_date(days: &[(String, Day)]) -> Option<NaiveDate> {
    let mut ones: Vec<NaiveDate> =
        days.iter().filter_map(|(_, d)| if let Day::On(d) = d { Some(*d) } else { None }).collect();
    ones.dedup();
    (ones.len() == 1).then(|| ones[0])
}

/// A series' `repeat`, its words, and the days it falls on (empty: any day).
type Series = (String, Map<String, Value>, Vec<Weekday>);

fn series(t: &str, days: &[(String, Day)], until: Option<(String, NaiveDate)>, today: NaiveDate) -> Option<Series> {
    let mut on_days: Vec<Weekday> =
        days.iter().filter_map(|(_, d)| if let Day::Each(w) = d { Some(*w) } else { None }).collect();
    let each_quote: Vec<&str> =
        days.iter().filter(|(_, d)| matches!(d, Day::Each(_))).map(|(q, _)| q.as_str()).collect();
    let every = words::every(t);
    if every.is_none() && on_days.is_empty() {
        return None;
    }
    // No "every …" words but a day said as a habit ("Mondays"): weekly.
    let (mut quote, kind, interval) = every.unwrap_or((String::new(), Every::Week, 1));
    // "every other Monday": the day is the unit's.
    if let Some(w) = words::weekday(quote.rsplit(' ').next().unwrap_or_default()).filter(|_| kind == Every::Week) {
        if !on_days.contains(&w) {
            on_days.push(w);
        }
    }
    let mut quotes: Vec<String> =
        each_quote.iter().map(|q| q.to_string()).filter(|q| !quote.contains(q.as_str())).collect();
    let mut repeat = Map::new();
    let name = match kind {
        Every::Day if !on_days.is_empty() => "week",
        Every::Day => "day",
        Every::MondayToFriday => "monday_to_friday",
        Every::Week => "week",
        Every::Month => "month",
        Every::Year => "year",
    };
    repeat.insert("every".into(), json!(name));
    if interval > 1 {
        repeat.insert("interval".into(), json!(interval));
    }
    let weekly = name == "week" && !on_days.is_empty();
    if weekly {
        on_days.sort_by_key(|w| w.num_days_from_monday());
        on_days.dedup();
        let names: Vec<String> = on_days.iter().map(|w| full(*w)).collect();
        repeat.insert("on_days".into(), json!(names));
    }
    let first_days = match name {
        "monday_to_friday" => vec![Weekday::Mon, Weekday::Tue, Weekday::Wed, Weekday::Thu, Weekday::Fri],
        _ if weekly => on_days.clone(),
        _ => vec![],
    };
    if let Some((q, n, unit)) = words::count(t) {
        let per_week = first_days.len().max(1) as u32;
        let n = match (unit, name) {
            (None, _) => Some(n),
            (Some("weeks"), "week") => Some(n * per_week),
            (Some("weeks"), "monday_to_friday") => Some(n * 5),
            (Some("days"), "day") | (Some("months"), "month") => Some(n),
            _ => None,
        };
        if let Some(n) = n {
            repeat.insert("count".into(), json!(n));
            quotes.push(q);
        }
    }
    if let (Some((q, last)), false) = (until, repeat.contains_key("count")) {
        if last >= today {
            repeat.insert("until".into(), json!(last.to_string()));
            quotes.push(q);
        }
    }
    if !quotes.is_empty() {
        quote = if quote.is_empty() { quotes.join(", ") } else { format!("{quote}, {}", quotes.join(", ")) };
    }
    Some((quote, repeat, first_days))
}

/// `repeat` as JSON in the order a person says it (`every` first, then how
/// often, which days, how many or until when), not serde's sorted keys: the
/// local model dropped a `count` that came first.
fn in_order(repeat: &Map<String, Value>) -> String {
    let fields: Vec<String> = ["every", "interval", "on_days", "count", "until"]
        .iter()
        .filter_map(|k| repeat.get(*k).map(|v| format!("\"{k}\": {v}")))
        .collect();
    format!("{{{}}}", fields.join(", "))
}

fn full(w: Weekday) -> String {
    match w {
        Weekday::Mon => "monday",
        Weekday::Tue => "tuesday",
        Weekday::Wed => "wednesday",
        Weekday::Thu => "thursday",
        Weekday::Fri => "friday",
        Weekday::Sat => "saturday",
        Weekday::Sun => "sunday",
    }
    .into()
}

/// The series' first start: from the day said (else today), the first of
/// its days at `time` that is still to come.
fn first_start(now: NaiveDateTime, from: Option<NaiveDate>, days: &[Weekday], time: NaiveTime) -> NaiveDateTime {
    let mut d = from.unwrap_or(now.date());
    for _ in 0..14 {
        let fits = days.is_empty() || days.contains(&d.weekday());
        if fits && d.and_time(time) > now {
            break;
        }
        d += Duration::days(1);
    }
    d.and_time(time)
}
