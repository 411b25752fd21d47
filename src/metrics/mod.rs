//! Per-core counters. Each core writes only its own block (relaxed atomics, no contention);
//! the admin port sums the blocks when scraped.

mod process;
mod times;
mod upstream;

use crate::audit::AttemptOutcome;
use crate::ids::ConnId;
use std::fmt::Write;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};

/// Connection tasks (client and admin) that panicked and were ended alone, process-wide
/// (see `runtime::contain`). Anything above zero is a bug worth a report.
pub static TASK_PANICS: AtomicU64 = AtomicU64::new(0);

/// Statuses we count individually; anything else lands in `other`.
pub const STATUSES: [u16; 22] = [
    200, 201, 400, 401, 402, 403, 404, 405, 408, 409, 413, 415, 422, 429, 431, 499, 500, 501, 502,
    503, 504, 529,
];

/// Outcomes of one upstream attempt.
fn status_index(status: u16) -> usize {
    STATUSES
        .iter()
        .position(|s| *s == status)
        .unwrap_or(STATUSES.len())
}

fn counters(n: usize) -> Vec<AtomicU64> {
    (0..n).map(|_| AtomicU64::new(0)).collect()
}

/// Fleet mode's link to Redis (all zero when fleet mode is off).
#[derive(Debug, Default)]
pub struct FleetCounters {
    pub enabled: std::sync::atomic::AtomicBool,
    /// Both the publishing and the subscribing connection are up.
    pub connected: std::sync::atomic::AtomicBool,
    /// Facts this instance sent, and facts from others applied here.
    pub published: AtomicU64,
    pub received: AtomicU64,
    /// Facts from others naming a connection or provider this instance does not have.
    pub unknown: AtomicU64,
    /// Times a connection to Redis was lost or could not be made.
    pub disconnects: AtomicU64,
    /// Facts learned while Redis was away, sent when it came back.
    pub republished: AtomicU64,
    /// What was read from Redis and ignored, by `fleet::signed::Refused` (unsigned, bad
    /// signature, stale, replayed, invalid).
    pub refused: [AtomicU64; 5],
}

pub struct CoreMetrics {
    routes: usize,
    connections: usize,
    requests: Vec<AtomicU64>,
    attempts: Vec<AtomicU64>,
    pub in_flight: AtomicI64,
    pub open_client_conns: AtomicI64,
    pub uring: AtomicI64,
    /// How late the core's tick wakes, smoothed (`core_load`), in microseconds.
    pub loop_lag_us: AtomicU64,
    /// 1 while the core counts as busy (`core_load`): `coalesce_events = "auto"` joins events.
    pub busy: AtomicI64,
    /// The share of the last second the core waited for a CPU (`core_load::cpu_wait`), ‰.
    pub cpu_wait_permille: AtomicU64,
    /// Standing polls the core holds (`http::standing`): one per held event stream on io_uring.
    pub standing_polls: AtomicI64,
    pub streams_failed_after_commit: AtomicU64,
    pub log_lines_dropped: AtomicU64,
    /// Requests whose finalisation (permits, record, metrics, log) ran.
    pub finalized: AtomicU64,
    /// Client requests by how many upstream attempts they made: 0, 1, 2, 3, 4 or more.
    pub attempts_per_request: [AtomicU64; 5],
    /// TLS handshakes with upstreams: full, resumed; connects of a burst that waited for a
    /// ticket (`upstream::tls_sessions`): one came, or none did.
    pub tls_handshakes: [AtomicU64; 2],
    pub tls_ticket_waits: [AtomicU64; 2],
    /// New upstream connections that waited for a turn to connect (`upstream::connect_gate`).
    pub connect_waits: AtomicU64,
    /// TLS handshakes with clients on the data port: done, failed (or timed out).
    pub client_tls: [AtomicU64; 2],
    /// HTTP/2 to upstreams, as of the core's last tick (`upstream::H2Figures`).
    pub h2: upstream::H2Figures,
    /// Per route: how long requests took, Ringside's own share, time to first token.
    route_times: Vec<times::RouteTimes>,
    /// Per connection: time to the upstream's response head, attempt durations, tokens.
    conn_times: Vec<times::ConnTimes>,
}

impl CoreMetrics {
    pub fn new(routes: usize, connections: usize) -> Self {
        CoreMetrics {
            routes,
            connections,
            requests: counters(routes * (STATUSES.len() + 1)),
            attempts: counters(connections * AttemptOutcome::ALL.len()),
            in_flight: AtomicI64::new(0),
            open_client_conns: AtomicI64::new(0),
            uring: AtomicI64::new(-1),
            loop_lag_us: AtomicU64::new(0),
            busy: AtomicI64::new(0),
            cpu_wait_permille: AtomicU64::new(0),
            standing_polls: AtomicI64::new(0),
            streams_failed_after_commit: AtomicU64::new(0),
            log_lines_dropped: AtomicU64::new(0),
            finalized: AtomicU64::new(0),
            attempts_per_request: Default::default(),
            tls_handshakes: Default::default(),
            tls_ticket_waits: Default::default(),
            connect_waits: AtomicU64::new(0),
            client_tls: Default::default(),
            h2: Default::default(),
            route_times: (0..routes).map(|_| Default::default()).collect(),
            conn_times: (0..connections).map(|_| Default::default()).collect(),
        }
    }

    /// A request ended: its duration, Ringside's own part of it and, for a stream, the time to
    /// its first useful event (microseconds; 0: none).
    pub fn request_times(
        &self,
        route: usize,
        outcome: crate::audit::Outcome,
        total_us: u64,
        own_us: u64,
        ttft_us: u64,
    ) {
        if let Some(t) = self.route_times.get(route) {
            t.duration[times::outcome_index(outcome)].observe_us(total_us);
            t.overhead.observe_us(own_us);
            if ttft_us > 0 {
                t.ttft.observe_us(ttft_us);
            }
        }
    }

    /// Upstream attempts on `connection` so far, and those that did not end `ok`.
    pub fn connection_attempts(&self, connection: ConnId) -> (u64, u64) {
        let n = AttemptOutcome::ALL.len();
        let start = connection.index() * n;
        let Some(row) = self.attempts.get(start..start + n) else {
            return (0, 0);
        };
        let all: u64 = row.iter().map(|c| c.load(Relaxed)).sum();
        let ok = row[AttemptOutcome::Ok.index()].load(Relaxed);
        (all, all - ok.min(all))
    }

    /// Requests ended so far, and those that failed (5xx or 429, or a stream that failed after
    /// its first byte: its status said 200), all routes together.
    pub fn totals(&self) -> (u64, u64) {
        let per_route = STATUSES.len() + 1;
        let mut all = 0;
        let mut failed = 0;
        for (i, c) in self.requests.iter().enumerate() {
            let n = c.load(Relaxed);
            all += n;
            let status = STATUSES.get(i % per_route).copied().unwrap_or(500);
            if status >= 500 || status == 429 {
                failed += n;
            }
        }
        (all, failed + self.streams_failed_after_commit.load(Relaxed))
    }

    /// Request durations, all routes together.
    pub fn durations(&self) -> impl Iterator<Item = &crate::histogram::Histogram> {
        self.route_times.iter().flat_map(|t| &t.duration)
    }

    /// An upstream attempt's response head arrived after `us` microseconds.
    pub fn upstream_head(&self, connection: ConnId, us: u64) {
        if let Some(t) = self.conn_times.get(connection.index()) {
            t.head.observe_us(us);
        }
    }

    /// An upstream attempt ended after `us` microseconds.
    pub fn attempt_time(&self, connection: ConnId, us: u64) {
        if let Some(t) = self.conn_times.get(connection.index()) {
            t.attempt.observe_us(us);
        }
    }

    /// The tokens an answer reported in its `usage`.
    pub fn tokens(&self, connection: ConnId, tokens: &crate::audit::Tokens) {
        if let Some(t) = self.conn_times.get(connection.index()) {
            t.add_tokens(tokens);
        }
    }

    /// A client request ended after `attempts` upstream attempts (amplification).
    pub fn attempts_made(&self, attempts: usize) {
        self.attempts_per_request[attempts.min(4)].fetch_add(1, Relaxed);
    }

    pub fn request(&self, route: usize, status: u16) {
        let r = route.min(self.routes.saturating_sub(1));
        if let Some(c) = self
            .requests
            .get(r * (STATUSES.len() + 1) + status_index(status))
        {
            c.fetch_add(1, Relaxed);
        }
    }

    /// A slot given to a new connection by a reload starts its counters at zero.
    pub fn reset_connection(&self, connection: ConnId) {
        let n = AttemptOutcome::ALL.len();
        for c in self.attempts.iter().skip(connection.index() * n).take(n) {
            c.store(0, Relaxed);
        }
        if let Some(t) = self.conn_times.get(connection.index()) {
            t.clear();
        }
    }

    pub fn attempt(&self, connection: ConnId, outcome: AttemptOutcome) {
        let connection = connection.index();
        if connection < self.connections
            && let Some(c) = self
                .attempts
                .get(connection * AttemptOutcome::ALL.len() + outcome.index())
        {
            c.fetch_add(1, Relaxed);
        }
    }
}

/// Render all cores' counters in the Prometheus text format.
pub fn render(
    cores: &[std::sync::Arc<CoreMetrics>],
    route_labels: &[String],
    conn_labels: &[(String, String)],
) -> String {
    let mut out = String::with_capacity(4096);
    requests(&mut out, cores, route_labels);
    attempts(&mut out, cores, conn_labels);
    gauges(&mut out, cores);
    times::render(&mut out, cores, route_labels, conn_labels);
    process::render(&mut out, cores);
    out
}

/// `ringside_requests_total` by route and final status.
fn requests(out: &mut String, cores: &[std::sync::Arc<CoreMetrics>], route_labels: &[String]) {
    out.push_str("# HELP ringside_requests_total Client requests by route and final status.\n");
    out.push_str("# TYPE ringside_requests_total counter\n");
    for (route, indices) in times::route_groups(route_labels) {
        for si in 0..=STATUSES.len() {
            let n: u64 = (indices.iter())
                .flat_map(|ri| cores.iter().map(move |c| (ri, c)))
                .map(|(ri, c)| c.requests[ri * (STATUSES.len() + 1) + si].load(Relaxed))
                .sum();
            if n > 0 {
                let status = STATUSES
                    .get(si)
                    .map(|s| s.to_string())
                    .unwrap_or_else(|| "other".into());
                let _ = writeln!(
                    out,
                    "ringside_requests_total{{route=\"{}\",status=\"{status}\"}} {n}",
                    escape(route)
                );
            }
        }
    }
}

/// `ringside_upstream_attempts_total` by connection and outcome.
fn attempts(
    out: &mut String,
    cores: &[std::sync::Arc<CoreMetrics>],
    conn_labels: &[(String, String)],
) {
    out.push_str(
        "# HELP ringside_upstream_attempts_total Upstream attempts by connection and outcome.\n",
    );
    out.push_str("# TYPE ringside_upstream_attempts_total counter\n");
    for (ci, (provider, conn)) in conn_labels.iter().enumerate() {
        if provider.is_empty() {
            continue; // a slot the running config has no connection in
        }
        for (oi, outcome) in AttemptOutcome::ALL.iter().map(|o| o.as_str()).enumerate() {
            let n: u64 = cores
                .iter()
                .map(|c| c.attempts[ci * AttemptOutcome::ALL.len() + oi].load(Relaxed))
                .sum();
            if n > 0 {
                let _ = writeln!(
                    out,
                    "ringside_upstream_attempts_total{{provider=\"{}\",connection=\"{}\",outcome=\"{outcome}\"}} {n}",
                    escape(provider),
                    escape(conn)
                );
            }
        }
    }
}

/// The gauges and process-wide counters.
fn gauges(out: &mut String, cores: &[std::sync::Arc<CoreMetrics>]) {
    out.push_str("# HELP ringside_in_flight_requests Requests being handled now.\n# TYPE ringside_in_flight_requests gauge\n");
    let inflight: i64 = cores.iter().map(|c| c.in_flight.load(Relaxed)).sum();
    let _ = writeln!(out, "ringside_in_flight_requests {inflight}");
    per_core(
        out,
        cores,
        "ringside_open_client_connections",
        "Open client connections per core.",
        |c| c.open_client_conns.load(Relaxed) as f64,
    );
    out.push_str("# HELP ringside_driver The I/O driver each core runs (1 = in use).\n# TYPE ringside_driver gauge\n");
    for (i, c) in cores.iter().enumerate() {
        let d = match c.uring.load(Relaxed) {
            1 => "io_uring",
            0 => "epoll",
            _ => "starting",
        };
        let _ = writeln!(out, "ringside_driver{{core=\"{i}\",driver=\"{d}\"}} 1");
    }
    core_load(out, cores);
    out.push_str("# HELP ringside_streams_failed_after_commit_total Streams ended with an error event after the first client byte.\n# TYPE ringside_streams_failed_after_commit_total counter\n");
    let n: u64 = cores
        .iter()
        .map(|c| c.streams_failed_after_commit.load(Relaxed))
        .sum();
    let _ = writeln!(out, "ringside_streams_failed_after_commit_total {n}");
    upstream::connections(out, cores);
    upstream::h2(out, cores);
    let n: u64 = cores
        .iter()
        .map(|c| c.log_lines_dropped.load(Relaxed))
        .sum();
    out.push_str("# HELP ringside_access_log_dropped_total Access-log lines dropped because the writer fell behind.\n# TYPE ringside_access_log_dropped_total counter\n");
    let _ = writeln!(out, "ringside_access_log_dropped_total {n}");
    out.push_str("# HELP ringside_task_panics_total Connection tasks ended by a panic (a bug: each closed its connection only).\n# TYPE ringside_task_panics_total counter\n");
    let panics = TASK_PANICS.load(Relaxed);
    let _ = writeln!(out, "ringside_task_panics_total {panics}");
    let n: u64 = cores.iter().map(|c| c.finalized.load(Relaxed)).sum();
    out.push_str("# HELP ringside_requests_finalized_total Requests whose finalisation ran (exactly once each).\n# TYPE ringside_requests_finalized_total counter\n");
    let _ = writeln!(out, "ringside_requests_finalized_total {n}");
    upstream::amplification(out, cores);
}

/// Each core's loop lag and busy flag (`core_load`).
fn core_load(out: &mut String, cores: &[std::sync::Arc<CoreMetrics>]) {
    per_core(
        out,
        cores,
        "ringside_core_loop_lag_seconds",
        "How late each core's 50 ms tick wakes, smoothed: its event loop's delay.",
        |c| c.loop_lag_us.load(Relaxed) as f64 / 1e6,
    );
    per_core(
        out,
        cores,
        "ringside_core_busy",
        "1 while the core is busy: a quarter of its ticks in the last second woke late, or it waited for a CPU coalesce_busy_wait_percent of the last second (coalesce_events = \"auto\" then joins events).",
        |c| c.busy.load(Relaxed) as f64,
    );
    per_core(
        out,
        cores,
        "ringside_core_cpu_wait_ratio",
        "The share of the last second each core was ready to run but waited for a CPU (the kernel's run delay): how short of CPU the host is.",
        |c| c.cpu_wait_permille.load(Relaxed) as f64 / 1e3,
    );
    per_core(
        out,
        cores,
        "ringside_standing_polls",
        "Standing polls a core holds: one per held event stream's upstream on io_uring, freed when the stream ends (a count that only grows is a leak).",
        |c| c.standing_polls.load(Relaxed) as f64,
    );
}

/// One gauge with a value per core.
fn per_core(
    out: &mut String,
    cores: &[std::sync::Arc<CoreMetrics>],
    name: &str,
    help: &str,
    value: impl Fn(&CoreMetrics) -> f64,
) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
    for (i, c) in cores.iter().enumerate() {
        let _ = writeln!(out, "{name}{{core=\"{i}\"}} {}", value(c));
    }
}

pub fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
