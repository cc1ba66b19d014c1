//! A page's main content as Markdown: dom_smoothie (a port of Mozilla's
//! readability.js) picks the article out of the page (no navigation, ads or
//! footers) and writes it in its Markdown text mode; no hand-written parsing.

use dom_smoothie::{Config, Readability, TextMode};
use url::Url;

/// Elements parsed at most: a 2 MB page of tiny elements would otherwise
/// take the whole time limit in scoring.
const MAX_ELEMENTS: usize = 50_000;

/// The page's title (when it has one) and its main content in Markdown;
/// empty content when no article could be found.
pub fn readable(html: &str, url: &Url) -> (Option<String>, String) {
    let cfg = Config { text_mode: TextMode::Markdown, max_elements_to_parse: MAX_ELEMENTS, ..Config::default() };
    let article = Readability::new(html, Some(url.as_str()), Some(cfg)).and_then(|mut r| r.parse());
    match article {
        Ok(a) => {
            let title = Some(a.title.trim().to_string()).filter(|t| !t.is_empty());
            (title, a.text_content.trim().to_string())
        }
        Err(e) => {
            tracing::info!(error = %e, "no readable content");
            (None, String::new())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let (title, md) = readable(html, &Url::parse("https://example.org/pricing").unwrap());
        assert!(title.unwrap().contains("Pricing"));
        assert!(md.contains("12 euros a month"), "{md}");
        assert!(md.contains("## Growth") || md.contains("Growth\n"), "{md}");
        assert!(md.contains("**unlimited projects**"), "{md}");
        assert!(!md.contains("Cookie settings"), "{md}");
        assert!(!md.contains("<p>"), "{md}");
    }
}
