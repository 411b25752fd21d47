//! Waiting streams are not silent (`stream.keepalive_ms`, or a route's `keepalive_ms`), on
//! io_uring and on epoll: a client whose read timeout is shorter than the wait gets its head and
//! keep-alives (an SSE comment, Anthropic's `ping` event for its API) while Ringside waits for a
//! slow first byte or a cooldown, then the answer's events in the same body; a request that fails
//! after the head ends with the dialect's error event, and the connection serves again.

mod common;
use common::*;
use ringside::simulate::{SimOptions, parse_fault_arg};
use std::io::{Read, Write};
use std::time::Duration;

both_drivers!(
    a_slow_first_byte_is_kept_alive_for_a_client_with_a_short_read_timeout,
    anthropic_clients_get_ping_events,
    a_failure_after_the_head_is_the_dialects_error_event,
    routes_that_do_not_opt_in_stay_silent,
    answers_framed_otherwise_follow_the_head_as_chunks,
    a_translated_stream_follows_the_head,
);

fn sim_with(faults: &[&str]) -> ringside::simulate::Simulator {
    let mut opts = SimOptions {
        events: 4,
        ..Default::default()
    };
    for f in faults {
        opts.faults.push(parse_fault_arg(f).expect("fault"));
    }
    start_sim(opts)
}

/// Two routes on one key: `patient` keeps its waits alive every 200 ms, `plain` does not.
fn config(sim: std::net::SocketAddr, extra: &str) -> String {
    priority_keys(sim, &["a"], "")
        + extra
        + "\n[[routes]]\nname = \"patient\"\nkeepalive_ms = 200\n\
           targets = [{ provider = \"sim\", model = \"m\" }]\n\
           [[routes]]\nname = \"plain\"\ntargets = [{ provider = \"sim\", model = \"m\" }]\n"
}

/// A request as a client with a short read timeout sends it: each read may wait `patience`
/// at most. The body read to its last chunk, or what came before the client gave up (`Err`).
fn read_patiently(
    proxy: &Proxy,
    path: &str,
    body: &str,
    headers: &str,
    patience: Duration,
) -> Result<String, String> {
    let mut s = raw_client(proxy.addr);
    s.set_read_timeout(Some(patience)).expect("timeout");
    let req = format!(
        "POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n{headers}\
         content-length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).expect("send");
    let mut got = Vec::new();
    let mut tmp = [0u8; 4096];
    while !got.ends_with(b"\r\n0\r\n\r\n") {
        match s.read(&mut tmp) {
            Ok(0) => return Err(format!("closed: {}", String::from_utf8_lossy(&got))),
            Ok(n) => got.extend_from_slice(&tmp[..n]),
            Err(e) => return Err(format!("{e}: {}", String::from_utf8_lossy(&got))),
        }
    }
    Ok(String::from_utf8_lossy(&got).into_owned())
}

const SLOW: &str = "x-sim-latency-ms: 1500\r\n";

fn a_slow_first_byte_is_kept_alive_for_a_client_with_a_short_read_timeout(driver: &str) {
    let sim = sim_with(&[]);
    let proxy = Proxy::start(driver, 1, "", &config(sim.addr, ""));
    let patience = Duration::from_millis(700);
    let body = chat("patient", true);
    let text = read_patiently(&proxy, "/v1/chat/completions", &body, SLOW, patience)
        .expect("the keep-alives hold the client's read timeout off");
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    assert!(text.contains("x-ringside-keepalive: early-head"), "{text}");
    // A keep-alive every 200 ms of 1.5 s: about seven, but a starved core (a loaded 2-core
    // machine) runs its timers late; the patient read above is what must hold.
    let pings = text.matches(": keep-alive\n\n").count();
    assert!(pings >= 1, "keep-alives before the answer: {pings}\n{text}");
    // The answer follows the keep-alives whole, in the same chunked body.
    let first_event = text.find("data: {").expect("events");
    assert!(text.find(": keep-alive").expect("pings") < first_event);
    assert!(text.contains("data: [DONE]"), "{text}");
    let reply = ringside::demo::client::parse_reply(text.as_bytes()).expect("a whole answer");
    assert_eq!(reply.status, 200);
    // The same request once the upstream is quick: no wait, no early head.
    let r = proxy.post("/v1/chat/completions", &[], &chat("patient", true));
    assert_eq!(r.status, 200);
    assert!(r.header("x-ringside-keepalive").is_none());
    assert!(r.header("x-ringside-connection").is_some());
    assert!(!r.text().contains(": keep-alive"), "{}", r.text());
}

fn anthropic_clients_get_ping_events(driver: &str) {
    let sim = sim_with(&[]);
    let body = format!(
        "[stream]\nkeepalive_ms = 200\n[[providers]]\nid = \"ant\"\ndialect = \"anthropic\"\n\
         base_url = \"http://{}/v1\"\n  [[providers.connections]]\n  id = \"a\"\n\
         key_env = \"SIM_KEY_A\"\n  models = [\"claude-x\"]\n",
        sim.addr
    );
    let proxy = Proxy::start(driver, 1, "", &body);
    let req = r#"{"model":"claude-x","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}"#;
    let text = read_patiently(
        &proxy,
        "/v1/messages",
        req,
        SLOW,
        Duration::from_millis(700),
    )
    .expect("kept alive");
    assert!(text.contains("\r\nrequest-id: "), "{text}");
    let pings = text
        .matches("event: ping\ndata: {\"type\": \"ping\"}\n\n")
        .count();
    assert!(pings >= 2, "{pings}\n{text}");
    let start = text.find("event: message_start").expect("the answer");
    assert!(text.find("event: ping").expect("pings") < start);
    assert!(text.contains("event: message_stop"), "{text}");
}

fn a_failure_after_the_head_is_the_dialects_error_event(driver: &str) {
    // The one key answers 429 with a second's Retry-After: Ringside waits out the cooldown
    // (keep-alives meanwhile), tries again, and gives up at the deadline.
    let sim = sim_with(&["key:sk-sim-a=429;retry-after=1"]);
    let extra = "[resilience]\nmax_wait_ms = 5000\ndeadline_ms = 1800\n";
    let proxy = Proxy::start(driver, 1, "", &config(sim.addr, extra));
    let mut s = raw_client(proxy.addr);
    s.set_read_timeout(Some(Duration::from_millis(700)))
        .expect("timeout");
    let body = chat("patient", true);
    let req = raw_request(&body, Some("keepalive-fail-1"));
    s.write_all(req.as_bytes()).expect("send");
    let text = String::from_utf8_lossy(&read_until_end(&mut s, b"\r\n0\r\n\r\n")).into_owned();
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    assert!(text.contains(": keep-alive\n\n"), "{text}");
    let reply = ringside::demo::client::parse_reply(text.as_bytes()).expect("whole");
    let body = reply.text();
    assert!(
        body.contains("data: {\"error\":") && !body.contains("[DONE]"),
        "one error event ends the stream: {body}"
    );
    assert!(
        body.contains("rate"),
        "the error says what happened: {body}"
    );
    // The body ended whole: the connection serves the next request.
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    s.write_all(raw_request(&chat("plain", false), None).as_bytes())
        .expect("send again");
    let mut tmp = [0u8; 256];
    let n = s.read(&mut tmp).expect("an answer on the same connection");
    assert!(tmp[..n].starts_with(b"HTTP/1.1 "), "{:?}", &tmp[..n]);
    // The decision record says the client had its head before the answer.
    let d = proxy.decision("keepalive-fail-1");
    assert_eq!(d["early_head"], true, "{d}");
    assert!(d["status"].as_u64().unwrap_or(0) >= 400, "{d}");
}

fn routes_that_do_not_opt_in_stay_silent(driver: &str) {
    let sim = sim_with(&[]);
    let proxy = Proxy::start(driver, 1, "", &config(sim.addr, ""));
    let body = chat("plain", true);
    let gave_up = read_patiently(
        &proxy,
        "/v1/chat/completions",
        &body,
        SLOW,
        Duration::from_millis(700),
    );
    assert!(
        gave_up.as_ref().is_err_and(|e| !e.contains("HTTP/1.1")),
        "nothing reaches a client that is not kept alive: {gave_up:?}"
    );
}

fn answers_framed_otherwise_follow_the_head_as_chunks(driver: &str) {
    // A close-delimited stream is chunked for the client; a stream cut mid-way ends with the
    // error event, as any committed stream does.
    let sim = sim_with(&[
        "key:sk-sim-a=close-delimited;latency=1200",
        "key:sk-sim-b=reset-mid-stream;after=2;latency=1200",
    ]);
    let extra = "  [[providers.connections]]\n  id = \"b\"\n  key_env = \"SIM_KEY_B\"\n  \
                 models = [\"n\"]\n[stream]\nkeepalive_ms = 200\n";
    let proxy = Proxy::start(driver, 1, "", &config(sim.addr, extra));
    let patience = Duration::from_millis(700);
    let text = read_patiently(
        &proxy,
        "/v1/chat/completions",
        &chat("patient", true),
        "",
        patience,
    )
    .expect("kept alive");
    let reply = ringside::demo::client::parse_reply(text.as_bytes()).expect("whole");
    let body = reply.text();
    assert!(body.starts_with(": keep-alive\n\n"), "{body}");
    assert!(body.ends_with("data: [DONE]\n\n"), "{body}");
    let cut = read_patiently(
        &proxy,
        "/v1/chat/completions",
        &chat("n", true),
        "",
        patience,
    )
    .expect("kept alive, then the cut");
    let reply = ringside::demo::client::parse_reply(cut.as_bytes()).expect("whole");
    let body = reply.text();
    assert!(body.contains(": keep-alive\n\n"), "{body}");
    assert!(
        body.contains("data: {\"error\":") && !body.contains("[DONE]"),
        "{body}"
    );
}

fn a_translated_stream_follows_the_head(driver: &str) {
    // An Anthropic client on a route whose target speaks OpenAI: pings, then the translated
    // events.
    let sim = common::cross::sim(&["key:sk-sim-a=ok;latency=1200"]);
    let body = common::cross::config(sim.addr, &["oa"], "keepalive_ms = 200\n");
    let proxy = Proxy::start(driver, 1, "", &body);
    let req = r#"{"model":"r","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}"#;
    let text = read_patiently(&proxy, "/v1/messages", req, "", Duration::from_millis(700))
        .expect("kept alive");
    let reply = ringside::demo::client::parse_reply(text.as_bytes()).expect("whole");
    let body = reply.text();
    assert!(body.starts_with("event: ping\n"), "{body}");
    assert!(body.contains("event: message_start"), "{body}");
    assert!(body.contains("event: message_stop"), "{body}");
}
