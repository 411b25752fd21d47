//! `GET /admin/config`: the configuration the server is running, as JSON. Secrets are never
//! shown: the admin token is only said to be set, and each provider key appears as the first
//! 12 hex digits of its SHA-256 (enough to tell that a key changed, nothing to use).

use crate::config::Config;
use crate::state::core::Shared;
use serde_json::{Value, json};

/// The running configuration.
pub fn config(shared: &Shared) -> (u16, Value) {
    let generation = shared.current();
    let c = &generation.config;
    (
        200,
        json!({
            // Each applied reload makes the next generation; the last reload says how it went.
            "generation": generation.number,
            "last_reload": shared.reloads.last(),
            "server": server(c, shared.caps_in_force()),
            "limits": {
                "max_head_bytes": c.limits.max_head_bytes,
                "max_headers": c.limits.max_headers,
                "max_body_bytes": c.limits.max_body_bytes,
                "header_read_timeout_ms": c.limits.header_read_timeout_ms,
                "body_read_timeout_ms": c.limits.body_read_timeout_ms,
                "keepalive_idle_ms": c.limits.keepalive_idle_ms,
                "max_requests_per_connection": c.limits.max_requests_per_connection,
                "client_send_timeout_ms": c.limits.client_send_timeout_ms,
            },
            "upstream": {
                "connect_timeout_ms": c.upstream.connect_timeout_ms,
                "connects_in_flight": c.upstream.connects_in_flight,
                "first_byte_timeout_ms": c.upstream.first_byte_timeout_ms,
                "idle_read_timeout_ms": c.upstream.idle_read_timeout_ms,
                "max_attempts": c.upstream.max_attempts,
            },
            "stream": stream(&c.stream),
            "providers": c.providers.iter().map(provider).collect::<Vec<_>>(),
            "routes": c.routes.iter().map(|r| json!({
                "name": r.name,
                "strategy": r.strategy.as_str(),
                "deadline_ms": r.deadline_ms,
                "targets": r.targets.iter().map(|t| json!({
                    "provider": t.provider,
                    "model": t.model,
                    "connection": t.connection,
                })).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "clients": if c.clients.is_open() { "open (no client keys)" } else { "keys required" },
        }),
    )
}

/// `caps`: the client caps in force now, all connections and one address's (where the
/// settings say 0, what the open-file limit allows as the upstream is reached today).
fn server(c: &Config, caps: (usize, u32)) -> Value {
    let s = &c.server;
    json!({
        "listen": s.listen.to_string(),
        "admin_listen": s.admin_listen.to_string(),
        "workers": s.workers,
        "driver": s.driver.as_str(),
        "data_dir": s.data_dir,
        "admin_token": if s.admin_token.is_some() { "set" } else { "not set" },
        "max_connections": s.max_connections,
        "max_connections_now": caps.0,
        "max_connections_per_address_now": caps.1,
        "shutdown_grace_ms": s.shutdown_grace.as_millis() as u64,
        "drain_delay_ms": s.drain_delay.as_millis() as u64,
        "access_log": s.access_log,
        "pin_workers": s.pin_workers,
    })
}

/// The stream guard, and whether events are joined (`coalesce_events`: when an operator asks
/// why events reach clients in bunches, this answers it).
fn stream(s: &crate::sse::StreamSettings) -> Value {
    let w = &s.watchdog;
    json!({
        "guard": s.guard,
        "holdback_ms": s.holdback_ms,
        "holdback_bytes": s.holdback_bytes,
        "readiness_timeout_ms": s.readiness_timeout_ms,
        "total_timeout_ms": s.total_timeout_ms,
        "watchdog": w.enabled,
        "watchdog_warmup_ms": w.warmup_ms,
        "watchdog_window_ms": w.window_ms,
        "watchdog_min_bytes_per_second": w.min_bytes_per_second,
        "watchdog_min_useful_bytes": w.min_useful_bytes,
        "coalesce_events": s.coalesce_events.as_json(),
        "coalesce_busy_lag_ms": s.coalesce_busy_lag_ms,
        "coalesce_busy_wait_percent": s.coalesce_busy_wait_percent,
    })
}

fn provider(p: &crate::config::Provider) -> Value {
    let scheme = if p.endpoint.tls { "https" } else { "http" };
    json!({
        "id": p.id,
        "dialect": p.dialect.as_str(),
        "base_url": format!("{scheme}://{}:{}{}", p.endpoint.host, p.endpoint.port, p.endpoint.base_path),
        // The egress proxy, if any: where it is and where it came from, its credentials only
        // as whether there are any.
        "http2": match p.endpoint.http2 {
            crate::config::Http2::Auto => "auto",
            crate::config::Http2::Always => "always",
            crate::config::Http2::Never => "never",
        },
        "proxy": p.endpoint.via.as_ref().map(|v| json!({
            "address": format!("{}:{}", v.host, v.port),
            "from": v.from,
            "authorization": if v.authorization.is_some() { "set" } else { "not set" },
        })),
        "connections": p.connections.iter().map(|k| json!({
            "id": k.id,
            "key_sha256_prefix": &crate::secret::hex(&crate::secret::digest(k.secret.expose().as_bytes()))[..12],
            "models": k.models,
            "priority": k.priority,
            "weight": k.weight,
            "max_concurrent": k.flow.max_concurrent,
            "min_time_ms": k.flow.min_time_ms,
            "on_saturation": k.flow.on_saturation.as_str(),
        })).collect::<Vec<_>>(),
    })
}
