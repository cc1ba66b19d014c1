//! The web client's TypeScript types (`web/src/api/types.gen.ts`) are
//! generated from the Rust wire types (`shared::edge::openapi::schema_json`): this fails when
//! they drift apart, naming the command that regenerates them.

use std::path::Path;
use tests::web;

#[test]
fn the_schema_defines_every_event_and_request_and_resolves_every_reference() {
    let doc: serde_json::Value = serde_json::from_str(&shared::edge::openapi::schema_json()).unwrap();
    let defs = doc["$defs"].as_object().unwrap();
    for name in ["StreamEvent", "TurnRequest", "SessionList", "MessagesPage", "StopAnswer", "EntityPatch", "ErrorBody"]
    {
        assert!(defs.contains_key(name), "{name} is missing");
    }
    let text = doc.to_string();
    assert!(!text.contains("#/components/"), "an OpenAPI reference was left");
    for r in text.split("\"$ref\":\"#/$defs/").skip(1) {
        let name = &r[..r.find('"').unwrap()];
        assert!(defs.contains_key(name), "dangling reference to {name}");
    }
}

#[test]
fn the_checked_in_typescript_matches_the_rust_types() {
    let Some(node) = web::node_tools("type generation") else { return };
    let generated = node.run_with_stdin(&["scripts/gen-types.mjs"], shared::edge::openapi::schema_json().as_bytes());
    let path = Path::new(web::WEB_DIR).join("src/api/types.gen.ts");
    if std::env::var_os("UPDATE_WEB_TYPES").is_some() {
        std::fs::write(&path, &generated).expect("write types.gen.ts");
        return;
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "web/src/api/types.gen.ts is not what the Rust types generate: run scripts/gen-types.sh and commit the result"
    );
}
