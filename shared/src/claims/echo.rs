//! An answer that answers nothing: after a tool ran this turn, the model's
//! final text only repeats the user's question ("What is on my calendar
//! tomorrow?") or a tool's description back — what the local model did
//! after a successful list or free-time call (issue 40). Deterministic, by
//! the longest run of words the answer shares with either; silent when the
//! answer adds more than a few words of its own.

use super::{ClaimMismatch, MismatchKind};
use crate::entities::OperationAction;

/// At most this many words of an answer are compared (an echo is short).
const MAX_WORDS: usize = 200;

/// What the answer repeated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Echoed {
    Question,
    ToolDescription,
    /// A tool call described in words, in answer to a question (asked again
    /// in words, without tools: a read never turns into a write).
    Call,
    /// A heading of the app's own prompt blocks: the local model began its
    /// answer with "The next 7 days, each with its events:" and went on
    /// inventing dates in that shape.
    Prompt,
}

/// The headings the app's prompt blocks open with: words no answer of the
/// model's own says (matched lowercased, digits left out).
const PROMPT_HEADINGS: &[&str] = &[
    "days, each with its events:",
    "today's events, then the dates of the coming days",
    "read from the user's last message by the server",
    "calendar: now is",
    "context (json)",
    "[a check by the app",
];

/// The mismatch when `answer` only repeats `question` or one of `descriptions`.
pub fn echoed(answer: &str, question: &str, descriptions: &[&str]) -> Option<(Echoed, ClaimMismatch)> {
    let lower = answer.to_lowercase();
    if PROMPT_HEADINGS.iter().any(|h| lower.contains(h)) {
        return Some((Echoed::Prompt, no_answer(answer, "No answer: the reply repeated the app's own context.")));
    }
    let a = words(answer);
    if a.is_empty() || a.len() > MAX_WORDS {
        return None;
    }
    let q = words(question);
    let run = longest_run(&a, &q);
    // Nearly all of the question in a row, and hardly a word besides it: "You
    // are free on Friday afternoon" to "Am I free on Friday afternoon?"
    // shares four words of six, and answers.
    let question = q.len() >= 3 && run >= 3 && run * 5 >= q.len() * 4 && a.len() - run <= 2;
    let description = !question
        && descriptions.iter().any(|d| {
            let run = longest_run(&a, &words(d));
            run >= 8 && run * 3 >= a.len() * 2
        });
    let what = match (question, description) {
        (true, _) => Echoed::Question,
        (_, true) => Echoed::ToolDescription,
        _ => return None,
    };
    let note = match what {
        Echoed::Question => "No answer: the reply repeated the question.",
        _ => "No answer: the reply repeated a tool's description.",
    };
    Some((what, no_answer(answer, note)))
}

fn no_answer(answer: &str, note: &str) -> ClaimMismatch {
    ClaimMismatch {
        kind: MismatchKind::NoAnswer,
        action: OperationAction::Read,
        entity_name: None,
        quote: answer.trim().chars().take(120).collect(),
        note: note.into(),
    }
}

/// The user's message asks for a change (English verbs of one): only then
/// is a described call asked for as a call; otherwise the model is asked to
/// answer in words (the local model, asked "which meetings are coming up?",
/// described a booking, and made it when nudged).
pub fn asks_for_a_change(message: &str) -> bool {
    const ACTS: &[&str] = &[
        "book",
        "block",
        "schedule",
        "add",
        "create",
        "put",
        "set up",
        "sign me up",
        "move",
        "push",
        "shift",
        "cancel",
        "delete",
        "remove",
        "rename",
        "change",
        "update",
        "reschedule",
        "make",
        "mark",
        "link",
        "drop",
        "take",
        "plan",
        "write",
        "note",
        "record",
        "save",
        "clear",
        "skip",
        "postpone",
        "call off",
        "set",
    ];
    let said: Vec<String> = message
        .split(|c: char| !c.is_alphanumeric() && c != '\'')
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    let w = format!(" {} ", said.join(" "));
    ACTS.iter()
        .any(|a| w.contains(&format!(" {a} ")) || w.contains(&format!(" {a}s ")) || w.contains(&format!(" {a}ed ")))
}

/// What the model is told when it described a call instead of making it.
pub fn call_note(tool: &str) -> String {
    format!(
        "[A check by the app, not the user's words] Your answer above described a call to {tool} instead of \
         making it. If the user asked for that, make the call now; otherwise answer without naming tools."
    )
}

/// The mismatch a described call is.
pub fn described(tool: &str, answer: &str) -> ClaimMismatch {
    no_answer(answer, &format!("No answer: the reply described a call to {tool} instead of making it."))
}

/// What the model is told when every call of its round was refused and it gave up.
pub fn retry_note(tool: &str, error: &str) -> String {
    format!(
        "[A check by the app, not the user's words] Your call to {tool} was refused: {error}. Make the call \
         again now with that fixed; do not describe it."
    )
}

/// The mismatch an answer that gave up after a refused call is.
pub fn gave_up(tool: &str, answer: &str) -> ClaimMismatch {
    no_answer(
        answer,
        &format!("No answer: the reply gave up after {tool} was refused, without trying the fix it names."),
    )
}

/// What the model is told when asked again.
pub fn note_for_model(what: Echoed) -> String {
    let repeated = match what {
        Echoed::Question => "repeated the user's question",
        Echoed::ToolDescription => "repeated a tool's description",
        Echoed::Prompt => "repeated the app's context block (the user does not see it)",
        Echoed::Call => "described a tool call",
    };
    format!(
        "[A check by the app, not the user's words] Your answer above {repeated} instead of answering it. \
         Answer the user's question now, briefly and in plain words, from the tool results and the context above. \
         Do not call tools."
    )
}

/// The words of `s`, lowercased, the speaker's pronouns turned to the
/// listener's: "Is there anything on your plate this week?" repeats
/// "Anything on my plate this week?".
fn words(s: &str) -> Vec<String> {
    s.split(|c: char| !c.is_alphanumeric() && c != '\'')
        .filter(|w| !w.is_empty())
        .map(|w| {
            let w = w.to_lowercase();
            match w.as_str() {
                "i" | "me" => "you".to_string(),
                "my" => "your".to_string(),
                "mine" => "yours".to_string(),
                "am" => "are".to_string(),
                "i'm" => "you're".to_string(),
                _ => w,
            }
        })
        .collect()
}

/// The second answer only repeats the note it was asked again with.
pub fn repeats_note(answer: &str, note: &str) -> bool {
    let a = words(answer);
    let run = longest_run(&a, &words(note));
    !a.is_empty() && run >= 4 && run * 3 >= a.len() * 2
}

/// The tool an answer describes calling instead of calling it ("use the
/// `create_calendar_event` function with start …", "create_task({...})"):
/// a tool's name, and a call's shape beside it.
pub fn described_call<'a>(answer: &str, tools: &[&'a str]) -> Option<&'a str> {
    let lower = answer.to_lowercase();
    tools.iter().copied().find(|name| {
        lower.match_indices(name).any(|(at, _)| {
            let before = &lower[..at];
            let after = &lower[at + name.len()..];
            let whole = !before.ends_with(|c: char| c.is_alphanumeric() || c == '_')
                && !after.starts_with(|c: char| c.is_alphanumeric() || c == '_');
            let near: String = after.chars().take(40).collect();
            let shaped = after.trim_start_matches(['`', '*']).starts_with('(')
                || lower.contains('{')
                || ["function", "tool", "call", "with the", "with start", "parameters", "arguments"].iter().any(|w| {
                    near.contains(w) || before.ends_with(&format!("{w} ")) || before.ends_with(&format!("{w} `"))
                });
            whole && shaped
        })
    })
}

/// The longest run of consecutive words `a` and `b` share.
fn longest_run(a: &[String], b: &[String]) -> usize {
    let mut best = 0;
    let mut prev = vec![0usize; b.len() + 1];
    for x in a {
        let mut row = vec![0usize; b.len() + 1];
        for (j, y) in b.iter().enumerate() {
            if x == y {
                row[j + 1] = prev[j] + 1;
                best = best.max(row[j + 1]);
            }
        }
        prev = row;
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIST: &str = "List everything on the user's calendar over some days: give `range` (`today`, \
        `this_week`, …) or `from` and `to`.";

    #[test]
    fn a_repeated_question_or_description_is_no_answer() {
        let q = "What is on my calendar tomorrow?";
        for echo in [
            "What is on my calendar tomorrow?",
            "what is on my calendar tomorrow",
            "Sure! What is on my calendar tomorrow?",
        ] {
            let (what, m) = echoed(echo, q, &[LIST]).expect(echo);
            assert_eq!((what, m.kind), (Echoed::Question, MismatchKind::NoAnswer), "{echo}");
        }
        let parroted = "List everything on the user's calendar over some days: give range today this_week";
        assert_eq!(echoed(parroted, q, &[LIST]).map(|e| e.0), Some(Echoed::ToolDescription));
    }

    #[test]
    fn an_answer_that_says_something_is_left_alone() {
        let q = "Am I free on Friday afternoon?";
        for fine in [
            "You are free on Friday afternoon.",
            "No: on Friday afternoon you have the Budget review at 14:00.",
            "Tomorrow: Dentist 09:00–10:00 and Team sync 14:00.",
            "Yes.",
            "",
        ] {
            assert!(echoed(fine, q, &[LIST]).is_none(), "{fine}");
        }
        // A short question is not a pattern to find.
        assert!(echoed("Hi there", "Hi", &[]).is_none());
    }

    #[test]
    fn the_apps_own_block_headings_are_no_answer() {
        let said = "The next 7 days, each with its events:\n- Monday 2026-12-14 (today): no events";
        assert_eq!(echoed(said, "What is coming up?", &[]).map(|e| e.0), Some(Echoed::Prompt));
        let fine = "Over the next days you have the Launch rehearsal (Tue 10:00) and the dentist (Tue 15:00).";
        assert!(echoed(fine, "What is coming up?", &[]).is_none());
    }

    #[test]
    fn the_question_back_in_the_listeners_words_is_an_echo() {
        let q = "Anything on my plate this week?";
        let (what, _) = echoed("Is there anything on your plate this week?", q, &[]).expect("an echo");
        assert_eq!(what, Echoed::Question);
        assert!(echoed("Your week has Quarterly planning on Sunday at 11:00.", q, &[]).is_none());
    }

    #[test]
    fn a_change_asked_for_is_told_from_a_question() {
        for asks in [
            "Next Tuesday morning, find an hour and block it for interview prep.",
            "Move my 3pm to 4pm",
            "Sign me up for yoga",
            "cancel tomorrow's standup",
        ] {
            assert!(asks_for_a_change(asks), "{asks}");
        }
        for asks in [
            "Only the Launch project: which of its meetings are coming up in the next few days?",
            "Anything on my plate this week?",
            "Am I free on Friday afternoon?",
        ] {
            assert!(!asks_for_a_change(asks), "{asks}");
        }
    }

    #[test]
    fn a_call_described_in_words_is_found_and_a_mention_is_not() {
        let tools = ["create_calendar_event", "find_free_time", "list_calendar_events"];
        for said in [
            "To block the hour, use the `create_calendar_event` function with start 2026-12-08T10:30.",
            "create_calendar_event({\"title\": \"Interview prep\"})",
            "I will call create_calendar_event with the start at 10:30.",
        ] {
            assert_eq!(described_call(said, &tools), Some("create_calendar_event"), "{said}");
        }
        for said in [
            "Booked: Interview prep, Tue 8 Dec 10:30–11:30.",
            "I can list your calendar, find free time and book events.",
            "The create_calendar_events_extra thing is not a tool.",
        ] {
            assert_eq!(described_call(said, &tools), None, "{said}");
        }
        assert!(repeats_note(
            "Committed this turn: nothing. Failed this turn: nothing.",
            "[A check by the app] … Committed this turn: nothing.\nFailed this turn: nothing.\nAnswer the user again"
        ));
        assert!(!repeats_note(
            "Nothing was booked: the workshop would clash with the Budget review.",
            "Committed this turn: nothing.\nFailed this turn: nothing."
        ));
    }
}
