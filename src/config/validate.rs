//! Turns a parsed [`FileConfig`] into a [`Config`], collecting every problem (not just the first).

use super::problems::Problems;
use super::schema::{FileConfig, LimitsSection, UpstreamSection};
use super::*;
use std::collections::HashSet;

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

/// The default cap on client connections: what the open-file limit allows once each proxied
/// connection's upstream socket and some room for the store, listeners and logs are counted
/// (two descriptors per held client connection).
pub fn default_max_connections() -> usize {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we own.
    let soft = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 {
        lim.rlim_max.min(1 << 24) as usize
    } else {
        1024
    };
    (soft.saturating_sub(64) / 2).max(64)
}

/// `url` with any `user:password@` in its authority replaced by `***@`.
fn without_userinfo(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let end = rest.find('/').unwrap_or(rest.len());
    match rest[..end].rfind('@') {
        Some(at) if !scheme.is_empty() => format!("{scheme}://***@{}", &rest[at + 1..]),
        _ => url.to_string(),
    }
}

/// Parse `http(s)://host[:port][/path]`.
pub fn parse_base_url(url: &str) -> Result<Endpoint, String> {
    // The host and path go into every upstream request head as they are.
    if url.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return Err("must not contain spaces or control characters".into());
    }
    let (tls, rest) = if let Some(r) = url.strip_prefix("https://") {
        (true, r)
    } else if let Some(r) = url.strip_prefix("http://") {
        (false, r)
    } else {
        return Err("must start with http:// or https://".into());
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    if authority.is_empty() {
        return Err("has no host".into());
    }
    if authority.contains('@') {
        return Err("must not carry credentials (use key_env)".into());
    }
    let default_port = if tls { 443 } else { 80 };
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (h, after) = v6.split_once(']').ok_or("has an unclosed IPv6 bracket")?;
        let port = match after.strip_prefix(':') {
            Some(p) => p
                .parse::<u16>()
                .map_err(|_| format!("has a bad port `{p}`"))?,
            None if after.is_empty() => default_port,
            None => return Err("has garbage after the IPv6 address".into()),
        };
        (h.to_string(), port)
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (
                h.to_string(),
                p.parse::<u16>()
                    .map_err(|_| format!("has a bad port `{p}`"))?,
            ),
            None => (authority.to_string(), default_port),
        }
    };
    if host.is_empty() || port == 0 {
        return Err("has an empty host or port 0".into());
    }
    if path.contains('?') || path.contains('#') {
        return Err("must not have a query or fragment".into());
    }
    Ok(Endpoint {
        tls,
        host,
        port,
        base_path: path.trim_end_matches('/').to_string(),
    })
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

pub(super) fn resolve(file: FileConfig, env: EnvLookup) -> Result<Config, Vec<Problem>> {
    let mut p = Problems::default();
    let s = &file.server;
    let listen = parse_addr(&mut p, "server.listen", &s.listen);
    let admin_listen = parse_addr(&mut p, "server.admin_listen", &s.admin_listen);
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
    let admin_token = match &s.admin_token_env {
        Some(name) => match env(name).filter(|v| !v.is_empty()) {
            Some(v) => Some(Secret::new(v)),
            None => {
                p.add(
                    "server.admin_token_env",
                    format!("environment variable {name} is not set"),
                );
                None
            }
        },
        None => None,
    };
    if admin_token.is_none()
        && s.admin_token_env.is_none()
        && !admin_listen.ip().is_loopback()
        && !s.admin_unauthenticated_ok
    {
        p.add(
            "server.admin_listen",
            format!(
                "{admin_listen} is reachable from other hosts and the admin API has no token: set server.admin_token_env, listen on a loopback address, or set server.admin_unauthenticated_ok = true to accept a read-only admin port open to the network"
            ),
        );
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
    p.in_range(
        "server.max_unauthenticated_per_address",
        s.max_unauthenticated_per_address,
        1,
        1_000_000,
    );
    check_limits(&mut p, &file.limits);
    check_upstream(&mut p, &file.upstream);

    let mut providers = Vec::new();
    let mut provider_ids = HashSet::new();
    let mut index = 0usize;
    for (i, ps) in file.providers.iter().enumerate() {
        let at = format!("providers[{i}]");
        if !crate::names::valid_id(&ps.id) {
            p.add(
                format!("{at}.id"),
                format!("`{}` must be 1-64 of A-Z a-z 0-9 _ - .", ps.id),
            );
        }
        if !provider_ids.insert(ps.id.clone()) {
            p.add(
                format!("{at}.id"),
                format!("duplicate provider id `{}`", ps.id),
            );
        }
        let dialect = match ps.dialect.as_str() {
            "openai" => Dialect::OpenAi,
            "anthropic" => Dialect::Anthropic,
            other => {
                p.add(
                    format!("{at}.dialect"),
                    format!("`{other}` is not one of openai, anthropic"),
                );
                Dialect::OpenAi
            }
        };
        let auth = match ps.auth.as_str() {
            "api_key" => AuthKind::ApiKey,
            "oauth" => AuthKind::OAuth,
            other => {
                p.add(
                    format!("{at}.auth"),
                    format!("`{other}` is not one of api_key, oauth"),
                );
                AuthKind::ApiKey
            }
        };
        let endpoint = parse_base_url(&ps.base_url).unwrap_or_else(|e| {
            // The URL is quoted without its user:password part, if it has one.
            p.add(
                format!("{at}.base_url"),
                format!("`{}` {e}", without_userinfo(&ps.base_url)),
            );
            Endpoint {
                tls: false,
                host: "invalid".into(),
                port: 1,
                base_path: String::new(),
            }
        });
        if ps.connections.is_empty() {
            p.add(
                format!("{at}.connections"),
                "a provider needs at least one connection",
            );
        }
        let mut conn_ids = HashSet::new();
        let mut connections = Vec::new();
        for (j, cs) in ps.connections.iter().enumerate() {
            let cat = format!("{at}.connections[{j}]");
            if !crate::names::valid_id(&cs.id) {
                p.add(
                    format!("{cat}.id"),
                    format!("`{}` must be 1-64 of A-Z a-z 0-9 _ - .", cs.id),
                );
            }
            if !conn_ids.insert(cs.id.clone()) {
                p.add(
                    format!("{cat}.id"),
                    format!("duplicate connection id `{}` in provider", cs.id),
                );
            }
            let secret = match env(&cs.key_env).filter(|v| !v.is_empty()) {
                // A control byte in a key would write lines of its own into the upstream head.
                Some(v) if v.bytes().any(|b| b < 0x20 || b == 0x7f) => {
                    p.add(
                        format!("{cat}.key_env"),
                        format!(
                            "environment variable {} holds a control character (a line break?)",
                            cs.key_env
                        ),
                    );
                    Secret::new("")
                }
                Some(v) => Secret::new(v),
                None => {
                    p.add(
                        format!("{cat}.key_env"),
                        format!("environment variable {} is not set", cs.key_env),
                    );
                    Secret::new("")
                }
            };
            if cs.weight == 0 || cs.weight > 1_000_000 {
                p.add(
                    format!("{cat}.weight"),
                    format!("{} is out of range (1 to 1000000)", cs.weight),
                );
            }
            let flow = super::resilience::conn_flow(&mut p, &cat, cs);
            connections.push(Connection {
                id: cs.id.clone(),
                secret,
                models: cs.models.clone(),
                weight: cs.weight.max(1),
                priority: cs.priority,
                index,
                flow,
            });
            index += 1;
        }
        providers.push(Provider {
            id: ps.id.clone(),
            dialect,
            auth,
            endpoint,
            anthropic_version: ps
                .anthropic_version
                .clone()
                .unwrap_or_else(|| "2023-06-01".into()),
            connections,
            region: ps.region.clone(),
            tags: ps.tags.clone(),
            forward_headers: ps
                .forward_headers
                .iter()
                .map(|h| h.to_ascii_lowercase())
                .collect(),
        });
    }

    let mut route_names = HashSet::new();
    for (i, r) in file.routes.iter().enumerate() {
        let at = format!("routes[{i}]");
        if r.name.is_empty() || r.name.len() > 256 {
            p.add(format!("{at}.name"), "must be 1-256 characters");
        }
        if !route_names.insert(r.name.clone()) {
            p.add(
                format!("{at}.name"),
                format!("duplicate route `{}`", r.name),
            );
        }
        if Strategy::parse(&r.strategy).is_none() {
            p.add(
                format!("{at}.strategy"),
                format!(
                    "`{}` is not one of {}",
                    r.strategy,
                    Strategy::NAMES.join(", ")
                ),
            );
        }
        if r.targets.is_empty() {
            p.add(format!("{at}.targets"), "a route needs at least one target");
        }
        for (j, t) in r.targets.iter().enumerate() {
            let tat = format!("{at}.targets[{j}]");
            match providers.iter().find(|pr| pr.id == t.provider) {
                None => p.add(
                    format!("{tat}.provider"),
                    format!("no provider `{}`", t.provider),
                ),
                Some(pr) => {
                    if let Some(c) = &t.connection
                        && !pr.connections.iter().any(|pc| &pc.id == c)
                    {
                        p.add(
                            format!("{tat}.connection"),
                            format!("provider `{}` has no connection `{c}`", t.provider),
                        );
                    }
                }
            }
            if t.model.is_empty() {
                p.add(format!("{tat}.model"), "must not be empty");
            }
        }
    }

    let resilience = super::resilience::resolve(&mut p, &file, &providers, env);
    let stream = super::resilience::stream(&mut p, &file.stream, env);
    let clients = super::resilience::clients(&mut p, &file, &providers, env);
    // With client keys (several tenants) a breaker opens only on failures of at least two of
    // them, unless the operator says otherwise; an open (single-tenant) instance keeps one.
    let min_tenants = file
        .resilience
        .breaker_min_tenants
        .unwrap_or(if clients.is_open() { 1 } else { 2 });
    p.in_range(
        "resilience.breaker_min_tenants",
        min_tenants,
        1,
        crate::resilience::breaker::MAX_TENANTS as u32,
    );
    let mut resilience = resilience;
    for pol in &mut resilience.providers {
        pol.breaker.min_tenants = min_tenants;
    }
    if !matches!(file.store.durability.as_str(), "durable" | "fast") {
        p.add(
            "store.durability",
            format!("`{}` is not one of durable, fast", file.store.durability),
        );
    }
    p.in_range("store.map_size_mb", file.store.map_size_mb, 1, 1 << 20);
    if !p.0.is_empty() {
        return Err(p.0);
    }
    let locator = providers
        .iter()
        .enumerate()
        .flat_map(|(pi, p)| (0..p.connections.len()).map(move |ci| (pi, ci)))
        .collect();
    let workers = if s.workers == 0 {
        available_cores()
    } else {
        s.workers
    };
    Ok(Config {
        server: ServerSettings {
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
            max_connections: if s.max_connections == 0 {
                default_max_connections()
            } else {
                s.max_connections
            },
            max_unauthenticated_per_address: s.max_unauthenticated_per_address,
            shutdown_grace: Duration::from_millis(s.shutdown_grace_ms),
            access_log: s.access_log,
            pin_workers: s.pin_workers,
        },
        limits: file.limits,
        upstream: file.upstream,
        providers,
        routes: file
            .routes
            .into_iter()
            .map(|r| RouteSpec {
                strategy: Strategy::parse(&r.strategy).unwrap_or(Strategy::Priority),
                name: r.name,
                targets: r.targets,
                deadline_ms: r.deadline_ms,
            })
            .collect(),
        locator,
        resilience,
        flow_env: crate::flow::settings::Budgets::read_env(env),
        tenant_limits: crate::flow::tenant::TenantLimits {
            requests_per_minute: file.flow.tenant_requests_per_minute,
            tokens_per_minute: file.flow.tenant_tokens_per_minute,
            max_concurrent: file.flow.tenant_max_concurrent,
        },
        stream,
        clients,
        store_map_size: (file.store.map_size_mb.clamp(1, 1 << 20) as usize) << 20,
        store_fast: file.store.durability == "fast",
        affinity_ttl_ms: file.session.affinity_ttl_ms.min(30 * 86_400_000),
        lease_ttl_ms: match file.session.lease_ttl_ms {
            0 => crate::store::leases::DEFAULT_TTL_MS,
            t => t.clamp(
                crate::store::leases::MIN_TTL_MS,
                crate::store::leases::MAX_TTL_MS,
            ),
        },
    })
}

pub fn available_cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}
