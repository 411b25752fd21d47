//! HTTP/2 to a provider over TLS, end to end: the simulator's TLS front (`simulate::front`)
//! speaks HTTP/2 with its own faults and relays each stream to the simulator. Streams share a
//! few connections; a GOAWAY loses and replays none; a refused stream is sent again blaming no
//! key; a connection that dies under many streams counts once, and one gone silent is found by
//! its PING; a provider that chooses
//! HTTP/1.1 (or is told `never`) is reached over HTTP/1.1. What its keys and its breaker do
//! meanwhile: `h2_keys`.

use crate::both_drivers;
use crate::common::sim_tls::SimTls;
use crate::common::*;
use ringside::simulate::SimOptions;
use ringside::simulate::front::H2Faults;
use std::time::Duration;

both_drivers!(
    five_hundred_streams_share_a_few_connections,
    a_goaway_mid_run_loses_no_stream_and_replays_none,
    a_refused_stream_is_sent_again_blaming_no_key,
    a_dead_connection_counts_once,
    a_connection_dead_after_its_heads_counts_once,
    a_silent_connection_is_found_by_its_ping,
    a_provider_that_chooses_http1_is_reached_over_http1,
    a_server_that_requires_http1_is_reached_over_http1,
    a_large_prompt_waits_out_a_slow_window,
);

pub(super) fn sim_opts(events: u32, interval_ms: u64) -> SimOptions {
    SimOptions {
        events,
        interval_ms,
        ..Default::default()
    }
}

/// `n` streamed chat requests at once; how many came back whole (200 and `[DONE]`).
pub(super) fn streams_at_once(proxy: &Proxy, n: usize) -> usize {
    streams_at_once_to(proxy.addr, n)
}

/// [`streams_at_once`] to the proxy at `addr`.
fn streams_at_once_to(addr: std::net::SocketAddr, n: usize) -> usize {
    let threads: Vec<_> = (0..n)
        .map(|_| {
            std::thread::spawn(move || {
                let body = chat("m", true);
                let r = ringside::demo::client::request(
                    addr,
                    "POST",
                    "/v1/chat/completions",
                    &[],
                    body.as_bytes(),
                    Duration::from_secs(60),
                );
                r.is_ok_and(|r| r.status == 200 && r.text().ends_with("data: [DONE]\n\n"))
            })
        })
        .collect();
    threads
        .into_iter()
        .map(|t| t.join().unwrap_or(false))
        .filter(|whole| *whole)
        .count()
}

pub(super) fn count(v: &serde_json::Value, name: &str) -> u64 {
    v[name].as_u64().unwrap_or(0)
}

/// The sum of a metric's samples whose line holds every one of `labels`.
pub(super) fn metric_sum(metrics: &str, name: &str, labels: &[&str]) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with(name) && labels.iter().all(|x| l.contains(x)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

fn five_hundred_streams_share_a_few_connections(driver: &str) {
    let sim = SimTls::start(sim_opts(6, 30), true, H2Faults::default());
    let proxy = Proxy::start(driver, 2, "# access log to file", &sim.config("auto", "m"));
    let whole = streams_at_once(&proxy, 500);
    if whole != 500 {
        // Say what the front and the proxy saw, so that a rare failure explains itself.
        let log = std::fs::read_to_string(proxy.dir.0.join("access.log")).unwrap_or_default();
        let odd: Vec<&str> = (log.lines())
            .filter(|l| !l.contains("\"outcome\":\"ok\""))
            .take(5)
            .collect();
        let m = proxy.metrics();
        let h2: Vec<&str> = m
            .lines()
            .filter(|l| l.starts_with("ringside_upstream_h2"))
            .collect();
        panic!(
            "{whole} of 500 streams whole; front {}; attempts at the simulator {}; {h2:?}; {odd:#?}",
            sim.front(),
            sim.attempts()
        );
    }
    let front = sim.front();
    let conns = count(&front, "connections_h2");
    // Two cores, at most 100 streams a connection: 4 a core is the bound the issue sets.
    assert!((1..=8).contains(&conns), "HTTP/2 connections: {front}");
    let log = std::fs::read_to_string(proxy.dir.0.join("access.log")).unwrap_or_default();
    let odd: Vec<&str> = log
        .lines()
        .filter(|l| !l.contains("\"outcome\":\"ok\""))
        .take(3)
        .collect();
    assert_eq!(count(&front, "connections_http1"), 0, "{front} {odd:?}");
    assert_eq!(
        sim.attempts(),
        500,
        "each request reached the provider once"
    );
    let m = proxy.metrics();
    let handshakes = metric_sum(&m, "ringside_upstream_tls_handshakes_total", &[]);
    assert_eq!(handshakes as u64, conns, "one TLS handshake a connection");
}

fn a_goaway_mid_run_loses_no_stream_and_replays_none(driver: &str) {
    let faults = H2Faults {
        goaway_after: 30,
        ..Default::default()
    };
    let sim = SimTls::start(sim_opts(6, 30), true, faults);
    let proxy = Proxy::start(driver, 1, "", &sim.config("auto", "m"));
    assert_eq!(streams_at_once(&proxy, 200), 200, "every stream whole");
    let front = sim.front();
    let goaways = count(&front, "goaways");
    assert!(goaways >= 1, "{front}");
    assert!(count(&front, "connections_h2") >= 2, "{front}");
    // Counted as graceful (the metric follows each core's tick, so it is waited for).
    let kind = |m: &str, k: &str| {
        metric_sum(
            m,
            "ringside_upstream_h2_goaways_total",
            &[&format!("kind=\"{k}\"")],
        )
    };
    let mut m = proxy.metrics();
    for _ in 0..100 {
        if kind(&m, "graceful") as u64 >= goaways {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        m = proxy.metrics();
    }
    assert!(kind(&m, "graceful") as u64 >= goaways, "{m}");
    assert_eq!(kind(&m, "error") + kind(&m, "too_many_pings"), 0.0, "{m}");
    // A stream above the GOAWAY's last one never reached the provider; the rest ran to their
    // end: each request was served exactly once.
    assert_eq!(sim.attempts(), 200);
}

/// A front with `faults` and a proxy (`auto`) in front of it, after `n` requests through it
/// one by one, streamed and not by turns, each answered 200.
fn served_one_by_one(driver: &str, faults: H2Faults, n: usize) -> (SimTls, Proxy) {
    let sim = SimTls::start(sim_opts(3, 0), true, faults);
    let proxy = Proxy::start(driver, 1, "", &sim.config("auto", "m"));
    for i in 0..n {
        let r = proxy.post("/v1/chat/completions", &[], &chat("m", i % 2 == 0));
        assert_eq!(r.status, 200, "request {i}: {}", r.text());
    }
    (sim, proxy)
}

fn a_refused_stream_is_sent_again_blaming_no_key(driver: &str) {
    let faults = H2Faults {
        refuse_every: 3,
        ..Default::default()
    };
    let (sim, proxy) = served_one_by_one(driver, faults, 30);
    let refused = count(&sim.front(), "refused");
    assert!(refused >= 9, "{}", sim.front());
    assert_eq!(
        sim.attempts(),
        30,
        "a refused stream never reached the provider"
    );
    let m = proxy.metrics();
    let seen = metric_sum(
        &m,
        "ringside_upstream_attempts_total",
        &["outcome=\"refused\""],
    );
    assert_eq!(
        seen as u64, refused,
        "each refusal is an attempt of its own outcome"
    );
    // No key was blamed: none cooled, no breaker moved.
    let moved = metric_sum(&m, "ringside_connection_transitions_total", &[]);
    assert_eq!(moved, 0.0, "{m}");
}

fn a_dead_connection_counts_once(driver: &str) {
    // The first connection to carry a 16th stream is dropped with the 15 before it.
    let faults = H2Faults {
        drop_after: 15,
        ..Default::default()
    };
    let sim = SimTls::start(sim_opts(20, 50), true, faults);
    let proxy = Proxy::start(driver, 1, "# access log to file", &sim.config("auto", "m"));
    let _ = streams_at_once(&proxy, 16);
    assert_eq!(count(&sim.front(), "dropped"), 1, "{}", sim.front());
    // The loopback profile opens the breaker at two failures: sixteen streams failing with
    // their connection count as one.
    let m = proxy.metrics();
    let opened = metric_sum(&m, "ringside_breaker_transitions_total", &["to=\"open\""]);
    let log = std::fs::read_to_string(proxy.dir.0.join("access.log")).unwrap_or_default();
    // The attempts' details say which failures counted ("counted once" marks the rest).
    let retried: Vec<&str> = (log.lines())
        .filter(|l| l.contains("\"decision\":\"next\""))
        .collect();
    assert_eq!(opened, 0.0, "the breaker opened: {retried:#?}");
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", true));
    assert_eq!(r.status, 200, "served after the drop: {}", r.text());
}

fn a_connection_dead_after_its_heads_counts_once(driver: &str) {
    // Fifteen streams get their heads and no event; a 16th on their connection drops it. Each
    // of the 15 fails after its head and before its commit: the one failure still counts once.
    let faults = H2Faults {
        drop_after: 15,
        ..Default::default()
    };
    let stall = ringside::simulate::parse_fault_arg("model:m=stall;times=15");
    let opts = SimOptions {
        faults: vec![stall.expect("a fault")],
        ..sim_opts(3, 10)
    };
    let sim = SimTls::start(opts, true, faults);
    let proxy = Proxy::start(driver, 1, "", &sim.config("auto", "m"));
    let addr = proxy.addr;
    let one = move || std::thread::spawn(move || streams_at_once_to(addr, 1) == 1);
    let reached = |n: u64| {
        let waited = std::time::Instant::now();
        while sim.attempts() < n && waited.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(20));
        }
        sim.attempts()
    };
    // One first, so that the connection is there for the 14 others to share.
    let mut threads = vec![one()];
    assert_eq!(reached(1), 1);
    threads.extend((1..15).map(|_| one()));
    assert_eq!(reached(15), 15, "{}", sim.front());
    // Their heads reach the proxy; then the 16th stream.
    std::thread::sleep(Duration::from_millis(300));
    threads.push(one());
    let whole = threads
        .into_iter()
        .map(|t| t.join().unwrap_or(false))
        .filter(|whole| *whole)
        .count();
    assert_eq!(whole, 16, "every stream whole, sent again: {}", sim.front());
    assert_eq!(count(&sim.front(), "dropped"), 1, "{}", sim.front());
    let m = proxy.metrics();
    let attempts = metric_sum(&m, "ringside_upstream_attempts_total", &[]);
    let ok = metric_sum(&m, "ringside_upstream_attempts_total", &["outcome=\"ok\""]);
    assert!(
        attempts - ok >= 16.0,
        "all 16 failed with their connection: {m}"
    );
    // Counted once: at most one key cooled, and the breaker (two failures) stayed shut.
    let cooled = metric_sum(
        &m,
        "ringside_connection_transitions_total",
        &["to=\"cooling\""],
    );
    assert!(cooled <= 1.0, "{m}");
    let opened = metric_sum(&m, "ringside_breaker_transitions_total", &["to=\"open\""]);
    assert_eq!(opened, 0.0, "one dead connection opened the breaker: {m}");
}

fn a_silent_connection_is_found_by_its_ping(driver: &str) {
    // The first connection asked for a 5th stream goes silent (no FIN) with the 4 before it,
    // all still waiting for their heads (300 ms late). Nothing but a PING finds it dead: the
    // first-byte timeout is a minute away.
    let faults = H2Faults {
        blackhole_after: 4,
        ..Default::default()
    };
    let opts = SimOptions {
        latency_ms: 300,
        ..sim_opts(3, 10)
    };
    let sim = SimTls::start(opts, true, faults);
    let config = sim.config("auto", "m").replacen(
        "[upstream]\n",
        "[upstream]\nh2_ping_interval_ms = 300\nh2_ping_timeout_ms = 300\n\
         first_byte_timeout_ms = 60000\n",
        1,
    );
    let proxy = Proxy::start(driver, 1, "", &config);
    let started = std::time::Instant::now();
    let whole = streams_at_once(&proxy, 5);
    let took = started.elapsed();
    let front = sim.front();
    assert_eq!(count(&front, "blackholed"), 1, "{front}");
    // Each failed before its first byte: sent again on a new connection, whole.
    assert_eq!(whole, 5, "every stream whole: {front}");
    assert!(count(&front, "connections_h2") >= 2, "{front}");
    assert!(
        took < Duration::from_secs(30),
        "found dead only after {took:?}"
    );
    // Five streams lost with their connection count once: the breaker (two failures on the
    // loopback profile) stays shut.
    let m = proxy.metrics();
    let opened = metric_sum(&m, "ringside_breaker_transitions_total", &["to=\"open\""]);
    assert_eq!(opened, 0.0, "{m}");
}

fn a_provider_that_chooses_http1_is_reached_over_http1(driver: &str) {
    let sim = SimTls::start(sim_opts(3, 10), false, H2Faults::default());
    let proxy = Proxy::start(driver, 1, "", &sim.config("auto", "m"));
    assert_eq!(streams_at_once(&proxy, 20), 20, "every stream whole");
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
    assert_eq!(r.status, 200, "{}", r.text());
    let front = sim.front();
    assert_eq!(count(&front, "connections_h2"), 0, "{front}");
    assert!(count(&front, "connections_http1") >= 1, "{front}");
    drop(proxy);
    // `always` against a provider that will not speak HTTP/2: refused, never HTTP/1.1.
    let proxy = Proxy::start(driver, 1, "", &sim.config("always", "m"));
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
    assert_ne!(r.status, 200, "{}", r.text());
    drop(proxy);
    // `never` against one that offers it: HTTP/1.1.
    let h2 = SimTls::start(sim_opts(3, 10), true, H2Faults::default());
    let proxy = Proxy::start(driver, 1, "", &h2.config("never", "m"));
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", true));
    assert_eq!(r.status, 200, "{}", r.text());
    let front = h2.front();
    assert_eq!(count(&front, "connections_h2"), 0, "{front}");
    assert_eq!(count(&front, "connections_http1"), 1, "{front}");
}

fn a_server_that_requires_http1_is_reached_over_http1(driver: &str) {
    // Its server resets every HTTP/2 stream with HTTP_1_1_REQUIRED: the first request goes
    // again over HTTP/1.1, blaming no key, and so does every later one, at once.
    let faults = H2Faults {
        http1_required: 1,
        ..Default::default()
    };
    let (sim, proxy) = served_one_by_one(driver, faults, 10);
    let front = sim.front();
    assert_eq!(
        count(&front, "refused"),
        1,
        "asked over HTTP/2 once: {front}"
    );
    assert_eq!(count(&front, "connections_h2"), 1, "{front}");
    assert!(count(&front, "connections_http1") >= 1, "{front}");
    assert_eq!(sim.attempts(), 10, "each request reached the provider once");
    let m = proxy.metrics();
    let moved = metric_sum(&m, "ringside_connection_transitions_total", &[]);
    assert_eq!(moved, 0.0, "no key blamed: {m}");
    drop(proxy);
    // A provider that must speak HTTP/2 (`always`) is not moved to HTTP/1.1: a clear failure.
    let proxy = Proxy::start(driver, 1, "", &sim.config("always", "m"));
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
    assert_ne!(r.status, 200, "{}", r.text());
    assert!(r.text().contains("HTTP_1_1_REQUIRED"), "{}", r.text());
}

fn a_large_prompt_waits_out_a_slow_window(driver: &str) {
    // A 16 KiB window given back 20 ms late: a 300 KB prompt goes in many WINDOW_UPDATEs.
    let faults = H2Faults {
        slow_window: 16_384,
        ..Default::default()
    };
    let sim = SimTls::start(sim_opts(3, 0), true, faults);
    let proxy = Proxy::start(driver, 1, "", &sim.config("auto", "m"));
    let prompt = "x".repeat(300_000);
    let body = format!(r#"{{"model":"m","messages":[{{"role":"user","content":"{prompt}"}}]}}"#);
    let r = proxy.post("/v1/chat/completions", &[], &body);
    assert_eq!(r.status, 200, "{}", r.text());
    let seen = ringside::demo::client::request(sim.sim.addr, "GET", "/_sim/requests", &[], b"", T)
        .expect("requests");
    let v: serde_json::Value = serde_json::from_str(&seen.text()).expect("JSON");
    let last = v["requests"].as_array().and_then(|a| a.last().cloned());
    let bytes = last.map_or(0, |r| r["body_bytes"].as_u64().unwrap_or(0));
    assert_eq!(bytes, body.len() as u64, "the prompt arrived whole");
}
