//! What Ringside's admin API showed while a scenario ran, sampled four times a second:
//! connection states (active, model_locked, cooling, banned, …) and every connection's queue against its
//! caps. The samples make the report's state timeline and the queue figures: the deepest each
//! queue got against its `max_queue_depth`, and what waited, how long on average and how many
//! were refused, against its `max_wait_ms`.

use serde::Serialize;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// How often the admin API is read.
const EVERY: Duration = Duration::from_millis(250);

/// One reading.
#[derive(Clone, Debug, Default)]
pub struct Sample {
    /// From the scenario's start.
    pub at: Duration,
    /// Connections by state.
    pub states: BTreeMap<String, u32>,
    /// Per connection (`provider/connection`): queued now, and the cumulative counters.
    pub queues: BTreeMap<String, QueueNow>,
}

#[derive(Clone, Debug, Default)]
pub struct QueueNow {
    pub queued: u64,
    pub depth_cap: u64,
    pub max_wait_ms: u64,
    pub waited: u64,
    pub wait_ms_total: u64,
    pub refused: u64,
}

/// One connection's queue over a scenario.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct QueueFigures {
    pub connection: String,
    /// The most requests seen waiting at once (sampled).
    pub peak_queued: u64,
    /// Its `max_queue_depth` (0: unbounded).
    pub depth_cap: u64,
    /// Starts that waited during the scenario, and their mean wait.
    pub waited: u64,
    pub mean_wait_ms: u64,
    pub max_wait_ms: u64,
    /// Refused for a full queue, a wait past its cap, saturation or cancellation.
    pub refused: u64,
}

/// A second of the state timeline: connections by state, requests queued (at the second's
/// last sample).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct StateSecond {
    pub second: u32,
    pub states: BTreeMap<String, u32>,
    pub queued: u64,
}

/// Read the admin API every [`EVERY`] until `until`.
pub fn sample(
    admin: SocketAddr,
    token: &str,
    t0: Instant,
    until: &super::traffic::Until,
) -> Vec<Sample> {
    let mut out = Vec::new();
    while super::traffic::before(t0, until) {
        let at = t0.elapsed();
        if let Some(s) = read(admin, token, at) {
            out.push(s);
        }
        std::thread::sleep(EVERY);
    }
    out
}

fn read(admin: SocketAddr, token: &str, at: Duration) -> Option<Sample> {
    let conns = super::call(admin, "GET", "/admin/connections", "", Some(token)).ok()?;
    let queues = super::call(admin, "GET", "/admin/queues", "", Some(token)).ok()?;
    let mut s = Sample {
        at,
        ..Sample::default()
    };
    for c in conns["connections"].as_array().into_iter().flatten() {
        let locked = c["locked_models"].as_array().is_some_and(|l| !l.is_empty());
        let state = match c["state"].as_str().unwrap_or("unknown") {
            // Serving, but not every model: a rate limit locked one.
            "active" if locked => "model_locked".to_string(),
            s => s.to_string(),
        };
        *s.states.entry(state).or_default() += 1;
    }
    let n = |v: &serde_json::Value| v.as_u64().unwrap_or(0);
    for q in queues["queues"].as_array().into_iter().flatten() {
        let label = format!(
            "{}/{}",
            q["provider"].as_str().unwrap_or_default(),
            q["connection"].as_str().unwrap_or_default()
        );
        let r = &q["rejected"];
        let refused = ["queue_full", "saturated", "queue_timeout", "cancelled"]
            .iter()
            .map(|k| n(&r[*k]))
            .sum();
        let setting = |k: &str| {
            let v = &q["settings"][k];
            n(v.get("value").unwrap_or(v))
        };
        s.queues.insert(
            label,
            QueueNow {
                queued: n(&q["queued"]),
                depth_cap: setting("max_queue_depth"),
                max_wait_ms: setting("max_wait_ms"),
                waited: n(&q["waited"]),
                wait_ms_total: n(&q["wait_ms_total"]),
                refused,
            },
        );
    }
    Some(s)
}

/// Each connection's queue over the samples (those that queued or refused anything).
pub fn queue_figures(samples: &[Sample]) -> Vec<QueueFigures> {
    let (Some(first), Some(last)) = (samples.first(), samples.last()) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (label, end) in &last.queues {
        let start = first.queues.get(label).cloned().unwrap_or_default();
        let peak = samples
            .iter()
            .filter_map(|s| s.queues.get(label).map(|q| q.queued))
            .max()
            .unwrap_or(0);
        let waited = end.waited.saturating_sub(start.waited);
        let refused = end.refused.saturating_sub(start.refused);
        if peak == 0 && waited == 0 && refused == 0 {
            continue;
        }
        out.push(QueueFigures {
            connection: label.clone(),
            peak_queued: peak,
            depth_cap: end.depth_cap,
            waited,
            mean_wait_ms: end.wait_ms_total.saturating_sub(start.wait_ms_total) / waited.max(1),
            max_wait_ms: end.max_wait_ms,
            refused,
        });
    }
    out
}

/// The state timeline: per second, the last sample in it.
pub fn states(samples: &[Sample]) -> Vec<StateSecond> {
    let mut by: BTreeMap<u32, StateSecond> = BTreeMap::new();
    for s in samples {
        let second = s.at.as_secs() as u32;
        by.insert(
            second,
            StateSecond {
                second,
                states: s.states.clone(),
                queued: s.queues.values().map(|q| q.queued).sum(),
            },
        );
    }
    by.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64, state: &str, queued: u64, waited: u64, wait_ms: u64, refused: u64) -> Sample {
        let mut s = Sample {
            at: Duration::from_millis(ms),
            ..Sample::default()
        };
        s.states.insert(state.into(), 2);
        s.queues.insert(
            "p/k".into(),
            QueueNow {
                queued,
                depth_cap: 4,
                max_wait_ms: 1000,
                waited,
                wait_ms_total: wait_ms,
                refused,
            },
        );
        s
    }

    #[test]
    fn queues_are_measured_from_the_first_sample_to_the_last() {
        let all = [
            at(0, "active", 0, 10, 100, 0),
            at(600, "cooling", 3, 12, 300, 1),
            at(1_200, "active", 1, 14, 700, 2),
        ];
        let q = queue_figures(&all);
        assert_eq!(
            q,
            vec![QueueFigures {
                connection: "p/k".into(),
                peak_queued: 3,
                depth_cap: 4,
                waited: 4,
                mean_wait_ms: 150,
                max_wait_ms: 1000,
                refused: 2,
            }]
        );
        let t = states(&all);
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].states.get("cooling"), Some(&2));
        assert_eq!((t[1].second, t[1].queued), (1, 1));
    }
}
