//! One turn against the stream URL: POST a `TurnRequest`, decode the SSE body
//! as it arrives and print it (`render`; `--raw`: the bytes as received),
//! then a short footer. A one-shot turn that changed the ontology ends with
//! what the user now has, read back through the entities API. The REPL keeps
//! the session across turns and takes a few `/` commands (scope, projects).

use crate::entities::{self, Entities, Touched};
use crate::progress::{Progress, TICK};
use crate::render::{Renderer, Waiting};
use crate::scope::{Scope, ScopeArgs};
use crate::{ChatArgs, Conn};
use futures::StreamExt;
use shared::message::Usage;
use shared::sse::{SseDecoder, SseFrame, StreamEvent};
use std::io::{BufRead, IsTerminal, Write};
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

    /// The footer under a rendered turn: `· done in 2.31 s (first text 1.10 s, 260 tokens)`.
    pub fn footer(&self, usage: Option<&Usage>) -> String {
        let secs = |ms: u128| format!("{:.2} s", ms as f64 / 1000.0);
        let mut details = Vec::new();
        if let Some(t) = self.first_text {
            details.push(format!("first text {}", secs(t)));
        }
        if let Some(u) = usage {
            details.push(format!("{} tokens", u.total_tokens));
        }
        let details = if details.is_empty() { String::new() } else { format!(" ({})", details.join(", ")) };
        match self.done {
            Some(d) => format!("· done in {}{details}", secs(d)),
            None => format!("· no done event{details}"),
        }
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
    pub usage: Option<Usage>,
    /// What the turn's `entity_patch`es touched.
    pub touched: Touched,
    /// Calls that wait for the user's yes: (approval id, the operation in words).
    pub asked: Vec<(String, String)>,
}

/// Folds one frame into the outcome: the event it carries (`None` when the
/// frame breaks the contract) and a warning when it does, or when its id
/// skips one.
fn observe(
    out: &mut Outcome,
    elapsed: u128,
    frame: &SseFrame,
    last_id: &mut Option<u64>,
) -> (Option<StreamEvent>, Option<String>) {
    let mut warning = None;
    if let Some(id) = frame.id.as_deref().and_then(|i| i.parse::<u64>().ok()) {
        let expected = last_id.map_or(1, |l| l + 1);
        if id != expected {
            warning = Some(format!("frame id {id}, expected {expected}"));
        }
        *last_id = Some(id);
    }
    let event = match serde_json::from_str::<StreamEvent>(&frame.data) {
        Ok(e) => e,
        Err(e) => return (None, Some(format!("does not match the event contract: {e}: {}", frame.data))),
    };
    match &event {
        StreamEvent::TextDelta { content } => {
            out.timing.first_text.get_or_insert(elapsed);
            out.text.push_str(content);
        }
        StreamEvent::Session { session } => out.session_id = Some(session.id.to_string()),
        StreamEvent::EntityPatch { patch } => out.touched.observe(patch),
        StreamEvent::ApprovalRequired { approval_id, summary, .. } => {
            out.asked.push((approval_id.clone(), summary.clone()))
        }
        StreamEvent::Error { .. } => out.saw_error = true,
        StreamEvent::Done { session_id, usage, .. } => {
            out.saw_done = true;
            out.timing.done = Some(elapsed);
            out.usage = *usage;
            if let Some(id) = session_id {
                out.session_id = Some(id.to_string());
            }
        }
        _ => {}
    }
    (Some(event), warning)
}

/// The conversation's state: who and where, and how it prints.
struct Chat {
    http: reqwest::Client,
    conn: Conn,
    raw: bool,
    run_id: Option<String>,
    scope: Scope,
    renderer: Renderer,
    /// Whether the progress line may draw (stderr is a terminal, not `--raw`).
    progress: bool,
}

fn print(text: &str) {
    if !text.is_empty() {
        let mut w = std::io::stdout().lock();
        let _ = w.write_all(text.as_bytes());
        let _ = w.flush();
    }
}

impl Chat {
    /// Sends one turn and prints it. `Err` when no stream started (transport
    /// failure, non-2xx answer); a stream that breaks later is reported and
    /// shows as no `done`.
    async fn turn(&mut self, message: &str, session: Option<&str>) -> Result<Outcome, String> {
        let body = self.scope.request(message, session, self.run_id.as_deref());
        let body = serde_json::to_value(&body).map_err(|e| e.to_string())?;
        let mut out = self.stream(&self.conn.url.clone(), &body).await?;
        // Calls that wait for a yes: asked here, y/N each, answered in one
        // request, which the server continues as a turn.
        while let (false, Some(sid)) = (out.asked.is_empty(), out.session_id.clone()) {
            let answers: Vec<serde_json::Value> = out
                .asked
                .iter()
                .map(|(id, summary)| {
                    let yes = ask_yes_no(&format!("{summary}? [y/N] "));
                    let reason = (!yes).then_some("the user said no");
                    serde_json::json!({"approval_id": id, "approved": yes, "reason": reason})
                })
                .collect();
            let (first, more) = answers.split_first().expect("one asked at least");
            let body = serde_json::json!({"approved": first["approved"], "reason": first["reason"], "more": more});
            let path = format!("sessions/{sid}/approvals/{}", first["approval_id"].as_str().unwrap_or(""));
            let url = crate::sessions::url(&self.conn.url, &path);
            out = self.stream(&url, &body).await?;
        }
        Ok(out)
    }

    /// POSTs `body` to `url` and prints the turn it streams.
    async fn stream(&mut self, url: &str, body: &serde_json::Value) -> Result<Outcome, String> {
        let mut req = self.http.post(url).header("accept", "text/event-stream").json(body);
        if let Some(t) = &self.conn.token {
            req = req.bearer_auth(t);
        }
        let started = Instant::now();
        let mut progress = Progress::new(self.progress, started);
        progress.set(Some("sending".into()));
        progress.tick();
        let resp = req.send().await;
        progress.set(None);
        let resp = resp.map_err(|e| format!("request failed: {e}"))?;
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
        let mut ticker = tokio::time::interval(TICK);
        loop {
            // Ctrl-C during a turn asks the server to stop it, then keeps reading
            // so the final events (the partial answer's `done`) are still printed.
            let next = tokio::select! {
                c = stream.next() => c,
                _ = ticker.tick(), if progress.active() => {
                    if self.renderer.at_line_start() {
                        progress.tick();
                    }
                    continue;
                }
                _ = tokio::signal::ctrl_c(), if !stop_sent => {
                    stop_sent = true;
                    progress.clear();
                    match out.session_id.as_deref() {
                        Some(sid) => eprintln!("  (^C) {}", crate::sessions::stop(&self.http, &self.conn.url, self.conn.token.as_deref(), sid).await),
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
                    progress.clear();
                    eprintln!("error: stream broken after {elapsed} ms: {e}");
                    break;
                }
            };
            out.timing.first_byte.get_or_insert(elapsed);
            if self.raw {
                let mut w = std::io::stdout().lock();
                let _ = w.write_all(&chunk);
                let _ = w.flush();
            }
            let mut frames = Vec::new();
            let decoded = decoder.feed_into(&chunk, &mut frames);
            for frame in &frames {
                self.show(&mut out, &mut progress, elapsed, frame, &mut last_id);
            }
            if let Err(e) = decoded {
                progress.clear();
                eprintln!("error: undecodable stream after {elapsed} ms: {e}");
                break;
            }
        }
        if let Some(frame) = decoder.finish() {
            progress.clear();
            eprintln!("  (!) the last frame lacks its closing blank line");
            self.show(&mut out, &mut progress, started.elapsed().as_millis(), &frame, &mut last_id);
        }
        progress.set(None);
        Ok(out)
    }

    /// Folds one frame into the outcome and prints it (unless `--raw`), with any warning on stderr.
    fn show(
        &mut self,
        out: &mut Outcome,
        progress: &mut Progress,
        elapsed: u128,
        frame: &SseFrame,
        last_id: &mut Option<u64>,
    ) {
        let (event, warning) = observe(out, elapsed, frame, last_id);
        // The server moved the conversation (a project was created): the
        // next turns name the new scope, since an explicit one always wins.
        if let Some(StreamEvent::ContextShift { current, entity_name, .. }) = &event {
            let project = current.focus.as_ref().and_then(|f| f.get("projectId")).and_then(|p| p.as_str());
            if let Some(id) = project {
                self.scope = Scope {
                    context_type: current.context_type.as_str().to_string(),
                    project: Some((id.to_string(), entity_name.clone())),
                    entity: None,
                    entity_type: None,
                    named: true,
                };
                self.renderer.set_scope(Some((id, entity_name)));
            }
        }
        if !self.raw {
            if let Some(event) = &event {
                let (text, waiting) = self.renderer.event(event);
                if !text.is_empty() {
                    progress.clear();
                    print(&text);
                }
                match waiting {
                    Waiting::On(label) => progress.set(Some(label)),
                    Waiting::Off => progress.set(None),
                    Waiting::Same => {}
                }
            }
        }
        if let Some(w) = warning {
            progress.clear();
            print(&self.renderer.end_line());
            eprintln!("  (!) {w}");
        }
    }

    /// Prints what follows a turn: the footer (`--raw`: the timing summary on
    /// stderr) and a warning when the stream ended without `done`. Returns the
    /// turn's exit code.
    fn finish(&mut self, out: &Outcome) -> u8 {
        if self.raw {
            eprintln!("{}", out.timing.summary());
        } else {
            print(&self.renderer.end_line());
            println!("{}", out.timing.footer(out.usage.as_ref()));
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

    /// After a one-shot turn that changed the ontology: what the user now has.
    async fn read_back(&self, touched: &Touched) {
        if self.raw || touched.is_empty() {
            return;
        }
        let Some(api) = self.conn.entities(&self.http) else {
            eprintln!("note: set --entities-url or ENTITIES_URL to read back what this turn changed");
            return;
        };
        match entities::read_back(&api, touched).await {
            Ok(text) => print(&format!("\n{text}")),
            Err(e) => eprintln!("error: reading back what the turn changed: {e}"),
        }
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
    let api = args.conn.entities(&http);
    let scope = match Scope::resolve(&args.scope, api.as_ref()).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return 1;
        }
    };
    let mut renderer = Renderer::new();
    renderer.set_scope(scope.project.as_ref().map(|(id, name)| (id.as_str(), name.as_str())));
    let mut chat = Chat {
        progress: !args.raw && std::io::stderr().is_terminal(),
        http,
        conn: args.conn.clone(),
        raw: args.raw,
        run_id: args.run_id.clone(),
        scope,
        renderer,
    };
    if !args.repl {
        let message = args.message.clone().unwrap_or_default();
        return match chat.turn(&message, args.session.as_deref()).await {
            Ok(out) => {
                let code = chat.finish(&out);
                chat.read_back(&out.touched).await;
                code
            }
            Err(e) => {
                eprintln!("error: {e}");
                1
            }
        };
    }
    repl(&mut chat, args.session.clone()).await
}

const REPL_HELP: &str = "one message per line; end with Ctrl-D (Ctrl-C during a turn stops it)
  /project <id|name>   continue in a project      /global   back to the workspace
  /calendar            your calendar              /projects list your projects
  /new                 start a new session        /session  show the session id
  /help                this text";

/// What a REPL line asks for.
#[derive(Debug, PartialEq, Eq)]
enum Line<'a> {
    Empty,
    Message(&'a str),
    Project(&'a str),
    Global,
    Calendar,
    Projects,
    New,
    Session,
    Help,
    Quit,
    Unknown(&'a str),
}

fn parse_line(line: &str) -> Line<'_> {
    let line = line.trim();
    let Some(cmd) = line.strip_prefix('/') else {
        return if line.is_empty() { Line::Empty } else { Line::Message(line) };
    };
    let (name, rest) = cmd.split_once(char::is_whitespace).map_or((cmd, ""), |(n, r)| (n, r.trim()));
    match (name, rest) {
        ("project", "") => Line::Unknown(line),
        ("project", p) => Line::Project(p),
        ("global", "") => Line::Global,
        ("calendar", "") => Line::Calendar,
        ("projects", "") => Line::Projects,
        ("new", "") => Line::New,
        ("session", "") => Line::Session,
        ("help", "") => Line::Help,
        ("quit" | "exit", "") => Line::Quit,
        _ => Line::Unknown(line),
    }
}

async fn repl(chat: &mut Chat, mut session: Option<String>) -> u8 {
    let mut code = 0;
    let stdin = std::io::stdin();
    eprintln!("{REPL_HELP}");
    loop {
        eprint!("{}> ", chat.scope.label());
        let mut line = String::new();
        match stdin.lock().read_line(&mut line) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                eprintln!("error: {e}");
                return 1;
            }
        }
        match parse_line(&line) {
            Line::Empty => {}
            Line::Message(message) => match chat.turn(message, session.as_deref()).await {
                Ok(out) => {
                    code = chat.finish(&out);
                    if out.session_id.is_some() {
                        session = out.session_id;
                    }
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    code = 1;
                }
            },
            Line::Project(p) => {
                let Some(api) = chat.conn.entities(&chat.http) else {
                    eprintln!("error: --project needs the entities API: set --entities-url or ENTITIES_URL");
                    continue;
                };
                match api.find_project(p).await {
                    Ok(found) => {
                        let args = ScopeArgs::default();
                        chat.scope = Scope::with(&args, Some((found.id.to_string(), found.name.clone())));
                        chat.renderer.set_scope(Some((&found.id.to_string(), &found.name)));
                        eprintln!("· now in project {} ({})", found.name, found.id);
                    }
                    Err(e) => eprintln!("error: {e}"),
                }
            }
            Line::Global => {
                chat.scope = Scope::global();
                chat.renderer.set_scope(None);
            }
            Line::Calendar => {
                chat.scope = Scope::calendar();
                chat.renderer.set_scope(None);
            }
            Line::Projects => {
                if let Some(api) = chat.conn.entities(&chat.http) {
                    print_projects(&api).await;
                }
            }
            Line::New => {
                session = None;
                eprintln!("· the next message starts a new session");
            }
            Line::Session => eprintln!("{}", session.as_deref().unwrap_or("(no session yet)")),
            Line::Help => eprintln!("{REPL_HELP}"),
            Line::Quit => break,
            Line::Unknown(l) => eprintln!("unknown command {l:?}; /help lists them"),
        }
    }
    code
}

async fn print_projects(api: &Entities) -> u8 {
    match api.projects().await {
        Ok(ps) if ps.is_empty() => {
            println!("(no projects yet)");
            0
        }
        Ok(ps) => {
            for p in &ps {
                println!("{}", entities::project_line(p));
            }
            0
        }
        Err(e) => {
            eprintln!("error: {e}");
            1
        }
    }
}

/// `agentic-chat projects`.
pub async fn list_projects(conn: &Conn) -> u8 {
    let http = reqwest::Client::new();
    match conn.entities(&http) {
        Some(api) => print_projects(&api).await,
        None => {
            eprintln!("error: set --entities-url or ENTITIES_URL (the stream URL is not a `cargo lambda watch` one)");
            1
        }
    }
}

/// `agentic-chat prewarm`.
pub async fn prewarm(conn: &Conn, scope: &ScopeArgs, session: Option<&str>) -> u8 {
    let http = reqwest::Client::new();
    let Some(url) = conn.function_url("prewarm") else {
        eprintln!("error: set --prewarm-url or PREWARM_URL (the stream URL is not a `cargo lambda watch` one)");
        return 1;
    };
    let scope = match Scope::resolve(scope, conn.entities(&http).as_ref()).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return 1;
        }
    };
    match entities::prewarm(&http, &url, conn.token.as_deref(), &scope.prewarm_body(session), &scope.flags()).await {
        Ok(report) => {
            println!("{report}");
            0
        }
        Err(e) => {
            eprintln!("error: {e}");
            1
        }
    }
}

/// Asks `question` on stderr and reads the answer from stdin: yes only for
/// `y` or `yes` (any case); no at the end of input.
fn ask_yes_no(question: &str) -> bool {
    eprint!("{question}");
    let mut line = String::new();
    let _ = std::io::stdin().lock().read_line(&mut line);
    matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(id: &str, event: &str, data: &str) -> SseFrame {
        SseFrame { id: Some(id.into()), event: Some(event.into()), data: data.into() }
    }

    #[test]
    fn summary_and_footer() {
        let t = Timing { headers: Some(3), first_byte: Some(12), first_text: Some(340), done: Some(1200) };
        assert_eq!(t.summary(), "timing: headers 3 ms, first byte 12 ms, first text_delta 340 ms, done 1200 ms");
        assert_eq!(Timing::default().summary(), "timing: headers -, first byte -, first text_delta -, done -");
        let usage = Usage { prompt_tokens: 200, completion_tokens: 60, total_tokens: 260 };
        assert_eq!(t.footer(Some(&usage)), "· done in 1.20 s (first text 0.34 s, 260 tokens)");
        assert_eq!(Timing::default().footer(None), "· no done event");
    }

    #[test]
    fn outcome_tracks_session_text_error_patches_and_gaps() {
        let mut out = Outcome::default();
        let mut last = None;
        let session = r#"{"type":"session","session":{"id":"019aa000-0000-7000-8000-000000000001","context_type":"global","status":"active","message_count":0,"created_at":1,"last_activity_at":1}}"#;
        let (ev, w) = observe(&mut out, 5, &frame("1", "session", session), &mut last);
        assert!(matches!(ev, Some(StreamEvent::Session { .. })) && w.is_none());
        assert_eq!(out.session_id.as_deref(), Some("019aa000-0000-7000-8000-000000000001"));
        observe(&mut out, 7, &frame("2", "text_delta", r#"{"type":"text_delta","content":"a"}"#), &mut last);
        observe(&mut out, 9, &frame("3", "text_delta", r#"{"type":"text_delta","content":"b"}"#), &mut last);
        let (_, gap) = observe(
            &mut out,
            10,
            &frame("5", "error", r#"{"type":"error","code":"x","message":"m","retryable":false}"#),
            &mut last,
        );
        assert_eq!(gap.as_deref(), Some("frame id 5, expected 4"));
        let patch = r#"{"type":"entity_patch","patch":{"project_id":"p1","version":2,"changes":[{"op":"deleted","kind":"task","id":"t1"}]}}"#;
        observe(&mut out, 11, &frame("6", "entity_patch", patch), &mut last);
        assert!(!out.touched.is_empty());
        assert_eq!(
            (out.text.as_str(), out.timing.first_text, out.saw_error, out.saw_done),
            ("ab", Some(7), true, false)
        );
        let (ev, bad) = observe(&mut out, 12, &frame("7", "done", r#"{"type":"done"}"#), &mut last);
        assert!(ev.is_none() && bad.unwrap().starts_with("does not match the event contract"));
    }

    #[test]
    fn repl_lines() {
        assert_eq!(parse_line("  hello there \n"), Line::Message("hello there"));
        assert_eq!(parse_line("\n"), Line::Empty);
        assert_eq!(parse_line("/project  My Launch \n"), Line::Project("My Launch"));
        assert_eq!(parse_line("/project"), Line::Unknown("/project"));
        assert_eq!(parse_line("/global"), Line::Global);
        assert_eq!(parse_line("/calendar"), Line::Calendar);
        assert_eq!(parse_line("/projects"), Line::Projects);
        assert_eq!(parse_line("/new"), Line::New);
        assert_eq!(parse_line("/exit"), Line::Quit);
        assert_eq!(parse_line("/nope"), Line::Unknown("/nope"));
    }
}
