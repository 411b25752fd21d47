//! Claude subscription accounts end to end, on io_uring and on epoll, against the simulator's
//! subscription mode (fault `usage-wall`): the low-priority lane keeps an account at its
//! usage wall serving without the client seeing an error; a busy slot is waited out only
//! within the request's deadline, then the normal fallback answers; the weekly limit reset is
//! claimed once for many concurrent wall answers; an account without the opt-ins behaves as
//! any other.

mod common;
use common::*;
use ringside::simulate::{SimOptions, parse_fault_arg};
use std::time::{Duration, Instant};

both_drivers!(
    a_wall_is_served_on_the_lane,
    a_slot_busy_wait_past_the_deadline_ends_in_the_fallback,
    the_limit_reset_is_claimed_once_for_concurrent_walls,
    an_account_without_the_opt_in_behaves_as_before,
);

fn sim_with(faults: &[&str]) -> ringside::simulate::Simulator {
    let mut opts = SimOptions::default();
    for f in faults {
        opts.faults.push(parse_fault_arg(f).expect("fault"));
    }
    start_sim(opts)
}

/// One Anthropic OAuth provider `claude` with accounts a and b (a first), serving `m`; each
/// account's own settings in `a` and `b`.
fn subscription(sim: std::net::SocketAddr, a: &str, b: &str) -> String {
    format!(
        "[[providers]]\nid = \"claude\"\ndialect = \"anthropic\"\nauth = \"oauth\"\nbase_url = \"http://{sim}/v1\"\n\
         [[providers.connections]]\nid = \"a\"\nkey_env = \"SIM_KEY_A\"\nmodels = [\"m\"]\npriority = 0\n{a}\n\
         [[providers.connections]]\nid = \"b\"\nkey_env = \"SIM_KEY_B\"\nmodels = [\"m\"]\npriority = 1\n{b}\n"
    )
}

const MESSAGE: &str =
    r#"{"model":"m","max_tokens":16,"messages":[{"role":"user","content":"hello"}]}"#;

/// The requests key `key` sent, as the simulator saw them: whether each carried the lane's
/// header.
fn slow_flags(sim: &ringside::simulate::Simulator, key: &str) -> Vec<bool> {
    let r = client_get(sim.addr, "/_sim/requests");
    r["requests"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|q| q["key"] == key && q["path"] == "/v1/messages")
        .map(|q| {
            q["headers"].as_array().into_iter().flatten().any(|h| {
                h[0].as_str() == Some("anthropic-usage-limit") && h[1].as_str() == Some("slow")
            })
        })
        .collect()
}

fn client_get(a: std::net::SocketAddr, path: &str) -> serde_json::Value {
    ringside::demo::client::request(a, "GET", path, &[], b"", Duration::from_secs(5))
        .expect("simulator")
        .json()
}

fn wall_of(proxy: &Proxy, conn: &str) -> serde_json::Value {
    let (_, v) = proxy.admin("GET", "/admin/connections");
    v["connections"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["connection"] == conn)
        .cloned()
        .unwrap_or_default()
}

fn a_wall_is_served_on_the_lane(driver: &str) {
    let sim = sim_with(&["key:sk-sim-a=usage-wall"]);
    let cfg = subscription(sim.addr, "low_priority_lane = true", "");
    let proxy = Proxy::start(driver, 2, "", &cfg);
    let r = proxy.post("/v1/messages", &[], MESSAGE);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("x-ringside-connection"), Some("claude/a"));
    // The wall's 429, then the same account in the lane.
    assert_eq!(slow_flags(&sim, "sk-sim-a"), [false, true]);
    let id = r.header("x-request-id").unwrap_or_default().to_string();
    let d = proxy.decision(&id);
    let first = &d["attempts"][0];
    assert_eq!(first["status"], 429, "{d}");
    assert_eq!(first["decision"], "same_account", "{d}");
    assert_eq!(first["via"], "low-priority-accepted", "{d}");
    // Every later request of the account goes in the lane at once, whichever core takes it.
    for _ in 0..6 {
        let r = proxy.post("/v1/messages", &[], MESSAGE);
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(attempt_count(&r), 1);
    }
    let flags = slow_flags(&sim, "sk-sim-a");
    assert_eq!(flags.len(), 8, "{flags:?}");
    assert!(flags[1..].iter().all(|&s| s), "{flags:?}");
    assert_eq!(attempts_for(&sim, "sk-sim-b"), 0, "b never needed");
    // Never cooled; the admin API shows the lane.
    let a = wall_of(&proxy, "a");
    assert_eq!(a["state"], "active", "{a}");
    let lane = &a["usage_wall"]["lane"];
    assert_eq!(lane["state"], "active", "{a}");
    assert_eq!(lane["served"], 7, "{a}");
    assert_eq!(a["usage_wall"]["counts"]["activations"], 1, "{a}");
    assert!(wall_of(&proxy, "b")["usage_wall"].is_null());
    let m = proxy.metrics();
    let labels = "provider=\"claude\",connection=\"a\"";
    for line in [
        format!("ringside_usage_wall_lane_active{{{labels}}} 1"),
        format!("ringside_usage_wall_lane_activations_total{{{labels}}} 1"),
    ] {
        assert!(m.contains(&line), "{line} in\n{m}");
    }
    // An operator's reset ends the lane: the next request meets the wall again.
    let (s, _) = proxy.admin("POST", "/admin/connections/claude/a/reset");
    assert_eq!(s, 200);
    let a = wall_of(&proxy, "a");
    assert_eq!(
        a["usage_wall"]["lane"]["last_end"]["reason"], "operator",
        "{a}"
    );
}

fn a_slot_busy_wait_past_the_deadline_ends_in_the_fallback(driver: &str) {
    let sim = sim_with(&["key:sk-sim-a=usage-wall;slot-busy=100;slow-retry-after=5"]);
    let cfg = subscription(sim.addr, "low_priority_lane = true", "");
    let proxy = Proxy::start(driver, 1, "", &cfg);
    let started = Instant::now();
    let deadline = [("x-ringside-deadline-ms", "8000")];
    let r = proxy.post("/v1/messages", &deadline, MESSAGE);
    let took = started.elapsed();
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("x-ringside-connection"), Some("claude/b"));
    // The lane's waits stop 5 s short of the deadline: b answers well within it.
    assert!(took < Duration::from_millis(8_000), "{took:?}");
    let id = r.header("x-request-id").unwrap_or_default().to_string();
    let d = proxy.decision(&id);
    let vias: Vec<&str> = d["attempts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a["via"].as_str())
        .collect();
    assert_eq!(vias.first(), Some(&"low-priority-accepted"), "{d}");
    assert!(vias.contains(&"slot-busy"), "{d}");
    let a = wall_of(&proxy, "a");
    let last_end = &a["usage_wall"]["lane"]["last_end"]["reason"];
    assert_eq!(last_end, "max_wait", "{a}");
    // Once the lane ended, the wall's 429 took the ordinary path: a cools.
    assert_eq!(a["state"], "cooling", "{a}");
}

fn the_limit_reset_is_claimed_once_for_concurrent_walls(driver: &str) {
    let sim = sim_with(&["key:sk-sim-a=usage-wall;offer=none;limit-reset=reset"]);
    let a = "auto_limit_reset = true\norganization_uuid = \"sim-org-0001\"";
    let cfg = subscription(sim.addr, a, "");
    let proxy = Proxy::start(driver, 2, "", &cfg);
    for r in post_concurrently(proxy.addr, "/v1/messages", MESSAGE, 20) {
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.header("x-ringside-connection"), Some("claude/a"));
    }
    let accounts = client_get(sim.addr, "/_sim/accounts");
    assert_eq!(accounts["walls"]["sk-sim-a"]["claims"], 1, "{accounts}");
    assert_eq!(attempts_for(&sim, "sk-sim-b"), 0);
    let a = wall_of(&proxy, "a");
    assert_eq!(a["usage_wall"]["counts"]["claims"], 1, "{a}");
    assert_eq!(a["usage_wall"]["counts"]["claims_granted"], 1, "{a}");
    // The last word is the claim's, or a sibling's told of it without a call.
    let last = &a["usage_wall"]["limit_reset"]["last"]["outcome"];
    assert!(last == "reset" || last == "recent_reset", "{a}");
}

fn an_account_without_the_opt_in_behaves_as_before(driver: &str) {
    let sim = sim_with(&["key:sk-sim-a=usage-wall"]);
    let proxy = Proxy::start(driver, 2, "", &subscription(sim.addr, "", ""));
    let r = proxy.post("/v1/messages", &[], MESSAGE);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("x-ringside-connection"), Some("claude/b"));
    assert!(
        r.header("x-ringside-attempts")
            .unwrap_or("")
            .contains("claude/a 429"),
        "{:?}",
        r.header("x-ringside-attempts")
    );
    assert_eq!(slow_flags(&sim, "sk-sim-a"), [false]);
    let a = wall_of(&proxy, "a");
    assert_eq!(a["state"], "cooling", "{a}");
    assert!(a["usage_wall"].is_null(), "{a}");
}
