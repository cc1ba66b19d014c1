//! Every type a client sends or receives (the stream's native events, the turn
//! request, the sessions API bodies and the entities API's types, `EntityPatch`
//! among them), as one JSON Schema document: the input of the web client's
//! generated TypeScript (`web/src/api/types.gen.ts`, made by
//! `scripts/gen-types.sh`; `tests/tests/web_types.rs` fails on drift).
//!
//! Built with `utoipa`, the derive the entities API's OpenAPI document already
//! uses: the entity types carry their schemas (and id rules) once, and the
//! event and session types add theirs the same way.

use crate::edge::{ErrorBody, ErrorDetail};
use crate::message::{FunctionCall, MessageError, Role, ToolCall, Usage};
use crate::session::http::{
    DeleteAnswer, MessageStatus, MessageView, MessagesPage, RenameSession, SessionList, StopAnswer, StopRequest,
    ToolCallView,
};
use crate::session::{ContextType, SessionStatus, SessionView};
use crate::sse::{
    AgentActivity, CacheStatus, ContextUsage, DoneReason, Focus, OperationAction, OperationStatus, StreamEvent,
};
use crate::turn::TurnRequest;
use utoipa::OpenApi;

#[derive(OpenApi)]
#[openapi(components(schemas(
    StreamEvent,
    AgentActivity,
    DoneReason,
    OperationAction,
    OperationStatus,
    ContextUsage,
    CacheStatus,
    Focus,
    ToolCall,
    FunctionCall,
    Usage,
    Role,
    MessageError,
    TurnRequest,
    SessionView,
    SessionStatus,
    ContextType,
    SessionList,
    MessagesPage,
    MessageView,
    MessageStatus,
    ToolCallView,
    RenameSession,
    StopRequest,
    StopAnswer,
    DeleteAnswer,
    ErrorBody,
    ErrorDetail,
)))]
struct WireTypes;

/// The JSON Schema (2020-12) document: every type under `$defs`, by name,
/// sorted; references point into `$defs`.
pub fn schema_json() -> String {
    let mut defs = std::collections::BTreeMap::new();
    for doc in [crate::entities::http::openapi(), WireTypes::openapi()] {
        for (name, schema) in doc.components.map(|c| c.schemas).unwrap_or_default() {
            defs.insert(name, schema);
        }
    }
    let doc = serde_json::json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "agentic-chat wire types",
        "$defs": defs,
    });
    let text = serde_json::to_string_pretty(&doc).expect("schemas serialize");
    // OpenAPI's component references, as JSON Schema's local ones.
    text.replace("\"#/components/schemas/", "\"#/$defs/")
}
