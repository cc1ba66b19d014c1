//! Token counting for context budgets.
//!
//! The default is the lexical estimate ([`super::estimate`]): no vocabulary,
//! no memory, within a few tens of percent of a byte-level BPE and high where
//! it errs. A real BPE from `tiktoken-rs` (vocabularies compiled into the
//! crate, nothing downloaded) is opt-in, for OpenAI models whose tokenizer it
//! is: it costs ~28 MiB resident per process once loaded
//! (docs/performance.md, finding 4), and for any other model behind the
//! OpenAI-compatible API it is an estimate too (the local SmolLM2 counts
//! 4–73% more tokens than `cl100k_base` on the same text).

use crate::config::ConfigError;
use tiktoken_rs::CoreBPE;

/// Counts tokens the way the configured model's tokenizer would.
#[derive(Clone, Copy)]
pub enum TokenCounter {
    Bpe {
        encoding: &'static str,
        bpe: &'static CoreBPE,
    },
    /// The lexical estimate: the default.
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
    /// `setting` is `CONTEXT_TOKENIZER`: `estimate` (or empty), `auto` (the
    /// model's BPE when `tiktoken-rs` knows the model, else the estimate),
    /// `cl100k_base` or `o200k_base`. Loading a BPE takes a moment once per
    /// process (the vocabulary is parsed on first use), so not on the hot path.
    pub fn from_setting(setting: &str, model: &str) -> Result<Self, ConfigError> {
        Ok(match Self::encoding(setting, model)? {
            None => TokenCounter::Estimate,
            Some(encoding @ "o200k_base") => TokenCounter::Bpe { encoding, bpe: tiktoken_rs::o200k_base_singleton() },
            Some(encoding) => TokenCounter::Bpe { encoding, bpe: tiktoken_rs::cl100k_base_singleton() },
        })
    }

    /// The BPE `setting` asks for with `model`, or `None` for the estimate:
    /// what [`TokenCounter::from_setting`] would load, without loading it.
    pub fn encoding(setting: &str, model: &str) -> Result<Option<&'static str>, ConfigError> {
        match setting.trim() {
            "auto" => Ok(match tiktoken_rs::tokenizer::get_tokenizer(model) {
                Some(tiktoken_rs::tokenizer::Tokenizer::O200kBase) => Some("o200k_base"),
                Some(tiktoken_rs::tokenizer::Tokenizer::Cl100kBase) => Some("cl100k_base"),
                _ => None,
            }),
            "cl100k_base" => Ok(Some("cl100k_base")),
            "o200k_base" => Ok(Some("o200k_base")),
            "" | "estimate" => Ok(None),
            other => Err(ConfigError {
                var: "CONTEXT_TOKENIZER",
                reason: format!("{other:?}: expected estimate, auto, cl100k_base or o200k_base"),
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
            TokenCounter::Estimate => super::estimate::estimate(text),
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
        let gpt4 = TokenCounter::from_setting("auto", "gpt-4").unwrap();
        assert_eq!(gpt4.name(), "cl100k_base");
        // A model tiktoken does not know has no exact BPE here: the estimate.
        let local = TokenCounter::from_setting("auto", "smollm2-135m-instruct").unwrap();
        assert_eq!(local.name(), "estimate");
        assert_eq!(TokenCounter::from_setting("", "gpt-4o").unwrap().name(), "estimate");
        // "hello world" is two tokens in both encodings, and estimated so.
        assert_eq!(gpt4.count("hello world"), 2);
        assert_eq!(gpt4o.count("hello world"), 2);
        assert_eq!(local.count("hello world"), 2);
        assert!(TokenCounter::from_setting("sentencepiece", "x").is_err());
    }
}
