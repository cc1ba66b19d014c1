//! A lexical token estimate: BPE-like counts without a vocabulary.
//!
//! Contract: [`estimate`] counts what a modern byte-level BPE (the family
//! `cl100k_base`, `o200k_base`, Llama 3, SmolLM2 belong to) would count, to
//! within a few tens of percent, erring high, in one pass over the text with
//! no allocation and no tables. It exists because the one real BPE we could
//! embed costs ~28 MiB of resident memory (docs/performance.md, finding 4) and
//! is, for every model that is not OpenAI's, an estimate as well.
//!
//! It splits text the way those tokenizers' pre-tokenizers do (letter runs
//! with one leading space or mark, digit groups of up to three, punctuation
//! runs, whitespace runs) and prices each piece by shape: a short word is one
//! token, longer ones a token per ~6 letters, punctuation a token per ~2
//! marks, other scripts by their UTF-8 length. The constants were fitted
//! against `cl100k_base` on prose, Markdown, Rust, JSON and non-Latin text
//! (the test below keeps them there).

/// Costs in thousandths of a token, so fractional prices add up exactly.
const MILLI: u64 = 1000;
/// Letters per token after a word's first token.
const WORD_TAIL_LETTERS: u64 = 8;
/// Punctuation marks per token (`{"`, `":`, `),` are single tokens).
const MARKS_PER_TOKEN: u64 = 3;
/// Cost of one non-ASCII character by its UTF-8 length.
const TWO_BYTE_CHAR: u64 = 600;
const THREE_BYTE_CHAR: u64 = 1100;
const FOUR_BYTE_CHAR: u64 = 2000;

/// Tokens `text` would take (0 for the empty string).
pub fn estimate(text: &str) -> u64 {
    let b = text.as_bytes();
    let mut milli = 0u64;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_alphabetic() || c >= 0x80 {
            // A word: ASCII letters, or a run of other-script characters.
            let start = i;
            let mut ascii = 0u64;
            let mut other = 0u64;
            while i < b.len() && (b[i].is_ascii_alphabetic() || b[i] >= 0x80) {
                match b[i] {
                    0..0x80 => ascii += 1,
                    // UTF-8 continuation bytes: priced with their lead byte.
                    0x80..0xC0 => {}
                    // Two-byte characters (Latin accents, Greek, Cyrillic,
                    // Hebrew, Arabic) merge in pairs often enough.
                    0xC0..0xE0 => other += TWO_BYTE_CHAR,
                    // CJK and most other scripts: about a token a character.
                    0xE0..0xF0 => other += THREE_BYTE_CHAR,
                    // Emoji and rarer planes: byte-level pieces.
                    _ => other += FOUR_BYTE_CHAR,
                }
                i += 1;
            }
            debug_assert!(i > start);
            if ascii > 0 {
                milli += MILLI + (ascii - 1) / WORD_TAIL_LETTERS * MILLI;
            }
            milli += other;
            // A Latin word with an accented letter splits around it.
            if ascii > 0 && other > 0 {
                milli += MILLI * 3 / 2;
            }
        } else if c.is_ascii_digit() {
            let start = i;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            milli += ((i - start) as u64).div_ceil(3) * MILLI;
        } else if c.is_ascii_whitespace() {
            let start = i;
            let mut newline = false;
            while i < b.len() && b[i].is_ascii_whitespace() {
                newline |= b[i] == b'\n';
                i += 1;
            }
            let run = (i - start) as u64;
            // One space rides with the piece after it; a newline run is a
            // token, and so is the indentation after it (long runs of spaces
            // are single tokens in these vocabularies).
            // Digits do not take a leading space (`\p{N}{1,3}` in the splitting pattern).
            let before_digit = i < b.len() && b[i].is_ascii_digit();
            let spaces = if newline { 0 } else { run - 1 + u64::from(before_digit) };
            milli += (u64::from(newline) + spaces.div_ceil(16)) * MILLI;
            if newline && b[i - 1] != b'\n' {
                milli += MILLI;
            }
        } else {
            // ASCII punctuation and symbols.
            let start = i;
            while i < b.len() && b[i].is_ascii_punctuation() {
                i += 1;
            }
            let run = (i - start) as u64;
            milli += run.div_ceil(MARKS_PER_TOKEN) * MILLI;
            // Control characters are none of the above: a token each.
            if run == 0 {
                milli += MILLI;
                i += 1;
            }
        }
    }
    milli.div_ceil(MILLI)
}

#[cfg(test)]
mod tests {
    use super::estimate;
    use tiktoken_rs::cl100k_base_singleton;

    fn samples() -> Vec<(&'static str, String)> {
        vec![
            ("prose", include_str!("../../../README.md").to_string()),
            ("markdown with JSON", include_str!("../../../docs/events.md").to_string()),
            ("rust", include_str!("mod.rs").to_string()),
            ("json", include_str!("../../../docs/openapi.json").to_string()),
            ("german", "Die Baustelle wird nächste Woche fertig; die Fliesen für die Küche kommen am Dienstag. Können wir den Termin mit dem Elektriker verschieben?".repeat(20)),
            ("chinese", "我们下周完成厨房的预算和瓷砖订单，请确认承包商的时间安排。".repeat(20)),
            ("russian", "Мы закончим бюджет кухни на следующей неделе, подтвердите график подрядчика.".repeat(20)),
            ("numbers", "Order 4417 costs 12,980.50 EUR on 2026-11-22 at 09:45; ids 019a8f3e-77c1 and 3.14159.".repeat(20)),
        ]
    }

    /// The estimate stays near a real BPE on every kind of text a chat
    /// carries, and errs high where it errs: budgets must not be overrun.
    #[test]
    fn estimate_tracks_cl100k_and_errs_high() {
        let bpe = cl100k_base_singleton();
        let mut report = Vec::new();
        for (name, text) in samples() {
            let real = bpe.encode_ordinary(&text).len() as f64;
            let est = estimate(&text) as f64;
            report.push((format!("{name}: cl100k {real}, estimate {est}, ratio {:.2}", est / real), est / real));
        }
        let text: Vec<_> = report.iter().map(|(line, _)| line.as_str()).collect();
        println!("{}", text.join("\n"));
        for (_, ratio) in &report {
            assert!((0.95..=1.35).contains(ratio), "{}", text.join("\n"));
        }
    }

    #[test]
    fn small_cases() {
        assert_eq!(estimate(""), 0);
        assert_eq!(estimate("hello"), 1);
        assert_eq!(estimate("hello world"), 2);
        assert_eq!(estimate("2026"), 2);
        assert!(estimate("\u{1F600}\u{1F600}") >= 2);
        assert!(estimate("a\u{0}b") >= 3);
    }
}
