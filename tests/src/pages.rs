//! A local web server for the web tools' tests and evals: fixed answers by
//! path (status, content type, body), on loopback, counting the requests it
//! gets. It stands in for public sites and for search providers (answering
//! in their documented JSON); the stream function reaches it only through
//! the allow-list settings (`WEB_FETCH_ALLOW_CIDRS`, `WEB_FETCH_ALLOW_PORTS`)
//! that production never sets.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// One fixed answer.
#[derive(Clone)]
pub struct Answer {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
    /// A `Location` header (redirects).
    pub location: Option<String>,
    /// The body one byte at a time, forever (a page slower than any limit).
    pub trickle: bool,
}

impl Answer {
    pub fn ok(content_type: &'static str, body: impl Into<String>) -> Answer {
        Answer { status: 200, content_type, body: body.into(), location: None, trickle: false }
    }

    pub fn status(status: u16, content_type: &'static str, body: impl Into<String>) -> Answer {
        Answer { status, ..Answer::ok(content_type, body) }
    }

    pub fn redirect(to: impl Into<String>) -> Answer {
        Answer { status: 302, location: Some(to.into()), ..Answer::ok("text/plain", "") }
    }

    pub fn trickle() -> Answer {
        Answer { trickle: true, ..Answer::ok("text/plain", "") }
    }
}

pub struct Pages {
    pub host: &'static str,
    pub port: u16,
    hits: Arc<AtomicUsize>,
    requests: Arc<Mutex<Vec<String>>>,
}

impl Pages {
    /// Serves `routes` (by path, query ignored) on 127.0.0.1; anything else is a 404.
    pub async fn start(routes: Vec<(String, Answer)>) -> Pages {
        Pages::start_on("127.0.0.1", routes).await
    }

    /// On another loopback address (e.g. `127.0.0.2`): a test can allow
    /// this one and still see 127.0.0.1 and `localhost` refused.
    pub async fn start_on(host: &'static str, routes: Vec<(String, Answer)>) -> Pages {
        let listener = TcpListener::bind((host, 0)).await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let routes: Arc<HashMap<String, Answer>> = Arc::new(routes.into_iter().collect());
        let (hits, requests) = (Arc::new(AtomicUsize::new(0)), Arc::new(Mutex::new(Vec::new())));
        let (h, r) = (hits.clone(), requests.clone());
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                h.fetch_add(1, Ordering::SeqCst);
                let (routes, r) = (routes.clone(), r.clone());
                tokio::spawn(async move {
                    let Some(head) = read_head(&mut sock).await else { return };
                    let target = head.split(' ').nth(1).unwrap_or("/").to_string();
                    r.lock().unwrap().push(target.clone());
                    let path = target.split('?').next().unwrap_or("/");
                    let a = routes.get(path).cloned().unwrap_or(Answer::status(404, "text/plain", "no"));
                    answer(&mut sock, a).await;
                });
            }
        });
        Pages { host, port, hits, requests }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}:{}{path}", self.host, self.port)
    }

    /// Connections accepted so far.
    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }

    /// Request targets (path and query), in order.
    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

/// The request head (a body, if any, is not read: these routes ignore it).
async fn read_head(sock: &mut tokio::net::TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut buf = [0u8; 2048];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match sock.read(&mut buf).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    Some(String::from_utf8_lossy(&head).into_owned())
}

async fn answer(sock: &mut tokio::net::TcpStream, a: Answer) {
    let location = a.location.map(|l| format!("Location: {l}\r\n")).unwrap_or_default();
    let length = if a.trickle { String::new() } else { format!("Content-Length: {}\r\n", a.body.len()) };
    let head = format!(
        "HTTP/1.1 {} X\r\nContent-Type: {}\r\n{location}{length}Connection: close\r\n\r\n",
        a.status, a.content_type
    );
    if sock.write_all(head.as_bytes()).await.is_err() {
        return;
    }
    if !a.trickle {
        let _ = sock.write_all(a.body.as_bytes()).await;
        return;
    }
    while sock.write_all(b".").await.is_ok() {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}
