//! A linear pre-pass over a page's raw HTML, before html5ever sees it: the
//! most attributes any one tag has.
//!
//! Why by hand: html5ever's tokenizer checks every new attribute of a tag
//! against all the tag's earlier ones, so one tag of 170,000 attributes
//! (1.2 MB, under the size cap) costs 12–18 s of CPU in the tokenizer alone,
//! before the tree builder (where [`super::page`]'s budget is checked) hears
//! of the tag. We may not patch html5ever, and its tokenizer cannot be asked
//! for a tag's attributes so far, so this pass counts them first, in one
//! pass of O(length) with O(1) work a byte.
//!
//! Contract: [`most_attributes`] is never below the largest attribute count
//! html5ever's tokenizer builds for a tag of the same text (it may be above,
//! e.g. for markup-like text inside a `<script>` after inline SVG): the tag
//! states follow the HTML tokenizer's; raw-text elements are skipped to their
//! first possible end tag (where the real tokenizer can only go further);
//! once an `<svg>` or `<math>` was opened nothing more is skipped as raw text,
//! as in foreign content `<style>` and `<script>` hold markup. Comments end at
//! the first `-->`, `--!>`, `<!-->` or `<!--->` as in the tokenizer.

/// Elements whose content the tokenizer reads as text up to their end tag
/// (with scripting off, as dom_query parses, `<noscript>` holds markup).
const RAW_TEXT: &[&[u8]] = &[b"script", b"style", b"textarea", b"title", b"xmp", b"iframe", b"noembed", b"noframes"];

/// The largest number of attributes in one start or end tag of `html`
/// (a count past `stop` may be returned as soon as it is seen).
pub fn most_attributes(html: &str, stop: usize) -> usize {
    let b = html.as_bytes();
    let (mut i, mut most, mut foreign) = (0, 0, false);
    while let Some(lt) = find(b, i, b"<") {
        i = lt + 1;
        match b.get(i) {
            Some(b'!') if b[i..].starts_with(b"!--") => i = comment_end(b, i + 3),
            Some(b'!' | b'?') => i = find(b, i, b">").map_or(b.len(), |g| g + 1),
            Some(b'/') if b.get(i + 1).is_some_and(u8::is_ascii_alphabetic) => i = tag(b, i + 1, &mut most).0,
            Some(c) if c.is_ascii_alphabetic() => {
                let (end, name) = tag(b, i, &mut most);
                i = end;
                foreign |= name.eq_ignore_ascii_case(b"svg") || name.eq_ignore_ascii_case(b"math");
                if name.eq_ignore_ascii_case(b"plaintext") && !foreign {
                    break;
                }
                if !foreign && RAW_TEXT.iter().any(|r| name.eq_ignore_ascii_case(r)) {
                    i = raw_text_end(b, i, name);
                }
            }
            _ => {}
        }
        if most > stop {
            break;
        }
    }
    most
}

/// The first index at or after `from` where `needle` starts.
fn find(b: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    b.get(from..)?.windows(needle.len()).position(|w| w == needle).map(|p| p + from)
}

/// Where a comment whose text starts at `i` ends (just past its `>`).
fn comment_end(b: &[u8], i: usize) -> usize {
    if b[i..].starts_with(b">") {
        return i + 1;
    }
    if b[i..].starts_with(b"->") {
        return i + 2;
    }
    let mut j = i;
    while let Some(p) = find(b, j, b"--") {
        if b[p + 2..].starts_with(b">") {
            return p + 3;
        }
        if b[p + 2..].starts_with(b"!>") {
            return p + 4;
        }
        j = p + 1;
    }
    b.len()
}

/// Where raw text that starts at `i` ends: at `</name` followed by a space,
/// `/` or `>` (the tag itself is then read as a tag by the caller).
fn raw_text_end(b: &[u8], mut i: usize, name: &[u8]) -> usize {
    while let Some(p) = find(b, i, b"</") {
        let after = p + 2 + name.len();
        let same = b.get(p + 2..after).is_some_and(|n| n.eq_ignore_ascii_case(name));
        if same && b.get(after).is_none_or(|c| matches!(c, b'\t' | b'\n' | b'\x0c' | b'\r' | b' ' | b'/' | b'>')) {
            return p;
        }
        i = p + 2;
    }
    b.len()
}

/// Reads a tag whose name starts at `i`: where it ends (past its `>`) and
/// its name; counts its attributes into `most`. The states are the HTML
/// tokenizer's: before/in/after an attribute name, before a value, a quoted
/// or unquoted value, after a quoted value, and `/`.
fn tag<'a>(b: &'a [u8], mut i: usize, most: &mut usize) -> (usize, &'a [u8]) {
    let start = i;
    while i < b.len() && !matches!(b[i], b'\t' | b'\n' | b'\x0c' | b'\r' | b' ' | b'/' | b'>') {
        i += 1;
    }
    let name = &b[start..i];
    let space = |c: u8| matches!(c, b'\t' | b'\n' | b'\x0c' | b'\r' | b' ');
    let mut count = 0;
    while i < b.len() {
        // Before an attribute name.
        match b[i] {
            b'>' => break,
            c if space(c) || c == b'/' => {
                i += 1;
                continue;
            }
            _ => count += 1,
        }
        // Its name (its first character may be `=`), then what follows.
        i += 1;
        while i < b.len() && !space(b[i]) && !matches!(b[i], b'/' | b'>' | b'=') {
            i += 1;
        }
        while i < b.len() && space(b[i]) {
            i += 1;
        }
        if b.get(i) != Some(&b'=') {
            continue;
        }
        i += 1;
        while i < b.len() && space(b[i]) {
            i += 1;
        }
        match b.get(i) {
            Some(&q @ (b'"' | b'\'')) => i = find(b, i + 1, &[q]).map_or(b.len(), |p| p + 1),
            _ => {
                while i < b.len() && !space(b[i]) && b[i] != b'>' {
                    i += 1;
                }
            }
        }
    }
    *most = (*most).max(count);
    ((i + 1).min(b.len()), name)
}

#[cfg(test)]
mod tests {
    use super::most_attributes;

    #[test]
    fn attributes_are_counted_as_the_tokenizer_reads_them() {
        let m = |s: &str| most_attributes(s, usize::MAX);
        assert_eq!(m(r#"<p class="a b" id=x data-y='1>2'>t</p>"#), 3);
        // After a quoted value a name may follow without a space; `/` separates too.
        assert_eq!(m(r#"<a b="1"c="2"/d e>"#), 4);
        assert_eq!(m("<img src=a.png alt = 'x y' hidden>"), 3);
        // End tags are tokenized with attributes as well.
        assert_eq!(m("<p>x</p a b c>"), 3);
        assert_eq!(m("a < b and <!-- <p a b c d> --> <!DOCTYPE html x y>"), 0);
        assert_eq!(m("<!--> <p a b>"), 2, "<!--> is a whole comment");
    }

    #[test]
    fn raw_text_is_skipped_to_its_end_tag_but_not_in_foreign_content() {
        let m = |s: &str| most_attributes(s, usize::MAX);
        assert_eq!(m("<script>if (a<b c d e) {}</script><p x>"), 1);
        assert_eq!(m("<title><p a b c></title>"), 0);
        assert_eq!(m("<svg><style><p a b c></style></svg>"), 3);
        assert_eq!(m("<plaintext><p a b c>"), 0);
    }

    #[test]
    fn a_tag_of_many_attributes_is_counted_past_the_stop() {
        let attrs: String = (0..1000).map(|i| format!(" a{i}")).collect();
        assert!(most_attributes(&format!("<div{attrs}>x</div>"), 256) > 256);
    }
}
