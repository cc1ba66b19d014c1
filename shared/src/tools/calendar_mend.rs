//! Calls mended from the user's own words before they run
//! ([`crate::model_loop::MendCall`]): what the server read from the message
//! ([`crate::calendar::spoken`]) wins over a value the model made up.

use super::calendar::{CreateCalendarEvent, UpdateCalendarEvent};
use super::Tool;
use crate::calendar::spoken::SaidSeries;
use serde_json::Value;

/// What the user said of a series, mending a calendar call's `repeat`:
/// - a number of times and no end date ("six lessons"): a `repeat` with an
///   `until` and no `count` takes that count instead. The local model wrote
///   an `until` of its own for "six lessons" and "three sessions in total"
///   (one to nine occurrences) and, refused, wrote it again;
/// - one day and no word of repeating ("a dentist appointment next Wednesday
///   at 10am"): a new event's `repeat` (or `rrule`) is left out. The local
///   model booked that appointment weekly, with no end.
pub struct SeriesSaid(pub SaidSeries);

impl crate::model_loop::MendCall for SeriesSaid {
    fn mend(&self, call: &mut crate::message::ToolCall) -> Option<&'static str> {
        let name = call.function.name.as_str();
        let mut args: Value = serde_json::from_str(&call.function.arguments).ok()?;
        let why = match self.0 {
            SaidSeries::Count(n) if [CreateCalendarEvent::NAME, UpdateCalendarEvent::NAME].contains(&name) => {
                let repeat = args.get_mut("repeat")?.as_object_mut()?;
                if repeat.contains_key("count") || repeat.remove("until").is_none() {
                    return None;
                }
                repeat.insert("count".into(), Value::from(n));
                "the user said how many times and no end date: `count` in place of `until`"
            }
            SaidSeries::OneOff if name == CreateCalendarEvent::NAME => {
                let o = args.as_object_mut()?;
                let (repeat, rrule) = (o.remove("repeat"), o.remove("rrule"));
                repeat.or(rrule)?;
                "the user named one day and no repeating: `repeat` left out"
            }
            _ => return None,
        };
        call.function.arguments = args.to_string();
        Some(why)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{FunctionCall, ToolCall};
    use crate::model_loop::MendCall;

    fn call(name: &str, args: Value) -> ToolCall {
        let function = FunctionCall { name: name.into(), arguments: args.to_string() };
        ToolCall { id: "c1".into(), kind: "function".into(), function }
    }

    fn args(c: &ToolCall) -> Value {
        serde_json::from_str(&c.function.arguments).unwrap()
    }

    #[test]
    fn a_made_up_until_gives_way_to_the_count_the_user_said() {
        let repeat = serde_json::json!({"every": "week", "on_days": ["thursday"], "until": "2026-12-16"});
        let mut c = call("create_calendar_event", serde_json::json!({"title": "Piano", "repeat": repeat}));
        assert!(SeriesSaid(SaidSeries::Count(6)).mend(&mut c).is_some());
        assert_eq!(args(&c)["repeat"], serde_json::json!({"every": "week", "on_days": ["thursday"], "count": 6}));

        // A count already there, no `until`, no `repeat`, another tool: left as they are.
        for (name, a) in [
            (
                "create_calendar_event",
                serde_json::json!({"repeat": {"every": "week", "count": 2, "until": "2027-01-01"}}),
            ),
            ("create_calendar_event", serde_json::json!({"repeat": {"every": "week"}})),
            ("update_calendar_event", serde_json::json!({"event_id": "e", "start": "16:00"})),
            ("create_task", serde_json::json!({"repeat": {"until": "2026-12-16"}})),
        ] {
            let mut c = call(name, a.clone());
            assert_eq!(SeriesSaid(SaidSeries::Count(6)).mend(&mut c), None, "{name} {a}");
            assert_eq!(args(&c), a);
        }
        let mut update = call(
            "update_calendar_event",
            serde_json::json!({"event_id": "e", "repeat": {"every": "day", "until": "2026-12-09"}}),
        );
        assert!(SeriesSaid(SaidSeries::Count(3)).mend(&mut update).is_some());
        assert_eq!(args(&update)["repeat"]["count"], 3);
    }

    #[test]
    fn a_one_off_loses_a_repeat_the_user_never_asked_for() {
        let one_off = SeriesSaid(SaidSeries::OneOff);
        let weekly = serde_json::json!({"title": "Dentist", "start": "2026-12-09T10:00", "repeat": {"every": "week"}});
        let mut c = call("create_calendar_event", weekly);
        assert!(one_off.mend(&mut c).is_some());
        assert_eq!(args(&c), serde_json::json!({"title": "Dentist", "start": "2026-12-09T10:00"}));
        let mut ruled = call("create_calendar_event", serde_json::json!({"title": "D", "rrule": "FREQ=WEEKLY"}));
        assert!(one_off.mend(&mut ruled).is_some());
        // An update's `repeat`, a plain one-off, or a series said some other way: left as they are.
        for (mend, name, a) in [
            (&one_off, "update_calendar_event", serde_json::json!({"event_id": "e", "repeat": {"every": "week"}})),
            (&one_off, "create_calendar_event", serde_json::json!({"title": "D", "start": "2026-12-09T10:00"})),
            (&SeriesSaid(SaidSeries::Other), "create_calendar_event", serde_json::json!({"repeat": {"every": "week"}})),
        ] {
            let mut c = call(name, a.clone());
            assert_eq!(mend.mend(&mut c), None, "{name} {a}");
            assert_eq!(args(&c), a);
        }
    }
}
