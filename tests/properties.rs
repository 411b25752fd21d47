//! Property tests: any split of valid input gives the same result; arbitrary bytes never panic.

use proptest::prelude::*;
use ringside::dialect::facts;
use ringside::http::chunk::ChunkTracker;
use ringside::http::head::{HeadLimits, parse_request, parse_response};

/// Encode payload pieces as a chunked body (with an extension on odd chunks and a trailer).
fn encode(pieces: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, p) in pieces.iter().enumerate() {
        if p.is_empty() {
            continue;
        }
        out.extend_from_slice(format!("{:x}", p.len()).as_bytes());
        if i % 2 == 1 {
            out.extend_from_slice(b";ext=1");
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(p);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"0\r\nx-t: v\r\n\r\n");
    out
}

fn run_split(body: &[u8], cuts: &[usize]) -> (Vec<u8>, bool, usize) {
    let mut t = ChunkTracker::new();
    let mut payload = Vec::new();
    let mut consumed = 0;
    let mut start = 0;
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (body.len() + 1)).collect();
    points.sort();
    points.push(body.len());
    for p in points {
        if p < start {
            continue;
        }
        consumed += t
            .feed(&body[start..p], |x| payload.extend_from_slice(x))
            .expect("valid body");
        start = p;
    }
    (payload, t.is_done(), consumed)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn chunk_tracker_any_split_same_payload(
        pieces in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..300), 0..12),
        cuts in prop::collection::vec(any::<usize>(), 0..20),
    ) {
        let body = encode(&pieces);
        let expect: Vec<u8> = pieces.concat();
        let (payload, done, consumed) = run_split(&body, &cuts);
        prop_assert_eq!(payload, expect);
        prop_assert!(done);
        prop_assert_eq!(consumed, body.len());
    }

    #[test]
    fn chunk_tracker_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..2000)) {
        let mut t = ChunkTracker::new();
        let _ = t.feed(&bytes, |_| {});
    }

    #[test]
    fn request_head_any_split_same_result(
        path in "/v1/[a-z/_]{0,30}",
        headers in prop::collection::vec(("[A-Za-z][A-Za-z0-9-]{0,20}", "[ -~]{0,60}"), 0..20),
        cut in any::<usize>(),
    ) {
        let mut raw = format!("POST {path} HTTP/1.1\r\n");
        for (k, v) in &headers {
            if k.eq_ignore_ascii_case("content-length") || k.eq_ignore_ascii_case("transfer-encoding") {
                continue;
            }
            raw.push_str(&format!("{k}: {}\r\n", v.trim()));
        }
        raw.push_str("content-length: 3\r\n\r\nabc");
        let bytes = raw.as_bytes();
        let limits = HeadLimits { max_head_bytes: 64 * 1024, max_headers: 100 };
        let (full, used) = parse_request(bytes, limits).unwrap().unwrap();
        prop_assert_eq!(used, bytes.len() - 3);
        // A prefix either needs more bytes or (only when it holds the whole head) parses the same.
        let c = cut % (bytes.len() + 1);
        match parse_request(&bytes[..c], limits).unwrap() {
            None => prop_assert!(c < used),
            Some((h, u)) => {
                prop_assert_eq!(u, used);
                prop_assert_eq!(h.raw, full.raw);
                prop_assert_eq!(h.framing, full.framing);
            }
        }
    }

    #[test]
    fn heads_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..3000)) {
        let l = HeadLimits::default();
        let _ = parse_request(&bytes, l);
        let _ = parse_response(&bytes, l, false);
    }

    #[test]
    fn facts_never_panic_and_spans_point_at_the_model(bytes in prop::collection::vec(any::<u8>(), 0..500), model in "[a-z0-9./-]{1,20}") {
        let _ = facts::scan(&bytes);
        let body = format!(r#"{{"a":[1,{{"model":"x"}}],"model":"{model}","s":"}}\"model\""}}"#);
        let f = facts::scan(body.as_bytes()).unwrap();
        let span = f.model_span.unwrap();
        prop_assert_eq!(&body[span], format!("\"{model}\""));
    }
}
