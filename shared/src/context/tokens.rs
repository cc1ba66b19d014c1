//! Token counting for context budgets, per model.
//!
//! A real BPE from `tiktoken-rs` (its vocabularies are compiled into the
//! crate, so nothing is downloaded at run time) chosen by model name, or the
//! documented fallback estimate of 4 characters per token. Models the crate
//! does not know (local and open-weight models) are counted with
//! `cl100k_base`: any modern BPE is much closer to it than to a character
//! ratio, and budgets have slack for the difference.

use crate::config::ConfigError;
use tiktoken_rs::CoreBPE;

/// Counts tokens the way the configured model's tokenizer would.
#[derive(Clone, Copy)]
pub enum TokenCounter {
    Bpe {
        encoding: &'static str,
        bpe: &'static CoreBPE,
    },
    /// 4 characters per token, rounded up: the fallback when no BPE applies.
    Estimate,
}

impl std::fmt::Debug for TokenCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Tokens a chat message costs beyond its text (role, separators), as OpenAI
/// documents for its chat models; the same small constant is used for all.
pub const PER_MESSAGE_OVERHEAD: u64 = 4;
/// Tokens that prime the reply (`<|start|>assistant<|message|>`).
pub const REPLY_PRIMING: u64 = 3;

impl TokenCounter {
    /// `setting` is `CONTEXT_TOKENIZER`: `auto` (by model name), `cl100k_base`,
    /// `o200k_base` or `estimate`. Loading a BPE takes a moment once per
    /// process (the vocabulary is parsed on first use), so call this at start.
    pub fn from_setting(setting: &str, model: &str) -> Result<Self, ConfigError> {
        let bpe = |encoding: &'static str| {
            let bpe = match encoding {
                "o200k_base" => tiktoken_rs::o200k_base_singleton(),
                _ => tiktoken_rs::cl100k_base_singleton(),
            };
            TokenCounter::Bpe { encoding, bpe }
        };
        match setting.trim() {
            "" | "auto" => Ok(match tiktoken_rs::tokenizer::get_tokenizer(model) {
                Some(tiktoken_rs::tokenizer::Tokenizer::O200kBase) => bpe("o200k_base"),
                _ => bpe("cl100k_base"),
            }),
            "cl100k_base" => Ok(bpe("cl100k_base")),
            "o200k_base" => Ok(bpe("o200k_base")),
            "estimate" => Ok(TokenCounter::Estimate),
            other => Err(ConfigError {
                var: "CONTEXT_TOKENIZER",
                reason: format!("{other:?}: expected auto, cl100k_base, o200k_base or estimate"),
            }),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            TokenCounter::Bpe { encoding, .. } => encoding,
            TokenCounter::Estimate => "estimate",
        }
    }

    pub fn count(&self, text: &str) -> u64 {
        if text.is_empty() {
            return 0;
        }
        match self {
            TokenCounter::Bpe { bpe, .. } => bpe.encode_ordinary(text).len() as u64,
            TokenCounter::Estimate => (text.chars().count() as u64).div_ceil(4),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_picks_the_models_encoding_and_counts_real_tokens() {
        let gpt4o = TokenCounter::from_setting("auto", "gpt-4o-mini").unwrap();
        assert_eq!(gpt4o.name(), "o200k_base");
        let local = TokenCounter::from_setting("auto", "smollm2-135m-instruct").unwrap();
        assert_eq!(local.name(), "cl100k_base");
        // "hello world" is two tokens in both encodings.
        assert_eq!(local.count("hello world"), 2);
        assert_eq!(gpt4o.count("hello world"), 2);
        assert_eq!(TokenCounter::from_setting("estimate", "x").unwrap().count("hello world"), 3);
        assert!(TokenCounter::from_setting("sentencepiece", "x").is_err());
    }
}
