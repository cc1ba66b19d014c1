//! The phrases [`super`] reads, one finder per kind: times of day, lengths,
//! days and ranges of days, and a series' cues. Each finder reads the
//! lowercased message and returns what it found with the byte span it
//! covers, so a later finder does not read the same words twice.

use crate::calendar::days::next_on_or_after;
use chrono::{Datelike, Duration, NaiveDate, NaiveTime, Weekday};
use regex::{Captures, Regex};
use std::sync::LazyLock;

/// A number of hours as said: digits or a word.
const NUM: &str = r"\d{1,2}|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve";
/// A count or a length: a few more words.
const AMOUNT: &str = r"\d{1,3}|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|forty[- ]five|forty|sixty|ninety|a couple of";
const WEEKDAY: &str = r"monday|tuesday|wednesday|thursday|friday|saturday|sunday";
const MONTH: &str = r"jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?";

fn re(pattern: &str) -> Regex {
    Regex::new(pattern).expect("a fixed pattern")
}

macro_rules! pattern {
    ($name:ident, $($part:expr),+) => {
        static $name: LazyLock<Regex> = LazyLock::new(|| re(&[$($part),+].concat()));
    };
}

/// The number a word or digits say (`nine`, `45`, `forty-five`, `a couple of`).
pub fn number(s: &str) -> Option<u32> {
    let s = s.trim();
    if let Ok(n) = s.parse() {
        return Some(n);
    }
    Some(match s.replace('-', " ").as_str() {
        "a" | "an" | "one" => 1,
        "two" | "a couple of" => 2,
        "three" => 3,
        "four" => 4,
        "five" => 5,
        "six" => 6,
        "seven" => 7,
        "eight" => 8,
        "nine" => 9,
        "ten" => 10,
        "eleven" => 11,
        "twelve" => 12,
        "fifteen" => 15,
        "twenty" => 20,
        "thirty" => 30,
        "forty" => 40,
        "forty five" => 45,
        "sixty" => 60,
        "ninety" => 90,
        _ => return None,
    })
}

/// Byte spans already read.
#[derive(Debug, Default)]
pub struct Taken(Vec<(usize, usize)>);

impl Taken {
    /// Takes `m`'s span unless part of it is taken already.
    fn take(&mut self, start: usize, end: usize) -> bool {
        if self.0.iter().any(|&(s, e)| start < e && s < end) {
            return false;
        }
        self.0.push((start, end));
        true
    }
}

/// A part of the day, as a morning-or-evening hint and as a window of hours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Period {
    Morning,
    Afternoon,
    Evening,
}

impl Period {
    /// The hours looked at when the user names only the part of the day.
    pub fn window(self) -> (NaiveTime, NaiveTime) {
        let t = |h| NaiveTime::from_hms_opt(h, 0, 0).unwrap_or_default();
        match self {
            Period::Morning => (t(9), t(12)),
            Period::Afternoon => (t(12), t(17)),
            Period::Evening => (t(17), t(21)),
        }
    }
}

pattern!(PERIOD, r"\b(?:(morning|breakfast)|(afternoon|lunch)|(evening|tonight|night|dinner))(s)?\b");

/// Each part of the day named: where, which, and whether plural ("evenings").
pub fn periods(t: &str) -> Vec<(usize, usize, Period, bool)> {
    PERIOD
        .captures_iter(t)
        .map(|c| {
            let p = match (c.get(1), c.get(2)) {
                (Some(_), _) => Period::Morning,
                (_, Some(_)) => Period::Afternoon,
                _ => Period::Evening,
            };
            let m = c.get(0).expect("whole match");
            (m.start(), m.end(), p, c.get(4).is_some())
        })
        .collect()
}

/// A clock time the message says, and whether its morning or afternoon was guessed.
#[derive(Debug, Clone, PartialEq)]
pub struct Said {
    pub quote: String,
    pub time: NaiveTime,
    pub guessed: bool,
}

#[derive(Clone, Copy)]
enum Meridiem {
    Am,
    Pm,
}

// "half past four", and the British "half four" (not "half an hour").
pattern!(HALF, r"\bhalf (?:past |after )?(", NUM, r")\b");
pattern!(QUARTER, r"\bquarter (past|after|to|till|before|of) (", NUM, r")\b");
pattern!(CLOCK, r"(?:^|[^\d])(\d{1,2}):(\d{2})(?:\s*([ap])\.?m\b\.?)?");
pattern!(MERIDIEM, r"\b(", NUM, r")\s*(?:([ap])\.?m\b\.?|o'?clock\b)");
pattern!(NOON, r"\b(noon|midday|midnight)\b");
pattern!(
    BARE,
    r"\b(?:at|from|until|till|by|around|to|before|after) (",
    NUM,
    r")(?: (thirty|fifteen|forty[- ]five))?\b"
);
// What may follow a bare number that is not a time ("at 3 people", "to 2 weeks").
pattern!(NOT_A_TIME, r"^[- ]?(?:min|hour|hr|day|week|month|year|people|person|times|session|of|%|st\b|nd\b|rd\b|th\b)");

/// The clock times in `t`, in the order said.
pub fn times(t: &str, taken: &mut Taken) -> Vec<Said> {
    let periods = periods(t);
    let mut found: Vec<(usize, Said)> = Vec::new();
    for c in NOON.captures_iter(t) {
        let m = c.get(0).expect("whole match");
        if taken.take(m.start(), m.end()) {
            let h = if &c[1] == "midnight" { 0 } else { 12 };
            let time = NaiveTime::from_hms_opt(h, 0, 0).unwrap_or_default();
            found.push((m.start(), Said { quote: c[1].to_string(), time, guessed: false }));
        }
    }
    let mut add = |start: usize, end: usize, h: u32, m: u32, mer: Option<Meridiem>, taken: &mut Taken| {
        if h > 23 || m > 59 || !taken.take(start, end) {
            return;
        }
        let (hour, guessed) = hour(h, mer, nearest(&periods, start));
        if let Some(time) = NaiveTime::from_hms_opt(hour % 24, m, 0) {
            found.push((start, Said { quote: t[start..end].trim().to_string(), time, guessed }));
        }
    };
    let mer =
        |c: &Captures, i| c.get(i).map(|m: regex::Match| if m.as_str() == "a" { Meridiem::Am } else { Meridiem::Pm });
    for c in HALF.captures_iter(t) {
        let m = c.get(0).expect("whole match");
        add(m.start(), m.end(), number(&c[1]).unwrap_or(99), 30, None, taken);
    }
    for c in QUARTER.captures_iter(t) {
        let m = c.get(0).expect("whole match");
        let h = number(&c[2]).unwrap_or(99);
        match &c[1] {
            "past" | "after" => add(m.start(), m.end(), h, 15, None, taken),
            _ => add(m.start(), m.end(), (h + 11) % 12, 45, None, taken),
        }
    }
    for c in CLOCK.captures_iter(t) {
        let (h, m) = (c.get(1).expect("hour"), &c[2]);
        let end = c.get(0).expect("whole match").end();
        add(h.start(), end, number(h.as_str()).unwrap_or(99), number(m).unwrap_or(99), mer(&c, 3), taken);
    }
    for c in MERIDIEM.captures_iter(t) {
        let m = c.get(0).expect("whole match");
        add(m.start(), m.end(), number(&c[1]).unwrap_or(99), 0, mer(&c, 2), taken);
    }
    for c in BARE.captures_iter(t) {
        let (m, n) = (c.get(0).expect("whole match"), c.get(1).expect("number"));
        if NOT_A_TIME.is_match(&t[m.end()..]) {
            continue;
        }
        let minutes = c.get(2).and_then(|x| number(x.as_str())).unwrap_or(0);
        add(m.start(), m.end(), number(n.as_str()).unwrap_or(99), minutes, None, taken);
    }
    found.sort_by_key(|(at, _)| *at);
    found.into_iter().map(|(_, s)| s).collect()
}

/// The part of the day said nearest to a time at `at` (within 40 bytes),
/// else the only one the message names.
fn nearest(periods: &[(usize, usize, Period, bool)], at: usize) -> Option<Period> {
    let distance = |&(s, e, _, _): &(usize, usize, Period, bool)| if e <= at { at - e } else { s.saturating_sub(at) };
    let close = periods.iter().filter(|p| distance(p) <= 40).min_by_key(|p| distance(p)).map(|p| p.2);
    let mut kinds: Vec<Period> = periods.iter().map(|p| p.2).collect();
    kinds.dedup();
    close.or(if kinds.len() == 1 { Some(kinds[0]) } else { None })
}

/// The 24-hour hour of `h` said with `mer` or near `period`, and whether it
/// was guessed: with neither, office hours (1 to 6 is the afternoon).
fn hour(h: u32, mer: Option<Meridiem>, period: Option<Period>) -> (u32, bool) {
    match (mer, period) {
        _ if h == 0 || h > 12 => (h, false),
        (Some(Meridiem::Am), _) => (h % 12, false),
        (Some(Meridiem::Pm), _) => (h % 12 + 12, false),
        (None, Some(Period::Morning)) => (h % 12, false),
        (None, Some(Period::Afternoon | Period::Evening)) if h == 12 => (12, false),
        (None, Some(Period::Afternoon | Period::Evening)) => (h + 12, false),
        (None, None) if (1..=6).contains(&h) => (h + 12, true),
        (None, None) => (h, true),
    }
}

pattern!(
    LENGTH,
    r"\b(?:(an? hour and a half|(?:",
    AMOUNT,
    r") and a half hours?|half an? hour)|(\d{1,3}(?:\.\d+)?|",
    AMOUNT,
    r"|an?)[ -](minutes?|mins?|hours?|hrs?)\b)"
);

/// The length the message gives in minutes ("two-hour", "90 minutes", "half an hour").
pub fn length(t: &str, taken: &mut Taken) -> Option<(String, u32)> {
    for c in LENGTH.captures_iter(t) {
        let m = c.get(0).expect("whole match");
        let minutes = if let Some(w) = c.get(1) {
            let w = w.as_str();
            match w.split(" and a half").next().filter(|_| w.contains("and a half")) {
                Some(n) => number(n.trim_end_matches(" hour")).map(|n| n * 60 + 30),
                None => Some(30),
            }
        } else {
            let n: f64 = c[2].parse().ok().or_else(|| number(&c[2]).map(f64::from)).unwrap_or(0.0);
            let per = if c[3].starts_with('h') { 60.0 } else { 1.0 };
            Some((n * per).round() as u32)
        };
        if let Some(minutes) = minutes.filter(|m| (5..=24 * 60).contains(m)) {
            if taken.take(m.start(), m.end()) {
                return Some((m.as_str().to_string(), minutes));
            }
        }
    }
    None
}

/// Days the message names.
#[derive(Debug, Clone, PartialEq)]
pub enum Day {
    /// One day.
    On(NaiveDate),
    /// Several days; with the `range` name the tools take when there is one.
    Span(NaiveDate, NaiveDate, Option<&'static str>),
    /// A day of the week the event repeats on ("Mondays", "every Tuesday", "Wednesday evenings").
    Each(Weekday),
}

pub fn weekday(s: &str) -> Option<Weekday> {
    s.get(..3)?.parse().ok()
}

pattern!(
    DAY_WORDS,
    r"\b(?:(?:the )?(day after tomorrow)|(tomorrow)|(today|tonight|this (?:morning|afternoon|evening))|(next few days|coming days|next couple of days|next (?:7|seven) days|coming week)|(?:the )?(this|next|coming|following) (week|weekend|month)|(?:the )?(week after next)|(?:the )?(week after) (?:this one|this)|(every |each |on |this |next |coming )?(",
    WEEKDAY,
    r")(s)?(?: (mornings|afternoons|evenings|nights))?)\b"
);
pattern!(ISO, r"\b(\d{4})-(\d{2})-(\d{2})\b");
pattern!(MONTH_DAY, r"\b(", MONTH, r")\.? (\d{1,2})(?:st|nd|rd|th)?\b(?:,? (\d{4}))?");
pattern!(DAY_MONTH, r"\b(\d{1,2})(?:st|nd|rd|th)? (?:of )?(", MONTH, r")\b\.?(?:,? (\d{4}))?");
pattern!(LAST, r"(?:\blast|\bpast|\bprevious) $");

/// The days named in `t`, as seen on `today`.
pub fn days(t: &str, today: NaiveDate, taken: &mut Taken) -> Vec<(String, Day)> {
    let mut found: Vec<(usize, String, Day)> = Vec::new();
    let monday = today - Duration::days(today.weekday().num_days_from_monday().into());
    for c in DAY_WORDS.captures_iter(t) {
        let m = c.get(0).expect("whole match");
        if LAST.is_match(&t[..m.start()]) || !taken.take(m.start(), m.end()) {
            continue;
        }
        let day = if c.get(1).is_some() {
            Day::On(today + Duration::days(2))
        } else if c.get(2).is_some() {
            Day::On(today + Duration::days(1))
        } else if c.get(3).is_some() {
            Day::On(today)
        } else if c.get(4).is_some() {
            Day::Span(today, today + Duration::days(6), Some("next_7_days"))
        } else if let (Some(which), Some(unit)) = (c.get(5), c.get(6)) {
            let next = which.as_str() != "this";
            match unit.as_str() {
                "week" if next => Day::Span(monday + Duration::days(7), monday + Duration::days(13), Some("next_week")),
                "week" => Day::Span(monday, monday + Duration::days(6), Some("this_week")),
                "weekend" => {
                    // Saturday and Sunday of this week or the next; today on a Sunday.
                    let sat = monday + Duration::days(if next { 12 } else { 5 });
                    Day::Span(sat.max(today), sat + Duration::days(1), None)
                }
                _ => month_span(today, next),
            }
        } else if c.get(7).is_some() {
            Day::Span(monday + Duration::days(14), monday + Duration::days(20), None)
        } else if c.get(8).is_some() {
            Day::Span(monday + Duration::days(7), monday + Duration::days(13), Some("next_week"))
        } else {
            let w = weekday(&c[10]).unwrap_or(Weekday::Mon);
            let prefix = c.get(9).map(|p| p.as_str().trim());
            if prefix.is_some_and(|p| p == "every" || p == "each") || c.get(11).is_some() || c.get(12).is_some() {
                Day::Each(w)
            } else if prefix == Some("next") {
                Day::On(next_on_or_after(today + Duration::days(1), w))
            } else {
                Day::On(next_on_or_after(today, w))
            }
        };
        found.push((m.start(), m.as_str().to_string(), day));
    }
    for (r, order) in [(&*ISO, 0), (&*MONTH_DAY, 1), (&*DAY_MONTH, 2)] {
        for c in r.captures_iter(t) {
            let m = c.get(0).expect("whole match");
            if let Some(d) = date_of(&c, order, today).filter(|_| taken.take(m.start(), m.end())) {
                found.push((m.start(), m.as_str().to_string(), Day::On(d)));
            }
        }
    }
    found.sort_by_key(|(at, ..)| *at);
    found.into_iter().map(|(_, q, d)| (q, d)).collect()
}

/// This or next calendar month.
fn month_span(today: NaiveDate, next: bool) -> Day {
    let first = today.with_day(1).unwrap_or(today);
    let first = if next { first.checked_add_months(chrono::Months::new(1)).unwrap_or(first) } else { first };
    let last = first.checked_add_months(chrono::Months::new(1)).unwrap_or(first) - Duration::days(1);
    Day::Span(first, last, Some(if next { "next_month" } else { "this_month" }))
}

/// The date of an ISO, "Dec 12" or "12 December" match: without a year, the next such day from `today`.
fn date_of(c: &Captures, order: usize, today: NaiveDate) -> Option<NaiveDate> {
    let month = |s: &str| MONTHS.iter().position(|m| s.starts_with(m)).map(|i| i as u32 + 1);
    let (y, mo, d) = match order {
        0 => return NaiveDate::from_ymd_opt(c[1].parse().ok()?, c[2].parse().ok()?, c[3].parse().ok()?),
        1 => (c.get(3), month(&c[1])?, c[2].parse().ok()?),
        _ => (c.get(3), month(&c[2])?, c[1].parse().ok()?),
    };
    if let Some(y) = y {
        return NaiveDate::from_ymd_opt(y.as_str().parse().ok()?, mo, d);
    }
    let this = NaiveDate::from_ymd_opt(today.year(), mo, d)?;
    if this >= today {
        Some(this)
    } else {
        NaiveDate::from_ymd_opt(today.year() + 1, mo, d)
    }
}

const MONTHS: [&str; 12] = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];

/// How often a series repeats, as the message says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Every {
    Day,
    MondayToFriday,
    Week,
    Month,
    Year,
}

pattern!(
    MON_FRI,
    r"\b(?:(?:every|each|on) (?:week ?day|work ?day|business day|working day)s?|week ?days|work ?days|working days|monday (?:to|through|thru|-) friday|mon ?- ?fri)\b"
);
pattern!(DAILY, r"\b(?:(?:every|each) (?:single )?(?:day|morning|afternoon|evening|night)|daily|nightly)\b");
pattern!(
    EVERY_N,
    r"\b(?:every (other|second|2nd|third|3rd|\d{1,2}|two|three|four) (day|week|month|year|",
    WEEKDAY,
    r")s?|(fortnightly|bi-?weekly)|(?:every|each) (week|month|year)|(weekly|monthly|yearly|annually))\b"
);

/// The series' frequency and interval the message says, with the words.
pub fn every(t: &str) -> Option<(String, Every, u32)> {
    if let Some(m) = MON_FRI.find(t) {
        return Some((m.as_str().to_string(), Every::MondayToFriday, 1));
    }
    if let Some(c) = EVERY_N.captures(t) {
        let quote = c[0].to_string();
        if let (Some(n), Some(unit)) = (c.get(1), c.get(2)) {
            let n = match n.as_str() {
                "other" | "second" | "2nd" => 2,
                "third" | "3rd" => 3,
                s => number(s).unwrap_or(1),
            };
            return Some((quote, unit_every(unit.as_str()), n));
        }
        if c.get(3).is_some() {
            return Some((quote, Every::Week, 2));
        }
        let unit = c.get(4).or(c.get(5)).map_or("week", |u| u.as_str());
        return Some((quote, unit_every(unit), 1));
    }
    DAILY.find(t).map(|m| (m.as_str().to_string(), Every::Day, 1))
}

fn unit_every(unit: &str) -> Every {
    match unit {
        "day" => Every::Day,
        "month" | "monthly" => Every::Month,
        "year" | "yearly" | "annually" => Every::Year,
        _ => Every::Week,
    }
}

pattern!(
    COUNT,
    r"\b(",
    AMOUNT,
    r") (?:more )?(?:sessions?|times|occurrences?|meetings?|classes|class|lessons?|appointments?|visits?|events?|runs?|calls?)\b"
);
pattern!(PER, r"^ (?:a|per|each|every) (?:day|week|month|year)\b");
pattern!(FOR_N, r"\bfor (?:the next )?(", AMOUNT, r") (days|weeks|months)\b");

/// How many times the series happens, when the message says so.
pub fn count(t: &str) -> Option<(String, u32, Option<&'static str>)> {
    for c in COUNT.captures_iter(t) {
        let m = c.get(0).expect("whole match");
        if PER.is_match(&t[m.end()..]) {
            continue;
        }
        if let Some(n) = number(&c[1]).filter(|n| (1..=999).contains(n)) {
            return Some((m.as_str().to_string(), n, None));
        }
    }
    let c = FOR_N.captures(t)?;
    let unit = match &c[2] {
        "days" => "days",
        "weeks" => "weeks",
        _ => "months",
    };
    Some((c[0].to_string(), number(&c[1])?, Some(unit)))
}

pattern!(
    UNTIL,
    r"\b(?:until|till|through|thru|ending(?: on)?|up to and including) (?:the )?(end of (?:the |this )?(month|year)|(?:",
    MONTH,
    r")\.? \d{1,2}(?:st|nd|rd|th)?|\d{1,2}(?:st|nd|rd|th)? (?:of )?(?:",
    MONTH,
    r")|\d{4}-\d{2}-\d{2})"
);

/// The last day the series may happen on, when the message names one.
pub fn until(t: &str, today: NaiveDate, taken: &mut Taken) -> Option<(String, NaiveDate)> {
    let c = UNTIL.captures(t)?;
    let m = c.get(0).expect("whole match");
    if !taken.take(m.start(), m.end()) {
        return None;
    }
    let quote = c[0].to_string();
    let date = match c.get(2).map(|m| m.as_str()) {
        Some("month") => match month_span(today, false) {
            Day::Span(_, last, _) => last,
            _ => return None,
        },
        Some(_) => NaiveDate::from_ymd_opt(today.year(), 12, 31)?,
        None => match days(&c[1], today, &mut Taken::default()).first() {
            Some((_, Day::On(d))) => *d,
            _ => return None,
        },
    };
    Some((quote, date))
}

/// What the user asks done to an event, when the words say it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Intent {
    Cancel,
    Move,
}

pattern!(
    CANCEL,
    r"\b(?:cancel\w*|call(?:ing)? (?:it |that |this )?off|take (?:\w+ ){0,3}off|drop|remove|delete|skip|clear|can't make|cannot make|can not make|won't make|unable to make)\b"
);
pattern!(
    MOVE,
    r"\b(?:move|moves|moving|push|shift|reschedule|bring (?:\w+ ){0,4}forward|postpone|change the time|instead)\b"
);

/// The change the message asks for, with its words (a cancellation first: "I
/// can't make it, move the rest" still cancels one).
pub fn intent(t: &str) -> Option<(String, Intent)> {
    if let Some(m) = CANCEL.find(t) {
        return Some((m.as_str().to_string(), Intent::Cancel));
    }
    MOVE.find(t).map(|m| (m.as_str().to_string(), Intent::Move))
}

// Which occurrences of a series a change is for, as the tools' `scope`.
pattern!(
    ONLY_ONE,
    r"\b(?:(?:just|only) (?:that|this|the|tomorrow's|today's|the one|that one|this one|one)\b(?: one| occurrence| time| day)?|only tomorrow|only today|this occurrence|that occurrence)\b"
);
pattern!(
    FROM_THEN,
    r"\b(?:(?:and |with )?all (?:the )?(?:later|following|future|next) ones|from then on|from now on|going forward|every one after(?: that)?|and after that too)\b"
);
pattern!(WHOLE, r"\b(?:all of them|the whole series|every one of them|all occurrences|each one|the series)\b");

pub fn scope(t: &str) -> Option<(String, &'static str)> {
    if let Some(m) = FROM_THEN.find(t) {
        return Some((m.as_str().to_string(), "following"));
    }
    if let Some(m) = WHOLE.find(t) {
        return Some((m.as_str().to_string(), "series"));
    }
    ONLY_ONE.find(t).map(|m| (m.as_str().to_string(), "instance"))
}
