//! The input rules of the ontology, each stated once. The validators (serde
//! for integers, [`TextRule::check`] and [`check_relation`] in the service)
//! and the OpenAPI document ([`super::http::openapi`], through the
//! `schema_with` functions here) are both built from these values, so what
//! the document promises is what the server enforces.
//!
//! - Text: a length in characters (Unicode scalar values, as JSON Schema's
//!   `maxLength` counts them) and, when required, "not blank": at least one
//!   character outside [`WHITESPACE`] (exactly the characters `str::trim`
//!   removes), stated in the document as a `pattern`.
//! - Integers: an inclusive range ([`IntRule`]). A JSON number with a zero
//!   fraction (`5.0`, `-5.0`, `1e3`) is that integer, as JSON Schema counts
//!   it; anything else outside the range is `invalid_value`.

use super::error::EntityError;
use serde::de::{self, Deserializer, Unexpected, Visitor};
use std::fmt;
use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, Ref, Schema, SchemaType, Type};
use utoipa::openapi::RefOr;

/// The characters `char::is_whitespace` (Unicode `White_Space`) accepts, as
/// inclusive ranges: a text made only of these is blank. A unit test keeps
/// this table equal to `char::is_whitespace`.
pub const WHITESPACE: &[(char, char)] = &[
    ('\u{9}', '\u{d}'),
    (' ', ' '),
    ('\u{85}', '\u{85}'),
    ('\u{a0}', '\u{a0}'),
    ('\u{1680}', '\u{1680}'),
    ('\u{2000}', '\u{200a}'),
    ('\u{2028}', '\u{2029}'),
    ('\u{202f}', '\u{202f}'),
    ('\u{205f}', '\u{205f}'),
    ('\u{3000}', '\u{3000}'),
];

fn is_space(c: char) -> bool {
    WHITESPACE.iter().any(|&(lo, hi)| (lo..=hi).contains(&c))
}

/// True when `s` has no character outside [`WHITESPACE`] (`s.trim()` is empty).
pub fn is_blank(s: &str) -> bool {
    s.chars().all(is_space)
}

/// The `pattern` of a non-blank text: one character outside [`WHITESPACE`]
/// somewhere (JSON Schema patterns are unanchored searches).
pub fn not_blank_pattern() -> String {
    let mut p = String::from("[^");
    for &(lo, hi) in WHITESPACE {
        p.push_str(&format!("\\u{:04X}", lo as u32));
        if hi != lo {
            p.push_str(&format!("-\\u{:04X}", hi as u32));
        }
    }
    p.push(']');
    p
}

/// A text field's rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TextRule {
    pub max_chars: usize,
    /// Required texts must not be blank.
    pub required: bool,
}

/// A name or title.
pub const NAME: TextRule = TextRule { max_chars: 500, required: true };
/// A description.
pub const DESCRIPTION: TextRule = TextRule { max_chars: 20_000, required: false };
/// `GET /search?q=`.
pub const SEARCH_QUERY: TextRule = TextRule { max_chars: 200, required: true };

impl TextRule {
    pub fn check(&self, what: &str, s: &str) -> Result<(), EntityError> {
        if self.required && is_blank(s) {
            return Err(EntityError::bad("invalid_value", format!("{what} must not be empty or blank")));
        }
        if s.chars().count() > self.max_chars {
            let max = self.max_chars;
            return Err(EntityError::bad("invalid_value", format!("{what} is longer than {max} characters")));
        }
        Ok(())
    }

    /// The JSON Schema of a value this rule accepts.
    pub fn schema(&self) -> ObjectBuilder {
        let s = ObjectBuilder::new().schema_type(Type::String).max_length(Some(self.max_chars));
        if self.required {
            s.min_length(Some(1)).pattern(Some(not_blank_pattern()))
        } else {
            s
        }
    }
}

/// An integer field's inclusive range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntRule {
    pub min: i128,
    pub max: i128,
}

/// A document's place among its siblings (clamped to "last" beyond them).
pub const POSITION: IntRule = IntRule { min: 0, max: u32::MAX as i128 };
/// A task's priority: 1 (highest) to 5.
pub const TASK_PRIORITY: IntRule = IntRule { min: 1, max: 5 };
/// The largest integer a JSON number holds exactly everywhere (2^53 - 1, as
/// in JavaScript). Wider integers reach the server as floats already
/// rounded (`-9223372036854775809` reads as `-2^63`), so no rule goes past it.
pub const MAX_SAFE_INTEGER: i128 = (1 << 53) - 1;
/// Milliseconds since the Unix epoch (±285 000 years).
pub const TIMESTAMP: IntRule = IntRule { min: -MAX_SAFE_INTEGER, max: MAX_SAFE_INTEGER };
/// A version a caller expects (`expected_version`).
pub const VERSION: IntRule = IntRule { min: 0, max: MAX_SAFE_INTEGER };
/// A page size (`?limit=`).
pub const PAGE_LIMIT: IntRule = IntRule { min: 1, max: super::service::MAX_PAGE as i128 };

fn number(n: i128) -> utoipa::Number {
    if n >= 0 {
        utoipa::Number::UInt(n as usize)
    } else {
        utoipa::Number::Int(n as isize)
    }
}

impl IntRule {
    pub fn contains(&self, n: i128) -> bool {
        (self.min..=self.max).contains(&n)
    }

    /// The integer a JSON number stands for, if it is one within the range.
    pub fn from_f64(&self, f: f64) -> Option<i128> {
        // Beyond ±2^100 no rule applies; the bound keeps the cast exact.
        let integral = f.is_finite() && f.fract() == 0.0 && f.abs() < 2f64.powi(100);
        integral.then_some(f as i128).filter(|n| self.contains(*n))
    }

    /// The integer a JSON value stands for, if it is one within the range.
    pub fn from_json(&self, v: &serde_json::Value) -> Option<i128> {
        let n = v.as_number()?;
        let i = n.as_i64().map(i128::from).or_else(|| n.as_u64().map(i128::from));
        match i {
            Some(i) => Some(i).filter(|i| self.contains(*i)),
            None => self.from_f64(n.as_f64()?),
        }
    }

    /// A query-string or header integer: the text of a JSON number.
    pub fn from_text(&self, s: &str) -> Option<i128> {
        self.from_json(&serde_json::from_str(s).ok()?)
    }

    pub fn check(&self, what: &str, n: i128) -> Result<(), EntityError> {
        if self.contains(n) {
            return Ok(());
        }
        Err(EntityError::bad("invalid_value", format!("{what} must be an integer from {} to {}", self.min, self.max)))
    }

    pub fn schema(&self, nullable: bool) -> ObjectBuilder {
        let t: SchemaType =
            if nullable { [Type::Integer, Type::Null].into_iter().collect() } else { Type::Integer.into() };
        ObjectBuilder::new().schema_type(t).minimum(Some(number(self.min))).maximum(Some(number(self.max)))
    }

    fn expecting(&self) -> String {
        format!("an integer from {} to {}", self.min, self.max)
    }
}

// ---- serde: integers read by their rule -------------------------------------

struct IntVisitor(&'static IntRule);

impl IntVisitor {
    fn done<E: de::Error>(&self, n: Option<i128>, unexpected: Unexpected<'_>) -> Result<i128, E> {
        n.filter(|n| self.0.contains(*n)).ok_or_else(|| E::invalid_value(unexpected, &self.0.expecting().as_str()))
    }
}

impl<'de> Visitor<'de> for IntVisitor {
    type Value = i128;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(&self.0.expecting())
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<i128, E> {
        self.done(Some(v.into()), Unexpected::Signed(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<i128, E> {
        self.done(Some(v.into()), Unexpected::Unsigned(v))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<i128, E> {
        self.done(self.0.from_f64(v), Unexpected::Float(v))
    }
}

struct OptIntVisitor(&'static IntRule);

impl<'de> Visitor<'de> for OptIntVisitor {
    type Value = Option<i128>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{} or null", self.0.expecting())
    }
    fn visit_none<E: de::Error>(self) -> Result<Option<i128>, E> {
        Ok(None)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Option<i128>, E> {
        Ok(None)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Option<i128>, D::Error> {
        d.deserialize_any(IntVisitor(self.0)).map(Some)
    }
}

fn narrow<T: TryFrom<i128>, E: de::Error>(n: i128) -> Result<T, E> {
    // Every rule's range fits its field's type; this only guards a mismatch.
    T::try_from(n).map_err(|_| E::custom(format!("{n} does not fit the field")))
}

fn int<'de, D: Deserializer<'de>, T: TryFrom<i128>>(rule: &'static IntRule, d: D) -> Result<T, D::Error> {
    narrow(d.deserialize_any(IntVisitor(rule))?)
}

fn opt_int<'de, D: Deserializer<'de>, T: TryFrom<i128>>(rule: &'static IntRule, d: D) -> Result<Option<T>, D::Error> {
    d.deserialize_option(OptIntVisitor(rule))?.map(narrow).transpose()
}

/// `deserialize_with` for an optional [`POSITION`].
pub fn opt_position<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    opt_int(&POSITION, d)
}

/// A `u8` read by value; the field's own rule is checked by the service.
const U8: IntRule = IntRule { min: 0, max: u8::MAX as i128 };

/// `deserialize_with` for an optional task priority: any `u8`, read by value.
/// [`TASK_PRIORITY`] is checked by the service's validation (which chat tools
/// reach with fields they build), answering `invalid_value` on either path.
pub fn opt_task_priority<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u8>, D::Error> {
    opt_int(&U8, d)
}

/// `deserialize_with` for an optional [`VERSION`] (`expected_version`).
pub fn opt_version<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    opt_int(&VERSION, d)
}

/// `deserialize_with` for an optional [`TIMESTAMP`].
pub fn opt_timestamp<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    opt_int(&TIMESTAMP, d)
}

/// `deserialize_with` for a [`TIMESTAMP`].
pub fn timestamp<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    int(&TIMESTAMP, d)
}

// ---- relations ----------------------------------------------------------------

/// The longest relation name.
pub const MAX_RELATION_LEN: usize = 64;

/// Relations are identifiers (they end up in keys): a lowercase ASCII letter,
/// then lowercase letters, digits and `_`, [`MAX_RELATION_LEN`] at most.
pub fn check_relation(r: &str) -> Result<(), EntityError> {
    let ok = r.len() <= MAX_RELATION_LEN
        && r.as_bytes().first().is_some_and(u8::is_ascii_lowercase)
        && r.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if ok {
        return Ok(());
    }
    let msg = format!("relation: 1 to {MAX_RELATION_LEN} of a-z, 0-9 and _, starting with a letter");
    Err(EntityError::bad("invalid_value", msg))
}

/// [`check_relation`] as a pattern.
pub fn relation_pattern() -> String {
    format!("^[a-z][a-z0-9_]{{0,{}}}$", MAX_RELATION_LEN - 1)
}

// ---- `schema_with` functions of the model's fields ---------------------------

fn described(s: ObjectBuilder, d: &str) -> RefOr<Schema> {
    s.description(Some(d)).into()
}

fn nullable_text(rule: TextRule) -> ObjectBuilder {
    rule.schema().schema_type([Type::String, Type::Null].into_iter().collect::<SchemaType>())
}

/// Components the field schemas below refer to by name.
pub fn components() -> Vec<(&'static str, RefOr<Schema>)> {
    vec![
        ("Name", described(NAME.schema(), "A name or title: not blank.")),
        ("Description", nullable_text(DESCRIPTION).into()),
    ]
}

pub fn name_schema() -> RefOr<Schema> {
    RefOr::Ref(Ref::from_schema_name("Name"))
}

pub fn description_schema() -> RefOr<Schema> {
    RefOr::Ref(Ref::from_schema_name("Description"))
}

/// Content of documents is limited in UTF-8 bytes; `maxLength` (characters)
/// can only bound it from above, the description states the byte limit.
fn content(nullable: bool) -> ObjectBuilder {
    let max = super::service::MAX_CONTENT_BYTES;
    let t: SchemaType = if nullable { [Type::String, Type::Null].into_iter().collect() } else { Type::String.into() };
    ObjectBuilder::new()
        .schema_type(t)
        .max_length(Some(max))
        .description(Some(format!("At most {max} bytes of UTF-8 (larger is 413 too_large).")))
}

pub fn content_schema() -> RefOr<Schema> {
    content(false).into()
}

pub fn context_schema() -> RefOr<Schema> {
    described(
        content(true),
        "Content of the project's context document: purpose, vision and scope in the user's words. \
         Empty when absent. At most 2 MiB of UTF-8 (larger is 413 too_large).",
    )
}

pub fn position_schema() -> RefOr<Schema> {
    described(
        POSITION.schema(true),
        "Position among the siblings (0 is first); absent, or past the last, places it last.",
    )
}

pub fn task_priority_schema() -> RefOr<Schema> {
    described(TASK_PRIORITY.schema(true), "1 (highest) to 5.")
}

pub fn opt_timestamp_schema() -> RefOr<Schema> {
    described(TIMESTAMP.schema(true), "Milliseconds since the Unix epoch.")
}

pub fn relation_schema() -> RefOr<Schema> {
    described(
        ObjectBuilder::new()
            .schema_type(Type::String)
            .min_length(Some(1))
            .max_length(Some(MAX_RELATION_LEN))
            .pattern(Some(relation_pattern())),
        "Lowercase letters, digits and `_`, starting with a letter (e.g. `supports`, `blocks`).",
    )
}

pub fn expected_version_schema() -> RefOr<Schema> {
    described(
        VERSION.schema(true),
        "The project version the caller read (`doc_structure.version`, a patch's `version`); \
         another one is 409 version_conflict and nothing is written. Absent: the current version.",
    )
}

/// A reorganize's moves: at most [`super::service::MAX_REORGANIZE_MOVES`].
pub fn reorganize_moves_schema() -> RefOr<Schema> {
    ArrayBuilder::new()
        .items(RefOr::Ref(Ref::from_schema_name("MoveDocument")))
        .max_items(Some(super::service::MAX_REORGANIZE_MOVES))
        .description(Some("Applied in order, each to the tree the one before left."))
        .into()
}

/// A reorganize's `link` or `unlink`: together at most
/// [`super::service::MAX_REORGANIZE_EDGES`] (more is 400 too_many_changes).
pub fn reorganize_edges_schema() -> RefOr<Schema> {
    ArrayBuilder::new()
        .items(RefOr::Ref(Ref::from_schema_name("Edge")))
        .max_items(Some(super::service::MAX_REORGANIZE_EDGES))
        .description(Some(format!(
            "`link` and `unlink` together name at most {} edges (one transaction's worth); more is \
             400 too_many_changes. No edge may be named twice.",
            super::service::MAX_REORGANIZE_EDGES
        )))
        .into()
}

pub fn metadata_ids_schema() -> RefOr<Schema> {
    ArrayBuilder::new()
        .items(RefOr::Ref(Ref::from_schema_name("EntityId")))
        .max_items(Some(super::service::MAX_METADATA_IDS))
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_whitespace_table_is_exactly_char_is_whitespace() {
        for c in (0..=0x10FFFFu32).filter_map(char::from_u32) {
            assert_eq!(is_space(c), c.is_whitespace(), "{:?} (U+{:04X})", c, c as u32);
        }
        assert!(is_blank(" \u{3000}\t") && !is_blank(" x "));
        assert_eq!(
            not_blank_pattern(),
            "[^\\u0009-\\u000D\\u0020\\u0085\\u00A0\\u1680\\u2000-\\u200A\\u2028-\\u2029\\u202F\\u205F\\u3000]"
        );
    }

    #[test]
    fn integers_are_read_by_value_not_by_notation() {
        let read = |s: &str| -> Result<Option<u32>, String> {
            let mut d = serde_json::Deserializer::from_str(s);
            opt_position(&mut d).map_err(|e| e.to_string())
        };
        assert_eq!(read("5"), Ok(Some(5)));
        assert_eq!(read("5.0"), Ok(Some(5)));
        assert_eq!(read("5e0"), Ok(Some(5)));
        assert_eq!(read("-0.0"), Ok(Some(0)));
        assert_eq!(read("null"), Ok(None));
        assert_eq!(read("4294967295"), Ok(Some(u32::MAX)));
        for bad in ["4294967296", "-1", "-5.0", "5.5", "1e300"] {
            assert!(read(bad).unwrap_err().starts_with("invalid value"), "{bad}");
        }
        assert!(read("\"5\"").unwrap_err().starts_with("invalid type"));
        assert_eq!(TASK_PRIORITY.from_text("5.0"), Some(5));
        assert_eq!(TASK_PRIORITY.from_text(""), None);
        assert_eq!(VERSION.from_text("9007199254740991"), Some(MAX_SAFE_INTEGER));
        assert_eq!(VERSION.from_text("9007199254740992"), None);
        assert_eq!(VERSION.from_text("18446744073709551616"), None, "read as a float, past the range");
        let ts = |s: &str| {
            let mut d = serde_json::Deserializer::from_str(s);
            opt_timestamp(&mut d).map_err(|e| e.to_string())
        };
        assert!(ts("-9223372036854775809").is_err(), "below i64::MIN, rounded to it as a float: refused");
        assert_eq!(ts("-9007199254740991.0"), Ok(Some(-(MAX_SAFE_INTEGER as i64))));
    }

    fn pattern_of(schema: RefOr<Schema>) -> String {
        match schema {
            RefOr::T(Schema::Object(o)) => o.pattern.expect("a pattern"),
            _ => panic!("an inline object schema"),
        }
    }

    /// What the document says of a string: its pattern (a search, as JSON
    /// Schema has it) and its length bounds in characters.
    fn document_accepts(pattern: &str, min: usize, max: usize, s: &str) -> bool {
        regex::Regex::new(pattern).expect("the pattern compiles").is_match(s)
            && (min..=max).contains(&s.chars().count())
    }

    proptest::proptest! {
        #[test]
        fn a_name_is_accepted_exactly_when_the_document_says(s in "[ \\t\\n\u{85}\u{a0}\u{3000}\u{feff}\u{1c}a\u{e9}]{0,503}") {
            let schema = pattern_of(NAME.schema().into());
            proptest::prop_assert_eq!(NAME.check("name", &s).is_ok(), document_accepts(&schema, 1, NAME.max_chars, &s));
        }

        #[test]
        fn a_relation_is_accepted_exactly_when_the_document_says(s in "[a-zA-Z0-9_ -]{0,66}") {
            let ok = document_accepts(&relation_pattern(), 1, MAX_RELATION_LEN, &s);
            proptest::prop_assert_eq!(check_relation(&s).is_ok(), ok);
        }

        #[test]
        fn an_id_is_accepted_exactly_when_the_document_says(s in "[a-zA-Z0-9._:|@#/ %-]{0,66}") {
            use utoipa::PartialSchema;
            let pattern = pattern_of(crate::ids::EntityId::schema());
            let ok = regex::Regex::new(&pattern).unwrap().is_match(&s);
            proptest::prop_assert_eq!(crate::ids::EntityId::parse(s.clone()).is_ok(), ok);
            proptest::prop_assert_eq!(crate::ids::ProjectId::parse(s).is_ok(), ok);
        }
    }

    #[test]
    fn relations() {
        for ok in ["a", "supports", "is_part_of_2", &"a".repeat(64)] {
            assert!(check_relation(ok).is_ok(), "{ok}");
        }
        for bad in ["", "2a", "_a", "A", "a-b", "é", &"a".repeat(65)] {
            assert!(check_relation(bad).is_err(), "{bad}");
        }
        assert_eq!(relation_pattern(), "^[a-z][a-z0-9_]{0,63}$");
    }
}
