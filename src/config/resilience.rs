//! Validating and resolving the `[resilience]` section and each provider's profile into the
//! [`Settings`] the cores read.

use super::problems::Problems;
use super::schema::{FileConfig, ProviderSection};
use super::{AuthKind, EnvLookup, Provider};
use crate::resilience::Settings;
use crate::resilience::classify::{Reason, Rule, Scope};
use crate::resilience::lockout::LockoutSettings;
use crate::resilience::restate::RestateRule;
use crate::resilience::settings::{ProfileKind, ProviderPolicy, apply_gate_env, profile};

fn is_loopback(host: &str) -> bool {
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

fn policy(
    out: &mut Problems,
    at: &str,
    ps: &ProviderSection,
    p: &Provider,
    r: &super::schema::ResilienceSection,
    env: EnvLookup,
) -> ProviderPolicy {
    let kind = match ps.profile.as_str() {
        "auto" if is_loopback(&p.endpoint.host) => ProfileKind::Local,
        "auto" => match p.auth {
            AuthKind::OAuth => ProfileKind::OAuth,
            AuthKind::ApiKey => ProfileKind::ApiKey,
        },
        "oauth" => ProfileKind::OAuth,
        "api_key" => ProfileKind::ApiKey,
        "local" => ProfileKind::Local,
        other => {
            out.add(
                format!("{at}.profile"),
                format!("`{other}` is not one of auto, oauth, api_key, local"),
            );
            ProfileKind::ApiKey
        }
    };
    let mut pol = profile(kind, r.max_cooldown_ms, r.quota_cooldown_ms);
    apply_gate_env(&mut pol, env);
    let b = &ps.breaker;
    if let Some(v) = b.open_at {
        pol.breaker.open_at =
            out.clamped(&format!("{at}.breaker.open_at"), v.into(), 1, 1000) as u32;
    }
    if let Some(v) = b.degraded_at {
        pol.breaker.degraded_at =
            out.clamped(&format!("{at}.breaker.degraded_at"), v.into(), 1, 1000) as u32;
    }
    pol.breaker.degraded_at = pol.breaker.degraded_at.min(pol.breaker.open_at);
    if let Some(v) = b.open_ms {
        pol.breaker.open_ms = out.clamped(&format!("{at}.breaker.open_ms"), v, 100, 86_400_000);
    }
    if let Some(v) = ps.cooldown.base_ms {
        pol.cooldown.base_ms = out.clamped(&format!("{at}.cooldown.base_ms"), v, 0, 86_400_000);
    }
    if let Some(v) = ps.cooldown.max_level {
        pol.cooldown.max_level =
            out.clamped(&format!("{at}.cooldown.max_level"), v.into(), 0, 32) as u8;
    }
    pol
}

/// Resolve the resilience settings; problems are appended to `out`.
pub(super) fn resolve(
    out: &mut Problems,
    file: &FileConfig,
    providers: &[Provider],
    env: EnvLookup,
) -> Settings {
    let r = &file.resilience;
    let mut s = Settings::default();
    out.clamped(
        "resilience.max_cooldown_ms",
        r.max_cooldown_ms,
        1_000,
        86_400_000,
    );
    out.clamped(
        "resilience.quota_cooldown_ms",
        r.quota_cooldown_ms,
        1_000,
        30 * 86_400_000,
    );
    s.deadline_ms = out.clamped("resilience.deadline_ms", r.deadline_ms, 1, 86_400_000);
    s.max_wait_ms = out.clamped("resilience.max_wait_ms", r.max_wait_ms, 0, 3_600_000);
    s.decision_ring = out.clamped(
        "resilience.decision_ring",
        r.decision_ring as u64,
        0,
        1_000_000,
    ) as usize;
    s.decision_ring_plain = out.clamped(
        "resilience.decision_ring_plain",
        r.decision_ring_plain as u64,
        0,
        1_000_000,
    ) as usize;
    s.gate_enabled = r.provider_gate;
    let l = &r.lockout;
    if l.codes.iter().any(|c| !(100..=599).contains(c)) {
        out.add(
            "resilience.lockout.codes",
            "codes must be HTTP statuses (100 to 599)",
        );
    }
    let base_ms = out.clamped("resilience.lockout.base_ms", l.base_ms, 0, 600_000);
    s.lockout = LockoutSettings {
        enabled: l.enabled,
        codes: if l.codes.is_empty() {
            LockoutSettings::default().codes
        } else {
            l.codes.clone()
        },
        base_ms,
        max_ms: out
            .clamped("resilience.lockout.max_ms", l.max_ms, 5_000, 3_600_000)
            .max(base_ms),
        max_steps: out.clamped("resilience.lockout.max_steps", l.max_steps.into(), 0, 20) as u32,
        exponential: l.exponential,
        reset_after_ms: LockoutSettings::default().reset_after_ms,
    };
    let known = |p: &Option<String>| {
        p.as_ref()
            .is_none_or(|id| providers.iter().any(|x| &x.id == id))
    };
    if r.rules.len() > 50 {
        out.add("resilience.rules", "at most 50 operator rules");
    }
    for (i, rs) in r.rules.iter().enumerate() {
        let at = format!("resilience.rules[{i}]");
        if !known(&rs.provider) {
            out.add(format!("{at}.provider"), "no such provider");
        }
        let reason = Reason::parse(&rs.reason).unwrap_or_else(|| {
            out.add(
                format!("{at}.reason"),
                format!("`{}` is not a known reason", rs.reason),
            );
            Reason::ServerError
        });
        let scope = Scope::parse(&rs.scope).unwrap_or_else(|| {
            out.add(
                format!("{at}.scope"),
                "must be one of request, model, connection, provider",
            );
            Scope::Connection
        });
        let mut header_markers = Vec::new();
        for h in &rs.header_markers {
            match h.split_once(':') {
                Some((n, v)) if !n.trim().is_empty() => header_markers
                    .push((n.trim().to_ascii_lowercase(), v.trim().to_ascii_lowercase())),
                _ => out.add(
                    format!("{at}.header_markers"),
                    format!("`{h}` is not `name: substring`"),
                ),
            }
        }
        if rs.statuses.is_empty() && rs.markers.is_empty() && header_markers.is_empty() {
            out.add(&at, "a rule needs statuses, markers or header_markers");
        }
        s.operator_rules.push(Rule {
            id: rs.id.clone(),
            provider: rs.provider.clone(),
            statuses: rs.statuses.clone(),
            markers: rs.markers.iter().map(|m| m.to_lowercase()).collect(),
            codes: Vec::new(),
            header_markers,
            exclude: rs.exclude.iter().map(|m| m.to_lowercase()).collect(),
            reason,
            scope,
            cooldown_ms: rs.cooldown_ms,
        });
    }
    let mut restate: Vec<RestateRule> = Vec::new();
    for (i, rs) in r.restate.iter().enumerate() {
        let at = format!("resilience.restate[{i}]");
        if !known(&rs.provider) {
            out.add(format!("{at}.provider"), "no such provider");
        }
        if rs.markers.is_empty() {
            out.add(
                format!("{at}.markers"),
                "a restatement needs at least one marker",
            );
        }
        out.clamped(&format!("{at}.to"), rs.to.into(), 100, 599);
        restate.push(RestateRule {
            id: rs.id.clone(),
            provider: rs.provider.clone(),
            from: rs.from.clone(),
            to: rs.to,
            markers: rs.markers.iter().map(|m| m.to_lowercase()).collect(),
            exclude: rs.exclude.iter().map(|m| m.to_lowercase()).collect(),
            retry_after_ms: rs.retry_after_ms,
        });
    }
    if r.builtin_restate {
        restate.push(crate::resilience::restate::builtin());
    }
    s.restate = restate;
    for (i, (ps, p)) in file.providers.iter().zip(providers).enumerate() {
        s.providers
            .push(policy(out, &format!("providers[{i}]"), ps, p, r, env));
        s.provider_conns
            .push(p.connections.iter().map(|c| c.index).collect());
    }
    s
}

/// A connection's flow-control settings, validated.
pub(super) fn conn_flow(
    out: &mut Problems,
    at: &str,
    cs: &super::schema::ConnectionSection,
) -> crate::flow::ConnFlow {
    use crate::flow::settings::{MAX_DEPTH, MAX_MS};
    let on_saturation = crate::flow::Saturation::parse(&cs.on_saturation).unwrap_or_else(|| {
        out.add(
            format!("{at}.on_saturation"),
            format!(
                "`{}` is not one of queue, reject, fail_open",
                cs.on_saturation
            ),
        );
        crate::flow::Saturation::Queue
    });
    out.clamped(
        &format!("{at}.max_concurrent"),
        cs.max_concurrent.into(),
        0,
        100_000,
    );
    out.clamped(&format!("{at}.min_time_ms"), cs.min_time_ms, 0, MAX_MS);
    if cs.reservoir < 0 {
        out.add(format!("{at}.reservoir"), "must not be negative");
    }
    if cs.reservoir > 0 && cs.reservoir_refresh_ms == 0 {
        out.add(
            format!("{at}.reservoir_refresh_ms"),
            "a reservoir needs a refresh interval",
        );
    }
    let opt = |out: &mut Problems, name: &str, v: Option<u64>, lo: u64, hi: u64| {
        v.map(|v| out.clamped(&format!("{at}.{name}"), v, lo, hi))
    };
    crate::flow::ConnFlow {
        max_concurrent: cs.max_concurrent,
        min_time_ms: cs.min_time_ms,
        reservoir: cs.reservoir.max(0),
        reservoir_refresh_ms: cs.reservoir_refresh_ms,
        on_saturation,
        max_wait_ms: opt(out, "max_wait_ms", cs.max_wait_ms, 1, MAX_MS),
        execution_max_wait_ms: opt(
            out,
            "execution_max_wait_ms",
            cs.execution_max_wait_ms,
            1,
            MAX_MS,
        ),
        max_queue_depth: opt(out, "max_queue_depth", cs.max_queue_depth, 0, MAX_DEPTH),
    }
}

/// The stream guard's settings, validated; `STREAM_THROUGHPUT_WATCHDOG_*` override the file.
pub(super) fn stream(
    out: &mut Problems,
    st: &super::schema::StreamSection,
    env: EnvLookup,
) -> crate::sse::StreamSettings {
    let num = |name: &str| -> Option<u64> {
        let v: f64 = env(name)?.trim().parse().ok()?;
        (v.is_finite() && v >= 0.0).then_some(v as u64)
    };
    let flag = env("STREAM_THROUGHPUT_WATCHDOG_ENABLED").map(|v| {
        matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "true" | "1" | "on" | "yes"
        )
    });
    let w = crate::sse::watchdog::WatchdogSettings {
        enabled: flag.unwrap_or(st.watchdog),
        warmup_ms: out.clamped(
            "stream.watchdog_warmup_ms",
            num("STREAM_THROUGHPUT_WATCHDOG_WARMUP_MS").unwrap_or(st.watchdog_warmup_ms),
            0,
            600_000,
        ),
        window_ms: out.clamped(
            "stream.watchdog_window_ms",
            num("STREAM_THROUGHPUT_WATCHDOG_WINDOW_MS").unwrap_or(st.watchdog_window_ms),
            100,
            600_000,
        ),
        min_bytes_per_second: out.clamped(
            "stream.watchdog_min_bytes_per_second",
            num("STREAM_THROUGHPUT_WATCHDOG_MIN_BYTES_PER_SECOND")
                .unwrap_or(st.watchdog_min_bytes_per_second),
            1,
            1_000_000,
        ),
        min_useful_bytes: out.clamped(
            "stream.watchdog_min_useful_bytes",
            num("STREAM_THROUGHPUT_WATCHDOG_MIN_USEFUL_BYTES")
                .unwrap_or(st.watchdog_min_useful_bytes),
            1,
            1_000_000,
        ),
    };
    crate::sse::StreamSettings {
        guard: st.guard,
        holdback_ms: out.clamped("stream.holdback_ms", st.holdback_ms, 0, 60_000),
        holdback_bytes: out.clamped(
            "stream.holdback_bytes",
            st.holdback_bytes as u64,
            0,
            1 << 20,
        ) as usize,
        readiness_timeout_ms: out.clamped(
            "stream.readiness_timeout_ms",
            st.readiness_timeout_ms,
            1,
            86_400_000,
        ),
        total_timeout_ms: out.clamped(
            "stream.total_timeout_ms",
            st.total_timeout_ms,
            0,
            86_400_000,
        ),
        watchdog: w,
    }
}

/// Client keys, validated; keys from the environment are hashed here and never kept.
pub(super) fn clients(
    out: &mut Problems,
    file: &FileConfig,
    providers: &[Provider],
    env: EnvLookup,
) -> crate::clients::Clients {
    use crate::clients::{Client, Scope, digest, tenant_id};
    let mut entries = Vec::new();
    let mut ids = std::collections::HashSet::new();
    for (i, c) in file.clients.iter().enumerate() {
        let at = format!("clients[{i}]");
        if c.id.is_empty() || !ids.insert(c.id.clone()) {
            out.add(format!("{at}.id"), "must be present and unique");
        }
        let d = match (&c.key_env, &c.key_sha256) {
            (Some(name), None) => match env(name).filter(|v| !v.is_empty()) {
                Some(v) => Some(digest(v.trim().as_bytes())),
                None => {
                    out.add(
                        format!("{at}.key_env"),
                        format!("environment variable {name} is not set"),
                    );
                    None
                }
            },
            (None, Some(hex)) => {
                let bytes: Option<Vec<u8>> = (hex.len() == 64)
                    .then(|| {
                        (0..32)
                            .map(|k| u8::from_str_radix(&hex[2 * k..2 * k + 2], 16).ok())
                            .collect()
                    })
                    .flatten();
                match bytes.and_then(|b| <[u8; 32]>::try_from(b).ok()) {
                    Some(d) => Some(d),
                    None => {
                        out.add(format!("{at}.key_sha256"), "must be 64 hex digits");
                        None
                    }
                }
            }
            _ => {
                out.add(&at, "give exactly one of key_env or key_sha256");
                None
            }
        };
        let mut scopes = Vec::new();
        for sc in &c.scopes {
            match Scope::parse(sc) {
                Some(s) => scopes.push(s),
                None => out.add(
                    format!("{at}.scopes"),
                    format!("`{sc}` is not one of inference, lease:exclusive, admin, overrides"),
                ),
            }
        }
        let allowed = c.allowed_connections.as_ref().map(|list| {
            list.iter()
                .filter_map(|name| {
                    let found = name.split_once('/').and_then(|(p, cn)| {
                        providers
                            .iter()
                            .find(|x| x.id == p)?
                            .connections
                            .iter()
                            .find(|x| x.id == cn)
                            .map(|x| x.index)
                    });
                    if found.is_none() {
                        out.add(
                            format!("{at}.allowed_connections"),
                            format!("no connection `{name}` (write provider/connection)"),
                        );
                    }
                    found
                })
                .collect()
        });
        if c.priority > 9 {
            out.add(format!("{at}.priority"), "must be 0 to 9");
        }
        if scopes.contains(&Scope::LeaseExclusive)
            && c.allowed_connections.as_ref().is_none_or(Vec::is_empty)
        {
            out.add(
                format!("{at}.allowed_connections"),
                "a key with scope lease:exclusive needs the connections it may lease",
            );
        }
        if let Some(d) = d {
            entries.push((
                d,
                Client {
                    id: c.id.clone(),
                    scopes,
                    allowed,
                    tenant: tenant_id(c.tenant.as_deref().unwrap_or(&c.id)),
                    priority: c.priority.min(9),
                },
            ));
        }
    }
    crate::clients::Clients::new(entries)
}
