//! Addresses the model did not make up. A call's `url` argument must name a
//! host the conversation holds — the user's words, a tool's result (a search
//! hit, a page, a document) or the context the app gave — or the call is
//! refused before it runs, with a result that says so (`address_not_given`).
//! The local model, asked "what can you do?", visited `www.example.com`,
//! `caterer.com` and `flyeroptions.com` in one breath; each visit is a
//! request to a site nobody named, and its error a dead end the model then
//! apologised for. The model's own words do not count as a source.
//!
//! And a call said twice in one answer (same tool, same arguments) runs
//! once: the second is refused (`repeated_call`).

use crate::message::{ChatMessage, Role, ToolCall};
use crate::model_loop::ToolRun;

/// The refusal of `call` when its `url` names a host `conversation` does
/// not hold; `None` when it has no `url`, one that does not parse (the tool
/// says why), or one whose host was given.
pub fn unsourced(call: &ToolCall, conversation: &[ChatMessage]) -> Option<ToolRun> {
    let args: serde_json::Value = serde_json::from_str(&call.function.arguments).ok()?;
    let raw = args.get("url")?.as_str()?.trim();
    let host = bare(url::Url::parse(raw).ok()?.host_str()?);
    // The host as written too: the parser normalises `[::ffff:127.0.0.1]`
    // and `0x7f.1`, which the user wrote as they are.
    let written = bare(raw.split_once("://").map_or(raw, |(_, rest)| rest).split(['/', '?', '#']).next()?);
    let written = written.rsplit_once('@').map_or(written.as_str(), |(_, h)| h);
    if host.is_empty() || given(&host, conversation) || (!written.is_empty() && given(written, conversation)) {
        return None;
    }
    let message = format!(
        "{} needs an address from the user's words or from a search result or page: {host} is in neither, so \
         nothing was fetched. Ask the user for the address, or answer from what you have.",
        call.function.name
    );
    Some(refusal("address_not_given", message))
}

/// The refusal of each call that repeats an earlier call of the same answer
/// (the same tool, the same arguments): it runs once. Asked for one project
/// and a two-step plan, the local model wrote `create_project` "Draft the
/// agenda" twice in one answer, and each ran. Arguments compare as JSON
/// values, so spacing and key order do not matter. Calls `refused` already
/// are neither repeats nor repeated.
pub fn repeats(calls: &[ToolCall], refused: &[bool]) -> Vec<Option<ToolRun>> {
    let args = |c: &ToolCall| serde_json::from_str::<serde_json::Value>(&c.function.arguments).ok();
    let runs = |i: usize| !refused.get(i).copied().unwrap_or(false);
    calls
        .iter()
        .enumerate()
        .map(|(i, c)| {
            if !runs(i) {
                return None;
            }
            let same =
                |(j, e): &(usize, &ToolCall)| runs(*j) && e.function.name == c.function.name && args(e) == args(c);
            let (_, first) = calls[..i].iter().enumerate().find(same)?;
            let message = format!(
                "the same call as {} earlier in this answer (same tool, same arguments): it runs once",
                first.id
            );
            Some(refusal("repeated_call", message))
        })
        .collect()
}

/// A call's result when it did not run: the error the model reads.
fn refusal(code: &str, message: String) -> ToolRun {
    let content = serde_json::json!({"error": {"code": code, "message": message}}).to_string();
    ToolRun { ok: false, content, preview: message, events: vec![] }
}

/// A host as compared: lower case, no `www.`.
fn bare(host: &str) -> String {
    host.to_ascii_lowercase().trim_start_matches("www.").to_string()
}

/// Whether `host` is written anywhere but in the model's own messages.
fn given(host: &str, conversation: &[ChatMessage]) -> bool {
    conversation
        .iter()
        .filter(|m| m.role != Role::Assistant)
        .filter_map(|m| m.content.as_deref())
        .any(|text| text.to_ascii_lowercase().contains(host))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::FunctionCall;

    fn call(url: &str) -> ToolCall {
        ToolCall {
            id: "c1".into(),
            kind: "function".into(),
            function: FunctionCall {
                name: "web_visit".into(),
                arguments: serde_json::json!({ "url": url }).to_string(),
            },
        }
    }

    fn said(role: Role, text: &str) -> ChatMessage {
        ChatMessage { role, content: Some(text.into()), tool_calls: vec![], tool_call_id: None }
    }

    #[test]
    fn a_host_nobody_gave_is_refused() {
        let talk = [said(Role::User, "What can you do?"), said(Role::Assistant, "I could read www.example.com")];
        let refused = unsourced(&call("https://www.example.com"), &talk).expect("refused");
        assert!(!refused.ok);
        assert!(refused.content.contains("address_not_given"), "{}", refused.content);
        assert!(refused.preview.contains("example.com is in neither"), "{}", refused.preview);
    }

    #[test]
    fn the_users_words_a_result_or_the_context_are_sources() {
        let user = [said(Role::User, "Read example.org/pricing and tell me the price")];
        assert!(unsourced(&call("https://www.example.org/pricing"), &user).is_none());
        let hit = [said(Role::User, "find prices"), said(Role::Tool, r#"{"hits":[{"url":"https://Shop.test/a"}]}"#)];
        assert!(unsourced(&call("https://shop.test/b"), &hit).is_none());
        let local = [said(Role::User, "Read the page http://127.0.0.1:8123/pricing")];
        assert!(unsourced(&call("http://127.0.0.1:8123/pricing"), &local).is_none());
        let odd = [said(Role::User, "read http://[::ffff:127.0.0.1]:8123/a and http://u:p@0x7f.1:80/")];
        assert!(unsourced(&call("http://[::ffff:127.0.0.1]:8123/a"), &odd).is_none(), "as written, not as parsed");
        assert!(unsourced(&call("http://u:p@0x7f.1:80/"), &odd).is_none());
        let context = [said(Role::System, "Document Links: see docs.rs/serde"), said(Role::User, "open that link")];
        assert!(unsourced(&call("https://docs.rs/serde"), &context).is_none());
    }

    #[test]
    fn a_call_said_twice_in_one_answer_runs_once() {
        let mut calls = vec![call("https://a.test"), call("https://b.test"), call("https://a.test")];
        for (i, c) in calls.iter_mut().enumerate() {
            c.id = format!("c{i}");
        }
        // The same arguments written with other spacing are the same call.
        let mut spaced = calls[1].clone();
        spaced.id = "c3".into();
        spaced.function.arguments = r#"{ "url" :  "https://b.test" }"#.into();
        calls.push(spaced);
        let none = [false; 4];
        let refused: Vec<bool> = repeats(&calls, &none).iter().map(Option::is_some).collect();
        assert_eq!(refused, [false, false, true, true]);
        let again = repeats(&calls, &none)[2].clone().unwrap();
        assert!(again.content.contains("repeated_call") && again.preview.contains("c0"), "{}", again.content);
        let mut other_tool = calls[0].clone();
        other_tool.function.name = "web_search".into();
        assert!(repeats(&[calls[0].clone(), other_tool], &none).iter().all(Option::is_none));
        // A call refused already repeats nothing: the next one like it runs.
        let after_refused: Vec<bool> =
            repeats(&calls, &[true, false, false, false]).iter().map(Option::is_some).collect();
        assert_eq!(after_refused, [false, false, false, true]);
    }

    #[test]
    fn calls_without_a_url_pass() {
        let mut c = call("x");
        c.function.arguments = r#"{"query":"rust"}"#.into();
        assert!(unsourced(&c, &[]).is_none());
        assert!(unsourced(&call("not a url"), &[]).is_none(), "the tool says why it cannot read it");
    }
}
