//! The summarizer's and the turn-end event's settings (read once per container).
//!
//! | variable | default | meaning |
//! |---|---|---|
//! | `SUMMARY_QUEUE_URL` | unset | the SQS FIFO queue for `TurnCompleted`; unset: no events are sent |
//! | `TURN_EVENT_WAIT_MS` | `20` | after `done`, longest the body stays open for the send before leaving it in the background |
//! | `SUMMARIZER_MODEL` | `LLM_MODEL` | the summarizer model (same endpoint, `LLM_BASE_URL`) |
//! | `SUMMARY_TRIGGER_MESSAGES` | `20` | summarize when more messages than this are after the watermark |
//! | `SUMMARY_TRIGGER_CHARS` | `5000` | ... or more characters than this |
//! | `SUMMARY_TRIGGER_TOKENS` | `6000` | ... or more tokens than this (`CONTEXT_TOKENIZER`) |
//! | `SUMMARY_KEEP_RECENT` | `8` | the newest messages are never summarized |
//! | `SUMMARY_MAX_INPUT_MESSAGES` | `200` | messages read per run; a longer backlog is summarized over several runs |
//! | `SUMMARY_MAX_ATTEMPTS` | `3` | model calls per run when its output is rejected |
//! | `SUMMARY_MAX_TOKENS` | `1500` | `max_tokens` for the summarizer's answer |
//! | `SUMMARY_CONCURRENCY` | `4` | sessions summarized at once within one batch |

use crate::config::{env_or, env_parse, ConfigError};
use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummaryConfig {
    pub queue_url: Option<String>,
    pub event_wait: Duration,
    pub model: String,
    pub trigger_messages: usize,
    pub trigger_chars: usize,
    pub trigger_tokens: u64,
    pub keep_recent: usize,
    pub max_input_messages: usize,
    pub max_attempts: u32,
    pub max_tokens: u32,
    pub concurrency: usize,
}

impl SummaryConfig {
    /// `chat_model` is `LLM_MODEL`, the default summarizer model.
    pub fn from_env(chat_model: &str) -> Result<Self, ConfigError> {
        let c = SummaryConfig {
            queue_url: env_or("SUMMARY_QUEUE_URL"),
            event_wait: Duration::from_millis(env_parse("TURN_EVENT_WAIT_MS", 20u64)?),
            model: env_or("SUMMARIZER_MODEL").unwrap_or_else(|| chat_model.to_string()),
            ..SummaryConfig::defaults(chat_model)
        };
        let c = SummaryConfig {
            trigger_messages: env_parse("SUMMARY_TRIGGER_MESSAGES", c.trigger_messages)?,
            trigger_chars: env_parse("SUMMARY_TRIGGER_CHARS", c.trigger_chars)?,
            trigger_tokens: env_parse("SUMMARY_TRIGGER_TOKENS", c.trigger_tokens)?,
            keep_recent: env_parse("SUMMARY_KEEP_RECENT", c.keep_recent)?,
            max_input_messages: env_parse("SUMMARY_MAX_INPUT_MESSAGES", c.max_input_messages)?,
            max_attempts: env_parse("SUMMARY_MAX_ATTEMPTS", c.max_attempts)?,
            max_tokens: env_parse("SUMMARY_MAX_TOKENS", c.max_tokens)?,
            concurrency: env_parse("SUMMARY_CONCURRENCY", c.concurrency)?,
            ..c
        };
        if c.max_attempts == 0 || c.concurrency == 0 || c.max_input_messages == 0 {
            return Err(ConfigError {
                var: "SUMMARY_MAX_ATTEMPTS/SUMMARY_CONCURRENCY/SUMMARY_MAX_INPUT_MESSAGES",
                reason: "must be at least 1".into(),
            });
        }
        Ok(c)
    }

    /// The documented defaults, without reading the environment (tests).
    pub fn defaults(model: &str) -> Self {
        SummaryConfig {
            queue_url: None,
            event_wait: Duration::from_millis(20),
            model: model.to_string(),
            trigger_messages: 20,
            trigger_chars: 5_000,
            trigger_tokens: 6_000,
            keep_recent: 8,
            max_input_messages: 200,
            max_attempts: 3,
            max_tokens: 1_500,
            concurrency: 4,
        }
    }
}
