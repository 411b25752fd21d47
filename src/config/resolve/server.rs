//! The `[server]`, `[limits]` and `[upstream]` sections: addresses, the driver, the admin
//! port's access rules, connection caps, and the limits' and timeouts' ranges.

use super::super::problems::Problems;
use super::super::schema::{FileConfig, LimitsSection, ServerSection, UpstreamSection};
use super::super::*;

/// Resolve `[server]` (and check `[limits]` and `[upstream]`, which are used as they are).
pub(in crate::config) fn server(
    p: &mut Problems,
    file: &FileConfig,
    env: EnvLookup,
) -> ServerSettings {
    let s = &file.server;
    let listen = parse_addr(p, "server.listen", &s.listen);
    let admin_listen = parse_addr(p, "server.admin_listen", &s.admin_listen);
    if s.listen == s.admin_listen {
        p.add("server.admin_listen", "must differ from server.listen");
    }
    p.in_range("server.workers", s.workers, 0, 1024);
    p.in_range(
        "server.shutdown_grace_ms",
        s.shutdown_grace_ms,
        0,
        86_400_000,
    );
    p.in_range("server.drain_delay_ms", s.drain_delay_ms, 0, 3_600_000);
    let driver = match s.driver.as_str() {
        "auto" => DriverChoice::Auto,
        "uring" | "io_uring" => DriverChoice::Uring,
        "epoll" | "legacy" => DriverChoice::Epoll,
        other => {
            p.add(
                "server.driver",
                format!("`{other}` is not one of auto, uring, epoll"),
            );
            DriverChoice::Auto
        }
    };
    let admin_token = admin_access(p, s, env, admin_listen);
    p.in_range(
        "server.max_unauthenticated_per_address",
        s.max_unauthenticated_per_address,
        1,
        1_000_000,
    );
    check_limits(p, &file.limits);
    check_upstream(p, &file.upstream);

    let workers = if s.workers == 0 {
        available_cores()
    } else {
        s.workers
    };
    ServerSettings {
        tls: super::listener_tls::listener_tls(p, s),
        listen,
        admin_listen,
        workers,
        driver,
        data_dir: s.data_dir.clone(),
        admin_token,
        admin_unauthenticated_ok: s.admin_unauthenticated_ok,
        admin_hosts: s
            .admin_hosts
            .iter()
            .map(|h| h.to_ascii_lowercase())
            .collect(),
        max_connections: s.max_connections,
        max_unauthenticated_per_address: s.max_unauthenticated_per_address,
        max_connections_per_address: s.max_connections_per_address,
        hosts: data_hosts(p, &s.hosts),
        shutdown_grace: Duration::from_millis(s.shutdown_grace_ms),
        drain_delay: Duration::from_millis(s.drain_delay_ms),
        access_log: s.access_log,
        pin_workers: s.pin_workers,
        trusted_proxies: trusted_proxies(p, &s.trusted_proxies),
    }
}

/// `server.hosts`: host names, or `*.` and a domain for its subdomains.
fn data_hosts(p: &mut Problems, list: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for (i, h) in list.iter().enumerate() {
        let name = h.strip_prefix("*.").unwrap_or(h);
        let ok = !name.is_empty()
            && name.len() <= 253
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.');
        if ok {
            out.push(h.to_ascii_lowercase());
        } else {
            p.add(
                format!("server.hosts[{i}]"),
                format!("`{h}` is not a host name (or `*.` and a domain)"),
            );
        }
    }
    out
}

/// `server.trusted_proxies`: addresses (a single host) or CIDR ranges.
fn trusted_proxies(p: &mut Problems, list: &[String]) -> Vec<ipnet::IpNet> {
    let mut out = Vec::new();
    for (i, s) in list.iter().enumerate() {
        let parsed = s
            .parse::<ipnet::IpNet>()
            .or_else(|_| s.parse::<std::net::IpAddr>().map(ipnet::IpNet::from));
        match parsed {
            Ok(net) => out.push(net),
            Err(_) => p.add(
                format!("server.trusted_proxies[{i}]"),
                format!("`{s}` is neither an IP address nor a CIDR range (10.0.0.0/8)"),
            ),
        }
    }
    out
}

/// The shortest admin token accepted: guessing one must not be a matter of a few thousand
/// tries, however slow each is made.
pub const MIN_ADMIN_TOKEN_CHARS: usize = 24;

/// The admin port's token, and its exposure: a port other hosts can reach needs a token, or
/// the operator's explicit consent to a read-only port open to the network.
fn admin_access(
    p: &mut Problems,
    s: &ServerSection,
    env: EnvLookup,
    admin_listen: SocketAddr,
) -> Option<Secret> {
    let admin_token = s
        .admin_token_env
        .as_ref()
        .and_then(|name| p.secret_env("server.admin_token_env", name, env));
    if let (Some(t), Some(name)) = (&admin_token, &s.admin_token_env) {
        let n = t.expose().chars().count();
        if n < MIN_ADMIN_TOKEN_CHARS {
            p.add(
                "server.admin_token_env",
                format!(
                    "the admin token in {} is {n} characters: at least {MIN_ADMIN_TOKEN_CHARS} are required (`openssl rand -hex 16` makes one of 32)",
                    super::super::problems::shown_name(name)
                ),
            );
        }
    }
    if s.admin_token_env.is_none()
        && let Some(why) = exposure_problem(admin_listen, false, s.admin_unauthenticated_ok)
    {
        p.add("server.admin_listen", why);
    }
    for h in &s.admin_hosts {
        if h.is_empty()
            || !h
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
        {
            p.add("server.admin_hosts", format!("`{h}` is not a host name"));
        }
    }
    admin_token
}

/// Why an admin port at `listen` would be exposed: reachable from other hosts without a
/// token, and without the operator's consent to a read-only port open to the network.
pub(in crate::config) fn exposure_problem(
    listen: SocketAddr,
    has_token: bool,
    consented: bool,
) -> Option<String> {
    (!has_token && !listen.ip().is_loopback() && !consented).then(|| {
        format!(
            "{listen} is reachable from other hosts and the admin API has no token: set server.admin_token_env, listen on a loopback address, or set server.admin_unauthenticated_ok = true to accept a read-only admin port open to the network"
        )
    })
}

fn parse_addr(p: &mut Problems, at: &str, v: &str) -> SocketAddr {
    match v.parse::<SocketAddr>() {
        Ok(a) => a,
        Err(_) => {
            p.add(
                at,
                format!("`{v}` is not an IP:port address (e.g. 127.0.0.1:8080)"),
            );
            SocketAddr::from(([127, 0, 0, 1], 0))
        }
    }
}

/// What one address may hold when `max_connections_per_address` is 0: all but a sixteenth of
/// the total (at least one), so that one host never locks every other out, while a single
/// client (a load test, a gateway without `trusted_proxies`) still gets nearly all of it.
pub fn default_address_share(max: usize) -> usize {
    max.saturating_sub((max / 16).max(1)).max(1)
}

fn check_limits(p: &mut Problems, l: &LimitsSection) {
    p.in_range("limits.max_head_bytes", l.max_head_bytes, 1024, 1 << 20);
    p.in_range(
        "limits.max_headers",
        l.max_headers,
        1,
        crate::http::head::MAX_HEADERS_HARD,
    );
    p.in_range("limits.max_body_bytes", l.max_body_bytes, 1, 1 << 30);
    const DAY: u64 = 86_400_000;
    p.in_range(
        "limits.header_read_timeout_ms",
        l.header_read_timeout_ms,
        1,
        DAY,
    );
    p.in_range(
        "limits.body_read_timeout_ms",
        l.body_read_timeout_ms,
        1,
        DAY,
    );
    p.in_range("limits.keepalive_idle_ms", l.keepalive_idle_ms, 1, DAY);
    p.in_range(
        "limits.client_send_timeout_ms",
        l.client_send_timeout_ms,
        1,
        DAY,
    );
}

fn check_upstream(p: &mut Problems, u: &UpstreamSection) {
    const DAY: u64 = 86_400_000;
    p.in_range("upstream.connect_timeout_ms", u.connect_timeout_ms, 1, DAY);
    p.in_range(
        "upstream.connects_in_flight",
        u.connects_in_flight,
        0,
        65_536,
    );
    p.in_range(
        "upstream.first_byte_timeout_ms",
        u.first_byte_timeout_ms,
        1,
        DAY,
    );
    p.in_range(
        "upstream.idle_read_timeout_ms",
        u.idle_read_timeout_ms,
        1,
        DAY,
    );
    p.in_range(
        "upstream.pool_max_idle_per_upstream",
        u.pool_max_idle_per_upstream,
        0,
        100_000,
    );
    p.in_range(
        "upstream.pool_idle_timeout_ms",
        u.pool_idle_timeout_ms,
        1,
        DAY,
    );
    p.in_range("upstream.dns_ttl_ms", u.dns_ttl_ms, 1, DAY);
    p.in_range(
        "upstream.h2_ping_interval_ms",
        u.h2_ping_interval_ms,
        100,
        DAY,
    );
    p.in_range(
        "upstream.h2_ping_timeout_ms",
        u.h2_ping_timeout_ms,
        100,
        DAY,
    );
    p.in_range("upstream.max_attempts", u.max_attempts, 1, 20);
    if !matches!(u.tls_roots.as_str(), "webpki" | "system" | "both") {
        p.add(
            "upstream.tls_roots",
            format!("`{}` is not one of webpki, system, both", u.tls_roots),
        );
    }
    if let Some(f) = &u.ca_file
        && let Err(e) = std::fs::metadata(f)
    {
        p.add("upstream.ca_file", format!("cannot read `{f}`: {e}"));
    }
}

pub fn available_cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}
