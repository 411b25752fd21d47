//! Failures before and after the first byte: a reset or a TLS failure before any response byte
//! moves the request to the next candidate; a client that leaves aborts its upstream at once.

use crate::both_drivers;
use crate::common::*;
use crate::sim_proxy;
use ringside::simulate::{SimOptions, parse_fault_arg};
use std::io::{Read, Write};
use std::time::{Duration, Instant};

both_drivers!(
    reset_before_headers_fails_over,
    tls_failure_fails_over,
    client_disconnect_aborts_upstream,
);

fn reset_before_headers_fails_over(driver: &str) {
    let mut opts = SimOptions::default();
    opts.faults
        .push(parse_fault_arg("key:sk-sim-a=reset-before-headers").unwrap());
    let (sim, proxy) = sim_proxy(driver, opts);
    for _ in 0..4 {
        let r = proxy.post("/v1/chat/completions", &[], &chat("smart", false));
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.header("x-ringside-connection"), Some("sim/b"));
    }
    assert!(attempts_for(&sim, "sk-sim-a") >= 1);
    assert_eq!(attempts_for(&sim, "sk-sim-b"), 4);
    // Every key failing: both cool, the (local-profile) breaker opens, and the client hears
    // a precise 503 in its dialect with Retry-After and the reasons.
    let mut opts = SimOptions::default();
    opts.faults
        .push(parse_fault_arg("key:sk-sim-a=reset").unwrap());
    opts.faults
        .push(parse_fault_arg("key:sk-sim-b=reset").unwrap());
    let (_sim, proxy) = sim_proxy(driver, opts);
    let r = proxy.post("/v1/chat/completions", &[], &chat("smart", false));
    assert_eq!(r.status, 503, "{}", r.text());
    assert_eq!(r.json()["error"]["code"], "all_targets_cooling_down");
    assert!(r.header("retry-after").is_some());
    assert_eq!(attempt_count(&r), 2);
}

fn tls_failure_fails_over(driver: &str) {
    // The first provider speaks TLS to a plain-HTTP port: the handshake fails, the request moves on.
    let sim = start_sim(SimOptions::default());
    let body = format!(
        "[[providers]]\nid = \"tls\"\ndialect = \"openai\"\nbase_url = \"https://127.0.0.1:{p}/v1\"\n  [[providers.connections]]\n  id = \"t\"\n  key_env = \"SIM_KEY_A\"\n  models = [\"m\"]\n\
         [[providers]]\nid = \"plain\"\ndialect = \"openai\"\nbase_url = \"http://127.0.0.1:{p}/v1\"\n  [[providers.connections]]\n  id = \"p\"\n  key_env = \"SIM_KEY_B\"\n  models = [\"m\"]\n\
         [[routes]]\nname = \"r\"\ntargets = [{{ provider = \"tls\", model = \"m\" }}, {{ provider = \"plain\", model = \"m\" }}]\n",
        p = sim.addr.port()
    );
    let proxy = Proxy::start(driver, 1, "", &body);
    let r = proxy.post("/v1/chat/completions", &[], &chat("r", false));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("x-ringside-connection"), Some("plain/p"));
    assert_eq!(attempt_count(&r), 2);
    assert!(
        proxy
            .metrics()
            .contains("connection=\"t\",outcome=\"tls_error\"} 1")
    );
}

fn client_disconnect_aborts_upstream(driver: &str) {
    let (sim, proxy) = sim_proxy(
        driver,
        SimOptions {
            events: 100,
            interval_ms: 100,
            ..Default::default()
        },
    );
    let mut s = raw_client(proxy.addr);
    let req = raw_chat("smart", true);
    s.write_all(req.as_bytes()).unwrap();
    let mut tmp = [0u8; 1024];
    let n = s.read(&mut tmp).unwrap();
    assert!(n > 0);
    drop(s);
    // The 10 s stream must be cut within a couple of seconds of the client leaving.
    let deadline = Instant::now() + Duration::from_secs(4);
    loop {
        let st = sim_stats(&sim);
        let inflight: u64 = st["keys"]
            .as_object()
            .unwrap()
            .values()
            .map(|k| k["in_flight"].as_u64().unwrap_or(0))
            .sum();
        if inflight == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "upstream stream still running after the client left: {st}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
