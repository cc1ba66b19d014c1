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
//!   `instance` on a recurring event the model named as a series);
//! - `reorganize_project`: when the batch names more than
//!   [`REORGANIZE_ASK_ABOVE`] changes (moves, links and unlinks together).
//!
//! Every other tool runs at once. A call the registry would refuse
//! (unknown tool, bad arguments) never waits: it runs and fails as usual.

use super::settings::ApprovalSettings;
use crate::calendar::{CalendarEvent, CalendarService, Zone};
use crate::entities::{EntityKind, EntityService};
use crate::ids::{EntityId, EventId, ProjectId, UserId};
use crate::message::ToolCall;
use crate::tools::wording;
use crate::tools::{ReorganizeArgs, ToolName, REORGANIZE_ASK_ABOVE};
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
    /// A reorganize of more than [`REORGANIZE_ASK_ABOVE`] changes.
    LargeReorganize,
    /// A batch of proposed entities: the user reviews it.
    Proposal,
}

/// The tools a user may set to ask first: defined beside the tools
/// ([`crate::tools::ASKABLE`]), which the tool layer and the overview read too.
pub use crate::tools::ASKABLE;

/// What the policy and the question read beyond the call: the user's
/// settings, their calendar (whose event it is), the entities (names).
#[derive(Clone, Copy)]
pub struct Lookup<'a> {
    pub user: &'a UserId,
    pub settings: &'a ApprovalSettings,
    pub calendar: Option<&'a CalendarService>,
    pub entities: Option<&'a EntityService>,
    pub project: Option<&'a ProjectId>,
    /// The zone dates are shown in.
    pub zone: Zone,
}

impl Lookup<'_> {
    /// The name of the entity `kind` `id` of the scope's project, when it can be read.
    async fn name(&self, kind: &str, id: &str) -> Option<String> {
        let kind = EntityKind::parse(kind)?;
        let id = EntityId::parse(id).ok()?;
        let e = self.entities?.get(self.user, self.project?, kind, &id).await.ok()?;
        Some(e.fields.name().to_string())
    }

    /// The arguments with each entity id replaced by its name, where it can
    /// be read: `X_id` beside `X_kind` (links; the kind then goes), and a
    /// `parent_id` or `document_id` (documents). Other ids stay.
    async fn named_ids(&self, mut a: Map<String, Value>) -> Map<String, Value> {
        let ids: Vec<(String, String, String)> = a
            .iter()
            .filter_map(|(k, v)| {
                let stem = k.strip_suffix("_id")?;
                let kind = match stem {
                    "parent" | "document" => "document".to_string(),
                    _ => a.get(&format!("{stem}_kind"))?.as_str()?.to_string(),
                };
                Some((k.clone(), kind, v.as_str()?.to_string()))
            })
            .collect();
        for (key, kind, id) in ids {
            if let Some(name) = self.name(&kind, &id).await {
                a.remove(&format!("{}_kind", key.trim_end_matches("_id")));
                a.insert(key, Value::String(name));
            }
        }
        a
    }

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

/// A `reorganize_project` call's arguments, when they are the tool's shape.
fn reorganize(call: &ToolCall) -> Option<ReorganizeArgs> {
    // As the tool reads them: models send `null` for an absent list.
    let raw = args(call).into_iter().filter(|(_, v)| !v.is_null()).collect();
    serde_json::from_value(Value::Object(raw)).ok()
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
    if is(call, ToolName::ReorganizeProject) && reorganize(call).is_some_and(|r| r.changes() > REORGANIZE_ASK_ABOVE) {
        return Some(Why::LargeReorganize);
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

/// What the question shows: the operation in human words ([`wording`]:
/// dates in the user's zone, priorities named, entities by name), entity
/// names read where the scope has a project, calendar events by title and,
/// when someone else organizes it, whose (an entity or event that cannot be
/// read is named by its id).
pub async fn summary(call: &ToolCall, at: &Lookup<'_>) -> String {
    let a = args(call);
    let s = |k: &str| a.get(k).and_then(Value::as_str).unwrap_or("?").to_string();
    let entity = || async {
        match at.name(&s("kind"), &s("id")).await {
            Some(name) => format!("the {} \"{name}\"", s("kind")),
            None => format!("the {} {}", s("kind"), s("id")),
        }
    };
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
        let changes = match a.get("changes") {
            Some(Value::Object(m)) => wording::changes(m, at.zone),
            _ => "no changes named".into(),
        };
        format!("Update {}: {changes}", entity().await)
    } else if let Some(r) = reorganize(call).filter(|_| tool == ToolName::ReorganizeProject.as_str()) {
        reorganize_summary(&r, at).await
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
        format!("Change {}{scope}: {}", event().await, wording::changes(&rest, at.zone))
    } else {
        let mut words = tool.replace('_', " ");
        if let Some(first) = words.get_mut(..1) {
            first.make_ascii_uppercase();
        }
        format!("{words}: {}", wording::changes(&at.named_ids(a.clone()).await, at.zone))
    }
}

/// `Reorganize the project: move "API notes" under "Specs"; link task "t2"
/// supports goal "Ship"; ...`: every change, entities by name where they can
/// be read (by id where not).
async fn reorganize_summary(r: &ReorganizeArgs, at: &Lookup<'_>) -> String {
    let name = |kind: EntityKind, id: &str| {
        let id = id.to_string();
        async move {
            let read = async {
                let e = at.entities?.get(at.user, at.project?, kind, &EntityId::parse(&id).ok()?).await.ok()?;
                Some(format!("\"{}\"", e.fields.name()))
            };
            read.await.unwrap_or(id)
        }
    };
    let mut parts = vec![];
    for m in &r.moves {
        let doc = name(EntityKind::Document, &m.document_id).await;
        let place = match &m.new_parent_id {
            Some(p) => format!("under {}", name(EntityKind::Document, p).await),
            None => "to the top".into(),
        };
        parts.push(format!("move {doc} {place}"));
    }
    for (verb, edges) in [("unlink", &r.unlink), ("link", &r.link)] {
        for e in edges {
            let (from, to) = (name(e.from_kind, &e.from_id).await, name(e.to_kind, &e.to_id).await);
            let (fk, tk) = (e.from_kind.as_str(), e.to_kind.as_str());
            parts.push(format!("{verb} {fk} {from} {} {tk} {to}", e.relation.replace('_', " ")));
        }
    }
    format!("Reorganize the project ({} changes): {}", r.changes(), parts.join("; "))
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
        Lookup { user, settings, calendar: None, entities: None, project: None, zone: Zone::UTC }
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

    /// The card of issue 40 ("due_at → 1633072800000, priority → 1"): a date
    /// the model gave reads as a date in the user's zone, the priority by
    /// name; a call stored before the tools took dates as text still reads.
    #[tokio::test]
    async fn the_card_shows_dates_in_the_users_zone_and_priorities_by_name() {
        let user = UserId::parse("u").unwrap();
        let settings = ApprovalSettings { ask_first: vec!["create_task".into()] };
        let at = Lookup { zone: Zone::parse("Europe/Berlin").unwrap(), ..lookup(&user, &settings) };
        let given =
            call("create_task", serde_json::json!({"title": "Order compost", "due_at": "2026-12-10", "priority": 1}));
        let card = summary(&given, &at).await;
        assert_eq!(card, "Create task: due → Thu 10 Dec 2026, priority → highest, title → \"Order compost\"");
        let stored =
            call("create_task", serde_json::json!({"title": "Order compost", "due_at": 1_633_072_800_000_i64}));
        let card = summary(&stored, &at).await;
        assert_eq!(card, "Create task: due → Fri 1 Oct 2021, 09:20, title → \"Order compost\"");
        let up = call("update_entity", serde_json::json!({"kind": "task", "id": "t1", "changes": {"due_at": null}}));
        assert_eq!(summary(&up, &at).await, "Update the task t1: due → (cleared)");
    }

    /// Ids the user never sees are named: a link's two ends, a document's parent.
    #[tokio::test]
    async fn the_card_names_entities_not_ids() {
        use crate::entities::store::MemoryEntityStore;
        use crate::entities::{CreateEntity, EntityFields, NewProject, TaskFields};
        let (user, settings) = (UserId::parse("u").unwrap(), ApprovalSettings::default());
        let svc = EntityService::new(MemoryEntityStore::new());
        let new = NewProject { name: "Garden".into(), description: None, state: Default::default(), context: None };
        let project = svc.create_project(&user, new).await.unwrap().data.project.id;
        let task = |title: &str| {
            let fields = TaskFields {
                title: title.into(),
                description: None,
                state: Default::default(),
                priority: None,
                due_at: None,
            };
            CreateEntity::new(EntityFields::Task(fields))
        };
        let seeds = svc.create(&user, &project, task("Buy seeds")).await.unwrap().data.id.to_string();
        let bed = svc.create(&user, &project, task("Dig the bed")).await.unwrap().data.id.to_string();
        let at = Lookup { entities: Some(&svc), project: Some(&project), ..lookup(&user, &settings) };
        let link = call(
            "link_entities",
            serde_json::json!({"from_kind": "task", "from_id": seeds, "relation": "blocks", "to_kind": "task", "to_id": bed}),
        );
        let card = summary(&link, &at).await;
        assert_eq!(card, "Link entities: from → \"Buy seeds\", relation → \"blocks\", to → \"Dig the bed\"");
        let del = call("delete_entity", serde_json::json!({"kind": "task", "id": seeds}));
        assert_eq!(summary(&del, &at).await, "Delete the task \"Buy seeds\"");
    }

    #[tokio::test]
    async fn a_reorganize_of_more_than_a_few_changes_waits_and_is_spelled_out() {
        let (user, settings) = (UserId::parse("u").unwrap(), ApprovalSettings::default());
        let at = lookup(&user, &settings);
        let mv = |d: &str| serde_json::json!({"document_id": d, "new_parent_id": "specs"});
        let edge = serde_json::json!({"from_kind": "task", "from_id": "t1", "relation": "part_of", "to_kind": "plan", "to_id": "p1"});
        let few = call(
            "reorganize_project",
            serde_json::json!({"moves": [mv("a"), mv("b")], "link": [edge.clone()], "unlink": null}),
        );
        assert_eq!(why(&few, std::slice::from_ref(&few), &at).await, None, "three changes run at once");
        let many =
            call("reorganize_project", serde_json::json!({"moves": [mv("a"), mv("b"), mv("c")], "link": [edge]}));
        assert_eq!(why(&many, std::slice::from_ref(&many), &at).await, Some(Why::LargeReorganize));
        assert_eq!(
            summary(&many, &at).await,
            "Reorganize the project (4 changes): move a under specs; move b under specs; move c under specs; \
             link task t1 part of plan p1"
        );
        let odd = call("reorganize_project", serde_json::json!({"moves": "everything"}));
        assert_eq!(why(&odd, &[], &at).await, None, "arguments the tool refuses never wait");
    }
}
