//! Where `web_visit` may connect: the address policy and the resolver that
//! enforces it.
//!
//! Contract:
//! - a URL is checked before any request ([`Policy::check_url`]): `http` or
//!   `https`, no user name or password, port 80 or 443 (or one configured),
//!   and an IP-literal host must be a public address. The `url` crate parses
//!   hosts the WHATWG way, so odd IPv4 spellings (`2130706433`, `0x7f.1`,
//!   `017700000001`, `127.1`) are already the address they mean when checked;
//! - a name is resolved inside the HTTP client ([`GuardedResolver`]): the
//!   client connects only to the addresses the resolver kept, so there is no
//!   window between the check and the connection for DNS rebinding;
//! - refused: loopback, private (RFC 1918), link-local (169.254.0.0/16, the
//!   instance metadata endpoint), CGNAT, multicast, broadcast, unspecified,
//!   reserved, documentation and benchmarking ranges, IPv6 `::1`, `::`,
//!   unique-local `fc00::/7`, link-local `fe80::/10`, site-local, multicast,
//!   documentation, and any IPv6 address carrying an IPv4 one (mapped,
//!   compatible, NAT64, 6to4) whose IPv4 address is refused;
//! - an allow-list of CIDRs (`WEB_FETCH_ALLOW_CIDRS`, tests and local evals
//!   only) lets chosen addresses through.

use super::WebError;
use ipnet::IpNet;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use url::{Host, Url};

/// IPv4 ranges no page is fetched from, with what they are.
const V4: &[([u8; 4], u8, &str)] = &[
    ([0, 0, 0, 0], 8, "unspecified"),
    ([10, 0, 0, 0], 8, "private"),
    ([100, 64, 0, 0], 10, "shared (CGNAT)"),
    ([127, 0, 0, 0], 8, "loopback"),
    ([169, 254, 0, 0], 16, "link-local"),
    ([172, 16, 0, 0], 12, "private"),
    ([192, 0, 0, 0], 24, "reserved"),
    ([192, 0, 2, 0], 24, "documentation"),
    ([192, 88, 99, 0], 24, "reserved"),
    ([192, 168, 0, 0], 16, "private"),
    ([198, 18, 0, 0], 15, "benchmarking"),
    ([198, 51, 100, 0], 24, "documentation"),
    ([203, 0, 113, 0], 24, "documentation"),
    ([224, 0, 0, 0], 4, "multicast"),
    ([240, 0, 0, 0], 4, "reserved"),
    ([255, 255, 255, 255], 32, "broadcast"),
];

/// IPv6 ranges refused outright (those embedding IPv4 are checked by it).
const V6: &[(u128, u8, &str)] = &[
    (0, 128, "unspecified"),
    (1, 128, "loopback"),
    (0x0100 << 112, 64, "discard"),
    (0x2001_0000 << 96, 32, "Teredo"),
    (0x2001_0db8 << 96, 32, "documentation"),
    (0xfc00 << 112, 7, "unique-local"),
    (0xfe80 << 112, 10, "link-local"),
    (0xfec0 << 112, 10, "site-local"),
    (0xff00 << 112, 8, "multicast"),
];

fn in_v4(ip: Ipv4Addr, base: [u8; 4], prefix: u8) -> bool {
    let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
    u32::from(ip) & mask == u32::from_be_bytes(base) & mask
}

fn in_v6(ip: Ipv6Addr, base: u128, prefix: u8) -> bool {
    let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
    u128::from(ip) & mask == base & mask
}

/// The IPv4 address an IPv6 one carries: mapped (`::ffff:a.b.c.d`),
/// compatible (`::a.b.c.d`), NAT64 (`64:ff9b::a.b.c.d`) or 6to4 (`2002:AABB:CCDD::`).
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let n = u128::from(ip);
    let low = Ipv4Addr::from(n as u32);
    if in_v6(ip, 0xffff << 32, 96) || in_v6(ip, 0, 96) || in_v6(ip, 0x0064_ff9b << 96, 96) {
        return Some(low);
    }
    in_v6(ip, 0x2002 << 112, 16).then(|| Ipv4Addr::from((n >> 80) as u32))
}

/// Why `ip` is refused (what range it is in), or `None` for a public address.
pub fn reserved(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => V4.iter().find(|(base, p, _)| in_v4(v4, *base, *p)).map(|(_, _, what)| *what),
        IpAddr::V6(v6) => {
            // `::` and `::1` sit inside the compatible range: name them as themselves.
            let own = V6.iter().find(|(base, p, _)| in_v6(v6, *base, *p)).map(|(_, _, what)| *what);
            match (own, embedded_v4(v6)) {
                (Some(what), _) => Some(what),
                (None, Some(v4)) => reserved(IpAddr::V4(v4)),
                (None, None) => None,
            }
        }
    }
}

/// What `web_visit` may reach.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    /// Addresses let through although refused (tests, local evals).
    pub allow: Vec<IpNet>,
    /// Ports besides 80 and 443.
    pub ports: Vec<u16>,
}

impl Policy {
    /// `Err(Blocked)` for an address the policy refuses.
    pub fn check_ip(&self, ip: IpAddr) -> Result<(), WebError> {
        let canonical = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
            v4 => v4,
        };
        if self.allow.iter().any(|net| net.contains(&ip) || net.contains(&canonical)) {
            return Ok(());
        }
        match reserved(ip) {
            Some(what) => Err(WebError::Blocked(format!("{ip} ({what})"))),
            None => Ok(()),
        }
    }

    /// Scheme, credentials, port, and an IP-literal host; names are checked
    /// when the client resolves them.
    pub fn check_url(&self, url: &Url) -> Result<(), WebError> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(WebError::Scheme(url.scheme().to_string()));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(WebError::Credentials);
        }
        let port = url.port_or_known_default().unwrap_or(0);
        if !matches!(port, 80 | 443) && !self.ports.contains(&port) {
            return Err(WebError::Port(port));
        }
        match url.host() {
            Some(Host::Ipv4(ip)) => self.check_ip(IpAddr::V4(ip)),
            Some(Host::Ipv6(ip)) => self.check_ip(IpAddr::V6(ip)),
            Some(Host::Domain(_)) => Ok(()),
            None => Err(WebError::InvalidUrl("the URL has no host".into())),
        }
    }
}

/// A name resolved only to refused addresses: what the resolver answers,
/// found again in the client's error chain.
#[derive(Debug)]
pub struct Refused(pub String);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

/// The HTTP client's resolver: the system's answers (or a fixed table),
/// filtered through the policy. The client connects only to what it returns.
pub struct GuardedResolver {
    pub policy: Arc<Policy>,
    /// Names answered from this table instead of the system resolver: tests
    /// name hosts that resolve to chosen addresses. Empty in production.
    pub fixed: HashMap<String, Vec<IpAddr>>,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_ascii_lowercase();
        let fixed = self.fixed.get(&host).cloned();
        let policy = self.policy.clone();
        Box::pin(async move {
            let found: Vec<IpAddr> = match fixed {
                Some(ips) => ips,
                None => tokio::net::lookup_host((host.as_str(), 0)).await?.map(|a| a.ip()).collect(),
            };
            let mut refused = None;
            let kept: Vec<SocketAddr> = found
                .into_iter()
                .filter(|ip| match policy.check_ip(*ip) {
                    Ok(()) => true,
                    Err(e) => {
                        refused.get_or_insert(e);
                        false
                    }
                })
                .map(|ip| SocketAddr::new(ip, 0))
                .collect();
            if kept.is_empty() {
                let why = refused.map_or_else(|| "no address".to_string(), |e| e.to_string());
                return Err(Box::new(Refused(format!("{host} resolves to {why}"))) as _);
            }
            Ok(Box::new(kept.into_iter()) as Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(s: &str) -> bool {
        reserved(s.parse().unwrap()).is_some()
    }

    #[test]
    fn every_listed_range_is_refused_and_public_addresses_pass() {
        for ip in [
            "127.0.0.1",
            "127.255.255.254",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "100.127.255.255",
            "224.0.0.1",
            "239.255.255.250",
            "255.255.255.255",
            "0.0.0.0",
            "192.0.2.1",
            "198.51.100.7",
            "203.0.113.9",
            "::1",
            "::",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "ff02::1",
            "2001:db8::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::ffff:10.0.0.1",
            "::127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "2002:7f00:1::",
        ] {
            assert!(refused(ip), "{ip} must be refused");
        }
        for ip in ["93.184.215.14", "1.1.1.1", "172.32.0.1", "100.128.0.1", "2606:4700::1111", "::ffff:1.1.1.1"] {
            assert!(!refused(ip), "{ip} is public");
        }
    }

    #[test]
    fn the_url_crate_normalises_odd_ipv4_spellings_before_the_check() {
        let p = Policy::default();
        for u in [
            "http://2130706433/",
            "http://0x7f.1/",
            "http://017700000001/",
            "http://127.1/",
            "http://0x7f000001/",
            "http://0177.0.0.1/",
            "http://127.0.0.1./",
            "http://[::ffff:7f00:1]/",
            "http://0xa9.0xfe.0xa9.0xfe/",
        ] {
            let url = Url::parse(u).unwrap();
            assert!(matches!(url.host(), Some(Host::Ipv4(_)) | Some(Host::Ipv6(_))), "{u} parses as an address");
            assert!(matches!(p.check_url(&url), Err(WebError::Blocked(_))), "{u}");
        }
        assert_eq!(Url::parse("http://0x7f.1/").unwrap().host_str(), Some("127.0.0.1"));
    }

    #[test]
    fn the_allow_list_lets_only_its_addresses_through() {
        let p = Policy { allow: vec!["127.0.0.1/32".parse().unwrap()], ports: vec![] };
        assert!(p.check_ip("127.0.0.1".parse().unwrap()).is_ok());
        assert!(p.check_ip("::ffff:127.0.0.1".parse().unwrap()).is_ok());
        assert!(p.check_ip("127.0.0.2".parse().unwrap()).is_err());
        assert!(p.check_ip("169.254.169.254".parse().unwrap()).is_err());
    }
}
