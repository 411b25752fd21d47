//! The data plane end to end: the real binary against the simulator or a scripted upstream,
//! once on io_uring and once on epoll.

mod common;
use common::*;
use ringside::demo::client;
use ringside::simulate::{SimOptions, parse_fault_arg};
use std::io::{Read, Write};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

both_drivers!(
    json_and_sse_pass_through,
    anthropic_and_responses_streams,
    first_event_is_not_buffered,
    byte_exact_chunked_and_length_bodies,
    close_delimited_body_is_rechunked,
    keep_alive_reuses_one_upstream_connection,
    stale_pooled_connection_is_retried_on_a_fresh_one,
    reset_before_headers_fails_over,
    tls_failure_fails_over,
    client_disconnect_aborts_upstream,
    bad_input_gets_precise_statuses,
    an_early_answer_survives_a_client_still_sending,
    slow_sender_gets_408,
    idle_keep_alive_connection_is_closed,
    credentials_and_internal_headers_never_forwarded,
    graceful_shutdown_drains_a_live_stream,
    models_and_metrics,
    mid_stream_cut_ends_with_dialect_error_event,
);

fn sim_proxy(driver: &str, opts: SimOptions) -> (ringside::simulate::Simulator, Proxy) {
    let sim = start_sim(opts);
    let body = openai_provider(
        "sim",
        sim.addr,
        &[("a", "SIM_KEY_A"), ("b", "SIM_KEY_B")],
        "\"gpt-4o-mini\"",
    ) + &format!(
        "[[providers]]\nid = \"ant\"\ndialect = \"anthropic\"\nbase_url = \"http://{}/v1\"\n  [[providers.connections]]\n  id = \"c\"\n  key_env = \"SIM_KEY_C\"\n  models = [\"claude-x\"]\n",
        sim.addr
    ) + "[[routes]]\nname = \"smart\"\nstrategy = \"priority\"\ntargets = [{ provider = \"sim\", model = \"gpt-4o-mini\" }]\n";
    let proxy = Proxy::start(
        driver,
        2,
        "",
        &format!("[limits]\nmax_body_bytes = 65536\nheader_read_timeout_ms = 400\n\n{body}"),
    );
    (sim, proxy)
}

fn json_and_sse_pass_through(driver: &str) {
    let (sim, proxy) = sim_proxy(
        driver,
        SimOptions {
            events: 5,
            ..Default::default()
        },
    );
    let r = proxy.post("/v1/chat/completions", &[], &chat("smart", false));
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(
        v["model"], "gpt-4o-mini",
        "route name rewritten to the upstream model"
    );
    assert_eq!(r.header("x-ringside-route"), Some("smart"));
    assert_eq!(attempt_count(&r), 1);
    assert!(
        r.header("x-request-id")
            .is_some_and(|id| id.starts_with("rs-"))
    );
    let s = proxy.post(
        "/v1/chat/completions",
        &[("x-request-id", "my-id-1")],
        &chat("gpt-4o-mini", true),
    );
    assert_eq!(s.status, 200);
    assert_eq!(s.header("x-request-id"), Some("my-id-1"));
    assert_eq!(s.header("content-type"), Some("text/event-stream"));
    let text = s.text();
    assert_eq!(
        client::count_events(&s.body),
        8,
        "role + 5 deltas + finish + [DONE]: {text}"
    );
    assert!(text.ends_with("data: [DONE]\n\n"));
    assert_eq!(
        attempts_for(&sim, "sk-sim-a") + attempts_for(&sim, "sk-sim-b"),
        2
    );
}

fn anthropic_and_responses_streams(driver: &str) {
    let (_sim, proxy) = sim_proxy(
        driver,
        SimOptions {
            events: 3,
            ..Default::default()
        },
    );
    let body = r#"{"model":"claude-x","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"hi"}]}"#;
    let r = proxy.post("/v1/messages", &[("anthropic-version", "2023-06-01")], body);
    assert_eq!(r.status, 200);
    let t = r.text();
    assert!(
        t.starts_with("event: message_start\n")
            && t.ends_with("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"),
        "{t}"
    );
    let r = proxy.post(
        "/v1/responses",
        &[],
        r#"{"model":"gpt-4o-mini","stream":true,"input":"hi"}"#,
    );
    assert!(r.text().contains("event: response.completed"));
    // An Anthropic request for an OpenAI-only model is refused in the Anthropic dialect.
    let r = proxy.post(
        "/v1/messages",
        &[],
        r#"{"model":"gpt-4o-mini","max_tokens":1,"messages":[]}"#,
    );
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["type"], "error");
    assert_eq!(r.json()["error"]["code"], "no_executable_targets");
}

fn first_event_is_not_buffered(driver: &str) {
    // 4 events 400 ms apart: the stream lasts at least 1.2 s. The first event must reach the
    // client long before the stream ends (a buffering proxy delivers everything at the end).
    let (_sim, proxy) = sim_proxy(
        driver,
        SimOptions {
            events: 2,
            interval_ms: 400,
            ..Default::default()
        },
    );
    let mut s = raw_client(proxy.addr);
    let req = raw_chat("gpt-4o-mini", true);
    let t0 = Instant::now();
    s.write_all(req.as_bytes()).unwrap();
    let mut got = Vec::new();
    let mut tmp = [0u8; 8192];
    let mut first_event_at = None;
    loop {
        let n = s.read(&mut tmp).unwrap();
        assert!(n > 0, "stream ended early");
        got.extend_from_slice(&tmp[..n]);
        if first_event_at.is_none() && got.windows(6).any(|w| w == b"data: ") {
            first_event_at = Some(t0.elapsed());
        }
        if got.windows(12).any(|w| w == b"data: [DONE]") {
            break;
        }
    }
    let total = t0.elapsed();
    let first = first_event_at.unwrap();
    assert!(
        total >= Duration::from_millis(1100),
        "stream too short to judge: {total:?}"
    );
    assert!(
        total - first >= Duration::from_millis(700),
        "first event at {first:?} of {total:?}: buffered"
    );
}

fn raw_proxy(driver: &str, up: &RawUpstream, workers: usize) -> Proxy {
    let body = format!(
        "[[providers]]\nid = \"raw\"\ndialect = \"openai\"\nbase_url = \"http://{}/v1\"\n  [[providers.connections]]\n  id = \"k\"\n  key_env = \"SIM_KEY_A\"\n  models = [\"m\"]\n",
        up.addr
    );
    Proxy::start(driver, workers, "", &body)
}

fn byte_exact_chunked_and_length_bodies(driver: &str) {
    // Odd chunk sizes, an extension and a trailer: the client must get the very same bytes.
    let chunked_body =
        b"7;x=y\r\ndata: {\r\n1\r\n\"\r\n13\r\na\":1}\n\ndata: [DONE]\r\n0\r\nx-trailer: 1\r\n\r\n"
            .to_vec();
    let mut resp =
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
            .to_vec();
    resp.extend_from_slice(&chunked_body);
    let up = raw_upstream(resp, false);
    let proxy = raw_proxy(driver, &up, 1);
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", true));
    assert_eq!(r.status, 200);
    assert_eq!(r.raw_body, chunked_body, "chunked body relayed verbatim");
    assert_eq!(r.text(), "data: {\"a\":1}\n\ndata: [DONE]");

    // Broken framing before anything reached the client: a clean 502, not a half response.
    let up = raw_upstream(
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n".to_vec(),
        false,
    );
    let proxy = raw_proxy(driver, &up, 1);
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", true));
    assert_eq!(r.status, 502, "{}", r.text());

    let json = br#"{"id":"x","choices":[{"message":{"content":"\u00e9\n"}}]}"#;
    let mut resp = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        json.len()
    )
    .into_bytes();
    resp.extend_from_slice(json);
    let up = raw_upstream(resp, false);
    let proxy = raw_proxy(driver, &up, 1);
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
    assert_eq!(r.body, json.to_vec());
    assert_eq!(
        r.header("content-length"),
        Some(json.len().to_string().as_str())
    );
}

fn close_delimited_body_is_rechunked(driver: &str) {
    let resp =
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n{\"close\":\"delimited\"}"
            .to_vec();
    let up = raw_upstream(resp, true);
    let proxy = raw_proxy(driver, &up, 1);
    // A keep-alive client gets it re-framed as chunked and can send a second request.
    let mut s = raw_client(proxy.addr);
    let req = raw_chat("m", false);
    for _ in 0..2 {
        s.write_all(req.as_bytes()).unwrap();
        let mut got = Vec::new();
        let mut tmp = [0u8; 4096];
        while !got.ends_with(b"0\r\n\r\n") {
            let n = s.read(&mut tmp).unwrap();
            assert!(
                n > 0,
                "connection closed: {}",
                String::from_utf8_lossy(&got)
            );
            got.extend_from_slice(&tmp[..n]);
        }
        let r = client::parse_reply(&got).unwrap();
        assert_eq!(r.header("transfer-encoding"), Some("chunked"));
        assert_eq!(r.body, b"{\"close\":\"delimited\"}");
    }
}

fn keep_alive_reuses_one_upstream_connection(driver: &str) {
    let json = b"{\"ok\":true}";
    let mut resp =
        format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n", json.len()).into_bytes();
    resp.extend_from_slice(json);
    let up = raw_upstream(resp, false);
    let proxy = raw_proxy(driver, &up, 1);
    let mut s = raw_client(proxy.addr);
    let req = raw_chat("m", false);
    for i in 0..5 {
        s.write_all(req.as_bytes()).unwrap();
        let mut got = Vec::new();
        let mut tmp = [0u8; 4096];
        while !got.ends_with(json) {
            let n = s.read(&mut tmp).unwrap();
            assert!(n > 0, "client connection closed at request {i}");
            got.extend_from_slice(&tmp[..n]);
        }
    }
    assert_eq!(
        up.connections.load(Ordering::SeqCst),
        1,
        "one pooled upstream connection for 5 requests"
    );
}

fn stale_pooled_connection_is_retried_on_a_fresh_one(driver: &str) {
    // The upstream closes every connection after answering, without saying so: the pooled
    // connection is stale on the next request, which must be retried once on a fresh one.
    let json = b"{\"ok\":true}";
    let mut resp =
        format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n", json.len()).into_bytes();
    resp.extend_from_slice(json);
    let up = raw_upstream(resp, true);
    let proxy = raw_proxy(driver, &up, 1);
    for _ in 0..4 {
        let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(attempt_count(&r), 1, "the stale retry is not a new attempt");
        std::thread::sleep(Duration::from_millis(50));
    }
}

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
    // Every key failing: both cool, the (local-profile) breaker opens, and the client hears
    // a precise 503 in its dialect with Retry-After and the reasons.
    let mut opts = SimOptions::default();
    opts.faults
        .push(parse_fault_arg("key:sk-sim-a=reset").unwrap());
    opts.faults
        .push(parse_fault_arg("key:sk-sim-b=reset").unwrap());
    let (_sim, proxy) = sim_proxy(driver, opts);
    let r = proxy.post("/v1/chat/completions", &[], &chat("smart", false));
    assert_eq!(r.status, 503, "{}", r.text());
    assert_eq!(r.json()["error"]["code"], "all_targets_cooling_down");
    assert!(r.header("retry-after").is_some());
    assert_eq!(attempt_count(&r), 2);
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

fn expect_status(proxy: &Proxy, raw: &[u8], status: u16) -> client::Reply {
    let mut s = raw_client(proxy.addr);
    s.write_all(raw).unwrap();
    let r = client::parse_reply(&read_all(s)).expect("a response, not a dropped connection");
    assert_eq!(
        r.status,
        status,
        "for {:?}: {}",
        String::from_utf8_lossy(&raw[..raw.len().min(80)]),
        r.text()
    );
    assert!(
        r.json()["error"]["code"].is_string(),
        "dialect envelope with a code: {}",
        r.text()
    );
    r
}

/// A client that writes its whole request before it reads (as the SDKs do) still gets the 413
/// or 431 that Ringside answers early: closing with its input unread would send a reset and
/// destroy the answer in the client's receive buffer.
fn an_early_answer_survives_a_client_still_sending(driver: &str) {
    let (_sim, proxy) = sim_proxy(driver, SimOptions::default());
    let body_len = 8 << 20;
    let heads = [
        (
            format!(
                "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: {body_len}\r\n\r\n"
            ),
            413,
        ),
        (
            format!(
                "POST /v1/chat/completions HTTP/1.1\r\nx-big: {}\r\ncontent-length: {body_len}\r\n\r\n",
                "a".repeat(40_000)
            ),
            431,
        ),
    ];
    for (head, status) in heads {
        let mut s = raw_client(proxy.addr);
        s.write_all(head.as_bytes()).unwrap();
        // Write the whole body first, then read, as the SDKs do. Their HTTP stack gives up on
        // a connection whose write failed (httpx: "Connection error"), so the body must go
        // through: Ringside reads and discards it after answering.
        let chunk = vec![b'x'; 64 << 10];
        for i in 0..(body_len / chunk.len()) {
            if let Err(e) = s.write_all(&chunk) {
                panic!("{status}: the write of chunk {i} failed: {e}");
            }
        }
        let r = client::parse_reply(&read_all(s)).expect("the answer, not a reset");
        assert_eq!(r.status, status, "{}", r.text());
    }
    // The port still serves.
    assert_eq!(
        proxy
            .post("/v1/chat/completions", &[], &chat("smart", false))
            .status,
        200
    );
}

fn bad_input_gets_precise_statuses(driver: &str) {
    let (sim, proxy) = sim_proxy(driver, SimOptions::default());
    let post = |path: &str, body: &str| {
        format!("POST {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}", body.len()).into_bytes()
    };
    let r = expect_status(&proxy, &post("/v1/chat/completions", "{nope"), 400);
    assert_eq!(r.json()["error"]["code"], "invalid_json");
    // Invalid UTF-8 inside a value Ringside skips (not just in the model) is broken JSON too.
    let mut bytes = post("/v1/chat/completions", &chat("smart", false));
    let at = bytes.len() - 5; // the "i" of "hi"
    bytes[at] = 0xff;
    let r = expect_status(&proxy, &bytes, 400);
    assert_eq!(r.json()["error"]["code"], "invalid_json");
    expect_status(
        &proxy,
        &post("/v1/chat/completions", r#"{"messages":[]}"#),
        400,
    );
    expect_status(&proxy, &post("/v1/chat/completions", r#"{"model":7}"#), 400);
    let r = expect_status(
        &proxy,
        &post("/v1/chat/completions", &chat("no-such", false)),
        404,
    );
    assert_eq!(r.json()["error"]["code"], "model_not_found");
    let r = expect_status(&proxy, &post("/v1/messages", &chat("no-such", false)), 404);
    assert_eq!(
        r.json()["type"],
        "error",
        "Anthropic envelope on /v1/messages"
    );
    expect_status(&proxy, &post("/v1/unknown", "{}"), 404);
    let big = format!(r#"{{"model":"smart","pad":"{}"}}"#, "x".repeat(70_000));
    let r = expect_status(&proxy, &post("/v1/chat/completions", &big), 413);
    assert_eq!(r.json()["error"]["code"], "request_too_large");
    let huge_head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nx-big: {}\r\n\r\n",
        "a".repeat(40_000)
    );
    expect_status(&proxy, huge_head.as_bytes(), 431);
    expect_status(&proxy, b"POST /v1/chat/completions HTTP/1.1\r\ncontent-length: 2\r\ntransfer-encoding: chunked\r\n\r\n{}", 400);
    expect_status(
        &proxy,
        b"POST /v1/chat/completions HTTP/1.1\r\ntransfer-encoding: gzip\r\n\r\n",
        501,
    );
    expect_status(
        &proxy,
        b"POST /v1/chat/completions HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",
        400,
    );
    expect_status(
        &proxy,
        b"GET /v1/chat/completions HTTP/1.1\r\nconnection: close\r\n\r\n",
        405,
    );
    expect_status(&proxy, b"GARBAGE\r\n\r\n", 400);
    // A chunked request body is accepted and forwarded with a length.
    let body = chat("smart", false);
    let chunked = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nconnection: close\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{body}\r\n0\r\n\r\n",
        body.len()
    );
    let mut s = raw_client(proxy.addr);
    s.write_all(chunked.as_bytes()).unwrap();
    assert_eq!(client::parse_reply(&read_all(s)).unwrap().status, 200);
    // Expect: 100-continue is honoured.
    let mut s = raw_client(proxy.addr);
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nconnection: close\r\nexpect: 100-continue\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    let mut tmp = [0u8; 64];
    let n = s.read(&mut tmp).unwrap();
    assert!(tmp[..n].starts_with(b"HTTP/1.1 100 Continue"));
    s.write_all(body.as_bytes()).unwrap();
    assert_eq!(client::parse_reply(&read_all(s)).unwrap().status, 200);
    // None of the refused requests reached the upstream.
    assert_eq!(sim_stats(&sim)["total"], 2);
}

fn slow_sender_gets_408(driver: &str) {
    let (_sim, proxy) = sim_proxy(driver, SimOptions::default());
    let mut s = raw_client(proxy.addr);
    s.write_all(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n")
        .unwrap();
    let r = client::parse_reply(&read_all(s)).expect("a 408, not a silent close");
    assert_eq!(r.status, 408);
}

/// An idle keep-alive client is closed after `keepalive_idle_ms` (on the core's timer wheel),
/// never before, and without an answer (no 408 to a client that sent nothing).
fn idle_keep_alive_connection_is_closed(driver: &str) {
    let sim = start_sim(SimOptions::default());
    let body = openai_provider("sim", sim.addr, &[("a", "SIM_KEY_A")], "\"gpt-4o-mini\"");
    let proxy = Proxy::start(
        driver,
        1,
        "",
        &format!("[limits]\nkeepalive_idle_ms = 300\n\n{body}"),
    );
    let mut s = raw_client(proxy.addr);
    let sent = Instant::now();
    s.write_all(raw_chat("gpt-4o-mini", false).as_bytes())
        .unwrap();
    let mut got = Vec::new();
    s.read_to_end(&mut got)
        .expect("the server closes the idle connection (not the test's read timeout)");
    let idle = sent.elapsed();
    let r = client::parse_reply(&got).expect("one whole answer before the close");
    assert_eq!(r.status, 200);
    assert_eq!(
        got.windows(9).filter(|w| w == b"HTTP/1.1 ").count(),
        1,
        "nothing after it"
    );
    assert!(idle >= Duration::from_millis(290), "closed early: {idle:?}");
}

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

fn mid_stream_cut_ends_with_dialect_error_event(driver: &str) {
    let (_sim, proxy) = sim_proxy(
        driver,
        SimOptions {
            events: 6,
            ..Default::default()
        },
    );
    let r = proxy.post(
        "/v1/chat/completions",
        &[("x-sim-fault", "reset-mid-stream;after=3")],
        &chat("smart", true),
    );
    assert_eq!(r.status, 200);
    let t = r.text();
    assert!(t.contains("\"code\":\"upstream_reset\""), "{t}");
    assert!(!t.contains("[DONE]"));
    let body = r#"{"model":"claude-x","max_tokens":10,"stream":true,"messages":[]}"#;
    let r = proxy.post(
        "/v1/messages",
        &[("x-sim-fault", "reset-mid-stream;after=4")],
        body,
    );
    assert!(
        // Anthropic's own order: type first.
        r.text()
            .contains("event: error\ndata: {\"type\":\"error\",\"error\":"),
        "{}",
        r.text()
    );
    assert!(
        proxy
            .metrics()
            .contains("ringside_streams_failed_after_commit_total 2")
    );
}
