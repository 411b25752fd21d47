//! Who may do what on the admin port. Health and readiness are open to all. Without an admin
//! token the port is read-only for anonymous callers (state, metrics, decisions): changing
//! anything (minting client keys, resetting cooldowns and breakers, settings, leases) needs an
//! `admin`-scoped client key. With a token, every other path needs the token or such a key.
//! Before any of that, requests that a browser could have been tricked into sending are refused:
//! a `Host` that is not this port's (DNS rebinding), a cross-origin `Origin` on a change, and a
//! change whose body is not JSON (a form or `text/plain` post needs no CORS preflight).
//! Failed token checks are logged (never the token), counted, and slowed down per network
//! prefix.

use crate::http::Head;
use crate::state::core::Shared;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Failed admin authentications since start (`ringside_admin_auth_failures_total`).
pub static AUTH_FAILURES: AtomicU64 = AtomicU64::new(0);

/// Why a request is refused before it reaches an endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// `Host` names neither this port nor a loopback or configured name.
    ForeignHost,
    /// A change sent from another origin's page.
    CrossOrigin,
    /// A change whose body is not `application/json`.
    NotJson,
    /// A token is configured and the caller presented neither it nor an admin key.
    Unauthorized,
    /// No token is configured: changes need an `admin`-scoped client key.
    ReadOnly,
}

impl Refusal {
    pub fn status(self) -> u16 {
        match self {
            Refusal::ForeignHost => 421,
            Refusal::CrossOrigin | Refusal::ReadOnly => 403,
            Refusal::NotJson => 415,
            Refusal::Unauthorized => 401,
        }
    }

    pub fn code(self) -> &'static str {
        match self {
            Refusal::ForeignHost => "misdirected_host",
            Refusal::CrossOrigin => "cross_origin_refused",
            Refusal::NotJson => "unsupported_media_type",
            Refusal::Unauthorized => "admin_unauthorized",
            Refusal::ReadOnly => "admin_read_only",
        }
    }

    pub fn message(self) -> &'static str {
        match self {
            Refusal::ForeignHost => {
                "the Host header names neither this admin address nor a loopback name (add it to server.admin_hosts)"
            }
            Refusal::CrossOrigin => "changes from another origin's page are refused",
            Refusal::NotJson => "changes take a JSON body (content-type: application/json)",
            Refusal::Unauthorized => "admin token required",
            Refusal::ReadOnly => {
                "the admin API is read-only without a token: set server.admin_token_env (or present an admin-scoped client key) to make changes"
            }
        }
    }

    /// The JSON error body.
    pub fn body(self) -> Vec<u8> {
        let t = if self == Refusal::Unauthorized {
            "authentication_error"
        } else if self == Refusal::NotJson {
            "invalid_request_error"
        } else {
            "permission_error"
        };
        serde_json::to_vec(&serde_json::json!({"error": {
            "message": self.message(), "type": t, "code": self.code()}}))
        .unwrap_or_default()
    }
}

/// Who the caller proved to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Caller {
    /// Presented the admin token or an `admin`-scoped client key.
    Admin,
    /// Presented nothing that grants admin rights.
    Anonymous,
    /// Presented a credential that was wrong (counted as a failure).
    Failed,
}

/// Paths anyone may read, token or not: load balancers and orchestrators probe the first two;
/// `/` is the status page, which holds no data (it asks for the token and reads the API).
/// HEAD as well as GET: `option httpchk HEAD /readyz` is a common health check.
pub fn is_probe(method: &str, path: &str) -> bool {
    matches!(method, "GET" | "HEAD")
        && matches!(path, "/healthz" | "/readyz" | "/" | "/favicon.ico")
}

/// Methods that only read.
pub fn is_read(method: &str) -> bool {
    matches!(method, "GET" | "HEAD")
}

/// Decide whether a request may reach its endpoint.
pub fn check(shared: &Shared, head: &Head, caller: Caller, body_len: usize) -> Result<(), Refusal> {
    let server = &shared.current().config.server;
    let hosts = head
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("host"))
        .count();
    if hosts > 1
        || !host_allowed(
            head.get_str("host"),
            server.admin_listen,
            &server.admin_hosts,
        )
    {
        return Err(Refusal::ForeignHost);
    }
    let method = head.method();
    if is_probe(method, head.path()) {
        return Ok(());
    }
    if !is_read(method) {
        if let Some(origin) = head.get_str("origin")
            && !same_origin(origin, head.get_str("host"))
        {
            return Err(Refusal::CrossOrigin);
        }
        if body_len > 0 && !head.content_type_is_json() {
            return Err(Refusal::NotJson);
        }
    }
    match (caller, server.admin_token.is_some()) {
        (Caller::Admin, _) => Ok(()),
        (_, true) => Err(Refusal::Unauthorized),
        (Caller::Failed, false) if !is_read(method) => Err(Refusal::Unauthorized),
        (_, false) if is_read(method) => Ok(()),
        (_, false) => Err(Refusal::ReadOnly),
    }
}

/// Whether `host` (the `Host` header, port included) names this admin port: any IP literal,
/// `localhost`, or a configured name. A missing `Host` (HTTP/1.0 tools) is accepted: a browser
/// always sends one, and DNS rebinding needs a browser.
pub fn host_allowed(host: Option<&str>, listen: SocketAddr, names: &[String]) -> bool {
    let Some(host) = host else {
        return true;
    };
    let name = strip_port(host.trim());
    if name.eq_ignore_ascii_case("localhost") || name.eq_ignore_ascii_case("localhost.") {
        return true;
    }
    if let Ok(ip) = name
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<IpAddr>()
    {
        // An IP literal cannot be rebound; it must be this port's address when that is fixed.
        return listen.ip().is_unspecified() || ip == listen.ip() || ip.is_loopback();
    }
    names.iter().any(|n| n.eq_ignore_ascii_case(name))
}

fn strip_port(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        // [v6]:port
        return match rest.find(']') {
            Some(i) => &host[..i + 2],
            None => host,
        };
    }
    match host.rsplit_once(':') {
        Some((h, p)) if p.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => host,
    }
}

/// Whether an `Origin` is the admin port's own (`http://<Host>`): the status page's requests.
fn same_origin(origin: &str, host: Option<&str>) -> bool {
    let Some(host) = host else {
        return false;
    };
    origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
        .is_some_and(|o| o.eq_ignore_ascii_case(host.trim()))
}

/// Token failures by network: each repeated failure from one waits longer before its answer
/// (100 ms doubling up to 5 s), so guessing a token is slow. Failures count per prefix (an
/// IPv4 /24, all of 127.0.0.0/8, an IPv6 /64), not per exact address: a host has many
/// loopback addresses and an IPv6 network many more, and rotating among them must not start
/// each guess afresh. A success, or a quiet minute, forgets the prefix.
///
/// Failures from one prefix are answered one after another (each waits for the one before it
/// and then its own delay), so that guesses sent in parallel gain nothing; once the line is a
/// minute long, a credential from that prefix is refused with 429 without being checked.
#[derive(Default)]
pub struct Throttle {
    failures: HashMap<Prefix, Failures>,
}

#[derive(Clone, Copy, Debug)]
struct Failures {
    count: u32,
    /// The last failure (Unix ms).
    last_at: u64,
    /// When the last failure's answer goes out.
    release_at: u64,
}

/// The longest line of waiting failures a prefix may build before its guesses go unchecked.
pub const LOCKOUT_MS: u64 = 60_000;

/// Where failures are counted together.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum Prefix {
    V4([u8; 3]),
    V6([u8; 8]),
    /// Every prefix met once the table is full: they wait together.
    Overflow,
}

impl Prefix {
    pub fn of(ip: IpAddr) -> Prefix {
        let v4 = match ip {
            IpAddr::V4(v4) => Some(v4),
            IpAddr::V6(v6) => v6.to_ipv4_mapped(),
        };
        match (v4, ip) {
            (Some(v4), _) if v4.is_loopback() => Prefix::V4([127, 0, 0]),
            (Some(v4), _) => {
                let o = v4.octets();
                Prefix::V4([o[0], o[1], o[2]])
            }
            (None, IpAddr::V6(v6)) => {
                let mut p = [0u8; 8];
                p.copy_from_slice(&v6.octets()[..8]);
                Prefix::V6(p)
            }
            (None, IpAddr::V4(_)) => Prefix::Overflow,
        }
    }
}

/// The most prefixes remembered (rotating prefixes cannot grow the map, nor empty it).
const THROTTLE_ADDRESSES: usize = 4096;

impl Throttle {
    /// Record a failure from `ip` at `now_ms`; returns how long to wait before answering.
    pub fn failed(&mut self, ip: IpAddr, now_ms: u64) -> Duration {
        let mut key = Prefix::of(ip);
        if self.failures.len() >= THROTTLE_ADDRESSES && !self.failures.contains_key(&key) {
            self.failures
                .retain(|_, f| now_ms.saturating_sub(f.last_at) < 60_000);
            if self.failures.len() >= THROTTLE_ADDRESSES {
                key = Prefix::Overflow;
            }
        }
        let fresh = Failures {
            count: 0,
            last_at: now_ms,
            release_at: now_ms,
        };
        let f = self.failures.entry(key).or_insert(fresh);
        if now_ms.saturating_sub(f.last_at) >= 60_000 && f.release_at <= now_ms {
            *f = fresh;
        }
        f.count = f.count.saturating_add(1);
        f.last_at = now_ms;
        let delay = (100u64 << (f.count - 1).min(6)).min(5_000);
        f.release_at = f.release_at.max(now_ms) + delay;
        Duration::from_millis(f.release_at - now_ms)
    }

    /// How long `ip`'s prefix stays refused without a check, if its line of waiting failures
    /// is longer than [`LOCKOUT_MS`].
    pub fn locked(&self, ip: IpAddr, now_ms: u64) -> Option<Duration> {
        let wait = self
            .failures
            .get(&Prefix::of(ip))
            .map_or(0, |f| f.release_at.saturating_sub(now_ms));
        (wait > LOCKOUT_MS).then(|| Duration::from_millis(wait - LOCKOUT_MS))
    }

    pub fn succeeded(&mut self, ip: IpAddr) {
        self.failures.remove(&Prefix::of(ip));
    }
}

/// Log one failed authentication (the address and path, never what was presented).
pub fn log_failure(peer: Option<SocketAddr>, method: &str, path: &str) {
    AUTH_FAILURES.fetch_add(1, Relaxed);
    let path: String = path.chars().take(128).collect();
    crate::log::event(
        "warn",
        "admin authentication failed",
        serde_json::json!({"peer": peer.map(|p| p.ip().to_string()), "method": method, "path": path}),
    );
}

/// Compare a presented token with the configured one in time that does not depend on where
/// they differ or on the presented length (both are hashed first).
pub fn token_matches(given: &[u8], token: &[u8]) -> bool {
    let (a, b) = (crate::clients::digest(given), crate::clients::digest(token));
    a.iter().zip(&b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listen(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn hosts_that_name_this_port_are_allowed_and_others_are_not() {
        let l = listen("127.0.0.1:8081");
        let names = vec!["admin.internal".to_string()];
        for ok in [
            None,
            Some("127.0.0.1:8081"),
            Some("localhost:8081"),
            Some("LOCALHOST"),
            Some("[::1]:8081"),
            Some("admin.internal:8081"),
        ] {
            assert!(host_allowed(ok, l, &names), "{ok:?}");
        }
        for bad in [
            Some("evil.example:8081"),
            Some("10.0.0.5:8081"),
            Some("localhost.evil.example"),
            Some(""),
        ] {
            assert!(!host_allowed(bad, l, &names), "{bad:?}");
        }
        // Listening on every address: any IP literal is this host.
        assert!(host_allowed(
            Some("10.0.0.5:8081"),
            listen("0.0.0.0:8081"),
            &[]
        ));
        assert!(!host_allowed(
            Some("rebind.example"),
            listen("0.0.0.0:8081"),
            &[]
        ));
    }

    #[test]
    fn origins() {
        assert!(same_origin("http://127.0.0.1:8081", Some("127.0.0.1:8081")));
        assert!(!same_origin("http://evil.example", Some("127.0.0.1:8081")));
        assert!(!same_origin("null", Some("127.0.0.1:8081")));
    }

    #[test]
    fn failures_from_one_address_wait_longer_and_a_success_forgets_them() {
        let mut t = Throttle::default();
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        // Each answered before the next is sent (a client that waits for its answer).
        let mut now = 1_000;
        let waits: Vec<u64> = (0..9)
            .map(|_| {
                let w = t.failed(ip, now).as_millis() as u64;
                now += w;
                w
            })
            .collect();
        assert_eq!(waits, [100, 200, 400, 800, 1600, 3200, 5000, 5000, 5000]);
        t.succeeded(ip);
        assert_eq!(t.failed(ip, now).as_millis(), 100);
        // A quiet minute forgets too.
        assert_eq!(t.failed(ip, now + 100).as_millis(), 200);
        assert_eq!(t.failed(ip, now + 70_000).as_millis(), 100);
        // Many prefixes cannot grow the table without bound, nor empty it.
        for i in 0..10_000u32 {
            t.failed(IpAddr::from((i << 8).to_be_bytes()), now + 80_000);
        }
        assert!(t.failures.len() <= THROTTLE_ADDRESSES + 1);
        assert!(
            t.failed(IpAddr::from([9, 9, 9, 9]), now + 80_001)
                .as_millis()
                >= 200
        );
    }

    #[test]
    fn rotating_addresses_within_a_network_waits_as_one_in_one_line() {
        let mut t = Throttle::default();
        // Loopback addresses, as the probe used, all at once: they wait as one host, one
        // after another.
        let waits: Vec<u64> = (1..=8u8)
            .map(|i| t.failed(IpAddr::from([127, 0, i, 1]), 1_000).as_millis() as u64)
            .collect();
        assert_eq!(waits, [100, 300, 700, 1500, 3100, 6300, 11300, 16300]);
        // A minute's line: further guesses go unchecked until it is shorter.
        let lo: IpAddr = "127.0.0.9".parse().unwrap();
        assert_eq!(t.locked(lo, 1_000), None);
        for _ in 0..10 {
            t.failed(lo, 1_000);
        }
        let locked = t.locked(lo, 1_000).expect("locked");
        assert!(locked.as_millis() > 0);
        assert_eq!(
            t.locked(lo, 1_000 + LOCKOUT_MS * 2),
            None,
            "the line ran down"
        );
        assert_eq!(
            t.locked(IpAddr::from([10, 0, 0, 1]), 1_000),
            None,
            "others are not"
        );
        let mut t = Throttle::default();
        let v6 = |last: u16| IpAddr::from([0x2001, 0xdb8, 1, 2, 0, 0, 0, last]);
        assert_eq!(t.failed(v6(1), 1_000).as_millis(), 100);
        assert_eq!(t.failed(v6(2), 1_000).as_millis(), 300, "same /64, in line");
        let mapped: IpAddr = "::ffff:10.1.2.3".parse().unwrap();
        assert_eq!(t.failed(mapped, 1_000).as_millis(), 100);
        assert_eq!(
            t.failed(IpAddr::from([10, 1, 2, 99]), 1_000).as_millis(),
            300,
            "an IPv4-mapped address is its IPv4 /24"
        );
    }

    #[test]
    fn token_compare() {
        assert!(token_matches(b"s3cret", b"s3cret"));
        assert!(!token_matches(b"s3cre", b"s3cret"));
        assert!(!token_matches(b"", b"s3cret"));
    }
}
