//! The conversion and its budget: pathological pages are refused (the budget
//! decides, not a clock), normal ones convert exactly as dom_smoothie
//! converts them from its own parse.

use super::*;

fn url() -> Url {
    Url::parse("https://example.org/pricing").unwrap()
}

fn convert(html: &str) -> Result<(Option<String>, String), Halt> {
    readable(html, &url(), &AtomicBool::new(false))
}

/// What dom_smoothie makes of `html` parsing it itself (the code before the budget).
fn unbudgeted(html: &str) -> (Option<String>, String) {
    let cfg = Config { text_mode: TextMode::Markdown, max_elements_to_parse: MAX_ELEMENTS, ..Config::default() };
    let a = Readability::new(html, Some(url().as_str()), Some(cfg)).and_then(|mut r| r.parse()).unwrap();
    (Some(a.title.trim().to_string()).filter(|t| !t.is_empty()), a.text_content.trim().to_string())
}

/// A 5,000-row table in an article, with text that puts multi-byte
/// characters and CRLFs across the parser's chunk boundaries.
pub fn big_table() -> String {
    let rows: String = (0..5_000)
        .map(|i| format!("<tr><td>Row {i}</td><td>Café crème № {i}\r\n</td><td>{}</td></tr>\r\n", i * 7))
        .collect();
    format!(
        "<html><head><title>Prices | Example</title></head><body><nav><a href=/>Home</a></nav><article>\
         <h1>Prices</h1><p>Every drink we sell, with its price in euro cents, as of this morning, \
         for all of our shops in the city and the airport.</p><table>{rows}</table></article></body></html>"
    )
}

#[test]
fn the_article_is_kept_as_markdown_and_the_chrome_is_dropped() {
    let html = r#"<html><head><title>Pricing | Example</title></head><body>
        <nav><a href="/">Home</a> <a href="/about">About us</a> <a href="/jobs">Jobs</a></nav>
        <article><h1>Pricing</h1>
        <p>The starter plan costs 12 euros a month and includes five projects, unlimited tasks and
        email support on working days. Teams that need more get the growth plan.</p>
        <h2>Growth</h2>
        <p>The growth plan costs 49 euros a month, with <strong>unlimited projects</strong>, single sign-on,
        priority support and an uptime commitment of 99.9 percent, billed yearly or monthly.</p>
        <ul><li>Unlimited projects</li><li>Single sign-on</li></ul></article>
        <footer>Copyright 2026 Example Ltd. All rights reserved. Cookie settings.</footer></body></html>"#;
    let (title, md) = convert(html).unwrap();
    assert!(title.unwrap().contains("Pricing"));
    assert!(md.contains("12 euros a month"), "{md}");
    assert!(md.contains("## Growth") || md.contains("Growth\n"), "{md}");
    assert!(md.contains("**unlimited projects**"), "{md}");
    assert!(!md.contains("Cookie settings"), "{md}");
    assert!(!md.contains("<p>"), "{md}");
    assert_eq!(convert(html).unwrap(), unbudgeted(html));
}

#[test]
fn a_large_normal_page_converts_exactly_as_before() {
    let html = big_table();
    assert!(html.len() > 300_000, "{}", html.len());
    let (title, md) = convert(&html).unwrap();
    assert_eq!(title.as_deref(), Some("Prices | Example"));
    assert!(md.contains("Row 4999") && md.contains("Café crème № 2500"), "{}", &md[md.len() - 300..]);
    assert_eq!((title, md), unbudgeted(&html));
    // The chunked parse builds the very tree dom_query's own parse builds.
    let stop = AtomicBool::new(false);
    assert_eq!(parse(&html, &stop).unwrap().html(), Document::from(html.as_str()).html());
}

/// Pages under the 2 MB size cap that took from 12 s to many minutes of CPU.
pub fn pathological() -> Vec<(&'static str, String, &'static str)> {
    let attrs: String = (0..170_000).map(|i| format!(" a{i}")).collect();
    let rows = "<tr><td>1</td><td>2</td></tr>".repeat(40_000);
    let body_attrs: String =
        (0..900).map(|t| format!("<body{}>", (0..250).map(|i| format!(" b{t}x{i}")).collect::<String>())).collect();
    let formatting: String = (0..20_000).map(|i| format!("<p><b x={i}></p>")).collect();
    vec![
        (
            "100,000 nested divs",
            format!("{}x{}", "<div>".repeat(100_000), "</div>".repeat(100_000)),
            "nest more than 512",
        ),
        ("one tag of 170,000 attributes", format!("<div{attrs}>x</div>"), "more than 256 attributes"),
        ("a table of 40,000 rows", format!("<table>{rows}</table>"), "more than 50000 elements"),
        ("900 <body> tags of 250 attributes", body_attrs, "<html>/<body> tags add more than 256"),
        ("20,000 unclosed formatting elements", formatting, "more than 50000 elements"),
        (
            "chains of 100 nested divs",
            format!("{}x{}", "<div>".repeat(100), "</div>".repeat(100)).repeat(390),
            "sum of their depths",
        ),
    ]
}

#[test]
fn pathological_pages_are_refused_by_the_budget() {
    for (what, html, why) in pathological() {
        assert!(html.len() < 2 * 1024 * 1024, "{what}: {}", html.len());
        match convert(&format!("<html><body>{html}</body></html>")) {
            Err(Halt::TooComplex(e)) => assert!(e.contains(why), "{what}: {e}"),
            other => panic!("{what}: {other:?}"),
        }
    }
}

#[test]
fn a_long_single_line_is_read() {
    let html = format!("<html><body><article><p>{}</p></article></body></html>", "word, ".repeat(200_000));
    let (_, md) = convert(&html).unwrap();
    assert_eq!(md.len(), "word, ".len() * 200_000 - 1);
}

#[test]
fn a_stopped_conversion_ends_at_the_next_chunk() {
    assert_eq!(readable(&big_table(), &url(), &AtomicBool::new(true)), Err(Halt::Stopped));
}
