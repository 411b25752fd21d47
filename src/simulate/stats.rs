//! What the simulator saw: attempts and peak concurrency per key, and the last requests.

use crate::http::Head;
use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;

#[derive(Clone, Debug, Default, Serialize)]
pub struct KeyStats {
    /// Inference requests (a model list is not one: `model_lists`).
    pub attempts: u64,
    /// Model lists asked with the key (Ringside's probes, SDKs' listings).
    #[serde(skip_serializing_if = "is_zero")]
    pub model_lists: u64,
    pub in_flight: u64,
    pub peak_concurrency: u64,
    /// By status code (a JSON object keyed by the code as a string).
    pub statuses: BTreeMap<u16, u64>,
    /// What the requests said they needed (`x-drill-need`: `tools`, `region=eu`, …), counted
    /// by the model they were sent for: what `ringside drill` holds against what each model
    /// supports.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub needs: BTreeMap<String, BTreeMap<String, u64>>,
}

/// One request as the simulator saw it. The head is kept whole (it owns its bytes) and turned
/// into JSON only when `/_sim/requests` asks: a copy of every header per request cost the
/// simulator CPU it shares with the proxy under test.
#[derive(Clone, Debug)]
pub struct SeenRequest {
    pub head: Head,
    pub key: String,
    pub model: Option<String>,
    pub body_bytes: usize,
}

impl SeenRequest {
    fn to_json(&self) -> serde_json::Value {
        let headers: Vec<(&str, String)> = self
            .head
            .iter()
            .map(|(n, v)| (n, String::from_utf8_lossy(v).into_owned()))
            .collect();
        serde_json::json!({
            "method": self.head.method(), "path": self.head.target(), "key": self.key,
            "model": self.model, "headers": headers, "body_bytes": self.body_bytes,
        })
    }
}

#[derive(Default)]
pub struct Stats {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    keys: BTreeMap<String, KeyStats>,
    recent: VecDeque<SeenRequest>,
    total: u64,
    model_lists: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

const RECENT: usize = 512;

impl Stats {
    /// Count a request as it begins; whether it is an inference request (counted in `total`,
    /// its key's attempts and concurrency: what a test or the drill calls upstream attempts),
    /// else a model list, counted apart.
    pub fn begin(&self, seen: SeenRequest) -> (u64, bool) {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if seen.head.path().trim_end_matches('/').ends_with("/models") {
            g.model_lists += 1;
            let total = g.total;
            g.keys.entry(seen.key.clone()).or_default().model_lists += 1;
            return (total, false);
        }
        g.total += 1;
        let total = g.total;
        if !g.keys.contains_key(&seen.key) {
            g.keys.insert(seen.key.clone(), KeyStats::default());
        }
        let Some(k) = g.keys.get_mut(&seen.key) else {
            return (total, true);
        };
        k.attempts += 1;
        k.in_flight += 1;
        k.peak_concurrency = k.peak_concurrency.max(k.in_flight);
        if let Some(needs) = seen.head.get_str("x-drill-need") {
            let model = seen.model.clone().unwrap_or_default();
            let by_model = k.needs.entry(model).or_default();
            for need in needs.split(',').map(str::trim).filter(|n| !n.is_empty()) {
                *by_model.entry(need.to_string()).or_default() += 1;
            }
        }
        if g.recent.len() >= RECENT {
            g.recent.pop_front();
        }
        g.recent.push_back(seen);
        (total, true)
    }

    pub fn end(&self, key: &str, status: u16) {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(k) = g.keys.get_mut(key) {
            k.in_flight = k.in_flight.saturating_sub(1);
            *k.statuses.entry(status).or_default() += 1;
        }
    }

    pub fn reset(&self) {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        *g = Inner::default();
    }

    pub fn to_json(&self) -> serde_json::Value {
        let g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        serde_json::json!({"total": g.total, "model_lists": g.model_lists, "keys": g.keys})
    }

    pub fn recent_json(&self) -> serde_json::Value {
        let g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let requests: Vec<serde_json::Value> = g.recent.iter().map(SeenRequest::to_json).collect();
        serde_json::json!({"requests": requests})
    }
}

/// Ends a request's in-flight count when dropped, whatever path the handler took.
pub struct InFlight<'a> {
    pub stats: &'a Stats,
    pub key: String,
    pub status: u16,
    /// Counted as an inference request (`Stats::begin`).
    pub counted: bool,
}

impl<'a> InFlight<'a> {
    pub fn new(stats: &'a Stats, key: String, counted: bool) -> Self {
        InFlight {
            stats,
            key,
            status: 0,
            counted,
        }
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if self.counted {
            self.stats.end(&self.key, self.status);
        }
    }
}
