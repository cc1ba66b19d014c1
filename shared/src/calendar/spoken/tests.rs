//! The reader on sentences a user types, none of them the eval's: each
//! value checked against the calendar arithmetic done by hand for Monday
//! 2026-12-07, 17:30.

use super::*;

fn now() -> NaiveDateTime {
    NaiveDate::from_ymd_opt(2026, 12, 7).unwrap().and_hms_opt(17, 30, 0).unwrap()
}

/// `quote = value` lines, as the block writes them.
fn lines(message: &str) -> Vec<String> {
    read(message, now()).iter().map(|r| format!("{} = {}", r.quote, r.value)).collect()
}

fn has(message: &str, want: &str) {
    let got = lines(message);
    assert!(got.iter().any(|l| l == want), "{message:?}: want {want:?} in {got:#?}");
}

fn lacks(message: &str, unwanted: &str) {
    let got = lines(message);
    assert!(!got.iter().any(|l| l.contains(unwanted)), "{message:?}: {unwanted:?} in {got:#?}");
}

#[test]
fn clock_times_in_words_and_figures() {
    has("dinner with Sam at quarter to eight", "quarter to eight = 19:45");
    has("call mum at half past four", "half past four = 16:30 (no am/pm said: assumed)");
    has("tea at half five", "half five = 17:30 (no am/pm said: assumed)");
    lacks("half an hour later", "= 0");
    has("gym at 6:15am", "6:15am = 06:15");
    has("dentist 14:40", "14:40 = 14:40");
    has("lunch at noon on thursday", "noon = 12:00");
    has("wake-up call at seven in the morning", "at seven = 07:00");
    has("drinks at 9 in the evening", "at 9 = 21:00");
    has("the flight lands at 11 p.m.", "11 p.m. = 23:00");
    has("quarter past ten, tomorrow", "quarter past ten = 10:15 (no am/pm said: assumed)");
    has("standup at 9 o'clock", "9 o'clock = 09:00 (no am/pm said: assumed)");
    // Numbers that are not times.
    lacks("book a table for 4 people at 8pm", "16:00");
    lacks("remind me in 2 weeks", "14:00");
    lacks("the budget is $12.50", "12:50");
}

#[test]
fn moving_from_one_time_to_another_gives_both_and_no_start() {
    let got = lines("push my 2pm on friday to 5pm please");
    assert!(got.contains(&"2pm = 14:00".to_string()) && got.contains(&"5pm = 17:00".to_string()), "{got:#?}");
    assert!(got.iter().any(|l| l == "on friday = Friday 2026-12-11 (\"range\": \"friday\")"), "{got:#?}");
    assert!(!got.iter().any(|l| l.starts_with("when")), "{got:#?}");
    // A move: the time said last is the new start.
    assert!(got.contains(&"the new time = \"start\": \"2026-12-11T17:00\" (Friday)".to_string()), "{got:#?}");
    has("bring my noon meeting tomorrow forward to 11", "the new time = \"start\": \"2026-12-08T11:00\" (Tuesday)");
    // A sentence's full stop is not the time's; a day said twice is one line.
    let got = lines("Tomorrow it moves to 4pm. Only tomorrow.");
    assert_eq!(
        got,
        [
            "4pm = 16:00",
            "tomorrow = Tuesday 2026-12-08 (\"range\": \"tomorrow\")",
            "moves = a move: update_calendar_event with the new \"start\"",
            "only tomorrow = \"scope\": \"instance\" (that occurrence only: give its \"instance\", the series stays)",
            "when = \"start\": \"2026-12-08T16:00\" (Tuesday)"
        ]
    );
}

#[test]
fn days_are_dates_seen_from_today() {
    has(
        "lunch the day after tomorrow at 1",
        "the day after tomorrow = Wednesday 2026-12-09 (\"range\": \"wednesday\")",
    );
    has("anything tomorrow?", "tomorrow = Tuesday 2026-12-08 (\"range\": \"tomorrow\")");
    // "next Monday" said on a Monday is a week on; a plain "Monday" is today.
    has("meet next monday", "next monday = Monday 2026-12-14");
    has("what's on monday", "on monday = Monday 2026-12-07 (\"range\": \"today\")");
    has("how does next week look", "next week = Monday 2026-12-14 to Sunday 2026-12-20 (\"range\": \"next_week\")");
    has(
        "and the week after this one?",
        "the week after this one = Monday 2026-12-14 to Sunday 2026-12-20 (\"range\": \"next_week\")",
    );
    has("plans for this weekend", "this weekend = Saturday 2026-12-12 to Sunday 2026-12-13");
    has("the week after next", "the week after next = Monday 2026-12-21 to Sunday 2026-12-27");
    has("party on 3 January", "3 january = Sunday 2027-01-03");
    has("party on Dec 24th", "dec 24th = Thursday 2026-12-24");
    has("review 2027-02-01 at 10", "2027-02-01 = Monday 2027-02-01");
    has(
        "over the next few days",
        "next few days = Monday 2026-12-07 to Sunday 2026-12-13 (\"range\": \"next_7_days\")",
    );
    lacks("what did I do last friday", "friday");
}

#[test]
fn one_day_and_one_time_make_the_start() {
    has("set up a 45-minute call with Ana on Thursday at 3", "when = \"start\": \"2026-12-10T15:00\" (Thursday)");
    has("set up a 45-minute call with Ana on Thursday at 3", "45-minute = \"duration_minutes\": 45");
    has("block an hour and a half tomorrow at 10am", "an hour and a half = \"duration_minutes\": 90");
    has("a two-hour slot", "two-hour = \"duration_minutes\": 120");
    has("half an hour with Lee", "half an hour = \"duration_minutes\": 30");
}

#[test]
fn a_part_of_the_day_without_a_time_is_a_window() {
    has(
        "is thursday morning still open?",
        "morning = 09:00 to 12:00 (\"day_start\": \"09:00\", \"day_end\": \"12:00\")",
    );
    lacks("tuesday afternoon at 3", "day_start");
}

#[test]
fn series_from_a_sentence() {
    // Every working day at a time already past today: from tomorrow.
    has("daily scrum on workdays at 9:15", "on workdays = \"repeat\": {\"every\": \"monday_to_friday\"}");
    has("daily scrum on workdays at 9:15", "the first one = \"start\": \"2026-12-08T09:15\" (Tuesday)");
    // A habit day with a count.
    has(
        "piano lessons on Thursday afternoons at 4, five lessons",
        "on thursday afternoons, five lessons = \"repeat\": {\"every\": \"week\", \"on_days\": [\"thursday\"], \"count\": 5}",
    );
    has("piano lessons on Thursday afternoons at 4, five lessons", "at 4 = 16:00");
    has(
        "piano lessons on Thursday afternoons at 4, five lessons",
        "the first one = \"start\": \"2026-12-10T16:00\" (Thursday)",
    );
    // Every other week, on two days.
    has(
        "1:1 with Jo every other week on tuesdays and fridays at 11",
        "every other week, on tuesdays, fridays = \"repeat\": {\"every\": \"week\", \"interval\": 2, \"on_days\": [\"tuesday\",\"friday\"]}",
    );
    has(
        "fortnightly retro, wednesdays 2pm",
        "fortnightly, wednesdays = \"repeat\": {\"every\": \"week\", \"interval\": 2, \"on_days\": [\"wednesday\"]}",
    );
    has(
        "every other monday at 8:30",
        "every other monday = \"repeat\": {\"every\": \"week\", \"interval\": 2, \"on_days\": [\"monday\"]}",
    );
    has("every other monday at 8:30", "the first one = \"start\": \"2026-12-14T08:30\" (Monday)");
    // For some weeks, until a day.
    has(
        "run club tuesdays 7am for 6 weeks",
        "tuesdays, for 6 weeks = \"repeat\": {\"every\": \"week\", \"on_days\": [\"tuesday\"], \"count\": 6}",
    );
    has(
        "water the plants every day at 8 until december 31",
        "every day, until december 31 = \"repeat\": {\"every\": \"day\", \"until\": \"2026-12-31\"}",
    );
    has("rent reminder monthly on the 1st", "monthly = \"repeat\": {\"every\": \"month\"}");
    // "three times a week" is how often, not how many.
    lacks("swim 3 times a week", "count");
    // No habit, no series.
    lacks("lunch with Kim on friday at 1", "repeat");
}

#[test]
fn the_block_quotes_and_lists_or_is_empty() {
    assert_eq!(block("thanks, that's all", now()), "");
    let b = block("yoga wednesdays at 7 in the evening", now());
    assert!(b.starts_with(HEADING), "{b}");
    assert!(b.contains("\n- \"at 7\" = 19:00\n"), "{b}");
    assert!(b.contains("\"start\": \"2026-12-09T19:00\" (Wednesday)"), "{b}");
}

#[test]
fn what_to_do_and_to_which_occurrences() {
    has("please call off friday's review", "call off = a cancellation: delete_calendar_event");
    has("I won't make the standup tomorrow, just that one", "won't make = a cancellation: delete_calendar_event");
    has(
        "I won't make the standup tomorrow, just that one",
        "just that one = \"scope\": \"instance\" (that occurrence only: give its \"instance\", the series stays)",
    );
    has("push the 1:1 to thursday", "push = a move: update_calendar_event with the new \"start\"");
    has("move gym to 7am from now on", "from now on = \"scope\": \"following\" (it and the later ones)");
    has("rename the whole series to Sync", "the whole series = \"scope\": \"series\" (every occurrence)");
    lacks("what is on tomorrow?", "scope");
    lacks("what is on tomorrow?", "cancellation");
}

/// What a message says of a series, for mending a call's `repeat`
/// (`tools::SeriesSaid`): a count only without an end date; one day and no
/// word of repeating, a one-off; anything else left to the model.
#[test]
fn what_is_said_of_a_series() {
    let said = |m: &str| hear(m, now()).series;
    assert_eq!(said("Book swimming for me on Saturday mornings at 8, four times."), SaidSeries::Count(4));
    assert_eq!(said("Tutoring on Tuesdays at 5pm for 6 weeks"), SaidSeries::Count(6));
    assert_eq!(said("a daily check-in at 9 until December 31"), SaidSeries::Other);
    assert_eq!(said("standup every weekday at 9:30"), SaidSeries::Other);
    assert_eq!(said("lunch with Ana on Friday at noon"), SaidSeries::OneOff);
    assert_eq!(said("Put a dentist appointment in for next Wednesday at 10am, one hour."), SaidSeries::OneOff);
    assert_eq!(said("a weekly review on Friday at 4"), SaidSeries::Other);
    assert_eq!(said("gym on Monday and Thursday evenings, regularly"), SaidSeries::Other);
    // No day it knows (another language): left to the model.
    assert_eq!(said("Zahnarzt jeden Mittwoch um 10"), SaidSeries::Other);
}
