//! Which calls wait for the user's yes, in one place per tool, and the
//! operation in human words for the question.
//!
//! - `delete_entity`, `delete_calendar_event`: always (nothing brings them back);
//! - `propose_entities`: always (a brain dump's batch is the user's to review;
//!   the question lists the whole batch);
//! - `update_entity`: when the round updates several entities (two or more
//!   `update_entity` calls);
//! - `update_calendar_event`: when it changes more than one occurrence of a
//!   series (`scope`: `following` or `series`, or an event id without an
//!   `instance` on a recurring event the model named as a series).
//!
//! Every other tool runs at once. A call the registry would refuse
//! (unknown tool, bad arguments) never waits: it runs and fails as usual.

use super::settings::ApprovalSettings;
use crate::calendar::{CalendarEvent, CalendarService};
use crate::entities::{EntityKind, EntityService};
use crate::ids::{EntityId, EventId, ProjectId, UserId};
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
    /// A change to an event someone else organizes.
    OthersEvent,
    /// The user set the tool to ask first.
    AskFirst,
    /// A batch of proposed entities: the user reviews it.
    Proposal,
}

/// The tools that change something: the ones a user may set to ask first.
pub const ASKABLE: &[ToolName] = &[
    ToolName::CreateProject,
    ToolName::UpdateProject,
    ToolName::CreateOntoProject,
    ToolName::CreateDocument,
    ToolName::CreateTask,
    ToolName::CreateGoal,
    ToolName::CreatePlan,
    ToolName::CreateMilestone,
    ToolName::CreateRisk,
    ToolName::CreateRequirement,
    ToolName::UpdateEntity,
    ToolName::DeleteEntity,
    ToolName::LinkEntities,
    ToolName::UnlinkEntities,
    ToolName::MoveDocument,
    ToolName::CreateCalendarEvent,
    ToolName::UpdateCalendarEvent,
    ToolName::DeleteCalendarEvent,
    ToolName::ProposeEntities,
];

/// What the policy and the question read beyond the call: the user's
/// settings, their calendar (whose event it is), the entities (names).
#[derive(Clone, Copy)]
pub struct Lookup<'a> {
    pub user: &'a UserId,
    pub settings: &'a ApprovalSettings,
    pub calendar: Option<&'a CalendarService>,
    pub entities: Option<&'a EntityService>,
    pub project: Option<&'a ProjectId>,
}

impl Lookup<'_> {
    /// The event a calendar call names, when it can be read.
    async fn event(&self, call: &ToolCall) -> Option<CalendarEvent> {
        let id = EventId::parse(args(call).get("event_id")?.as_str()?).ok()?;
        self.calendar?.get(self.user, &id).await.ok()
    }
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
pub async fn why(call: &ToolCall, round: &[ToolCall], at: &Lookup<'_>) -> Option<Why> {
    if is(call, ToolName::DeleteEntity) || is(call, ToolName::DeleteCalendarEvent) {
        return Some(Why::Delete);
    }
    if is(call, ToolName::ProposeEntities) {
        return Some(Why::Proposal);
    }
    if at.settings.asks_first(&call.function.name) {
        return Some(Why::AskFirst);
    }
    if is(call, ToolName::UpdateEntity) && round.iter().filter(|c| is(c, ToolName::UpdateEntity)).count() >= 2 {
        return Some(Why::SeveralUpdates);
    }
    if is(call, ToolName::UpdateCalendarEvent) {
        let scope = args(call).get("scope").and_then(Value::as_str).map(str::to_owned);
        if matches!(scope.as_deref(), Some("following" | "series")) {
            return Some(Why::CalendarSeries);
        }
        if at.event(call).await.is_some_and(|e| e.others()) {
            return Some(Why::OthersEvent);
        }
    }
    None
}

/// What the question shows: the operation in human words, entity names read
/// where the scope has a project, calendar events by title and, when
/// someone else organizes it, whose (an entity or event that cannot be read
/// is named by its id).
pub async fn summary(call: &ToolCall, at: &Lookup<'_>) -> String {
    let a = args(call);
    let s = |k: &str| a.get(k).and_then(Value::as_str).unwrap_or("?").to_string();
    let name = || async {
        let kind = EntityKind::parse(&s("kind"))?;
        let id = EntityId::parse(s("id")).ok()?;
        let e = at.entities?.get(at.user, at.project?, kind, &id).await.ok()?;
        Some(format!("the {} \"{}\"", kind.as_str(), e.fields.name()))
    };
    let entity = || async { name().await.unwrap_or_else(|| format!("the {} {}", s("kind"), s("id"))) };
    let event = || async {
        match at.event(call).await {
            Some(e) => format!("the calendar event \"{}\"{}", e.title, organized_by(&e)),
            None => format!("the calendar event {}", s("event_id")),
        }
    };
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
    } else if let Some(batch) =
        (tool == ToolName::ProposeEntities.as_str()).then(|| crate::tools::proposals::summary(&a)).flatten()
    {
        batch
    } else if tool == ToolName::DeleteCalendarEvent.as_str() {
        format!("Delete {}{scope}", event().await)
    } else if tool == ToolName::UpdateCalendarEvent.as_str() {
        let mut rest = a.clone();
        for k in ["event_id", "instance", "scope"] {
            rest.remove(k);
        }
        format!("Change {}{scope}: {}", event().await, changes(Some(&Value::Object(rest))))
    } else {
        let mut words = tool.replace('_', " ");
        if let Some(first) = words.get_mut(..1) {
            first.make_ascii_uppercase();
        }
        format!("{words}: {}", changes(Some(&Value::Object(a))))
    }
}

/// ` (organized by Bob)` for someone else's event; empty for the user's own.
fn organized_by(e: &CalendarEvent) -> String {
    match &e.organizer {
        Some(o) if !o.own => {
            let who = o.name.clone().unwrap_or_else(|| o.address.trim_start_matches("mailto:").to_string());
            format!(" (organized by {who})")
        }
        _ => String::new(),
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

    fn lookup<'a>(user: &'a UserId, settings: &'a ApprovalSettings) -> Lookup<'a> {
        Lookup { user, settings, calendar: None, entities: None, project: None }
    }

    #[tokio::test]
    async fn deletes_always_wait_updates_when_several_series_changes_when_wide() {
        let (user, settings) = (UserId::parse("u").unwrap(), ApprovalSettings::default());
        let at = lookup(&user, &settings);
        let del = call("delete_entity", serde_json::json!({"kind": "task", "id": "t1"}));
        assert_eq!(why(&del, std::slice::from_ref(&del), &at).await, Some(Why::Delete));
        let up = call("update_entity", serde_json::json!({"kind": "task", "id": "t1", "changes": {}}));
        assert_eq!(why(&up, std::slice::from_ref(&up), &at).await, None, "one update runs");
        let round = [up.clone(), up.clone()];
        assert_eq!(why(&up, &round, &at).await, Some(Why::SeveralUpdates));
        let cal = |scope: &str| call("update_calendar_event", serde_json::json!({"event_id": "e", "scope": scope}));
        assert_eq!(why(&cal("series"), &[], &at).await, Some(Why::CalendarSeries));
        assert_eq!(why(&cal("following"), &[], &at).await, Some(Why::CalendarSeries));
        assert_eq!(why(&cal("instance"), &[], &at).await, None);
        let del_ev = call("delete_calendar_event", serde_json::json!({"event_id": "e"}));
        assert_eq!(why(&del_ev, &[], &at).await, Some(Why::Delete));
        assert_eq!(why(&call("create_task", serde_json::json!({"title": "x"})), &[], &at).await, None);
        let batch = call(
            "propose_entities",
            serde_json::json!({"entities": [{"ref": "t1", "kind": "task", "fields": {"title": "Call the caterer"}},
                {"ref": "g1", "kind": "goal", "fields": {"name": "A good party"}}],
                "links": [{"from": "t1", "relation": "supports", "to": "g1"}]}),
        );
        assert_eq!(why(&batch, std::slice::from_ref(&batch), &at).await, Some(Why::Proposal), "a batch always waits");
        assert_eq!(
            summary(&batch, &at).await,
            "Create 2 entities: task “Call the caterer”, goal “A good party”; and 1 link"
        );
    }

    #[tokio::test]
    async fn a_tool_the_user_set_to_ask_first_waits() {
        let user = UserId::parse("u").unwrap();
        let settings = ApprovalSettings { ask_first: vec!["create_task".into()] };
        let at = lookup(&user, &settings);
        let create = call("create_task", serde_json::json!({"title": "Ship it"}));
        assert_eq!(why(&create, &[], &at).await, Some(Why::AskFirst));
        assert_eq!(summary(&create, &at).await, "Create task: title → \"Ship it\"");
        let goal = call("create_goal", serde_json::json!({"title": "x"}));
        assert_eq!(why(&goal, &[], &at).await, None, "only the tools set");
    }

    #[tokio::test]
    async fn a_change_to_someone_elses_event_waits_the_users_own_does_not() {
        use crate::calendar::store::{contract::event, EventStore, MemoryEventStore};
        use crate::calendar::Organizer;
        use crate::entities::store::MemoryEntityStore;
        let (user, settings) = (UserId::parse("u").unwrap(), ApprovalSettings::default());
        let store = MemoryEventStore::new();
        let organizer = |own| Organizer { address: "mailto:bob@example.com".into(), name: Some("Bob".into()), own };
        let (mut theirs, mut ours) = (event("Board review"), event("Focus time"));
        theirs.organizer = Some(organizer(false));
        ours.organizer = Some(organizer(true));
        store.put(&user, &theirs, None).await.unwrap();
        store.put(&user, &ours, None).await.unwrap();
        let cal = CalendarService::new(store, EntityService::new(MemoryEntityStore::new()));
        let at = Lookup { calendar: Some(&cal), ..lookup(&user, &settings) };
        let moved = |e: &CalendarEvent| {
            call(
                "update_calendar_event",
                serde_json::json!({"event_id": e.id.to_string(), "instance": "x", "title": "Moved"}),
            )
        };
        assert_eq!(why(&moved(&theirs), &[], &at).await, Some(Why::OthersEvent));
        assert_eq!(why(&moved(&ours), &[], &at).await, None);
        assert_eq!(
            summary(&moved(&theirs), &at).await,
            "Change the calendar event \"Board review\" (organized by Bob): title → \"Moved\""
        );
        let other_user = UserId::parse("v").unwrap();
        let elsewhere = Lookup { user: &other_user, ..at };
        assert_eq!(why(&moved(&theirs), &[], &elsewhere).await, None, "another user's id reads nothing");
    }

    #[tokio::test]
    async fn the_summary_names_the_operation() {
        let (user, settings) = (UserId::parse("u").unwrap(), ApprovalSettings::default());
        let at = lookup(&user, &settings);
        let up = call("update_entity", serde_json::json!({"kind": "task", "id": "t1", "changes": {"state": "done"}}));
        assert_eq!(summary(&up, &at).await, "Update the task t1: state → \"done\"");
        let cal = call("delete_calendar_event", serde_json::json!({"event_id": "e1", "scope": "series"}));
        assert_eq!(summary(&cal, &at).await, "Delete the calendar event e1 (the whole series)");
    }
}
