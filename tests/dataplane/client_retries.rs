//! A client's own retries count: a request that says it is a client's retry
//! (`x-stainless-retry-count`, as the OpenAI and Anthropic SDKs send it) gets what is left of
//! one attempt budget, so an SDK that retries anyway cannot multiply upstream attempts.

use crate::both_drivers;
use crate::common::*;
use ringside::simulate::{SimOptions, parse_fault_arg};

both_drivers!(client_retries_get_a_smaller_budget);

fn client_retries_get_a_smaller_budget(driver: &str) {
    // Four keys that always answer 429; a rule keeps the 429 on the request (no cooldown), so
    // every request may try up to `max_attempts` of them.
    let faults = ["a", "b", "c", "d"]
        .iter()
        .map(|k| parse_fault_arg(&format!("key:sk-sim-{k}=429")).expect("fault"))
        .collect();
    let sim = start_sim(SimOptions {
        faults,
        ..Default::default()
    });
    let keys = [
        ("a", "SIM_KEY_A"),
        ("b", "SIM_KEY_B"),
        ("c", "SIM_KEY_C"),
        ("d", "SIM_KEY_D"),
    ];
    let body = format!(
        "[upstream]\nmax_attempts = 3\n\n[resilience]\nmax_wait_ms = 0\n\n[[resilience.rules]]\nid = \"429-per-request\"\nstatuses = [429]\nreason = \"rate_limited\"\nscope = \"request\"\n\n{}",
        openai_provider("sim", sim.addr, &keys, "\"gpt-4o-mini\"")
    );
    let proxy = Proxy::start(driver, 2, "", &body);
    let (max_attempts, retries) = (3, 2);
    let attempts = || sim_stats(&sim)["total"].as_u64().unwrap_or(0);
    // Each a question of its own: the same request again would be known as a retry by what
    // it sends (tests/client_retries.rs), which this test leaves aside.
    let ask = |i: usize| chat("gpt-4o-mini", false).replace("\"hi\"", &format!("\"q{i}\""));
    for i in 0..10 {
        let r = proxy.post("/v1/chat/completions", &[], &ask(i));
        assert_eq!(r.status, 429, "{}", r.text());
    }
    assert_eq!(
        attempts(),
        10 * max_attempts,
        "first tries use the whole budget"
    );
    let retry_count = retries.to_string();
    let retry = [("x-stainless-retry-count", retry_count.as_str())];
    let mut id = String::new();
    for i in 0..100 {
        let r = proxy.post("/v1/chat/completions", &retry, &ask(100 + i));
        assert_eq!(r.status, 429, "{}", r.text());
        id = r.header("x-request-id").unwrap_or_default().to_string();
    }
    assert!(
        attempts() - 30 <= 100 * (max_attempts - retries),
        "client retries multiplied upstream attempts: {}",
        attempts() - 30
    );
    let d = proxy.decision(&id);
    assert_eq!(d["client_retry"], 2, "{d}");
    assert_eq!(d["attempts"].as_array().map_or(0, Vec::len), 1, "{d}");
    let m = proxy.metrics();
    assert!(
        m.contains("ringside_upstream_attempts_per_request_bucket{le=\"1\"} 100"),
        "{m}"
    );
}
