//! Which calls wait for the user's yes, in one place per tool, and the
//! operation in human words for the question.
//!
//! - `delete_entity`, `delete_calendar_event`: always (nothing brings them back);
//! - `update_entity`: when the round updates several entities (two or more
//!   `update_entity` calls);
//! - `update_calendar_event`: when it changes more than one occurrence of a
//!   series (`scope`: `following` or `series`, or an event id without an
//!   `instance` on a recurring event the model named as a series).
//!
//! Every other tool runs at once. A call the registry would refuse
//! (unknown tool, bad arguments) never waits: it runs and fails as usual.

use crate::entities::{EntityKind, EntityService};
use crate::ids::{EntityId, ProjectId, UserId};
use crate::message::ToolCall;
use crate::tools::ToolName;
use serde_json::{Map, Value};

/// Why a call waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// A delete: nothing brings it back.
    Delete,
    /// One of several updates in one round.
    SeveralUpdates,
    /// A change to more than one occurrence of a calendar series.
    CalendarSeries,
}

fn args(call: &ToolCall) -> Map<String, Value> {
    match serde_json::from_str(&call.function.arguments) {
        Ok(Value::Object(m)) => m,
        _ => Map::new(),
    }
}

fn is(call: &ToolCall, tool: ToolName) -> bool {
    call.function.name == tool.as_str()
}

/// Why `call`, one of `round`'s, must wait; `None`: it runs at once.
pub fn why(call: &ToolCall, round: &[ToolCall]) -> Option<Why> {
    if is(call, ToolName::DeleteEntity) || is(call, ToolName::DeleteCalendarEvent) {
        return Some(Why::Delete);
    }
    if is(call, ToolName::UpdateEntity) && round.iter().filter(|c| is(c, ToolName::UpdateEntity)).count() >= 2 {
        return Some(Why::SeveralUpdates);
    }
    if is(call, ToolName::UpdateCalendarEvent) {
        let scope = args(call).get("scope").and_then(Value::as_str).map(str::to_owned);
        if matches!(scope.as_deref(), Some("following" | "series")) {
            return Some(Why::CalendarSeries);
        }
    }
    None
}

/// What the question shows: the operation in human words, entity names read
/// where the scope has a project (an entity that cannot be read is named by
/// its id).
pub async fn summary(
    call: &ToolCall,
    entities: Option<&EntityService>,
    user: &UserId,
    project: Option<&ProjectId>,
) -> String {
    let a = args(call);
    let s = |k: &str| a.get(k).and_then(Value::as_str).unwrap_or("?").to_string();
    let name = || async {
        let kind = EntityKind::parse(&s("kind"))?;
        let id = EntityId::parse(s("id")).ok()?;
        let e = entities?.get(user, project?, kind, &id).await.ok()?;
        Some(format!("the {} \"{}\"", kind.as_str(), e.fields.name()))
    };
    let entity = || async { name().await.unwrap_or_else(|| format!("the {} {}", s("kind"), s("id"))) };
    let scope = match a.get("scope").and_then(Value::as_str) {
        Some("series") => " (the whole series)",
        Some("following") => " (this and every later occurrence)",
        _ => "",
    };
    let tool = call.function.name.as_str();
    if tool == ToolName::DeleteEntity.as_str() {
        format!("Delete {}", entity().await)
    } else if tool == ToolName::UpdateEntity.as_str() {
        format!("Update {}: {}", entity().await, changes(a.get("changes")))
    } else if tool == ToolName::DeleteCalendarEvent.as_str() {
        format!("Delete the calendar event {}{scope}", s("event_id"))
    } else if tool == ToolName::UpdateCalendarEvent.as_str() {
        let mut rest = a.clone();
        for k in ["event_id", "instance", "scope"] {
            rest.remove(k);
        }
        format!("Change the calendar event {}{scope}: {}", s("event_id"), changes(Some(&Value::Object(rest))))
    } else {
        format!("Run {tool} with {}", call.function.arguments)
    }
}

/// `title → "Launch", state → "done"`: each changed field and its new value.
fn changes(changes: Option<&Value>) -> String {
    let Some(Value::Object(m)) = changes else { return "no changes named".into() };
    let shown: Vec<String> = m
        .iter()
        .map(|(k, v)| {
            let v = match v {
                Value::Null => "(cleared)".to_string(),
                Value::String(s) => format!("\"{}\"", s.chars().take(80).collect::<String>()),
                other => other.to_string().chars().take(80).collect(),
            };
            format!("{k} → {v}")
        })
        .collect();
    if shown.is_empty() {
        "no changes named".into()
    } else {
        shown.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::FunctionCall;

    fn call(name: &str, args: Value) -> ToolCall {
        ToolCall {
            id: format!("c-{name}"),
            kind: "function".into(),
            function: FunctionCall { name: name.into(), arguments: args.to_string() },
        }
    }

    #[test]
    fn deletes_always_wait_updates_when_several_series_changes_when_wide() {
        let del = call("delete_entity", serde_json::json!({"kind": "task", "id": "t1"}));
        assert_eq!(why(&del, std::slice::from_ref(&del)), Some(Why::Delete));
        let up = call("update_entity", serde_json::json!({"kind": "task", "id": "t1", "changes": {}}));
        assert_eq!(why(&up, std::slice::from_ref(&up)), None, "one update runs");
        let round = [up.clone(), up.clone()];
        assert_eq!(why(&up, &round), Some(Why::SeveralUpdates));
        let cal = |scope: &str| call("update_calendar_event", serde_json::json!({"event_id": "e", "scope": scope}));
        assert_eq!(why(&cal("series"), &[]), Some(Why::CalendarSeries));
        assert_eq!(why(&cal("following"), &[]), Some(Why::CalendarSeries));
        assert_eq!(why(&cal("instance"), &[]), None);
        let del_ev = call("delete_calendar_event", serde_json::json!({"event_id": "e"}));
        assert_eq!(why(&del_ev, &[]), Some(Why::Delete));
        assert_eq!(why(&call("create_task", serde_json::json!({"title": "x"})), &[]), None);
    }

    #[tokio::test]
    async fn the_summary_names_the_operation() {
        let user = UserId::parse("u").unwrap();
        let up = call("update_entity", serde_json::json!({"kind": "task", "id": "t1", "changes": {"state": "done"}}));
        assert_eq!(summary(&up, None, &user, None).await, "Update the task t1: state → \"done\"");
        let cal = call("delete_calendar_event", serde_json::json!({"event_id": "e1", "scope": "series"}));
        assert_eq!(summary(&cal, None, &user, None).await, "Delete the calendar event e1 (the whole series)");
    }
}
