//! The status page (`GET /` on the admin port): one self-contained HTML file embedded in the
//! binary, which polls the JSON endpoints below with the admin token the operator enters; and
//! `GET /admin`, the list of endpoints.

use serde_json::{Value, json};

pub const HTML: &[u8] = include_bytes!("status.html");

/// No other origin, no frames, no plugins: the page's own inline script and style, and
/// requests back to this port only.
pub const HEADERS: &[(&str, &str)] = &[
    (
        "content-security-policy",
        "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    ),
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "no-referrer"),
    ("cache-control", "no-store"),
];

/// Every admin endpoint, one line each.
const ENDPOINTS: &[(&str, &str)] = &[
    ("GET /", "the status page"),
    ("GET /admin", "this list"),
    ("GET /healthz", "the process is up (no token needed)"),
    (
        "GET /readyz",
        "ready for traffic: 503 while starting or draining (no token needed)",
    ),
    ("GET /metrics", "Prometheus metrics"),
    (
        "GET /admin/about",
        "version, commit, uptime, draining, fleet, and whether this caller may make changes",
    ),
    (
        "GET /admin/audit[?limit=N]",
        "admin changes, newest first: who, what, before and after, when",
    ),
    (
        "GET /admin/stats",
        "request rate, failure ratio and latency percentiles, per interval over the last 15 minutes",
    ),
    (
        "GET /admin/connections",
        "each connection's state, cooldown, last error, in flight",
    ),
    (
        "POST /admin/connections/{provider}/{connection}/reset",
        "clear a connection's cooldown, terminal state and lockouts",
    ),
    ("GET /admin/model-cooldowns", "active model lockouts"),
    (
        "DELETE /admin/model-cooldowns?provider=P&connection=C[&model=M]",
        "clear model lockouts",
    ),
    ("GET /admin/breakers", "each provider's breaker"),
    ("POST /admin/breakers/{provider}/reset", "close a breaker"),
    (
        "GET /admin/decisions[?limit=N][&before=TS]",
        "recent decision records, newest first",
    ),
    (
        "GET /admin/decisions/{request_id}",
        "one request's decision record",
    ),
    (
        "GET /admin/clients",
        "client keys (ids and scopes, never a key)",
    ),
    (
        "POST /admin/clients",
        "create a managed client key (shown once)",
    ),
    ("DELETE /admin/clients/{id}", "revoke a managed client key"),
    ("GET /admin/leases", "exclusive session leases"),
    ("DELETE /admin/leases/{owner_sha256}", "revoke a lease"),
    ("GET /admin/pins", "live session pins"),
    (
        "GET /admin/queues",
        "flow state per connection and limited account",
    ),
    ("GET /admin/tenants", "per-tenant usage against the quotas"),
    (
        "GET /admin/spend",
        "configured tenants' spend this day and month against their budgets",
    ),
    (
        "POST /admin/spend/{tenant}/reset",
        "start a tenant's day and month over",
    ),
    (
        "GET /admin/settings",
        "queue budgets in force and where each comes from",
    ),
    ("PATCH /admin/settings", "change queue budgets"),
    (
        "GET /admin/config",
        "the running configuration (secrets never shown)",
    ),
    ("POST /admin/reload", "read the config file and apply it"),
    (
        "GET /admin/fleet",
        "fleet mode: Redis link and what is shared",
    ),
    ("POST /admin/drain", "start draining, as SIGTERM does"),
];

pub fn index() -> Value {
    let list: Vec<Value> = ENDPOINTS
        .iter()
        .map(|(endpoint, what)| json!({"endpoint": endpoint, "what": what}))
        .collect();
    json!({"endpoints": list})
}

/// When the admin thread started (Unix ms): the status page's uptime.
pub static STARTED_MS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();

/// `GET /admin/about`: what the status page's header says (version, commit, uptime, draining,
/// fleet) and whether this caller may make changes, so that a read-only view shows no button
/// that would only be refused.
pub fn about(shared: &crate::state::core::Shared, can_change: bool) -> serde_json::Value {
    use std::sync::atomic::Ordering::Relaxed;
    let now = crate::clock::unix_ms();
    let started = *STARTED_MS.get_or_init(|| now);
    let f = &shared.fleet;
    serde_json::json!({
        "version": env!("CARGO_PKG_VERSION"),
        "commit": env!("RINGSIDE_COMMIT"),
        "uptime_s": now.saturating_sub(started) / 1000,
        "generation": shared.current().number,
        "draining": shared.lifecycle.is_draining() || shared.shutdown.load(Relaxed),
        "fleet": if f.enabled.load(Relaxed) {
            if f.connected.load(Relaxed) { "connected" } else { "Redis away" }
        } else {
            "off"
        },
        "can_change": can_change,
    })
}
