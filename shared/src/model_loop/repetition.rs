//! A model stuck in a loop, seen in its streamed text: [`Repetition`] is fed
//! each delta and says when the text has become a loop, so the request can be
//! cut there (the answer then ends `cut_off`, reason `repetition`) instead of
//! running to the token limit (issue 40: 63 copies of one item, 249 s).
//!
//! Contract, deterministic in the text alone (never in time):
//! - a line, its list marker ("12.", "-", "*") taken off, that occurs
//!   [`LINE_REPEATS`] times and makes up two thirds or more of the lines so
//!   far is a loop (a month of "Standup" lines under day headings is not);
//! - so is a run of words repeating itself back to back — a period of `p`
//!   words repeated `max(6, 60 / p)` times, `p` up to [`MAX_PERIOD`];
//! - ordinary text, lists of different items and dated listings never are.

use std::collections::{HashMap, VecDeque};

/// How often one line must occur to be a loop.
pub const LINE_REPEATS: u32 = 12;
/// The longest run of words whose back-to-back repeats are looked for.
pub const MAX_PERIOD: usize = 50;
/// Words kept to look for repeats in.
const KEPT_WORDS: usize = 400;

/// The text seen so far, as far as loops are concerned.
#[derive(Debug, Default)]
pub struct Repetition {
    /// The line being streamed.
    line: String,
    /// Occurrences of each finished line (normalized).
    lines: HashMap<String, u32>,
    total_lines: u32,
    /// The word being streamed, and the last words finished.
    word: String,
    words: VecDeque<String>,
}

impl Repetition {
    /// Feeds the next delta; true once the text is a loop.
    pub fn push(&mut self, delta: &str) -> bool {
        let mut looped = false;
        for c in delta.chars() {
            if c == '\n' {
                looped |= self.end_line();
            } else {
                self.line.push(c);
            }
            if c.is_whitespace() {
                looped |= self.end_word();
            } else {
                self.word.extend(c.to_lowercase());
            }
        }
        looped
    }

    fn end_line(&mut self) -> bool {
        let line = normalize_line(&std::mem::take(&mut self.line));
        if line.chars().count() < 3 {
            return false;
        }
        self.total_lines += 1;
        let n = self.lines.entry(line).or_default();
        *n += 1;
        *n >= LINE_REPEATS && *n * 3 >= self.total_lines * 2
    }

    fn end_word(&mut self) -> bool {
        if self.word.is_empty() {
            return false;
        }
        self.words.push_back(std::mem::take(&mut self.word));
        if self.words.len() > KEPT_WORDS {
            self.words.pop_front();
        }
        (1..=MAX_PERIOD).any(|p| self.repeats(p))
    }

    /// Whether the last words are a run of `p` words repeated back to back
    /// often enough.
    fn repeats(&self, p: usize) -> bool {
        let times = (60 / p).max(6);
        let span = p * times;
        let n = self.words.len();
        if n < span {
            return false;
        }
        (n - span..n - p).all(|i| self.words[i] == self.words[i + p])
    }
}

/// A line without its list marker, trimmed and lowercased.
fn normalize_line(line: &str) -> String {
    let t = line.trim();
    let t = t.trim_start_matches(|c: char| c.is_ascii_digit());
    let t = t.trim_start_matches(['.', ')', '-', '*', '•', ' ']);
    t.trim().to_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `text`, streamed in pieces of `chunk` characters, is cut.
    fn cut(text: &str, chunk: usize) -> bool {
        let mut r = Repetition::default();
        let chars: Vec<char> = text.chars().collect();
        chars.chunks(chunk).any(|c| r.push(&c.iter().collect::<String>()))
    }

    #[test]
    fn a_numbered_item_repeated_is_a_loop() {
        // Issue 40's answer: the same item, numbered 1 … 63.
        let text: String = (1..=63).map(|i| format!("{i}. Standup – daily at 9:00\n")).collect();
        assert!(cut(&text, 7));
        // Cut early: by the LINE_REPEATS-th copy.
        let first: String = (1..=LINE_REPEATS).map(|i| format!("{i}. Standup – daily at 9:00\n")).collect();
        assert!(cut(&first, 3));
        let fewer: String = (1..LINE_REPEATS).map(|i| format!("{i}. Standup – daily at 9:00\n")).collect();
        assert!(!cut(&fewer, 3));
    }

    #[test]
    fn a_sentence_repeated_back_to_back_is_a_loop() {
        assert!(cut(&"Let me check your calendar for tomorrow. ".repeat(10), 5));
        assert!(cut(&"very ".repeat(80), 4));
        assert!(!cut(&"Let me check your calendar for tomorrow. ".repeat(3), 5));
    }

    #[test]
    fn ordinary_listings_are_not_loops() {
        // A month of the same daily event, each dated.
        let month: String = (1..=31).map(|d| format!("- Dec {d}, 09:00: Standup\n")).collect();
        assert!(!cut(&month, 6));
        // The same line under day headings: half the lines.
        let days: String = (1..=20).map(|d| format!("Day {d}:\n- Standup at 09:00\n")).collect();
        assert!(!cut(&days, 6));
        let prose = "I moved the design review to Friday at 10:00 and told the team. \
                     The standup stays at 9:00 every day; nothing else changed this week.";
        assert!(!cut(prose, 4));
        let list: String = (1..=40).map(|i| format!("{i}. Task number {i} for the project\n")).collect();
        assert!(!cut(&list, 9));
    }
}
