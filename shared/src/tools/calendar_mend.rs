//! Calls mended from the user's own words before they run
//! ([`crate::model_loop::MendCall`]): what the server read from the message
//! ([`crate::calendar::spoken`]) wins over a value the model made up.

use super::calendar::{CreateCalendarEvent, UpdateCalendarEvent};
use super::Tool;
use serde_json::Value;

/// The number of times the user said a series happens ("six lessons"),
/// with no end date said: a `repeat` with an `until` and no `count` takes
/// that count instead. The local model wrote an `until` of its own for "six
/// lessons" and "three sessions in total" (one to nine occurrences), and,
/// refused, wrote it again; the user's number is what they asked for.
pub struct CountSaid(pub u32);

impl crate::model_loop::MendCall for CountSaid {
    fn mend(&self, call: &mut crate::message::ToolCall) -> Option<&'static str> {
        let named = [CreateCalendarEvent::NAME, UpdateCalendarEvent::NAME];
        if !named.contains(&call.function.name.as_str()) {
            return None;
        }
        let mut args: Value = serde_json::from_str(&call.function.arguments).ok()?;
        let repeat = args.get_mut("repeat")?.as_object_mut()?;
        if repeat.contains_key("count") || repeat.remove("until").is_none() {
            return None;
        }
        repeat.insert("count".into(), Value::from(self.0));
        call.function.arguments = args.to_string();
        Some("the user said how many times and no end date: `count` in place of `until`")
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
        assert!(CountSaid(6).mend(&mut c).is_some());
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
            assert_eq!(CountSaid(6).mend(&mut c), None, "{name} {a}");
            assert_eq!(args(&c), a);
        }
        let mut update = call(
            "update_calendar_event",
            serde_json::json!({"event_id": "e", "repeat": {"every": "day", "until": "2026-12-09"}}),
        );
        assert!(CountSaid(3).mend(&mut update).is_some());
        assert_eq!(args(&update)["repeat"]["count"], 3);
    }
}
