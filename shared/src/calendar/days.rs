//! Named ranges of days ([`Days`]: `today`, `this_week`, `friday`, …),
//! resolved by the server against today in the user's zone, so a model
//! never computes a week's dates itself. The rules (docs/calendar.md, "Named
//! ranges"): a week is Monday to Sunday (ISO 8601), `this_week` the one
//! holding today, `next_week` the one after; a weekday's name is the next
//! such day, today included; a month is the calendar month.

use chrono::{Datelike, Duration, NaiveDate, Weekday};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A range of whole days named in words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Days {
    Today,
    Tomorrow,
    /// Monday to Sunday of the week holding today.
    ThisWeek,
    /// Monday to Sunday of the week after.
    NextWeek,
    /// Today and the 6 days after it.
    // Spelled as the docs and the message's reading write it: serde's
    // snake_case made it `next7_days`, and the model's `next_7_days`,
    // copied from the reading, was refused.
    #[serde(rename = "next_7_days", alias = "next7_days")]
    Next7Days,
    ThisMonth,
    NextMonth,
    Monday,
    Tuesday,
    Wednesday,
    Thursday,
    Friday,
    Saturday,
    Sunday,
}

impl Days {
    /// The first and last day (both included) as seen on `today`.
    pub fn resolve(self, today: NaiveDate) -> (NaiveDate, NaiveDate) {
        let monday = today - Duration::days(today.weekday().num_days_from_monday().into());
        let month = |d: NaiveDate| {
            let first = d.with_day(1).unwrap_or(d);
            let next = first.checked_add_months(chrono::Months::new(1)).unwrap_or(first);
            (first, next - Duration::days(1))
        };
        let one = |d: NaiveDate| (d, d);
        match self {
            Days::Today => one(today),
            Days::Tomorrow => one(today + Duration::days(1)),
            Days::ThisWeek => (monday, monday + Duration::days(6)),
            Days::NextWeek => (monday + Duration::days(7), monday + Duration::days(13)),
            Days::Next7Days => (today, today + Duration::days(6)),
            Days::ThisMonth => month(today),
            Days::NextMonth => month(month(today).1 + Duration::days(1)),
            day => one(next_on_or_after(today, day.weekday().unwrap_or(Weekday::Mon))),
        }
    }

    fn weekday(self) -> Option<Weekday> {
        Some(match self {
            Days::Monday => Weekday::Mon,
            Days::Tuesday => Weekday::Tue,
            Days::Wednesday => Weekday::Wed,
            Days::Thursday => Weekday::Thu,
            Days::Friday => Weekday::Fri,
            Days::Saturday => Weekday::Sat,
            Days::Sunday => Weekday::Sun,
            _ => return None,
        })
    }
}

/// The first `day` on or after `today`.
pub(crate) fn next_on_or_after(today: NaiveDate, day: Weekday) -> NaiveDate {
    let ahead = (7 + day.num_days_from_monday() - today.weekday().num_days_from_monday()) % 7;
    today + Duration::days(ahead.into())
}

/// "Mon 30 Nov – Sun 6 Dec 2026" (one day: "Fri 11 Dec 2026").
pub fn describe((first, last): (NaiveDate, NaiveDate)) -> String {
    match first == last {
        true => first.format("%a %-d %b %Y").to_string(),
        false => format!("{} – {}", first.format("%a %-d %b"), last.format("%a %-d %b %Y")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> NaiveDate {
        s.parse().unwrap()
    }

    #[test]
    fn weeks_run_monday_to_sunday_around_today() {
        // Sunday 6 Dec 2026: this week is the one ending today (the issue's
        // model listed 1–7 Dec), next week the coming Monday to Sunday.
        let sunday = d("2026-12-06");
        assert_eq!(Days::ThisWeek.resolve(sunday), (d("2026-11-30"), d("2026-12-06")));
        assert_eq!(Days::NextWeek.resolve(sunday), (d("2026-12-07"), d("2026-12-13")));
        let monday = d("2026-12-07");
        assert_eq!(Days::ThisWeek.resolve(monday), (d("2026-12-07"), d("2026-12-13")));
        assert_eq!(Days::Next7Days.resolve(sunday), (d("2026-12-06"), d("2026-12-12")));
        // Across a year's end.
        assert_eq!(Days::NextWeek.resolve(d("2026-12-31")), (d("2027-01-04"), d("2027-01-10")));
    }

    #[test]
    fn days_and_months_by_name() {
        let sunday = d("2026-12-06");
        assert_eq!(Days::Today.resolve(sunday), (sunday, sunday));
        assert_eq!(Days::Tomorrow.resolve(sunday), (d("2026-12-07"), d("2026-12-07")));
        assert_eq!(Days::Friday.resolve(sunday), (d("2026-12-11"), d("2026-12-11")));
        assert_eq!(Days::Sunday.resolve(sunday), (sunday, sunday), "today is that day");
        assert_eq!(Days::Saturday.resolve(d("2026-12-11")), (d("2026-12-12"), d("2026-12-12")));
        assert_eq!(Days::ThisMonth.resolve(sunday), (d("2026-12-01"), d("2026-12-31")));
        assert_eq!(Days::NextMonth.resolve(sunday), (d("2027-01-01"), d("2027-01-31")));
        assert_eq!(Days::NextMonth.resolve(d("2027-01-31")), (d("2027-02-01"), d("2027-02-28")));
        assert_eq!(describe(Days::ThisWeek.resolve(sunday)), "Mon 30 Nov – Sun 6 Dec 2026");
        assert_eq!(describe(Days::Friday.resolve(sunday)), "Fri 11 Dec 2026");
    }

    /// The names the tools take are the ones the docs and the message's
    /// reading write (`next_7_days` was serde's `next7_days`, and refused).
    #[test]
    fn every_range_is_taken_by_the_name_the_reading_writes() {
        let read = |s: &str| serde_json::from_value::<Days>(serde_json::json!(s)).ok();
        assert_eq!(read("next_7_days"), Some(Days::Next7Days));
        assert_eq!(read("next7_days"), Some(Days::Next7Days), "the old name still read");
        assert_eq!(serde_json::to_value(Days::Next7Days).unwrap(), "next_7_days");
        for name in ["today", "tomorrow", "this_week", "next_week", "this_month", "next_month", "friday"] {
            assert!(read(name).is_some(), "{name}");
        }
    }
}
