//! The sessions API from the command line: list, history, stop. URLs are
//! relative to the stream function's URL (`…/lambda-url/stream/sessions…`).

use shared::session::api::{MessagesPage, SessionList, StopAnswer};

pub fn url(base: &str, rest: &str) -> String {
    format!("{}/{rest}", base.trim_end_matches('/'))
}

async fn get_json(base: &str, token: Option<&str>, rest: &str) -> Result<serde_json::Value, String> {
    let mut req = reqwest::Client::new().get(url(base, rest));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await.map_err(|e| format!("request failed: {e}"))?;
    let status = resp.status();
    let body = resp.text().await.unwrap_or_default();
    if !status.is_success() {
        return Err(format!("HTTP {status}\n{body}"));
    }
    serde_json::from_str(&body).map_err(|e| format!("not JSON: {e}"))
}

/// `agentic-chat sessions`: one line a session.
pub async fn get(base: &str, token: Option<&str>, rest: &str) -> u8 {
    let list: SessionList =
        match get_json(base, token, rest).await.and_then(|v| serde_json::from_value(v).map_err(|e| e.to_string())) {
            Ok(l) => l,
            Err(e) => {
                eprintln!("error: {e}");
                return 1;
            }
        };
    for s in &list.sessions {
        let status = serde_json::to_value(s.status).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default();
        println!(
            "{}  {:>4} msgs  {:<7} {:<8} {}",
            s.id,
            s.message_count,
            status,
            s.context_type.as_str(),
            s.title.as_deref().unwrap_or("(untitled)")
        );
    }
    if let Some(c) = list.next_cursor {
        println!("more: agentic-chat sessions --cursor {c}");
    }
    0
}

/// `agentic-chat history SESSION`: the messages, oldest first.
pub async fn history(base: &str, token: Option<&str>, session: &str, query: &str) -> u8 {
    let rest = format!("sessions/{session}/messages?{query}");
    let page: MessagesPage =
        match get_json(base, token, &rest).await.and_then(|v| serde_json::from_value(v).map_err(|e| e.to_string())) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("error: {e}");
                return 1;
            }
        };
    for m in &page.messages {
        let role = serde_json::to_value(m.role).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default();
        let marker = match (&m.error, m.status) {
            (Some(e), _) => format!("  [error {}: {}]", e.code, e.message),
            (None, shared::session::api::MessageStatus::Stopped) => "  [stopped]".to_string(),
            (None, shared::session::api::MessageStatus::CutOff) => "  [cut off]".to_string(),
            _ => String::new(),
        };
        println!("#{:<4} {:<9} {}{}", m.seq, role, m.content.as_deref().unwrap_or(""), marker);
        for c in &m.tool_calls {
            println!("       tool {}({}) → {}", c.name, c.arguments, c.result_preview.as_deref().unwrap_or("…"));
        }
    }
    if let Some(b) = page.next_before {
        println!("older: agentic-chat history {session} --before {b}");
    }
    0
}

/// Asks the server to stop the session's running turn; returns what it said.
pub async fn stop(http: &reqwest::Client, base: &str, token: Option<&str>, session: &str) -> String {
    let mut req = http.post(url(base, &format!("sessions/{session}/stop")));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    match req.send().await {
        Ok(r) => match r.json::<StopAnswer>().await {
            Ok(a) => a.message,
            Err(e) => format!("stop: unexpected answer: {e}"),
        },
        Err(e) => format!("stop failed: {e}"),
    }
}
