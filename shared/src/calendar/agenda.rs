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
