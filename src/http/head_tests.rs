//! The head parser's unit tests: limits, framing rules, smuggling refusals, header lookup.

use super::*;

#[test]
fn hop_by_hop_names_in_any_case() {
    for n in [
        "connection",
        "Keep-Alive",
        "PROXY-CONNECTION",
        "proxy-authenticate",
        "Proxy-Authorization",
        "TE",
        "trailer",
        "Transfer-Encoding",
        "upgrade",
    ] {
        assert!(is_hop_by_hop(n), "{n}");
    }
    for n in [
        "content-type",
        "tf",
        "trailers",
        "connectio",
        "",
        "x-request-id",
        "upgradE1",
    ] {
        assert!(!is_hop_by_hop(n), "{n}");
    }
}

fn req(s: &str) -> Result<Option<(Head, usize)>, HeadError> {
    parse_request(s.as_bytes(), HeadLimits::default())
}

#[test]
fn parses_a_post_with_length() {
    let raw = "POST /v1/chat/completions?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 12\r\n\r\nbody";
    let (h, n) = req(raw).unwrap().unwrap();
    assert_eq!(n, raw.len() - 4);
    assert_eq!(h.method(), "POST");
    assert_eq!(h.path(), "/v1/chat/completions");
    assert_eq!(h.query(), Some("x=1"));
    assert_eq!(h.framing, Framing::Length(12));
    assert!(h.keep_alive);
    assert_eq!(h.get_str("HOST"), Some("a"));
}

#[test]
fn partial_head_needs_more() {
    assert!(req("POST / HTTP/1.1\r\nHost: a\r\n").unwrap().is_none());
}

#[test]
fn refuses_smuggling_shapes() {
    let both = "POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n";
    assert_eq!(req(both).unwrap_err().status(), 400);
    let two_cl = "POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n";
    assert_eq!(req(two_cl).unwrap_err().status(), 400);
    let plus = "POST / HTTP/1.1\r\nContent-Length: +3\r\n\r\n";
    assert_eq!(req(plus).unwrap_err().status(), 400);
    let gzip = "POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n";
    assert_eq!(req(gzip).unwrap_err().status(), 501);
    let twice =
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n";
    assert_eq!(req(twice).unwrap_err().status(), 501);
}

#[test]
fn limits_give_431() {
    let big = format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(40_000));
    assert_eq!(req(&big).unwrap_err(), HeadError::TooLarge);
    let partial_big = format!("GET / HTTP/1.1\r\nX: {}", "a".repeat(40_000));
    assert_eq!(req(&partial_big).unwrap_err(), HeadError::TooLarge);
    let many: String = (0..150).map(|i| format!("X-{i}: v\r\n")).collect();
    let r = req(&format!("GET / HTTP/1.1\r\n{many}\r\n"));
    assert_eq!(r.unwrap_err(), HeadError::TooManyHeaders);
}

#[test]
fn http10_defaults_to_close() {
    let (h, _) = req("GET / HTTP/1.0\r\n\r\n").unwrap().unwrap();
    assert!(!h.keep_alive);
    let (h, _) = req("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        .unwrap()
        .unwrap();
    assert!(h.keep_alive);
    let (h, _) = req("GET / HTTP/1.1\r\nConnection: close\r\n\r\n")
        .unwrap()
        .unwrap();
    assert!(!h.keep_alive);
    // No transfer codings in 1.0: faulty framing, answered 400 (and closed).
    let e = req("POST / HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n")
        .unwrap_err();
    assert_eq!(e.status(), 400);
}

#[test]
fn json_content_types() {
    let ct = |v: &str| {
        let raw = format!("POST / HTTP/1.1\r\n{v}\r\n");
        req(&raw).unwrap().unwrap().0.content_type_is_json()
    };
    assert!(ct("Content-Type: application/json; charset=utf-8\r\n"));
    assert!(ct("content-type: Application/JSON\r\n"));
    assert!(!ct("content-type: text/plain\r\n"));
    assert!(!ct(""));
}

#[test]
fn response_framing() {
    let l = HeadLimits::default();
    let (h, _) = parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", l, false)
        .unwrap()
        .unwrap();
    assert_eq!(
        (h.status, h.framing, h.keep_alive),
        (200, Framing::Length(5), true)
    );
    let (h, _) = parse_response(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
        l,
        false,
    )
    .unwrap()
    .unwrap();
    assert_eq!(h.framing, Framing::Chunked);
    let (h, _) = parse_response(b"HTTP/1.1 200 OK\r\n\r\n", l, false)
        .unwrap()
        .unwrap();
    assert_eq!((h.framing, h.keep_alive), (Framing::Close, false));
    let (h, _) = parse_response(b"HTTP/1.1 204 No Content\r\n\r\n", l, false)
        .unwrap()
        .unwrap();
    assert_eq!(h.framing, Framing::Empty);
    // Three digits outside 100-599 are a broken upstream, not an answer to pass on.
    for bad in ["000", "099", "600", "999"] {
        let raw = format!("HTTP/1.1 {bad} X\r\ncontent-length: 2\r\n\r\nhi");
        assert!(
            matches!(
                parse_response(raw.as_bytes(), l, false),
                Err(HeadError::Malformed(_))
            ),
            "{bad}"
        );
    }
    for ok in ["100", "599"] {
        let raw = format!("HTTP/1.1 {ok} X\r\n\r\n");
        assert!(parse_response(raw.as_bytes(), l, false).is_ok(), "{ok}");
    }
}

#[test]
fn lookups_fold_case_and_miss_cleanly() {
    let raw = "POST /v1/x HTTP/1.1\r\nHost: a\r\nX-Request-Id: r1\r\nRetry-After: 3\r\n\
               Connection: keep-alive, Upgrade\r\nx-request-id: r2\r\n\r\n";
    let (h, _) = req(raw).unwrap().unwrap();
    // First of repeated names, any case.
    assert_eq!(h.get("x-request-id"), Some(&b"r1"[..]));
    assert_eq!(h.get("X-REQUEST-ID"), Some(&b"r1"[..]));
    assert_eq!(h.get_str("retry-after"), Some("3"));
    assert!(h.has_token("connection", "upgrade"));
    assert!(!h.has_token("connection", "close"));
    // Absent names, including ones of the same length and same first and last letters.
    for absent in [
        "",
        "x",
        "retry-afteR-",
        "rxtry-after",
        "x-request-ix",
        "traceparent",
    ] {
        assert_eq!(h.get(absent), None, "{absent}");
    }
    assert_eq!(h.get("Rxtry-aftEr"), None);
    let names: Vec<&str> = h.iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        [
            "Host",
            "X-Request-Id",
            "Retry-After",
            "Connection",
            "x-request-id"
        ]
    );
}

#[test]
fn name_folding_matches_std_on_every_byte_pair() {
    for x in 0..=255u8 {
        for y in 0..=255u8 {
            let a = [b'a', x, b'-', b'b', b'c', b'd', b'e', b'f', x, b'z'];
            let b = [b'A', y, b'-', b'B', b'c', b'D', b'e', b'F', y, b'Z'];
            assert_eq!(same_name(&a, &b), a.eq_ignore_ascii_case(&b), "{x} {y}");
            assert_eq!(
                same_name(&a[..8], &b[..8]),
                a[..8].eq_ignore_ascii_case(&b[..8])
            );
        }
    }
    assert!(same_name(b"Transfer-Encoding", b"transfer-encoding"));
    assert!(!same_name(b"transfer-encodinf", b"transfer-encoding"));
    assert!(!same_name(b"x^y", b"x~y"));
    assert!(!same_name(b"ab", b"abc"));
}

#[test]
fn a_header_costs_twenty_bytes_of_a_held_head() {
    // A held stream keeps its request head and its response head for its whole life.
    assert_eq!(std::mem::size_of::<HeaderRef>(), 20);
    let raw = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Stainless-Lang: js\r\n\r\n";
    let (h, _) = parse_request(raw, HeadLimits::default())
        .expect("parses")
        .expect("whole");
    assert_eq!(h.get("x-stainless-lang"), Some(&b"js"[..]));
    assert_eq!(
        h.iter().map(|(n, _)| n).collect::<Vec<_>>(),
        ["Host", "X-Stainless-Lang"]
    );
}

#[test]
fn a_head_keeps_only_the_lines_asked_for() {
    let text = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\
        set-cookie: __cf_bm=abcdefghijklmnopqrstuvwxyz0123456789-1764763200-1.0.1.1-Qw8eR2tY5uI7oP1aS3dF6gH9jK2lZ4xC7vB0nM3qW5eR8tY1uI4oP6aS9dF2gH5jK7lZ0xC3vB6; path=/; HttpOnly\r\n\
        x-ratelimit-remaining-tokens: 0\r\nopenai-organization: org-1\r\n\
        X-RateLimit-Reset-Tokens: 20s\r\ncf-ray: 8f00000000000000-AMS\r\n\r\n";
    let (mut head, _) = parse_response(text.as_bytes(), HeadLimits::default(), false)
        .unwrap()
        .unwrap();
    let before = (head.status, head.framing, head.keep_alive, head.raw().len());
    head.keep_only(|n| n.len() > 11 && n[..11].eq_ignore_ascii_case(b"x-ratelimit"));
    assert_eq!(
        (head.status, head.framing, head.keep_alive),
        (before.0, before.1, before.2),
        "what was read from the head stays"
    );
    assert_eq!(head.get_str("x-ratelimit-remaining-tokens"), Some("0"));
    assert_eq!(head.get_str("x-ratelimit-reset-tokens"), Some("20s"));
    for gone in [
        "content-type",
        "set-cookie",
        "cf-ray",
        "openai-organization",
    ] {
        assert_eq!(head.get(gone), None, "{gone}");
    }
    assert!(
        head.raw().len() < before.3 / 2,
        "{} bytes",
        head.raw().len()
    );
    // What is left is a head of its own: the first line and the kept lines, as sent.
    let (again, used) = parse_response(head.raw(), HeadLimits::default(), false)
        .unwrap()
        .unwrap();
    assert_eq!(used, head.raw().len());
    let lines: Vec<_> = again
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_vec()))
        .collect();
    let kept: Vec<_> = head
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_vec()))
        .collect();
    assert_eq!(lines, kept);
    assert_eq!(kept.len(), 2);
    assert!(head.raw().starts_with(b"HTTP/1.1 200 OK\r\n"));

    // What would shed less than `SHED_AT_LEAST` is left as it is: every line kept, or a head
    // this small.
    let raw = head.raw().clone();
    head.keep_only(|_| true);
    assert_eq!(head.raw().as_ptr(), raw.as_ptr());
    head.keep_only(|_| false);
    assert_eq!(head.raw().as_ptr(), raw.as_ptr());
    assert_eq!(head.get_str("x-ratelimit-reset-tokens"), Some("20s"));
    // A large head with none kept: the first line alone.
    let big = format!(
        "HTTP/1.1 200 OK\r\nset-cookie: {}\r\n\r\n",
        "c".repeat(SHED_AT_LEAST)
    );
    let (mut head, _) = parse_response(big.as_bytes(), HeadLimits::default(), false)
        .unwrap()
        .unwrap();
    head.keep_only(|_| false);
    assert_eq!(&head.raw()[..], b"HTTP/1.1 200 OK\r\n\r\n");
    assert_eq!(head.get("set-cookie"), None);
    // Bare line feeds, as httparse also takes them: the first line still ends at its own.
    let bare = big
        .replace("\r\n", "\n")
        .replace("OK\n", "OK\nx-ratelimit-reset: 5\n");
    let (mut head, _) = parse_response(bare.as_bytes(), HeadLimits::default(), false)
        .unwrap()
        .unwrap();
    head.keep_only(|n| n.eq_ignore_ascii_case(b"x-ratelimit-reset"));
    assert_eq!(
        &head.raw()[..],
        b"HTTP/1.1 200 OK\nx-ratelimit-reset: 5\r\n\r\n"
    );
    assert_eq!(head.get_str("x-ratelimit-reset"), Some("5"));
}

#[test]
fn a_target_with_characters_a_url_may_not_carry_is_refused() {
    for bad in ["<", ">", "\"", "{", "}", "|", "\\", "^", "`"] {
        let raw = format!("GET /v1/models?q=a{bad}b HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(
            matches!(req(&raw), Err(HeadError::Malformed(m)) if m.contains("request target")),
            "{bad}"
        );
    }
    for ok in [
        "/v1/models?api-version=2024-10-21",
        "/v1/x?a%3Cb=1&c[]=2&d=(e)*f~g!h$i'j;k:l@m",
    ] {
        let raw = format!("GET {ok} HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(matches!(req(&raw), Ok(Some(_))), "{ok}");
    }
}

#[test]
fn iter_in_yields_the_masked_names_and_no_head_without_them() {
    let raw = b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\nX-RateLimit-Remaining-Requests: 9\r\ncontent-length: 0\r\n\r\n";
    let (head, _) = crate::http::head::parse_response(raw, Default::default(), false)
        .unwrap()
        .unwrap();
    let mask = crate::http::names_mask(&["x-ratelimit-remaining-requests"]);
    let names: Vec<&str> = head.iter_in(mask).map(|(n, _)| n).collect();
    assert!(
        names.contains(&"X-RateLimit-Remaining-Requests"),
        "{names:?}"
    );
    assert!(names.len() < 3, "only the slot's names: {names:?}");
    let other = crate::http::names_mask(&["anthropic-ratelimit-unified-status"]);
    if !head.may_have_any(other) {
        assert_eq!(head.iter_in(other).count(), 0);
    }
}
