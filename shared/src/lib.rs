//! The core of agentic-chat. Every Lambda function is a thin `main.rs` over this crate.
//!
//! Rooms, by domain: [`config`] (the one env loader), [`auth`] (bearer JWTs),
//! [`sse`] (the event contract and its encoders: native SSE and the AI SDK's
//! UI message stream), [`chat`] (the AI SDK's chat protocol), [`message`] (the
//! protocol-complete conversation log), [`session`] (sessions, leases, turn records),
//! [`store`] (the DynamoDB key scheme and its implementation), [`llm`] (any
//! OpenAI-compatible streaming endpoint), [`prompt`] (system prompts per scope),
//! [`turn`] (one chat turn as a plain async function) and [`edge`] (the HTTP
//! edge: every function's axum router, its OpenAPI document, errors as answers).

pub mod agent_state;
pub mod auth;
pub mod chat;
pub mod config;
pub mod context;
pub mod edge;
pub mod entities;
pub mod frames;
pub mod ids;
pub mod llm;
pub mod message;
pub mod metrics;
pub mod model_loop;
pub mod plan;
pub mod planner;
pub mod prewarm;
pub mod prompt;
pub mod session;
pub mod sse;
pub mod store;
pub mod summary;
pub mod telemetry;
pub mod tools;
pub mod transport;
pub mod turn;

/// Milliseconds since the Unix epoch: the one clock every stored timestamp uses.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}
