//! Does the answer keep its word? [`check`] compares what a final answer
//! says was done with the write steps this turn's stream showed (the
//! `operation` events' ends: committed or failed), deterministically and
//! without a second model — the Agent State spec's `doesOutcomeMatch`
//! turned on the answer itself (AGENT_STATE_SPEC §8: ids and titles where
//! there are any, the kind of change where there are not, silence where
//! the words do not say).
//!
//! Contract:
//! - a clause that reports a change (create/add/book, move/rename/change,
//!   cancel/delete/remove — English, with German, Spanish and French
//!   participles) with no committed step of that kind (of that title, when
//!   a step's title is named) is [`MismatchKind::ClaimedNotDone`];
//! - a clause that denies a change that committed ("could not delete X",
//!   "no changes were made") is [`MismatchKind::DoneButDenied`];
//! - questions, offers, conditions, plans ("I will create … once you
//!   approve") and quotes of the user report nothing; a failed step the
//!   answer reports as failed is no mismatch. When unsure, it is silent:
//!   a false alarm on a true answer costs more than a missed one;
//! - a long answer is read at its ends ([`READ_CHARS`]), so the check stays
//!   cheap whatever the answer's size.

pub mod echo;
pub mod shown;
#[cfg(test)]
mod tests;
mod vocab;

use crate::entities::OperationAction;
use serde::{Deserialize, Serialize};
use vocab::{LANGS, NEGATION_WINDOW};

/// One write step the stream showed this turn: an `operation` event's end
/// (made by `sse::claim_step`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// `create`, `update` or `delete`.
    pub action: OperationAction,
    pub entity_type: String,
    pub name: String,
    /// It succeeded (`success`), rather than failed (`error`).
    pub committed: bool,
}

/// An answer's word that the turn's steps contradict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ClaimMismatch {
    pub kind: MismatchKind,
    /// The kind of change: `create`, `update` or `delete`.
    pub action: OperationAction,
    /// The step's title, when the answer named one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entity_name: Option<String>,
    /// The words of the answer that claim or deny it.
    pub quote: String,
    /// The mismatch in a sentence, for the user.
    pub note: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum MismatchKind {
    /// The answer says it was done; no tool committed it.
    ClaimedNotDone,
    /// A tool committed it; the answer says it was not done.
    DoneButDenied,
    /// After a tool ran, the answer only repeated the question or a tool's
    /// description ([`echo`]): it answered nothing.
    NoAnswer,
    /// The user asked about days whose events the app showed the model; the
    /// answer named none (or too few) of them ([`shown`]).
    LeftOut,
}

/// What one clause of the answer says about one kind of change.
#[derive(Debug, Clone)]
struct Said {
    action: OperationAction,
    /// A denial ("was not deleted"), rather than a report.
    denied: bool,
}

/// How much of an answer is read: its first and its last half of this many
/// characters. What an answer says it did is said at its start or its end;
/// a long answer's middle (a listing, a document) is not read word by word.
pub const READ_CHARS: usize = 8_000;

/// The mismatches between `answer` and `steps`, each once, in the answer's order.
pub fn check(answer: &str, steps: &[Step]) -> Vec<ClaimMismatch> {
    let titles = Titles::of(steps);
    let text = titles.mark(&ends(answer).to_lowercase().replace(['’', '‘'], "'"));
    let mut found = Vec::new();
    if steps.iter().any(|s| s.committed) && vocab::NOTHING_CHANGED.iter().any(|p| text.contains(p)) {
        for s in steps.iter().filter(|s| s.committed) {
            found.push(mismatch(MismatchKind::DoneButDenied, s.action, Some(&s.name), "no changes"));
        }
    }
    for (sentence, question) in sentences(&text) {
        if question {
            continue;
        }
        for (clause, said) in clauses(sentence) {
            let named = titles.named(clause);
            let quote = titles.unmark(clause);
            found.extend(judge(&said, &named, steps, quote.trim()));
        }
    }
    let mut seen = Vec::new();
    found.retain(|m| {
        let key = (m.kind, m.action, m.entity_name.clone());
        let new = !seen.contains(&key);
        seen.push(key);
        new
    });
    found
}

/// The answer, or its first and last [`READ_CHARS`] / 2 characters, split
/// as sentences.
fn ends(answer: &str) -> std::borrow::Cow<'_, str> {
    let n = answer.chars().count();
    if n <= READ_CHARS {
        return answer.into();
    }
    let head: String = answer.chars().take(READ_CHARS / 2).collect();
    let tail: String = answer.chars().skip(n - READ_CHARS / 2).collect();
    format!("{head}\n{tail}").into()
}

/// What one clause's word means against the steps.
fn judge(said: &[Said], named: &[&str], steps: &[Step], quote: &str) -> Vec<ClaimMismatch> {
    let mut out = Vec::new();
    for s in said {
        let of_kind: Vec<&Step> = steps.iter().filter(|st| st.action == s.action).collect();
        let committed = |name: &str| of_kind.iter().any(|st| st.committed && st.name.to_lowercase() == name);
        let stepped: Vec<&&str> =
            named.iter().filter(|n| of_kind.iter().any(|st| st.name.to_lowercase() == **n)).collect();
        let title = |n: &str| of_kind.iter().find(|st| st.name.to_lowercase() == n).map(|st| st.name.clone());
        if s.denied {
            // A denial of a named step that committed; unnamed, of the one
            // kind of change that only committed (a failed one is what it
            // reports).
            for n in stepped.iter().filter(|n| committed(n)) {
                out.push(mismatch(MismatchKind::DoneButDenied, s.action, title(n).as_deref(), quote));
            }
            if named.is_empty() && !of_kind.is_empty() && of_kind.iter().all(|st| st.committed) {
                out.push(mismatch(MismatchKind::DoneButDenied, s.action, Some(&of_kind[0].name), quote));
            }
        } else if !stepped.is_empty() {
            // Named steps: each must have committed.
            for n in stepped.iter().filter(|n| !committed(n)) {
                out.push(mismatch(MismatchKind::ClaimedNotDone, s.action, title(n).as_deref(), quote));
            }
        } else if !of_kind.iter().any(|st| st.committed) {
            // No step of this kind committed: whatever it names, it was not done.
            out.push(mismatch(MismatchKind::ClaimedNotDone, s.action, None, quote));
        }
    }
    out
}

fn mismatch(kind: MismatchKind, action: OperationAction, name: Option<&str>, quote: &str) -> ClaimMismatch {
    let what = match name {
        Some(n) => format!("{} “{n}”", noun(action)),
        None => noun(action).to_string(),
    };
    let note = match kind {
        MismatchKind::ClaimedNotDone => format!("Not done: no tool confirmed a {what} this turn."),
        MismatchKind::DoneButDenied => format!("Done after all: the {what} was committed this turn."),
        MismatchKind::NoAnswer => "No answer: the reply only repeated the question.".to_string(),
        MismatchKind::LeftOut => "The answer left out what the calendar shows.".to_string(),
    };
    ClaimMismatch { kind, action, entity_name: name.map(str::to_string), quote: quote.to_string(), note }
}

/// A kind of change as a noun.
pub fn noun(action: OperationAction) -> &'static str {
    match action {
        OperationAction::Create => "creation",
        OperationAction::Update => "change",
        OperationAction::Delete => "deletion",
        _ => "step",
    }
}

/// The answer's sentences, each with whether it asks.
fn sentences(text: &str) -> Vec<(&str, bool)> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, c) in text.char_indices() {
        if matches!(c, '.' | '!' | '?' | ';' | '\n') {
            let s = &text[start..i];
            out.push((s, c == '?' || s.trim_start().starts_with('¿')));
            start = i + c.len_utf8();
        }
    }
    let rest = &text[start..];
    out.push((rest, rest.trim_start().starts_with('¿')));
    out.retain(|(s, _)| !s.trim().is_empty());
    out
}

/// A sentence's clauses (split at "and", "but", commas …), each with what it
/// says; a clause without a verb (an item of a list) takes the verb of the
/// clause before it, or else after it.
fn clauses(sentence: &str) -> Vec<(&str, Vec<Said>)> {
    let mut parts: Vec<&str> = vec![sentence];
    for joiner in vocab::JOINERS {
        parts = parts.iter().flat_map(|p| p.split(joiner)).collect();
    }
    let mut out: Vec<(&str, Option<Vec<Said>>)> = parts.into_iter().map(|p| (p, said(p))).collect();
    let mut last: Option<Vec<Said>> = None;
    for (_, s) in out.iter_mut() {
        match s {
            Some(s) => last = Some(s.clone()),
            None => *s = last.clone(),
        }
    }
    let mut next: Option<Vec<Said>> = None;
    for (_, s) in out.iter_mut().rev() {
        match s {
            Some(s) => next = Some(s.clone()),
            None => *s = next.clone(),
        }
    }
    out.into_iter().filter_map(|(p, s)| Some((p, s?))).collect()
}

/// What a clause says, `None` when it has no verb of a change; a clause
/// that does not report (an offer, a condition …) says nothing.
fn said(clause: &str) -> Option<Vec<Said>> {
    let words: Vec<&str> =
        clause.split(|c: char| !(c.is_alphanumeric() || c == '\'')).filter(|w| !w.is_empty()).collect();
    let padded = format!(" {} ", words.join(" "));
    let mut found = Vec::new();
    for (i, w) in words.iter().enumerate() {
        for lang in LANGS {
            let negated = || {
                let before = &words[i.saturating_sub(NEGATION_WINDOW)..i];
                before.iter().any(|b| lang.negations.iter().any(|n| vocab::matches(b, n)))
            };
            if let Some((_, action)) = lang.done.iter().find(|(f, _)| vocab::matches(w, f)) {
                let negated = negated();
                let adjective = i > 0 && lang.determiners.contains(&words[i - 1]);
                let before = format!(" {} ", words[..i].join(" ").to_lowercase());
                let made = words[i.saturating_sub(4)..i].iter().any(|b| ["been", "now", "just"].contains(b));
                let state = !made && lang.states.iter().any(|p| before.contains(p));
                let adjective = adjective || state;
                let helped = lang.auxiliaries.is_empty() || words[..i].iter().any(|b| lang.auxiliaries.contains(b));
                if !adjective && (helped || negated) {
                    found.push(Said { action: *action, denied: negated });
                }
            } else if let Some((_, action)) = lang.plain.iter().find(|(f, _)| vocab::matches(w, f)) {
                if negated() {
                    found.push(Said { action: *action, denied: true });
                }
            }
        }
    }
    if found.is_empty() {
        return None;
    }
    // An offer or a plan reports nothing done, but "could not delete" still
    // denies; a condition ("if it was not deleted") does neither.
    if vocab::CONDITIONS.iter().any(|p| padded.contains(p)) {
        return Some(vec![]);
    }
    if vocab::NOT_A_REPORT.iter().any(|p| padded.contains(p)) {
        found.retain(|s| s.denied);
    }
    Some(found)
}

/// The steps' titles, marked in the answer so that a title holding "and"
/// or a comma stays whole when clauses split.
struct Titles(Vec<String>);

impl Titles {
    fn of(steps: &[Step]) -> Titles {
        let mut names: Vec<String> =
            steps.iter().map(|s| s.name.to_lowercase()).filter(|n| n.chars().count() >= 3).collect();
        names.sort_by_key(|n| std::cmp::Reverse(n.len()));
        names.dedup();
        Titles(names)
    }

    fn mark(&self, text: &str) -> String {
        let mut text = text.to_string();
        for (i, n) in self.0.iter().enumerate() {
            text = text.replace(n.as_str(), &format!("\u{E000}{i}\u{E001}"));
        }
        text
    }

    fn named(&self, clause: &str) -> Vec<&str> {
        (0..self.0.len())
            .filter(|i| clause.contains(&format!("\u{E000}{i}\u{E001}")))
            .map(|i| self.0[i].as_str())
            .collect()
    }

    fn unmark(&self, clause: &str) -> String {
        let mut text = clause.to_string();
        for (i, n) in self.0.iter().enumerate() {
            text = text.replace(&format!("\u{E000}{i}\u{E001}"), n);
        }
        text
    }
}

/// What the model is told when its answer did not match the log: the
/// mismatches, what did commit, and to answer again with only that.
pub fn note_for_model(mismatches: &[ClaimMismatch], steps: &[Step]) -> String {
    let mut note = String::from(
        "[A check by the app, not the user's words] Your answer above does not match what the tools did in this turn:\n",
    );
    for m in mismatches {
        note.push_str(&format!("- \"{}\": {}\n", m.quote, m.note));
    }
    let done: Vec<String> = steps
        .iter()
        .filter(|s| s.committed)
        .map(|s| format!("{} of {} \"{}\"", noun(s.action), s.entity_type, s.name))
        .collect();
    let failed: Vec<String> = steps
        .iter()
        .filter(|s| !s.committed)
        .map(|s| format!("{} of {} \"{}\"", noun(s.action), s.entity_type, s.name))
        .collect();
    let list = |v: &[String]| if v.is_empty() { "nothing".to_string() } else { v.join("; ") };
    note.push_str(&format!("Committed this turn: {}.\nFailed this turn: {}.\n", list(&done), list(&failed)));
    note.push_str(
        "Answer the user again, briefly, saying only what was committed and what was not done. Do not call tools.",
    );
    note
}
