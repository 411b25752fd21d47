//! What an operator relies on: credentials and internal headers never forwarded, a graceful
//! shutdown that drains a live stream, `/v1/models` and the metrics.

use crate::both_drivers;
use crate::common::*;
use crate::sim_proxy;
use ringside::demo::client;
use ringside::simulate::SimOptions;
use std::io::{Read, Write};

both_drivers!(
    credentials_and_internal_headers_never_forwarded,
    graceful_shutdown_drains_a_live_stream,
    models_and_metrics,
);

fn credentials_and_internal_headers_never_forwarded(driver: &str) {
    let (sim, proxy) = sim_proxy(driver, SimOptions::default());
    let headers = [
        ("authorization", "Bearer client-secret-123"),
        ("x-api-key", "client-secret-456"),
        ("x-ringside-session", "sess-1"),
        ("x-ringside-lease-owner", "vlo_secret"),
        ("x-session-id", "sess-2"),
        (
            "traceparent",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        ),
    ];
    let r = proxy.post("/v1/chat/completions", &headers, &chat("smart", false));
    assert_eq!(r.status, 200);
    let seen = sim.state.stats.recent_json().to_string();
    assert!(
        !seen.contains("client-secret"),
        "client credentials forwarded: {seen}"
    );
    assert!(
        !seen.contains("sess-1") && !seen.contains("sess-2") && !seen.contains("vlo_secret"),
        "{seen}"
    );
    assert!(!seen.to_ascii_lowercase().contains("x-ringside"), "{seen}");
    assert!(
        seen.contains("sk-sim-a") || seen.contains("sk-sim-b"),
        "the connection's key is injected"
    );
    assert!(
        seen.contains("0af7651916cd43dd8448eb211c80319c"),
        "traceparent passes through"
    );
    // And the upstream key never reaches the client.
    assert!(!String::from_utf8_lossy(&r.raw_body).contains("sk-sim"));
    assert!(!r.headers.iter().any(|(_, v)| v.contains("sk-sim")));
}

fn graceful_shutdown_drains_a_live_stream(driver: &str) {
    let (_sim, mut proxy) = sim_proxy(
        driver,
        SimOptions {
            events: 8,
            interval_ms: 100,
            ..Default::default()
        },
    );
    let mut s = raw_client(proxy.addr);
    let req = raw_chat("smart", true);
    s.write_all(req.as_bytes()).unwrap();
    let mut tmp = [0u8; 4096];
    let mut got = Vec::new();
    while !got.windows(6).any(|w| w == b"data: ") {
        let n = s.read(&mut tmp).unwrap();
        assert!(n > 0);
        got.extend_from_slice(&tmp[..n]);
    }
    // SIGTERM mid-stream: the stream still completes, then the process exits 0.
    let p = proxy.child.id();
    let killer = std::thread::spawn(move || unsafe { libc::kill(p as i32, libc::SIGTERM) });
    got.extend_from_slice(&read_all(s));
    killer.join().unwrap();
    let text = String::from_utf8_lossy(&got);
    assert!(
        text.contains("data: [DONE]"),
        "stream cut by shutdown: {text}"
    );
    assert!(text.to_ascii_lowercase().contains("connection: close") || text.ends_with("0\r\n\r\n"));
    let status = proxy.terminate();
    assert!(status.success(), "exit status {status:?}");
}

fn models_and_metrics(driver: &str) {
    let (_sim, proxy) = sim_proxy(driver, SimOptions::default());
    let r = client::request(proxy.addr, "GET", "/v1/models", &[], b"", T).unwrap();
    let ids: Vec<String> = r.json()["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_string())
        .collect();
    assert!(
        ids.contains(&"smart".into())
            && ids.contains(&"gpt-4o-mini".into())
            && ids.contains(&"claude-x".into()),
        "{ids:?}"
    );
    // One model, in each dialect's shape; an id with a slash may come percent-encoded.
    let get = |path: &str, headers: &[(&str, &str)]| {
        client::request(proxy.addr, "GET", path, headers, b"", T).unwrap()
    };
    let r = get("/v1/models/smart", &[]);
    assert_eq!(
        (r.status, r.json()["object"].as_str()),
        (200, Some("model"))
    );
    assert_eq!(r.json()["id"], "smart");
    let r = get("/v1/models/sim%2Fgpt-4o-mini", &[]);
    assert_eq!(r.json()["id"], "sim/gpt-4o-mini", "{}", r.text());
    let r = get(
        "/v1/models/claude-x",
        &[("anthropic-version", "2023-06-01")],
    );
    assert_eq!(
        (r.json()["type"].as_str(), r.json()["id"].as_str()),
        (Some("model"), Some("claude-x"))
    );
    let r = get("/v1/models/nope", &[]);
    assert_eq!(
        (r.status, r.json()["error"]["code"].as_str()),
        (404, Some("model_not_found"))
    );
    let r = get("/v1/models/nope", &[("anthropic-version", "2023-06-01")]);
    assert_eq!(
        (r.status, r.json()["error"]["type"].as_str()),
        (404, Some("not_found_error"))
    );
    proxy.post("/v1/chat/completions", &[], &chat("smart", false));
    let m = proxy.metrics();
    let want = if driver == "uring" {
        "io_uring"
    } else {
        "epoll"
    };
    assert!(
        m.contains(&format!(
            "ringside_driver{{core=\"0\",driver=\"{want}\"}} 1"
        )),
        "{m}"
    );
    assert!(
        m.contains("ringside_requests_total{route=\"smart\",status=\"200\"} 1"),
        "{m}"
    );
    assert!(m.contains("outcome=\"ok\"} 1"), "{m}");
    assert!(!m.contains("sk-sim"));
}
