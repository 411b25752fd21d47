//! The admin port's side of the audit trail (`state::audit_trail`): which change a request is,
//! the state it changes as it was before, and the entry once the change is answered; and
//! `GET /admin/audit`.

use crate::state::audit_trail::{Actor, Change};
use crate::state::core::Shared;
use serde_json::{Value, json};

/// Whether a request changes something (everything but reads).
pub fn is_change(method: &str) -> bool {
    !crate::admin::access::is_read(method)
}

/// The change's name, from its method and path.
fn action(method: &str, path: &str) -> &'static str {
    match (method, path) {
        ("POST", "/admin/reload") => "reload",
        ("POST", "/admin/drain") => "drain",
        ("POST", "/admin/clients") => "client_key.mint",
        ("DELETE", p) if p.starts_with("/admin/clients/") => "client_key.revoke",
        ("PATCH", "/admin/settings") => "settings.patch",
        ("DELETE", p) if p.starts_with("/admin/leases/") => "lease.release",
        ("POST", p) if p.ends_with("/reset") => "reset",
        ("POST", _) => "post",
        ("DELETE", _) => "delete",
        _ => "change",
    }
}

/// What the change will change, as it is now (where there is a view of it).
pub fn before(shared: &Shared, method: &str, path: &str) -> Option<Value> {
    match action(method, path) {
        "settings.patch" => Some(super::flow::settings(shared).1),
        "reload" => Some(crate::state::audit_trail::generation(
            shared.current().number,
        )),
        "client_key.revoke" => {
            let id = path.trim_start_matches("/admin/clients/");
            let all = crate::clients::managed::list(shared.store, &shared.current().config.clients);
            let clients = all["clients"].as_array().cloned().unwrap_or_default();
            clients.into_iter().find(|c| c["id"] == id)
        }
        _ => None,
    }
}

/// Record a change the admin port answered: the answer's JSON is its `after` (secrets in it
/// are redacted by the trail); settings are read again.
pub fn record(
    shared: &Shared,
    actor: &Actor,
    (method, path): (&str, &str),
    status: u16,
    before: Option<Value>,
    answer: &[u8],
) {
    let action = action(method, path);
    let after = match action {
        "settings.patch" => Some(super::flow::settings(shared).1),
        _ => serde_json::from_slice(answer).ok(),
    };
    let change = Change {
        actor,
        action,
        target: path,
        status,
        before,
        after,
    };
    shared.audit_trail.record(shared.store, change);
}

/// `GET /admin/audit?limit=N`: the newest changes first (100 unless asked; at most all kept).
pub fn view(shared: &Shared, query: &str) -> (u16, Value) {
    let limit = (query.split('&'))
        .find_map(|kv| kv.strip_prefix("limit="))
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or(100);
    let entries = shared.audit_trail.newest(limit);
    (
        200,
        json!({"entries": entries, "kept": crate::state::audit_trail::KEPT}),
    )
}
