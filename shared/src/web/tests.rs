//! `web_visit`'s guard against real sockets: a local HTTP server that counts
//! the requests it gets, and a fetcher over the real client. Every refused
//! case asserts both the error and that the server was never reached.

use super::*;
use crate::config::WebConfig;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

pub const ARTICLE: &str = r#"<html><head><title>Pricing | Example</title></head><body>
<nav><a href="/">Home</a> <a href="/about">About</a></nav>
<article><h1>Pricing</h1><p>The starter plan costs 12 euros a month and includes five projects, unlimited
tasks and email support on working days. Teams that need more than that get the growth plan instead.</p>
<h2>Growth</h2><p>The growth plan costs 49 euros a month, with unlimited projects, single sign-on, priority
support and an uptime commitment of 99.9 percent, billed yearly or monthly as the customer prefers.</p>
</article><footer>Cookie settings</footer></body></html>"#;

/// A local server: `port`, and how many requests reached it.
pub struct Server {
    pub port: u16,
    pub hits: Arc<AtomicUsize>,
}

/// The response to `path` (status line, headers, body), as raw HTTP/1.1.
fn answer(path: &str, port: u16) -> (String, Vec<u8>) {
    let ok = |ct: &str, body: &str| (format!("200 OK\r\nContent-Type: {ct}"), body.as_bytes().to_vec());
    let to = |loc: String| (format!("302 Found\r\nLocation: {loc}"), vec![]);
    match path {
        "/page" => ok("text/html; charset=utf-8", ARTICLE),
        "/text" => ok("text/plain", "plain words"),
        "/json" => ok("application/json", r#"{"price": 12}"#),
        "/pdf" => ok("application/pdf", "%PDF-1.7"),
        "/none" => ("200 OK".into(), b"untyped".to_vec()),
        "/missing" => ("404 Not Found\r\nContent-Type: text/plain".into(), b"no".to_vec()),
        "/big" => ok("text/plain", &"x".repeat(5_000)),
        "/table" => ok("text/html", &page::tests::big_table()),
        "/chains" => ok("text/html", &format!("{}x{}", "<div>".repeat(505), "</div>".repeat(505)).repeat(15)),
        p if p.starts_with("/pathological/") => {
            let pages = page::tests::pathological();
            ok("text/html", &pages[p[14..].parse::<usize>().unwrap_or(0)].1)
        }
        "/to-metadata" => to("http://169.254.169.254/latest/meta-data/".into()),
        "/to-internal-name" => to(format!("http://internal.test:{port}/page")),
        "/to-localhost-v6" => to(format!("http://[::1]:{port}/page")),
        p if p.starts_with("/hops/") => match p[6..].parse::<u32>().unwrap_or(0) {
            0 => ok("text/plain", "arrived"),
            n => to(format!("/hops/{}", n - 1)),
        },
        _ => ("404 Not Found".into(), vec![]),
    }
}

pub async fn server() -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = hits.clone();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match sock.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let line = String::from_utf8_lossy(&head).lines().next().unwrap_or("").to_string();
                let path = line.split(' ').nth(1).unwrap_or("/").to_string();
                if path == "/slow" || path == "/endless" {
                    // Headers, then a body that trickles (slow) or never ends (endless, no length).
                    let _ = sock
                        .write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n")
                        .await;
                    loop {
                        let chunk = if path == "/slow" { vec![b'.'; 1] } else { vec![b'x'; 8192] };
                        if sock.write_all(&chunk).await.is_err() {
                            return;
                        }
                        if path == "/slow" {
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                    }
                }
                let (status, body) = answer(&path, port);
                let head = format!("HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
                let _ = sock.write_all(head.as_bytes()).await;
                let _ = sock.write_all(&body).await;
            });
        }
    });
    Server { port, hits }
}

/// The test's config: the server's port allowed; `allow_local` lets 127.0.0.1 through.
pub fn config(port: u16, allow_local: bool) -> WebConfig {
    WebConfig {
        allow_ports: vec![port],
        allow_cidrs: if allow_local { vec!["127.0.0.1/32".parse().unwrap()] } else { vec![] },
        fetch_max_bytes: 4_096,
        fetch_timeout: Duration::from_secs(20),
        ..WebConfig::default()
    }
}

/// Names the tests' resolver answers itself.
pub fn hosts() -> HashMap<String, Vec<IpAddr>> {
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    HashMap::from([
        ("internal.test".to_string(), vec![ip("10.0.0.5")]),
        ("rebind.test".to_string(), vec![ip("127.0.0.1")]),
        ("metadata.test".to_string(), vec![ip("169.254.169.254")]),
        ("mixed.test".to_string(), vec![ip("10.1.1.1"), ip("::1")]),
    ])
}

fn blocked(r: Result<Page, WebError>, what: &str) {
    assert!(matches!(r, Err(WebError::Blocked(_))), "{what}: {r:?}");
}

#[tokio::test]
async fn allowed_pages_are_read_html_as_markdown_text_and_json_as_they_are() {
    let s = server().await;
    let f = Fetcher::with_hosts(&config(s.port, true), hosts());
    let page = f.visit(&format!("http://127.0.0.1:{}/page", s.port)).await.unwrap();
    assert_eq!(page.format, "html");
    assert!(page.content.contains("12 euros a month") && !page.content.contains("Cookie settings"), "{page:?}");
    assert!(page.title.unwrap().contains("Pricing"));
    let text = f.visit(&format!("http://127.0.0.1:{}/text", s.port)).await.unwrap();
    assert_eq!((text.format, text.content.as_str()), ("text", "plain words"));
    let json = f.visit(&format!("http://127.0.0.1:{}/json", s.port)).await.unwrap();
    assert_eq!((json.format, json.content.as_str()), ("json", r#"{"price": 12}"#));
}

#[tokio::test]
async fn without_the_allow_list_loopback_is_refused_by_address_and_by_name() {
    let s = server().await;
    let f = Fetcher::with_hosts(&config(s.port, false), hosts());
    let p = s.port;
    for url in [
        format!("http://127.0.0.1:{p}/page"),
        format!("http://localhost:{p}/page"),
        format!("http://rebind.test:{p}/page"),
        format!("http://mixed.test:{p}/page"),
        format!("http://[::1]:{p}/page"),
        format!("http://[::ffff:127.0.0.1]:{p}/page"),
        format!("http://2130706433:{p}/page"),
        format!("http://0x7f.1:{p}/page"),
        format!("http://017700000001:{p}/page"),
        format!("http://127.1:{p}/page"),
    ] {
        blocked(f.visit(&url).await, &url);
    }
    assert_eq!(s.hits.load(Ordering::SeqCst), 0, "no refused URL reached the server");
}

#[tokio::test]
async fn odd_spellings_are_the_same_address_once_parsed() {
    // With 127.0.0.1 allowed, each spelling reaches the server: it was
    // normalised to 127.0.0.1 before the check, not treated as a name.
    let s = server().await;
    let f = Fetcher::with_hosts(&config(s.port, true), hosts());
    for host in ["2130706433", "0x7f.1", "017700000001", "127.1"] {
        let page = f.visit(&format!("http://{host}:{}/text", s.port)).await.unwrap();
        assert_eq!(page.content, "plain words", "{host}");
    }
    assert_eq!(s.hits.load(Ordering::SeqCst), 4);
}

#[tokio::test]
async fn every_refused_range_is_refused_as_an_address_and_as_a_name() {
    let s = server().await;
    let p = s.port;
    let ranges = [
        "127.0.0.1",
        "10.0.0.1",
        "172.16.5.4",
        "192.168.0.1",
        "169.254.169.254",
        "100.64.0.1",
        "224.0.0.251",
        "255.255.255.255",
        "0.0.0.0",
        "192.0.2.10",
        "198.51.100.10",
        "203.0.113.10",
        "::1",
        "::",
        "fc00::1",
        "fd00::1",
        "fe80::1",
        "ff02::1",
        "2001:db8::1",
        "::ffff:10.0.0.1",
        "::ffff:169.254.169.254",
        "64:ff9b::a9fe:a9fe",
        "2002:a9fe:a9fe::1",
    ];
    let mut names = hosts();
    for (i, ip) in ranges.iter().enumerate() {
        names.insert(format!("r{i}.test"), vec![ip.parse().unwrap()]);
    }
    let f = Fetcher::with_hosts(&config(p, false), names);
    for (i, ip) in ranges.iter().enumerate() {
        let literal = if ip.contains(':') { format!("[{ip}]") } else { ip.to_string() };
        blocked(f.visit(&format!("http://{literal}:{p}/page")).await, ip);
        blocked(f.visit(&format!("http://r{i}.test:{p}/page")).await, &format!("a name resolving to {ip}"));
    }
    assert_eq!(s.hits.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn redirects_are_checked_at_every_hop_and_stop_after_five() {
    let s = server().await;
    let f = Fetcher::with_hosts(&config(s.port, true), hosts());
    let at = |path: &str| format!("http://127.0.0.1:{}{path}", s.port);
    assert_eq!(f.visit(&at("/hops/5")).await.unwrap().content, "arrived");
    assert_eq!(f.visit(&at("/hops/6")).await.unwrap_err(), WebError::TooManyRedirects(5));
    blocked(f.visit(&at("/to-metadata")).await, "redirect to 169.254.169.254");
    blocked(f.visit(&at("/to-internal-name")).await, "redirect to a name resolving to 10.0.0.5");
    blocked(f.visit(&at("/to-localhost-v6")).await, "redirect to [::1]");
}

#[tokio::test]
async fn scheme_credentials_and_port_are_refused_before_connecting() {
    let s = server().await;
    let p = s.port;
    let f = Fetcher::with_hosts(&config(p, true), hosts());
    for url in ["ftp://127.0.0.1/x", "file:///etc/passwd", "gopher://127.0.0.1:70/", "javascript:alert(1)"] {
        assert!(matches!(f.visit(url).await, Err(WebError::Scheme(_))), "{url}");
    }
    for url in [format!("http://user:secret@127.0.0.1:{p}/page"), format!("http://user@127.0.0.1:{p}/page")] {
        assert_eq!(f.visit(&url).await.unwrap_err(), WebError::Credentials, "{url}");
    }
    let other = config(0, true);
    let g = Fetcher::with_hosts(&other, hosts());
    assert_eq!(g.visit(&format!("http://127.0.0.1:{p}/page")).await.unwrap_err(), WebError::Port(p));
    assert_eq!(g.visit("http://example.org:22/").await.unwrap_err(), WebError::Port(22));
    assert!(matches!(f.visit("not a url").await, Err(WebError::InvalidUrl(_))));
    assert_eq!(s.hits.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn bodies_over_the_cap_slow_bodies_and_unsupported_types_are_refused() {
    let s = server().await;
    let at = |path: &str| format!("http://127.0.0.1:{}{path}", s.port);
    let f = Fetcher::with_hosts(&config(s.port, true), hosts());
    assert_eq!(f.visit(&at("/big")).await.unwrap_err(), WebError::TooLarge(4_096), "declared length");
    assert_eq!(f.visit(&at("/endless")).await.unwrap_err(), WebError::TooLarge(4_096), "streamed body");
    assert_eq!(f.visit(&at("/pdf")).await.unwrap_err(), WebError::Unsupported("PDF".into()));
    assert!(matches!(f.visit(&at("/none")).await, Err(WebError::Unsupported(_))));
    assert_eq!(f.visit(&at("/missing")).await.unwrap_err(), WebError::Status(404));
    let quick = WebConfig { fetch_timeout: Duration::from_millis(300), ..config(s.port, true) };
    let g = Fetcher::with_hosts(&quick, hosts());
    assert_eq!(g.visit(&at("/slow")).await.unwrap_err(), WebError::Timeout(300));
}

/// CPU seconds so far of this process's threads named `name`.
fn cpu_of_threads(name: &str) -> f64 {
    let mut ticks = 0u64;
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
        if comm.trim() != name || stat.is_empty() {
            continue;
        }
        let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
        ticks += fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    }
    ticks as f64 / 100.0
}

/// Pathological pages are refused by the budget (not by the clock), and the
/// timeout waits for the conversion's end: after every answer no conversion
/// runs and the runtime's threads (their CPU read from /proc, this runtime's
/// threads alone) stay idle in the following second. Before the budget, the
/// first page answered `timeout` and its conversion went on for minutes.
#[test]
fn no_conversion_outlives_its_visit() {
    const THREADS: &str = "web-visit-cpu";
    let rt = tokio::runtime::Builder::new_multi_thread().thread_name(THREADS).enable_all().build().unwrap();
    rt.block_on(async {
        let s = server().await;
        let at = |path: String| format!("http://127.0.0.1:{}{path}", s.port);
        let roomy = WebConfig { fetch_max_bytes: 2 * 1024 * 1024, ..config(s.port, true) };
        let idle_after = |f: Fetcher, what: String| async move {
            assert_eq!(f.conversions_running(), 0, "{what}");
            let before = cpu_of_threads(THREADS);
            tokio::time::sleep(Duration::from_secs(1)).await;
            let used = cpu_of_threads(THREADS) - before;
            assert!(used < 0.25, "{what}: {used} s of CPU in the second after the answer");
        };
        let slow = WebConfig { fetch_timeout: Duration::from_secs(60), ..roomy.clone() };
        for (i, (what, _, why)) in page::tests::pathological().into_iter().enumerate() {
            let f = Fetcher::with_hosts(&slow, hosts());
            let url = at(format!("/pathological/{i}"));
            match tokio::time::timeout(Duration::from_secs(600), f.visit(&url)).await.expect("hang guard") {
                Err(e @ WebError::TooComplex(_)) => {
                    assert_eq!(e.code(), "page_too_complex");
                    assert!(e.to_string().contains(why), "{what}: {e}");
                }
                other => panic!("{what}: {other:?}"),
            }
            idle_after(f, what.to_string()).await;
        }
        // Within the budget but slower to convert than the time limit.
        let quick = WebConfig { fetch_timeout: Duration::from_millis(200), ..roomy.clone() };
        let f = Fetcher::with_hosts(&quick, hosts());
        let url = at("/chains".into());
        let r = tokio::time::timeout(Duration::from_secs(600), f.visit(&url)).await.expect("hang guard");
        assert_eq!(r.unwrap_err(), WebError::Timeout(200));
        idle_after(f, "a timed-out conversion".into()).await;
    });
}

#[tokio::test]
async fn a_large_normal_page_is_read_whole() {
    let s = server().await;
    let roomy = WebConfig { fetch_max_bytes: 2 * 1024 * 1024, ..config(s.port, true) };
    let f = Fetcher::with_hosts(&roomy, hosts());
    let page = f.visit(&format!("http://127.0.0.1:{}/table", s.port)).await.unwrap();
    assert_eq!((page.format, page.title.as_deref()), ("html", Some("Prices | Example")));
    assert!(page.content.contains("Row 0") && page.content.contains("Row 4999"), "{}", page.content.len());
    assert_eq!(f.conversions_running(), 0);
}
