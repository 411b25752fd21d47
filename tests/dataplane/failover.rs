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
    a_client_leaving_before_the_answer_aborts_the_upstream,
    a_request_pipelined_during_a_long_one_is_answered_after_it,
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
    // Every key failing: both cool and the (local-profile) breaker opens for a second; the
    // request waits for that chance (the half-open breaker's one real request), which fails
    // too, and the client hears the upstream's failure in its dialect, told when to come back.
    let mut opts = SimOptions::default();
    opts.faults
        .push(parse_fault_arg("key:sk-sim-a=reset").unwrap());
    opts.faults
        .push(parse_fault_arg("key:sk-sim-b=reset").unwrap());
    let (_sim, proxy) = sim_proxy(driver, opts);
    let r = proxy.post("/v1/chat/completions", &[], &chat("smart", false));
    assert_eq!(r.status, 502, "{}", r.text());
    let v = r.json();
    assert_eq!(v["error"]["code"], "upstream_unavailable", "{v}");
    assert_eq!(
        v["error"]["diagnostics"]["excluded"]
            .as_array()
            .map(Vec::len),
        Some(2)
    );
    assert!(r.header("retry-after").is_some());
    assert_eq!(r.header("x-should-retry"), Some("true"));
    assert_eq!(attempt_count(&r), 3);
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

fn in_flight(sim: &ringside::simulate::Simulator) -> u64 {
    let st = sim_stats(sim);
    st["keys"].as_object().map_or(0, |keys| {
        keys.values()
            .map(|k| k["in_flight"].as_u64().unwrap_or(0))
            .sum()
    })
}

/// The client watch, not a failed write: nothing is written to the client while the upstream
/// has not answered, so only the watch can see the client go.
fn a_client_leaving_before_the_answer_aborts_the_upstream(driver: &str) {
    let (sim, proxy) = sim_proxy(
        driver,
        SimOptions {
            latency_ms: 20_000,
            ..Default::default()
        },
    );
    let mut s = raw_client(proxy.addr);
    let req = raw_chat_with_id("smart", true, "leaves-early");
    s.write_all(req.as_bytes()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while in_flight(&sim) == 0 {
        assert!(
            Instant::now() < deadline,
            "the request never reached the upstream"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Past the watch's arming delay.
    std::thread::sleep(Duration::from_millis(200));
    drop(s);
    let left = Instant::now();
    // The upstream answers only after 20 s: a record before that is the watch's abort.
    let d = proxy.decision_within("leaves-early", Duration::from_secs(10));
    assert!(left.elapsed() < Duration::from_secs(10));
    assert_eq!(d["outcome"], "client_gone", "{d}");
}

/// A request sent while the previous one is still waiting on the upstream wakes the watch: it
/// is left in the socket (not read, not lost) and answered after the first, in order.
fn a_request_pipelined_during_a_long_one_is_answered_after_it(driver: &str) {
    let (_sim, proxy) = sim_proxy(
        driver,
        SimOptions {
            latency_ms: 500,
            ..Default::default()
        },
    );
    let mut s = raw_client(proxy.addr);
    let first = raw_chat_with_id("smart", false, "first");
    let second = raw_chat_with_id("smart", false, "second");
    s.write_all(first.as_bytes()).unwrap();
    // The watch arms 20 ms into the first request; the second comes while it is armed.
    std::thread::sleep(Duration::from_millis(150));
    s.write_all(second.as_bytes()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut got = Vec::new();
    let mut tmp = [0u8; 4096];
    let heads = loop {
        if let Some(heads) = whole_responses(&got, 2) {
            break heads;
        }
        let n = s.read(&mut tmp).unwrap();
        assert!(n > 0, "closed: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&tmp[..n]);
    };
    for (head, id) in heads.iter().zip(["first", "second"]) {
        assert!(head.starts_with("http/1.1 200"), "{head}");
        assert!(
            head.contains(&format!("x-request-id: {id}\r\n")),
            "in order: {head}"
        );
    }
}

/// The heads of the first `n` responses in `got` once all `n` are whole (content-length
/// framed), lower-cased; None while one is still incomplete.
fn whole_responses(got: &[u8], n: usize) -> Option<Vec<String>> {
    let mut heads = Vec::new();
    let mut at = 0;
    while heads.len() < n {
        let rest = &got[at..];
        let end = rest.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
        let head = String::from_utf8_lossy(&rest[..end]).to_ascii_lowercase();
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .and_then(|v| v.trim().parse().ok())
            .expect("a content-length framed answer");
        if rest.len() < end + len {
            return None;
        }
        at += end + len;
        heads.push(head);
    }
    Some(heads)
}
