//! One chat turn, as a plain async function over the store, the model and an
//! event sink. (Orchestration lands below the request type.)

use serde::{Deserialize, Serialize};

/// The body of `POST` to the stream function (BACKEND_FAST_STREAM_SPEC §3).
/// Unknown fields are ignored so older and newer clients keep working.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct TurnRequest {
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entity_id: Option<String>,
    #[serde(default, rename = "projectFocus", alias = "project_focus", skip_serializing_if = "Option::is_none")]
    pub project_focus: Option<serde_json::Value>,
    /// A string or a number; either way the idempotency key of this turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_run_id: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub voice_note_group_id: Option<String>,
}
