//! The last quarter hour of traffic for the status page's charts: every few seconds the admin
//! thread sums the cores' counters and duration histograms; `GET /admin/stats` answers each
//! interval's request rate, failure rate and latency percentiles (from the interval's own
//! histogram, so a slow minute long ago does not colour the latest point).

use crate::histogram::Merged;
use crate::state::core::Shared;
use serde_json::{Value, json};
use std::collections::VecDeque;

/// How often a sample is taken, and how many are kept (15 minutes).
pub const EVERY_MS: u64 = 2_000;
const KEEP: usize = 450;

struct Sample {
    at_unix_ms: u64,
    requests: u64,
    failed: u64,
    durations: Merged,
}

#[derive(Default)]
pub struct History {
    samples: VecDeque<Sample>,
}

impl History {
    /// Take a sample now.
    pub fn sample(&mut self, shared: &Shared) {
        let (mut requests, mut failed) = (0, 0);
        for c in &shared.metrics {
            let (r, f) = c.totals();
            requests += r;
            failed += f;
        }
        let durations = Merged::of(shared.metrics.iter().flat_map(|c| c.durations()));
        if self.samples.len() == KEEP {
            self.samples.pop_front();
        }
        self.samples.push_back(Sample {
            at_unix_ms: crate::clock::unix_ms(),
            requests,
            failed,
            durations,
        });
    }

    /// `GET /admin/stats`: one point per interval, oldest first.
    pub fn view(&self) -> Value {
        let s = &self.samples;
        let points: Vec<Value> = s
            .iter()
            .zip(s.iter().skip(1))
            .map(|(a, b)| {
                let secs = (b.at_unix_ms.saturating_sub(a.at_unix_ms)).max(1) as f64 / 1e3;
                let n = b.requests.saturating_sub(a.requests);
                let failed = b.failed.saturating_sub(a.failed);
                let mut d = b.durations.clone();
                for (x, y) in d.counts.iter_mut().zip(a.durations.counts.iter()) {
                    *x = x.saturating_sub(*y);
                }
                json!({
                    "at_ms": b.at_unix_ms,
                    "requests_per_s": n as f64 / secs,
                    "failure_ratio": if n == 0 { 0.0 } else { failed as f64 / n as f64 },
                    "p50_s": d.quantile(0.5),
                    "p99_s": d.quantile(0.99),
                })
            })
            .collect();
        json!({"interval_ms": EVERY_MS, "points": points})
    }
}
