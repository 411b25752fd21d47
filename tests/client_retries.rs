//! Client retries known by what they send, end to end on both drivers: agents whose retries
//! carry no usable retry count (Claude Code sends `x-stainless-retry-count: 0` on every try,
//! Codex sends none) repeat the same request after Ringside gave up on it; each repeat gets
//! what is left of the first one's attempt budget, so upstream attempts grow by one per client
//! retry instead of by the whole budget. Measured as the amplification the issue names: client
//! requests × Ringside's upstream attempts.

mod common;
use common::*;
use ringside::simulate::{SimOptions, parse_fault_arg};

both_drivers!(
    an_agents_repeats_spend_one_budget,
    other_requests_and_other_sessions_keep_their_own_budget,
    an_answered_retry_ends_the_retries,
);

/// Three keys that always fail with a 500 and never cool (`base_ms = 0`, no breaker), so that
/// every attempt Ringside makes reaches the simulator; 3 attempts per request, one per key.
fn failing(driver: &str, window_ms: u64) -> (ringside::simulate::Simulator, Proxy) {
    let mut opts = SimOptions::default();
    for key in ["sk-sim-a", "sk-sim-b", "sk-sim-c"] {
        opts.faults
            .push(parse_fault_arg(&format!("key:{key}=500")).expect("fault"));
    }
    let sim = start_sim(opts);
    let extra = "  [providers.breaker]\n  open_at = 1000\n  [providers.cooldown]\n  base_ms = 0\n";
    let body = priority_keys(sim.addr, &["a", "b", "c"], extra)
        + &format!("[upstream]\nmax_attempts = 3\n[resilience]\nretry_window_ms = {window_ms}\n");
    let proxy = Proxy::start(driver, 2, "", &body);
    (sim, proxy)
}

fn upstream_attempts(sim: &ringside::simulate::Simulator) -> u64 {
    ["sk-sim-a", "sk-sim-b", "sk-sim-c"]
        .iter()
        .map(|k| attempts_for(sim, k))
        .sum()
}

/// Six tries of one request, as each agent sends them: the upstream attempts they cost.
fn six_tries(proxy: &Proxy, headers: &[(&str, &str)]) -> Vec<u16> {
    (0..6)
        .map(|_| {
            proxy
                .post("/v1/chat/completions", headers, &chat("m", false))
                .status
        })
        .collect()
}

fn an_agents_repeats_spend_one_budget(driver: &str) {
    let claude_code = [
        ("x-stainless-retry-count", "0"),
        ("x-claude-code-session-id", "c1"),
    ];
    let codex = [("session-id", "x1")];
    for (agent, headers) in [("claude code", &claude_code[..]), ("codex", &codex[..])] {
        // Without the rule (window 0): every try spends the whole budget, 6 × 3.
        let (sim, proxy) = failing(driver, 0);
        let statuses = six_tries(&proxy, headers);
        assert!(statuses.iter().all(|&s| s == 500), "{statuses:?}");
        assert_eq!(upstream_attempts(&sim), 18, "{agent} without the rule");
        // With it: the first try's 3, then one attempt per repeat.
        let (sim, proxy) = failing(driver, 60_000);
        let statuses = six_tries(&proxy, headers);
        assert!(statuses.iter().all(|&s| s == 500), "{statuses:?}");
        let n = upstream_attempts(&sim);
        eprintln!("{agent}: 6 client requests, {n} upstream attempts");
        assert_eq!(n, 3 + 5, "{agent}: amplification {:.2}", n as f64 / 6.0);
        // The decision record says why the budget was smaller.
        let (_, d) = proxy.admin("GET", "/admin/decisions?limit=1");
        let last = &d["decisions"][0];
        assert_eq!(last["same_request_retry"], true, "{last}");
        assert!(last["client_retry"].as_u64() >= Some(3), "{last}");
    }
}

fn other_requests_and_other_sessions_keep_their_own_budget(driver: &str) {
    let (sim, proxy) = failing(driver, 60_000);
    let ask = |session: &str, text: &str| {
        let body = chat("m", false).replace("\"hi\"", &format!("\"{text}\""));
        proxy.post("/v1/chat/completions", &[("x-session-id", session)], &body)
    };
    assert_eq!(ask("s1", "hello").status, 500);
    assert_eq!(upstream_attempts(&sim), 3);
    // Another question in the same session, and the same question in another session: new
    // requests, each with its whole budget.
    assert_eq!(ask("s1", "goodbye").status, 500);
    assert_eq!(upstream_attempts(&sim), 6);
    assert_eq!(ask("s2", "hello").status, 500);
    assert_eq!(upstream_attempts(&sim), 9);
    // The first one again: a retry.
    assert_eq!(ask("s1", "hello").status, 500);
    assert_eq!(upstream_attempts(&sim), 10);
}

/// Given up on, then answered on its retry: the retries are over. The same request again (a
/// client that sends identical requests: a load tool, one prompt behind a gateway) is a new
/// one with its whole budget, and fails over past a key that fails.
fn an_answered_retry_ends_the_retries(driver: &str) {
    let (sim, proxy) = failing(driver, 60_000);
    let ask = || proxy.post("/v1/chat/completions", &[], &chat("m", false));
    assert_eq!(ask().status, 500);
    assert_eq!(upstream_attempts(&sim), 3);
    for key in ["sk-sim-a", "sk-sim-b", "sk-sim-c"] {
        set_fault(sim.addr, key, None);
    }
    let r = ask();
    assert_eq!(r.status, 200, "{}", r.text());
    let (_, d) = proxy.admin("GET", "/admin/decisions?limit=1");
    assert_eq!(d["decisions"][0]["same_request_retry"], true, "{d}");
    // Key a fails again: a new request goes on to b.
    set_fault(sim.addr, "sk-sim-a", Some("500"));
    let r = ask();
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("x-ringside-connection"), Some("sim/b"));
    let (_, d) = proxy.admin("GET", "/admin/decisions?limit=1");
    assert!(d["decisions"][0].get("same_request_retry").is_none(), "{d}");
}
