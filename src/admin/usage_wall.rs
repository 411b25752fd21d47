//! A Claude subscription account's usage wall as the admin API shows it
//! (`GET /admin/connections`, for connections that opted in): the lane, the last limit reset
//! attempt, and the counts.

use crate::config::Connection;
use crate::resilience::usage_wall::lane::EndReason;
use crate::resilience::usage_wall::walls::{Counts, Wall};
use serde_json::{Value, json};
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;

/// The wall of `conn`, or `None` when it opted in to nothing.
pub fn view(wall: Option<&Wall>, conn: Option<&Connection>) -> Option<Value> {
    let (wall, conn) = (wall?, conn?);
    if !conn.usage_wall.any() {
        return None;
    }
    let now = crate::clock::unix_ms();
    let (mut lane, memo) = wall.view(now);
    let (claiming, _) = wall.last_claim();
    let resets_at = lane.active_until(now);
    let (cool_off, spent) = lane.refused_until();
    let later = |t: u64| (t > now).then_some(t);
    let c = &wall.counts;
    let ends: serde_json::Map<String, Value> = EndReason::ALL
        .iter()
        .map(|r| {
            (
                r.as_str().to_string(),
                json!(c.ends[r.index()].load(Relaxed)),
            )
        })
        .collect();
    Some(json!({
        "low_priority_lane": conn.usage_wall.low_priority_lane,
        "auto_limit_reset": conn.usage_wall.auto_limit_reset,
        "lane": {
            "state": if resets_at.is_some() { "active" } else { "idle" },
            "resets_at": resets_at,
            "accepted_at_ms": lane.accepted_at(),
            "served": lane.served,
            "served_standard": lane.served_standard,
            "retry_after_ms": lane.retry_after_ms,
            "max_wait_ms": lane.max_wait_ms,
            "budget_utilization": lane.budget_utilization,
            "cooling_off_until_ms": later(cool_off),
            "budget_spent_until_ms": later(spent),
            "last_end": lane.last_end.map(|(r, at)| json!({"reason": r.as_str(), "at_ms": at})),
        },
        "limit_reset": {
            "in_flight": claiming,
            "last": memo.last.map(|(o, at)| json!({"outcome": o, "at_ms": at})),
        },
        "counts": {
            "activations": c.activations.load(Relaxed),
            "waits": c.waits.load(Relaxed),
            "ends": ends,
            "claims": c.claims.load(Relaxed),
            "claims_granted": c.claims_granted.load(Relaxed),
        },
    }))
}

/// The usage walls' counters in the Prometheus text format (opted-in connections only; each
/// family's samples together, as the format asks).
pub fn metrics(
    out: &mut String,
    shared: &crate::state::core::Shared,
    config: &crate::config::Config,
) {
    use std::fmt::Write;
    let walls: Vec<(String, &Wall)> = config
        .providers
        .iter()
        .flat_map(|p| p.connections.iter().map(move |c| (p, c)))
        .filter(|(_, c)| c.usage_wall.any())
        .filter_map(|(p, c)| {
            let l = format!(
                "provider=\"{}\",connection=\"{}\"",
                crate::metrics::escape(&p.id),
                crate::metrics::escape(&c.id)
            );
            Some((l, shared.usage_walls.get(c.index)?))
        })
        .collect();
    if walls.is_empty() {
        return;
    }
    let now = crate::clock::unix_ms();
    let c = |w: &Wall, f: fn(&Counts) -> &AtomicU64| f(&w.counts).load(Relaxed);
    let families: [Family; 5] = [
        (
            "lane_active",
            "gauge",
            "Whether a Claude subscription account is on its usage wall's low-priority lane.",
            &|w| vec![(String::new(), u64::from(w.slow(now)))],
        ),
        (
            "lane_activations_total",
            "counter",
            "Low-priority lanes accepted.",
            &|w| vec![(String::new(), c(w, |n| &n.activations))],
        ),
        (
            "lane_ends_total",
            "counter",
            "Low-priority lanes ended, by reason.",
            &|w| {
                EndReason::ALL
                    .iter()
                    .map(|r| {
                        (
                            format!(",reason=\"{}\"", r.as_str()),
                            w.counts.ends[r.index()].load(Relaxed),
                        )
                    })
                    .collect()
            },
        ),
        (
            "lane_waits_total",
            "counter",
            "Busy-slot and capacity waits on the lane.",
            &|w| vec![(String::new(), c(w, |n| &n.waits))],
        ),
        (
            "limit_reset_claims_total",
            "counter",
            "Weekly limit reset attempts that made the calls (called), and those granted.",
            &|w| {
                vec![
                    (",result=\"called\"".into(), c(w, |n| &n.claims)),
                    (",result=\"granted\"".into(), c(w, |n| &n.claims_granted)),
                ]
            },
        ),
    ];
    for (name, kind, help, samples) in families {
        let _ = writeln!(
            out,
            "# HELP ringside_usage_wall_{name} {help}\n# TYPE ringside_usage_wall_{name} {kind}"
        );
        for (l, w) in &walls {
            for (more, n) in samples(w) {
                let _ = writeln!(out, "ringside_usage_wall_{name}{{{l}{more}}} {n}");
            }
        }
    }
}

/// A metric family: its name after `ringside_usage_wall_`, type, help, and one wall's samples
/// (extra labels, value).
type Family<'a> = (
    &'static str,
    &'static str,
    &'static str,
    &'a dyn Fn(&Wall) -> Vec<(String, u64)>,
);
