//! HTTP/2 failures and a provider's keys, end to end on both drivers through the simulator's
//! TLS front: streams on a dropped connection go again on their key (its connection failed,
//! not the key), and a provider that speaks only HTTP/2 is probed over it while its breaker is
//! open; a provider whose servers take no streams gets one connection, not one per request.

use super::h2::{count, sim_opts, streams_at_once};
use crate::both_drivers;
use crate::common::sim_tls::SimTls;
use crate::common::*;
use ringside::simulate::front::H2Faults;
use std::time::Duration;

both_drivers!(
    a_provider_that_speaks_only_http2_is_probed_over_http2,
    streams_on_a_dropped_connection_go_again_on_their_key,
    a_server_that_takes_no_streams_gets_one_connection,
);

/// A provider whose servers speak HTTP/2 only (its front refuses an HTTP/1.1 handshake), with
/// `http2 = "always"` and with the default `auto`: both keys fail with 500s and the breaker
/// opens for 20 s. Once the provider answers again, the prober's model list, asked as a stream
/// on its HTTP/2 connections, finds it: served again long before the open time is over.
fn a_provider_that_speaks_only_http2_is_probed_over_http2(driver: &str) {
    for setting in ["always", "auto"] {
        probed_over_http2(driver, setting);
    }
}

fn probed_over_http2(driver: &str, setting: &str) {
    let sim = SimTls::start_offering(sim_opts(3, 0), (false, true), H2Faults::default());
    let breaker =
        "  [providers.breaker]\n  open_at = 2\n  open_ms = 20000\n  probe_interval_ms = 200\n";
    let body = sim.config(setting, "m") + breaker + "[resilience]\nmax_wait_ms = 0\n";
    let proxy = Proxy::start(driver, 1, "", &body);
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
    assert_eq!(r.status, 200, "{}", r.text());
    for key in ["sk-sim-a", "sk-sim-b"] {
        set_fault(sim.sim.addr, key, Some("500"));
    }
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
    assert!(r.status >= 500, "{}", r.text());
    let (_, b) = proxy.admin("GET", "/admin/breakers");
    assert_eq!(b["breakers"][0]["state"], "open", "{b}");
    for key in ["sk-sim-a", "sk-sim-b"] {
        set_fault(sim.sim.addr, key, None);
    }
    let began = std::time::Instant::now();
    let served = loop {
        let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
        if r.status == 200 || began.elapsed() > Duration::from_secs(8) {
            break r.status == 200;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        served,
        "{setting}: not served within 8 s of the provider's return"
    );
    assert_eq!(
        count(&sim.front(), "connections_http1"),
        0,
        "{setting}: {}",
        sim.front()
    );
}

/// Key a cools for 20 s (a 503 saying so); b carries everything, and its connection is dropped
/// under 16 streams. The key was not tried out, its connection was: each stream goes again on
/// b, on a new connection, rather than waiting out a's cooldown.
fn streams_on_a_dropped_connection_go_again_on_their_key(driver: &str) {
    let faults = H2Faults {
        drop_after: 15,
        ..Default::default()
    };
    let mut opts = sim_opts(20, 50);
    opts.faults.push(
        ringside::simulate::parse_fault_arg("key:sk-sim-a=503;retry-after=20").expect("fault"),
    );
    let sim = SimTls::start(opts, true, faults);
    // Only a's own 503 puts it on a timer: no breaker, and b's connection failure cools
    // nothing (as when a probe has lifted it), so that what b may do next is this rule's alone.
    let quiet = "  [providers.breaker]\n  open_at = 1000\n  [providers.cooldown]\n  base_ms = 0\n";
    let proxy = Proxy::start(driver, 1, "", &(sim.config("auto", "m") + quiet));
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
    assert_eq!(r.status, 200, "{}", r.text());
    let began = std::time::Instant::now();
    let whole = streams_at_once(&proxy, 16);
    assert_eq!(count(&sim.front(), "dropped"), 1, "{}", sim.front());
    assert_eq!(whole, 16, "every stream whole");
    assert!(
        began.elapsed() < Duration::from_secs(15),
        "not waiting out a's cooldown: {:?}",
        began.elapsed()
    );
}

/// A provider whose servers take no stream now (`SETTINGS_MAX_CONCURRENT_STREAMS` = 0): its
/// connection's limit is waited on, within the connect timeout, rather than answered with a
/// connection per request and per retry; each request ends with an error in its dialect.
fn a_server_that_takes_no_streams_gets_one_connection(driver: &str) {
    let sim = SimTls::start_taking(sim_opts(3, 0), 0);
    // Each wait for room short, and so each request's wait for its keys to cool.
    let config = sim.config("auto", "m").replacen(
        "[upstream]\n",
        "[resilience]\nmax_wait_ms = 500\n\n[upstream]\nconnect_timeout_ms = 300\n",
        1,
    );
    let proxy = Proxy::start(driver, 1, "", &config);
    for i in 0..6 {
        let r = proxy.post("/v1/chat/completions", &[], &chat("m", i % 2 == 0));
        assert!(r.status >= 500, "request {i}: {} {}", r.status, r.text());
        let body: serde_json::Value = serde_json::from_str(&r.text()).expect("a JSON error");
        assert!(body["error"]["message"].is_string(), "{body}");
    }
    let front = sim.front();
    assert_eq!(count(&front, "connections_h2"), 1, "{front}");
    assert_eq!(sim.attempts(), 0, "nothing reached the model");
    let m = proxy.metrics();
    let waited = super::h2::metric_sum(
        &m,
        "ringside_upstream_attempts_total",
        &["outcome=\"connect_timeout\""],
    );
    assert!(waited >= 1.0, "{m}");
    let none = super::h2::metric_sum(
        &m,
        "ringside_upstream_h2_room_waits_total",
        &["outcome=\"none\""],
    );
    // (The breaker's probes wait for room too.)
    assert!(none >= waited, "each such attempt waited for room: {m}");
}
