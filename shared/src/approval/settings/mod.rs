//! The user's approval settings: the tools they set to "ask first", whose
//! every call waits for their yes ([`super::policy`]). One record per user,
//! read and written through `GET`/`PUT /me/approvals` (docs/chat-protocol.md#approvals),
//! read by each turn beside its first round trip.
//!
//! # Key scheme
//!
//! | item | `pk` | `sk` |
//! |---|---|---|
//! | the user's approval settings (`data` = [`ApprovalSettings`] as JSON) | `U#<user>#SETTINGS` | `APPROVALS` |
//!
//! The user's own partition: another user's settings address nothing. A
//! user without the item has the defaults (no tool asks first beyond the
//! policy's own rules). Read consistently: a setting saved just before a
//! message holds for that message's turn.
//!
//! [`ApprovalSettingsStore`]: [`DynamoApprovalSettings`] in the functions,
//! [`MemoryApprovalSettings`] in unit tests, one contract suite for both
//! (`contract`).

#[cfg(any(test, feature = "testkit"))]
pub mod contract;
mod dynamo;
mod memory;

pub use dynamo::DynamoApprovalSettings;
pub use memory::MemoryApprovalSettings;

use super::policy::ASKABLE;
use crate::ids::UserId;
use crate::store::StoreError;
use crate::tools::ToolName;
use serde::{Deserialize, Serialize};

pub mod keys {
    use crate::ids::UserId;

    pub fn settings_pk(user: &UserId) -> String {
        format!("U#{user}#SETTINGS")
    }

    pub const APPROVALS_SK: &str = "APPROVALS";
}

/// The stored record and the body of `PUT /me/approvals`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ApprovalSettings {
    /// Tools whose every call waits for the user's yes, by name: tools that
    /// change something (`askable` in `GET /me/approvals` lists them).
    #[serde(default)]
    #[schema(schema_with = askable_names)]
    pub ask_first: Vec<String>,
}

/// `ask_first`'s schema: a list of [`ASKABLE`]'s names, so a document-driven
/// client (schemathesis) sends only names the route takes; any other string
/// is still `400 unknown_tool`.
fn askable_names() -> utoipa::openapi::schema::Array {
    use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, Type};
    let names = ASKABLE.iter().map(|t| t.as_str());
    ArrayBuilder::new().items(ObjectBuilder::new().schema_type(Type::String).enum_values(Some(names))).build()
}

/// What `GET`/`PUT /me/approvals` answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ApprovalSettingsView {
    pub ask_first: Vec<String>,
    /// Every tool that may be set to ask first, in a stable order.
    pub askable: Vec<String>,
}

impl ApprovalSettingsView {
    pub fn of(settings: &ApprovalSettings) -> Self {
        Self { ask_first: settings.ask_first.clone(), askable: ASKABLE.iter().map(|t| t.as_str().into()).collect() }
    }
}

/// A `PUT /me/approvals` refused (nothing stored).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SettingsError {
    #[error("{0:?} is not a tool that can ask first (see `askable` in GET /me/approvals)")]
    UnknownTool(String),
}

impl SettingsError {
    pub fn code(&self) -> &'static str {
        match self {
            SettingsError::UnknownTool(_) => "unknown_tool",
        }
    }
}

impl ApprovalSettings {
    /// The settings as stored: every name an askable tool, each once, in
    /// [`ASKABLE`]'s order.
    pub fn checked(self) -> Result<ApprovalSettings, SettingsError> {
        let mut tools = Vec::new();
        for name in &self.ask_first {
            let tool = ToolName::parse(name.trim())
                .filter(|t| ASKABLE.contains(t))
                .ok_or_else(|| SettingsError::UnknownTool(name.chars().take(100).collect()))?;
            tools.push(tool);
        }
        let ask_first = ASKABLE.iter().filter(|t| tools.contains(t)).map(|t| t.as_str().to_string()).collect();
        Ok(ApprovalSettings { ask_first })
    }

    /// Whether the user set `tool` to ask first.
    pub fn asks_first(&self, tool: &str) -> bool {
        self.ask_first.iter().any(|t| t == tool)
    }
}

/// Where the user's approval settings are kept.
#[async_trait::async_trait]
pub trait ApprovalSettingsStore: Send + Sync {
    /// The user's settings; the defaults when none are stored.
    async fn get(&self, user: &UserId) -> Result<ApprovalSettings, StoreError>;
    /// Replaces the user's settings (already [`ApprovalSettings::checked`]).
    async fn put(&self, user: &UserId, settings: &ApprovalSettings) -> Result<(), StoreError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_deduplicated_and_ordered() {
        let s =
            ApprovalSettings { ask_first: vec!["create_task".into(), "update_entity".into(), "create_task".into()] };
        assert_eq!(s.checked().unwrap().ask_first, vec!["create_task", "update_entity"]);
        let unknown = ApprovalSettings { ask_first: vec!["launch_rockets".into()] }.checked();
        assert_eq!(unknown.unwrap_err().code(), "unknown_tool");
        let read_only = ApprovalSettings { ask_first: vec!["list_projects".into()] }.checked();
        assert!(read_only.is_err(), "a tool that changes nothing never asks");
    }
}
