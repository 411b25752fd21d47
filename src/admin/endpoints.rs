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
    // Decision records live on the cores: ask them (this may take one core tick).
    if head.method() == "GET"
        && let Some(found) = decision_query(shared, admin, head.path(), head.query()).await
    {
        return as_json(found);
    }
    if let Some(found) = leases::handle(shared, head.method(), head.path()).await {
        return as_json(found);
    }
    let draining = shared.shutdown.load(Ordering::Relaxed) || shared.lifecycle.is_draining();
    match (head.method(), head.path()) {
        ("GET", "/healthz") => (200, "text/plain", b"ok\n".to_vec()),
        ("GET", "/readyz") if draining => (503, "text/plain", b"draining\n".to_vec()),
        ("GET", "/readyz") => (200, "text/plain", b"ready\n".to_vec()),
        ("GET", "/metrics") => {
            let text = metrics_text(shared, admin);
            (200, "text/plain; version=0.0.4", text.into_bytes())
        }
        ("GET", "/admin/pins") => as_json(pins(shared)),
        ("GET", "/admin/clients") => as_json((
            200,
            crate::clients::managed::list(shared.store, &shared.config.clients),
        )),
        ("POST", "/admin/clients") => as_json(create_client(shared, body)),
        ("DELETE", p) if p.starts_with("/admin/clients/") => {
            as_json(revoke_client(shared, &p["/admin/clients/".len()..]))
        }
        ("GET", "/admin/queues") => as_json(flow::queues(shared)),
        ("GET", "/admin/tenants") => as_json((
            200,
            json!({
                "limits": shared.flow.tenants.limits,
                "tenants": shared.flow.tenants.snapshot(crate::clock::now_ms()),
            }),
        )),
        ("GET", "/admin/settings") => as_json(flow::settings(shared)),
        ("GET", "/admin/config") => as_json(super::config_view::config(shared)),
        ("POST", "/admin/drain") => {
            // The main thread runs the drain, as for SIGTERM (`cli::serve`).
            shared.lifecycle.request_drain();
            as_json((
                202,
                json!({"draining": true,
                       "drain_delay_ms": shared.config.server.drain_delay.as_millis() as u64,
                       "shutdown_grace_ms": shared.config.server.shutdown_grace.as_millis() as u64}),
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
    let mut text =
        crate::metrics::render(&shared.metrics, &shared.route_labels, &shared.conn_labels);
    text.push_str(&admin.borrow_mut().metrics());
    text.push_str(&flow::metrics(shared));
    text.push_str(&format!(
        "# HELP ringside_admin_auth_failures_total Admin requests refused for a missing or wrong credential.\n# TYPE ringside_admin_auth_failures_total counter\nringside_admin_auth_failures_total {}\n",
        access::AUTH_FAILURES.load(Ordering::Relaxed)
    ));
    text.push_str(&format!(
        "# HELP ringside_connections_refused_total Client connections closed at accept: server.max_connections or max_unauthenticated_per_address reached.\n# TYPE ringside_connections_refused_total counter\nringside_connections_refused_total {}\n# HELP ringside_client_connections_limit server.max_connections.\n# TYPE ringside_client_connections_limit gauge\nringside_client_connections_limit {}\n",
        crate::state::conn_caps::REFUSED.load(Ordering::Relaxed),
        shared.config.server.max_connections
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
    let clients = &shared.config.clients;
    match crate::clients::managed::create(shared.store, clients, body, &shared.conn_labels) {
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
