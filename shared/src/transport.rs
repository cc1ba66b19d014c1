//! `TCP_NODELAY` on the Lambda Runtime API connection.
//!
//! A streamed response is a run of small writes to the Runtime API. The
//! official runtime client (`lambda_runtime_api_client`) connects with
//! hyper-util's `HttpConnector::new()`, which leaves Nagle's algorithm on, so
//! each small frame waits for the ACK of the previous one — up to the ~40 ms
//! delayed-ACK timer on Linux. Measured under `cargo lambda watch`: frames
//! written 10 ms apart arrived as `2, 13, 57, 57, 57, 58, 70, 81` ms. The
//! client exposes no connector hook, and we do not patch third-party code, so
//! we work around it here: we find the process's TCP sockets whose peer is the
//! Runtime API and turn Nagle off on them. The handler calls
//! [`nodelay_runtime_api`] at the start of every invocation, which covers the
//! connection the response will be streamed on (the runtime reuses the pooled
//! connection it fetched the invocation with, and any new one exists by then).
//!
//! The other sockets on the hot path set it themselves: the model client's
//! reqwest builder sets `tcp_nodelay(true)`, and the AWS SDK's hyper client
//! sets `TCP_NODELAY` on its connections (aws-smithy-http-client's default
//! connector), so DynamoDB requests are not held either.

use std::net::{SocketAddr, ToSocketAddrs};
use std::os::fd::BorrowedFd;
use std::sync::OnceLock;

/// The Runtime API's socket addresses, from `AWS_LAMBDA_RUNTIME_API`: a bare
/// `host:port` in Lambda, a URL with a path under `cargo lambda watch`.
pub fn runtime_api_addrs(value: &str) -> Vec<SocketAddr> {
    let rest = value.split_once("://").map_or(value, |(_, r)| r);
    let authority = rest.split('/').next().unwrap_or("");
    authority.to_socket_addrs().map(|a| a.collect()).unwrap_or_default()
}

fn configured_addrs() -> &'static [SocketAddr] {
    static ADDRS: OnceLock<Vec<SocketAddr>> = OnceLock::new();
    ADDRS.get_or_init(|| std::env::var("AWS_LAMBDA_RUNTIME_API").map(|v| runtime_api_addrs(&v)).unwrap_or_default())
}

/// Sets `TCP_NODELAY` on every socket of this process connected to the Runtime
/// API (from `AWS_LAMBDA_RUNTIME_API`). Returns how many sockets it changed.
/// A no-op outside Lambda.
pub fn nodelay_runtime_api() -> usize {
    // `RUNTIME_API_NODELAY=off` leaves Nagle on: only for measuring the
    // difference (the benchmark's before/after), never for production.
    static ENABLED: OnceLock<bool> = OnceLock::new();
    if !*ENABLED.get_or_init(|| std::env::var("RUNTIME_API_NODELAY").map(|v| v != "off").unwrap_or(true)) {
        return 0;
    }
    let addrs = configured_addrs();
    if addrs.is_empty() {
        return 0;
    }
    nodelay_sockets_to(addrs)
}

/// Sets `TCP_NODELAY` on every TCP socket of this process whose peer is one of
/// `peers`; returns how many were changed (already set ones are not counted).
pub fn nodelay_sockets_to(peers: &[SocketAddr]) -> usize {
    let mut changed = 0;
    for_each_socket(|sock| {
        let Some(peer) = sock.peer_addr().ok().and_then(|a| a.as_socket()) else { return };
        if peers.contains(&peer) && sock.tcp_nodelay().ok() == Some(false) && sock.set_tcp_nodelay(true).is_ok() {
            changed += 1;
        }
    });
    changed
}

/// `TCP_NODELAY` of every socket of this process connected to one of `peers`
/// (for tests and diagnostics).
pub fn nodelay_of_sockets_to(peers: &[SocketAddr]) -> Vec<(SocketAddr, bool)> {
    let mut out = Vec::new();
    for_each_socket(|sock| {
        if let (Some(peer), Ok(nodelay)) = (sock.peer_addr().ok().and_then(|a| a.as_socket()), sock.tcp_nodelay()) {
            if peers.contains(&peer) {
                out.push((peer, nodelay));
            }
        }
    });
    out
}

fn for_each_socket(mut f: impl FnMut(socket2::SockRef<'_>)) {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else { return };
    for entry in dir.flatten() {
        let Some(fd) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        // Only sockets: the link of a socket fd reads `socket:[inode]`.
        match std::fs::read_link(entry.path()) {
            Ok(target) if target.to_string_lossy().starts_with("socket:") => {}
            _ => continue,
        }
        // SAFETY: the fd was open a moment ago and is only borrowed for two
        // syscalls. Should another thread close it in between, the calls fail
        // with EBADF (or, if the number was reused, act on a socket that is
        // then checked by its peer address again), never touching memory.
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        f(socket2::SockRef::from(&fd));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_api_value_forms() {
        assert_eq!(runtime_api_addrs("127.0.0.1:9001"), vec!["127.0.0.1:9001".parse().unwrap()]);
        assert_eq!(runtime_api_addrs("http://127.0.0.1:9000/.rt"), vec!["127.0.0.1:9000".parse().unwrap()]);
        assert!(runtime_api_addrs("").is_empty());
    }

    #[test]
    fn only_sockets_to_the_given_peer_are_changed() {
        let a = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let b = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let to_a = std::net::TcpStream::connect(a.local_addr().unwrap()).unwrap();
        let to_b = std::net::TcpStream::connect(b.local_addr().unwrap()).unwrap();
        assert!(!to_a.nodelay().unwrap() && !to_b.nodelay().unwrap());
        assert_eq!(nodelay_sockets_to(&[a.local_addr().unwrap()]), 1);
        assert!(to_a.nodelay().unwrap(), "the socket to the runtime API has Nagle off");
        assert!(!to_b.nodelay().unwrap(), "other sockets are left alone");
        assert_eq!(nodelay_sockets_to(&[a.local_addr().unwrap()]), 0, "idempotent");
    }
}
