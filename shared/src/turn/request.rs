//! The turn request: the body of a `POST` to the stream function
//! (BACKEND_FAST_STREAM_SPEC §3) and its validation. Pure and cheap, so it runs
//! before the stream opens: a request refused here gets an HTTP 400 (413 when
//! too large) with nothing written.

use crate::calendar::Zone;
use crate::entities::EntityKind;
use crate::ids::{EntityId, InvalidId, ProjectId, RunId, SessionId};
use crate::session::ContextType;
use serde::{Deserialize, Serialize};

/// The body of `POST` to the stream function. Unknown fields are ignored so
/// older and newer clients keep working; the body must be a JSON object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, utoipa::ToSchema)]
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
    /// Groups the voice notes a message was dictated from; stored with the
    /// user message and returned in its history.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub voice_note_group_id: Option<String>,
    /// The client's IANA time zone (`Europe/Berlin`): this turn's calendar
    /// reads and writes local times in it. It is this turn's alone, never
    /// stored; without it the turn uses the user's chosen zone
    /// (`PUT /me/settings`), else UTC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timezone: Option<String>,
}

/// Why a request was refused before any streaming (HTTP 400, nothing written).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BadTurn {
    #[error("the body is not valid JSON: {0}")]
    InvalidJson(String),
    #[error("the body must be a JSON object")]
    NotAnObject,
    #[error("`message` is required and must not be empty")]
    EmptyMessage,
    #[error("`message` is {size} bytes; the limit is {limit}")]
    MessageTooLarge { size: usize, limit: usize },
    #[error("unknown context_type {0:?}")]
    UnknownContextType(String),
    #[error("{0}")]
    InvalidId(#[from] InvalidId),
    #[error("`projectFocus` must be an object; {0}")]
    InvalidFocus(String),
    #[error("`stream_run_id` must be a string or a number")]
    InvalidRunId,
    #[error("`voice_note_group_id` must be 1 to {VOICE_NOTE_GROUP_MAX} characters without control characters")]
    InvalidVoiceNoteGroup,
    #[error("unknown timezone {0:?}: use an IANA name such as Europe/Berlin")]
    InvalidTimezone(String),
}

impl BadTurn {
    pub fn code(&self) -> &'static str {
        match self {
            BadTurn::InvalidJson(_) | BadTurn::NotAnObject => "invalid_json",
            BadTurn::EmptyMessage => "missing_message",
            BadTurn::MessageTooLarge { .. } => "message_too_large",
            BadTurn::UnknownContextType(_) => "unknown_context_type",
            BadTurn::InvalidId(_) => "invalid_id",
            BadTurn::InvalidFocus(_) => "invalid_focus",
            BadTurn::InvalidRunId => "invalid_stream_run_id",
            BadTurn::InvalidVoiceNoteGroup => "invalid_voice_note_group_id",
            BadTurn::InvalidTimezone(_) => "invalid_timezone",
        }
    }
}

/// Longest `voice_note_group_id`, in characters.
pub const VOICE_NOTE_GROUP_MAX: usize = 128;

/// A request that passed validation: everything the turn needs, typed.
#[derive(Debug, Clone)]
pub struct ValidTurn {
    pub message: String,
    pub session_id: Option<SessionId>,
    /// `None`: keep the session's scope (or `global` for a new session).
    pub context_type: Option<ContextType>,
    pub entity_id: Option<String>,
    pub focus: Option<serde_json::Value>,
    pub run_id: Option<RunId>,
    pub voice_note_group_id: Option<String>,
    pub timezone: Option<Zone>,
    /// A `session_id` that does not exist yet is created under that id (the
    /// chat route: the AI SDK's client makes its chat ids); otherwise it is
    /// `session_not_found`.
    pub session_may_be_new: bool,
    /// Answer the session's last user message again (the chat route's
    /// `regenerate-message`): `message` is empty and nothing of the user's is
    /// stored; the previous answer is superseded ([`crate::message::without_superseded`]).
    pub regenerate: bool,
    /// The user's answers to waiting calls ([`crate::approval`]): the turn
    /// runs the approved ones and the model goes on; `message` is empty and
    /// nothing of the user's is stored but a marker.
    pub approvals: Vec<crate::approval::ApprovalAnswer>,
}

impl ValidTurn {
    /// A turn that answers waiting calls of `session` and goes on.
    pub fn answering(session: SessionId, approvals: Vec<crate::approval::ApprovalAnswer>) -> ValidTurn {
        ValidTurn {
            message: String::new(),
            session_id: Some(session),
            context_type: None,
            entity_id: None,
            focus: None,
            run_id: None,
            voice_note_group_id: None,
            timezone: None,
            session_may_be_new: false,
            regenerate: false,
            approvals,
        }
    }

    /// Validates a raw body.
    pub fn parse(body: &[u8], max_message_bytes: usize) -> Result<ValidTurn, BadTurn> {
        // The body limit is generous beside the message limit (focus metadata),
        // but bounded, so a huge body is refused before it is parsed.
        if body.len() > max_message_bytes.saturating_mul(2) + 64 * 1024 {
            return Err(BadTurn::MessageTooLarge { size: body.len(), limit: max_message_bytes });
        }
        // serde's derived struct visitor also accepts a JSON array, by position
        // (`["hi"]` would be a turn): only an object is a request.
        match body.iter().find(|b| !b.is_ascii_whitespace()) {
            Some(b'{') => {}
            Some(_) if serde_json::from_slice::<serde::de::IgnoredAny>(body).is_ok() => {
                return Err(BadTurn::NotAnObject)
            }
            _ => {}
        }
        let req: TurnRequest = serde_json::from_slice(body).map_err(|e| BadTurn::InvalidJson(e.to_string()))?;
        Self::from_request(req, max_message_bytes)
    }

    /// Validates a request already read (the chat route builds one from its body).
    pub fn from_request(req: TurnRequest, max_message_bytes: usize) -> Result<ValidTurn, BadTurn> {
        if req.message.trim().is_empty() {
            return Err(BadTurn::EmptyMessage);
        }
        if req.message.len() > max_message_bytes {
            return Err(BadTurn::MessageTooLarge { size: req.message.len(), limit: max_message_bytes });
        }
        let context_type = match req.context_type.as_deref() {
            None => None,
            Some(c) => Some(ContextType::parse(c).ok_or_else(|| BadTurn::UnknownContextType(c.to_string()))?),
        };
        let run_id = match req.stream_run_id {
            None | Some(serde_json::Value::Null) => None,
            Some(serde_json::Value::String(s)) => Some(RunId::parse(s)?),
            Some(serde_json::Value::Number(n)) => Some(RunId::parse(n.to_string())?),
            Some(_) => return Err(BadTurn::InvalidRunId),
        };
        let entity_id = match req.entity_id {
            Some(e) if !e.trim().is_empty() => Some(EntityId::parse(e)?.into()),
            _ => None,
        };
        let voice_note_group_id = match req.voice_note_group_id {
            None => None,
            Some(v) if v.is_empty() => None,
            Some(v) if v.chars().count() <= VOICE_NOTE_GROUP_MAX && !v.chars().any(char::is_control) => Some(v),
            Some(_) => return Err(BadTurn::InvalidVoiceNoteGroup),
        };
        let timezone = match req.timezone.as_deref().filter(|z| !z.is_empty()) {
            Some(z) => Some(Zone::parse(z).map_err(|_| BadTurn::InvalidTimezone(z.to_string()))?),
            None => None,
        };
        Ok(ValidTurn {
            timezone,
            message: req.message,
            session_id: req.session_id.filter(|s| !s.is_empty()).map(SessionId::parse).transpose()?,
            context_type,
            entity_id,
            focus: req.project_focus.map(validate_focus).transpose()?,
            run_id,
            voice_note_group_id,
            session_may_be_new: false,
            regenerate: false,
            approvals: vec![],
        })
    }
}

/// The focus ids are checked as the prewarm function checks them: an invalid
/// `projectId` is refused, never read as "no project" (which would quietly
/// run the turn in global scope).
fn validate_focus(focus: serde_json::Value) -> Result<serde_json::Value, BadTurn> {
    let Some(fields) = focus.as_object() else {
        return Err(BadTurn::InvalidFocus(format!("got {focus}")));
    };
    let field = |camel: &str, snake: &str| fields.get(camel).or_else(|| fields.get(snake));
    match field("projectId", "project_id") {
        None | Some(serde_json::Value::Null) => {}
        Some(serde_json::Value::String(p)) => {
            ProjectId::parse(p.clone()).map_err(|e| BadTurn::InvalidFocus(format!("projectId: {e}")))?;
        }
        Some(other) => return Err(BadTurn::InvalidFocus(format!("projectId must be a string, got {other}"))),
    }
    match field("entityType", "entity_type") {
        None | Some(serde_json::Value::Null) => {}
        Some(serde_json::Value::String(k)) if EntityKind::parse(k).is_some() => {}
        Some(other) => return Err(BadTurn::InvalidFocus(format!("unknown entityType {other}"))),
    }
    Ok(focus)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: usize = 32 * 1024;

    #[test]
    fn only_an_object_is_a_turn_request() {
        assert_eq!(ValidTurn::parse(br#"["hi"]"#, MAX).unwrap_err(), BadTurn::NotAnObject);
        assert_eq!(ValidTurn::parse(br#" ["hi", null, "global"]"#, MAX).unwrap_err().code(), "invalid_json");
        assert_eq!(ValidTurn::parse(br#""hi""#, MAX).unwrap_err(), BadTurn::NotAnObject);
        assert!(matches!(ValidTurn::parse(b"[not json", MAX).unwrap_err(), BadTurn::InvalidJson(_)));
        assert!(ValidTurn::parse(br#" {"message":"hi"}"#, MAX).is_ok());
    }

    #[test]
    fn an_invalid_focus_project_is_refused_not_read_as_global() {
        let e = ValidTurn::parse(br#"{"message":"hi","projectFocus":{"projectId":"bad id!"}}"#, MAX).unwrap_err();
        assert_eq!(e.code(), "invalid_focus");
        let e = ValidTurn::parse(br#"{"message":"hi","projectFocus":{"projectId":7}}"#, MAX).unwrap_err();
        assert_eq!(e.code(), "invalid_focus");
        let e = ValidTurn::parse(br#"{"message":"hi","projectFocus":{"entityType":"spaceship"}}"#, MAX).unwrap_err();
        assert_eq!(e.code(), "invalid_focus");
        let ok = ValidTurn::parse(br#"{"message":"hi","projectFocus":{"projectId":"p1","entityType":"task"}}"#, MAX);
        assert!(ok.is_ok());
    }

    #[test]
    fn voice_note_group_is_kept_and_checked() {
        let v = ValidTurn::parse(br#"{"message":"hi","voice_note_group_id":"vg-1"}"#, MAX).unwrap();
        assert_eq!(v.voice_note_group_id.as_deref(), Some("vg-1"));
        let long = format!(r#"{{"message":"hi","voice_note_group_id":"{}"}}"#, "x".repeat(VOICE_NOTE_GROUP_MAX + 1));
        assert_eq!(ValidTurn::parse(long.as_bytes(), MAX).unwrap_err(), BadTurn::InvalidVoiceNoteGroup);
    }
}
