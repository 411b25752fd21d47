//! An attempt's verdict is final when its body ends: a committed stream that fails afterwards
//! (an in-band error event, a reset, a missing terminal event) cools its connection like the
//! same failure before the commit would, the client still gets exactly one error event, the
//! next request goes to another key, and the decision record says how the stream ended.

use crate::both_drivers;
use crate::common::*;
use crate::sim_proxy;
use ringside::simulate::{SimOptions, parse_fault_arg};
use std::time::{Duration, Instant};

both_drivers!(
    an_in_band_error_after_commit_cools_the_key,
    an_in_band_rate_limit_takes_its_wait_from_the_streams_head,
    a_relay_quota_message_inside_a_stream_is_quota_exhaustion,
    a_reset_after_commit_cools_the_key,
    a_stream_without_its_terminal_event_cools_the_key,
    a_clean_stream_leaves_the_key_healthy,
);

/// Key `a` (tried first) answers with `fault`; key `b` is healthy. Events come 100 ms apart,
/// so that the stream is committed before its failure arrives (one that arrives whole is
/// judged before the commit and tried elsewhere).
fn with_fault_on_a(driver: &str, fault: &str) -> (ringside::simulate::Simulator, Proxy) {
    let spec = format!("key:sk-sim-a={fault};interval=100");
    sim_proxy(
        driver,
        SimOptions {
            events: 6,
            faults: vec![parse_fault_arg(&spec).expect("fault")],
            ..Default::default()
        },
    )
}

/// Connection `sim/a` as the admin API shows it, once it has a last error (the admin port's
/// replica follows the cores' events, so it may trail the answer by a moment).
fn connection_a_after_failure(proxy: &Proxy) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let a = connection_a(proxy);
        if !a["last_error"].is_null() || Instant::now() > deadline {
            return a;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Connection `sim/a` as the admin API shows it now.
fn connection_a(proxy: &Proxy) -> serde_json::Value {
    let (_, v) = proxy.admin("GET", "/admin/connections");
    v["connections"]
        .as_array()
        .and_then(|l| {
            l.iter()
                .find(|c| c["provider"] == "sim" && c["connection"] == "a")
        })
        .cloned()
        .unwrap_or_default()
}

/// The first stream goes to `a` and fails after its commit; returns its text and request id.
fn first_stream(proxy: &Proxy) -> (String, String) {
    let r = proxy.post("/v1/chat/completions", &[], &chat("smart", true));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("x-ringside-connection"), Some("sim/a"));
    let id = r.header("x-request-id").unwrap_or_default().to_string();
    (r.text(), id)
}

/// The provider breaker's failure count, once it reaches `want` (the admin port's replica may
/// trail the cores by a moment).
fn breaker_failures(proxy: &Proxy, want: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (_, v) = proxy.admin("GET", "/admin/breakers");
        let n = v["breakers"][0]["failures"].as_u64().unwrap_or(0);
        if n >= want || Instant::now() > deadline {
            return n;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// What the decision record, the key's state and the breaker say after a failure after
/// commit, and the next request going to `b`. `breaker`: failures the provider's breaker
/// counts (overload and transport failures count; a quota wall does not).
fn assert_cooled(proxy: &Proxy, id: &str, reason: &str, error_code: &str, breaker: u64) {
    let d = proxy.decision(id);
    assert_eq!(d["outcome"], "failed_after_commit", "{d}");
    assert_eq!(d["error_code"], error_code, "{d}");
    let a = connection_a_after_failure(proxy);
    assert_eq!(a["last_error"]["reason"], reason, "{a}");
    assert!(a["cooling_ms"].as_u64().unwrap_or(0) > 0, "{a}");
    assert_eq!(
        breaker_failures(proxy, breaker),
        breaker,
        "breaker failures"
    );
    let r = proxy.post("/v1/chat/completions", &[], &chat("smart", false));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("x-ringside-connection"), Some("sim/b"));
    assert!(
        proxy
            .metrics()
            .contains("ringside_streams_failed_after_commit_total 1"),
        "{}",
        proxy.metrics()
    );
}

fn an_in_band_error_after_commit_cools_the_key(driver: &str) {
    let (_sim, proxy) = with_fault_on_a(driver, "sse-error-after;after=3");
    let (text, id) = first_stream(&proxy);
    // Three deltas, then the upstream's own error event and nothing of Ringside's.
    assert_eq!(text.matches("\"content\":").count(), 4, "{text}");
    assert_eq!(text.matches("overloaded_error").count(), 1, "{text}");
    assert_eq!(text.matches("\"error\"").count(), 1, "{text}");
    assert_cooled(&proxy, &id, "overloaded", "upstream_error_event", 1);
    let d = proxy.decision(&id);
    let detail = d["attempts"][0]["detail"].as_str().unwrap_or_default();
    assert!(detail.starts_with("in-band stream error"), "{d}");
}

/// A held stream lets go of its response head but the headers judging may read: an in-band
/// rate-limit error still takes its wait from the head's spent limit, and the client had
/// every header of the provider's head.
fn an_in_band_rate_limit_takes_its_wait_from_the_streams_head(driver: &str) {
    let (_sim, proxy) = with_fault_on_a(
        driver,
        "sse-error-after;after=2;error-type=rate_limit_error;message=Rate limit reached;\
         ratelimit-headers;provider-head",
    );
    let r = proxy.post("/v1/chat/completions", &[], &chat("smart", true));
    assert_eq!(r.status, 200, "{}", r.text());
    for name in ["cf-ray", "openai-processing-ms", "x-ratelimit-limit-tokens"] {
        assert!(r.header(name).is_some(), "the client's copy lacks {name}");
    }
    assert_eq!(r.header("x-ratelimit-reset-tokens"), Some("20s"));
    let id = r.header("x-request-id").unwrap_or_default().to_string();
    let d = proxy.decision(&id);
    assert_eq!(d["outcome"], "failed_after_commit", "{d}");
    // 20 s from the head's spent token limit (judged without it: about 2 s).
    let a = connection_a_after_failure(&proxy);
    // The error's type says rate limit: judged as the 429 it stands for, not a server error.
    assert_eq!(a["last_error"]["reason"], "rate_limited", "{a}");
    assert!(a["cooling_ms"].as_u64().unwrap_or(0) > 15_000, "{a}");
}

fn a_relay_quota_message_inside_a_stream_is_quota_exhaustion(driver: &str) {
    let (_sim, proxy) = with_fault_on_a(
        driver,
        "sse-error-after;after=2;error-type=upstream_error;message=额度不足，请充值",
    );
    let (text, id) = first_stream(&proxy);
    assert!(text.contains("额度不足"), "{text}");
    assert_cooled(&proxy, &id, "quota_exhausted", "upstream_error_event", 0);
}

fn a_reset_after_commit_cools_the_key(driver: &str) {
    let (_sim, proxy) = with_fault_on_a(driver, "reset-mid-stream;after=3");
    let (text, id) = first_stream(&proxy);
    assert_eq!(
        text.matches("\"code\":\"upstream_reset\"").count(),
        1,
        "{text}"
    );
    assert_cooled(&proxy, &id, "transport", "upstream_reset", 1);
}

fn a_stream_without_its_terminal_event_cools_the_key(driver: &str) {
    let (_sim, proxy) = with_fault_on_a(driver, "no-terminal");
    let (text, id) = first_stream(&proxy);
    assert_eq!(
        text.matches("upstream_no_terminal").count(),
        1,
        "one error event of Ringside's: {text}"
    );
    assert_cooled(&proxy, &id, "transport", "upstream_no_terminal", 1);
}

fn a_clean_stream_leaves_the_key_healthy(driver: &str) {
    let (_sim, proxy) = with_fault_on_a(driver, "none");
    for _ in 0..3 {
        let (text, id) = first_stream(&proxy);
        assert!(text.contains("[DONE]"), "{text}");
        assert_eq!(proxy.decision(&id)["outcome"], "ok");
    }
    let a = connection_a(&proxy);
    assert!(a["last_error"].is_null(), "{a}");
    assert_eq!(a["cooling_ms"].as_u64().unwrap_or(0), 0, "{a}");
}
