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
//! | `SUMMARY_MAX_ATTEMPTS` | `3` | rejected model answers per backlog, across runs and deliveries (docs/summarizer.md) |
//! | `SUMMARY_MAX_TOKENS` | `1500` | `max_tokens` for the summarizer's answer |
//! | `SUMMARY_CONCURRENCY` | `4` | sessions summarized at once within one batch |
//! | `SUMMARY_YIELD_TO_TURNS` | `session` | the summarizer leaves the model to chat turns: `session` to the session's own turns, `user` to any turn of the session's user (what `scripts/stack.sh` sets for the one local model server), `off` never (docs/summarizer.md) |
//! | `SUMMARY_YIELD_POLL_MS` | `1000` | while its model call runs, how often the summarizer looks for a turn that started (one small read; more with `user`) |

use crate::config::{env_or, env_parse, ConfigError};
use std::time::Duration;

/// Whose running chat turns the summarizer yields the model to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum YieldScope {
    /// Never: summaries run beside turns (a model server that serves many
    /// requests at once loses nothing by it).
    Off,
    /// The session's own turns: that turn's event brings a newer backlog anyway.
    Session,
    /// Any turn of the session's user (the local stack: one user, one model
    /// server answering one request at a time).
    User,
}

impl std::str::FromStr for YieldScope {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "off" => Ok(YieldScope::Off),
            "session" => Ok(YieldScope::Session),
            "user" => Ok(YieldScope::User),
            other => Err(format!("{other:?} is not one of user, session, off")),
        }
    }
}

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
    pub yield_to_turns: YieldScope,
    pub yield_poll: Duration,
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
            yield_to_turns: env_parse("SUMMARY_YIELD_TO_TURNS", c.yield_to_turns)?,
            yield_poll: Duration::from_millis(env_parse("SUMMARY_YIELD_POLL_MS", 1_000u64)?),
            ..c
        };
        if c.yield_poll.is_zero() {
            return Err(ConfigError { var: "SUMMARY_YIELD_POLL_MS", reason: "must be at least 1".into() });
        }
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
            // `user` is the local stack's (one model server, one request at a
            // time; scripts/stack.sh sets it): a hosted model loses nothing by
            // summaries beside turns, and deferring to another session's turn
            // would only leave the backlog to a later event.
            yield_to_turns: YieldScope::Session,
            yield_poll: Duration::from_millis(1_000),
        }
    }
}
