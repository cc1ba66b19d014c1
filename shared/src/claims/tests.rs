use super::*;
use crate::entities::OperationAction::{Create, Delete, Update};

fn step(action: OperationAction, name: &str, committed: bool) -> Step {
    Step { action, entity_type: "calendar_event".into(), name: name.into(), committed }
}

/// (kind, action, title) of each mismatch.
fn found(answer: &str, steps: &[Step]) -> Vec<(MismatchKind, OperationAction, Option<String>)> {
    check(answer, steps).into_iter().map(|m| (m.kind, m.action, m.entity_name)).collect()
}

use MismatchKind::{ClaimedNotDone as Claimed, DoneButDenied as Denied};

#[test]
fn a_claimed_change_with_no_write_is_caught() {
    // Issue 40: an update that changed nothing, then "cancelled".
    let steps = [step(Update, "Standup", true)];
    assert_eq!(found("I've cancelled tomorrow's standup only.", &steps), [(Claimed, Delete, None)]);
    assert_eq!(found("Done! I deleted the Standup.", &[]), [(Claimed, Delete, None)]);
    assert_eq!(found("The meeting has been moved to Friday.", &[]), [(Claimed, Update, None)]);
    assert_eq!(found("I booked a table for two.", &[]), [(Claimed, Create, None)]);
    assert_eq!(found("Renamed it to Weekly sync.", &[]), [(Claimed, Update, None)]);
    assert_eq!(found("I've reserved 10:30 for you on Tuesday.", &[]), [(Claimed, Create, None)]);
    // Not a claim: "blocked" is the ontology's edge.
    assert!(found("The launch post is blocked by the security review.", &[]).is_empty());
    // Made, not found: still claims.
    assert_eq!(found("You have been booked for yoga on Wednesday.", &[]), [(Claimed, Create, None)]);
    assert_eq!(found("I have scheduled the review for Tuesday.", &[]), [(Claimed, Create, None)]);
    assert_eq!(found("There is now a review scheduled for Tuesday.", &[]), [(Claimed, Create, None)]);
}

/// The local model's true answers to reads, withdrawn as claims before
/// (issue 40): what is on the calendar, said with a participle.
#[test]
fn what_is_there_said_with_a_participle_claims_nothing() {
    for said in [
        "I see that you have a \"Quarterly planning\" event scheduled for Sunday 13 December 2026 at 11:00 AM.",
        "I can squeeze a two-hour workshop into Friday afternoon, but there is already a budget review scheduled for that time.",
        "You've got the dentist booked for 9:00 tomorrow.",
        "You're booked solid on Friday.",
    ] {
        assert!(found(said, &[]).is_empty(), "{said}");
    }
}

#[test]
fn a_claim_the_steps_show_stands() {
    let steps = [step(Delete, "Standup", true)];
    assert!(found("I've cancelled tomorrow's Standup.", &steps).is_empty());
    assert!(found("Standup was deleted.", &steps).is_empty());
    let steps = [step(Create, "Dentist", true), step(Update, "Gym", true)];
    assert!(found("I created Dentist and moved Gym to 7pm.", &steps).is_empty());
    assert!(found("Added the dentist appointment for Tuesday at 10.", &steps).is_empty());
}

#[test]
fn a_committed_change_the_answer_denies_is_caught() {
    let steps = [step(Delete, "Standup", true)];
    assert_eq!(found("I couldn't delete the Standup.", &steps), [(Denied, Delete, Some("Standup".into()))]);
    assert_eq!(found("Sorry, I was unable to cancel it.", &steps), [(Denied, Delete, Some("Standup".into()))]);
    assert_eq!(found("No changes were made to your calendar.", &steps), [(Denied, Delete, Some("Standup".into()))]);
    assert_eq!(found("Standup has not been removed.", &steps), [(Denied, Delete, Some("Standup".into()))]);
}

#[test]
fn partial_success_is_judged_per_title() {
    let steps = [step(Create, "Gym", true), step(Create, "Lunch with Sam", false)];
    // Both claimed: the failed one is caught, the committed one stands.
    assert_eq!(
        found("I've created Gym and Lunch with Sam.", &steps),
        [(Claimed, Create, Some("Lunch with Sam".into()))]
    );
    assert_eq!(
        found("Created: Gym, Lunch with Sam.", &steps),
        [(Claimed, Create, Some("Lunch with Sam".into()))],
        "a list takes its verb"
    );
    // Reported truthfully: nothing to say.
    assert!(found("I created Gym, but Lunch with Sam could not be created.", &steps).is_empty());
    assert!(found("I created Gym and couldn't create Lunch with Sam: the slot is taken.", &steps).is_empty());
    // Denying the one that committed.
    assert_eq!(found("I could not create Gym.", &steps), [(Denied, Create, Some("Gym".into()))]);
}

#[test]
fn a_title_with_and_or_a_comma_stays_whole() {
    let steps = [step(Create, "Research and Development, weekly", false)];
    assert_eq!(
        found("I've added Research and Development, weekly.", &steps),
        [(Claimed, Create, Some("Research and Development, weekly".into()))]
    );
}

#[test]
fn offers_questions_plans_and_quotes_claim_nothing() {
    for answer in [
        "I can cancel it if you want.",
        "Should I delete the Standup?",
        "Do you want it deleted?",
        "¿Quieres que lo elimine?",
        "You asked me to cancel tomorrow's standup.",
        "You said it should be moved to Friday.",
        "I will create the event once you approve.",
        "Once you approve, the standup will be deleted.",
        "It's waiting for your approval.",
        "If you'd like it rescheduled, tell me when.",
        "Would you like me to book a room?",
        "Your scheduled meetings tomorrow: Standup at 9, Review at 11.",
        "Here is the updated list of your events.",
        "I'm going to move it to Friday.",
    ] {
        assert_eq!(found(answer, &[]), [], "{answer}");
    }
}

#[test]
fn a_pending_write_is_not_done() {
    // The call waits for approval: no step. Saying so is truthful; "created" is not.
    assert!(found("The event is ready: approve it and I will create it.", &[]).is_empty());
    assert_eq!(found("I created the event Dentist.", &[]), [(Claimed, Create, None)]);
}

#[test]
fn a_failure_reported_as_failure_is_no_mismatch() {
    let steps = [step(Delete, "Standup", false)];
    assert!(found("I couldn't delete Standup: the calendar refused.", &steps).is_empty());
    assert!(found("Deleting the Standup failed; nothing was changed.", &steps).is_empty());
    assert_eq!(found("I deleted the Standup.", &steps), [(Claimed, Delete, Some("Standup".into()))]);
}

#[test]
fn german_spanish_and_french_participles_are_read() {
    let none: [Step; 0] = [];
    assert_eq!(found("Ich habe den Termin gelöscht.", &none), [(Claimed, Delete, None)]);
    assert_eq!(found("Der Termin wurde auf Freitag verschoben.", &none), [(Claimed, Update, None)]);
    assert_eq!(found("He eliminado la reunión de mañana.", &none), [(Claimed, Delete, None)]);
    assert_eq!(found("La reunión ha sido cancelada.", &none), [(Claimed, Delete, None)]);
    assert_eq!(found("J'ai supprimé la réunion.", &none), [(Claimed, Delete, None)]);
    assert_eq!(found("L'événement a été créé.", &none), [(Claimed, Create, None)]);
    // Adjectives and offers say nothing.
    assert!(found("Tus eventos programados para mañana son dos.", &none).is_empty());
    assert!(found("Soll ich den Termin löschen?", &none).is_empty());
    assert!(found("Si quieres, puedo cancelar la reunión.", &none).is_empty());
    // Denials.
    let steps = [step(Delete, "Standup", true)];
    assert_eq!(found("Ich konnte Standup nicht löschen.", &steps), [(Denied, Delete, Some("Standup".into()))]);
    assert_eq!(found("No pude eliminar Standup.", &steps), [(Denied, Delete, Some("Standup".into()))]);
    assert_eq!(found("Je n'ai pas supprimé Standup.", &steps), [(Denied, Delete, Some("Standup".into()))]);
    assert!(found("Ich habe Standup gelöscht.", &steps).is_empty());
}

#[test]
fn each_mismatch_is_reported_once_with_its_words() {
    let got = check("I deleted the standup. Yes, it is deleted!", &[]);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].quote, "i deleted the standup");
    assert!(got[0].note.contains("deletion"), "{}", got[0].note);
}

#[test]
fn the_note_for_the_model_says_what_committed() {
    let steps = [step(Update, "Standup", true), step(Delete, "Gym", false)];
    let mismatches = check("I've cancelled the standup.", &steps);
    let note = note_for_model(&mismatches, &steps);
    assert!(note.contains("Committed this turn: change of calendar_event \"Standup\""), "{note}");
    assert!(note.contains("Failed this turn: deletion of calendar_event \"Gym\""), "{note}");
    assert!(note.contains("i've cancelled the standup"), "{note}");
}

#[test]
fn a_long_answer_is_read_at_its_ends() {
    let middle = "Standup at 9:00 every day.\n".repeat(2_000);
    let claim = format!("I deleted the Gym.\n{middle}");
    assert_eq!(found(&claim, &[]), [(Claimed, Delete, None)], "its start");
    let claim = format!("{middle}I deleted the Gym.");
    assert_eq!(found(&claim, &[]), [(Claimed, Delete, None)], "its end");
    let buried = format!("{middle}I deleted the Gym.\n{middle}");
    assert!(found(&buried, &[]).is_empty(), "its middle is not read");
}
