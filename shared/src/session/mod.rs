//! Sessions: who owns them, what scope they are in, and the one-writer lease.
//!
//! A session belongs to the user whose id is part of its key (see
//! [`crate::store`]): another user's session id is simply not found. A turn
//! holds the session's **lease** (a conditional update with an expiry) from
//! before it writes anything until after its last write; a second turn on the
//! same session is refused with `session_busy`, and a lease left by a crashed
//! invocation expires after `SESSION_LEASE_MS`.
//!
//! Its persistence is [`store`]: the session traits, their DynamoDB
//! implementation and an in-memory twin held to one contract.

use crate::ids::{RunId, SessionId, TurnId, UserId};
pub mod api;
pub mod store;

use serde::{Deserialize, Serialize};

/// The scope of a chat (CURRENT_FLOW_AND_GAPS §5.1). `general` is accepted and
/// normalised to `global`; anything else unknown is refused with a 400.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ContextType {
    #[default]
    #[serde(alias = "general")]
    Global,
    Project,
    Entity,
    Calendar,
    ProjectCreate,
    ProjectAudit,
    ProjectForecast,
    DailyBriefUpdate,
    Ontology,
    BrainDump,
}

impl ContextType {
    pub fn as_str(&self) -> &'static str {
        match self {
            ContextType::Global => "global",
            ContextType::Project => "project",
            ContextType::Entity => "entity",
            ContextType::Calendar => "calendar",
            ContextType::ProjectCreate => "project_create",
            ContextType::ProjectAudit => "project_audit",
            ContextType::ProjectForecast => "project_forecast",
            ContextType::DailyBriefUpdate => "daily_brief_update",
            ContextType::Ontology => "ontology",
            ContextType::BrainDump => "brain_dump",
        }
    }

    /// The modes that work inside one project: moving between them keeps
    /// the session's project focus (`project_create` has no project yet).
    pub fn in_project(&self) -> bool {
        matches!(
            self,
            ContextType::Project
                | ContextType::Entity
                | ContextType::Ontology
                | ContextType::ProjectAudit
                | ContextType::ProjectForecast
        )
    }

    pub fn parse(s: &str) -> Option<Self> {
        serde_json::from_value(serde_json::Value::String(s.to_string())).ok()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SessionStatus {
    #[default]
    Active,
    Closed,
}

/// The session as the client sees it (the `session` event, the sessions API).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SessionView {
    pub id: SessionId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    pub context_type: ContextType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entity_id: Option<String>,
    /// Free-form focus metadata from the client (`projectFocus`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub focus: Option<serde_json::Value>,
    pub status: SessionStatus,
    pub message_count: u64,
    pub created_at: i64,
    pub last_activity_at: i64,
}

impl SessionView {
    /// A new session, active and empty, created now: the one way to make one.
    pub fn new(context_type: ContextType, entity_id: Option<String>, focus: Option<serde_json::Value>) -> Self {
        let now = crate::now_ms();
        SessionView {
            id: SessionId::new(),
            title: None,
            context_type,
            entity_id,
            focus,
            status: SessionStatus::Active,
            message_count: 0,
            created_at: now,
            last_activity_at: now,
        }
    }
}

/// Where a conversation is: its context type, the entity it is about, the
/// client's focus metadata. A turn that moves (`context_shift`) stores it on
/// the session in the write that ends it ([`store::TurnEnd::scope`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Scope {
    pub context_type: ContextType,
    pub entity_id: Option<String>,
    pub focus: Option<serde_json::Value>,
}

/// The stored session item: the view plus bookkeeping that never leaves the backend.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    pub user_id: UserId,
    pub view: SessionView,
    /// Sum of the usage of every turn.
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// The turn holding the lease, and until when (ms since epoch).
    pub lease: Option<(TurnId, i64)>,
}

/// A turn's record: written atomically with its user message, it is what makes
/// a repeated `stream_run_id` detectable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnRecord {
    pub turn_id: TurnId,
    pub run_id: RunId,
    pub status: TurnStatus,
    pub user_message_seq: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assistant_message_seq: Option<u64>,
    pub started_at: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<i64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnStatus {
    Running,
    Completed,
    Error,
    Stopped,
    /// The answer was cut off (`message::CutReason`).
    CutOff,
}

/// Longest title taken from a first message, in characters.
pub const TITLE_MAX_CHARS: usize = 80;

/// A title from the first user message, with no model call: the first line,
/// whitespace collapsed, cut at a word boundary near [`TITLE_MAX_CHARS`].
pub fn title_from_message(message: &str) -> Option<String> {
    let line = message.lines().map(str::trim).find(|l| !l.is_empty())?;
    let collapsed: String = line.split_whitespace().collect::<Vec<_>>().join(" ");
    if collapsed.chars().count() <= TITLE_MAX_CHARS {
        return Some(collapsed);
    }
    let cut: String = collapsed.chars().take(TITLE_MAX_CHARS).collect();
    let cut = match cut.rfind(' ') {
        Some(i) if i > TITLE_MAX_CHARS / 2 => cut[..i].to_string(),
        _ => cut,
    };
    Some(format!("{}…", cut.trim_end()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn general_normalises_to_global_and_unknown_is_refused() {
        assert_eq!(ContextType::parse("general"), Some(ContextType::Global));
        assert_eq!(ContextType::parse("project_create"), Some(ContextType::ProjectCreate));
        assert_eq!(ContextType::parse("nope"), None);
        assert_eq!(serde_json::to_string(&ContextType::Global).unwrap(), "\"global\"");
    }

    #[test]
    fn titles_are_first_line_and_bounded() {
        assert_eq!(title_from_message("\n  Plan   my week \nmore").as_deref(), Some("Plan my week"));
        let long = "word ".repeat(60);
        let t = title_from_message(&long).unwrap();
        assert!(t.chars().count() <= TITLE_MAX_CHARS + 1);
        assert!(t.ends_with('…'));
        assert_eq!(title_from_message("   \n "), None);
    }
}
