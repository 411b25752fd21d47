//! Recovery at the provider's pace, end to end on both drivers: after a burst of 500s and after
//! the upstream process was killed and started again, Ringside serves again within about a
//! second of the upstream's return (its prober asks every few hundred ms), not at the end of a
//! cooldown or an open breaker's timer; and what it tells clients to wait meanwhile is the
//! next probe, not the longest timer. Without the prober, the breaker's timer and its one
//! half-open request.

mod common;
use common::*;
use ringside::simulate::{SimOptions, parse_fault_arg};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

both_drivers!(
    back_within_a_second_of_a_500_burst,
    back_within_a_second_of_a_killed_upstream,
    breaker_opens_and_one_probe_closes_it,
    every_anthropic_target_overloaded_is_a_529_to_an_anthropic_client,
    a_half_open_breaker_tries_the_key_that_did_not_fail,
    one_keys_failures_do_not_hold_its_sibling_behind_the_breaker,
);

/// The bound on "within a second": the prober's spacing (300 ms for API keys) plus a loaded
/// 2-core machine's scheduling; the timers it replaces held for 3 s and more.
const BACK_WITHIN: Duration = Duration::from_millis(1_500);

/// Two keys of one API-key provider (`profile = "api_key"`). Requests do not wait for a
/// recovery (`max_wait_ms = 0`): each poll is answered at once, with what it is told to wait.
fn proxy_for(driver: &str, sim: SocketAddr) -> Proxy {
    let body = priority_keys(sim, &["a", "b"], "profile = \"api_key\"");
    Proxy::start(driver, 2, "", &(body + "[resilience]\nmax_wait_ms = 0\n"))
}

/// One request every 100 ms for `span` (a client polling through the outage): the statuses,
/// with the largest `Retry-After` told.
fn poll(proxy: &Proxy, span: Duration) -> (Vec<u16>, u64) {
    let end = Instant::now() + span;
    let (mut statuses, mut told) = (Vec::new(), 0);
    while Instant::now() < end {
        let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
        statuses.push(r.status);
        if r.status != 200 {
            let secs = r.header("retry-after").and_then(|v| v.parse().ok());
            told = told.max(secs.unwrap_or(0));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    (statuses, told)
}

/// How long after now the first request is served again (polling every 100 ms), bounded.
fn time_to_first_success(proxy: &Proxy) -> Duration {
    let began = Instant::now();
    while began.elapsed() < Duration::from_secs(20) {
        if proxy
            .post("/v1/chat/completions", &[], &chat("m", false))
            .status
            == 200
        {
            return began.elapsed();
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("not served again within 20 s of the upstream's return");
}

fn back_within_a_second_of_a_500_burst(driver: &str) {
    let sim = start_sim(SimOptions::default());
    let proxy = proxy_for(driver, sim.addr);
    assert_eq!(
        proxy
            .post("/v1/chat/completions", &[], &chat("m", false))
            .status,
        200
    );
    for key in ["sk-sim-a", "sk-sim-b"] {
        set_fault(sim.addr, key, Some("500"));
    }
    let (statuses, told) = poll(&proxy, Duration::from_secs(4));
    assert!(statuses.iter().all(|&s| s >= 500), "{statuses:?}");
    // Told the next probe (within a second or two), not a cooldown's or an open time's end.
    assert!(
        (1..=2).contains(&told),
        "Retry-After {told} s during the outage: {statuses:?}"
    );
    for key in ["sk-sim-a", "sk-sim-b"] {
        set_fault(sim.addr, key, None);
    }
    let back = time_to_first_success(&proxy);
    eprintln!("back after {back:?}");
    assert!(
        back <= BACK_WITHIN,
        "served again {back:?} after the 500s ended"
    );
    // Both keys serve again (each lifted by its own probe or the breaker's request), and the
    // breaker closed.
    std::thread::sleep(Duration::from_millis(1_000));
    let (statuses, _) = poll(&proxy, Duration::from_millis(600));
    assert!(statuses.iter().all(|&s| s == 200), "{statuses:?}");
    let (_, b) = proxy.admin("GET", "/admin/breakers");
    assert_eq!(b["breakers"][0]["state"], "closed", "{b}");
}

/// The simulator as its own process (`ringside simulate`), so that killing it is a real
/// upstream crash: its sockets close and connects are refused.
fn simulator_process(at: SocketAddr) -> std::process::Child {
    let child = std::process::Command::new(binary())
        .args(["simulate", "--listen", &at.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("simulator process starts");
    let began = Instant::now();
    while std::net::TcpStream::connect(at).is_err() {
        assert!(began.elapsed() < T, "simulator listening on {at}");
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

fn back_within_a_second_of_a_killed_upstream(driver: &str) {
    let at = addr(port());
    let mut sim = simulator_process(at);
    let proxy = proxy_for(driver, at);
    assert_eq!(
        proxy
            .post("/v1/chat/completions", &[], &chat("m", false))
            .status,
        200
    );
    let _ = sim.kill();
    let _ = sim.wait();
    let (statuses, told) = poll(&proxy, Duration::from_secs(4));
    assert!(statuses.iter().all(|&s| s >= 500), "{statuses:?}");
    assert!(
        (1..=2).contains(&told),
        "Retry-After {told} s during the outage: {statuses:?}"
    );
    // The same address again: the process restarted.
    let mut sim = simulator_process(at);
    let back = time_to_first_success(&proxy);
    eprintln!("back after {back:?}");
    let _ = sim.kill();
    let _ = sim.wait();
    assert!(
        back <= BACK_WITHIN,
        "served again {back:?} after the upstream came back"
    );
}

/// The timer's path: no prober (`probe_interval_ms = 0`; tests/recovery.rs has the probes).
fn breaker_opens_and_one_probe_closes_it(driver: &str) {
    let mut opts = SimOptions::default();
    opts.faults
        .push(parse_fault_arg("key:sk-sim-a=503;times=3").expect("fault"));
    let sim = start_sim(opts);
    let extra = "  [providers.breaker]\n  open_at = 3\n  open_ms = 1000\n  probe_interval_ms = 0\n  [providers.cooldown]\n  base_ms = 0\n";
    let body = priority_keys(sim.addr, &["a"], extra);
    let proxy = Proxy::start(driver, 2, "", &(body + "[upstream]\nmax_attempts = 1\n"));
    for _ in 0..3 {
        let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
        assert_eq!(r.status, 503);
    }
    // Open: nothing reaches the upstream.
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
    assert_eq!(r.status, 503);
    assert_eq!(
        r.json()["error"]["code"],
        "all_targets_cooling_down",
        "{}",
        r.text()
    );
    assert_eq!(
        r.json()["error"]["diagnostics"]["excluded"][0]["reason"],
        "circuit_open"
    );
    assert_eq!(attempts_for(&sim, "sk-sim-a"), 3);
    let (_, b) = proxy.admin("GET", "/admin/breakers");
    assert_eq!(b["breakers"][0]["state"], "open", "{b}");
    // Half-open: of a burst of concurrent requests exactly one probes the upstream.
    // Past the open time at its longest: 1 s plus the default jitter (±20%), plus a margin.
    std::thread::sleep(Duration::from_millis(1_400));
    let addr = proxy.addr;
    let burst: Vec<_> = (0..6)
        .map(|_| {
            std::thread::spawn(move || {
                ringside::demo::client::request(
                    addr,
                    "POST",
                    "/v1/chat/completions",
                    // The probe is slow, so that the whole burst arrives while it runs
                    // even on a loaded machine.
                    &[("x-sim-latency-ms", "1000")],
                    chat("m", false).as_bytes(),
                    T,
                )
                .map(|r| r.status)
                .unwrap_or(0)
            })
        })
        .collect();
    let statuses: Vec<u16> = burst.into_iter().map(|h| h.join().unwrap_or(0)).collect();
    assert_eq!(
        statuses.iter().filter(|&&s| s == 200).count(),
        1,
        "{statuses:?}"
    );
    assert_eq!(
        statuses.iter().filter(|&&s| s == 503).count(),
        5,
        "{statuses:?}"
    );
    assert_eq!(attempts_for(&sim, "sk-sim-a"), 4, "one probe");
    // The probe's success closed the breaker on every core.
    for _ in 0..6 {
        let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
        assert_eq!(r.status, 200);
    }
    let (_, b) = proxy.admin("GET", "/admin/breakers");
    assert_eq!(b["breakers"][0]["state"], "closed", "{b}");
}

/// Every Anthropic key overloaded: an Anthropic client hears Anthropic's own 529
/// `overloaded_error` (its SDK's and Claude Code's overload handling start on it), told when to
/// come back; an OpenAI client of the same route hears Ringside's 503.
fn every_anthropic_target_overloaded_is_a_529_to_an_anthropic_client(driver: &str) {
    let mut opts = SimOptions::default();
    for key in ["sk-sim-a", "sk-sim-b"] {
        let spec = format!("key:{key}=529;retry-after=20");
        opts.faults.push(parse_fault_arg(&spec).expect("fault"));
    }
    let sim = start_sim(opts);
    let body = priority_keys(sim.addr, &["a", "b"], "")
        .replace("dialect = \"openai\"", "dialect = \"anthropic\"");
    let proxy = Proxy::start(driver, 2, "", &(body + "[resilience]\nmax_wait_ms = 0\n"));
    let msg = r#"{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}"#;
    // The first request meets both overloads: the last upstream word, as Anthropic said it.
    let r = proxy.post("/v1/messages", &[], msg);
    assert_eq!(r.status, 529, "{}", r.text());
    // The decision record says what each failure was taken to mean, by which rule, and where
    // the wait came from.
    let id = r.header("x-request-id").unwrap_or_default().to_string();
    let d = proxy.decision(&id);
    let first = &d["attempts"][0];
    assert_eq!(first["reason"], "overloaded", "{d}");
    assert_eq!(first["scope"], "connection", "{d}");
    assert_eq!(first["rule"], "overloaded", "{d}");
    assert_eq!(first["hint_source"], "retry_after", "{d}");
    assert_eq!(first["retry_after_ms"], 20_000, "{d}");
    // Both keys cooling for the overload: Ringside's own answer, in Anthropic's terms.
    let r = proxy.post("/v1/messages", &[], msg);
    assert_eq!(r.status, 529, "{}", r.text());
    let v = r.json();
    assert_eq!(v["type"], "error", "{v}");
    assert_eq!(v["error"]["type"], "overloaded_error", "{v}");
    assert_eq!(r.header("x-should-retry"), Some("true"));
    let wait: u64 = r
        .header("retry-after")
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    assert!((1..=20).contains(&wait), "retry-after {wait}");
    // The same wait to the millisecond (the OpenAI SDK prefers it): whole seconds overstate.
    let ms: u64 = r
        .header("retry-after-ms")
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    assert!(
        ms > (wait - 1) * 1_000 && ms <= wait * 1_000,
        "{ms} ms, {wait} s"
    );
    // (The prober may ask the model list meanwhile: the provider's own `Retry-After` stands.)
    assert_eq!(
        r.header("x-ringside-attempts"),
        Some("0"),
        "nothing was sent"
    );
    // An OpenAI client has no 529: the route's 503.
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
    assert_eq!(r.status, 503, "{}", r.text());
    assert_eq!(r.json()["error"]["code"], "all_targets_cooling_down");
}

/// The first-choice key keeps failing; the second failed once with it and opened the breaker.
/// When the breaker half-opens, its one real request goes to the key that has not failed since,
/// not to the first choice (which would reopen it for longer while the healthy key waits).
fn a_half_open_breaker_tries_the_key_that_did_not_fail(driver: &str) {
    let mut opts = SimOptions::default();
    for f in ["key:sk-sim-a=500", "key:sk-sim-b=500;times=1"] {
        opts.faults.push(parse_fault_arg(f).expect("fault"));
    }
    let sim = start_sim(opts);
    // Keys never cool (only the breaker decides), and no prober: the open time alone.
    let extra = "  [providers.breaker]\n  open_at = 2\n  open_ms = 1000\n  probe_interval_ms = 0\n  [providers.cooldown]\n  base_ms = 0\n";
    let body = priority_keys(sim.addr, &["a", "b"], extra);
    let proxy = Proxy::start(driver, 2, "", &(body + "[resilience]\nmax_wait_ms = 0\n"));
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
    assert!(r.status >= 500, "{}", r.text());
    let (_, b) = proxy.admin("GET", "/admin/breakers");
    assert_eq!(b["breakers"][0]["state"], "open", "{b}");
    // Past the open time at its longest (1 s and the default jitter of 20 %).
    std::thread::sleep(Duration::from_millis(1_400));
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("x-ringside-connection"), Some("sim/b"));
    assert_eq!(
        attempt_count(&r),
        1,
        "{:?}",
        r.header("x-ringside-attempts")
    );
    let (_, b) = proxy.admin("GET", "/admin/breakers");
    assert_eq!(b["breakers"][0]["state"], "closed", "{b}");
}

/// Key a answers 503 with a 20 s `Retry-After` (and so does its model list); its first failure
/// opens the breaker (20 s). Nothing is usable: a cools for 20 s, b is behind the breaker. The
/// request may wait (30 s by default) and does, but looks again when the breaker may have
/// cleared: the prober asks with b too, b answers, the breaker half-opens and the request is
/// its one real attempt. It was held for a's whole cooldown before.
fn one_keys_failures_do_not_hold_its_sibling_behind_the_breaker(driver: &str) {
    let mut opts = SimOptions::default();
    opts.faults
        .push(parse_fault_arg("key:sk-sim-a=503;retry-after=20").expect("fault"));
    let sim = start_sim(opts);
    let extra = "  [providers.breaker]\n  degraded_at = 1\n  open_at = 1\n  open_ms = 20000\n  probe_interval_ms = 200\n";
    let proxy = Proxy::start(driver, 2, "", &priority_keys(sim.addr, &["a", "b"], extra));
    let began = Instant::now();
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
    let took = began.elapsed();
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("x-ringside-connection"), Some("sim/b"));
    assert!(took < Duration::from_secs(5), "served after {took:?}");
    let (_, d) = proxy.admin("GET", "/admin/decisions?limit=1");
    let record = &d["decisions"][0];
    assert_eq!(record["waited_for"]["reason"], "circuit_open", "{record}");
    assert_eq!(record["waited_for"]["connection"], "b", "{record}");
    let (_, b) = proxy.admin("GET", "/admin/breakers");
    assert_eq!(b["breakers"][0]["state"], "closed", "{b}");
}
