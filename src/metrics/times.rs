//! The duration histograms (seconds) and token counters: per route and per connection, each
//! core writing its own, summed on a scrape.

use super::{CoreMetrics, escape};
use crate::audit::Tokens;
use crate::histogram::{Histogram, Merged};
use std::fmt::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// How a request ended, as the duration histogram's `outcome` label says it (a few values, so
/// that a dashboard can tell slow successes from slow failures without the access log).
pub const OUTCOMES: [&str; 5] = ["ok", "rejected", "upstream_error", "failed", "client_gone"];

/// The `outcome` label's place for a request's outcome.
pub fn outcome_index(o: crate::audit::Outcome) -> usize {
    use crate::audit::Outcome as O;
    match o {
        O::Ok | O::Replayed => 0,
        O::Rejected => 1,
        O::PassedThrough => 2,
        O::Failed | O::FailedAfterCommit | O::Shutdown => 3,
        O::ClientGone | O::Unset => 4,
    }
}

#[derive(Debug, Default)]
pub(super) struct RouteTimes {
    /// By outcome (`OUTCOMES`).
    pub duration: [Histogram; OUTCOMES.len()],
    pub overhead: Histogram,
    pub ttft: Histogram,
}

#[derive(Debug, Default)]
pub(super) struct ConnTimes {
    pub head: Histogram,
    pub attempt: Histogram,
    /// Prompt, completion and cached prompt tokens.
    tokens: [AtomicU64; 3],
}

const TOKEN_KINDS: [&str; 3] = ["prompt", "completion", "cached"];

impl ConnTimes {
    pub fn add_tokens(&self, t: &Tokens) {
        for (i, n) in [t.prompt, t.completion, t.cached].into_iter().enumerate() {
            if let Some(n) = n.filter(|&n| n > 0) {
                self.tokens[i].fetch_add(u64::from(n), Relaxed);
            }
        }
    }

    pub fn clear(&self) {
        self.head.clear();
        self.attempt.clear();
        for t in &self.tokens {
            t.store(0, Relaxed);
        }
    }
}

/// Route labels with the route indices each stands for, in first-seen order: a model's
/// provider-pinned routes (`openai/gpt-4o`) count under the model's label (`gpt-4o`), so the
/// label's values are the config's routes and models, each once. Indices the running config
/// does not use (an empty label) are left out.
pub(super) fn route_groups(route_labels: &[String]) -> Vec<(&str, Vec<usize>)> {
    let mut groups: Vec<(&str, Vec<usize>)> = Vec::new();
    for (i, label) in route_labels.iter().enumerate() {
        if label.is_empty() {
            continue;
        }
        match groups.iter_mut().find(|(l, _)| *l == label.as_str()) {
            Some((_, indices)) => indices.push(i),
            None => groups.push((label, vec![i])),
        }
    }
    groups
}

/// A histogram family: its name, its help, and where each part keeps it.
type Family<T> = (&'static str, &'static str, fn(&T) -> &Histogram);

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// `ringside_request_duration_seconds` by route and outcome (a series once it has a request).
fn durations(out: &mut String, cores: &[Arc<CoreMetrics>], routes: &[(Vec<usize>, String)]) {
    let name = "ringside_request_duration_seconds";
    header(
        out,
        name,
        "histogram",
        "Client requests from head to last byte (streams: to their end), by route and outcome.",
    );
    for (indices, labels) in routes {
        for (o, outcome) in OUTCOMES.iter().enumerate() {
            let parts = indices
                .iter()
                .flat_map(|i| cores.iter().filter_map(|c| c.route_times.get(*i)));
            let m = Merged::of(parts.map(|t| &t.duration[o]));
            if m.count() > 0 {
                m.write(out, name, &format!("{labels},outcome=\"{outcome}\""));
            }
        }
    }
}

pub(super) fn render(
    out: &mut String,
    cores: &[Arc<CoreMetrics>],
    route_labels: &[String],
    conn_labels: &[(String, String)],
) {
    let routes: Vec<(Vec<usize>, String)> = route_groups(route_labels)
        .into_iter()
        .map(|(r, i)| (i, format!("route=\"{}\"", escape(r))))
        .collect();
    durations(out, cores, &routes);
    let route_families: [Family<RouteTimes>; 2] = [
        (
            "ringside_overhead_seconds",
            "Ringside's own time per request: its duration minus the time upstream attempts took and deliberate waits (queue, retry backoff), by route.",
            |t| &t.overhead,
        ),
        (
            "ringside_time_to_first_token_seconds",
            "Streams: from the request's head to the first useful event (text, tool call or reasoning), by route.",
            |t| &t.ttft,
        ),
    ];
    for (name, help, pick) in route_families {
        header(out, name, "histogram", help);
        for (indices, labels) in &routes {
            let parts = indices
                .iter()
                .flat_map(|i| cores.iter().filter_map(|c| c.route_times.get(*i)));
            Merged::of(parts.map(pick)).write(out, name, labels);
        }
    }
    let conns: Vec<(usize, String)> = (conn_labels.iter().enumerate())
        .filter(|(_, (p, _))| !p.is_empty())
        .map(|(i, (p, c))| {
            (
                i,
                format!("provider=\"{}\",connection=\"{}\"", escape(p), escape(c)),
            )
        })
        .collect();
    let conn_families: [Family<ConnTimes>; 2] = [
        (
            "ringside_upstream_head_seconds",
            "From sending an upstream attempt to its response head, for answers delivered to the client, by connection.",
            |t| &t.head,
        ),
        (
            "ringside_upstream_attempt_duration_seconds",
            "Upstream attempts from send to end (failed ones included), by connection.",
            |t| &t.attempt,
        ),
    ];
    for (name, help, pick) in conn_families {
        header(out, name, "histogram", help);
        for (i, labels) in &conns {
            let m = Merged::of(cores.iter().filter_map(|c| c.conn_times.get(*i)).map(pick));
            m.write(out, name, labels);
        }
    }
    header(
        out,
        "ringside_tokens_total",
        "counter",
        "Tokens the upstream reported in usage (JSON answers and streams), by connection and kind (cached: prompt tokens served from the provider's cache, also counted in prompt).",
    );
    for (i, labels) in &conns {
        for (k, kind) in TOKEN_KINDS.iter().enumerate() {
            let n: u64 = (cores.iter())
                .filter_map(|c| c.conn_times.get(*i))
                .map(|t| t.tokens[k].load(Relaxed))
                .sum();
            let _ = writeln!(out, "ringside_tokens_total{{{labels},kind=\"{kind}\"}} {n}");
        }
    }
}
