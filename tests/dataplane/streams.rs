//! Event streams through the proxy: byte-exact pass-through of OpenAI, Anthropic and Responses
//! streams, the first event not held back, and a stream cut mid-way ended in the client's dialect
//! where the bytes sent so far allow it (between chunks and events), else closed as cut short.

use crate::both_drivers;
use crate::common::*;
use crate::sim_proxy;
use ringside::demo::client;
use ringside::simulate::SimOptions;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

both_drivers!(
    json_and_sse_pass_through,
    anthropic_and_responses_streams,
    first_event_is_not_buffered,
    mid_stream_cut_ends_with_dialect_error_event,
    a_cut_inside_a_chunk_or_an_event_closes_without_an_error_event,
    a_stream_that_ended_whole_keeps_its_connection,
    a_held_streams_connection_waits_for_its_next_request_on_the_watch,
);

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
    // An Anthropic request for an OpenAI-only model is served by it, translated both ways
    // (docs/dialects.md); before translation it was refused with a 404.
    let r = proxy.post(
        "/v1/messages",
        &[],
        r#"{"model":"gpt-4o-mini","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}"#,
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("x-ringside-translated"), Some("messages->chat"));
    assert_eq!(r.json()["type"], "message");
    assert_eq!(r.json()["role"], "assistant");
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

fn a_cut_inside_a_chunk_or_an_event_closes_without_an_error_event(driver: &str) {
    const HEAD: &str =
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
    let event = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n";
    let first = format!("{:x}\r\n{event}\r\n", event.len());
    let open_event = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"cu";
    let cases = [
        // The upstream dies inside a chunk (it announced 0x40 bytes, sent fewer): an event
        // appended here would be read as the rest of that chunk.
        (format!("{first}40\r\n{open_event}"), false),
        // Between chunks but inside an event: an appended event would merge into it.
        (
            format!("{first}{:x}\r\n{open_event}\r\n", open_event.len()),
            false,
        ),
        // Between chunks and events: the dialect's error event and a proper last chunk, and
        // the client connection kept (its head promised keep-alive).
        (first.clone(), true),
    ];
    for (body, clean) in cases {
        let up = raw_upstream(format!("{HEAD}{body}").into_bytes(), true);
        let proxy = crate::raw_proxy(driver, &up, 1);
        let mut s = raw_client(proxy.addr);
        s.write_all(raw_chat("m", true).as_bytes()).unwrap();
        if clean {
            // A whole message: the connection stays open for the next request, which gets
            // the same ending from a fresh upstream connection.
            for _ in 0..2 {
                let mut got = Vec::new();
                let mut tmp = [0u8; 4096];
                while !got.ends_with(b"\r\n0\r\n\r\n") {
                    let n = s.read(&mut tmp).unwrap();
                    assert!(n > 0, "closed: {}", String::from_utf8_lossy(&got));
                    got.extend_from_slice(&tmp[..n]);
                }
                let end = find(&got, b"\r\n\r\n").expect("a head") + 4;
                let head = String::from_utf8_lossy(&got[..end]).to_ascii_lowercase();
                assert!(head.starts_with("http/1.1 200"), "{head}");
                assert!(!head.contains("connection: close"), "{head}");
                let text = String::from_utf8_lossy(&got[end..]);
                assert!(got[end..].starts_with(body.as_bytes()), "{text}");
                assert!(text.contains("upstream_truncated"), "{text}");
                assert!(text.ends_with("\n\n\r\n0\r\n\r\n"), "whole: {text}");
                s.write_all(raw_chat("m", true).as_bytes()).unwrap();
            }
            continue;
        }
        let got = read_all(s);
        let end = find(&got, b"\r\n\r\n").expect("a head") + 4;
        assert!(got.starts_with(b"HTTP/1.1 200"), "{got:?}");
        assert_eq!(
            String::from_utf8_lossy(&got[end..]),
            body,
            "exactly what the upstream sent, then the connection closed"
        );
    }
}

fn a_stream_that_ended_whole_keeps_its_connection(driver: &str) {
    // No terminal marker, and the upstream's own end carries a trailer, so no error event can
    // go before it: the failure is recorded, the message still ends whole, and the client's
    // keep-alive connection (promised by the head) serves the next request.
    let event = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n";
    let body = format!("{:x}\r\n{event}\r\n0\r\nx-trailer: 1\r\n\r\n", event.len());
    let resp = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n{body}"
    );
    let up = raw_upstream(resp.into_bytes(), false);
    // No holdback: the stream commits at its first byte (held back, the whole stream would be
    // judged before commit and retried elsewhere).
    let config = format!(
        "[stream]\nholdback_ms = 0\n[[providers]]\nid = \"raw\"\ndialect = \"openai\"\nbase_url = \"http://{}/v1\"\n  [[providers.connections]]\n  id = \"k\"\n  key_env = \"SIM_KEY_A\"\n  models = [\"m\"]\n",
        up.addr
    );
    let proxy = Proxy::start(driver, 1, "", &config);
    let mut s = raw_client(proxy.addr);
    for _ in 0..2 {
        s.write_all(raw_chat("m", true).as_bytes()).unwrap();
        let got = read_until_end(&mut s, b"x-trailer: 1\r\n\r\n");
        let end = find(&got, b"\r\n\r\n").expect("a head") + 4;
        assert_eq!(String::from_utf8_lossy(&got[end..]), body);
        let id = String::from_utf8_lossy(&got[..end])
            .lines()
            .find_map(|l| l.strip_prefix("x-request-id: ").map(str::to_string))
            .expect("a request id");
        let d = proxy.decision(&id);
        assert_eq!(d["outcome"], "failed_after_commit", "{d}");
    }
}

/// A stream long enough for the client watch to arm leaves that wait armed when it ends, and
/// the connection's wait for its next request takes it over: the next request on the
/// connection is served, the keep-alive idle limit still closes it, and a client that closes
/// after its stream is seen gone (no connection left counted open).
fn a_held_streams_connection_waits_for_its_next_request_on_the_watch(driver: &str) {
    let sim = start_sim(SimOptions {
        events: 4,
        interval_ms: 40,
        ..Default::default()
    });
    let body = openai_provider("sim", sim.addr, &[("a", "SIM_KEY_A")], "\"gpt-4o-mini\"");
    let proxy = Proxy::start(
        driver,
        1,
        "",
        &format!("[limits]\nkeepalive_idle_ms = 2000\n\n{body}"),
    );
    let mut kept = raw_client(proxy.addr);
    kept.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    for round in 0..3 {
        kept.write_all(raw_chat("gpt-4o-mini", true).as_bytes())
            .unwrap();
        let got = read_until_end(&mut kept, b"\r\n0\r\n\r\n");
        assert!(got.starts_with(b"HTTP/1.1 200"), "round {round}");
        assert!(find(&got, b"data: [DONE]").is_some(), "round {round}");
    }
    let idle_from = Instant::now();
    let mut rest = Vec::new();
    kept.read_to_end(&mut rest)
        .expect("the idle connection is closed by the server, not the test's timeout");
    assert!(rest.is_empty(), "{}", String::from_utf8_lossy(&rest));
    let idle = idle_from.elapsed();
    assert!(
        idle >= Duration::from_millis(1990),
        "closed early: {idle:?}"
    );

    let mut gone = raw_client(proxy.addr);
    gone.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    gone.write_all(raw_chat("gpt-4o-mini", true).as_bytes())
        .unwrap();
    read_until_end(&mut gone, b"\r\n0\r\n\r\n");
    drop(gone);
    // Before the idle limit could close it, the closed client's connection is gone.
    let closed = Instant::now();
    let mut open = String::new();
    while closed.elapsed() < Duration::from_millis(1500) {
        let m = proxy.metrics();
        open = m
            .lines()
            .filter(|l| l.starts_with("ringside_open_client_connections"))
            .map(str::to_string)
            .collect::<Vec<_>>()
            .join("; ");
        let n: u64 = m
            .lines()
            .filter(|l| l.starts_with("ringside_open_client_connections"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum();
        if n == 0 {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("a closed client's connection still counted open: {open}");
}
