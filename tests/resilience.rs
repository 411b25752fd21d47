//! The resilience engine end to end, with 2 workers, on io_uring and on epoll: cooldowns learned
//! from Retry-After, the breaker (its recovery: tests/recovery.rs), restatement, pass-through of bad
//! requests, the attempt budget, the deadline, and cross-core replication.

mod common;
use common::*;
use ringside::simulate::{SimOptions, parse_fault_arg};
use std::time::{Duration, Instant};

both_drivers!(
    an_account_limit_cools_every_key_of_the_account,
    retry_after_moves_traffic_off_a_key,
    every_key_429_is_hit_once_per_window,
    short_cooldown_is_waited_out,
    restated_relay_error_fails_over,
    in_band_stream_error_fails_over_before_commit,
    bad_request_is_passed_through_untried_elsewhere,
    attempts_never_exceed_the_budget,
    deadline_holds,
    admin_shows_and_resets_state,
    eligibility_contract_preserves_needs,
    terminal_and_model_cooldown_answers,
    decisions_worth_explaining_outlive_plain_ones,
);

fn sim_with(faults: &[&str]) -> ringside::simulate::Simulator {
    let mut opts = SimOptions::default();
    for f in faults {
        opts.faults.push(parse_fault_arg(f).expect("fault"));
    }
    start_sim(opts)
}

fn retry_after_moves_traffic_off_a_key(driver: &str) {
    let sim = sim_with(&["key:sk-sim-a=429;retry-after=2"]);
    let proxy = Proxy::start(driver, 2, "", &priority_keys(sim.addr, &["a", "b"], ""));
    let started = Instant::now();
    let first = proxy.post("/v1/chat/completions", &[], &chat("m", false));
    assert_eq!(first.status, 200, "{}", first.text());
    assert_eq!(first.header("x-ringside-connection"), Some("sim/b"));
    assert!(
        first
            .header("x-ringside-attempts")
            .unwrap_or("")
            .contains("sim/a 429 rate_limited next"),
        "{:?}",
        first.header("x-ringside-attempts")
    );
    // Until the hint expires nothing reaches key a, whichever core takes the request.
    let mut cores = std::collections::HashSet::new();
    while started.elapsed() < Duration::from_millis(1_500) {
        let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
        assert_eq!(r.status, 200);
        assert_eq!(r.header("x-ringside-connection"), Some("sim/b"));
        assert_eq!(attempt_count(&r), 1);
        let id = r.header("x-request-id").unwrap_or_default().to_string();
        let d = proxy.decision(&id);
        if let Some(c) = d["core"].as_u64() {
            cores.insert(c);
        }
    }
    assert_eq!(
        attempts_for(&sim, "sk-sim-a"),
        1,
        "a was left alone while cooling"
    );
    assert!(cores.len() == 2, "requests reached both cores: {cores:?}");
    // After the hint, a is tried again (and answers 429 again).
    std::thread::sleep(Duration::from_millis(2_600).saturating_sub(started.elapsed()));
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
    assert_eq!(r.status, 200);
    assert_eq!(attempts_for(&sim, "sk-sim-a"), 2);
}

fn every_key_429_is_hit_once_per_window(driver: &str) {
    let sim = sim_with(&[
        "key:sk-sim-a=429;retry-after=3",
        "key:sk-sim-b=429;retry-after=3",
        "key:sk-sim-c=429;retry-after=3",
    ]);
    let body = priority_keys(sim.addr, &["a", "b", "c"], "") + "[resilience]\nmax_wait_ms = 0\n";
    let proxy = Proxy::start(driver, 2, "", &body);
    let first = proxy.post("/v1/chat/completions", &[], &chat("m", false));
    assert_eq!(
        first.status, 429,
        "the last upstream word stands when the budget is spent"
    );
    // Told when a key is back (the upstream said 3 s), and that retrying then is worth it:
    // `Retry-After` and `x-should-retry` never contradict each other.
    assert_eq!(first.header("x-should-retry"), Some("true"));
    let ra: u64 = first
        .header("retry-after")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    assert!((1..=3).contains(&ra), "retry-after {ra}");
    assert_eq!(attempt_count(&first), 3);
    for _ in 0..10 {
        let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
        assert_eq!(r.status, 503, "{}", r.text());
        let v = r.json();
        assert_eq!(v["error"]["code"], "all_targets_cooling_down");
        let ra: u64 = r
            .header("retry-after")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        assert!((1..=3).contains(&ra), "retry-after {ra}");
        let excluded = v["error"]["diagnostics"]["excluded"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert_eq!(excluded.len(), 3, "{v}");
        assert!(
            excluded
                .iter()
                .all(|e| e["reason"] == "connection_cooldown")
        );
    }
    for k in ["sk-sim-a", "sk-sim-b", "sk-sim-c"] {
        assert_eq!(attempts_for(&sim, k), 1, "{k} hit once in its window");
    }
}

fn short_cooldown_is_waited_out(driver: &str) {
    let sim = sim_with(&["key:sk-sim-a=429;retry-after=1;times=1"]);
    let proxy = Proxy::start(driver, 2, "", &priority_keys(sim.addr, &["a"], ""));
    let t0 = Instant::now();
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", true));
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(
        t0.elapsed() >= Duration::from_millis(900),
        "waited for the hint"
    );
    assert_eq!(attempt_count(&r), 2);
    assert_eq!(attempts_for(&sim, "sk-sim-a"), 2);
    let id = r.header("x-request-id").unwrap_or_default().to_string();
    let d = proxy.decision(&id);
    assert!(d["waited_ms"].as_u64().unwrap_or(0) >= 900, "{d}");
}

fn restated_relay_error_fails_over(driver: &str) {
    let sim = sim_with(&["key:sk-sim-a=403-quota"]);
    let proxy = Proxy::start(driver, 2, "", &priority_keys(sim.addr, &["a", "b"], ""));
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("x-ringside-connection"), Some("sim/b"));
    let id = r.header("x-request-id").unwrap_or_default().to_string();
    let d = proxy.decision(&id);
    let a = &d["attempts"][0];
    assert_eq!(
        (a["status"].as_u64(), a["restated_from"].as_u64()),
        (Some(429), Some(403)),
        "{d}"
    );
    assert_eq!(a["reason"], "quota_exhausted");
    assert_eq!(a["retry_after_ms"], 60_000);
    // The key is cooled for the restated hint: later requests go straight to b.
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
    assert_eq!(attempt_count(&r), 1);
    assert_eq!(attempts_for(&sim, "sk-sim-a"), 1);
}

fn in_band_stream_error_fails_over_before_commit(driver: &str) {
    let sim = sim_with(&["key:sk-sim-a=sse-error;message=用户额度不足"]);
    let proxy = Proxy::start(driver, 2, "", &priority_keys(sim.addr, &["a", "b"], ""));
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", true));
    assert_eq!(r.status, 200);
    assert_eq!(r.header("x-ringside-connection"), Some("sim/b"));
    let text = r.text();
    assert!(
        !text.contains("error"),
        "the client saw one clean stream: {text}"
    );
    assert!(text.ends_with("data: [DONE]\n\n"));
    let id = r.header("x-request-id").unwrap_or_default().to_string();
    let d = proxy.decision(&id);
    assert_eq!(d["attempts"][0]["restated_from"], 200, "{d}");
    assert_eq!(d["attempts"][0]["reason"], "quota_exhausted");
    // Anthropic's `event: error` (rate limit) before content fails over the same way.
    let sim = sim_with(&["key:sk-sim-a=sse-error"]);
    let body = priority_keys(sim.addr, &["a", "b"], "")
        .replace("dialect = \"openai\"", "dialect = \"anthropic\"");
    let proxy = Proxy::start(driver, 2, "", &body);
    let msg = r#"{"model":"m","max_tokens":16,"stream":true,"messages":[{"role":"user","content":"hi"}]}"#;
    let r = proxy.post("/v1/messages", &[], msg);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("x-ringside-connection"), Some("sim/b"));
    assert!(!r.text().contains("event: error"), "{}", r.text());
}

fn bad_request_is_passed_through_untried_elsewhere(driver: &str) {
    let sim = sim_with(&["key:sk-sim-a=400;message=Invalid value for 'temperature'"]);
    let proxy = Proxy::start(driver, 2, "", &priority_keys(sim.addr, &["a", "b"], ""));
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
    assert_eq!(r.status, 400);
    assert!(
        r.text().contains("Invalid value for 'temperature'"),
        "{}",
        r.text()
    );
    assert_eq!(r.header("x-should-retry"), Some("false"));
    assert_eq!(attempts_for(&sim, "sk-sim-b"), 0);
    // Nothing was cooled: the next request goes to a again.
    let _ = proxy.post("/v1/chat/completions", &[], &chat("m", false));
    assert_eq!(attempts_for(&sim, "sk-sim-a"), 2);
}

fn attempts_never_exceed_the_budget(driver: &str) {
    let sim = sim_with(&["model:m=500"]);
    let extra = "  [providers.breaker]\n  open_at = 1000\n  [providers.cooldown]\n  base_ms = 0\n";
    let body = priority_keys(sim.addr, &["a", "b", "c"], extra) + "[upstream]\nmax_attempts = 2\n";
    let proxy = Proxy::start(driver, 2, "", &body);
    let mut total = 0;
    for _ in 0..8 {
        let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
        assert_eq!(r.status, 500);
        // A key the budget never reached serves at once: worth a retry, and said so without
        // contradiction.
        assert_eq!(r.header("x-should-retry"), Some("true"));
        assert_eq!(r.header("retry-after"), Some("1"));
        let n = attempt_count(&r);
        assert!(n <= 2, "{n} attempts");
        total += n as u64;
    }
    let upstream: u64 = ["sk-sim-a", "sk-sim-b", "sk-sim-c"]
        .iter()
        .map(|k| attempts_for(&sim, k))
        .sum();
    assert_eq!(upstream, total);
    assert!(upstream <= 16);
}

fn deadline_holds(driver: &str) {
    let sim = sim_with(&["key:sk-sim-a=hang"]);
    let proxy = Proxy::start(driver, 2, "", &priority_keys(sim.addr, &["a", "b"], ""));
    let t0 = Instant::now();
    let r = proxy.post(
        "/v1/chat/completions",
        &[("x-ringside-deadline-ms", "600")],
        &chat("m", false),
    );
    let took = t0.elapsed();
    assert_eq!(r.status, 504, "{}", r.text());
    assert_eq!(r.json()["error"]["code"], "deadline_exceeded");
    assert!(took >= Duration::from_millis(550), "{took:?}");
    assert!(
        took < Duration::from_millis(850),
        "deadline + 250 ms: {took:?}"
    );
    // A deadline we imposed says nothing about the key: it is not cooled.
    let (_, c) = proxy.admin("GET", "/admin/connections");
    assert_eq!(c["connections"][0]["state"], "active", "{c}");
}

fn admin_shows_and_resets_state(driver: &str) {
    let sim = sim_with(&["key:sk-sim-a=402", "key:sk-sim-b=503"]);
    let body =
        priority_keys(sim.addr, &["a", "b", "c"], "") + "[resilience.lockout]\nenabled = true\n";
    let proxy = Proxy::start(driver, 2, "", &body);
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
    assert_eq!(r.status, 200);
    assert_eq!(r.header("x-ringside-connection"), Some("sim/c"));
    let (_, c) = proxy.admin("GET", "/admin/connections");
    assert_eq!(c["connections"][0]["state"], "credits_exhausted", "{c}");
    assert_eq!(c["connections"][1]["state"], "cooling");
    assert_eq!(c["connections"][1]["last_error"]["status"], 503);
    let (_, m) = proxy.admin("GET", "/admin/model-cooldowns");
    let locks = m["model_cooldowns"].as_array().cloned().unwrap_or_default();
    assert!(
        locks
            .iter()
            .any(|l| l["connection"] == "b" && l["scope"] == "exact"),
        "{m}"
    );
    let (s, _) = proxy.admin("DELETE", "/admin/model-cooldowns?provider=sim&connection=b");
    assert_eq!(s, 200);
    let (_, m) = proxy.admin("GET", "/admin/model-cooldowns");
    assert_eq!(
        m["model_cooldowns"].as_array().map(Vec::len),
        Some(0),
        "{m}"
    );
    // A terminal state lasts until an operator resets it, on every core.
    let (s, v) = proxy.admin("POST", "/admin/connections/sim/a/reset");
    assert_eq!(s, 200, "{v}");
    let (_, c) = proxy.admin("GET", "/admin/connections");
    assert_eq!(c["connections"][0]["state"], "active", "{c}");
    let (s, _) = proxy.admin("POST", "/admin/connections/sim/zzz/reset");
    assert_eq!(s, 404);
    let m = proxy.metrics();
    assert!(
        m.contains(
            "ringside_connection_state{provider=\"sim\",connection=\"b\",state=\"cooling\"} 1"
        ),
        "{m}"
    );
    assert!(m.contains("ringside_breaker_state{provider=\"sim\"}"));
    let (_, d) = proxy.admin("GET", "/admin/decisions?limit=5");
    assert!(
        !d["decisions"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .is_empty()
    );
}

fn eligibility_contract_preserves_needs(driver: &str) {
    let sim = sim_with(&[]);
    let body = priority_keys(sim.addr, &["a"], "region = \"us\"")
        .replace("models = [\"m\"]", "models = [\"small\", \"big\"]")
        + "[[routes]]\nname = \"r\"\ntargets = [\n  { provider = \"sim\", model = \"small\", tools = false, context_window = 1000 },\n  { provider = \"sim\", model = \"big\" },\n]\n";
    let proxy = Proxy::start(driver, 2, "", &body);
    let plain = proxy.post("/v1/chat/completions", &[], &chat("r", false));
    assert_eq!(plain.json()["model"], "small", "{}", plain.text());
    let tools = r#"{"model":"r","tools":[{"type":"function","function":{"name":"f"}}],"messages":[{"role":"user","content":"hi"}]}"#;
    let r = proxy.post("/v1/chat/completions", &[], tools);
    assert_eq!(
        r.json()["model"],
        "big",
        "a target without tools is skipped"
    );
    let long = chat("r", false).replace("hi", &"x".repeat(6000));
    let r = proxy.post("/v1/chat/completions", &[], &long);
    assert_eq!(
        r.json()["model"],
        "big",
        "too large for the small context window"
    );
    let r = proxy.post(
        "/v1/chat/completions",
        &[("x-ringside-region", "eu")],
        &chat("r", false),
    );
    assert_eq!(r.status, 404, "{}", r.text());
    let v = r.json();
    assert_eq!(v["error"]["code"], "no_executable_targets");
    assert_eq!(
        v["error"]["diagnostics"]["excluded"][0]["reason"], "region_mismatch",
        "{v}"
    );
    assert_eq!(r.header("x-should-retry"), Some("false"));
    let r = proxy.post(
        "/v1/chat/completions",
        &[("x-ringside-region", "US")],
        &chat("r", false),
    );
    assert_eq!(r.status, 200);
    assert_eq!(
        attempts_for(&sim, "sk-sim-a"),
        4,
        "ineligible targets were never sent anything"
    );
}

fn terminal_and_model_cooldown_answers(driver: &str) {
    // Every key out of credits: 401, no retry, nothing sent on the next request.
    let sim = sim_with(&["model:m=402"]);
    let proxy = Proxy::start(driver, 2, "", &priority_keys(sim.addr, &["a", "b"], ""));
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
    assert_eq!(r.status, 401, "{}", r.text());
    assert_eq!(r.json()["error"]["code"], "all_connections_unusable");
    assert_eq!(r.header("x-should-retry"), Some("false"));
    let _ = proxy.post("/v1/chat/completions", &[], &chat("m", false));
    assert_eq!(
        attempts_for(&sim, "sk-sim-a") + attempts_for(&sim, "sk-sim-b"),
        2
    );
    // Every key's model locked out (a model-scope rule): 429 model_cooldown with Retry-After.
    let sim = sim_with(&["model:m=404;message=The model `m` does not exist"]);
    let proxy = Proxy::start(driver, 2, "", &priority_keys(sim.addr, &["a", "b"], ""));
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
    assert_eq!(r.status, 429, "{}", r.text());
    let v = r.json();
    assert_eq!(v["error"]["code"], "model_cooldown", "{v}");
    assert_eq!(v["error"]["model"], "m");
    assert!(v["error"]["reset_seconds"].as_u64() > Some(60), "{v}");
    assert_eq!(
        r.header("x-should-retry"),
        Some("false"),
        "a two-minute lock is not worth an SDK retry"
    );
    assert_eq!(r.header("retry-after"), None, "nor told a time to retry at");
}

/// A fail-over's record stays in the admin ring while a flood of plain successes scrolls
/// through their own small ring.
fn decisions_worth_explaining_outlive_plain_ones(driver: &str) {
    let sim = sim_with(&["key:sk-sim-a=429;retry-after=60"]);
    let body = priority_keys(sim.addr, &["a", "b"], "") + "[resilience]\ndecision_ring_plain = 4\n";
    let proxy = Proxy::start(driver, 1, "", &body);
    let id_of = |r: &ringside::demo::client::Reply| {
        r.header("x-request-id").unwrap_or_default().to_string()
    };
    let first = proxy.post("/v1/chat/completions", &[], &chat("m", false));
    assert_eq!((first.status, attempt_count(&first)), (200, 2));
    let mut plain = Vec::new();
    for _ in 0..20 {
        let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
        assert_eq!((r.status, attempt_count(&r)), (200, 1));
        plain.push(id_of(&r));
    }
    let d = proxy.decision(&id_of(&first));
    assert_eq!(d["attempts"][0]["status"], 429, "{d}");
    let (s, _) = proxy.admin("GET", &format!("/admin/decisions/{}", plain[0]));
    assert_eq!(s, 404, "the oldest success left its ring of 4");
    assert_eq!(proxy.decision(&plain[19])["outcome"], "ok");
    let (_, all) = proxy.admin("GET", "/admin/decisions?limit=100");
    let ids: Vec<&str> = all["decisions"]
        .as_array()
        .map(|v| v.iter().filter_map(|r| r["request_id"].as_str()).collect())
        .unwrap_or_default();
    let mut want: Vec<&str> = plain[16..].iter().rev().map(String::as_str).collect();
    let first_id = id_of(&first);
    want.push(&first_id);
    assert_eq!(ids, want, "newest first, across both rings");
}

fn an_account_limit_cools_every_key_of_the_account(driver: &str) {
    // Keys a and b belong to one upstream account, c to none. a's 429 is the account's rate
    // limit: b must not be tried (extra keys never evade a limit), c serves.
    let sim = sim_with(&["key:sk-sim-a=429;retry-after=30"]);
    let body = priority_keys(sim.addr, &["a", "b", "c"], "")
        .replace("  id = \"a\"\n", "  id = \"a\"\n  account = \"org-1\"\n")
        .replace("  id = \"b\"\n", "  id = \"b\"\n  account = \"org-1\"\n");
    let proxy = Proxy::start(driver, 1, "", &body);
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("x-ringside-connection"), Some("sim/c"));
    assert_eq!(attempts_for(&sim, "sk-sim-a"), 1);
    assert_eq!(
        attempts_for(&sim, "sk-sim-b"),
        0,
        "the account's other key was not tried"
    );
    let (_, c) = proxy.admin("GET", "/admin/connections");
    let b = c["connections"]
        .as_array()
        .and_then(|l| l.iter().find(|x| x["connection"] == "b"))
        .cloned()
        .unwrap_or_default();
    assert!(b["cooling_ms"].as_u64().unwrap_or(0) > 20_000, "{b}");
}
