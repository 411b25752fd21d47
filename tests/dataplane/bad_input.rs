//! Bad input from clients: each kind gets its own status in the client's dialect, an early answer
//! survives a client still sending, a slow sender gets 408 and an idle keep-alive client is closed.

use crate::both_drivers;
use crate::common::*;
use crate::sim_proxy;
use ringside::demo::client;
use ringside::simulate::SimOptions;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

both_drivers!(
    bad_input_gets_precise_statuses,
    an_early_answer_survives_a_client_still_sending,
    slow_sender_gets_408,
    idle_keep_alive_connection_is_closed,
);

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
