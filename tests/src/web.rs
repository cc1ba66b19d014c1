//! Support for the tests of the web client (`web/`): finding Node.js, its
//! installed packages and Debian's Chromium, and serving the built page with
//! its `config.json` on loopback.
//!
//! Without the tools a test is skipped with a message saying what is missing,
//! except in CI (`CI=true`), where a missing tool is a failure: `scripts/test.sh`
//! installs them (`web_deps` in `scripts/lib.sh`).

use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;

/// The web client's folder.
pub const WEB_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../web");
/// Debian's Chromium (`apt-get install chromium`), never a downloaded browser.
pub const CHROMIUM: &str = "/usr/bin/chromium";

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// True when nothing is `missing`; else a message and false, or a panic in CI.
pub fn present(test: &str, missing: Option<String>) -> bool {
    let Some(what) = missing else { return true };
    assert!(!in_ci(), "{test}: {what} (CI must have it: scripts/test.sh installs it)");
    eprintln!("SKIPPED {test}: {what}; run scripts/test.sh, which installs it");
    false
}

/// Node.js with `web/node_modules` installed, or `None` when absent outside CI.
pub fn node_tools(test: &str) -> Option<Node> {
    let node_ok = Command::new("node").arg("--version").output().is_ok_and(|o| o.status.success());
    let missing = if !node_ok {
        Some("`node` is not installed".to_string())
    } else if !Path::new(WEB_DIR).join("node_modules").is_dir() {
        Some("web/node_modules is missing (npm ci in web/)".to_string())
    } else {
        None
    };
    present(test, missing).then_some(Node)
}

/// Debian's Chromium, or `None` when absent outside CI.
pub fn chromium(test: &str) -> Option<PathBuf> {
    let missing = (!Path::new(CHROMIUM).exists()).then(|| format!("{CHROMIUM} is missing (apt-get install chromium)"));
    present(test, missing).then(|| PathBuf::from(CHROMIUM))
}

/// Node.js, run in `web/`.
pub struct Node;

impl Node {
    /// `node args…` with `input` on stdin: its stdout; a panic with its stderr on failure.
    pub fn run_with_stdin(&self, args: &[&str], input: &[u8]) -> String {
        let mut child = Command::new("node")
            .args(args)
            .current_dir(WEB_DIR)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn node");
        child.stdin.take().expect("stdin").write_all(input).expect("write to node");
        let out = child.wait_with_output().expect("node runs");
        assert!(out.status.success(), "node {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).expect("node prints UTF-8")
    }
}

/// `web/dist` (the built page) and a `config.json` served on loopback, like
/// `scripts/stack.sh` serves them, until the test's runtime ends.
pub struct StaticSite {
    pub addr: SocketAddr,
}

impl StaticSite {
    pub async fn serve(dist: PathBuf, config_json: String) -> StaticSite {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let site = Arc::new((dist, Bytes::from(config_json)));
        tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else { return };
                let site = site.clone();
                tokio::spawn(async move {
                    let svc = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                        let site = site.clone();
                        async move { Ok::<_, std::convert::Infallible>(file(&site.0, &site.1, req.uri().path())) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tcp), svc).await;
                });
            }
        });
        StaticSite { addr }
    }

    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }
}

fn file(dist: &Path, config: &Bytes, path: &str) -> http::Response<Full<Bytes>> {
    let rel = path.trim_start_matches('/');
    let (body, kind) = if rel == "config.json" {
        (Some(config.clone()), "application/json")
    } else {
        let rel = if rel.is_empty() { "index.html" } else { rel };
        let ok = !rel.split('/').any(|s| s == ".." || s.is_empty());
        let body = ok.then(|| std::fs::read(dist.join(rel)).ok()).flatten().map(Bytes::from);
        (body, content_type(rel))
    };
    let resp = http::Response::builder();
    match body {
        Some(b) => resp.header("content-type", kind).header("cache-control", "no-store").body(Full::new(b)),
        None => resp.status(404).body(Full::new(Bytes::from_static(b"not found"))),
    }
    .expect("a static response")
}

fn content_type(path: &str) -> &'static str {
    match path.rsplit('.').next() {
        Some("html") => "text/html; charset=utf-8",
        Some("js") => "text/javascript",
        Some("css") => "text/css",
        Some("json") | Some("map") => "application/json",
        Some("png") => "image/png",
        Some("svg") => "image/svg+xml",
        _ => "application/octet-stream",
    }
}
