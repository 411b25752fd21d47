//! What each admin endpoint answers, once the caller has passed `access::check`.

use super::state::AdminState;
use super::{MAX_DECISIONS_PAGE, access, decision_query, flow, leases};
use crate::http::Head;
use crate::state::core::Shared;
use serde_json::{Value, json};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::Ordering;

/// (status, content type, body)
type Answer = (u16, &'static str, Vec<u8>);

fn as_json((status, v): (u16, Value)) -> Answer {
    (
        status,
        "application/json",
        serde_json::to_vec_pretty(&v).unwrap_or_default(),
    )
}

/// The answer to one admin request.
pub(super) async fn answer(
    shared: &Shared,
    admin: &Rc<RefCell<AdminState>>,
    head: &Head,
    body: &[u8],
) -> Answer {
    // HEAD is GET without the body (`answer_for` drops it): every GET endpoint answers it, as
    // a load balancer's `option httpchk HEAD /readyz` expects.
    let method = match head.method() {
        "HEAD" => "GET",
        m => m,
    };
    // Decision records live on the cores: ask them (this may take one core tick).
    if method == "GET"
        && let Some(found) = decision_query(shared, admin, head.path(), head.query()).await
    {
        return as_json(found);
    }
    if let Some(found) = leases::handle(shared, method, head.path()).await {
        return as_json(found);
    }
    if (method, head.path()) == ("POST", "/admin/reload") {
        let shared = admin.borrow().shared.clone();
        return as_json(reload(shared).await);
    }
    let draining = shared.shutdown.load(Ordering::Relaxed) || shared.lifecycle.is_draining();
    match (method, head.path()) {
        ("GET", "/") => (200, "text/html; charset=utf-8", super::page::HTML.to_vec()),
        ("GET", "/admin" | "/admin/") => as_json((200, super::page::index())),
        ("GET", "/admin/stats") => as_json((200, admin.borrow().history.view())),
        ("GET", "/healthz") => (200, "text/plain", b"ok\n".to_vec()),
        // The browser's own ask beside the status page: nothing, and no token needed.
        ("GET", "/favicon.ico") => (204, "image/x-icon", Vec::new()),
        ("GET", "/readyz") if draining => (503, "text/plain", b"draining\n".to_vec()),
        ("GET", "/readyz") => (200, "text/plain", readiness(shared).into_bytes()),
        ("GET", "/metrics") => {
            let text = metrics_text(shared, admin);
            (200, "text/plain; version=0.0.4; charset=utf-8", text.into_bytes())
        }
        ("GET", "/admin/pins") => as_json(pins(shared)),
        ("GET", "/admin/clients") => as_json((
            200,
            crate::clients::managed::list(shared.store, &shared.current().config.clients),
        )),
        ("POST", "/admin/clients") => as_json(create_client(shared, body)),
        ("DELETE", p) if p.starts_with("/admin/clients/") => {
            as_json(revoke_client(shared, &p["/admin/clients/".len()..]))
        }
        ("GET", "/admin/queues") => as_json(flow::queues(shared)),
        ("GET", "/admin/tenants") => as_json(flow::tenants(shared)),
        ("GET", "/admin/spend") => as_json(super::spend::view(shared).await),
        ("POST", p) if p.starts_with("/admin/spend/") && p.ends_with("/reset") => {
            let tenant = &p["/admin/spend/".len()..p.len() - "/reset".len()];
            as_json(super::spend::reset(shared, tenant))
        }
        ("GET", "/admin/settings") => as_json(flow::settings(shared)),
        ("GET", "/admin/config") => as_json(super::config_view::config(shared)),
        ("GET", "/admin/fleet") => as_json(fleet_view(shared)),
        ("GET", "/admin/audit") => as_json(super::audit::view(shared, head.query().unwrap_or(""))),
        ("POST", "/admin/drain") => {
            // The main thread runs the drain, as for SIGTERM (`cli::serve`).
            shared.lifecycle.request_drain();
            as_json((
                202,
                json!({"draining": true,
                       "drain_delay_ms": shared.current().config.server.drain_delay.as_millis() as u64,
                       "shutdown_grace_ms": shared.current().config.server.shutdown_grace.as_millis() as u64}),
            ))
        }
        ("PATCH", "/admin/settings") => as_json(flow::patch_settings(shared, body)),
        (m, p) if let Some(found) = admin.borrow_mut().handle(m, p, head.query()) => {
            as_json(found)
        }
        _ => (
            404,
            "application/json",
            br#"{"error":{"message":"no such admin endpoint","type":"invalid_request_error","code":"not_found"}}"#.to_vec(),
        ),
    }
}

/// The Prometheus exposition: the cores' counters, the admin thread's view of the
/// resilience state, flow control, and the admin port's own counters.
fn metrics_text(shared: &Shared, admin: &Rc<RefCell<AdminState>>) -> String {
    let generation = shared.current();
    let mut text = crate::metrics::render(
        &shared.metrics,
        &generation.route_labels,
        &generation.conn_labels,
    );
    reload_metrics(&mut text, shared, generation.number);
    fleet_metrics(&mut text, shared);
    super::usage_wall::metrics(&mut text, shared, &generation.config);
    text.push_str(&admin.borrow_mut().metrics());
    text.push_str(&flow::metrics(shared));
    super::spend::metrics(&mut text, shared);
    text.push_str(&format!(
        "# HELP ringside_admin_auth_failures_total Admin requests refused for a missing or wrong credential.\n# TYPE ringside_admin_auth_failures_total counter\nringside_admin_auth_failures_total {}\n",
        access::AUTH_FAILURES.load(Ordering::Relaxed)
    ));
    connection_caps_metrics(&mut text, shared);
    if let Some(t) = &shared.telemetry {
        text.push_str(&t.metrics());
    }
    text.push_str(&format!(
        "# HELP ringside_local_resource_exhaustions_total Sockets that could not be made or accepted for want of a file descriptor, local port or socket buffer on this host (no key or provider is blamed).\n# TYPE ringside_local_resource_exhaustions_total counter\nringside_local_resource_exhaustions_total {}\n",
        crate::fd_limit::exhaustions()
    ));
    text
}

/// The live session pins, at most a page of them: a busy edge can hold many thousands.
fn pins(shared: &Shared) -> (u16, Value) {
    let now = crate::clock::unix_ms();
    let live: Vec<(String, Value)> = shared
        .store
        .scan("pin/")
        .into_iter()
        .filter(|(_, v)| v["until"].as_u64().is_some_and(|u| u > now))
        .collect();
    let pins: Vec<Value> = live
        .iter()
        .take(MAX_DECISIONS_PAGE)
        .map(|(k, v)| {
            json!({
                "session": k.trim_start_matches("pin/"),
                "connection": v["conn"],
                "expires_in_ms": v["until"].as_u64().unwrap_or(0).saturating_sub(now),
            })
        })
        .collect();
    (200, json!({"pins": pins, "total": live.len()}))
}

/// `POST /admin/clients`: mint a managed client key (shown once).
fn create_client(shared: &Shared, body: &[u8]) -> (u16, Value) {
    let generation = shared.current();
    let clients = &generation.config.clients;
    match crate::clients::managed::create(shared.store, clients, body, &generation.conn_labels) {
        Ok(v) => {
            shared.managed_keys.store(true, Ordering::Relaxed);
            (201, v)
        }
        Err(m) => (
            400,
            json!({"error": {"message": m, "type": "invalid_request_error", "code": "invalid_client"}}),
        ),
    }
}

/// `DELETE /admin/clients/{id}`: its leases end with it, so the next request of any of its
/// owners is refused.
fn revoke_client(shared: &Shared, id: &str) -> (u16, Value) {
    if !crate::clients::managed::delete(shared.store, id) {
        return (
            404,
            json!({"error": {"message": "no managed client with that id", "type": "invalid_request_error", "code": "not_found"}}),
        );
    }
    shared
        .store
        .lease_nowait(crate::store::leases::Op::RevokeClient {
            client: id.to_string(),
            reason: "MANAGED_KEY_REVOKED".into(),
        });
    let any = crate::clients::managed::any(shared.store);
    shared.managed_keys.store(any, Ordering::Relaxed);
    (200, json!({"revoked": id}))
}

/// The applied generation and how reloads went.
fn reload_metrics(out: &mut String, shared: &Shared, generation: u64) {
    use std::fmt::Write;
    let r = &shared.reloads;
    let _ = write!(
        out,
        "# HELP ringside_config_generation The configuration generation serving new requests (1 at start, +1 per applied reload).\n# TYPE ringside_config_generation gauge\nringside_config_generation {generation}\n\
         # HELP ringside_config_reloads_total Reloads by result (rejected: the file had problems, nothing changed).\n# TYPE ringside_config_reloads_total counter\n\
         ringside_config_reloads_total{{result=\"applied\"}} {}\nringside_config_reloads_total{{result=\"rejected\"}} {}\n",
        r.applied.load(Ordering::Relaxed),
        r.rejected.load(Ordering::Relaxed),
    );
}

/// The data port's connection caps, and the connections each refused at accept.
fn connection_caps_metrics(out: &mut String, shared: &Shared) {
    use crate::state::conn_caps::{REFUSED, Refused};
    use std::fmt::Write;
    out.push_str("# HELP ringside_connections_refused_total Client connections closed at accept, by the setting that refused them (server.max_connections, max_connections_per_address, max_unauthenticated_per_address).\n# TYPE ringside_connections_refused_total counter\n");
    for why in Refused::ALL {
        let _ = writeln!(
            out,
            "ringside_connections_refused_total{{reason=\"{}\"}} {}",
            why.as_str(),
            REFUSED.by_reason[why as usize].load(Ordering::Relaxed)
        );
    }
    let (total, per_address) = shared.caps_in_force();
    let _ = write!(
        out,
        "# HELP ringside_client_connections_limit Client connections held at once: server.max_connections, or (0) what the open-file limit allows now, two descriptors per client while a provider may be reached over HTTP/1.1 and one while all speak HTTP/2.\n# TYPE ringside_client_connections_limit gauge\nringside_client_connections_limit {total}\n\
         # HELP ringside_client_connections_per_address_limit server.max_connections_per_address, or (0) all but a sixteenth of the limit (trusted proxies are exempt).\n# TYPE ringside_client_connections_per_address_limit gauge\nringside_client_connections_per_address_limit {per_address}\n"
    );
}

/// `/readyz` while serving: ready, and in fleet mode whether Redis is there (an instance
/// serves on local health while it is not, so it stays ready).
fn readiness(shared: &Shared) -> String {
    let f = &shared.fleet;
    if !f.enabled.load(Ordering::Relaxed) {
        return "ready\n".into();
    }
    if f.connected.load(Ordering::Relaxed) {
        "ready\nfleet: connected\n".into()
    } else {
        "ready\nfleet: Redis away (local health, caps on this instance's share, leases refused)\n"
            .into()
    }
}

/// Fleet mode's link: up or not, and what crossed it.
fn fleet_metrics(out: &mut String, shared: &Shared) {
    use std::fmt::Write;
    let f = &shared.fleet;
    let _ = write!(
        out,
        "# HELP ringside_fleet_enabled Fleet mode is configured ([fleet] redis_url).\n# TYPE ringside_fleet_enabled gauge\nringside_fleet_enabled {}\n\
         # HELP ringside_fleet_connected Connected to the fleet's Redis (0 while it is away: health is local).\n# TYPE ringside_fleet_connected gauge\nringside_fleet_connected {}\n\
         # HELP ringside_fleet_facts_total Health facts sent to the fleet, applied from it, naming nothing here, and sent again after Redis was away.\n# TYPE ringside_fleet_facts_total counter\n\
         ringside_fleet_facts_total{{direction=\"published\"}} {}\nringside_fleet_facts_total{{direction=\"received\"}} {}\nringside_fleet_facts_total{{direction=\"unknown\"}} {}\nringside_fleet_facts_total{{direction=\"republished\"}} {}\n\
         # HELP ringside_fleet_disconnects_total Times the link to Redis was lost or could not be made.\n# TYPE ringside_fleet_disconnects_total counter\nringside_fleet_disconnects_total {}\n",
        u8::from(f.enabled.load(Ordering::Relaxed)),
        u8::from(f.connected.load(Ordering::Relaxed)),
        f.published.load(Ordering::Relaxed),
        f.received.load(Ordering::Relaxed),
        f.unknown.load(Ordering::Relaxed),
        f.republished.load(Ordering::Relaxed),
        f.disconnects.load(Ordering::Relaxed),
    );
    out.push_str("# HELP ringside_fleet_refused_total What was read from Redis and ignored: not signed with the fleet secret, signed for another place, out of its time window, a replay, or failing the rules of local input.\n# TYPE ringside_fleet_refused_total counter\n");
    for why in crate::fleet::signed::Refused::ALL {
        let _ = writeln!(
            out,
            "ringside_fleet_refused_total{{reason=\"{}\"}} {}",
            why.as_str(),
            f.refused[why.index()].load(Ordering::Relaxed)
        );
    }
}

/// `GET /admin/fleet`: fleet mode's settings (no password) and its link.
fn fleet_view(shared: &Shared) -> (u16, Value) {
    let generation = shared.current();
    let f = &shared.fleet;
    let settings = generation.config.fleet.as_ref().map(|s| {
        json!({"redis_url": s.redis_url, "instance_id": s.instance_id, "key_prefix": s.key_prefix,
               "timeout_ms": s.timeout_ms, "password": if s.password.is_some() { "set" } else { "not set" },
               "secret": "set: every message and entry is signed with it"})
    });
    (
        200,
        json!({
            "enabled": f.enabled.load(Ordering::Relaxed),
            "connected": f.connected.load(Ordering::Relaxed),
            "settings": settings,
            "shared": ["connection health (cooldowns, terminal states, operator resets)", "model lockouts", "breaker and window-gate failures", "concurrency caps", "exclusive session leases", "session pins", "managed client keys", "tenant quotas", "account caps", "spacing and reservoirs"],
            "per_instance": ["spacing learned from upstream rate-limit headers"],
            "facts": {
                "published": f.published.load(Ordering::Relaxed),
                "received": f.received.load(Ordering::Relaxed),
                "unknown": f.unknown.load(Ordering::Relaxed),
                "republished": f.republished.load(Ordering::Relaxed),
            },
            "disconnects": f.disconnects.load(Ordering::Relaxed),
            "refused": crate::fleet::signed::Refused::ALL.iter()
                .map(|why| (why.as_str().to_string(), json!(f.refused[why.index()].load(Ordering::Relaxed))))
                .collect::<serde_json::Map<_, _>>(),
        }),
    )
}

/// `POST /admin/reload`: the reload runs on a thread of its own (it waits for every core to
/// install the new generation) while this port keeps answering. 200 with what changed, or 422
/// with every problem; the running config is unchanged then.
async fn reload(shared: std::sync::Arc<Shared>) -> (u16, Value) {
    let (tx, rx) = futures_channel::oneshot::channel();
    let started = std::thread::Builder::new()
        .name("ringside-reload".into())
        .spawn(move || {
            let out = crate::state::reload::reload(&shared, crate::state::reload::Cause::Admin);
            crate::state::reload::log_outcome(&out);
            let _ = tx.send(out);
        });
    if let Err(e) = started {
        return (
            500,
            json!({"error": {"message": format!("cannot start the reload: {e}"), "type": "server_error", "code": "reload_failed"}}),
        );
    }
    match rx.await {
        Ok(out) => {
            let status = match out.status {
                crate::state::reload::Status::Applied => 200,
                crate::state::reload::Status::Rejected => 422,
            };
            (status, json!(out))
        }
        Err(_) => (
            500,
            json!({"error": {"message": "the reload stopped without an outcome", "type": "server_error", "code": "reload_failed"}}),
        ),
    }
}
