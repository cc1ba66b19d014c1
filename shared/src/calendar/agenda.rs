//! The calendar's context pack: today's date and time in the user's zone and
//! the occurrences of the next days, as a short text block for the system
//! prompt (the `calendar` scope gets 7 days, `daily_brief_update` today).
//! Relative dates ("tomorrow at 10") are the model's to resolve against it.

use super::model::{EventInstance, Zone};
use super::service::{CalendarService, ListQuery};
use crate::ids::UserId;
use chrono::{DateTime, Duration, Utc};

/// At most this many occurrences are written into the prompt.
pub const MAX_AGENDA_LINES: usize = 40;

/// The block for `days` days from today (1 = today only), or `None` when
/// the calendar cannot be read (the turn goes on without it).
pub async fn agenda(
    cal: &CalendarService,
    user: &UserId,
    zone: Option<Zone>,
    days: i64,
    now: DateTime<Utc>,
) -> Option<String> {
    let zone = match zone {
        Some(z) => z,
        None => cal.zone(user, None).await.ok()?,
    };
    let today = zone.local(now).date_naive();
    let last = today + Duration::days(days - 1);
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
    Some(render(zone, now, days, &list.events))
}

/// The text: the date line, then one line per occurrence.
pub fn render(zone: Zone, now: DateTime<Utc>, days: i64, events: &[EventInstance]) -> String {
    let local = zone.local(now);
    let mut out = format!(
        "Calendar: now is {} ({}), time zone {}. Write times as local times in this zone (YYYY-MM-DDTHH:MM).",
        local.format("%A %Y-%m-%d %H:%M"),
        local.format("UTC%:z"),
        zone.name()
    );
    // Small models get weekday arithmetic wrong ("next Tuesday"): the days
    // are spelled out with their dates.
    let today = local.date_naive();
    let names: Vec<String> = (0..7)
        .map(|i| {
            let d = today + Duration::days(i);
            let tag = match i {
                0 => " (today)",
                1 => " (tomorrow)",
                _ => "",
            };
            format!("{}{tag}", d.format("%A %Y-%m-%d"))
        })
        .collect();
    out.push_str(&format!("\nDays: {}.", names.join(", ")));
    let span = if days == 1 { "Today".to_string() } else { format!("The next {days} days") };
    if events.is_empty() {
        out.push_str(&format!("\n{span}: no events."));
        return out;
    }
    out.push_str(&format!("\n{span}:"));
    for e in events.iter().take(MAX_AGENDA_LINES) {
        let when = if e.all_day {
            format!("{} all day", e.start)
        } else {
            format!("{} – {}", short(&e.start), short(&e.end))
        };
        let inst = e.instance.map(|i| format!(", instance {i}")).unwrap_or_default();
        out.push_str(&format!("\n- {when}: {} (event_id {}{inst})", e.title, e.event_id));
    }
    if events.len() > MAX_AGENDA_LINES {
        out.push_str(&format!("\n… and {} more (list_calendar_events).", events.len() - MAX_AGENDA_LINES));
    }
    out
}

/// `2026-12-01T10:00:00+01:00` → `Tue 2026-12-01 10:00`.
fn short(t: &str) -> String {
    DateTime::parse_from_rfc3339(t).map(|d| d.format("%a %Y-%m-%d %H:%M").to_string()).unwrap_or_else(|_| t.to_string())
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
        let block = render(zone, now, 7, &[ev]);
        assert!(block.contains("now is Thursday 2026-11-26 15:20 (UTC+01:00), time zone Europe/Berlin"), "{block}");
        assert!(block.contains("Friday 2026-11-27 (tomorrow)") && block.contains("Tuesday 2026-12-01"), "{block}");
        assert!(block.contains("- Fri 2026-11-27 09:00 – Fri 2026-11-27 10:00: Dentist (event_id e1)"), "{block}");
        assert!(render(zone, now, 1, &[]).ends_with("Today: no events."));
    }
}
