//! The context builder's settings, from the environment (read once per container).
//!
//! | variable | default | meaning |
//! |---|---|---|
//! | `CONTEXT_MAX_MESSAGES` | `40` | conversation messages sent per request (current one included) |
//! | `CONTEXT_MAX_CHARS` | `60000` | characters sent per request (system prompt and summary included) |
//! | `CONTEXT_MAX_TOKENS` | `12000` | tokens sent per request, counted with `CONTEXT_TOKENIZER` |
//! | `CONTEXT_LARGE_PASTE_CHARS` | `8000` | a user message this long is a pasted document, kept over other history |
//! | `CONTEXT_TOKENIZER` | `estimate` | `estimate` (lexical, no vocabulary), `auto` (the model's BPE if `tiktoken-rs` knows the model, else the estimate), `cl100k_base`, `o200k_base` (~28 MiB resident each) |

use super::{ContextBudget, TokenCounter};
use crate::config::{env_or, env_parse, ConfigError};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextConfig {
    pub budget: ContextBudget,
    /// `CONTEXT_TOKENIZER`.
    pub tokenizer: String,
}

impl ContextConfig {
    pub fn from_env() -> Result<Self, ConfigError> {
        let d = ContextBudget::default();
        let budget = ContextBudget {
            max_messages: env_parse("CONTEXT_MAX_MESSAGES", d.max_messages)?,
            max_chars: env_parse("CONTEXT_MAX_CHARS", d.max_chars)?,
            max_tokens: env_parse("CONTEXT_MAX_TOKENS", d.max_tokens)?,
            large_paste_chars: env_parse("CONTEXT_LARGE_PASTE_CHARS", d.large_paste_chars)?,
        };
        if budget.max_messages == 0 {
            return Err(ConfigError { var: "CONTEXT_MAX_MESSAGES", reason: "must be at least 1".into() });
        }
        let tokenizer = env_or("CONTEXT_TOKENIZER").unwrap_or_else(|| "estimate".into());
        // Fail at start, not on the first turn — by name only: loading a
        // vocabulary here parsed ~30 MiB of BPE on the main thread before the
        // runtime started (start → ready 131 ms; docs/performance.md, finding 3).
        TokenCounter::encoding(&tokenizer, "")?;
        Ok(ContextConfig { budget, tokenizer })
    }

    /// The counter for `model` (loads its vocabulary once per process).
    pub fn counter(&self, model: &str) -> Result<TokenCounter, ConfigError> {
        TokenCounter::from_setting(&self.tokenizer, model)
    }

    /// How many stored messages to load for one request: no more than the
    /// budget can send. It counts every message sent, tool calls and results
    /// included, the current one too, so this leaves one to spare.
    pub fn load_limit(&self) -> usize {
        self.budget.max_messages.clamp(1, 1000)
    }
}
