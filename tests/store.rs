//! The durable store end to end: what an operator must not lose on a restart is still there.

mod common;
use common::*;
use ringside::simulate::{SimOptions, parse_fault_arg};

both_drivers!(
    terminal_states_and_admin_settings_survive_a_restart,
    session_affinity_pins_and_repins,
    a_stream_broken_off_pins_no_session,
    a_cooldown_survives_a_kill_with_the_time_it_has_left,
    learned_pacing_survives_a_kill,
    a_429_teaches_its_key_no_pacing,
);

fn terminal_states_and_admin_settings_survive_a_restart(driver: &str) {
    let mut opts = SimOptions::default();
    opts.faults
        .push(parse_fault_arg("key:sk-sim-a=402").unwrap());
    let sim = start_sim(opts);
    let body = priority_keys(sim.addr, &["a", "b"], "");
    let mut proxy = Proxy::start(driver, 2, "", &body);
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
    assert_eq!(r.status, 200);
    let r = proxy.admin_with(
        "PATCH",
        "/admin/settings",
        r#"{"flow":{"max_wait_ms":1234}}"#,
    );
    assert_eq!(r.status, 200);
    assert!(proxy.terminate().success());
    let dir = std::mem::replace(&mut proxy.dir, tempdir::new());
    drop(proxy);

    let proxy = Proxy::start_in(driver, 2, "", &body, dir);
    let (_, c) = proxy.admin("GET", "/admin/connections");
    assert_eq!(c["connections"][0]["state"], "credits_exhausted", "{c}");
    let (_, s) = proxy.admin("GET", "/admin/settings");
    assert_eq!(s["flow"]["max_wait_ms"]["value"], 1234, "{s}");
    assert_eq!(s["flow"]["max_wait_ms"]["source"], "admin");
    // `ringside check` shows the saved budget too, read beside the live server.
    let out = std::process::Command::new(binary())
        .args(["check", "--config"])
        .arg(proxy.dir.0.join("ringside.toml"))
        .envs(proxy_env())
        .output()
        .expect("run check");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("max_wait_ms 1234 (admin)"), "{text}");
    // The terminal key is not tried again after the restart.
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
    assert_eq!(r.header("x-ringside-connection"), Some("sim/b"));
    assert_eq!(attempts_for(&sim, "sk-sim-a"), 1);
    // An operator reset is durable too.
    let (s, _) = proxy.admin("POST", "/admin/connections/sim/a/reset");
    assert_eq!(s, 200);
    let mut proxy = proxy;
    assert!(proxy.terminate().success());
    let dir = std::mem::replace(&mut proxy.dir, tempdir::new());
    drop(proxy);
    let proxy = Proxy::start_in(driver, 2, "", &body, dir);
    let (_, c) = proxy.admin("GET", "/admin/connections");
    assert_eq!(c["connections"][0]["state"], "active", "{c}");
}

fn session_affinity_pins_and_repins(driver: &str) {
    let sim = start_sim(SimOptions::default());
    // Two equal keys (round robin would alternate), pins for a minute.
    let body = priority_keys(sim.addr, &["a", "b"], "").replace("priority = 1", "priority = 0")
        + "[session]\naffinity_ttl_ms = 60000\n";
    let proxy = Proxy::start(driver, 2, "", &body);
    let on = |session: &str| {
        let r = proxy.post(
            "/v1/chat/completions",
            &[("x-session-id", session)],
            &chat("m", false),
        );
        assert_eq!(r.status, 200, "{}", r.text());
        r.header("x-ringside-connection")
            .unwrap_or_default()
            .to_string()
    };
    let first = on("s1");
    for _ in 0..6 {
        assert_eq!(on("s1"), first, "the session stays on its connection");
    }
    // Without a session header, requests spread.
    let mut seen = std::collections::HashSet::new();
    for _ in 0..8 {
        let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
        seen.insert(
            r.header("x-ringside-connection")
                .unwrap_or_default()
                .to_string(),
        );
    }
    assert_eq!(seen.len(), 2, "{seen:?}");
    // The pinned key starts refusing: the session moves and stays on the other one.
    let key = if first == "sim/a" {
        "sk-sim-a"
    } else {
        "sk-sim-b"
    };
    let spec = format!(r#"{{"key":"{key}","spec":"429;retry-after=30"}}"#);
    let r =
        ringside::demo::client::request(sim.addr, "POST", "/_sim/faults", &[], spec.as_bytes(), T)
            .unwrap();
    assert_eq!(r.status, 200);
    let moved = on("s1");
    assert_ne!(moved, first);
    for _ in 0..4 {
        assert_eq!(on("s1"), moved, "re-pinned");
    }
    // The admin list reads the store, whose writer thread commits in batches: the re-pin
    // shows up there shortly after the request that made it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let pins = loop {
        let (_, pins) = proxy.admin("GET", "/admin/pins");
        let list = pins["pins"].as_array().cloned().unwrap_or_default();
        if list.iter().any(|p| p["connection"] == moved.as_str())
            || std::time::Instant::now() > deadline
        {
            break pins;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let list = pins["pins"].as_array().cloned().unwrap_or_default();
    assert!(
        list.iter().any(|p| p["connection"] == moved.as_str()),
        "{pins}"
    );
    assert!(!pins.to_string().contains("s1"), "sessions are hashed");
    // The session header never reaches the upstream.
    let seen = ringside::demo::client::request(sim.addr, "GET", "/_sim/requests", &[], b"", T)
        .unwrap()
        .text();
    assert!(!seen.contains("x-session-id"), "session header forwarded");
}

/// A session is pinned to a connection that served an answer whole: a stream the upstream
/// broke off after its head pins nothing.
fn a_stream_broken_off_pins_no_session(driver: &str) {
    let mut opts = SimOptions::default();
    // The first request of the session: key a refuses, key b's stream breaks off after two
    // events (after the commit: nothing is retried).
    for fault in [
        "key:sk-sim-a=429;times=1",
        "key:sk-sim-b=reset-mid-stream;after=2;times=1",
    ] {
        opts.faults.push(parse_fault_arg(fault).unwrap());
    }
    let sim = start_sim(opts);
    let body = priority_keys(sim.addr, &["a", "b"], "") + "[session]\naffinity_ttl_ms = 60000\n";
    let proxy = Proxy::start(driver, 2, "", &body);
    let on = |stream: bool| {
        proxy.post(
            "/v1/chat/completions",
            &[("x-session-id", "s")],
            &chat("m", stream),
        )
    };
    let r = on(true);
    assert_eq!(r.header("x-ringside-connection"), Some("sim/b"));
    assert!(
        !r.text().contains("[DONE]"),
        "the stream was cut: {}",
        r.text()
    );
    // Both keys usable again: a session pinned to b would go to b; one not pinned goes to a.
    for key in ["a", "b"] {
        let (s, _) = proxy.admin("POST", &format!("/admin/connections/sim/{key}/reset"));
        assert_eq!(s, 200);
    }
    let r = on(false);
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("x-ringside-connection"),
        Some("sim/a"),
        "a broken stream pinned its session"
    );
}

/// SIGKILL, no drain: a key the provider rate limited for 30 s is still cooling after the
/// restart, with about the time it had left, and is not asked again (a crash loop must not
/// hammer it).
fn a_cooldown_survives_a_kill_with_the_time_it_has_left(driver: &str) {
    let mut opts = SimOptions::default();
    opts.faults
        .push(parse_fault_arg("key:sk-sim-a=429;retry-after=30").unwrap());
    let sim = start_sim(opts);
    let body = priority_keys(sim.addr, &["a", "b"], "");
    let mut proxy = Proxy::start(driver, 2, "", &body);
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
    assert_eq!(r.header("x-ringside-connection"), Some("sim/b"));
    assert_eq!(attempts_for(&sim, "sk-sim-a"), 1);
    // The state is written once a second, off the request path.
    std::thread::sleep(std::time::Duration::from_millis(2_500));
    let _ = proxy.child.kill();
    let _ = proxy.child.wait();
    let dir = std::mem::replace(&mut proxy.dir, tempdir::new());
    drop(proxy);

    let proxy = Proxy::start_in(driver, 2, "", &body, dir);
    let (_, c) = proxy.admin("GET", "/admin/connections");
    let a = &c["connections"][0];
    assert_eq!(a["state"], "cooling", "{c}");
    let left = a["cooling_ms"].as_u64().unwrap_or(0);
    assert!((10_000..=30_000).contains(&left), "{left} ms left: {c}");
    for _ in 0..3 {
        let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
        assert_eq!(r.header("x-ringside-connection"), Some("sim/b"));
    }
    assert_eq!(attempts_for(&sim, "sk-sim-a"), 1, "not asked again");
}

/// The spacing a key learned from its rate-limit headers (1 request left of 60, the window
/// resetting in 30 s: one request every 15 s) is still in force after a SIGKILL and restart.
fn learned_pacing_survives_a_kill(driver: &str) {
    let body = r#"{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}"#;
    let answer = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nx-ratelimit-limit-requests: 60\r\nx-ratelimit-remaining-requests: 1\r\nx-ratelimit-reset-requests: 30s\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let up = raw_upstream(answer.into_bytes(), false);
    let config = format!(
        "[[providers]]\nid = \"raw\"\ndialect = \"openai\"\nbase_url = \"http://{}/v1\"\n  [[providers.connections]]\n  id = \"k\"\n  key_env = \"SIM_KEY_A\"\n  models = [\"m\"]\n",
        up.addr
    );
    let learned = |p: &Proxy| {
        let (_, q) = p.admin("GET", "/admin/queues");
        q["queues"][0]["learned_spacing_ms"].as_u64().unwrap_or(0)
    };
    let mut proxy = Proxy::start(driver, 1, "", &config);
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(learned(&proxy), 15_000);
    std::thread::sleep(std::time::Duration::from_millis(2_500));
    let _ = proxy.child.kill();
    let _ = proxy.child.wait();
    let dir = std::mem::replace(&mut proxy.dir, tempdir::new());
    drop(proxy);
    let proxy = Proxy::start_in(driver, 1, "", &config, dir);
    assert_eq!(
        learned(&proxy),
        15_000,
        "the spacing came back with the restart"
    );
}

/// A 429's rate-limit headers (no request left, the window resetting in 20 s) cool or lock the
/// key by their hint; they do not also space it, which held requests that had already chosen
/// the key for the whole window while its siblings were free.
fn a_429_teaches_its_key_no_pacing(driver: &str) {
    let mut opts = SimOptions::default();
    opts.faults
        .push(parse_fault_arg("key:sk-sim-a=429;ratelimit-headers").expect("fault"));
    let sim = start_sim(opts);
    let proxy = Proxy::start(driver, 1, "", &priority_keys(sim.addr, &["a", "b"], ""));
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("x-ringside-connection"), Some("sim/b"));
    let (_, q) = proxy.admin("GET", "/admin/queues");
    let spacing: Vec<u64> = q["queues"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| c["learned_spacing_ms"].as_u64().unwrap_or(0))
        .collect();
    assert_eq!(spacing, [0, 0], "{q}");
}
