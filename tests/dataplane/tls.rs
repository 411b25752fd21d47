//! A TLS upstream end to end: a private CA trusted through `upstream.ca_file`, SNI and ALPN on the
//! handshake, byte-exact JSON and SSE through rustls, one pooled TLS connection for several
//! requests; and the same upstream refused when its CA is not trusted.
//!
//! The upstream is a small blocking rustls server in test threads, with a CA and a `localhost`
//! certificate made fresh for each run (`common::tls_upstream`).

use crate::both_drivers;
use crate::common::tls_upstream::{Answers, TlsUpstream};
use crate::common::*;
use std::sync::atomic::Ordering;
use std::time::Duration;

both_drivers!(
    tls_upstream_with_a_private_ca,
    a_large_prompt_goes_whole_over_tls,
    a_tls_stream_cut_mid_way_ends_with_an_error_event,
    a_tls12_upstream_and_a_large_answer,
    tls_upstream_with_an_untrusted_ca_is_refused,
    a_burst_of_new_tls_connections_resumes_sessions,
    a_cold_burst_waits_for_the_tickets_of_the_handshakes_under_way,
);

pub(crate) const JSON: &str = r#"{"id":"chatcmpl-tls","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"over tls"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}"#;

pub(crate) const EVENTS: [&str; 3] = [
    "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"over \"},\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"tls\"},\"finish_reason\":\"stop\"}]}\n\n",
    "data: [DONE]\n\n",
];

pub(crate) fn answers() -> Answers {
    Answers {
        json: JSON.to_string(),
        events: EVENTS.iter().map(|e| e.to_string()).collect(),
        interval: Duration::from_millis(20),
        cut_after: None,
        tls12_only: false,
        tickets_on_request: false,
        handshake_delay: Duration::ZERO,
    }
}

fn tls_upstream_with_a_private_ca(driver: &str) {
    let up = TlsUpstream::start(answers());
    let proxy = Proxy::start(driver, 1, "", &up.trusted_provider("m"));

    let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.text(), JSON, "the JSON body byte for byte");
    assert_eq!(r.header("x-ringside-connection"), Some("tls/t"));

    let r = proxy.post("/v1/chat/completions", &[], &chat("m", true));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.text(), EVENTS.concat(), "the events byte for byte");

    let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
    assert_eq!(r.status, 200, "{}", r.text());

    let seen = up.seen.lock().expect("log").clone();
    assert_eq!(seen.len(), 3, "{seen:?}");
    for s in &seen {
        assert_eq!(s.sni.as_deref(), Some("localhost"), "SNI: {s:?}");
        assert_eq!(s.alpn.as_deref(), Some(&b"http/1.1"[..]), "ALPN: {s:?}");
        assert_eq!(s.authorization.as_deref(), Some("Bearer sk-sim-a"), "{s:?}");
    }
    assert_eq!(
        up.accepted.load(Ordering::SeqCst),
        1,
        "three requests, one pooled TLS connection"
    );
}

fn a_large_prompt_goes_whole_over_tls(driver: &str) {
    // 300 KB is several times what rustls takes to encrypt at once (64 KiB): the request goes
    // out in parts, each sent before the next is taken, and arrives whole.
    let up = TlsUpstream::start(answers());
    let proxy = Proxy::start(driver, 1, "", &up.trusted_provider("m"));
    let prompt = "x".repeat(300_000);
    let body = format!(r#"{{"model":"m","messages":[{{"role":"user","content":"{prompt}"}}]}}"#);
    let r = proxy.post("/v1/chat/completions", &[], &body);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.text(), JSON);
    let seen = up.seen.lock().expect("log").clone();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].body_len, body.len(), "the body arrived whole");
    // And the connection is still good for the next request.
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", true));
    assert_eq!(r.text(), EVENTS.concat());
    assert_eq!(up.accepted.load(Ordering::SeqCst), 1);
}

fn a_tls_stream_cut_mid_way_ends_with_an_error_event(driver: &str) {
    // The server closes TCP after the first event, with no close_notify: rustls's unexpected
    // EOF is a failure after the commit, told to the client in its dialect and counted.
    let up = TlsUpstream::start(Answers {
        cut_after: Some(1),
        ..answers()
    });
    let proxy = Proxy::start(driver, 1, "", &up.trusted_provider("m"));
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", true));
    assert_eq!(r.status, 200, "{}", r.text());
    let t = r.text();
    assert!(
        t.starts_with(EVENTS[0]),
        "the first event came through: {t}"
    );
    assert!(t.contains("\"error\""), "an error event: {t}");
    assert!(!t.contains("[DONE]"), "{t}");
    assert!(
        proxy
            .metrics()
            .contains("ringside_streams_failed_after_commit_total 1"),
        "{}",
        proxy.metrics()
    );
}

fn a_tls12_upstream_and_a_large_answer(driver: &str) {
    // TLS 1.2's handshake runs the other way round at its end (the client's Finished first),
    // and a 1 MB answer comes in full 16 KiB records, each read in parts.
    let content = "y".repeat(1 << 20);
    let json = JSON.replace("over tls", &content);
    let up = TlsUpstream::start(Answers {
        json: json.clone(),
        tls12_only: true,
        ..answers()
    });
    let proxy = Proxy::start(driver, 1, "", &up.trusted_provider("m"));
    for _ in 0..2 {
        let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
        assert_eq!(r.status, 200, "{}", &r.text()[..r.text().len().min(300)]);
        assert!(r.text() == json, "the 1 MB answer byte for byte");
    }
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", true));
    assert_eq!(r.text(), EVENTS.concat());
    assert_eq!(
        up.accepted.load(Ordering::SeqCst),
        1,
        "one TLS 1.2 connection"
    );
}

fn tls_upstream_with_an_untrusted_ca_is_refused(driver: &str) {
    // The same upstream, its CA not given: the certificate does not verify, nothing is sent.
    let up = TlsUpstream::start(answers());
    let proxy = Proxy::start(driver, 1, "", &up.provider("tls_roots = \"webpki\"", "m"));
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
    assert!(r.status >= 500, "{} {}", r.status, r.text());
    assert!(r.json()["error"]["code"].is_string(), "{}", r.text());
    assert!(
        up.seen.lock().expect("log").is_empty(),
        "no request reached it"
    );
    assert!(
        proxy
            .metrics()
            .contains("connection=\"t\",outcome=\"tls_error\"}"),
        "{}",
        proxy.metrics()
    );
}

/// `n` streams through `proxy` at once, each whole.
fn streams_at_once(proxy: &Proxy, n: usize) {
    std::thread::scope(|s| {
        let streams: Vec<_> = (0..n)
            .map(|_| s.spawn(|| proxy.post("/v1/chat/completions", &[], &chat("m", true))))
            .collect();
        for t in streams {
            let r = t.join().expect("stream");
            assert_eq!(r.status, 200, "{}", r.text());
            assert_eq!(r.text(), EVENTS.concat());
        }
    })
}

/// A burst of new upstream connections resumes the TLS sessions earlier ones made, far beyond
/// rustls's own 8 tickets per server: the second burst's new connections (beyond what the pool
/// holds idle) resume, and the proxy's metric counts what the server saw.
fn a_burst_of_new_tls_connections_resumes_sessions(driver: &str) {
    let up = TlsUpstream::start(Answers {
        interval: Duration::from_millis(150),
        ..answers()
    });
    let proxy = Proxy::start(driver, 1, "", &up.trusted_provider("m"));
    let burst = |n: usize| streams_at_once(&proxy, n);
    burst(24);
    let [full_first, resumed_first] = [0, 1].map(|i| up.handshakes[i].load(Ordering::SeqCst));
    // Twice as many at once: as many again as the pool holds need new connections.
    burst(48);
    let [full, resumed] = [0, 1].map(|i| up.handshakes[i].load(Ordering::SeqCst));
    let (full_later, resumed_later) = (full - full_first, resumed - resumed_first);
    eprintln!(
        "{driver}: first burst {full_first} full, {resumed_first} resumed; second {full_later} full, {resumed_later} resumed"
    );
    assert!(
        resumed_later >= 20,
        "the second burst's new connections resume: {resumed_later}"
    );
    assert!(
        resumed_later * 10 >= (full_later + resumed_later) * 9,
        "at least 90 % resumed: {full_later} full, {resumed_later} resumed"
    );
    let text = proxy.metrics();
    for (kind, n) in [("full", full), ("resumed", resumed)] {
        let line = format!("ringside_upstream_tls_handshakes_total{{kind=\"{kind}\"}} {n}");
        assert!(text.contains(&line), "{line} in\n{text}");
    }
}

/// A cold burst (no ticket kept yet): a connect that finds none waits for the tickets that
/// the handshakes under way are about to bring rather than handshake in full. From a server
/// that sends as many as asked (RFC 9149), from one that sends its default two (after a
/// resumption too), and from a slow TLS 1.2 server, whose one session serves them all (every
/// wait ending with it), at least 80 % of the burst resumes: a server not yet seen is expected
/// to bring two tickets a handshake. Every stream is whole either way.
fn a_cold_burst_waits_for_the_tickets_of_the_handshakes_under_way(driver: &str) {
    // A server that honours ticket requests, one that sends rustls's two, one that speaks
    // TLS 1.2 (whose one session serves every connect once a handshake has kept it).
    for (on_request, tls12) in [(true, false), (false, false), (false, true)] {
        let up = TlsUpstream::start(Answers {
            interval: Duration::from_millis(150),
            tickets_on_request: on_request,
            tls12_only: tls12,
            // The TLS 1.2 burst all arrives during the first handshake: its waiters are sent
            // on by the session it keeps.
            handshake_delay: Duration::from_millis(if tls12 { 200 } else { 0 }),
            ..answers()
        });
        let mut provider = up.trusted_provider("m");
        if tls12 {
            // HTTP/1.1 from the start: with `auto` the burst would wait for the first
            // connection's ALPN, and find its session kept by then.
            provider = provider.replace(
                "dialect = \"openai\"\n",
                "dialect = \"openai\"\nhttp2 = \"never\"\n",
            );
        }
        let proxy = Proxy::start(driver, 1, "", &provider);
        let n = 64;
        streams_at_once(&proxy, n);
        let [full, resumed] = [0, 1].map(|i| up.handshakes[i].load(Ordering::SeqCst));
        let text = proxy.metrics();
        let waits = |outcome: &str| {
            let line =
                format!("ringside_upstream_tls_ticket_waits_total{{outcome=\"{outcome}\"}} ");
            text.lines()
                .find_map(|l| l.strip_prefix(&line))
                .and_then(|n| n.parse::<usize>().ok())
                .unwrap_or_else(|| panic!("{line} in\n{text}"))
        };
        let (got, none) = (waits("ticket"), waits("none"));
        eprintln!(
            "{driver}, tickets on request {on_request}, TLS 1.2 {tls12}: {full} full, {resumed} resumed; waits: {got} got a ticket, {none} none"
        );
        assert_eq!(full + resumed, n, "one connection per stream");
        // How many waited depends on how the connects fell in time (none, when each found
        // a ticket kept); each that got one resumed.
        assert!(got <= resumed, "{got} waits got a ticket");
        if tls12 {
            assert!(got > 0, "connects waited for the first handshake");
            assert_eq!(none, 0, "a TLS 1.2 session kept serves every waiter");
        }
        // Until a server's first answer shows what it sends, it is expected to send two per
        // handshake, serving waiters four deep: one in nine of a burst that all arrives
        // before that answer is full, whatever the server honours (8 of 64 on a loaded
        // machine, where the whole burst comes during the first handshake).
        assert!(
            resumed * 10 >= n * 8,
            "at least 80 % resumed: {full} full, {resumed} resumed"
        );
    }
}
