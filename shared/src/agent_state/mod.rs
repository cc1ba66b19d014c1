//! The session's agent state (AGENT_STATE_SPEC §4, AGENTIC_CHAT_V2_SPEC §8.6):
//! what the agent knows (`current_understanding`), assumes (`assumptions`),
//! expects (`expectations`) and keeps provisionally (`items`), as one typed,
//! versioned item per session (see [`crate::agent_state::store`]).
//!
//! Contract:
//! - every function here is pure and deterministic: no I/O, no clock (callers
//!   pass `now_ms`), no random ids; the same inputs give the same state;
//! - [`observe_tool_result`] is the deterministic update after one tool call:
//!   its [`EntityPatch`]es update `current_understanding` (created/updated →
//!   the entity with its kind and name, deleted → the entity and its
//!   dependencies removed, linked/unlinked → a dependency added/removed), and
//!   the oldest pending expectation for that tool is verified by the matcher
//!   of §8 (confirmed, or failed with an assumption describing the mismatch);
//! - [`apply_delta`] applies a §9 delta all-or-nothing: item updates first,
//!   then the state update; an invalid delta changes nothing. Assumptions are
//!   never deleted (retract one with `confidence: 0`); items are never
//!   deleted either (`remove` marks an item `discarded`);
//! - [`render`] is the compact internal block for the model; it is never
//!   streamed to the user.

mod delta;
mod observe;
mod render;
pub mod store;

pub use delta::{apply_delta, AgentStateDelta, DeltaError, ItemPatch, ItemUpdate, StateUpdate, UnderstandingUpdate};
pub use observe::{expect, observe_tool_result, verify, Check, ToolObservation, ToolOutcomeFacts, Verification};
pub use render::{render, RENDER_MAX_CHARS};

use serde::{Deserialize, Serialize};

/// At most this many entities are kept (the least recently touched go first).
pub const MAX_ENTITIES: usize = 200;
/// At most this many dependencies are kept (the oldest go first).
pub const MAX_DEPENDENCIES: usize = 400;
/// At most this many settled (confirmed/failed) expectations are kept.
pub const MAX_SETTLED_EXPECTATIONS: usize = 50;

/// The whole state of one session. Its version lives next to it in the store.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct AgentState {
    #[serde(rename = "sessionId")]
    pub session_id: String,
    #[serde(default)]
    pub current_understanding: Understanding,
    #[serde(default)]
    pub assumptions: Vec<Assumption>,
    #[serde(default)]
    pub expectations: Vec<Expectation>,
    #[serde(default)]
    pub tentative_hypotheses: Vec<Hypothesis>,
    #[serde(default)]
    pub items: Vec<AgentStateItem>,
    /// Milliseconds since the Unix epoch.
    #[serde(rename = "lastSummarizedAt", default, skip_serializing_if = "Option::is_none")]
    pub last_summarized_at: Option<i64>,
}

impl AgentState {
    pub fn new(session_id: impl Into<String>) -> Self {
        AgentState { session_id: session_id.into(), ..Default::default() }
    }

    pub fn entity(&self, id: &str) -> Option<&KnownEntity> {
        self.current_understanding.entities.iter().find(|e| e.id == id)
    }

    pub fn expectation(&self, id: &str) -> Option<&Expectation> {
        self.expectations.iter().find(|e| e.id.as_deref() == Some(id))
    }

    pub fn assumption(&self, id: &str) -> Option<&Assumption> {
        self.assumptions.iter().find(|a| a.id == id)
    }

    pub fn item(&self, id: &str) -> Option<&AgentStateItem> {
        self.items.iter().find(|i| i.id == id)
    }

    /// Inserts or replaces an entity by id and makes it the most recent one.
    /// A `None` name keeps the known one.
    pub(crate) fn upsert_entity(&mut self, mut e: KnownEntity) {
        let list = &mut self.current_understanding.entities;
        if let Some(pos) = list.iter().position(|x| x.id == e.id) {
            let old = list.remove(pos);
            if e.name.is_none() {
                e.name = old.name;
            }
        }
        list.push(e);
        if list.len() > MAX_ENTITIES {
            let excess = list.len() - MAX_ENTITIES;
            list.drain(..excess);
        }
    }

    /// Removes an entity and every dependency touching it.
    pub(crate) fn remove_entity(&mut self, id: &str) {
        self.current_understanding.entities.retain(|e| e.id != id);
        self.current_understanding.dependencies.retain(|d| d.from != id && d.to != id);
    }

    pub(crate) fn add_dependency(&mut self, d: Dependency) {
        let list = &mut self.current_understanding.dependencies;
        if !list.contains(&d) {
            list.push(d);
        }
        if list.len() > MAX_DEPENDENCIES {
            let excess = list.len() - MAX_DEPENDENCIES;
            list.drain(..excess);
        }
    }

    pub(crate) fn remove_dependency(&mut self, d: &Dependency) {
        self.current_understanding.dependencies.retain(|x| x != d);
    }

    /// Drops the oldest settled expectations beyond [`MAX_SETTLED_EXPECTATIONS`]
    /// (pending ones are always kept).
    pub(crate) fn trim_expectations(&mut self) {
        let settled = self.expectations.iter().filter(|e| e.status != ExpectationStatus::Pending).count();
        let mut excess = settled.saturating_sub(MAX_SETTLED_EXPECTATIONS);
        self.expectations.retain(|e| {
            if excess > 0 && e.status != ExpectationStatus::Pending {
                excess -= 1;
                false
            } else {
                true
            }
        });
    }
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Understanding {
    #[serde(default)]
    pub entities: Vec<KnownEntity>,
    #[serde(default)]
    pub dependencies: Vec<Dependency>,
}

/// An entity (or project) the agent has seen: `{id, kind, name?}`. `kind` is
/// the ontology's singular name (`task`, `goal`, ..., `project`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KnownEntity {
    pub id: String,
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// A directed edge between two known ids: `{from, to, rel?}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dependency {
    pub from: String,
    pub to: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rel: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Assumption {
    pub id: String,
    pub hypothesis: String,
    /// 0 to 1; 0 means retracted (assumptions are never deleted).
    pub confidence: f64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExpectationStatus {
    #[default]
    Pending,
    Confirmed,
    Failed,
}

/// What an action should produce (§4, §8). `action` is the tool name the
/// expectation is verified against; the structured fields drive the matcher.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Expectation {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub action: String,
    pub expected_outcome: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expected_ids: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_count: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invariant: Option<String>,
    #[serde(default)]
    pub status: ExpectationStatus,
    /// Milliseconds since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_checked_at: Option<i64>,
}

impl Expectation {
    /// A pending expectation for `action` (a tool name) with no structure yet.
    pub fn new(action: impl Into<String>, expected_outcome: impl Into<String>) -> Self {
        Expectation {
            id: None,
            action: action.into(),
            expected_outcome: expected_outcome.into(),
            expected_ids: vec![],
            expected_type: None,
            expected_count: None,
            invariant: None,
            status: ExpectationStatus::Pending,
            last_checked_at: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hypothesis {
    pub id: String,
    pub hypothesis: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ItemKind {
    Task,
    Doc,
    Note,
    Idea,
    Question,
}

impl ItemKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ItemKind::Task => "task",
            ItemKind::Doc => "doc",
            ItemKind::Note => "note",
            ItemKind::Idea => "idea",
            ItemKind::Question => "question",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ItemStatus {
    #[default]
    Active,
    Resolved,
    Discarded,
}

/// A provisional, session-scoped item (not yet an ontology entity).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentStateItem {
    pub id: String,
    pub kind: ItemKind,
    pub title: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<String>,
    #[serde(default)]
    pub status: ItemStatus,
    #[serde(default, alias = "related_entity_ids", skip_serializing_if = "Vec::is_empty")]
    pub related_entity_ids: Vec<String>,
    /// Milliseconds since the Unix epoch; set by [`apply_delta`] when 0.
    #[serde(default)]
    pub created_at: i64,
    #[serde(default)]
    pub updated_at: i64,
}

#[cfg(test)]
mod tests;
