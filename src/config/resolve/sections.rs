//! The `[flow]` settings of each connection, the `[stream]` section and `[[clients]]`: each
//! turned into the settings type of the module that owns it.

use super::super::problems::Problems;
use super::super::schema::{ClientSection, FileConfig};
use super::super::{EnvLookup, Provider};
use crate::ids::ConnId;

/// A connection's flow-control settings, validated.
pub(in crate::config) fn conn_flow(
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
        // Set once the provider's accounts are known (`providers::accounts`).
        account: None,
    }
}

/// The stream guard's settings, validated; `STREAM_THROUGHPUT_WATCHDOG_*` override the file.
pub(in crate::config) fn stream(
    out: &mut Problems,
    st: &super::schema::StreamSection,
    env: EnvLookup,
) -> crate::sse::StreamSettings {
    let num = |name: &str| -> Option<u64> {
        let v: f64 = env(name)?.trim().parse().ok()?;
        (v.is_finite() && v >= 0.0).then_some(v as u64)
    };
    let flag = env(crate::env_vars::WATCHDOG_ENABLED).map(|v| {
        matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "true" | "1" | "on" | "yes"
        )
    });
    let w = crate::sse::watchdog::WatchdogSettings {
        enabled: flag.unwrap_or(st.watchdog),
        warmup_ms: out.clamped(
            "stream.watchdog_warmup_ms",
            num(crate::env_vars::WATCHDOG_WARMUP_MS).unwrap_or(st.watchdog_warmup_ms),
            0,
            600_000,
        ),
        window_ms: out.clamped(
            "stream.watchdog_window_ms",
            num(crate::env_vars::WATCHDOG_WINDOW_MS).unwrap_or(st.watchdog_window_ms),
            100,
            600_000,
        ),
        min_bytes_per_second: out.clamped(
            "stream.watchdog_min_bytes_per_second",
            num(crate::env_vars::WATCHDOG_MIN_BYTES_PER_SECOND)
                .unwrap_or(st.watchdog_min_bytes_per_second),
            1,
            1_000_000,
        ),
        min_useful_bytes: out.clamped(
            "stream.watchdog_min_useful_bytes",
            num(crate::env_vars::WATCHDOG_MIN_USEFUL_BYTES).unwrap_or(st.watchdog_min_useful_bytes),
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
        coalesce_events: st.coalesce_events,
        coalesce_busy_lag_ms: out.clamped(
            "stream.coalesce_busy_lag_ms",
            st.coalesce_busy_lag_ms,
            0,
            60_000,
        ) as u32,
        coalesce_busy_wait_percent: out.clamped(
            "stream.coalesce_busy_wait_percent",
            st.coalesce_busy_wait_percent,
            0,
            100,
        ) as u8,
        keepalive_ms: keepalive_ms(out, "stream.keepalive_ms", st.keepalive_ms),
    }
}

/// A keep-alive spacing: 0 (off), else 100 ms to 10 minutes.
pub(in crate::config) fn keepalive_ms(out: &mut Problems, at: &str, v: u64) -> u32 {
    if v == 0 {
        return 0;
    }
    out.clamped(at, v, 100, 600_000) as u32
}

/// Client keys, validated; keys from the environment are hashed here and never kept.
pub(in crate::config) fn clients(
    out: &mut Problems,
    file: &FileConfig,
    providers: &[Provider],
    env: EnvLookup,
) -> crate::clients::Clients {
    use crate::clients::{Client, Scope, tenant_id};
    let mut entries = Vec::new();
    let mut ids = std::collections::HashSet::new();
    for (i, c) in file.clients.iter().enumerate() {
        let at = format!("clients[{i}]");
        if c.id.is_empty() || !ids.insert(c.id.clone()) {
            out.add(format!("{at}.id"), "must be present and unique");
        }
        let d = key_digest(out, &at, c, env);
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
        let allowed = allowed_connections(out, &at, c, providers);
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
                    coalesce_events: c.coalesce_events,
                },
            ));
        }
    }
    crate::clients::Clients::new(entries)
}

/// The digest of a client key: from the environment (hashed here, never kept) or given as
/// `key_sha256`.
fn key_digest(out: &mut Problems, at: &str, c: &ClientSection, env: EnvLookup) -> Option<[u8; 32]> {
    match (&c.key_env, &c.key_sha256) {
        (Some(name), None) => out
            .secret_env(&format!("{at}.key_env"), name, env)
            .map(|v| crate::clients::digest(v.expose().trim().as_bytes())),
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
            out.add(at, "give exactly one of key_env or key_sha256");
            None
        }
    }
}

/// A key's `allowed_connections` (`provider/connection`) as connection indices.
fn allowed_connections(
    out: &mut Problems,
    at: &str,
    c: &ClientSection,
    providers: &[Provider],
) -> Option<Vec<ConnId>> {
    c.allowed_connections.as_ref().map(|list| {
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
    })
}

/// `[telemetry]`: where spans go, if anywhere.
pub(in crate::config) fn telemetry(
    out: &mut Problems,
    t: &super::schema::TelemetrySection,
    env: EnvLookup,
) -> Option<crate::telemetry::Settings> {
    let raw = t.otlp_endpoint.trim();
    if raw.is_empty() {
        return None;
    }
    let Ok(uri) = raw.parse::<http::Uri>() else {
        out.add("telemetry.otlp_endpoint", format!("`{raw}` is not a URL"));
        return None;
    };
    if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
        out.add(
            "telemetry.otlp_endpoint",
            "must be an http:// or https:// URL with a host (the collector's OTLP/HTTP port, 4318)",
        );
        return None;
    }
    let endpoint = match uri.path() {
        "" | "/" => format!("{}/v1/traces", raw.trim_end_matches('/')),
        _ => raw.to_string(),
    };
    let headers = match &t.otlp_headers_env {
        None => Vec::new(),
        Some(name) => match env(name).map(|v| crate::telemetry::parse_headers(&v)) {
            Some(Ok(h)) => h,
            Some(Err(e)) => {
                out.add("telemetry.otlp_headers_env", format!("{name}: {e}"));
                Vec::new()
            }
            None => {
                out.add(
                    "telemetry.otlp_headers_env",
                    format!("environment variable {name} is not set"),
                );
                Vec::new()
            }
        },
    };
    Some(crate::telemetry::Settings {
        endpoint,
        service_name: t.service_name.clone().unwrap_or_else(|| "ringside".into()),
        headers,
    })
}
