//! The delta schema and rules of AGENT_STATE_SPEC §9 / AGENTIC_CHAT_V2_SPEC
//! §8.6: `{"agent_state_item_updates": [...], "agent_state_updates": {...}}`.

use super::{
    AgentState, AgentStateItem, Assumption, Dependency, Expectation, Hypothesis, ItemKind, ItemStatus, KnownEntity,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Why a delta was refused; a refused delta changes nothing.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DeltaError {
    #[error("no item {0:?} to update or remove")]
    UnknownItem(String),
    #[error("id {0:?} already exists")]
    DuplicateId(String),
    #[error("invalid delta: {0}")]
    Invalid(String),
}

/// One delta, as the summarizer (or a planner) proposes it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct AgentStateDelta {
    #[serde(default)]
    pub agent_state_item_updates: Vec<ItemUpdate>,
    /// One object (§9) or a list of them (as `SessionSummary` records them),
    /// applied in order.
    #[serde(default, deserialize_with = "one_or_many", skip_serializing_if = "Vec::is_empty")]
    pub agent_state_updates: Vec<StateUpdate>,
}

impl AgentStateDelta {
    /// Parses the two fields as a `SessionSummary` records them.
    pub fn from_json(item_updates: &[Value], updates: &Value) -> Result<Self, DeltaError> {
        let v = serde_json::json!({ "agent_state_item_updates": item_updates, "agent_state_updates": updates });
        serde_json::from_value(v).map_err(|e| DeltaError::Invalid(e.to_string()))
    }
}

fn one_or_many<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<StateUpdate>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        Many(Vec<StateUpdate>),
        One(Box<StateUpdate>),
        Null(()),
    }
    Ok(match OneOrMany::deserialize(d)? {
        OneOrMany::Many(v) => v,
        OneOrMany::One(u) => vec![*u],
        OneOrMany::Null(()) => vec![],
    })
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
pub enum ItemUpdate {
    Add {
        item: AgentStateItem,
    },
    Update {
        id: String,
        patch: ItemPatch,
    },
    /// Items are never deleted: this marks the item `discarded`.
    Remove {
        id: String,
    },
}

/// `Partial<AgentStateItem>`. Unknown fields are refused; `createdAt` and
/// `updatedAt` are accepted and ignored (the state keeps its own clock).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ItemPatch {
    /// Only allowed when equal to the item's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<ItemKind>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// An empty string clears the details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ItemStatus>,
    #[serde(default, alias = "related_entity_ids", skip_serializing_if = "Option::is_none")]
    pub related_entity_ids: Option<Vec<String>>,
    #[serde(default, alias = "created_at", skip_serializing)]
    pub created_at: Option<Value>,
    #[serde(default, alias = "updated_at", skip_serializing)]
    pub updated_at: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct UnderstandingUpdate {
    /// Upserted by id (a missing name keeps the known one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub entities: Vec<KnownEntity>,
    /// Added when not already there.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dependencies: Vec<Dependency>,
}

/// §9's `AgentStateUpdate`: every list is upserted by id, nothing is deleted.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct StateUpdate {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_understanding: Option<UnderstandingUpdate>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub assumptions: Vec<Assumption>,
    /// With an id: replaces that expectation (or adds it); without: added.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expectations: Vec<Expectation>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tentative_hypotheses: Vec<Hypothesis>,
}

fn blank(s: &str) -> bool {
    s.trim().is_empty()
}

fn invalid(msg: impl Into<String>) -> DeltaError {
    DeltaError::Invalid(msg.into())
}

/// Applies `delta` to a copy of `state`, all or nothing: item updates first
/// (in order, so an update may follow an add of the same delta), then each
/// state update. Assumptions are upserted, never deleted (retract with
/// confidence 0); items are never deleted (`remove` discards).
pub fn apply_delta(state: &AgentState, delta: &AgentStateDelta, now_ms: i64) -> Result<AgentState, DeltaError> {
    let mut next = state.clone();
    for u in &delta.agent_state_item_updates {
        apply_item_update(&mut next, u, now_ms)?;
    }
    for u in &delta.agent_state_updates {
        apply_state_update(&mut next, u)?;
    }
    next.trim_expectations();
    Ok(next)
}

fn apply_item_update(state: &mut AgentState, u: &ItemUpdate, now_ms: i64) -> Result<(), DeltaError> {
    match u {
        ItemUpdate::Add { item } => {
            if blank(&item.id) || blank(&item.title) {
                return Err(invalid("an item needs an id and a title"));
            }
            if state.item(&item.id).is_some() {
                return Err(DeltaError::DuplicateId(item.id.clone()));
            }
            let mut item = item.clone();
            if item.created_at == 0 {
                item.created_at = now_ms;
            }
            item.updated_at = now_ms;
            state.items.push(item);
        }
        ItemUpdate::Update { id, patch } => {
            let item =
                state.items.iter_mut().find(|i| &i.id == id).ok_or_else(|| DeltaError::UnknownItem(id.clone()))?;
            if patch.id.as_ref().is_some_and(|p| p != id) {
                return Err(invalid(format!("item {id:?}: an id cannot change")));
            }
            if patch.title.as_deref().is_some_and(blank) {
                return Err(invalid(format!("item {id:?}: the title cannot be empty")));
            }
            if let Some(k) = patch.kind {
                item.kind = k;
            }
            if let Some(t) = &patch.title {
                item.title = t.clone();
            }
            if let Some(d) = &patch.details {
                item.details = (!d.is_empty()).then(|| d.clone());
            }
            if let Some(s) = patch.status {
                item.status = s;
            }
            if let Some(r) = &patch.related_entity_ids {
                item.related_entity_ids = r.clone();
            }
            item.updated_at = now_ms;
        }
        ItemUpdate::Remove { id } => {
            let item =
                state.items.iter_mut().find(|i| &i.id == id).ok_or_else(|| DeltaError::UnknownItem(id.clone()))?;
            item.status = ItemStatus::Discarded;
            item.updated_at = now_ms;
        }
    }
    Ok(())
}

fn apply_state_update(state: &mut AgentState, u: &StateUpdate) -> Result<(), DeltaError> {
    if let Some(cu) = &u.current_understanding {
        for e in &cu.entities {
            if blank(&e.id) || blank(&e.kind) {
                return Err(invalid("an entity needs an id and a kind"));
            }
            state.upsert_entity(e.clone());
        }
        for d in &cu.dependencies {
            if blank(&d.from) || blank(&d.to) {
                return Err(invalid("a dependency needs from and to"));
            }
            state.add_dependency(d.clone());
        }
    }
    for a in &u.assumptions {
        if blank(&a.id) || blank(&a.hypothesis) {
            return Err(invalid("an assumption needs an id and a hypothesis"));
        }
        if !a.confidence.is_finite() || !(0.0..=1.0).contains(&a.confidence) {
            return Err(invalid(format!("assumption {:?}: confidence {} is outside 0..=1", a.id, a.confidence)));
        }
        match state.assumptions.iter_mut().find(|x| x.id == a.id) {
            Some(x) => {
                x.hypothesis = a.hypothesis.clone();
                x.confidence = a.confidence;
                for ev in &a.evidence {
                    if !x.evidence.contains(ev) {
                        x.evidence.push(ev.clone());
                    }
                }
            }
            None => state.assumptions.push(a.clone()),
        }
    }
    for e in &u.expectations {
        if blank(&e.action) || blank(&e.expected_outcome) {
            return Err(invalid("an expectation needs an action and an expected_outcome"));
        }
        match e.id.as_deref() {
            Some(id) if blank(id) => return Err(invalid("an expectation id is empty")),
            Some(id) => match state.expectations.iter_mut().find(|x| x.id.as_deref() == Some(id)) {
                Some(x) => {
                    let checked = x.last_checked_at;
                    *x = e.clone();
                    x.last_checked_at = x.last_checked_at.or(checked);
                }
                None => state.expectations.push(e.clone()),
            },
            None => {
                let mut e = e.clone();
                let mut n = state.expectations.len() + 1;
                while state.expectation(&format!("exp-{n}")).is_some() {
                    n += 1;
                }
                e.id = Some(format!("exp-{n}"));
                state.expectations.push(e);
            }
        }
    }
    for h in &u.tentative_hypotheses {
        if blank(&h.id) || blank(&h.hypothesis) {
            return Err(invalid("a tentative hypothesis needs an id and a hypothesis"));
        }
        match state.tentative_hypotheses.iter_mut().find(|x| x.id == h.id) {
            Some(x) => *x = h.clone(),
            None => state.tentative_hypotheses.push(h.clone()),
        }
    }
    Ok(())
}
