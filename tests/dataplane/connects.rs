//! A burst of new upstream connections waits its turns rather than fill the server's accept
//! queue (`upstream::connect_gate`), end to end on both drivers: a dozen streams at once to a
//! provider over HTTP/1.1 and TLS, whose front holds each new connection 300 ms before its
//! handshake, as a busy server's accept queue does.

use super::h2::{count, metric_sum, sim_opts, streams_at_once};
use crate::both_drivers;
use crate::common::sim_tls::SimTls;
use crate::common::*;
use ringside::simulate::front::H2Faults;

both_drivers!(
    a_burst_of_connects_takes_turns,
    without_a_window_a_burst_connects_at_once,
    waiters_behind_connects_that_time_out_give_up,
);

const BURST: usize = 12;

/// The front's most connections at once between accept and handshake, and the metrics, after
/// a burst of `BURST` streams through a proxy with `connects_in_flight = most`.
fn burst(driver: &str, most: u32) -> (u64, String) {
    let (sim, config) = front_holding(300, &format!("connects_in_flight = {most}"));
    // One core: its window is the whole process's.
    let proxy = Proxy::start(driver, 1, "# access log to file", &config);
    assert_eq!(streams_at_once(&proxy, BURST), BURST, "every stream whole");
    let front = sim.front();
    assert_eq!(
        count(&front, "connections_http1"),
        BURST as u64,
        "one connection a stream: {front}"
    );
    (count(&front, "peak_handshaking"), proxy.metrics())
}

fn a_burst_of_connects_takes_turns(driver: &str) {
    let (peak, metrics) = burst(driver, 3);
    // Three under way, and at the front perhaps as many more finishing: a client's handshake
    // is done (its turn given back) when it sends its Finished, the server's when it reads it.
    assert!(peak <= 6, "three under way at once, saw {peak} handshaking");
    let waits = metric_sum(&metrics, "ringside_upstream_connect_waits_total", &[]);
    // Twelve arrive within a few milliseconds and the first three hold their turns 300 ms.
    assert!(waits >= 6.0, "{waits} waited: {metrics}");
}

/// The check above can fail: with no window the same burst is handshaking all at once.
fn without_a_window_a_burst_connects_at_once(driver: &str) {
    let (peak, metrics) = burst(driver, 0);
    assert!(peak > 6, "all at once, saw {peak} handshaking");
    let waits = metric_sum(&metrics, "ringside_upstream_connect_waits_total", &[]);
    assert_eq!(waits, 0.0, "{metrics}");
}

/// The simulator's TLS front holding each new connection `hold_ms` before its handshake, and
/// a config reaching it over HTTP/1.1 with `upstream` added to its `[upstream]`.
fn front_holding(hold_ms: u64, upstream: &str) -> (SimTls, String) {
    let faults = H2Faults {
        slow_handshake_ms: hold_ms,
        ..Default::default()
    };
    let sim = SimTls::start(sim_opts(3, 0), false, faults);
    let config =
        sim.config("never", "m")
            .replacen("[upstream]\n", &format!("[upstream]\n{upstream}\n"), 1);
    (sim, config)
}

/// A server that takes connects and never handshakes (held past the connect timeout): the
/// connects under way time out, and the requests queued behind them give up once they have
/// waited as long, rather than each wait its turn to time out in its own right.
fn waiters_behind_connects_that_time_out_give_up(driver: &str) {
    let upstream = "connects_in_flight = 1\nconnect_timeout_ms = 400\nmax_attempts = 1";
    let (sim, config) = front_holding(3_000, upstream);
    // One attempt each, and no breaker (whose prober would connect too): each request's one
    // connect is what the front counts.
    let config = config + "  [providers.breaker]\n  open_at = 1000\n";
    let proxy = Proxy::start(driver, 1, "# access log to file", &config);
    assert_eq!(streams_at_once(&proxy, 6), 0, "no stream can be served");
    let accepted = count(&sim.front(), "accepted");
    let m = proxy.metrics();
    let timeouts = metric_sum(
        &m,
        "ringside_upstream_attempts_total",
        &["outcome=\"connect_timeout\""],
    );
    // The first connect times out at 400 ms and its turn goes to the second; the four behind
    // have waited as long by then, and end there. Waiting their turns instead, each would
    // have reached the front.
    assert_eq!(timeouts, 6.0, "{m}");
    assert!(accepted <= 3, "{accepted} connects reached the front: {m}");
}
