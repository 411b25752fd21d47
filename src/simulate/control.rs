//! The simulator's own control endpoints (`/_sim/*`: stats, recent requests, reset, faults set
//! at run time) and the choice of fault for one request.

use super::fault::Fault;
use super::{FaultEntry, Selector, SimState};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Answer a `/_sim/*` request: (status, JSON body).
pub(super) fn control(state: &SimState, head: &crate::http::Head, body: &[u8]) -> (u16, Vec<u8>) {
    let ok = |v: serde_json::Value| (200, serde_json::to_vec(&v).unwrap_or_default());
    match (head.method(), head.path()) {
        ("GET", "/_sim/stats") => ok(state.stats.to_json()),
        ("GET", "/_sim/requests") => ok(state.stats.recent_json()),
        ("GET", "/_sim/front") => ok(serde_json::to_value(&*state.front).unwrap_or_default()),
        ("GET", "/_sim/accounts") => ok(state.accounts.claims()),
        ("POST", "/_sim/reset") => {
            state.stats.reset();
            ok(serde_json::json!({"reset": true}))
        }
        ("POST", "/_sim/faults") => {
            let v: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
            let selector = match (v["key"].as_str(), v["model"].as_str()) {
                (Some(k), _) => Selector::Key(k.to_string()),
                (None, Some(m)) => Selector::Model(m.to_string()),
                _ => return (400, br#"{"error":"need key or model"}"#.to_vec()),
            };
            let mut faults = state.faults.lock().unwrap_or_else(|e| e.into_inner());
            faults.retain(|f| f.selector != selector);
            if let Some(spec) = v["spec"].as_str() {
                match Fault::parse(spec) {
                    Ok(fault) => faults.push(Arc::new(FaultEntry {
                        selector,
                        fault,
                        used: AtomicU64::new(0),
                    })),
                    Err(e) => {
                        return (
                            400,
                            serde_json::to_vec(&serde_json::json!({"error": e}))
                                .unwrap_or_default(),
                        );
                    }
                }
            }
            ok(serde_json::json!({"faults": faults.len()}))
        }
        _ => (404, br#"{"error":"unknown control endpoint"}"#.to_vec()),
    }
}

/// Pick the fault for a request: header first, then key, then model.
pub(super) fn pick_fault(
    state: &SimState,
    head: &crate::http::Head,
    key: &str,
    model: Option<&str>,
) -> Result<Fault, String> {
    if let Some(spec) = head.get_str("x-sim-fault") {
        return Fault::parse(spec);
    }
    let faults = state.faults.lock().unwrap_or_else(|e| e.into_inner());
    let by_key = faults
        .iter()
        .find(|f| f.selector == Selector::Key(key.to_string()));
    let by_model = || {
        model.and_then(|m| {
            faults
                .iter()
                .find(|f| f.selector == Selector::Model(m.to_string()))
        })
    };
    if let Some(entry) = by_key.or_else(by_model) {
        let n = entry.used.fetch_add(1, Ordering::Relaxed);
        if entry.fault.times == 0 || n < entry.fault.times {
            return Ok(entry.fault.clone());
        }
    }
    Fault::parse("none")
}
