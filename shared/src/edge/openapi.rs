//! The OpenAPI documents, one per function (`docs/openapi.json` the entities
//! function's, `docs/openapi-stream.json` the stream function's: a turn, the
//! sessions API and the AI SDK's chat; `docs/openapi-prewarm.json`), each
//! generated from its router's routes, and the wire types' JSON Schema.
//!
//! The wire types' schema: every type a client sends or receives (the stream's native events, the turn
//! request, the sessions API bodies and the entities API's types, `EntityPatch`
//! among them), as one JSON Schema document: the input of the web client's
//! generated TypeScript (`web/src/api/types.gen.ts`, made by
//! `scripts/gen-types.sh`; `tests/tests/web_types.rs` fails on drift).
//!
//! Built with `utoipa`, the derive the entities API's OpenAPI document already
//! uses: the entity types carry their schemas (and id rules) once, and the
//! event and session types add theirs the same way.

use super::{ErrorBody, ErrorDetail};
use crate::approval::settings::{ApprovalSettings, ApprovalSettingsView};
use crate::budget::{BudgetKind, BudgetUsage};
use crate::calendar::UserSettings;
use crate::claims::{ClaimMismatch, MismatchKind};
use crate::message::{CutReason, FunctionCall, MessageError, Role, StoredOperation, ToolCall, Usage};
use crate::session::api::{
    DeleteAnswer, MessageStatus, MessageView, MessagesPage, RenameSession, SessionList, StopAnswer, StopRequest,
    ToolCallView,
};
use crate::session::{ContextType, SessionStatus, SessionView};
use crate::sse::{
    AgentActivity, CacheStatus, CheckVerdict, ContextUsage, DoneReason, Focus, OperationAction, OperationStatus,
    StreamEvent,
};
use crate::suggest::SuggestionRequest;
use crate::turn::TurnRequest;
use utoipa::OpenApi;

#[derive(OpenApi)]
#[openapi(components(schemas(
    StreamEvent,
    AgentActivity,
    DoneReason,
    CheckVerdict,
    ClaimMismatch,
    MismatchKind,
    CutReason,
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
    StoredOperation,
    RenameSession,
    StopRequest,
    StopAnswer,
    DeleteAnswer,
    SuggestionRequest,
    ErrorBody,
    ErrorDetail,
    BudgetUsage,
    BudgetKind,
    ApprovalSettings,
    ApprovalSettingsView,
    UserSettings,
)))]
struct WireTypes;

/// The JSON Schema (2020-12) document: every type under `$defs`, by name,
/// sorted; references point into `$defs`.
pub fn schema_json() -> String {
    let mut defs = std::collections::BTreeMap::new();
    for doc in [super::entities::openapi(), WireTypes::openapi()] {
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

/// A function's document: its routes' operations, titled, with the bearer scheme.
fn titled(mut doc: utoipa::openapi::OpenApi, title: &str, description: &str) -> utoipa::openapi::OpenApi {
    use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
    // The project's own metadata: utoipa-axum's default names its own crate's
    // author, license and version.
    doc.info = utoipa::openapi::InfoBuilder::new()
        .title(title)
        .description(Some(description))
        .license(Some(utoipa::openapi::LicenseBuilder::new().name("MIT").identifier(Some("MIT")).build()))
        .version(env!("CARGO_PKG_VERSION"))
        .build();
    let bearer = HttpBuilder::new().scheme(HttpAuthScheme::Bearer).bearer_format("JWT").build();
    doc.components.get_or_insert_with(Default::default).add_security_scheme("bearer", SecurityScheme::Http(bearer));
    doc
}

/// The stream function's document: a turn, the sessions API, the AI SDK's chat.
pub fn stream() -> utoipa::openapi::OpenApi {
    let doc = super::stream::routes().into_openapi();
    titled(doc, "agentic-chat stream", "One chat turn over SSE, the sessions API and the AI SDK's chat protocol.")
}

/// The prewarm function's document.
pub fn prewarm() -> utoipa::openapi::OpenApi {
    let doc = super::prewarm::routes().into_openapi();
    titled(doc, "agentic-chat prewarm", "Builds a session's context pack before the user types.")
}

/// The stream function's document with its request grammars.
pub fn stream_json() -> serde_json::Value {
    let mut doc = serde_json::to_value(stream()).expect("the OpenAPI document serializes");
    doc["components"]["schemas"]["TurnRequest"] = super::stream::turn_request_schema();
    set_body(&mut doc, "/chat", "ChatRequest", super::chat::chat_request_schema());
    let stop = super::stream::run_id_schema("Stop only this run; without it, whatever turn is running.");
    doc["components"]["schemas"]["StopRequest"]["properties"]["stream_run_id"] = stop;
    // A title is collapsed to single spaces, then must be 1 to 200 characters.
    let title = super::stream::not_blank("1 to 200 characters once runs of whitespace are one space.");
    doc["components"]["schemas"]["RenameSession"]["properties"]["title"] = title;
    // A stop's body is optional: absent or an object (JSON `null` is not one).
    let body = &mut doc["paths"]["/sessions/{id}/stop"]["post"]["requestBody"];
    body["content"]["application/json"]["schema"] = serde_json::json!({"$ref": "#/components/schemas/StopRequest"});
    whole_u64(&mut doc);
    doc
}

/// utoipa writes every `u64` as `int64`, whose range a tester keeps to
/// (2^63 - 1); the parameters the server reads up to `u64::MAX` say so.
fn whole_u64(doc: &mut serde_json::Value) {
    let Some(paths) = doc["paths"].as_object_mut() else { return };
    for op in paths.values_mut().filter_map(|p| p.as_object_mut()).flat_map(|p| p.values_mut()) {
        let params = op.get_mut("parameters").and_then(|p| p.as_array_mut());
        for param in params.into_iter().flatten() {
            if param["schema"]["maximum"] == serde_json::json!(u64::MAX) {
                param["schema"]["format"] = "uint64".into();
            }
        }
    }
}

/// The prewarm function's document with its request grammar.
pub fn prewarm_json() -> serde_json::Value {
    let mut doc = serde_json::to_value(prewarm()).expect("the OpenAPI document serializes");
    let context = <crate::session::ContextType as utoipa::PartialSchema>::schema();
    doc["components"]["schemas"]["ContextType"] = serde_json::to_value(context).expect("schemas serialize");
    set_body(&mut doc, "/", "PrewarmRequest", super::prewarm::prewarm_request_schema());
    doc
}

/// The `POST` at `path` takes the component `name`, `schema` its grammar:
/// JSON Schema written where the types cannot carry the rules the handler
/// checks beyond the fields' types (patterns, "not blank", one field needing
/// another; utoipa's schema types hold no `oneOf` of enums without a type).
/// Schemathesis generates from it, so it must be what the server accepts, no
/// looser and no stricter.
fn set_body(doc: &mut serde_json::Value, path: &str, name: &str, schema: serde_json::Value) {
    doc["components"]["schemas"][name] = schema;
    let body = &mut doc["paths"][path]["post"]["requestBody"];
    assert!(body.is_object(), "POST {path} declares a body");
    body["content"]["application/json"]["schema"] = serde_json::json!({"$ref": format!("#/components/schemas/{name}")});
}

/// Every function's document as its file under `docs/` holds it.
pub fn documents() -> Vec<(&'static str, String)> {
    let pretty = |d: serde_json::Value| serde_json::to_string_pretty(&d).expect("the OpenAPI document serializes");
    vec![
        ("docs/openapi.json", super::entities::openapi_json()),
        ("docs/openapi-stream.json", pretty(stream_json())),
        ("docs/openapi-prewarm.json", pretty(prewarm_json())),
    ]
}

#[cfg(test)]
mod tests {
    /// `get_field_info` says what the entities API's OpenAPI document says:
    /// each kind's fields component, its references resolved, is the tool's answer.
    #[test]
    fn field_info_is_the_openapi_component_of_each_kind() {
        use crate::tools::{field_schema, FieldKind};
        let doc = serde_json::to_value(super::super::entities::openapi()).unwrap();
        let components: std::collections::HashMap<String, serde_json::Value> =
            serde_json::from_value(doc["components"]["schemas"].clone()).unwrap();
        for kind in [
            FieldKind::Project,
            FieldKind::Document,
            FieldKind::Task,
            FieldKind::Goal,
            FieldKind::Plan,
            FieldKind::Milestone,
            FieldKind::Risk,
            FieldKind::Requirement,
        ] {
            let (name, fields) = field_schema(kind);
            let mut component = components[name].clone();
            crate::tools::schema::resolve(&mut component, &components);
            assert_eq!(fields, component, "{kind:?}");
            assert!(!fields.to_string().contains("$ref"), "{kind:?}");
        }
        let (_, task) = field_schema(FieldKind::Task);
        assert_eq!(task["properties"]["priority"]["maximum"], 5);
        assert!(task["properties"]["state"]["enum"].as_array().is_some_and(|v| v.len() > 2), "{task}");
    }

    /// Each function's document under `docs/` is the one its routes produce
    /// (`UPDATE_OPENAPI=1 cargo test -p shared --lib edge::openapi` rewrites them).
    #[test]
    fn the_documents_under_docs_are_the_generated_ones() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        for (file, generated) in super::documents() {
            let path = root.join(file);
            if std::env::var_os("UPDATE_OPENAPI").is_some() {
                std::fs::write(&path, format!("{generated}\n")).unwrap();
            }
            let copy = std::fs::read_to_string(&path).unwrap_or_default();
            assert_eq!(
                copy.trim_end(),
                generated,
                "{file} is stale: UPDATE_OPENAPI=1 cargo test -p shared --lib edge::openapi"
            );
        }
    }

    #[test]
    fn every_route_of_every_function_is_documented() {
        let stream = super::stream();
        for path in [
            "/",
            "/chat",
            "/chat/{id}/stream",
            "/sessions",
            "/sessions/{id}",
            "/sessions/{id}/messages",
            "/sessions/{id}/close",
            "/sessions/{id}/stop",
            "/sessions/{id}/stream",
            "/sessions/{id}/suggestion",
        ] {
            assert!(stream.paths.paths.contains_key(path), "{path}");
        }
        assert!(super::prewarm().paths.paths.contains_key("/"));
        assert!(super::super::entities::openapi().paths.paths.len() >= 20);
    }
}
