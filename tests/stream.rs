//! The stream guard end to end (what exists of it so far), on io_uring and on epoll: a stream
//! that ends without its terminal marker is a failure the client is told about, and the
//! scanner's figures reach the decision record.

mod common;
use common::*;
use ringside::simulate::{SimOptions, parse_fault_arg};

both_drivers!(
    missing_terminal_marker_is_a_failure_after_commit,
    stream_figures_reach_the_decision_record,
);

fn missing_terminal_marker_is_a_failure_after_commit(driver: &str) {
    let mut opts = SimOptions::default();
    opts.faults
        .push(parse_fault_arg("key:sk-sim-a=no-terminal").unwrap());
    let sim = start_sim(opts);
    let proxy = Proxy::start(driver, 1, "", &priority_keys(sim.addr, &["a"], ""));
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", true));
    assert_eq!(r.status, 200);
    let text = r.text();
    assert!(!text.contains("[DONE]"), "{text}");
    assert!(
        text.trim_end().ends_with("}") && text.contains("upstream_no_terminal"),
        "ends with the dialect's error event: {text}"
    );
    let id = r.header("x-request-id").unwrap_or_default().to_string();
    let (_, d) = proxy.admin("GET", &format!("/admin/decisions/{id}"));
    assert_eq!(d["outcome"], "failed_after_commit", "{d}");
    assert_eq!(d["stream_stats"]["terminal"], false);
    assert!(
        proxy
            .metrics()
            .contains("ringside_streams_failed_after_commit_total 1")
    );
    // A healthy stream is untouched.
    let opts = SimOptions {
        events: 3,
        ..Default::default()
    };
    let sim = start_sim(opts);
    let proxy = Proxy::start(driver, 1, "", &priority_keys(sim.addr, &["a"], ""));
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", true));
    assert!(r.text().ends_with("data: [DONE]\n\n"));
}

fn stream_figures_reach_the_decision_record(driver: &str) {
    let opts = SimOptions {
        events: 4,
        ..Default::default()
    };
    let sim = start_sim(opts);
    let body = priority_keys(sim.addr, &["a"], "")
        .replace("dialect = \"openai\"", "dialect = \"anthropic\"");
    let proxy = Proxy::start(driver, 1, "", &body);
    let msg = r#"{"model":"m","max_tokens":16,"stream":true,"messages":[{"role":"user","content":"hi"}]}"#;
    let r = proxy.post("/v1/messages", &[], msg);
    assert_eq!(r.status, 200);
    assert!(r.text().contains("message_stop"));
    let id = r.header("x-request-id").unwrap_or_default().to_string();
    let (_, d) = proxy.admin("GET", &format!("/admin/decisions/{id}"));
    let s = &d["stream_stats"];
    assert_eq!(s["terminal"], true, "{d}");
    assert!(s["text_bytes"].as_u64().unwrap_or(0) > 0, "{d}");
    assert!(s["output_tokens"].as_u64().is_some(), "{d}");
    assert_eq!(d["outcome"], "ok");
}
