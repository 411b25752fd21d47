//! The upstream side's process-wide figures: how many attempts each request made, how the TLS
//! handshakes with upstreams went, and the HTTP/2 connections open.

use super::CoreMetrics;
use std::fmt::Write;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;

/// `ringside_upstream_attempts_per_request`: a histogram of upstream attempts per client
/// request (how much Ringside's retries, and a client's, multiply the upstream's load).
pub(super) fn amplification(out: &mut String, cores: &[std::sync::Arc<CoreMetrics>]) {
    out.push_str("# HELP ringside_upstream_attempts_per_request Upstream attempts made per client request.\n# TYPE ringside_upstream_attempts_per_request histogram\n");
    let counts: Vec<u64> = (0..5)
        .map(|i| {
            cores
                .iter()
                .map(|c| c.attempts_per_request[i].load(Relaxed))
                .sum()
        })
        .collect();
    let mut cumulative = 0;
    for (le, n) in counts.iter().take(4).enumerate() {
        cumulative += n;
        let _ = writeln!(
            out,
            "ringside_upstream_attempts_per_request_bucket{{le=\"{le}\"}} {cumulative}"
        );
    }
    let total: u64 = counts.iter().sum();
    let _ = writeln!(
        out,
        "ringside_upstream_attempts_per_request_bucket{{le=\"+Inf\"}} {total}"
    );
    // The sum counts a request of 4 or more as 4: the exact total is in
    // `ringside_upstream_attempts_total`.
    let sum: u64 = counts.iter().enumerate().map(|(i, n)| i as u64 * n).sum();
    let _ = writeln!(out, "ringside_upstream_attempts_per_request_sum {sum}");
    let _ = writeln!(out, "ringside_upstream_attempts_per_request_count {total}");
}

/// `ringside_upstream_connect_waits_total`: new connections that waited for a turn
/// (`upstream::connect_gate`); `ringside_upstream_tls_handshakes_total{kind}`: full, or
/// resuming an earlier session (`upstream::tls_sessions`);
/// `ringside_upstream_tls_ticket_waits_total{outcome}`; and
/// `ringside_client_tls_handshakes_total{result}`.
pub(super) fn connections(out: &mut String, cores: &[std::sync::Arc<CoreMetrics>]) {
    let n: u64 = cores.iter().map(|c| c.connect_waits.load(Relaxed)).sum();
    out.push_str("# HELP ringside_upstream_connect_waits_total New upstream connections that waited for a turn: a core keeps at most [upstream] connects_in_flight connects under way to one server.\n# TYPE ringside_upstream_connect_waits_total counter\n");
    let _ = writeln!(out, "ringside_upstream_connect_waits_total {n}");
    pair(
        out,
        cores,
        (
            "ringside_upstream_tls_handshakes_total",
            "kind",
            ["full", "resumed"],
        ),
        "TLS handshakes with upstreams, full or resuming an earlier session.",
        |c| &c.tls_handshakes,
    );
    pair(
        out,
        cores,
        (
            "ringside_upstream_tls_ticket_waits_total",
            "outcome",
            ["ticket", "none"],
        ),
        "New upstream connections in a burst that waited for a TLS session ticket a handshake under way was to bring: one came, or none did and they handshook in full.",
        |c| &c.tls_ticket_waits,
    );
    pair(
        out,
        cores,
        (
            "ringside_client_tls_handshakes_total",
            "result",
            ["ok", "failed"],
        ),
        "TLS handshakes with clients on the data port ([server] tls_cert_file), done or failed (a bad hello, a timeout).",
        |c| &c.client_tls,
    );
}

/// A counter with one label of two values, each summed over the cores' `counts`.
fn pair(
    out: &mut String,
    cores: &[std::sync::Arc<CoreMetrics>],
    (name, label, values): (&str, &str, [&str; 2]),
    help: &str,
    counts: impl Fn(&CoreMetrics) -> &[std::sync::atomic::AtomicU64; 2],
) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
    for (i, value) in values.iter().enumerate() {
        let n: u64 = cores.iter().map(|c| counts(c)[i].load(Relaxed)).sum();
        let _ = writeln!(out, "{name}{{{label}=\"{value}\"}} {n}");
    }
}

/// A core's HTTP/2 connections to upstreams, set on its tick.
#[derive(Default)]
pub struct H2Figures {
    /// Connections open, and streams open on them.
    pub open: [AtomicU64; 2],
    /// GOAWAYs received since start, by [`GOAWAY_KINDS`].
    pub goaways: [AtomicU64; 3],
    /// Requests that waited for room on a provider's connections (`h2::room`): and found it, or
    /// found none within the connect timeout.
    pub room_waits: [AtomicU64; 2],
    /// A provider set to HTTP/2 where offered is reached over HTTP/1.1 on this core
    /// (`H2Pool::any_http1`): its streams take two descriptors each.
    pub http1: std::sync::atomic::AtomicBool,
}

/// How a provider's server sent a connection away: gracefully (`NO_ERROR`), for too many
/// PINGs (`ENHANCE_YOUR_CALM`, `too_many_pings`), or with another error.
pub const GOAWAY_KINDS: [&str; 3] = ["graceful", "too_many_pings", "error"];

/// `ringside_upstream_h2_connections` and `ringside_upstream_h2_streams`: HTTP/2 connections to
/// upstreams open now, and the streams open on them; `ringside_upstream_h2_goaways_total{kind}`.
pub(super) fn h2(out: &mut String, cores: &[std::sync::Arc<CoreMetrics>]) {
    let _ = writeln!(
        out,
        "# HELP ringside_upstream_h2_goaways_total GOAWAYs from upstreams' servers: graceful, for too many PINGs, or with another error (a warn line says which).\n\
         # TYPE ringside_upstream_h2_goaways_total counter"
    );
    for (i, kind) in GOAWAY_KINDS.iter().enumerate() {
        let n: u64 = cores.iter().map(|c| c.h2.goaways[i].load(Relaxed)).sum();
        let _ = writeln!(
            out,
            "ringside_upstream_h2_goaways_total{{kind=\"{kind}\"}} {n}"
        );
    }
    pair(
        out,
        cores,
        (
            "ringside_upstream_h2_room_waits_total",
            "outcome",
            ["room", "none"],
        ),
        "Requests that waited for room on a provider's HTTP/2 connections (its servers took no more streams, or the core held its most connections to it): found room, or none within the connect timeout.",
        |c| &c.h2.room_waits,
    );
    let sum = |i: usize| -> u64 { cores.iter().map(|c| c.h2.open[i].load(Relaxed)).sum() };
    let _ = writeln!(
        out,
        "# HELP ringside_upstream_h2_connections HTTP/2 connections to upstreams open.\n\
         # TYPE ringside_upstream_h2_connections gauge\nringside_upstream_h2_connections {}\n\
         # HELP ringside_upstream_h2_streams Streams open on HTTP/2 connections to upstreams.\n\
         # TYPE ringside_upstream_h2_streams gauge\nringside_upstream_h2_streams {}",
        sum(0),
        sum(1)
    );
}
