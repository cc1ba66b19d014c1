//! The `agentic-chat` binary as a newcomer runs it, against the real stream,
//! entities and prewarm handlers behind HTTP (`tests::function_urls`), on
//! DynamoDB Local with the scripted model. Run with `scripts/test.sh`.
//!
//! Its output is piped here, so these also prove nothing terminal-only (the
//! progress line's carriage returns and escape codes) reaches a pipe.

use serde_json::{json, Value};
use std::process::{Command, Output, Stdio};
use tests::function_urls::FunctionUrls;
use tests::{Reply, TEST_SECRET};

const CLI: &str = env!("CARGO_BIN_EXE_agentic-chat");

/// Runs the CLI as `scripts/stack.sh` does: only `AUTH_JWT_SECRET` and the URL
/// set, so it acts as its default user.
async fn cli(f: &FunctionUrls, args: &[&str], stdin: &str) -> (Output, String) {
    let (url, args, stdin) =
        (f.url("stream"), args.iter().map(|a| a.to_string()).collect::<Vec<_>>(), stdin.to_string());
    let out = tokio::task::spawn_blocking(move || {
        let mut child = Command::new(CLI)
            .args(&args)
            .env("STREAM_URL", url)
            .env("AUTH_JWT_SECRET", TEST_SECRET)
            .env_remove("AUTH_TOKEN")
            .env_remove("ENTITIES_URL")
            .env_remove("PREWARM_URL")
            .env_remove("AUTH_ISSUER")
            .env_remove("AUTH_AUDIENCE")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the cli starts");
        std::io::Write::write_all(child.stdin.as_mut().unwrap(), stdin.as_bytes()).unwrap();
        drop(child.stdin.take());
        child.wait_with_output().expect("the cli ends")
    })
    .await
    .unwrap();
    let stdout = String::from_utf8(out.stdout.clone()).expect("utf-8");
    assert!(!stdout.contains('\r') && !stdout.contains('\x1b'), "terminal codes in piped output:\n{stdout}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains('\r') && !stderr.contains('\x1b'), "terminal codes in piped stderr:\n{stderr}");
    (out, stdout)
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The projects of `user`, through the entities API.
async fn projects(f: &FunctionUrls, user: &str) -> Vec<Value> {
    let body: Value = reqwest::Client::new()
        .get(format!("{}projects", f.url("entities")))
        .bearer_auth(tests::token(user))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    body["items"].as_array().unwrap().clone()
}

fn tool_names(request: &Value) -> Vec<String> {
    request["tools"].as_array().into_iter().flatten().map(|t| t["function"]["name"].as_str().unwrap().into()).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_one_shot_turn_reads_as_lines_and_ends_with_what_the_user_now_has() {
    let f = FunctionUrls::start().await;
    f.t.llm.push(Reply::tool_calls(&[("create_project", json!({"name": "Launch"}))]));
    f.t.llm.push(Reply::text(&["Created ", "the project ", "Launch."]));

    let (out, stdout) = cli(&f, &["chat", "Create a project called Launch"], "").await;
    assert!(out.status.success(), "{stdout}\n{}", stderr(&out));
    let lines: Vec<&str> = stdout.lines().collect();
    // The answer is one line however many deltas carried it; every event is one short line.
    assert!(lines.contains(&"Created the project Launch."), "{stdout}");
    assert!(lines.contains(&r#"→ create_project(name: "Launch")"#), "{stdout}");
    assert!(lines.contains(&"✓ created project “Launch”"), "{stdout}");
    assert!(lines.iter().any(|l| l.starts_with("· Launch v1: +project “Launch”, +document")), "{stdout}");
    assert!(lines.iter().any(|l| l.starts_with("· done in ")), "{stdout}");
    assert!(!stdout.contains("text_delta") && !stdout.contains('{'), "raw events or JSON in:\n{stdout}");

    // What the user has now, read back through the entities API, as the CLI's own user...
    let mine = projects(&f, "dev-user").await;
    assert_eq!(mine.len(), 1, "{mine:?}");
    let id = mine[0]["id"].as_str().unwrap();
    let after = stdout.split("Your projects now (read back through the entities API):\n").nth(1).expect(&stdout);
    let project_line = after.lines().next().unwrap();
    assert!(project_line.trim_start().starts_with("Launch") && project_line.contains(id), "{after}");
    assert!(after.contains("document “"), "the context document the create made: {after}");
    // ...the user every token the stack prints is for.
    assert!(projects(&f, "alice").await.is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_project_named_by_name_scopes_the_turn_and_its_tools() {
    let f = FunctionUrls::start().await;
    let created = reqwest::Client::new()
        .post(format!("{}projects", f.url("entities")))
        .bearer_auth(tests::token("dev-user"))
        .json(&json!({"name": "Launch"}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let project = projects(&f, "dev-user").await[0]["id"].as_str().unwrap().to_string();
    f.t.llm.push(Reply::tool_calls(&[("create_task", json!({"title": "Write the blog post"}))]));
    f.t.llm.push(Reply::text(&["Done."]));

    let (out, stdout) = cli(&f, &["chat", "--project", "launch", "Add a task Write the blog post"], "").await;
    assert!(out.status.success(), "{stdout}\n{}", stderr(&out));
    assert!(stdout.lines().any(|l| l == "✓ created task “Write the blog post” in Launch"), "{stdout}");
    assert!(stdout.lines().any(|l| l.starts_with("· Launch v2: +task “Write the blog post”")), "{stdout}");
    let after = stdout.split("(read back through the entities API):\n").nth(1).expect(&stdout);
    assert!(after.lines().any(|l| l.trim_start().starts_with("task “Write the blog post”")), "{after}");

    // The model was offered the project's tools: the stream read the scope from the request.
    let first = &f.t.llm.requests()[0];
    assert!(tool_names(first).contains(&"create_task".to_string()), "{:?}", tool_names(first));
    let tasks: Value = reqwest::Client::new()
        .get(format!("{}projects/{project}/tasks", f.url("entities")))
        .bearer_auth(tests::token("dev-user"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(tasks["items"][0]["fields"]["title"], "Write the blog post", "{tasks}");

    // A project that does not exist is an error before any turn, never the workspace.
    let (out, _) = cli(&f, &["chat", "--project", "Nope", "hi"], "").await;
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("no project has the id or name \"Nope\""), "{}", stderr(&out));
    assert_eq!(f.t.llm.request_count(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn chat_session_without_scope_flags_stays_in_the_sessions_project() {
    let f = FunctionUrls::start().await;
    let created = reqwest::Client::new()
        .post(format!("{}projects", f.url("entities")))
        .bearer_auth(tests::token("dev-user"))
        .json(&json!({"name": "Launch"}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    f.t.llm.push(Reply::text(&["In ", "Launch."]));
    f.t.llm.push(Reply::text(&["Still ", "there."]));

    let (out, stdout) = cli(&f, &["chat", "--project", "Launch", "hello"], "").await;
    assert!(out.status.success(), "{stdout}\n{}", stderr(&out));
    let line = stdout.lines().find(|l| l.starts_with("· new session ")).expect(&stdout);
    let sid = line.trim_start_matches("· new session ").split(' ').next().unwrap().to_string();

    // `chat --session X` with no scope flag: the session keeps its project
    // (the model is offered the project's tools again), never the workspace.
    let (out, stdout) = cli(&f, &["chat", "--session", &sid, "and now?"], "").await;
    assert!(out.status.success(), "{stdout}\n{}", stderr(&out));
    assert!(stdout.contains("Still there."), "{stdout}");
    let requests = f.t.llm.requests();
    assert_eq!(requests.len(), 2);
    assert!(tool_names(&requests[1]).contains(&"create_task".to_string()), "{:?}", tool_names(&requests[1]));
    assert!(!stdout.contains("· scope "), "the session did not move:\n{stdout}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_repl_keeps_its_session_switches_scope_and_lists_projects() {
    let f = FunctionUrls::start().await;
    f.t.llm.push(Reply::tool_calls(&[("create_project", json!({"name": "Launch"}))]));
    f.t.llm.push(Reply::text(&["Made ", "it."]));
    f.t.llm.push(Reply::text(&["In ", "Launch ", "now."]));

    let input = "make a project\n/projects\n/project Launch\nwhat now?\n/session\n";
    let (out, stdout) = cli(&f, &["chat", "--repl"], input).await;
    let err = stderr(&out);
    assert!(out.status.success(), "{stdout}\n{err}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines.contains(&"Made it.") && lines.contains(&"In Launch now."), "{stdout}");
    let listed = lines.iter().filter(|l| l.starts_with("Launch ") && l.contains(" v1 ")).count();
    assert_eq!(listed, 1, "/projects lists it once:\n{stdout}");
    // The prompt names the scope, not the session id.
    assert!(err.contains("global> ") && err.contains("Launch> "), "{err}");
    assert!(!err.contains("new> "), "{err}");

    // One session, moved into the project: the second turn's scope came from /project.
    let requests = f.t.llm.requests();
    assert_eq!(requests.len(), 3);
    assert!(tool_names(&requests[2]).contains(&"create_task".to_string()));
    assert!(stdout.contains("· scope global → project Launch"), "{stdout}");
    let session_lines = lines.iter().filter(|l| l.starts_with("· new session ")).count();
    assert_eq!(session_lines, 1, "{stdout}");
}

#[tokio::test(flavor = "multi_thread")]
async fn raw_prints_the_event_stream_and_prewarm_warms_a_scope() {
    let f = FunctionUrls::start().await;
    f.t.llm.push(Reply::text(&["Hi ", "there."]));
    let (out, stdout) = cli(&f, &["chat", "--raw", "hello"], "").await;
    assert!(out.status.success());
    assert!(stdout.starts_with("id: 1\nevent: agent_state\ndata: {"), "{stdout}");
    assert!(stdout.contains("event: text_delta\ndata: {\"type\":\"text_delta\",\"content\":\"Hi \"}"), "{stdout}");
    assert!(stderr(&out).contains("timing: headers"), "{}", stderr(&out));

    // The sessions API at the same URL: the CLI's user's session, and its messages.
    let (out, stdout) = cli(&f, &["sessions"], "").await;
    assert!(out.status.success(), "{stdout}\n{}", stderr(&out));
    let sid = stdout.split_whitespace().next().expect("one session").to_string();
    let (out, stdout) = cli(&f, &["history", &sid], "").await;
    assert!(out.status.success(), "{stdout}\n{}", stderr(&out));
    assert!(stdout.contains("user      hello") && stdout.contains("assistant Hi there."), "{stdout}");

    let (out, stdout) = cli(&f, &["prewarm"], "").await;
    assert!(out.status.success(), "{stdout}\n{}", stderr(&out));
    assert!(stdout.starts_with("session ") && stdout.contains("(global) is warm"), "{stdout}");

    let (out, stdout) = cli(&f, &["projects"], "").await;
    assert!(out.status.success());
    assert_eq!(stdout, "(no projects yet)\n");
}

/// A task of `dev-user` in `project`: its id.
async fn task(f: &FunctionUrls, project: &str, title: &str) -> String {
    let created: Value = reqwest::Client::new()
        .post(format!("{}projects/{project}/tasks", f.url("entities")))
        .bearer_auth(tests::token("dev-user"))
        .json(&json!({"title": title}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    created["data"]["id"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_that_waits_is_asked_y_n_and_the_answers_go_on_as_a_turn() {
    let f = FunctionUrls::start().await;
    let created = reqwest::Client::new()
        .post(format!("{}projects", f.url("entities")))
        .bearer_auth(tests::token("dev-user"))
        .json(&json!({"name": "Launch"}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let project = projects(&f, "dev-user").await[0]["id"].as_str().unwrap().to_string();
    let (a, b) = (task(&f, &project, "Old draft A").await, task(&f, &project, "Old draft B").await);
    let del = |id: &str| ("delete_entity", json!({"kind": "task", "id": id}));
    f.t.llm.push(Reply::tool_calls(&[del(&a), del(&b)]));
    f.t.llm.push(Reply::text(&["Deleted one, kept one."]));

    // y for the first, N (the default) for the second.
    let (out, stdout) = cli(&f, &["chat", "--project", "launch", "Remove the old drafts"], "y\n\n").await;
    assert!(out.status.success(), "{stdout}\n{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("Delete the task \"Old draft A\"? [y/N]"), "{err}");
    assert!(stdout.lines().any(|l| l.starts_with("? approve: Delete the task")), "{stdout}");
    assert!(stdout.contains("Deleted one, kept one."), "{stdout}");
    let entities = f.url("entities");
    let status = |id: String| {
        let url = format!("{entities}projects/{project}/tasks/{id}");
        async move {
            reqwest::Client::new()
                .get(url)
                .bearer_auth(tests::token("dev-user"))
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    assert_eq!(status(a).await, 404, "approved: deleted");
    assert_eq!(status(b).await, 200, "denied: kept");
    let last = f.t.llm.requests().last().cloned().unwrap();
    assert!(last.to_string().contains("denied by the user: the user said no"), "{last}");
}
