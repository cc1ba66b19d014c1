//! One turn against the stream URL: POST a `TurnRequest`, decode the SSE body as it
//! arrives, print each event with its arrival time, then a timing summary.

use crate::ChatArgs;
use futures::StreamExt;
use shared::sse::{SseDecoder, SseFrame};
use shared::turn::TurnRequest;
use std::io::{BufRead, Write};
use std::time::Instant;

/// Milliseconds since the request was sent, for the moments the summary reports.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Timing {
    pub headers: Option<u128>,
    pub first_byte: Option<u128>,
    pub first_text: Option<u128>,
    pub done: Option<u128>,
}

impl Timing {
    pub fn summary(&self) -> String {
        fn ms(v: Option<u128>) -> String {
            v.map_or_else(|| "-".to_string(), |v| format!("{v} ms"))
        }
        format!(
            "timing: headers {}, first byte {}, first text_delta {}, done {}",
            ms(self.headers),
            ms(self.first_byte),
            ms(self.first_text),
            ms(self.done)
        )
    }
}

/// What one turn left behind.
#[derive(Debug, Default)]
pub struct Outcome {
    pub timing: Timing,
    pub session_id: Option<String>,
    pub saw_error: bool,
    pub saw_done: bool,
    pub text: String,
}

/// One printed line for a frame: `[  12 ms] #1 agent_state {"state":"thinking"}`.
/// The JSON's `type` is dropped (it is the event name); a text_delta shows its
/// content as a quoted string so whitespace and newlines stay visible.
pub fn format_frame(elapsed_ms: u128, frame: &SseFrame) -> String {
    let id = frame.id.as_deref().map(|i| format!("#{i} ")).unwrap_or_default();
    let parsed: Option<serde_json::Value> = serde_json::from_str(&frame.data).ok();
    let kind = frame
        .event
        .clone()
        .or_else(|| parsed.as_ref().and_then(|v| v["type"].as_str().map(str::to_string)))
        .unwrap_or_else(|| "message".into());
    let body = match parsed {
        Some(serde_json::Value::Object(mut map)) => {
            map.remove("type");
            match (kind.as_str(), map.get("content")) {
                ("text_delta", Some(serde_json::Value::String(s))) if map.len() == 1 => format!("{s:?}"),
                _ => serde_json::Value::Object(map).to_string(),
            }
        }
        _ => frame.data.clone(),
    };
    format!("[{elapsed_ms:>5} ms] {id}{kind} {body}")
}

/// Folds one frame into the outcome; returns a warning when the frame breaks the contract.
fn observe(out: &mut Outcome, elapsed: u128, frame: &SseFrame, last_id: &mut Option<u64>) -> Option<String> {
    let mut warning = None;
    if let Some(id) = frame.id.as_deref().and_then(|i| i.parse::<u64>().ok()) {
        let expected = last_id.map_or(1, |l| l + 1);
        if id != expected {
            warning = Some(format!("frame id {id}, expected {expected}"));
        }
        *last_id = Some(id);
    }
    let Ok(v) = serde_json::from_str::<serde_json::Value>(&frame.data) else {
        return Some("data is not JSON".into());
    };
    if let Err(e) = serde_json::from_value::<shared::sse::StreamEvent>(v.clone()) {
        warning.get_or_insert(format!("does not match the event contract: {e}"));
    }
    match v["type"].as_str() {
        Some("text_delta") => {
            out.timing.first_text.get_or_insert(elapsed);
            out.text.push_str(v["content"].as_str().unwrap_or_default());
        }
        Some("session") => {
            if let Some(id) = v["session"]["id"].as_str() {
                out.session_id = Some(id.to_string());
            }
        }
        Some("error") => out.saw_error = true,
        Some("done") => {
            out.saw_done = true;
            out.timing.done = Some(elapsed);
            if let Some(id) = v["session_id"].as_str() {
                out.session_id = Some(id.to_string());
            }
        }
        _ => {}
    }
    warning
}

pub fn request_body(args: &ChatArgs, message: &str, session: Option<&str>) -> TurnRequest {
    TurnRequest {
        message: message.to_string(),
        session_id: session.map(str::to_string),
        context_type: Some(args.context_type.clone()),
        entity_id: args.entity_id.clone(),
        stream_run_id: args.run_id.clone().map(serde_json::Value::String),
        ..Default::default()
    }
}

/// Sends one turn and prints it. `Err` when no stream started (transport failure,
/// non-2xx answer); a stream that breaks later is reported and shows as no `done`.
async fn turn(
    http: &reqwest::Client,
    args: &ChatArgs,
    message: &str,
    session: Option<&str>,
) -> Result<Outcome, String> {
    let body = request_body(args, message, session);
    let mut req = http.post(&args.url).header("accept", "text/event-stream").json(&body);
    if let Some(t) = &args.token {
        req = req.bearer_auth(t);
    }
    let started = Instant::now();
    let resp = req.send().await.map_err(|e| format!("request failed: {e}"))?;
    let mut out = Outcome::default();
    out.timing.headers = Some(started.elapsed().as_millis());
    let status = resp.status();
    if !status.is_success() {
        let text = resp.text().await.unwrap_or_default();
        return Err(format!("HTTP {status}\n{text}"));
    }

    let mut decoder = SseDecoder::new();
    let mut last_id = None;
    let mut stream = resp.bytes_stream();
    let mut stop_sent = false;
    loop {
        // Ctrl-C during a turn asks the server to stop it, then keeps reading
        // so the final events (the partial answer's `done`) are still printed.
        let next = tokio::select! {
            c = stream.next() => c,
            _ = tokio::signal::ctrl_c(), if !stop_sent => {
                stop_sent = true;
                match out.session_id.as_deref() {
                    Some(sid) => eprintln!("  (^C) {}", crate::sessions::stop(http, &args.url, args.token.as_deref(), sid).await),
                    None => eprintln!("  (^C) no session yet; nothing to stop"),
                }
                continue;
            }
        };
        let Some(chunk) = next else { break };
        let elapsed = started.elapsed().as_millis();
        let chunk = match chunk {
            Ok(c) => c,
            Err(e) => {
                eprintln!("error: stream broken after {elapsed} ms: {e}");
                break;
            }
        };
        out.timing.first_byte.get_or_insert(elapsed);
        if args.raw {
            let mut w = std::io::stdout().lock();
            let _ = w.write_all(&chunk);
            let _ = w.flush();
        }
        let mut frames = Vec::new();
        let decoded = decoder.feed_into(&chunk, &mut frames);
        for frame in &frames {
            show(args, &mut out, elapsed, frame, &mut last_id);
        }
        if let Err(e) = decoded {
            eprintln!("error: undecodable stream after {elapsed} ms: {e}");
            break;
        }
    }
    if let Some(frame) = decoder.finish() {
        eprintln!("  (!) the last frame lacks its closing blank line");
        show(args, &mut out, started.elapsed().as_millis(), &frame, &mut last_id);
    }
    Ok(out)
}

/// Folds one frame into the outcome and prints it (unless `--raw`), with any warning on stderr.
fn show(args: &ChatArgs, out: &mut Outcome, elapsed: u128, frame: &SseFrame, last_id: &mut Option<u64>) {
    let warning = observe(out, elapsed, frame, last_id);
    if !args.raw {
        let mut w = std::io::stdout().lock();
        let _ = writeln!(w, "{}", format_frame(elapsed, frame));
        let _ = w.flush();
    }
    if let Some(w) = warning {
        eprintln!("  (!) {w}");
    }
}

/// Prints what follows a turn: the answer, the summary, and a warning when the
/// stream ended without `done`. Returns the turn's exit code.
fn finish(args: &ChatArgs, out: &Outcome) -> u8 {
    let summary = out.timing.summary();
    if args.raw {
        eprintln!("{summary}");
    } else {
        if !out.text.is_empty() {
            println!("answer: {}", out.text);
        }
        println!("{summary}");
    }
    if !out.saw_done {
        eprintln!("error: the stream ended without a done event");
        return 1;
    }
    if out.saw_error {
        2
    } else {
        0
    }
}

/// Runs the `chat` subcommand; returns the process exit code.
pub async fn run(args: ChatArgs) -> u8 {
    let http = match reqwest::Client::builder().build() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return 1;
        }
    };
    if !args.repl {
        let message = args.message.clone().unwrap_or_default();
        return match turn(&http, &args, &message, args.session.as_deref()).await {
            Ok(out) => finish(&args, &out),
            Err(e) => {
                eprintln!("error: {e}");
                1
            }
        };
    }

    let mut session = args.session.clone();
    let mut code = 0;
    let stdin = std::io::stdin();
    eprintln!("one message per line; end with Ctrl-D");
    loop {
        eprint!("{}> ", session.as_deref().unwrap_or("new"));
        let mut line = String::new();
        match stdin.lock().read_line(&mut line) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                eprintln!("error: {e}");
                return 1;
            }
        }
        let message = line.trim();
        if message.is_empty() {
            continue;
        }
        match turn(&http, &args, message, session.as_deref()).await {
            Ok(out) => {
                code = finish(&args, &out);
                if out.session_id.is_some() {
                    session = out.session_id;
                }
            }
            Err(e) => {
                eprintln!("error: {e}");
                code = 1;
            }
        }
    }
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(id: &str, event: &str, data: &str) -> SseFrame {
        SseFrame { id: Some(id.into()), event: Some(event.into()), data: data.into() }
    }

    #[test]
    fn summary_line() {
        let t = Timing { headers: Some(3), first_byte: Some(12), first_text: Some(340), done: Some(1200) };
        assert_eq!(t.summary(), "timing: headers 3 ms, first byte 12 ms, first text_delta 340 ms, done 1200 ms");
        assert_eq!(Timing::default().summary(), "timing: headers -, first byte -, first text_delta -, done -");
    }

    #[test]
    fn frames_print_readably() {
        let f = frame("1", "agent_state", r#"{"type":"agent_state","state":"thinking"}"#);
        assert_eq!(format_frame(12, &f), r#"[   12 ms] #1 agent_state {"state":"thinking"}"#);
        let f = frame("4", "text_delta", r#"{"type":"text_delta","content":"Hi\nthere"}"#);
        assert_eq!(format_frame(340, &f), r#"[  340 ms] #4 text_delta "Hi\nthere""#);
        let f = SseFrame { id: None, event: None, data: "not json".into() };
        assert_eq!(format_frame(1, &f), "[    1 ms] message not json");
    }

    #[test]
    fn outcome_tracks_session_text_error_and_gaps() {
        let mut out = Outcome::default();
        let mut last = None;
        let session = r#"{"type":"session","session":{"id":"s-1"}}"#;
        observe(&mut out, 5, &frame("1", "session", session), &mut last);
        assert_eq!(out.session_id.as_deref(), Some("s-1"));
        assert!(observe(&mut out, 7, &frame("2", "text_delta", r#"{"type":"text_delta","content":"a"}"#), &mut last)
            .is_none());
        observe(&mut out, 9, &frame("3", "text_delta", r#"{"type":"text_delta","content":"b"}"#), &mut last);
        let gap = observe(
            &mut out,
            10,
            &frame("5", "error", r#"{"type":"error","code":"x","message":"m","retryable":false}"#),
            &mut last,
        );
        assert_eq!(gap.as_deref(), Some("frame id 5, expected 4"));
        assert_eq!(
            (out.text.as_str(), out.timing.first_text, out.saw_error, out.saw_done),
            ("ab", Some(7), true, false)
        );
    }
}
