//! The calendar's context pack: today's date and time in the user's zone and
//! the occurrences of the next days, as a short text block for the system
//! prompt (the `calendar` scope gets 7 days, `daily_brief_update` today).
//! Relative dates ("tomorrow at 10") are the model's to resolve against it.
//! The block names its zone and whose it is: the turn's own (its client's),
//! the user's chosen one, or UTC when neither is known.
//! Events the calendar could not read are named on a last line; then what
//! the user's message says in calendar terms ([`super::spoken`]).

use super::model::{EventInstance, SkippedEvent, Zone};
use super::service::{CalendarService, ListQuery, ZoneSource};
use super::spoken::Reading;
use crate::claims::shown::{Shown, ShownItem};
use crate::ids::{ProjectId, UserId};
use chrono::NaiveDate;
use chrono::{DateTime, Duration, Utc};
use std::collections::HashMap;

/// At most this many occurrences are written into the prompt.
pub const MAX_AGENDA_LINES: usize = 40;

/// The calendar block, and what it shows as the answer to the message's question.
#[derive(Debug, Clone, PartialEq)]
pub struct Agenda {
    pub block: String,
    /// A question naming days ("what have I got on December 16?"): those
    /// days' events, which the answer must name ([`crate::claims::shown`]).
    pub shown: Option<Shown>,
    /// What the message says of a series ([`crate::tools::SeriesSaid`] mends calls by it).
    pub said_series: super::spoken::SaidSeries,
}

/// The block for `days` days from today (1 = today only) in the turn's zone
/// (`named`, else the user's chosen one, else UTC), or `None` when the
/// calendar cannot be read (the turn goes on without it).
pub async fn agenda(
    cal: &CalendarService,
    user: &UserId,
    named: Option<Zone>,
    days: i64,
    now: DateTime<Utc>,
    message: &str,
) -> Option<Agenda> {
    let (zone, source) = match cal.turn_zone(user, named).await {
        Ok(z) => z,
        Err(e) => {
            tracing::warn!(error = %e, "agenda not loaded: no zone");
            return None;
        }
    };
    let today = zone.local(now).date_naive();
    // The message's days are listed too ("the week after this one"), up to a month on.
    let heard = super::spoken::hear(message, zone.local(now).naive_local());
    let named_last = heard.reading.iter().filter_map(|r| r.days.map(|d| d.1)).max().unwrap_or(today);
    let last = (today + Duration::days(days - 1)).max(named_last.min(today + Duration::days(MAX_READ_AHEAD)));
    let q = ListQuery {
        from: today.to_string(),
        to: last.to_string(),
        timezone: Some(zone.name().into()),
        project_id: None,
    };
    let list = match cal.list(user, &q).await {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!(error = %e, "agenda not loaded");
            return None;
        }
    };
    let names = cal.project_names(user, list.events.iter().filter_map(|e| e.project_id.as_ref())).await;
    let in_days: Vec<EventInstance> = list
        .events
        .iter()
        .filter(|e| start_day(&e.start).is_none_or(|d| d < today + Duration::days(days)))
        .cloned()
        .collect();
    let block = render(zone, source, now, days, &in_days, &names) + &skipped_line(&list.skipped);
    // The message's times and days in the tools' terms, each named day with
    // its events: "what is on tomorrow" has its answer on the line that says
    // "tomorrow" (the local model answered from the whole week's block, or
    // copied the block itself).
    let listed = Listed { events: &list.events, projects: &names, zone };
    let reading = &heard.reading;
    let read = super::spoken::render(reading, Some(&listed));
    // The reading right under the date line, before the week: the local
    // model answered "what is on tomorrow?" by copying the first list it
    // met, the whole week (twice, when asked again).
    // When the message names its days, their lines are the block: the
    // week's list beside them was what the model copied.
    let names_days = reading.iter().any(|r| r.days.is_some());
    let shown = shown(reading, message, &listed);
    let block = match (read.is_empty(), block.split_once('\n')) {
        (false, Some((now, _))) if names_days => format!("{now}\n{read}{}", skipped_line(&list.skipped)),
        (false, Some((now, week))) => format!("{now}\n{read}\n{week}"),
        (false, None) => format!("{block}\n{read}"),
        (true, _) => block,
    };
    Some(Agenda { block, shown, said_series: heard.series })
}

/// What the block shows as the answer to a question that names its days
/// ("anything on this week?"): their events, only the named project's when
/// the message names one of theirs ("only the Launch project"). None for a
/// change asked for (the claims check's) or a clock time said ("am I free
/// at 3?" is about that hour, not the day's every event).
fn shown(reading: &[Reading], message: &str, listed: &Listed) -> Option<Shown> {
    if crate::claims::echo::asks_for_a_change(message) || reading.iter().any(|r| r.at.is_some() || r.moving.is_some()) {
        return None;
    }
    let spans: Vec<(&Reading, (NaiveDate, NaiveDate))> = reading.iter().filter_map(|r| Some((r, r.days?))).collect();
    if spans.is_empty() {
        return None;
    }
    let asked: Vec<String> = spans.iter().map(|(r, (a, b))| format!("“{}” ({})", r.quote, span(*a, *b))).collect();
    let on =
        |e: &&EventInstance| start_day(&e.start).is_some_and(|d| spans.iter().any(|(_, (a, b))| d >= *a && d <= *b));
    let mut events: Vec<&EventInstance> = listed.events.iter().filter(on).collect();
    let lower = message.to_lowercase();
    let project_of = |e: &EventInstance| e.project_id.as_ref().and_then(|p| listed.projects.get(p));
    let named_projects: Vec<&String> =
        events.iter().filter_map(|e| project_of(e)).filter(|n| mentions(&lower, n)).collect();
    if !named_projects.is_empty() {
        events.retain(|e| project_of(e).is_some_and(|n| named_projects.contains(&n)));
    }
    let items = events
        .iter()
        .take(MAX_NAMED_DAY_LINES)
        .map(|e| {
            let project = project_of(e).cloned();
            ShownItem { title: e.title.clone(), line: spoken(e, project.as_deref()), project }
        })
        .collect();
    Some(Shown { source: "the calendar".into(), asked: asked.join("; "), items })
}

/// `lower` holds `name` as whole words.
fn mentions(lower: &str, name: &str) -> bool {
    let name = name.to_lowercase();
    lower.match_indices(&name).any(|(at, _)| {
        let before = lower[..at].chars().next_back();
        let after = lower[at + name.len()..].chars().next();
        !before.is_some_and(char::is_alphanumeric) && !after.is_some_and(char::is_alphanumeric)
    })
}

/// `Wednesday 16 December`, or `Monday 7 December to Sunday 13 December`.
fn span(first: NaiveDate, last: NaiveDate) -> String {
    let day = |d: NaiveDate| d.format("%A %-d %B").to_string();
    if first == last {
        day(first)
    } else {
        format!("{} to {}", day(first), day(last))
    }
}

/// An occurrence as the user reads it: `“Offsite” Wed 16 Dec 10:00–11:00 (project “Launch”)`, no ids.
fn spoken(e: &EventInstance, project: Option<&str>) -> String {
    let day = start_day(&e.start).map(|d| d.format("%a %-d %b ").to_string()).unwrap_or_default();
    let project = project.map(|name| format!(" (project “{name}”)")).unwrap_or_default();
    format!("“{}” {day}{}{project}", e.title, when(e))
}

/// How far on the block lists the days a message names.
pub const MAX_READ_AHEAD: i64 = 31;

/// At most this many occurrences are written on one named day's line.
pub const MAX_NAMED_DAY_LINES: usize = 15;

/// The listed occurrences, as the message's reading asks about them.
struct Listed<'a> {
    events: &'a [EventInstance],
    projects: &'a HashMap<ProjectId, String>,
    zone: Zone,
}

impl super::spoken::OnCalendar for Listed<'_> {
    fn on_days(&self, first: chrono::NaiveDate, last: chrono::NaiveDate) -> String {
        on_days(self.events, first, last, self.projects, self.zone)
    }

    /// "My 3pm tomorrow": the local model moved the 12:00 lunch, the
    /// event at 15:00 one line further on.
    fn starting_at(&self, at: chrono::NaiveDateTime) -> Option<String> {
        let local = |e: &&EventInstance| {
            DateTime::parse_from_rfc3339(&e.start).ok().map(|t| self.zone.local(t.to_utc()).naive_local())
        };
        let then: Vec<String> = self
            .events
            .iter()
            .filter(|e| local(e) == Some(at))
            .map(|e| occurrence(e, self.projects, self.zone))
            .collect();
        (!then.is_empty()).then(|| then.join("; "))
    }
}

/// The occurrences starting on `first`..=`last`, each with its day when the span is longer than one.
fn on_days(
    events: &[EventInstance],
    first: chrono::NaiveDate,
    last: chrono::NaiveDate,
    projects: &HashMap<ProjectId, String>,
    zone: Zone,
) -> String {
    let on: Vec<&EventInstance> =
        events.iter().filter(|e| start_day(&e.start).is_some_and(|d| d >= first && d <= last)).collect();
    if on.is_empty() {
        return "no events".into();
    }
    let line = |e: &&EventInstance| match (first == last, start_day(&e.start)) {
        (false, Some(d)) => format!("{} {}", d.format("%a %-d %b"), occurrence(e, projects, zone)),
        _ => occurrence(e, projects, zone),
    };
    let mut out: Vec<String> = on.iter().take(MAX_NAMED_DAY_LINES).map(line).collect();
    if on.len() > MAX_NAMED_DAY_LINES {
        out.push(format!("… and {} more (list_calendar_events)", on.len() - MAX_NAMED_DAY_LINES));
    }
    out.join("; ")
}

/// At most this many skipped events are named in the block.
pub const MAX_SKIPPED_NAMED: usize = 5;

/// The line naming what the calendar could not read (empty when nothing):
/// the model should not call a day free that an unread event may fill.
pub fn skipped_line(skipped: &[SkippedEvent]) -> String {
    if skipped.is_empty() {
        return String::new();
    }
    let named: Vec<String> = skipped.iter().take(MAX_SKIPPED_NAMED).map(SkippedEvent::describe).collect();
    let more = skipped.len().saturating_sub(MAX_SKIPPED_NAMED);
    let more = if more > 0 { format!("; and {more} more") } else { String::new() };
    format!(
        "\nNot shown, could not be read ({} event{}; the user's calendar app still has them): {}{more}.",
        skipped.len(),
        if skipped.len() == 1 { "" } else { "s" },
        named.join("; ")
    )
}

/// The text: the date line, then one line per day (today first, at least
/// seven, so a weekday name finds its date) with that day's occurrences on
/// it. Small models get weekday arithmetic wrong ("next Tuesday") and copy
/// best from what stands next to the words they look for: "tomorrow" and
/// its date and events are one line, each event's time without its date.
pub fn render(
    zone: Zone,
    source: ZoneSource,
    now: DateTime<Utc>,
    days: i64,
    events: &[EventInstance],
    projects: &HashMap<ProjectId, String>,
) -> String {
    let local = zone.local(now);
    let mut out = format!(
        "Calendar: now is {} ({}), time zone {} ({}). Write times as local times in this zone (YYYY-MM-DDTHH:MM).",
        local.format("%A %Y-%m-%d %H:%M"),
        local.format("UTC%:z"),
        zone.name(),
        whose(source)
    );
    let today = local.date_naive();
    let shown = &events[..events.len().min(MAX_AGENDA_LINES)];
    out.push_str(&if days == 1 {
        "\nToday's events, then the dates of the coming days:".to_string()
    } else {
        format!("\nThe next {days} days, each with its events:")
    });
    for i in 0..days.max(7) {
        let d = today + Duration::days(i);
        // "next Tuesday": the first Tuesday after today, named on its line.
        let tag = match i {
            0 => " (today)".to_string(),
            1 => " (tomorrow)".to_string(),
            2..7 => format!(" (next {})", d.format("%A")),
            _ => String::new(),
        };
        // An occurrence goes on the day it starts (one that began earlier, on today).
        let on_day: Vec<String> = shown
            .iter()
            .filter(|e| i < days && start_day(&e.start).map_or(i == 0, |s| s.max(today) == d))
            .map(|e| occurrence(e, projects, zone))
            .collect();
        let listed = match (i < days, on_day.is_empty()) {
            (false, _) => String::new(),
            (true, true) => ": no events".to_string(),
            (true, false) => format!(": {}", on_day.join("; ")),
        };
        out.push_str(&format!("\n- {}{tag}{listed}", d.format("%A %Y-%m-%d")));
    }
    if events.len() > MAX_AGENDA_LINES {
        out.push_str(&format!("\n… and {} more (list_calendar_events).", events.len() - MAX_AGENDA_LINES));
    }
    out
}

/// Whose zone the block is in, for the model (and whoever reads the prompt).
fn whose(source: ZoneSource) -> &'static str {
    match source {
        ZoneSource::Turn => "this turn's zone, from the user's device",
        ZoneSource::Stored => "the user's chosen zone",
        ZoneSource::Default => "UTC: the user has chosen no zone",
    }
}

/// The local day an occurrence starts on (`2026-12-01T10:00:00+01:00` or an all-day `2026-12-01`).
fn start_day(t: &str) -> Option<chrono::NaiveDate> {
    t.get(..10).and_then(|d| chrono::NaiveDate::parse_from_str(d, "%Y-%m-%d").ok())
}

/// `“Review” 10:00–11:00 (project “Launch”, event_id …)`, the title first and quoted
/// (as the pack names entities); the end's date only when it is another day's; the
/// project by name, so "only the Launch project" is read off the block (the local
/// model answered it with every event, or with none).
fn occurrence(e: &EventInstance, projects: &HashMap<ProjectId, String>, zone: Zone) -> String {
    let when = when(e);
    // In local time, as the tools read it: the local model copied the UTC
    // form (`2026-12-08T08:30:00Z`) into a new `start` ("11:00:00Z", an hour late).
    let inst = e.instance.map(|i| format!(", instance {}", local_instance(i, zone))).unwrap_or_default();
    let project = match e.project_id.as_ref().and_then(|p| projects.get(p)) {
        Some(name) => format!("project “{name}”, "),
        None => String::new(),
    };
    format!("“{}” {when} ({project}event_id {}{inst})", e.title, e.event_id)
}

/// An occurrence's name as the tools take it: its local start (`2026-12-08T09:30`), or its date.
fn local_instance(i: super::time::EventTime, zone: Zone) -> String {
    match i {
        super::time::EventTime::At(t) => zone.local(t).format("%Y-%m-%dT%H:%M").to_string(),
        date => date.to_string(),
    }
}

/// `10:00–11:00`, `all day`, or with the end's date when it ends on another day.
fn when(e: &EventInstance) -> String {
    if e.all_day {
        "all day".to_string()
    } else {
        let (start, end) = (DateTime::parse_from_rfc3339(&e.start), DateTime::parse_from_rfc3339(&e.end));
        match (start, end) {
            (Ok(s), Ok(en)) if s.date_naive() == en.date_naive() => {
                format!("{}–{}", s.format("%H:%M"), en.format("%H:%M"))
            }
            (Ok(s), Ok(en)) => format!("{}–{}", s.format("%H:%M"), en.format("%a %Y-%m-%d %H:%M")),
            _ => format!("{}–{}", e.start, e.end),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn the_block_names_the_days_and_lists_events_with_their_ids() {
        let zone = Zone::parse("Europe/Berlin").unwrap();
        let now = Utc.with_ymd_and_hms(2026, 11, 26, 14, 20, 0).unwrap();
        let ev = EventInstance {
            event_id: crate::ids::EventId::parse("e1").unwrap(),
            instance: None,
            title: "Dentist".into(),
            start: "2026-11-27T09:00:00+01:00".into(),
            end: "2026-11-27T10:00:00+01:00".into(),
            all_day: false,
            recurring: false,
            location: None,
            description: None,
            project_id: None,
            task_id: None,
            version: 1,
        };
        let block = render(zone, ZoneSource::Turn, now, 7, std::slice::from_ref(&ev), &HashMap::new());
        // An event of a project says which, by name.
        let p = ProjectId::new();
        let launch = EventInstance { project_id: Some(p.clone()), ..ev.clone() };
        let named = render(zone, ZoneSource::Turn, now, 7, &[launch], &HashMap::from([(p, "Launch".to_string())]));
        assert!(named.contains("“Dentist” 09:00–10:00 (project “Launch”, event_id e1)"), "{named}");
        assert!(
            block.contains(
                "now is Thursday 2026-11-26 15:20 (UTC+01:00), time zone Europe/Berlin (this turn's zone, from the user's device)."
            ),
            "{block}"
        );
        assert!(block.contains("\n- Friday 2026-11-27 (tomorrow): “Dentist” 09:00–10:00 (event_id e1)\n"), "{block}");
        assert!(block.contains("\n- Thursday 2026-11-26 (today): no events\n"), "{block}");
        assert!(block.contains("\n- Tuesday 2026-12-01 (next Tuesday): no events\n"), "{block}");
        assert!(block.ends_with("\n- Wednesday 2026-12-02 (next Wednesday): no events"), "{block}");
        // The daily brief: today's events only, and the week's dates still named.
        let brief = render(zone, ZoneSource::Stored, now, 1, &[], &HashMap::new());
        assert!(brief.contains("time zone Europe/Berlin (the user's chosen zone)."), "{brief}");
        let utc = render(Zone::UTC, ZoneSource::Default, now, 1, &[], &HashMap::new());
        assert!(utc.contains("time zone UTC (UTC: the user has chosen no zone)."), "{utc}");
        assert!(brief.contains("Today's events, then the dates of the coming days:"), "{brief}");
        assert!(
            brief.contains("\n- Thursday 2026-11-26 (today): no events\n- Friday 2026-11-27 (tomorrow)\n- Saturday 2026-11-28 (next Saturday)\n"),
            "{brief}"
        );
    }

    #[test]
    fn skipped_events_are_named_on_one_line() {
        use crate::calendar::model::SkipReason;
        assert_eq!(skipped_line(&[]), "");
        let one = SkippedEvent {
            href: Some("/u/cal/x.ics".into()),
            title: Some("Board".into()),
            ..SkippedEvent::new(SkipReason::Unreadable, "a VEVENT without DTSTART")
        };
        let line = skipped_line(std::slice::from_ref(&one));
        assert_eq!(line, "\nNot shown, could not be read (1 event; the user's calendar app still has them): “Board”: a VEVENT without DTSTART.");
        let seven = vec![one; 7];
        assert!(skipped_line(&seven).ends_with("; and 2 more."), "{}", skipped_line(&seven));
    }
}
