//! The core of agentic-chat. Every Lambda function is a thin `main.rs` over
//! this crate. Its top-level modules form a tree, no import loop between them
//! (`tests/tests/structure.rs` checks it), listed here from the bottom up.
//! Each feature owns its persistence: a narrow trait, its DynamoDB
//! implementation, an in-memory twin and one contract suite run against both.
//!
//! - leaves: [`config`] (the one env loader), [`ids`] (newtypes for ids),
//!   [`auth`] (bearer JWTs), [`lambda`] (the runtime loop kept serving past
//!   one invocation's failure), [`message`] (the protocol-complete conversation
//!   log), [`metrics`], [`telemetry`], [`transport`] (socket options);
//!   [`web`] (pages read and searches made for the web tools, under the
//!   address guard);
//! - [`store`]: the DynamoDB client, the one key scheme, attribute helpers,
//!   `StoreError` — and no feature's types;
//! - what the ontology, a session, a plan and the agent state are, with
//!   their stores: [`entities`], [`session`] (sessions, the turn log, leases,
//!   stop signals), [`plan`], [`agent_state`]; [`budget`] (per-user
//!   budgets: tokens a day, turns a minute, turns at once, web calls a day);
//! - [`sse`]: the event contract ([`sse::StreamEvent`]), the native SSE
//!   encoder, the decoder, the sinks; above it [`frames`] (the frame log a
//!   client resumes from) and [`llm`] (any OpenAI-compatible streaming
//!   endpoint);
//! - [`model_loop`]: rounds of model calls and tool calls over tool layers,
//!   with no knowledge of plans; [`tools`]: the ontology tools, one file per
//!   family, as one such layer;
//! - [`context`] (budgets, packs and their cache), [`summary`] (the rolling
//!   summary), [`prompt`] (system prompts per scope); [`planner`]: plans run
//!   as a tool layer handed a loop runner;
//! - [`turn`]: one chat turn as a plain async function (request, start,
//!   history, context, finish, retry, lease); [`prewarm`]: context packs
//!   before the first turn; [`suggest`]: the next message the user could
//!   send, drafted from the turn's history read, stored nowhere;
//! - [`chat`]: the AI SDK's chat protocol (requests, the UI message stream,
//!   resume); [`edge`]: the HTTP edge — every function's axum router, its
//!   OpenAPI document, CORS, errors as answers. Nothing below imports these.

pub mod agent_state;
pub mod approval;
pub mod auth;
pub mod budget;
pub mod calendar;
pub mod chat;
pub mod claims;
pub mod config;
pub mod context;
pub mod edge;
pub mod entities;
pub mod frames;
pub mod ids;
pub mod lambda;
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
pub mod suggest;
pub mod summary;
pub mod telemetry;
pub mod tools;
pub mod transport;
pub mod turn;
pub mod web;

/// Milliseconds since the Unix epoch: the one clock every stored timestamp uses.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}
