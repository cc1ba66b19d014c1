//! What a tool's handler works with: the service, the caller, the scope, and
//! the steps every family shares (reading an entity, creating one, turning
//! a write into a [`Done`], naming an entity for an operation event).

use super::outcome::{Done, Op, Refusal};
use super::ToolScope;
use crate::calendar::CalendarService;
use crate::entities::{CreateEntity, EntityError, EntityKind, EntityService, Write};
use crate::ids::{EntityId, ProjectId, UserId};
use crate::sse::OperationAction;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// One call's context.
pub struct Call<'a> {
    pub svc: &'a EntityService,
    /// The calendar, where the registry has one.
    pub calendar: Option<&'a CalendarService>,
    /// The web tools' fetcher and searcher, where the registry has them.
    pub web: Option<&'a super::web::WebTools>,
    /// The zone the request named, for the calendar tools.
    pub zone: Option<crate::calendar::Zone>,
    pub user: &'a UserId,
    pub scope: &'a ToolScope,
}

impl Call<'_> {
    /// The scope's project: the one a project-bound tool acts on (the
    /// registry checked `allows`, so those have one here).
    pub fn project(&self) -> Result<&ProjectId, Refusal> {
        self.scope.project().ok_or(Refusal::Args("this tool needs a project".into()))
    }

    /// The zone dates are read and shown in: the request's, else UTC.
    pub fn zone_or_utc(&self) -> crate::calendar::Zone {
        self.zone.unwrap_or(crate::calendar::Zone::UTC)
    }

    /// The display name of an entity, through the cheapest read that has it
    /// (metadata for documents: no content); its id when it cannot be read.
    pub async fn name_of(&self, project: &ProjectId, kind: EntityKind, id: &EntityId) -> String {
        let name = if kind == EntityKind::Document {
            let meta = self.svc.document_metadata(self.user, project, std::slice::from_ref(id)).await;
            meta.ok().and_then(|m| m.into_iter().next().map(|d| d.title))
        } else {
            self.svc.get(self.user, project, kind, id).await.ok().map(|e| e.fields.name().to_string())
        };
        name.unwrap_or_else(|| id.to_string())
    }

    pub async fn read_entity(&self, project: &ProjectId, kind: EntityKind, id: EntityId) -> Done {
        let r = self.svc.get(self.user, project, kind, &id).await;
        // A failed read names what it could: the id (another user's entity
        // reads as missing, so there is no name to leak).
        let name = r.as_ref().map(|e| e.fields.name().to_string()).unwrap_or_else(|_| id.to_string());
        let op = Op { action: OperationAction::Read, entity_type: kind.as_str(), name, id: Some(id.to_string()) };
        Done::read(r.map(|e| to_json(&e)), op)
    }

    pub async fn create(&self, project: &ProjectId, new: CreateEntity) -> Done {
        let (kind, name) = (new.fields.kind(), new.fields.name().to_string());
        let r = self.svc.create(self.user, project, new).await;
        let id = r.as_ref().ok().map(|w| w.data.id.to_string());
        write(r, Op { action: OperationAction::Create, entity_type: kind.as_str(), name, id })
    }
}

/// A write as one step: its data as the result, its patch when it succeeded.
pub fn write<T: serde::Serialize>(r: Result<Write<T>, EntityError>, op: Op) -> Done {
    match r {
        Ok(w) => {
            Done { result: Ok(to_json(&w.data)), ops: vec![(op, true)], patches: vec![w.patch], turn_events: vec![] }
        }
        Err(e) => Done { result: Err(e), ops: vec![(op, false)], patches: vec![], turn_events: vec![] },
    }
}

pub fn to_json<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// A project id the model sent: malformed is `invalid_id`, not a bad shape.
pub fn project_id(s: &str) -> Result<ProjectId, EntityError> {
    ProjectId::parse(s).map_err(|e| EntityError::InvalidId(format!("project_id: {e}")))
}

/// An entity id the model sent as the argument `what`.
pub fn entity_id(what: &str, s: &str) -> Result<EntityId, EntityError> {
    EntityId::parse(s).map_err(|e| EntityError::InvalidId(format!("{what}: {e}")))
}

/// Parses an argument object as `T`; serde's message is what the model reads.
pub fn parse<T: DeserializeOwned>(raw: &Map<String, Value>) -> Result<T, Refusal> {
    serde_json::from_value(Value::Object(raw.clone())).map_err(|e| Refusal::Args(e.to_string()))
}

/// The argument object without `null`s: the stored shapes read a field as
/// "absent" only when its key is missing, while models send `null` for it.
pub fn without_nulls(raw: &Map<String, Value>) -> Map<String, Value> {
    raw.iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k.clone(), v.clone())).collect()
}
