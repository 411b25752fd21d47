//! Response framing and connection reuse against a scripted raw upstream: Content-Length and
//! chunked bodies byte-exact, close-delimited bodies re-chunked, one pooled upstream connection
//! reused, a stale pooled connection retried on a fresh one, and 204/304 answers framed
//! without a body whatever the upstream's headers said.

use crate::both_drivers;
use crate::common::*;
use crate::raw_proxy;
use ringside::demo::client;
use std::io::{Read, Write};
use std::sync::atomic::Ordering;
use std::time::Duration;

both_drivers!(
    byte_exact_chunked_and_length_bodies,
    close_delimited_body_is_rechunked,
    keep_alive_reuses_one_upstream_connection,
    stale_pooled_connection_is_retried_on_a_fresh_one,
    a_held_request_is_never_sent_twice,
    bodiless_statuses_carry_no_length,
    a_status_outside_100_to_599_is_a_broken_upstream,
    request_bodies_of_every_size_arrive_whole,
);

/// Request bodies on both sides of the size where the head and body stop being copied into one
/// buffer and go as one vectored write instead: the upstream reads every byte, in order, with
/// the model rewritten in place when the route names another, and the same bytes again when the
/// request reuses the pooled connection.
fn request_bodies_of_every_size_arrive_whole(driver: &str) {
    let json = br#"{"id":"x","choices":[]}"#;
    let mut resp = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        json.len()
    )
    .into_bytes();
    resp.extend_from_slice(json);
    let up = raw_upstream(resp, false);
    let body = format!(
        "[[providers]]\nid = \"raw\"\ndialect = \"openai\"\nbase_url = \"http://{}/v1\"\n  [[providers.connections]]\n  id = \"k\"\n  key_env = \"SIM_KEY_A\"\n  models = [\"m\"]\n[[routes]]\nname = \"smart\"\ntargets = [{{ provider = \"raw\", model = \"m\" }}]\n",
        up.addr
    );
    let proxy = Proxy::start(driver, 1, "", &body);
    let mut expected = Vec::new();
    for (i, size) in [10, 4000, 4097, 9000, 60_000, 300_000, 4_000_000]
        .into_iter()
        .enumerate()
    {
        // Text with escapes and non-ASCII, whole units to at least `size` bytes.
        let unit = "a \\\"quote\\\" ü ✓\\n ";
        let text = unit.repeat(size / unit.len() + 1);
        let model = if i % 2 == 0 { "smart" } else { "m" };
        let sent = format!(
            r#"{{"messages":[{{"role":"user","content":"{text}"}}],"model":"{model}","n":{i}}}"#
        );
        let r = proxy.post("/v1/chat/completions", &[], &sent);
        assert_eq!(r.status, 200, "{size}: {}", r.text());
        expected.push(
            sent.replace(r#""model":"smart""#, r#""model":"m""#)
                .into_bytes(),
        );
    }
    let got = up.bodies.lock().unwrap().clone();
    assert_eq!(got.len(), expected.len());
    for (g, e) in got.iter().zip(&expected) {
        assert!(
            g == e,
            "a body of {} bytes arrived as {} bytes",
            e.len(),
            g.len()
        );
    }
    assert_eq!(
        up.connections.load(Ordering::SeqCst),
        1,
        "one pooled connection"
    );
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

    // Broken framing before anything reached the client: a clean error answer, not a half
    // response. (A head followed by a broken body is no success: the retry after a short
    // cooldown fails the same way and the second failure in a row opens the provider's
    // breaker, so the answer is 502, or 503 naming the breaker.)
    let up = raw_upstream(
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n".to_vec(),
        false,
    );
    let proxy = raw_proxy(driver, &up, 1);
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", true));
    assert!(matches!(r.status, 502 | 503), "{}", r.text());
    assert!(r.text().contains("upstream_bad_framing"), "{}", r.text());

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
        let got = read_until_end(&mut s, b"0\r\n\r\n");
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
        assert_eq!(
            attempt_count(&r),
            1,
            "a closed pooled connection is not sent on"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn a_held_request_is_never_sent_twice(driver: &str) {
    // A pooled connection to an upstream that holds the second request until the first-byte
    // timeout: the upstream may have started on it, so it is not sent again (before, it was
    // sent on a fresh connection too, the client waited twice as long, and the record claimed
    // one attempt).
    let sim = start_sim(ringside::simulate::SimOptions::default());
    let body = format!(
        "[upstream]\nmax_attempts = 1\nfirst_byte_timeout_ms = 1000\n\n{}",
        openai_provider("sim", sim.addr, &[("a", "SIM_KEY_A")], "\"m\"")
    );
    let proxy = Proxy::start(driver, 1, "", &body);
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
    assert_eq!(r.status, 200, "{}", r.text());
    let r = proxy.post(
        "/v1/chat/completions",
        &[("x-sim-fault", "hang")],
        &chat("m", false),
    );
    assert!(r.status >= 500, "{}", r.text());
    let id = r.header("x-request-id").unwrap_or_default().to_string();
    let sent = sim_stats(&sim)["total"].as_u64().unwrap_or(0);
    assert_eq!(sent, 2, "every request reached the upstream once");
    let d = proxy.decision(&id);
    assert_eq!(d["attempts"].as_array().map_or(0, Vec::len), 1, "{d}");
}

/// Reads one response head from a keep-alive connection; returns it with whatever followed.
fn read_head(s: &mut std::net::TcpStream) -> (String, Vec<u8>) {
    let mut got = Vec::new();
    let mut tmp = [0u8; 4096];
    while find(&got, b"\r\n\r\n").is_none() {
        let n = s.read(&mut tmp).unwrap();
        assert!(n > 0, "closed: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&tmp[..n]);
    }
    let end = find(&got, b"\r\n\r\n").unwrap() + 4;
    let head = String::from_utf8_lossy(&got[..end]).to_ascii_lowercase();
    (head, got[end..].to_vec())
}

fn bodiless_statuses_carry_no_length(driver: &str) {
    // A 204 must not carry Content-Length (RFC 9110 8.6): a client would wait for 5 bytes that
    // never come. A 304 (passed through as an error) gets no length of ours either. Both keep
    // the client connection usable: the second request on it is answered the same way.
    for (resp, status) in [
        (
            &b"HTTP/1.1 204 No Content\r\ncontent-length: 5\r\n\r\n"[..],
            "204",
        ),
        (&b"HTTP/1.1 304 Not Modified\r\n\r\n"[..], "304"),
    ] {
        let up = raw_upstream(resp.to_vec(), false);
        let proxy = raw_proxy(driver, &up, 1);
        let mut s = raw_client(proxy.addr);
        for round in 0..2 {
            s.write_all(raw_chat("m", false).as_bytes()).unwrap();
            let (head, rest) = read_head(&mut s);
            assert!(head.starts_with(&format!("http/1.1 {status}")), "{head}");
            assert!(
                !head.contains("content-length"),
                "{status} round {round}: {head}"
            );
            assert!(!head.contains("transfer-encoding"), "{head}");
            assert!(rest.is_empty(), "bytes after a {status} head: {rest:?}");
        }
    }
}

fn a_status_outside_100_to_599_is_a_broken_upstream(driver: &str) {
    // `099` once came out as `HTTP/1.1 99` and `600` was passed on: answers no client reads.
    for status in ["099", "600"] {
        let resp = format!("HTTP/1.1 {status} Hm\r\ncontent-length: 2\r\n\r\nhi");
        let up = raw_upstream(resp.into_bytes(), false);
        let proxy = raw_proxy(driver, &up, 1);
        let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
        // 502, or 503 once the provider's breaker opened on the failures (one connection).
        assert!([502, 503].contains(&r.status), "{status}: {}", r.text());
        assert!(
            r.text().contains("status code outside 100-599"),
            "{}",
            r.text()
        );
        assert!(!r.text().contains("HTTP request"), "{}", r.text());
    }
}
