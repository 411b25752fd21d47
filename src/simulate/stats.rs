//! What the simulator saw: attempts and peak concurrency per key, and the last requests.

use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;

#[derive(Clone, Debug, Default, Serialize)]
pub struct KeyStats {
    pub attempts: u64,
    pub in_flight: u64,
    pub peak_concurrency: u64,
    pub statuses: BTreeMap<String, u64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct SeenRequest {
    pub method: String,
    pub path: String,
    pub key: String,
    pub model: Option<String>,
    pub headers: Vec<(String, String)>,
    pub body_bytes: usize,
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
}

const RECENT: usize = 512;

impl Stats {
    pub fn begin(&self, seen: SeenRequest) -> u64 {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        g.total += 1;
        let total = g.total;
        let k = g.keys.entry(seen.key.clone()).or_default();
        k.attempts += 1;
        k.in_flight += 1;
        k.peak_concurrency = k.peak_concurrency.max(k.in_flight);
        if g.recent.len() >= RECENT {
            g.recent.pop_front();
        }
        g.recent.push_back(seen);
        total
    }

    pub fn end(&self, key: &str, status: u16) {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(k) = g.keys.get_mut(key) {
            k.in_flight = k.in_flight.saturating_sub(1);
            *k.statuses.entry(status.to_string()).or_default() += 1;
        }
    }

    pub fn reset(&self) {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        *g = Inner::default();
    }

    pub fn to_json(&self) -> serde_json::Value {
        let g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        serde_json::json!({"total": g.total, "keys": g.keys})
    }

    pub fn recent_json(&self) -> serde_json::Value {
        let g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        serde_json::json!({"requests": g.recent})
    }
}

/// Ends a request's in-flight count when dropped, whatever path the handler took.
pub struct InFlight<'a> {
    pub stats: &'a Stats,
    pub key: String,
    pub status: u16,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.stats.end(&self.key, self.status);
    }
}
