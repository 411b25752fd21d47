//! Admin views of flow control: queue state per connection and tenant-free totals, the
//! budgets in force with where each value comes from, live changes to them, and gauges.

use crate::flow::settings::Knob;
use crate::ids::ConnId;
use crate::state::core::Shared;
use serde_json::{Value, json};
use std::fmt::Write;
use std::sync::atomic::Ordering::Relaxed;

fn effective(shared: &Shared, conn: ConnId) -> Value {
    let mut m = serde_json::Map::new();
    for k in Knob::ALL {
        m.insert(k.name().into(), json!(shared.flow.effective(conn, k)));
    }
    Value::Object(m)
}

/// `GET /admin/queues`: per connection, what runs, what waits, how it went.
pub fn queues(shared: &Shared) -> (u16, Value) {
    let generation = shared.current();
    let list: Vec<Value> = generation
        .conn_labels
        .iter()
        .enumerate()
        .filter(|(_, (p, _))| !p.is_empty())
        .map(|(i, (p, c))| {
            let i = ConnId::new(i);
            let g = &shared.flow.gates[i];
            let st = &g.stats;
            json!({
                "provider": p,
                "connection": c,
                "running": g.running(),
                "queued": g.queued(),
                "max_concurrent": g.max_concurrent.load(Relaxed),
                // In fleet mode, this instance's share of the cap (absent: its own gate).
                "fleet_share": (g.fleet_share() != crate::flow::gate::NO_SHARE)
                    .then(|| g.fleet_share()),
                "spacing_ms": g.spacing_ms(),
                "learned_spacing_ms": g.learned_spacing_ms.load(Relaxed),
                "on_saturation": shared.flow.conns[i].on_saturation(),
                "started": st.started.load(Relaxed),
                "waited": st.wait.count(),
                "wait_ms_total": crate::histogram::Merged::of([&st.wait]).sum_us / 1_000,
                "rejected": {
                    "queue_full": st.rejected_full.load(Relaxed),
                    "saturated": st.rejected_saturated.load(Relaxed),
                    "queue_timeout": st.queue_timeouts.load(Relaxed),
                    "execution_timeout": st.execution_timeouts.load(Relaxed),
                    "cancelled": st.cancelled.load(Relaxed),
                },
                "settings": effective(shared, i),
            })
        })
        .collect();
    (200, json!({"queues": list, "accounts": accounts(shared)}))
}

/// The accounts with gates of their own: what runs across their keys, and their limits.
fn accounts(shared: &Shared) -> Vec<Value> {
    let generation = shared.current();
    generation
        .config
        .accounts
        .iter()
        .enumerate()
        .filter_map(|(i, a)| {
            let g = shared.flow.accounts.gate(i)?;
            let keys: Vec<&str> = shared
                .flow
                .accounts
                .members(i)
                .iter()
                .filter_map(|&c| generation.conn_names.get(c.index()).map(|n| n.label))
                .collect();
            Some(json!({
                "account": a.id,
                "keys": keys,
                "running": g.running(),
                "max_concurrent": a.max_concurrent,
                "min_time_ms": a.min_time_ms,
            }))
        })
        .collect()
}

/// `GET /admin/settings`: the process-wide budgets (what a connection without its own values gets).
pub fn settings(shared: &Shared) -> (u16, Value) {
    let mut m = serde_json::Map::new();
    for k in Knob::ALL {
        m.insert(
            k.name().into(),
            json!(shared.flow.budgets.effective(k, None)),
        );
    }
    (
        200,
        json!({"flow": m, "note": "admin changes are saved in the store and survive a restart"}),
    )
}

/// `PATCH /admin/settings` with `{"flow": {"max_wait_ms": 5000, "max_queue_depth": null}}`
/// (null clears an admin value; the environment or default applies again).
pub fn patch_settings(shared: &Shared, body: &[u8]) -> (u16, Value) {
    let bad = |m: String| {
        (
            400,
            json!({"error": {"message": m, "type": "invalid_request_error", "code": "invalid_settings"}}),
        )
    };
    let v: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => return bad(format!("body is not JSON: {e}")),
    };
    let Some(flow) = v.get("flow").and_then(Value::as_object) else {
        return bad("expected {\"flow\": {...}}".into());
    };
    let mut changes = Vec::new();
    for (name, val) in flow {
        let Some(k) = Knob::ALL.into_iter().find(|k| k.name() == name) else {
            return bad(format!("unknown setting `{name}`"));
        };
        let parsed = match val {
            Value::Null => None,
            v => match v.as_u64() {
                Some(n) => Some(n),
                None => return bad(format!("`{name}` must be a non-negative integer or null")),
            },
        };
        changes.push((k, parsed));
    }
    for (k, v) in changes {
        let key = format!("{}{}", crate::flow::settings::SAVED_PREFIX, k.name());
        match shared.flow.budgets.set_admin(k, v) {
            Some(stored) => shared.store.put(key, json!(stored)),
            None => shared.store.delete(key),
        }
    }
    settings(shared)
}

/// Gauges and counters per connection for `/metrics`.
pub fn metrics(shared: &Shared) -> String {
    let mut out = String::new();
    out.push_str("# HELP ringside_queue_running Requests holding a slot, per connection.\n# TYPE ringside_queue_running gauge\n");
    let generation = shared.current();
    // The slots this generation has a connection in.
    let live: Vec<usize> = (0..generation.conn_labels.len())
        .filter(|&i| !generation.conn_labels[i].0.is_empty())
        .collect();
    let label = |i: usize| {
        let (p, c) = &generation.conn_labels[i];
        let e = crate::metrics::escape;
        format!("provider=\"{}\",connection=\"{}\"", e(p), e(c))
    };
    for &i in &live {
        let _ = writeln!(
            out,
            "ringside_queue_running{{{}}} {}",
            label(i),
            shared.flow.gates[i].running()
        );
    }
    out.push_str("# HELP ringside_queue_waiting Requests waiting for a slot, per connection.\n# TYPE ringside_queue_waiting gauge\n");
    for &i in &live {
        let _ = writeln!(
            out,
            "ringside_queue_waiting{{{}}} {}",
            label(i),
            shared.flow.gates[i].queued()
        );
    }
    out.push_str("# HELP ringside_queue_rejections_total Requests refused by flow control, by reason.\n# TYPE ringside_queue_rejections_total counter\n");
    for &i in &live {
        let st = &shared.flow.gates[i].stats;
        for (reason, n) in [
            ("queue_full", &st.rejected_full),
            ("saturated", &st.rejected_saturated),
            ("queue_timeout", &st.queue_timeouts),
            ("execution_timeout", &st.execution_timeouts),
            ("cancelled", &st.cancelled),
        ] {
            let _ = writeln!(
                out,
                "ringside_queue_rejections_total{{{},reason=\"{reason}\"}} {}",
                label(i),
                n.load(Relaxed)
            );
        }
    }
    out.push_str("# HELP ringside_queue_wait_seconds Time queued before a slot, per connection.\n# TYPE ringside_queue_wait_seconds histogram\n");
    for &i in &live {
        let m = crate::histogram::Merged::of([&shared.flow.gates[i].stats.wait]);
        m.write(&mut out, "ringside_queue_wait_seconds", &label(i));
    }
    out.push_str("# HELP ringside_queue_wait_ms Deprecated (use ringside_queue_wait_seconds; removed in the next release): time queued before a slot, per connection, in milliseconds.\n# TYPE ringside_queue_wait_ms histogram\n");
    for &i in &live {
        // The seconds histogram's bounds include these four, so this family is exact.
        let m = crate::histogram::Merged::of([&shared.flow.gates[i].stats.wait]);
        for le in [10, 100, 1_000, 10_000] {
            let cum = m.at_most(le * 1_000);
            let _ = writeln!(
                out,
                "ringside_queue_wait_ms_bucket{{{},le=\"{le}\"}} {cum}",
                label(i)
            );
        }
        let (n, sum_ms) = (m.count(), m.sum_us / 1_000);
        let _ = writeln!(
            out,
            "ringside_queue_wait_ms_bucket{{{},le=\"+Inf\"}} {n}",
            label(i)
        );
        let _ = writeln!(out, "ringside_queue_wait_ms_sum{{{}}} {sum_ms}", label(i));
        let _ = writeln!(out, "ringside_queue_wait_ms_count{{{}}} {n}", label(i));
    }
    account_metrics(shared, &mut out);
    out
}

/// Gauges per limited account: what runs across its keys, and its cap.
fn account_metrics(shared: &Shared, out: &mut String) {
    let generation = shared.current();
    let accounts = &generation.config.accounts;
    let limited: Vec<(usize, &str)> = (accounts.iter().enumerate())
        .filter(|(i, _)| shared.flow.accounts.gate(*i).is_some())
        .map(|(i, a)| (i, a.id.as_str()))
        .collect();
    if limited.is_empty() {
        return;
    }
    out.push_str("# HELP ringside_account_running Requests holding a slot, per limited account (all its keys).\n# TYPE ringside_account_running gauge\n");
    for &(i, id) in &limited {
        let running = shared.flow.accounts.gate(i).map_or(0, |g| g.running());
        let _ = writeln!(
            out,
            "ringside_account_running{{account=\"{}\"}} {running}",
            crate::metrics::escape(id)
        );
    }
    out.push_str("# HELP ringside_account_max_concurrent The account's concurrency cap (0: none).\n# TYPE ringside_account_max_concurrent gauge\n");
    for &(i, id) in &limited {
        let _ = writeln!(
            out,
            "ringside_account_max_concurrent{{account=\"{}\"}} {}",
            crate::metrics::escape(id),
            accounts[i].max_concurrent
        );
    }
}

/// `GET /admin/tenants`: each tenant seen, with its name where the config or a managed key
/// gives one (a `[[tenants]]` entry, a client key's tenant or id); the id is a hash, never a key.
pub fn tenants(shared: &Shared) -> (u16, Value) {
    let generation = shared.current();
    let cfg = &generation.config;
    let mut names: std::collections::HashMap<u64, String> = std::collections::HashMap::new();
    for c in &cfg.clients.list {
        names.entry(c.tenant).or_insert_with(|| c.id.to_string());
    }
    for (_, v) in shared.store.scan("clientkey/") {
        if let Some(id) = v["id"].as_str() {
            let name = v["tenant"].as_str().unwrap_or(id);
            names.insert(crate::clients::tenant_id(name), name.to_string());
        }
    }
    let mut list = shared.flow.tenants.snapshot(crate::clock::now_ms());
    for t in &mut list {
        let id = t["tenant"]
            .as_str()
            .and_then(|h| u64::from_str_radix(h, 16).ok());
        let name = id.and_then(|id| {
            cfg.tenants
                .of(id)
                .map(|r| r.name.clone())
                .or_else(|| names.get(&id).cloned())
        });
        t["name"] = name.map_or(Value::Null, Value::String);
    }
    (
        200,
        serde_json::json!({"limits": shared.flow.tenants.limits, "tenants": list}),
    )
}
