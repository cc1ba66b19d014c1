//! What a turn's tool calls log (issue 43): in every scope a turn can have
//! (each context type, with no focus, a project's, a task's and a
//! document's), a call of a tool the turn offered logs no "outside the
//! offered set" warning, and a call of any other tool logs exactly one,
//! naming it. The log is read by a test-local `tracing` layer.

use super::*;
use crate::calendar::store::MemoryEventStore;
use crate::config::{SearchConfig, SearchProvider, WebConfig};
use crate::entities::store::MemoryEntityStore;
use crate::ids::{EntityId, ProjectId};
use crate::message::FunctionCall;
use crate::model_loop::{TurnScope, TurnTools};
use crate::session::ContextType;
use std::sync::{Arc, Mutex};
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::Layer;

const OUTSIDE: &str = "tool called outside the offered set";

/// The `tool` field of each warning saying [`OUTSIDE`], as logged.
#[derive(Clone, Default)]
struct Outside(Arc<Mutex<Vec<String>>>);

impl Outside {
    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

impl<S: tracing::Subscriber> Layer<S> for Outside {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        if *event.metadata().level() == tracing::Level::WARN && fields.message == OUTSIDE {
            self.0.lock().unwrap().push(fields.tool);
        }
    }
}

#[derive(Default)]
struct Fields {
    message: String,
    tool: String,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "message" => self.message = value.to_string(),
            "tool" => self.tool = value.to_string(),
            _ => {}
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "message" => self.message = format!("{value:?}"),
            "tool" => self.tool = format!("{value:?}"),
            _ => {}
        }
    }
}

/// Every context type; the match stops compiling when one is added, and the
/// assertion keeps the list whole.
fn every_context() -> Vec<ContextType> {
    use ContextType as C;
    let all = [
        C::Global,
        C::Project,
        C::Entity,
        C::Calendar,
        C::ProjectCreate,
        C::ProjectAudit,
        C::ProjectForecast,
        C::DailyBriefUpdate,
        C::Ontology,
        C::BrainDump,
    ];
    let index = |c: &ContextType| match c {
        C::Global => 0,
        C::Project => 1,
        C::Entity => 2,
        C::Calendar => 3,
        C::ProjectCreate => 4,
        C::ProjectAudit => 5,
        C::ProjectForecast => 6,
        C::DailyBriefUpdate => 7,
        C::Ontology => 8,
        C::BrainDump => 9,
    };
    assert_eq!(all.iter().map(index).collect::<Vec<_>>(), (0..all.len()).collect::<Vec<_>>());
    all.to_vec()
}

/// Every scope a turn can have: each context type with no focus, a
/// project's, a task's and a document's.
fn every_turn_scope() -> Vec<TurnScope> {
    let (project, entity) = (ProjectId::new().to_string(), EntityId::new().to_string());
    let focuses = [
        (None, None),
        (None, Some(serde_json::json!({ "projectId": project }))),
        (Some(entity.clone()), Some(serde_json::json!({ "projectId": project, "entityType": "task" }))),
        (Some(entity), Some(serde_json::json!({ "projectId": project, "entityType": "document" }))),
    ];
    let scope = |context_type, (entity_id, focus): (Option<String>, Option<Value>)| TurnScope {
        context_type,
        entity_id,
        focus,
        timezone: None,
    };
    every_context().into_iter().flat_map(|c| focuses.iter().map(move |f| scope(c, f.clone()))).collect()
}

/// A registry that offers every tool: over the in-memory stores, with a
/// calendar, and the web with a search provider (no call here reaches it:
/// the web tools' empty arguments are refused first).
fn registry() -> ToolRegistry {
    let entities = EntityService::new(MemoryEntityStore::new());
    let search =
        SearchConfig { provider: SearchProvider::Searxng, api_key: None, base_url: "http://127.0.0.1:9".into() };
    let web = WebTools::new(&WebConfig { search: Some(search), ..WebConfig::default() });
    ToolRegistry::new(entities.clone())
        .with_calendar(CalendarService::new(MemoryEventStore::new(), entities))
        .with_web(web)
}

fn call(name: &str) -> ToolCall {
    ToolCall {
        id: "call_1".into(),
        kind: "function".into(),
        function: FunctionCall { name: name.into(), arguments: "{}".into() },
    }
}

#[tokio::test]
async fn only_a_call_outside_the_turns_offered_tools_is_logged_in_every_scope() {
    let outside = Outside::default();
    let _log = tracing::subscriber::set_default(tracing_subscriber::registry().with(outside.clone()));
    let (reg, user) = (registry(), UserId::parse("alice").unwrap());
    assert!(ToolName::ALL.iter().all(|t| reg.has(*t)), "the registry runs every tool");
    let (mut calls, mut wrong) = (0, Vec::new());
    for s in every_turn_scope() {
        let offered: Vec<ToolName> = TurnTools::offered(&reg, &s)
            .iter()
            .map(|d| ToolName::parse(d["function"]["name"].as_str().unwrap()).unwrap())
            .collect();
        assert!(!offered.is_empty(), "{s:?}");
        for tool in ToolName::ALL {
            TurnTools::run(&reg, &user, &s, &call(tool.as_str())).await;
            calls += 1;
            let (logged, offer) = (outside.take(), offered.contains(tool));
            let expected: Vec<String> = if offer { vec![] } else { vec![tool.as_str().into()] };
            if logged != expected {
                let (context, focus) = (s.context_type.as_str(), s.focus.as_ref().map(|f| f["entityType"].clone()));
                wrong.push(format!("{} in {context} {focus:?} (offered: {offer}): logged {logged:?}", tool.as_str()));
            }
        }
    }
    assert!(calls > 1_000, "{calls}");
    assert!(wrong.is_empty(), "{} of {calls} calls logged wrong:\n{}", wrong.len(), wrong.join("\n"));
}
