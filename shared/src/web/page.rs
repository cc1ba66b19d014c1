//! A page's main content as Markdown: dom_smoothie (a port of Mozilla's
//! readability.js) picks the article out of the page (no navigation, ads or
//! footers) and writes it in its Markdown text mode.
//!
//! Contract: the work on one page is bounded whatever its shape. Before the
//! parser runs, [`super::scan`] refuses a tag of more than
//! [`MAX_ATTRIBUTES`]; the parser is fed in chunks into a [`Counted`] sink and
//! stops a chunk after the page passes [`MAX_ELEMENTS`], [`MAX_DEPTH`] or
//! [`MAX_WEIGHT`]; the finished tree is measured again before readability,
//! whose work grows with the sum of the elements' depths (deep nesting is
//! quadratic in it: 4,000 nested `<div>`s took 3.7 s, 20,000 over 120 s).
//! A page over a limit is refused with [`Halt::TooComplex`]; `stop` ends the
//! parse between chunks ([`Halt::Stopped`]).

use super::scan;
use super::sink::{Counted, Tally};
use dom_query::Document;
use dom_smoothie::{Config, Readability, TextMode};
use html5ever::tendril::{StrTendril, TendrilSink};
use html5ever::{tokenizer::TokenizerOpts, tree_builder::TreeBuilderOpts, ParseOpts};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use url::Url;

/// Elements parsed at most (dom_smoothie's own limit, which it checks only
/// after the whole tree was built).
pub const MAX_ELEMENTS: usize = 50_000;
/// How deep elements may nest; real pages stay under 100.
pub const MAX_DEPTH: u32 = 512;
/// The sum of all elements' depths at most: a 50,000-element page nested 20
/// deep on average weighs 1,000,000; at this limit readability takes about a
/// second of CPU.
pub const MAX_WEIGHT: u64 = 2_000_000;
/// Attributes in one tag at most (real tags have a few dozen at most), and
/// attributes merged into `<html>`/`<body>` by repeated tags at most.
pub const MAX_ATTRIBUTES: usize = 256;
/// Bytes fed to the parser between two checks of the budget and of `stop`.
const CHUNK: usize = 8 * 1024;

/// Why a page was not converted.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Halt {
    #[error("{0}")]
    TooComplex(String),
    #[error("the conversion was stopped")]
    Stopped,
}

/// The page's title (when it has one) and its main content in Markdown;
/// empty content when no article could be found.
pub fn readable(html: &str, url: &Url, stop: &AtomicBool) -> Result<(Option<String>, String), Halt> {
    let doc = parse(html, stop)?;
    let cfg = Config { text_mode: TextMode::Markdown, max_elements_to_parse: MAX_ELEMENTS, ..Config::default() };
    let article = Readability::with_document(doc, Some(url.as_str()), Some(cfg)).and_then(|mut r| r.parse());
    match article {
        Ok(a) => {
            let title = Some(a.title.trim().to_string()).filter(|t| !t.is_empty());
            Ok((title, a.text_content.trim().to_string()))
        }
        Err(e) => {
            tracing::info!(error = %e, "no readable content");
            Ok((None, String::new()))
        }
    }
}

/// The page parsed as dom_query parses it (`Document::from`), within the budget.
fn parse(html: &str, stop: &AtomicBool) -> Result<Document, Halt> {
    let attributes = scan::most_attributes(html, MAX_ATTRIBUTES);
    if attributes > MAX_ATTRIBUTES {
        return Err(Halt::TooComplex(format!("a tag has more than {MAX_ATTRIBUTES} attributes")));
    }
    let opts = ParseOpts {
        tokenizer: TokenizerOpts::default(),
        tree_builder: TreeBuilderOpts { scripting_enabled: false, ..Default::default() },
    };
    let tally = Rc::new(Tally::default());
    let mut parser = html5ever::parse_document(Counted::new(tally.clone(), MAX_ATTRIBUTES), opts);
    let mut rest = html;
    while !rest.is_empty() {
        if stop.load(Ordering::Relaxed) {
            return Err(Halt::Stopped);
        }
        let mut cut = rest.len().min(CHUNK);
        while !rest.is_char_boundary(cut) {
            cut += 1;
        }
        let (chunk, tail) = rest.split_at(cut);
        parser.process(StrTendril::from_slice(chunk));
        within(&tally)?;
        rest = tail;
    }
    let doc = parser.finish();
    within(&measure(&doc))?;
    Ok(doc)
}

/// Whether what was built is within the budget.
fn within(t: &Tally) -> Result<(), Halt> {
    if t.elements.get() > MAX_ELEMENTS {
        return Err(Halt::TooComplex(format!("it has more than {MAX_ELEMENTS} elements")));
    }
    if t.deepest.get() > MAX_DEPTH {
        return Err(Halt::TooComplex(format!("its elements nest more than {MAX_DEPTH} deep")));
    }
    if t.weight.get() > MAX_WEIGHT {
        return Err(Halt::TooComplex(format!(
            "its elements nest too deep for their number (the sum of their depths is over {MAX_WEIGHT})"
        )));
    }
    if t.merged_attributes.get() > MAX_ATTRIBUTES {
        return Err(Halt::TooComplex(format!(
            "its repeated <html>/<body> tags add more than {MAX_ATTRIBUTES} attributes"
        )));
    }
    Ok(())
}

/// The finished tree's exact shape (the sink's tally is an estimate).
fn measure(doc: &Document) -> Tally {
    let tally = Tally::default();
    let mut todo = vec![(doc.root(), 0u32)];
    while let Some((node, depth)) = todo.pop() {
        if node.is_element() {
            tally.elements.set(tally.elements.get() + 1);
            tally.deepest.set(tally.deepest.get().max(depth));
            tally.weight.set(tally.weight.get() + u64::from(depth));
        }
        let mut child = node.first_child();
        while let Some(c) = child {
            child = c.next_sibling();
            todo.push((c, depth + 1));
        }
    }
    tally
}

#[cfg(test)]
#[path = "page_tests.rs"]
pub(crate) mod tests;
