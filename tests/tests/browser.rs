//! The chat page (`web/`) in a real browser: the real stream and entities
//! handlers on loopback (one table, the scripted model), the built page served
//! with its `config.json`, and `web/e2e/browser.mjs` driving Debian's Chromium
//! through playwright-core. The scenarios (a turn streams; an operation and an
//! entity patch reach the panel; Stop keeps the partial; a turn posts only its
//! last message; a reload mid-turn resumes without duplicated text; history,
//! tool calls and operations after a reload; the pane follows a streaming
//! answer; a turn of many tool calls and its replay render without an update
//! loop; another project's session shows that project; the agenda lists the
//! week, a calendar turn's event appears in it in place and stays after a
//! reload, a calendar that cannot be listed leaves the page working; each
//! chat shows its scope; the zone control sets the user's zone; a server that
//! stops answering is shown and retried; Suggest streams a draft into the
//! input, which the user edits and sends as a turn, the draft itself stored
//! nowhere; a project made in the chat shows at once) are in the script;
//! this starts everything (two projects, a session in the second), answers as
//! the model, and checks its exit code. The lock files' test is here too.
//!
//! `scripts/test.sh` builds `web/dist` and installs Chromium first. Without
//! Node.js, the built page or Chromium the test is skipped, except in CI.
//! `BROWSER_SCREENSHOT=path.png` also saves the page mid-turn;
//! `SCREENSHOT_DIR=$PWD/docs/img` (absolute) saves `calendar-chat.png` and `project-chat.png`.

use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use tests::function_urls::FunctionUrls;
use tests::web::{self, StaticSite};
use tests::{token, Reply};

const USER: &str = "web-user";
/// A user without projects: the page makes one in the chat.
const NEWCOMER: &str = "web-newcomer";

/// The scripted model, by the last message of each request (the script's
/// prompts): a document to create, then a paced answer; a long answer to stop;
/// an answer to reload in the middle of; an event to put on the calendar on
/// the day the prompt names (the script computes "tomorrow" in the browser's
/// zone, so the model need not know it).
fn model(request: &Value) -> Reply {
    if is_suggestion(request) {
        // The page's Suggest: a draft of the user's next message, streamed.
        return Reply::paced(&["Please add ", "a launch date ", "to the checklist."], Duration::from_millis(120));
    }
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let last = messages.last().cloned().unwrap_or_default();
    let text = last["content"].as_str().unwrap_or_default().to_string();
    // The turn's question (the last user message), also when answering a tool result.
    let asked = messages.iter().rev().find(|m| m["role"] == "user").and_then(|m| m["content"].as_str()).unwrap_or("");
    let gap = Duration::from_millis(120);
    let words = |prefix: &str, n: usize| -> Vec<String> { (0..n).map(|i| format!("{prefix}{i} ")).collect() };
    let paced = |pieces: Vec<String>| Reply::paced(&pieces.iter().map(String::as_str).collect::<Vec<_>>(), gap);
    match last["role"].as_str() {
        Some("tool") if asked.contains("every list") => Reply::text(&["Everything ", "is in order."]),
        Some("tool") if asked.contains("design review") => Reply::text(&["Booked ", "the design review."]),
        Some("tool") if asked.contains("old drafts") => Reply::text(&["Deleted one draft ", "and kept the other."]),
        Some("tool") if asked.contains("Start a project called ") => {
            let name = asked.split("Start a project called ").nth(1).unwrap_or_default();
            Reply::text(&["Started ", &format!("{name}.")])
        }
        Some("tool") => paced(["I added ", "the Launch ", "checklist ", "to the plan", "."].map(String::from).to_vec()),
        // Many reads at once: a turn of some 150 parts, arriving (and replayed) in bursts.
        _ if text.contains("every list") => {
            let kinds = ["document", "task", "goal", "plan", "milestone", "risk", "requirement"];
            let calls: Vec<(&str, Value)> =
                (0..28).map(|i| ("list_entities", json!({ "kind": kinds[i % kinds.len()] }))).collect();
            Reply::tool_calls(&calls)
        }
        // "Start a project called Kitchen remodel", by a user without projects.
        _ if text.contains("Start a project called ") => {
            let name = text.split("Start a project called ").nth(1).unwrap_or_default();
            Reply::tool_calls(&[("create_project", json!({ "name": name, "context": "A project made in the chat." }))])
        }
        _ if text.contains("launch checklist") => Reply::tool_calls(&[(
            "create_document",
            json!({ "title": "Launch checklist", "content": "- [ ] announce" }),
        )]),
        // "Schedule a design review on 2026-11-27 at 10:00": a 30-minute event at 10:00 local that day.
        _ if text.contains("design review on ") => {
            let day: String = text.split("design review on ").nth(1).unwrap_or_default().chars().take(10).collect();
            Reply::tool_calls(&[(
                "create_calendar_event",
                json!({ "title": "Design review", "start": format!("{day}T10:00"), "duration_minutes": 30 }),
            )])
        }
        _ if text.contains("long essay") => paced(words("essay", 120)),
        _ if text.contains("reload") => paced(words("resumed", 40)),
        _ if text.contains("long story") => paced(words("story", 150)),
        _ => Reply::text(&["Hello."]),
    }
}

/// A message suggestion's request (`shared::suggest`): its fixed
/// instruction, the conversation in its last message.
fn is_suggestion(request: &Value) -> bool {
    tests::system_text(request).contains(shared::suggest::INSTRUCTION)
}

/// A project of `USER`: its id.
async fn create_project(f: &FunctionUrls, name: &str) -> String {
    let r = reqwest::Client::new()
        .post(format!("{}projects", f.url("entities")))
        .bearer_auth(token(USER))
        .json(&json!({ "name": name }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    let created: Value = r.json().await.unwrap();
    created["data"]["project"]["id"].as_str().expect("the project's id").to_string()
}

/// A task of `USER` in `project`: its id.
async fn create_task(f: &FunctionUrls, project: &str, title: &str) -> String {
    let r = reqwest::Client::new()
        .post(format!("{}projects/{project}/tasks", f.url("entities")))
        .bearer_auth(token(USER))
        .json(&json!({ "title": title }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    let created: Value = r.json().await.unwrap();
    created["data"]["id"].as_str().expect("the task's id").to_string()
}

async fn create_document(f: &FunctionUrls, project: &str, title: &str) {
    let r = reqwest::Client::new()
        .post(format!("{}projects/{project}/documents", f.url("entities")))
        .bearer_auth(token(USER))
        .json(&json!({ "title": title, "content": "- tomatoes" }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
}

/// A finished session `id` in `project`: one turn through `POST /chat`, as
/// another client of the same user made it.
async fn session_in(f: &FunctionUrls, id: &str, project: &str) {
    let r = reqwest::Client::new()
        .post(format!("{}chat", f.url("stream")))
        .bearer_auth(token(USER))
        .json(&json!({
            "id": id,
            "messages": [{ "id": "m1", "role": "user", "parts": [{ "type": "text", "text": "Hello garden" }] }],
            "context_type": "project",
            "projectFocus": { "projectId": project },
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let body = r.text().await.unwrap();
    assert!(body.contains(r#""type":"finish""#), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chat_page_in_a_real_browser() {
    let test = "browser test";
    let Some(_node) = web::node_tools(test) else { return };
    let Some(chromium) = web::chromium(test) else { return };
    let dist = Path::new(web::WEB_DIR).join("dist");
    if !web::present(test, (!dist.join("index.html").exists()).then(|| "web/dist is not built".into())) {
        return;
    }
    // The page's origin is the static site's; `*` saves knowing its port first.
    let f = FunctionUrls::with_config(|c| c.cors_allow_origin = Some("*".into())).await;
    let launch = create_project(&f, "Product launch").await;
    // Two tasks a turn will ask to delete: the page approves one, denies the other.
    let drafts = [create_task(&f, &launch, "Old draft A").await, create_task(&f, &launch, "Old draft B").await];
    let ids = drafts.clone();
    f.t.llm.set_default(Reply::dynamic(move |r| {
        let last = r["messages"].as_array().and_then(|m| m.last().cloned()).unwrap_or_default();
        let asked = last["content"].as_str().unwrap_or("");
        if last["role"] == "user" && asked.contains("old drafts") && !is_suggestion(r) {
            let del = |id: &str| ("delete_entity", json!({"kind": "task", "id": id}));
            return Reply::tool_calls(&[del(&ids[0]), del(&ids[1])]);
        }
        model(r)
    }));
    // A second project (not the first the page would pick) with a session in it.
    let garden = create_project(&f, "Garden planner").await;
    create_document(&f, &garden, "Seed list").await;
    let other_session = "gardenSession0001";
    session_in(&f, other_session, &garden).await;
    let config = json!({ "streamUrl": f.url("stream"), "entitiesUrl": f.url("entities"), "token": token(USER) });
    let site = StaticSite::serve(dist, config.to_string()).await;

    let started = Instant::now();
    let mut cmd = Command::new("node");
    cmd.current_dir(web::WEB_DIR)
        .arg("e2e/browser.mjs")
        .arg(site.url())
        .env("CHROMIUM", &chromium)
        .env("OTHER_SESSION", other_session)
        .env("OTHER_PROJECT", &garden)
        .env("NEW_USER_TOKEN", token(NEWCOMER));
    if let Some(shot) = std::env::var_os("BROWSER_SCREENSHOT") {
        cmd.arg(shot);
    }
    let out = tokio::task::spawn_blocking(move || cmd.output().expect("spawn node")).await.unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    if !out.status.success() {
        // What the model was told by the tools, for the failure's diagnosis.
        for r in f.t.llm.requests() {
            for m in r["messages"].as_array().into_iter().flatten().filter(|m| m["role"] == "tool") {
                eprintln!("tool result: {}", m["content"]);
            }
        }
        panic!("web/e2e/browser.mjs failed ({})", out.status);
    }
    let task = |id: &str| format!("{}projects/{launch}/tasks/{id}", f.url("entities"));
    let get = |url: String| async move {
        reqwest::Client::new().get(url).bearer_auth(token(USER)).send().await.unwrap().status().as_u16()
    };
    assert_eq!(get(task(&drafts[0])).await, 404, "the approved delete ran");
    assert_eq!(get(task(&drafts[1])).await, 200, "the denied one did not");
    // The page's zone control stored the user's choice (the turns' zones did not).
    let settings: Value = reqwest::Client::new()
        .get(format!("{}me/settings", f.url("stream")))
        .bearer_auth(token(USER))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(settings, json!({ "timezone": "America/New_York" }));
    // The one suggestion the page asked for went to the model without
    // tools, with the input's words as its goal.
    let suggestions: Vec<Value> = f.t.llm.requests().into_iter().filter(is_suggestion).collect();
    assert_eq!(suggestions.len(), 1, "one suggestion");
    assert!(suggestions[0].get("tools").is_none(), "no tools offered: {}", suggestions[0]);
    assert!(suggestions[0].to_string().contains("goal for this message: a launch date"), "{}", suggestions[0]);
    eprintln!("browser test: node + chromium ran {} ms", started.elapsed().as_millis());
}

/// Each npm lock file lists every optional package its packages name (every
/// platform's builds of rollup and esbuild, `fsevents`), so `npm ci` installs
/// it on any platform, whatever subset of those packages the registry serves,
/// and never finds it out of date (docs/web.md, "The npm lock files"). Reads
/// the files only: no Node.js, no registry.
#[test]
fn the_npm_lock_files_list_every_platforms_optional_packages() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for lock in ["web/package-lock.json", "tests/node/package-lock.json"] {
        let text = std::fs::read_to_string(root.join(lock)).unwrap_or_else(|e| panic!("{lock}: {e}"));
        let json: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{lock}: {e}"));
        assert_eq!(json["lockfileVersion"], 3, "{lock}");
        let packages = json["packages"].as_object().unwrap_or_else(|| panic!("{lock}: no packages"));
        let mut missing = vec![];
        for (at, package) in packages {
            for (name, version) in package["optionalDependencies"].as_object().into_iter().flatten() {
                // Node's lookup: the package's own node_modules, then each enclosing one.
                let mut dir = at.clone();
                let found = loop {
                    let candidate = if dir.is_empty() {
                        format!("node_modules/{name}")
                    } else {
                        format!("{dir}/node_modules/{name}")
                    };
                    if packages.contains_key(&candidate) {
                        break true;
                    }
                    if dir.is_empty() {
                        break false;
                    }
                    dir = dir.rfind("/node_modules/").map(|i| dir[..i].to_string()).unwrap_or_default();
                };
                if !found {
                    missing.push(format!(
                        "{name}@{} (of {})",
                        version.as_str().unwrap_or("?"),
                        if at.is_empty() { "the root" } else { at }
                    ));
                }
            }
        }
        assert!(
            missing.is_empty(),
            "{lock} lacks {} optional packages: {}; regenerate it as docs/web.md (\"The npm lock files\") says",
            missing.len(),
            missing.join(", ")
        );
    }
}
