//! An answer that leaves out what the app showed: the user asked about
//! days the server read from the message ("what have I got on December
//! 16?"), the calendar block listed those days' events in front of the
//! model, and the answer names none of them — the local model said "I see
//! no events on December 16" with “Offsite” on that very line (it had
//! listed the wrong day), and "You have a meeting this week" for a week
//! with a named one (issue 40). A claim the calendar does not show, about
//! what is there rather than what was done.
//!
//! Contract: deterministic; an event counts as named when a word of its
//! title of three letters or more (not a generic word such as "meeting")
//! stands in the answer, or its whole title when it has no such word. Up to
//! [`MAX_NAMED`] distinct titles must all be named; beyond, that many.
//! Only questions get a [`Shown`] (the turn decides); a change request is
//! the claims check's.

use super::{ClaimMismatch, MismatchKind};
use crate::entities::OperationAction;

/// What the app showed as the answer to the user's question: the days the
/// message names and their events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shown {
    /// What showed it: "the calendar", "the audit".
    pub source: String,
    /// What was asked about, in words ("“december 16” (Wednesday 16 December)").
    pub asked: String,
    pub items: Vec<ShownItem>,
}

/// One event the answer should name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShownItem {
    pub title: String,
    /// Its project's name: no word of it names the event ("The Launch
    /// project has no meetings" left out “Launch rehearsal”).
    pub project: Option<String>,
    /// As the user reads it: `“Offsite” Wed 16 Dec 10:00–11:00 (project “Launch”)`.
    pub line: String,
}

/// At most this many distinct titles must be named (a busy week is
/// answered by its main events, not read out whole).
pub const MAX_NAMED: usize = 5;

/// Words too common in titles to say which event is meant.
const GENERIC: &[&str] =
    &["meeting", "call", "session", "event", "appointment", "the", "and", "with", "for", "team", "weekly", "daily"];

/// The items `answer` leaves out, when it leaves out too many (empty: it answers).
pub fn left_out<'a>(answer: &str, shown: &'a Shown) -> Vec<&'a ShownItem> {
    let said = words(answer);
    let mut distinct: Vec<&ShownItem> = Vec::new();
    for item in &shown.items {
        if !distinct.iter().any(|d| d.title.eq_ignore_ascii_case(&item.title)) {
            distinct.push(item);
        }
    }
    let (named, missing): (Vec<&ShownItem>, Vec<&ShownItem>) =
        distinct.into_iter().partition(|i| names(&said, &i.title, i.project.as_deref()));
    if named.len() >= MAX_NAMED || missing.is_empty() {
        return vec![];
    }
    missing
}

/// `title` is named in `said` (lowercased words); a word of its project's name does not name it.
fn names(said: &[String], title: &str, project: Option<&str>) -> bool {
    let title = words(title);
    let project = words(project.unwrap_or_default());
    let telling: Vec<&String> =
        title.iter().filter(|w| w.len() >= 3 && !GENERIC.contains(&w.as_str()) && !project.contains(w)).collect();
    let said_word = |w: &str| said.iter().any(|s| s == w || s.strip_suffix('s') == Some(w));
    if telling.is_empty() {
        // "Gym", "1:1 with Sam": the whole title, word for word.
        return !title.is_empty() && said.windows(title.len()).any(|win| win == title.as_slice());
    }
    telling.iter().any(|w| said_word(w))
}

fn words(s: &str) -> Vec<String> {
    s.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect()
}

/// The mismatch for an answer that left `missing` out.
pub fn mismatch(answer: &str, source: &str, missing: &[&ShownItem]) -> ClaimMismatch {
    let titles: Vec<String> = missing.iter().map(|i| format!("“{}”", i.title)).collect();
    ClaimMismatch {
        kind: MismatchKind::LeftOut,
        action: OperationAction::Read,
        entity_name: missing.first().map(|i| i.title.clone()),
        quote: answer.trim().chars().take(120).collect(),
        note: format!("The answer left out what {} shows: {}.", source, titles.join(", ")),
    }
}

/// The note the model is asked again with: the days and their events,
/// in the words an answer would use.
pub fn note_for_model(shown: &Shown) -> String {
    format!(
        "[A check by the app, not the user's words] Your answer above did not name what {} shows for what \
         was asked. {}\nAnswer the user's question now: name each of these by its title, with its day and time \
         where it has one, briefly and in plain words. Do not call tools.",
        shown.source,
        listing(shown)
    )
}

/// The days asked about and their events, one per line (for any note the
/// model is asked again with: an answer withdrawn for another reason did
/// not have them in front of it either).
pub fn listing(shown: &Shown) -> String {
    if shown.items.is_empty() {
        return format!("For {}, {} has nothing.", shown.asked, shown.source);
    }
    let lines: Vec<String> = shown.items.iter().map(|i| format!("- {}", i.line)).collect();
    format!("For {}, {} has:\n{}", shown.asked, shown.source, lines.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(titles: &[&str]) -> Shown {
        let items = titles
            .iter()
            .map(|t| ShownItem { title: t.to_string(), project: None, line: format!("“{t}” Wed 10:00–11:00") })
            .collect();
        Shown { source: "the calendar".into(), asked: "“december 16” (Wednesday 2026-12-16)".into(), items }
    }

    #[test]
    fn an_answer_that_denies_the_shown_events_leaves_them_out() {
        let s = shown(&["Offsite"]);
        assert_eq!(left_out("I see that you have no events on December 16.", &s).len(), 1);
        assert_eq!(left_out("You have a meeting scheduled for this week.", &s).len(), 1);
        assert!(left_out("On December 16 you have the offsite at 10:00.", &s).is_empty());
    }

    #[test]
    fn a_title_is_named_by_a_telling_word_not_a_generic_one() {
        let s = shown(&["Quarterly planning meeting", "Team offsite"]);
        assert!(left_out("Planning on Sunday at 11, and the offsite on Wednesday.", &s).is_empty());
        let missing = left_out("You have a team meeting on Sunday.", &s);
        assert_eq!(missing.len(), 2, "{missing:?}");
        let gym = shown(&["Gym"]);
        assert!(left_out("Gym at 13:00.", &gym).is_empty());
        assert_eq!(left_out("Gymnastics? No.", &gym).len(), 1);
        // No telling word: the whole title, word for word.
        let one = shown(&["1:1"]);
        assert!(left_out("Your 1:1 is at ten.", &one).is_empty());
        assert_eq!(left_out("Just one thing at 1.", &one).len(), 1);
    }

    #[test]
    fn every_title_up_to_the_cap_must_be_named_each_once() {
        let s = shown(&["Launch rehearsal", "Dentist appointment", "Dentist appointment"]);
        let missing = left_out("Tomorrow: the launch rehearsal at 10.", &s);
        assert_eq!(missing.iter().map(|i| i.title.as_str()).collect::<Vec<_>>(), ["Dentist appointment"]);
        let busy = shown(&["Alpha", "Bravo", "Charlie", "Delta", "Echo", "Foxtrot", "Golf"]);
        assert!(left_out("Alpha, Bravo, Charlie, Delta and Echo, among others.", &busy).is_empty());
        assert_eq!(left_out("Alpha and Bravo.", &busy).len(), 5);
    }

    #[test]
    fn a_word_of_the_events_project_does_not_name_it() {
        let mut s = shown(&["Launch rehearsal"]);
        s.items[0].project = Some("Launch".into());
        assert_eq!(left_out("The Launch project has no meetings coming up.", &s).len(), 1);
        assert!(left_out("The Launch rehearsal, tomorrow at 10.", &s).is_empty());
    }

    #[test]
    fn the_note_lists_the_days_and_their_events() {
        let note = note_for_model(&shown(&["Offsite"]));
        assert!(note.contains("Wednesday 2026-12-16") && note.contains("- “Offsite” Wed 10:00–11:00"), "{note}");
    }
}
