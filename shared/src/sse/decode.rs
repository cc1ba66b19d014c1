//! An incremental Server-Sent Events decoder, after the WHATWG HTML
//! "event stream interpretation" algorithm.
//!
//! Bytes may arrive split anywhere — inside a multi-byte UTF-8 character,
//! between the `\r` and `\n` of a CRLF — and the frames that come out are the
//! same as if the whole stream had arrived at once. Lines end in LF, CRLF or a
//! lone CR; a leading UTF-8 BOM is dropped; comment lines (`:` first, the usual
//! keep-alive) are ignored; a line with no colon is a field with an empty
//! value; one space after the colon is dropped.
//!
//! Memory is bounded: a line (other than a comment, which is skipped without
//! being buffered) or a frame's `data` longer than the decoder's limit is an
//! [`SseDecodeError`], after which the decoder stays failed.
//!
//! Two deliberate departures from the browser algorithm, both for a stream
//! read by a program rather than an `EventSource`:
//! - [`SseFrame::event`] is `None` when no `event` field was given (a browser
//!   would report `"message"`), and [`SseFrame::id`] is `None` while the last
//!   event id is empty.
//! - [`SseDecoder::finish`] dispatches a final frame that lacks its closing
//!   blank line (a browser discards it); some OpenAI-compatible servers end
//!   their streams that way.

use std::mem;

/// The default limit on one line and on one frame's `data`: 8 MiB.
pub const DEFAULT_MAX_LEN: usize = 8 * 1024 * 1024;

const BOM: [u8; 3] = [0xEF, 0xBB, 0xBF];

/// One dispatched event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SseFrame {
    /// The last event id at dispatch (it carries over from earlier frames, as
    /// the spec says); `None` while it is empty.
    pub id: Option<String>,
    /// The `event` field of this frame, if any.
    pub event: Option<String>,
    /// The `data` lines of this frame, joined with `\n`.
    pub data: String,
}

/// The stream broke the decoder's memory bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SseDecodeError {
    #[error("SSE line longer than {limit} bytes")]
    LineTooLong { limit: usize },
    #[error("SSE frame data longer than {limit} bytes")]
    FrameTooLarge { limit: usize },
}

/// Where the decoder is in skipping a leading byte-order mark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bom {
    /// This many bytes of the BOM have been seen so far (0..=2).
    Matching(usize),
    Done,
}

/// An incremental SSE decoder. Feed it body bytes as they arrive.
#[derive(Debug)]
pub struct SseDecoder {
    limit: usize,
    bom: Bom,
    /// The previous chunk ended in `\r`: a `\n` starting the next one belongs to it.
    after_cr: bool,
    /// The unterminated tail of the input. A comment is kept as a lone `:`.
    pending: Vec<u8>,
    /// `data` lines so far, each followed by `\n` (the spec's data buffer).
    data: String,
    event: String,
    last_id: String,
    retry: Option<u64>,
    failed: Option<SseDecodeError>,
}

impl Default for SseDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl SseDecoder {
    /// A decoder with the default limit ([`DEFAULT_MAX_LEN`]).
    pub fn new() -> Self {
        Self::with_limit(DEFAULT_MAX_LEN)
    }

    /// A decoder that refuses lines, and frames' `data`, longer than `limit` bytes.
    pub fn with_limit(limit: usize) -> Self {
        Self {
            limit,
            bom: Bom::Matching(0),
            after_cr: false,
            pending: Vec::new(),
            data: String::new(),
            event: String::new(),
            last_id: String::new(),
            retry: None,
            failed: None,
        }
    }

    /// Decodes `bytes`, returning the frames they complete. On error, frames
    /// completed earlier in the same call are dropped; use [`Self::feed_into`]
    /// to keep them.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Vec<SseFrame>, SseDecodeError> {
        let mut out = Vec::new();
        self.feed_into(bytes, &mut out)?;
        Ok(out)
    }

    /// Decodes `bytes`, appending the frames they complete to `out`. On error,
    /// `out` holds every frame completed before the offending line, and the
    /// decoder is failed: later calls return the same error.
    pub fn feed_into(&mut self, bytes: &[u8], out: &mut Vec<SseFrame>) -> Result<(), SseDecodeError> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        let r = self.decode(bytes, out);
        if let Err(e) = r {
            self.failed = Some(e);
        }
        r
    }

    /// Ends the stream: treats an unterminated last line as complete and
    /// dispatches a last frame that lacks its blank line. The decoder is then
    /// ready for a new stream, except that the last event id carries over.
    /// Returns `None` when there is nothing to dispatch, or when the decoder
    /// has failed (the error was returned by `feed`).
    pub fn finish(&mut self) -> Option<SseFrame> {
        if self.failed.is_some() {
            return None;
        }
        if let Bom::Matching(n) = self.bom {
            // A stream that ended inside what looked like a BOM: those bytes were text.
            self.pending.splice(0..0, BOM[..n].iter().copied());
        }
        let mut out = Vec::with_capacity(1);
        if !self.pending.is_empty() {
            let line = mem::take(&mut self.pending);
            // The pending line is already within the limit; its data may take the
            // frame past the limit by at most one line, which is bounded too.
            let _ = self.line(&line, &mut out, false);
        }
        self.dispatch(&mut out);
        self.bom = Bom::Matching(0);
        self.after_cr = false;
        self.pending.clear();
        self.data.clear();
        self.event.clear();
        out.pop()
    }

    /// The last valid `retry` field seen, in milliseconds.
    pub fn retry(&self) -> Option<u64> {
        self.retry
    }

    /// The current last event id (empty when none).
    pub fn last_event_id(&self) -> &str {
        &self.last_id
    }

    fn decode(&mut self, mut input: &[u8], out: &mut Vec<SseFrame>) -> Result<(), SseDecodeError> {
        while let Bom::Matching(n) = self.bom {
            match input.first() {
                None => return Ok(()),
                Some(&b) if b == BOM[n] => {
                    input = &input[1..];
                    self.bom = if n == 2 { Bom::Done } else { Bom::Matching(n + 1) };
                }
                Some(_) => {
                    // Not a BOM after all: the bytes matched so far are text.
                    self.pending.extend_from_slice(&BOM[..n]);
                    self.bom = Bom::Done;
                }
            }
        }
        if self.after_cr {
            match input.first() {
                None => return Ok(()),
                Some(b'\n') => input = &input[1..],
                Some(_) => {}
            }
            self.after_cr = false;
        }
        while let Some(i) = find_eol(input) {
            let line = &input[..i];
            let mut rest = &input[i + 1..];
            if input[i] == b'\r' {
                match rest.first() {
                    Some(b'\n') => rest = &rest[1..],
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
            if self.pending.is_empty() {
                self.line(line, out, true)?;
            } else {
                self.append_pending(line)?;
                let pending = mem::take(&mut self.pending);
                let r = self.line(&pending, out, true);
                // Keep the buffer's capacity for the next split line.
                self.pending = pending;
                self.pending.clear();
                r?;
            }
            input = rest;
        }
        self.append_pending(input)
    }

    fn append_pending(&mut self, bytes: &[u8]) -> Result<(), SseDecodeError> {
        let Some(&first) = bytes.first() else { return Ok(()) };
        match self.pending.first() {
            // A comment: nothing of it is needed, so nothing of it is kept.
            Some(b':') => Ok(()),
            None if first == b':' => {
                self.pending.push(b':');
                Ok(())
            }
            _ if self.pending.len() + bytes.len() > self.limit => {
                Err(SseDecodeError::LineTooLong { limit: self.limit })
            }
            _ => {
                self.pending.extend_from_slice(bytes);
                Ok(())
            }
        }
    }

    /// Interprets one complete line. `check` enforces the limits (off only in `finish`).
    fn line(&mut self, line: &[u8], out: &mut Vec<SseFrame>, check: bool) -> Result<(), SseDecodeError> {
        let Some(&first) = line.first() else {
            self.dispatch(out);
            return Ok(());
        };
        if first == b':' {
            return Ok(());
        }
        if check && line.len() > self.limit {
            return Err(SseDecodeError::LineTooLong { limit: self.limit });
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(c) => {
                let v = &line[c + 1..];
                (&line[..c], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &[][..]),
        };
        match field {
            b"data" => {
                if check && self.data.len() + value.len() + 1 > self.limit {
                    return Err(SseDecodeError::FrameTooLarge { limit: self.limit });
                }
                if self.data.capacity() == 0 {
                    self.data.reserve(value.len() + 1);
                }
                push_utf8(&mut self.data, value);
                self.data.push('\n');
            }
            b"event" => {
                self.event.clear();
                push_utf8(&mut self.event, value);
            }
            // An id containing NUL is ignored.
            b"id" if !value.contains(&0) => {
                self.last_id.clear();
                push_utf8(&mut self.last_id, value);
            }
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                // All ASCII digits, so valid UTF-8; a number too big to fit is ignored.
                if let Ok(ms) = std::str::from_utf8(value).unwrap_or_default().parse() {
                    self.retry = Some(ms);
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn dispatch(&mut self, out: &mut Vec<SseFrame>) {
        if self.data.is_empty() {
            self.event.clear();
            return;
        }
        self.data.pop(); // the '\n' after the last data line
        out.push(SseFrame {
            id: (!self.last_id.is_empty()).then(|| self.last_id.clone()),
            event: (!self.event.is_empty()).then(|| mem::take(&mut self.event)),
            data: mem::take(&mut self.data),
        });
        self.event.clear();
    }
}

/// The position of the first `\n` or `\r`, eight bytes at a time.
fn find_eol(s: &[u8]) -> Option<usize> {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    const LF: u64 = u64::from_ne_bytes([b'\n'; 8]);
    const CR: u64 = u64::from_ne_bytes([b'\r'; 8]);
    // Whether some byte of `x` is zero (exact as a yes/no, not as a position).
    let has_zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGHS != 0;
    let mut start = 0;
    for w in s.chunks_exact(8) {
        let w = u64::from_ne_bytes(w.try_into().expect("chunks of 8"));
        if has_zero(w ^ LF) || has_zero(w ^ CR) {
            break;
        }
        start += 8;
    }
    s[start..].iter().position(|&b| b == b'\n' || b == b'\r').map(|p| start + p)
}

/// Appends `bytes` as UTF-8, replacing invalid sequences with U+FFFD. Lines are
/// cut only at ASCII bytes, which always end an invalid sequence, so this gives
/// the same text as decoding the whole stream first.
fn push_utf8(buf: &mut String, bytes: &[u8]) {
    match std::str::from_utf8(bytes) {
        Ok(s) => buf.push_str(s),
        Err(_) => buf.push_str(&String::from_utf8_lossy(bytes)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(id: Option<&str>, event: Option<&str>, data: &str) -> SseFrame {
        SseFrame { id: id.map(Into::into), event: event.map(Into::into), data: data.into() }
    }

    fn data(d: &str) -> SseFrame {
        frame(None, None, d)
    }

    /// Everything `feed` produces for `input` in one call, plus `finish`.
    fn decode_all(input: &[u8]) -> Vec<SseFrame> {
        let mut dec = SseDecoder::new();
        let mut out = dec.feed(input).unwrap();
        out.extend(dec.finish());
        out
    }

    /// Feeds `input` in the given pieces, collecting frames, plus `finish`.
    fn decode_pieces<'a>(pieces: impl IntoIterator<Item = &'a [u8]>) -> Vec<SseFrame> {
        let mut dec = SseDecoder::new();
        let mut out = Vec::new();
        for p in pieces {
            dec.feed_into(p, &mut out).unwrap();
        }
        out.extend(dec.finish());
        out
    }

    #[test]
    fn find_eol_matches_a_plain_scan() {
        use rand::Rng;
        let mut rng = rand::thread_rng();
        let alphabet = [b'a', b'\n', b'\r', 0x80, 0xFF, 0x0A ^ 0x80, 0x0D ^ 0x01, b':', 0x00, 0x01];
        for _ in 0..20_000 {
            let len = rng.gen_range(0..40);
            let density = rng.gen_range(1..200);
            let s: Vec<u8> = (0..len)
                .map(|_| if rng.gen_range(0..density) == 0 { alphabet[rng.gen_range(0..alphabet.len())] } else { b'x' })
                .collect();
            let want = s.iter().position(|&b| b == b'\n' || b == b'\r');
            assert_eq!(find_eol(&s), want, "{s:?}");
        }
        for n in 0..64 {
            let mut s = vec![b'x'; 64];
            s[n] = b'\r';
            assert_eq!(find_eol(&s), Some(n));
            s[n] = b'\n';
            assert_eq!(find_eol(&s[..=n]), Some(n));
            assert_eq!(find_eol(&s[..n]), None);
        }
    }

    #[test]
    fn basic_frame_with_id_and_event() {
        let got = decode_all(b"id: 7\nevent: text_delta\ndata: {\"a\":1}\n\n");
        assert_eq!(got, vec![frame(Some("7"), Some("text_delta"), "{\"a\":1}")]);
    }

    #[test]
    fn multiple_data_lines_join_with_lf() {
        assert_eq!(decode_all(b"data: one\ndata: two\ndata:\ndata: four\n\n"), vec![data("one\ntwo\n\nfour")]);
    }

    #[test]
    fn line_endings_lf_crlf_cr_and_mixed() {
        let want = vec![data("a\nb"), data("c")];
        assert_eq!(decode_all(b"data: a\ndata: b\n\ndata: c\n\n"), want);
        assert_eq!(decode_all(b"data: a\r\ndata: b\r\n\r\ndata: c\r\n\r\n"), want);
        assert_eq!(decode_all(b"data: a\rdata: b\r\rdata: c\r\r"), want);
        assert_eq!(decode_all(b"data: a\r\ndata: b\r\rdata: c\n\r\n"), want);
    }

    #[test]
    fn cr_then_lf_in_next_chunk_is_one_line_ending() {
        let mut dec = SseDecoder::new();
        assert_eq!(dec.feed(b"data: a\r").unwrap(), vec![]);
        // If the '\n' were a second line ending, this would dispatch "a" here.
        assert_eq!(dec.feed(b"\n").unwrap(), vec![]);
        assert_eq!(dec.feed(b"data: b\r").unwrap(), vec![]);
        assert_eq!(dec.feed(b"").unwrap(), vec![]);
        assert_eq!(dec.feed(b"\r").unwrap(), vec![data("a\nb")]);
        // A lone CR followed by something other than LF.
        assert_eq!(dec.feed(b"data: c\r").unwrap(), vec![]);
        assert_eq!(dec.feed(b"\rdata: d\n\n").unwrap(), vec![data("c"), data("d")]);
    }

    #[test]
    fn comments_are_ignored() {
        let got = decode_all(b": keep-alive\n\n:\ndata: x\n: in the middle\ndata: y\n\n: bye\n");
        assert_eq!(got, vec![data("x\ny")]);
    }

    #[test]
    fn long_comments_are_not_buffered_or_limited() {
        let mut dec = SseDecoder::with_limit(16);
        let mut out = Vec::new();
        dec.feed_into(b":", &mut out).unwrap();
        for _ in 0..100 {
            dec.feed_into(&[b'x'; 64], &mut out).unwrap();
        }
        assert!(dec.pending.len() <= 1);
        dec.feed_into(b"\ndata: ok\n\n", &mut out).unwrap();
        let mut long = vec![b':'; 100];
        long.extend_from_slice(b"\ndata: ok2\n\n");
        dec.feed_into(&long, &mut out).unwrap();
        assert_eq!(out, vec![data("ok"), data("ok2")]);
    }

    #[test]
    fn field_without_colon_has_empty_value() {
        // `data` alone appends an empty line; `event` alone clears the type.
        assert_eq!(decode_all(b"data\n\n"), vec![data("")]);
        assert_eq!(decode_all(b"data\ndata\n\n"), vec![data("\n")]);
        assert_eq!(decode_all(b"event: x\nevent\ndata: d\n\n"), vec![data("d")]);
        // `id` alone resets the last event id.
        assert_eq!(decode_all(b"id: 1\ndata: a\n\nid\ndata: b\n\n"), vec![frame(Some("1"), None, "a"), data("b")]);
    }

    #[test]
    fn only_one_space_after_colon_is_dropped() {
        assert_eq!(decode_all(b"data:no-space\n\n"), vec![data("no-space")]);
        assert_eq!(decode_all(b"data:  two\n\n"), vec![data(" two")]);
        assert_eq!(decode_all(b"data:\tx\n\n"), vec![data("\tx")]);
        assert_eq!(decode_all(b"data: a: b\n\n"), vec![data("a: b")]);
        assert_eq!(decode_all(b"event:  e\ndata: x\n\n"), vec![frame(None, Some(" e"), "x")]);
    }

    #[test]
    fn blank_lines_without_data_dispatch_nothing_and_reset_event() {
        assert_eq!(decode_all(b"\n\n\nevent: lost\n\ndata: x\n\n"), vec![data("x")]);
        // An id-only frame dispatches nothing but sets the id for later frames.
        assert_eq!(decode_all(b"id: 5\n\ndata: x\n\n"), vec![frame(Some("5"), None, "x")]);
    }

    #[test]
    fn id_carries_over_and_nul_ids_are_ignored() {
        let got = decode_all(b"id: 1\ndata: a\n\ndata: b\n\nid: 2\0\ndata: c\n\nid: 3\ndata: d\n\n");
        assert_eq!(
            got,
            vec![
                frame(Some("1"), None, "a"),
                frame(Some("1"), None, "b"),
                frame(Some("1"), None, "c"),
                frame(Some("3"), None, "d"),
            ]
        );
    }

    #[test]
    fn unknown_fields_and_retry() {
        let mut dec = SseDecoder::new();
        let got = dec.feed(b"foo: bar\nretry: 1500\nDATA: no\ndata: yes\n\nretry: 12x\nretry:\n").unwrap();
        assert_eq!(got, vec![data("yes")]);
        assert_eq!(dec.retry(), Some(1500));
    }

    #[test]
    fn leading_bom_is_dropped_once() {
        assert_eq!(decode_all(b"\xEF\xBB\xBFdata: x\n\n"), vec![data("x")]);
        // A second BOM is not a BOM: it makes the field name "\u{FEFF}data".
        assert_eq!(decode_all(b"\xEF\xBB\xBF\xEF\xBB\xBFdata: x\n\ndata: y\n\n"), vec![data("y")]);
        // Split across chunks.
        assert_eq!(decode_pieces([&b"\xEF"[..], b"\xBB", b"\xBF", b"data: x\n\n"]), vec![data("x")]);
        // Something that starts like a BOM but is not one.
        assert_eq!(decode_all(b"\xEF\xBBdata: x\n\ndata: y\n\n"), vec![data("y")]);
        assert_eq!(decode_pieces([&b"\xEF\xBB"[..], b"\n", b"data: y\n\n"]), vec![data("y")]);
    }

    #[test]
    fn utf8_split_inside_a_character() {
        let text = "data: héllo 🦀 wörld\n\n".as_bytes();
        let crab = text.iter().position(|&b| b == 0xF0).unwrap();
        for cut in crab..crab + 4 {
            assert_eq!(decode_pieces([&text[..cut], &text[cut..]]), vec![data("héllo 🦀 wörld")]);
        }
    }

    #[test]
    fn invalid_utf8_becomes_replacement_characters() {
        assert_eq!(decode_all(b"data: a\xFFb\xE2\x82\n\n"), vec![data("a\u{FFFD}b\u{FFFD}")]);
    }

    #[test]
    fn finish_dispatches_a_frame_without_blank_line() {
        let mut dec = SseDecoder::new();
        assert_eq!(dec.feed(b"data: a\n\ndata: b\n").unwrap(), vec![data("a")]);
        assert_eq!(dec.finish(), Some(data("b")));
        assert_eq!(dec.finish(), None);

        // An unterminated last line counts as a line.
        let mut dec = SseDecoder::new();
        assert_eq!(dec.feed(b"event: e\ndata: [DONE]").unwrap(), vec![]);
        assert_eq!(dec.finish(), Some(frame(None, Some("e"), "[DONE]")));

        // Nothing pending, or only a comment: nothing.
        let mut dec = SseDecoder::new();
        assert_eq!(dec.feed(b"data: a\n\n: ping").unwrap(), vec![data("a")]);
        assert_eq!(dec.finish(), None);
    }

    #[test]
    fn an_over_long_line_is_an_error_and_the_decoder_stays_failed() {
        let mut dec = SseDecoder::with_limit(32);
        let mut out = Vec::new();
        dec.feed_into(b"data: ok\n\n", &mut out).unwrap();
        let err = dec.feed_into(&[b'x'; 20], &mut out).and_then(|_| dec.feed_into(&[b'x'; 20], &mut out));
        assert_eq!(err, Err(SseDecodeError::LineTooLong { limit: 32 }));
        assert_eq!(dec.feed(b"\n\ndata: more\n\n"), Err(SseDecodeError::LineTooLong { limit: 32 }));
        assert_eq!(dec.finish(), None);
        assert_eq!(out, vec![data("ok")]);
        assert!(dec.pending.len() <= 32);

        // The same line arriving in one piece fails the same way, after the frame before it.
        let mut dec = SseDecoder::with_limit(32);
        let mut out = Vec::new();
        let mut input = b"data: ok\n\n".to_vec();
        input.extend_from_slice(&[b'x'; 40]);
        input.push(b'\n');
        assert_eq!(dec.feed_into(&input, &mut out), Err(SseDecodeError::LineTooLong { limit: 32 }));
        assert_eq!(out, vec![data("ok")]);
    }

    #[test]
    fn an_over_large_frame_is_an_error() {
        let mut dec = SseDecoder::with_limit(32);
        let line = b"data: 0123456789\n";
        assert_eq!(dec.feed(line).unwrap(), vec![]);
        assert_eq!(dec.feed(line).unwrap(), vec![]);
        assert_eq!(dec.feed(line), Err(SseDecodeError::FrameTooLarge { limit: 32 }));
    }

    /// A realistic stream: an OpenAI-style body with CRLFs, comments, ids,
    /// multi-line data, non-ASCII text, a BOM, and a last frame without its blank line.
    fn realistic() -> Vec<u8> {
        let mut s = Vec::new();
        s.extend_from_slice(b"\xEF\xBB\xBF: connected\r\n\r\n");
        s.extend_from_slice(b"retry: 3000\r\nid: 1\r\nevent: message\r\n");
        s.extend_from_slice("data: {\"choices\":[{\"delta\":{\"content\":\"Grüße 🦀\"}}]}\r\n\r\n".as_bytes());
        s.extend_from_slice(b": keep-alive\n\n");
        s.extend_from_slice(b"id: 2\rdata: line one\rdata:line two\rdata\r\r");
        s.extend_from_slice(b"data: {\"usage\":{\"prompt_tokens\":3}}\n\n");
        s.extend_from_slice("event: 日本\ndata: 語\n\n".as_bytes());
        s.extend_from_slice(b"data: [DONE]\n");
        s
    }

    fn realistic_frames() -> Vec<SseFrame> {
        vec![
            frame(Some("1"), Some("message"), "{\"choices\":[{\"delta\":{\"content\":\"Grüße 🦀\"}}]}"),
            frame(Some("2"), None, "line one\nline two\n"),
            frame(Some("2"), None, "{\"usage\":{\"prompt_tokens\":3}}"),
            frame(Some("2"), Some("日本"), "語"),
            frame(Some("2"), None, "[DONE]"),
        ]
    }

    #[test]
    fn split_at_every_offset_gives_the_same_frames() {
        let input = realistic();
        let want = realistic_frames();
        assert_eq!(decode_all(&input), want);
        for cut in 0..=input.len() {
            assert_eq!(decode_pieces([&input[..cut], &input[cut..]]), want, "split at {cut}");
        }
        for a in 0..=input.len() {
            for b in a..=input.len() {
                let got = decode_pieces([&input[..a], &input[a..b], &input[b..]]);
                assert_eq!(got, want, "split at {a} and {b}");
            }
        }
    }

    #[test]
    fn byte_by_byte_gives_the_same_frames() {
        let input = realistic();
        assert_eq!(decode_pieces(input.chunks(1)), realistic_frames());
        for size in 2..8 {
            assert_eq!(decode_pieces(input.chunks(size)), realistic_frames(), "chunks of {size}");
        }
    }

    #[test]
    fn errors_do_not_depend_on_splits() {
        let mut input = b"data: ok\n\n".to_vec();
        input.extend_from_slice(&[b'y'; 40]);
        input.extend_from_slice(b"\n\ndata: never\n\n");
        for cut in 0..=input.len() {
            let mut dec = SseDecoder::with_limit(32);
            let mut out = Vec::new();
            let r = dec.feed_into(&input[..cut], &mut out).and_then(|_| dec.feed_into(&input[cut..], &mut out));
            assert_eq!(r, Err(SseDecodeError::LineTooLong { limit: 32 }), "split at {cut}");
            assert_eq!(out, vec![data("ok")], "split at {cut}");
        }
    }
}
