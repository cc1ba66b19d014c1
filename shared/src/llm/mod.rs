//! The model, over any OpenAI-compatible streaming Chat Completions endpoint.
//!
//! Contract: [`Llm::stream_chat`] resolves once the model has produced its first
//! event (text, tool-call delta or usage). Everything before that point — connect,
//! HTTP status, first token — is bounded by timeouts and retried with backoff on
//! transient failures (connect errors, no response in time, 429, 5xx); nothing
//! after it is retried, because tokens have already reached the user. A server
//! that answered 200 but sent no event in time is not retried either: it took
//! the request and was still computing it, and a retry would compute the same
//! prompt again from the start (a local model, one prompt at a time, would
//! first finish the abandoned one). The returned stream then yields
//! [`LlmEvent`]s until the model's `[DONE]` (or the end of the body), or one
//! [`LlmError`] and nothing after it. Dropping the stream cancels the HTTP request.

mod client;
mod parse;
mod tool_calls;

pub use client::{OpenAiClient, OpenAiConfig};
pub use parse::ChunkParser;
pub use tool_calls::ToolCallAccumulator;

use crate::message::{ChatMessage, Usage};
use futures::stream::BoxStream;
use serde::Serialize;

/// The body we POST to `/chat/completions` (with `stream: true` added by the client).
#[derive(Debug, Clone, Serialize)]
pub struct ChatRequest {
    pub model: String,
    pub messages: Vec<ChatMessage>,
    /// OpenAI `tools` entries (`{"type":"function","function":{...}}`); empty = no tools.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
}

/// One thing the model said, decoded from one streamed chunk.
#[derive(Debug, Clone, PartialEq)]
pub enum LlmEvent {
    TextDelta(String),
    /// A piece of a tool call. `index` is the position in the assistant's
    /// `tool_calls` (servers that omit it get one assigned by order of first id).
    ToolCallDelta {
        index: u32,
        id: Option<String>,
        name: Option<String>,
        arguments: String,
    },
    Usage(Usage),
    Finish {
        reason: String,
    },
}

/// [`LlmError::Timeout`]: no response (status line) in time; retried.
pub const TIMEOUT_RESPONSE: &str = "response";
/// [`LlmError::Timeout`]: the server answered 200 but sent no event in time;
/// not retried (see the module contract).
pub const TIMEOUT_FIRST_TOKEN: &str = "first token";

#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum LlmError {
    #[error("could not reach the model: {0}")]
    Connect(String),
    #[error("the model did not answer in time ({0})")]
    Timeout(&'static str),
    #[error("the model answered HTTP {status}: {body}")]
    Http { status: u16, body: String },
    #[error("the model reported an error: {0}")]
    Api(String),
    #[error("the model's stream broke: {0}")]
    Stream(String),
    #[error("the model sent something we could not decode: {0}")]
    Decode(String),
}

impl LlmError {
    /// The machine-readable code used in SSE `error` events and stored error markers.
    pub fn code(&self) -> &'static str {
        match self {
            LlmError::Connect(_) => "llm_unavailable",
            LlmError::Timeout(_) => "llm_timeout",
            LlmError::Http { status: 429, .. } => "llm_rate_limited",
            LlmError::Http { .. } => "llm_http_error",
            LlmError::Api(_) => "llm_error",
            LlmError::Stream(_) => "llm_stream_error",
            LlmError::Decode(_) => "llm_decode_error",
        }
    }

    /// Worth another try before the first token.
    pub fn is_transient(&self) -> bool {
        match self {
            LlmError::Connect(_) => true,
            LlmError::Timeout(what) => *what != TIMEOUT_FIRST_TOKEN,
            LlmError::Http { status, .. } => *status == 429 || *status >= 500,
            _ => false,
        }
    }
}

pub type LlmStream = BoxStream<'static, Result<LlmEvent, LlmError>>;

/// What a turn needs from a model. One implementation talks HTTP
/// ([`OpenAiClient`]); tests point it at a scripted server.
#[async_trait::async_trait]
pub trait Llm: Send + Sync {
    async fn stream_chat(&self, req: ChatRequest) -> Result<LlmStream, LlmError>;
}
