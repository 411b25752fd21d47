//! The hand-written line says what the record's `Serialize` says (the admin API's view), plus
//! the line's own fields; the time matches humantime's; any string stays valid JSON.

use super::super::{
    AttemptOutcome, AttemptRecord, Decision, Excluded, LogClient, Outcome, Record, StreamStats,
    Tokens, trace::Trace,
};
use serde_json::{Value, json};

fn line(r: &Record, c: &LogClient<'_>) -> Value {
    let mut out = Vec::new();
    r.write_log_line(&mut out, c);
    assert!(
        out.starts_with(br#"{"kind":"access","time":""#),
        "{}",
        String::from_utf8_lossy(&out)
    );
    serde_json::from_slice(&out)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out)))
}

/// What the line must hold: the record as serde writes it, its `client` (the key id) as
/// `client_key`, and the line's own fields.
fn expected(r: &Record, c: &LogClient<'_>, time: &str) -> Value {
    let mut v = serde_json::to_value(r).unwrap_or_default();
    let map = v.as_object_mut().expect("an object");
    if let Some(key) = map.remove("client") {
        map.insert("client_key".into(), key);
    }
    map.insert("kind".into(), json!("access"));
    map.insert("time".into(), json!(time));
    if let Some(ip) = c.peer {
        map.insert("client".into(), json!(ip.to_string()));
    }
    if let Some(ip) = c.forwarded_for {
        map.insert("forwarded_for".into(), json!(ip.to_string()));
    }
    if let Some(ua) = c.user_agent {
        map.insert("user_agent".into(), json!(ua));
    }
    if let Some(last) = r.attempts.len().checked_sub(1) {
        let span: String = r
            .trace
            .span(last)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        map.insert("span_id".into(), json!(span));
    }
    v
}

/// A failed attempt with every field its line may say.
fn failed_attempt() -> AttemptRecord {
    AttemptRecord {
        provider: "openai",
        connection: "key-a",
        model: "gpt-4o".into(),
        outcome: AttemptOutcome::Http429,
        status: Some(429),
        reason: Some("rate_limited"),
        scope: Some("connection"),
        rule: Some("status_default".into()),
        hint_source: Some("retry_after"),
        restated_from: Some(403),
        retry_after_ms: Some(2_000),
        decision: Decision::Next,
        via: Some("slot-busy"),
        attempts_left: 2,
        ms_left: 59_000,
        detail: Some("tab\there".into()),
        ms: 3,
        ended_us: 3_000,
    }
}

fn rich() -> Record {
    let mut r = Record {
        request_id: "req-\"quoted\"\\back\u{1}\n".into(),
        core: 1,
        method: "POST".into(),
        path: "/v1/chat/completions".into(),
        client: Some("team-a".into()),
        route: Some("smart".into()),
        model: Some("模型 gpt-4o".into()),
        target: Some("openai/gpt-4o".into()),
        connection: Some("key-b"),
        status: 200,
        stream: true,
        waited_ms: 7,
        outcome: Outcome::Ok,
        error_code: Some("model_cooldown"),
        ttfb_ms: Some(12),
        total_ms: 345,
        bytes_in: 72,
        bytes_out: 291,
        ts_ms: 1_796_162_739_922,
        lease_generation: Some(3),
        client_retry: Some(2),
        same_request_retry: true,
        stream_stats: Some(StreamStats {
            events: 20,
            text_bytes: 400,
            terminal: true,
        }),
        tokens: Tokens {
            prompt: Some(10),
            completion: None,
            cached: Some(4),
        },
        total_us: 345_678,
        upstream_us: 300_000,
        waits_us: 7_000,
        head_us: 9_000,
        ttft_us: 11_000,
        trace: Trace::from_header(Some(
            b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        )),
        ..Default::default()
    };
    r.attempts.push(failed_attempt());
    r.attempts.push(AttemptRecord {
        provider: "openai",
        connection: "key-b",
        model: "gpt-4o".into(),
        status: Some(200),
        ..Default::default()
    });
    r.excluded.push(Excluded {
        target: "openai/gpt-4o-mini".into(),
        connection: "key-a".into(),
        reason: "model_lockout",
        remaining_s: Some(2),
    });
    r.excluded.push(Excluded {
        target: "t".into(),
        connection: "c".into(),
        reason: "circuit_open",
        remaining_s: None,
    });
    r.waited_ms = 250;
    r.waited_for = Some(Box::new(Excluded {
        target: "openai/gpt-4o".into(),
        connection: "key-b".into(),
        reason: "circuit_open",
        remaining_s: Some(1),
    }));
    r
}

#[test]
fn a_rich_record_says_what_its_serialize_says() {
    let r = rich();
    let c = LogClient {
        peer: Some(std::net::Ipv4Addr::new(10, 0, 200, 7).into()),
        forwarded_for: Some("2001:db8::1".parse().expect("v6")),
        user_agent: Some("OpenAI/Python 1.99.0 \"x\""),
    };
    assert_eq!(line(&r, &c), expected(&r, &c, "2026-12-01T22:05:39.922Z"));
}

#[test]
fn a_plain_record_says_what_its_serialize_says() {
    let r = Record {
        request_id: "r1".into(),
        method: "GET".into(),
        path: "/v1/models".into(),
        status: 200,
        ts_ms: 0,
        ..Default::default()
    };
    let c = LogClient::default();
    assert_eq!(line(&r, &c), expected(&r, &c, "1970-01-01T00:00:00.000Z"));
    // The fields keep the documented order: kind and time first, the client's last.
    let mut out = Vec::new();
    rich().write_log_line(
        &mut out,
        &LogClient {
            peer: Some(std::net::Ipv4Addr::LOCALHOST.into()),
            ..Default::default()
        },
    );
    let text = String::from_utf8(out).unwrap_or_default();
    let at = |k: &str| text.find(&format!("\"{k}\":")).unwrap_or(usize::MAX);
    let order = [
        "kind",
        "time",
        "request_id",
        "attempts",
        "outcome",
        "total_us",
        "trace_id",
        "client",
        "span_id",
    ];
    assert!(order.windows(2).all(|w| at(w[0]) < at(w[1])), "{text}");
}

#[test]
fn the_time_is_humantimes_rfc3339_with_milliseconds() {
    let mut samples = vec![
        0,
        1,
        999,
        951_782_400_000,
        951_868_799_999,
        4_102_444_800_000,
        253_402_300_799_999,
    ];
    let mut rng = crate::test_rng::XorShift(0x9e37_79b9_7f4a_7c15);
    for _ in 0..2_000 {
        samples.push(rng.below(253_402_300_800_000));
    }
    for ms in samples {
        let mut out = Vec::new();
        super::rfc3339_millis(&mut out, ms);
        let want = humantime::format_rfc3339_millis(
            std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms),
        )
        .to_string();
        assert_eq!(String::from_utf8_lossy(&out), want, "{ms}");
    }
}

#[test]
fn any_string_is_written_as_valid_json() {
    for s in [
        "",
        "plain",
        "\"",
        "\\",
        "\u{0}\u{1f}\u{7f}",
        "a\r\nb\tc",
        "é✓🙂",
        "</script>",
    ] {
        let mut out = Vec::new();
        super::string(&mut out, s);
        let back: String = serde_json::from_slice(&out).unwrap_or_else(|e| panic!("{e}: {s:?}"));
        assert_eq!(back, s);
    }
    // The word-at-a-time check agrees with the byte-by-byte one at every place in a word.
    for len in 0..24 {
        for at in 0..len {
            for bad in [
                0u8, 0x1f, b'"', b'\\', 0x20, 0x7f, 0x80, 0xff, b'!', b'#', b'[', b']',
            ] {
                let mut v = vec![b'a'; len];
                v[at] = bad;
                let want = bad < 0x20 || bad == b'"' || bad == b'\\';
                assert_eq!(super::needs_escape(&v), want, "{v:?}");
            }
        }
    }
    let mut out = Vec::new();
    super::number(&mut out, u64::MAX);
    assert_eq!(out, u64::MAX.to_string().as_bytes());
}
