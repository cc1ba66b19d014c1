//! Time in the calendar: an IANA [`Zone`] and an [`EventTime`] (a whole day
//! or an instant). The rules:
//! - A timed event is stored as instants (UTC) plus the zone it was made in;
//!   its wall-clock time in that zone is what recurs (a weekly 09:00 in
//!   Berlin stays 09:00 across DST, its UTC instant moves).
//! - An all-day event is dates (end exclusive, as RFC 5545), never midnight UTC.
//! - Input may be a date (`2026-12-01`), a local date-time read in the zone
//!   (`2026-12-01T10:00`), or an instant with an offset (`…T10:00:00+01:00`,
//!   `…Z`). A local time that does not exist (the DST gap) is refused; an
//!   ambiguous one (the repeated hour) takes the earlier instant.

use super::error::CalendarError;
use chrono::{DateTime, Duration, LocalResult, NaiveDate, NaiveDateTime, NaiveTime, TimeZone, Utc};
use chrono_tz::Tz;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use utoipa::openapi::schema::{ObjectBuilder, Type};
use utoipa::openapi::{RefOr, Schema};

/// An IANA time zone (`Europe/Berlin`), serialized by name.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
pub struct Zone(pub Tz);

impl Zone {
    pub const UTC: Zone = Zone(Tz::UTC);

    pub fn parse(name: &str) -> Result<Zone, CalendarError> {
        name.trim().parse::<Tz>().map(Zone).map_err(|_| {
            CalendarError::bad(
                "invalid_timezone",
                format!("unknown time zone {name:?}: use an IANA name such as Europe/Berlin"),
            )
        })
    }

    pub fn name(&self) -> &'static str {
        self.0.name()
    }

    /// The instant of a wall-clock time here: the gap is refused, the fold
    /// takes the earlier instant.
    pub fn instant(&self, local: NaiveDateTime) -> Result<DateTime<Utc>, CalendarError> {
        match self.0.from_local_datetime(&local) {
            LocalResult::Single(t) => Ok(t.with_timezone(&Utc)),
            LocalResult::Ambiguous(a, b) => Ok(a.min(b).with_timezone(&Utc)),
            LocalResult::None => Err(CalendarError::bad(
                "invalid_time",
                format!("{local} does not exist in {} (the clocks skip it)", self.name()),
            )),
        }
    }

    /// Midnight starting `day` here (or the first instant of the day when a
    /// DST change skips midnight).
    pub fn day_start(&self, day: NaiveDate) -> DateTime<Utc> {
        (0..=2)
            .find_map(|h| self.instant(day.and_time(NaiveTime::from_hms_opt(h, 0, 0)?)).ok())
            .unwrap_or_else(|| Utc.from_utc_datetime(&day.and_hms_opt(0, 0, 0).unwrap_or_default()))
    }

    pub fn local(&self, t: DateTime<Utc>) -> DateTime<Tz> {
        t.with_timezone(&self.0)
    }
}

impl fmt::Display for Zone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for Zone {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for Zone {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Zone::parse(&s).map_err(serde::de::Error::custom)
    }
}

impl utoipa::PartialSchema for Zone {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .description(Some("An IANA time zone name, e.g. Europe/Berlin."))
            .examples([serde_json::json!("Europe/Berlin")])
            .into()
    }
}
impl utoipa::ToSchema for Zone {}

/// A whole day, or an instant.
#[derive(Clone, Copy, PartialEq, Eq, Debug, PartialOrd, Ord, Hash)]
pub enum EventTime {
    Date(NaiveDate),
    At(DateTime<Utc>),
}

impl EventTime {
    /// Reads input: a date, a local date-time in `zone`, or an instant.
    pub fn parse_in(s: &str, zone: Zone) -> Result<EventTime, CalendarError> {
        let s = s.trim();
        if let Ok(d) = NaiveDate::parse_from_str(s, "%Y-%m-%d") {
            return Ok(EventTime::Date(d));
        }
        if let Ok(t) = DateTime::parse_from_rfc3339(s) {
            return Ok(EventTime::At(t.with_timezone(&Utc)));
        }
        for f in ["%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M"] {
            if let Ok(local) = NaiveDateTime::parse_from_str(s, f) {
                return zone.instant(local).map(EventTime::At);
            }
        }
        Err(CalendarError::bad(
            "invalid_time",
            format!("{s:?} is not a date (2026-12-01), a local time (2026-12-01T10:00) or an instant (2026-12-01T10:00:00+01:00)"),
        ))
    }

    /// Reads the stored form: a date or an RFC 3339 instant.
    pub fn parse_stored(s: &str) -> Option<EventTime> {
        NaiveDate::parse_from_str(s, "%Y-%m-%d")
            .map(EventTime::Date)
            .ok()
            .or_else(|| DateTime::parse_from_rfc3339(s).ok().map(|t| EventTime::At(t.with_timezone(&Utc))))
    }

    pub fn is_date(&self) -> bool {
        matches!(self, EventTime::Date(_))
    }

    /// The instant it begins, reading a date in `zone`.
    pub fn instant(&self, zone: Zone) -> DateTime<Utc> {
        match self {
            EventTime::Date(d) => zone.day_start(*d),
            EventTime::At(t) => *t,
        }
    }

    /// As a user reads it in `zone`: the date, or the local time with its offset.
    pub fn display_in(&self, zone: Zone) -> String {
        match self {
            EventTime::Date(d) => d.to_string(),
            EventTime::At(t) => zone.local(*t).to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        }
    }

    /// Moved by `d` (dates by whole days).
    pub fn shifted(&self, d: Duration) -> EventTime {
        match self {
            EventTime::Date(day) => EventTime::Date(*day + Duration::days(d.num_days())),
            EventTime::At(t) => EventTime::At(*t + d),
        }
    }
}

impl fmt::Display for EventTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EventTime::Date(d) => write!(f, "{d}"),
            EventTime::At(t) => f.write_str(&t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
        }
    }
}

impl Serialize for EventTime {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for EventTime {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        EventTime::parse_stored(&s)
            .ok_or_else(|| serde::de::Error::custom(format!("{s:?} is not a date or an instant")))
    }
}

impl utoipa::PartialSchema for EventTime {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .description(Some("A date (2026-12-01, all-day) or an RFC 3339 instant in UTC (2026-12-01T09:00:00Z)."))
            .into()
    }
}
impl utoipa::ToSchema for EventTime {}

#[cfg(test)]
mod tests {
    use super::*;

    fn berlin() -> Zone {
        Zone::parse("Europe/Berlin").unwrap()
    }

    #[test]
    fn local_times_are_read_in_the_zone_and_instants_kept() {
        let t = EventTime::parse_in("2026-12-01T10:00", berlin()).unwrap();
        assert_eq!(t.to_string(), "2026-12-01T09:00:00Z");
        assert_eq!(t.display_in(berlin()), "2026-12-01T10:00:00+01:00");
        let t = EventTime::parse_in("2026-07-01T10:00:00-07:00", berlin()).unwrap();
        assert_eq!(t.to_string(), "2026-07-01T17:00:00Z");
        assert_eq!(
            EventTime::parse_in("2026-12-01", berlin()).unwrap(),
            EventTime::Date(NaiveDate::from_ymd_opt(2026, 12, 1).unwrap())
        );
    }

    #[test]
    fn the_dst_gap_is_refused_and_the_fold_takes_the_earlier_instant() {
        let e = EventTime::parse_in("2026-03-29T02:30", berlin()).unwrap_err();
        assert_eq!(e.code(), "invalid_time");
        let t = EventTime::parse_in("2026-10-25T02:30", berlin()).unwrap();
        assert_eq!(t.to_string(), "2026-10-25T00:30:00Z");
    }

    #[test]
    fn unknown_zones_and_garbage_are_refused() {
        assert_eq!(Zone::parse("Mars/Olympus").unwrap_err().code(), "invalid_timezone");
        assert_eq!(EventTime::parse_in("tomorrow at 10", berlin()).unwrap_err().code(), "invalid_time");
        assert_eq!(EventTime::parse_stored("2026-12-01T10:00"), None, "stored times carry an offset");
    }
}
