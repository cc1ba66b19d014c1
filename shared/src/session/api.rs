//! The sessions API's bodies (what `GET /sessions…` answers and what
//! `PATCH` / `POST …/stop` take) and the one way a stored page becomes
//! [`MessageView`]s. The routes are the edge's (`crate::edge::sessions`).

use super::SessionView;
use crate::ids::TurnId;
use crate::message::{MessageError, Role, StoredMessage, StoredOperation};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// Longest tool-result preview in a message view, in characters.
pub const PREVIEW_CHARS: usize = 200;
/// Longest title a user may set, in characters.
pub const TITLE_MAX: usize = 200;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SessionList {
    pub sessions: Vec<SessionView>,
    /// Pass as `cursor` for the next page; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// A message in the shape a UI renders.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct MessageView {
    pub id: String,
    pub seq: u64,
    pub role: Role,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    pub created_at: i64,
    /// An assistant's tool calls, each with its result's preview when it is on this page.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCallView>,
    /// A tool result whose call is on another page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// `complete`, `error` (the content is partial; see `error`), `stopped`
    /// (partial, by the user) or `cut_off` (partial: see `cut_off`).
    pub status: MessageStatus,
    /// Why the answer was cut off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut_off: Option<crate::message::CutReason>,
    /// Where the answer's word and the turn's steps disagree
    /// (docs/events.md, `answer_check`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub claim_mismatches: Vec<crate::claims::ClaimMismatch>,
    /// False on an answer withdrawn for claiming what no tool did: shown,
    /// never sent to the model again.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub in_context: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<MessageError>,
    /// A user message dictated from voice notes: the id the client sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub voice_note_group_id: Option<String>,
    /// The turn that wrote it: the id of its answer in the AI SDK's protocol
    /// (`POST /chat`'s `start.messageId`), so a client that shows the history
    /// and then resumes the turn replaces the stored answer, not repeats it.
    pub turn_id: TurnId,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum MessageStatus {
    Complete,
    Error,
    Stopped,
    CutOff,
}

fn yes() -> bool {
    true
}

fn is_true(b: &bool) -> bool {
    *b
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ToolCallView {
    pub id: String,
    pub name: String,
    pub arguments: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_preview: Option<String>,
    /// The call waited (or waits, without a result) for the user's yes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<crate::message::PendingApproval>,
    /// The steps the call took, in the live turn's words (with its result;
    /// absent for calls stored before they were kept, and for calls that
    /// take no step).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub operations: Vec<StoredOperation>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct MessagesPage {
    /// Chronological.
    pub messages: Vec<MessageView>,
    /// Pass as `before` for the previous (older) page; absent at the start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_before: Option<u64>,
    /// Pass as `after` for the next (newer) page; absent when this page reached the newest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_after: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RenameSession {
    pub title: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StopRequest {
    /// Stop only this run (string or number); without it, whatever turn is running.
    #[serde(default)]
    pub stream_run_id: Option<serde_json::Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct StopAnswer {
    /// False when there was no running turn (it had ended, or another run was named): nothing changed.
    pub stopped: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct DeleteAnswer {
    pub status: String,
    pub items_deleted: usize,
    pub message: String,
}

/// Folds each tool result into its call when both are on the page.
pub fn views(page: Vec<StoredMessage>) -> Vec<MessageView> {
    let mut results: HashMap<String, (String, Vec<StoredOperation>)> = page
        .iter()
        .filter(|m| m.role == Role::Tool)
        .filter_map(|m| {
            let result = (preview(m.content.as_deref().unwrap_or("")), m.operations.clone());
            Some((m.tool_call_id.clone()?, result))
        })
        .collect();
    let calls_here: std::collections::HashSet<String> =
        page.iter().flat_map(|m| m.tool_calls.iter().map(|c| c.id.clone())).collect();
    page.into_iter()
        .filter(|m| !(m.role == Role::Tool && m.tool_call_id.as_ref().is_some_and(|id| calls_here.contains(id))))
        // The marker of a turn that answered waiting calls shows nothing.
        .filter(|m| m.include_in_context || m.content.is_some() || !m.tool_calls.is_empty())
        .map(|m| {
            let approvals = m.approvals;
            let status = match (&m.error, m.stopped, m.cut_off) {
                (Some(_), _, _) => MessageStatus::Error,
                (None, true, _) => MessageStatus::Stopped,
                (None, false, Some(_)) => MessageStatus::CutOff,
                _ => MessageStatus::Complete,
            };
            let is_tool = m.role == Role::Tool;
            MessageView {
                id: m.id.to_string(),
                seq: m.seq,
                role: m.role,
                content: if is_tool { m.content.as_deref().map(preview) } else { m.content },
                created_at: m.created_at,
                tool_calls: m
                    .tool_calls
                    .into_iter()
                    .map(|c| {
                        let (result_preview, operations) = results.remove(&c.id).unzip();
                        ToolCallView {
                            approval: approvals.iter().find(|a| a.tool_call_id == c.id).cloned(),
                            result_preview,
                            operations: operations.unwrap_or_default(),
                            id: c.id,
                            name: c.function.name,
                            arguments: c.function.arguments,
                        }
                    })
                    .collect(),
                tool_call_id: m.tool_call_id,
                status,
                cut_off: m.cut_off,
                claim_mismatches: m.claim_mismatches,
                in_context: m.include_in_context || m.role != Role::Assistant,
                error: m.error,
                voice_note_group_id: m.voice_note_group_id,
                turn_id: m.turn_id,
            }
        })
        .collect()
}

pub fn preview(s: &str) -> String {
    if s.chars().count() <= PREVIEW_CHARS {
        return s.to_string();
    }
    let cut: String = s.chars().take(PREVIEW_CHARS).collect();
    format!("{cut}…")
}
