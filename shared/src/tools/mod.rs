//! The chat's tools over the ontology: what the model may call, the JSON
//! Schema it sees for each, which ones a scope offers, and running a call
//! through [`EntityService`] (the same validation, authorization, versions and
//! patches as the entities API).
//!
//! The contract:
//! - Every tool is one `impl` of [`Tool`] in its family's file (projects,
//!   search, entities, documents, edges, reorganize, project creation, calendar, web,
//!   utility, overview, proposals) and one line of
//!   [`ToolName::ALL`]. Its arguments are one type deriving
//!   `utoipa::ToSchema` from the entity field types; the JSON Schema the
//!   model sees is generated from it ([`schema::of`]) and sent as an OpenAI
//!   `tools` entry ([`ToolName::definition`]). Names are unique.
//! - A turn *offers* a small set, by its scope and context type
//!   ([`ToolScope::offered_in`]); a call outside it still runs when the scope
//!   *allows* it (project-bound tools need a project) and is logged by the
//!   turn's layer (`layer.rs`), which knows the context type. Project-bound
//!   tools always act on the scope's project: the model cannot point them
//!   elsewhere.
//! - [`ToolRegistry::execute`] never panics and never fails: bad JSON, a
//!   schema mismatch, an unknown tool, a missing entity, another user's id
//!   (answered exactly like a missing one), or a service error all become an
//!   `ok: false` [`ToolOutcome`] whose `content` the model can read. Refused
//!   arguments write nothing.
//! - An outcome carries the `operation` events of the step (start, then
//!   success or error, with a human-readable name, resolved through the
//!   service when the call did not reveal it) and the [`EntityPatch`]es the
//!   service returned, unchanged. Listing edges and the document tree are not
//!   entity operations and emit none; neither does a call refused before it
//!   reached the service (bad arguments, unknown tool, scope).
//!
//! [`EntityPatch`]: crate::entities::EntityPatch

mod calendar;
mod calendar_mend;
mod call;
mod dates;
mod documents;
mod edges;
mod entities;
mod layer;
mod outcome;
pub mod overview;
pub mod plan;
mod project_create;
mod projects;
pub mod proposals;
mod reorganize;
pub mod schema;
pub mod scope;
mod search;
mod utility;
mod web;
pub mod wording;

pub use calendar::CALENDAR_TOOLS;
pub use calendar_mend::SeriesSaid;
pub use outcome::{ToolOutcome, PREVIEW_CHARS};
pub use project_create::{MAX_CLARIFYING_QUESTIONS, MAX_QUESTION_CHARS};
pub use reorganize::{ReorganizeArgs, ASK_ABOVE as REORGANIZE_ASK_ABOVE};
pub use scope::ToolScope;
pub use utility::{field_schema, FieldKind, MAX_LINKED};
pub use web::{display_url, WebTools, WEB_TOOLS};

use crate::calendar::CalendarService;
use crate::entities::EntityService;
use crate::ids::UserId;
use crate::message::ToolCall;
use call::Call;
use outcome::{failure, outcome, Done, Refusal};
use serde::de::DeserializeOwned;
use serde_json::{json, Map, Value};
use std::fmt;
use utoipa::ToSchema;

/// One tool the model can call.
#[async_trait::async_trait]
pub trait Tool: Sync + 'static {
    /// What the tool takes; its `ToSchema` derive is the schema the model sees.
    type Args: DeserializeOwned + ToSchema + Send;
    /// The name the model calls it by.
    const NAME: &'static str;
    /// What the model reads about it.
    const DESCRIPTION: &'static str;
    /// Whether it acts inside the scope's project (and so needs one).
    const NEEDS_PROJECT: bool;
    /// The timestamp fields the model gives as dates in text, read in the
    /// user's zone before [`Tool::parse`] (`dates.rs`: numbers and past
    /// dates refused).
    const DATES: &'static [&'static str] = &[];

    /// Reads the argument object; serde's message is what a refusal says.
    fn parse(raw: &Map<String, Value>) -> Result<Self::Args, Refusal> {
        call::parse(raw)
    }

    async fn run(&self, call: &Call<'_>, args: Self::Args) -> Result<Done, Refusal>;
}

/// A [`Tool`] behind a pointer: what the registry and [`ToolName`] hold.
#[async_trait::async_trait]
trait AnyTool: Sync {
    fn name(&self) -> &'static str;
    fn description(&self) -> &'static str;
    fn needs_project(&self) -> bool;
    fn parameters(&self) -> Value;
    async fn run_raw(&self, call: &Call<'_>, raw: &Map<String, Value>) -> Result<Done, Refusal>;
}

#[async_trait::async_trait]
impl<T: Tool> AnyTool for T {
    fn name(&self) -> &'static str {
        T::NAME
    }
    fn description(&self) -> &'static str {
        T::DESCRIPTION
    }
    fn needs_project(&self) -> bool {
        T::NEEDS_PROJECT
    }
    fn parameters(&self) -> Value {
        dates::described(schema::of::<T::Args>(), T::DATES)
    }
    async fn run_raw(&self, call: &Call<'_>, raw: &Map<String, Value>) -> Result<Done, Refusal> {
        let args = if T::DATES.is_empty() {
            T::parse(raw)?
        } else {
            let mut raw = raw.clone();
            dates::read(&mut raw, T::DATES, call.zone_or_utc(), crate::now_ms())?;
            T::parse(&raw)?
        };
        self.run(call, args).await
    }
}

/// A tool, by name: `ToolName::CreateTask` is the `create_task` tool. Two
/// handles are equal when their names are.
#[derive(Clone, Copy)]
pub struct ToolName(&'static dyn AnyTool);

impl ToolName {
    /// Every tool the model can call, in a stable order: the one registration
    /// list. Adding a tool is its `impl Tool` (and its `ToolName` constant)
    /// in its family's file and one line here.
    pub const ALL: &'static [ToolName] = &[
        ToolName::ListProjects,
        ToolName::SearchWorkspace,
        ToolName::GetProject,
        ToolName::CreateProject,
        ToolName::UpdateProject,
        ToolName::SearchProject,
        ToolName::ListEntities,
        ToolName::GetEntity,
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
        ToolName::ListEdges,
        ToolName::GetDocStructure,
        ToolName::GetDocumentMetadata,
        ToolName::ReadDocument,
        ToolName::MoveDocument,
        ToolName::ReorganizeProject,
        ToolName::AskClarifyingQuestions,
        ToolName::CreateOntoProject,
        ToolName::ListCalendarEvents,
        ToolName::CreateCalendarEvent,
        ToolName::UpdateCalendarEvent,
        ToolName::DeleteCalendarEvent,
        ToolName::FindFreeTime,
        ToolName::WebSearch,
        ToolName::WebVisit,
        ToolName::GetFieldInfo,
        ToolName::GetEntityRelationships,
        ToolName::GetLinkedEntities,
        ToolName::GetBuildosOverview,
        ToolName::ProposeEntities,
    ];

    const fn of<T: Tool>(tool: &'static T) -> ToolName {
        ToolName(tool)
    }

    pub fn as_str(self) -> &'static str {
        self.0.name()
    }

    pub fn parse(s: &str) -> Option<ToolName> {
        Self::ALL.iter().copied().find(|t| t.as_str() == s)
    }

    pub fn description(self) -> &'static str {
        self.0.description()
    }

    /// Whether the tool acts inside the scope's project.
    pub fn needs_project(self) -> bool {
        self.0.needs_project()
    }

    /// The JSON Schema of the tool's arguments.
    pub fn parameters(self) -> Value {
        self.0.parameters()
    }

    /// The OpenAI `tools` entry for this tool.
    pub fn definition(self) -> Value {
        json!({
            "type": "function",
            "function": { "name": self.as_str(), "description": self.description(), "parameters": self.parameters() }
        })
    }
}

impl PartialEq for ToolName {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for ToolName {}

impl std::hash::Hash for ToolName {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state)
    }
}

impl fmt::Debug for ToolName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who calls, and where.
#[derive(Debug, Clone)]
pub struct ToolContext {
    pub user: UserId,
    pub scope: ToolScope,
    /// The zone the turn's request named (the calendar's local times).
    pub zone: Option<crate::calendar::Zone>,
}

/// The chat's tools, over one [`EntityService`] and, where the function
/// has them, a [`CalendarService`] and the web ([`WebTools`]).
#[derive(Clone)]
pub struct ToolRegistry {
    service: EntityService,
    calendar: Option<CalendarService>,
    web: Option<WebTools>,
}

impl ToolRegistry {
    pub fn new(service: EntityService) -> Self {
        ToolRegistry { service, calendar: None, web: None }
    }

    /// Offers and runs the web tools (`web_search` only with a provider).
    pub fn with_web(mut self, web: WebTools) -> Self {
        self.web = Some(web);
        self
    }

    /// How many calls of the tool `name` one turn may make (the web tools' caps).
    pub fn per_turn_cap(&self, name: &str) -> Option<usize> {
        self.web.as_ref().and_then(|w| w.cap(name))
    }

    /// Offers and runs the calendar tools over `calendar`.
    pub fn with_calendar(mut self, calendar: CalendarService) -> Self {
        self.calendar = Some(calendar);
        self
    }

    /// Whether the registry can run `tool` at all (the calendar tools need a
    /// calendar, the web tools the web, `web_search` a provider).
    pub fn has(&self, tool: ToolName) -> bool {
        if CALENDAR_TOOLS.contains(&tool) {
            return self.calendar.is_some();
        }
        if WEB_TOOLS.contains(&tool) {
            return self.web.as_ref().is_some_and(|w| w.has(tool));
        }
        true
    }

    /// The `tools` array for a turn in `scope` (`ChatRequest.tools`).
    pub fn definitions(&self, scope: &ToolScope) -> Vec<Value> {
        scope.offered().into_iter().filter(|t| self.has(*t)).map(ToolName::definition).collect()
    }

    /// Runs one call. Never fails: see the module contract.
    pub async fn execute(&self, ctx: &ToolContext, call: &ToolCall) -> ToolOutcome {
        let name = call.function.name.as_str();
        let Some(tool) = ToolName::parse(name) else {
            return failure("unknown_tool", &format!("there is no tool named {name:?}"));
        };
        // A web tool this registry cannot run (no web, or no search
        // provider) is not a tool here at all: it was never offered.
        if WEB_TOOLS.contains(&tool) && !self.has(tool) {
            return failure("unknown_tool", &format!("there is no tool named {name:?}"));
        }
        if !ctx.scope.allows(tool) {
            return failure("out_of_scope", &format!("{name} works inside a project; this conversation has none"));
        }
        let raw = match arguments(&call.function.arguments) {
            Ok(raw) => raw,
            Err(message) => return failure("invalid_arguments", &message),
        };
        let call = Call {
            svc: &self.service,
            calendar: self.calendar.as_ref(),
            web: self.web.as_ref(),
            user: &ctx.user,
            scope: &ctx.scope,
            zone: ctx.zone,
        };
        outcome(name, tool.0.run_raw(&call, &raw).await)
    }
}

/// The argument object of a call: models send `""` for a tool without
/// arguments; anything but an object is refused.
fn arguments(text: &str) -> Result<Map<String, Value>, String> {
    match text.trim() {
        "" => Ok(Map::new()),
        text => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(m)) => Ok(m),
            Ok(_) => Err("arguments must be a JSON object".into()),
            Err(e) => Err(format!("arguments are not valid JSON: {e}")),
        },
    }
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
    ToolName::ReorganizeProject,
    ToolName::CreateCalendarEvent,
    ToolName::UpdateCalendarEvent,
    ToolName::DeleteCalendarEvent,
    ToolName::ProposeEntities,
];

#[cfg(test)]
mod calendar_tests;
#[cfg(test)]
mod layer_tests;
#[cfg(test)]
mod store_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod web_tests;
