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
                prop_assert_eq!(h.raw(), full.raw());
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
        prop_assert_eq!(f.model.as_deref(), Some(model.as_str()));
        let span = f.model_span.unwrap();
        prop_assert_eq!(&body[span], format!("\"{model}\""));
    }
}

#[path = "fixtures/streams.rs"]
mod streams;

fn scan_pieces(stream: &[u8], cuts: &[usize]) -> (Vec<ringside::sse::Kind>, ringside::sse::Totals) {
    let mut s = ringside::sse::Scanner::default();
    let mut kinds = Vec::new();
    let mut at = 0;
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (stream.len() + 1)).collect();
    cuts.sort();
    for c in cuts.into_iter().chain(std::iter::once(stream.len())) {
        s.feed(&stream[at..c.max(at)], |e| kinds.push(e.kind));
        at = c.max(at);
    }
    (kinds, s.totals)
}

proptest! {
    #[test]
    fn sse_any_split_same_classification(which in 0usize..3, cuts in proptest::collection::vec(0usize..4096, 0..24)) {
        let stream = [streams::OPENAI_CHAT, streams::RESPONSES, streams::ANTHROPIC][which].as_bytes();
        let whole = scan_pieces(stream, &[]);
        prop_assert_eq!(scan_pieces(stream, &cuts), whole);
    }

    #[test]
    fn sse_through_chunk_framing_same_classification(which in 0usize..3, sizes in proptest::collection::vec(1usize..300, 1..40)) {
        let stream = [streams::OPENAI_CHAT, streams::RESPONSES, streams::ANTHROPIC][which].as_bytes();
        let mut pieces = Vec::new();
        let mut at = 0;
        for s in sizes.iter().cycle() {
            if at >= stream.len() { break; }
            let end = (at + s).min(stream.len());
            pieces.push(stream[at..end].to_vec());
            at = end;
        }
        let body = encode(&pieces);
        let mut t = ChunkTracker::new();
        let mut sc = ringside::sse::Scanner::default();
        let mut kinds = Vec::new();
        for part in body.chunks(97) {
            t.feed(part, |p| sc.feed(p, |e| kinds.push(e.kind))).unwrap();
        }
        prop_assert_eq!((kinds, sc.totals), scan_pieces(stream, &[]));
    }

    #[test]
    fn sse_arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
        let mut s = ringside::sse::Scanner::default();
        s.feed(&bytes, |_| {});
    }
}

/// Token soup for the JSON skim: keys it cares about, escapes, unicode escapes, numbers,
/// structure, long keys and plain text, in any order (valid JSON or not).
fn json_soup() -> impl Strategy<Value = Vec<u8>> {
    let tokens = prop::sample::select(vec![
        "{",
        "}",
        "[",
        "]",
        ":",
        ",",
        " ",
        "\n",
        "\t",
        "\u{1}",
        "\"",
        "\\",
        "\\\"",
        "\\u00e9",
        "\\ud83d\\ude00",
        "0",
        "42",
        "1234567",
        "-",
        "true",
        "null",
        "\"content\"",
        "\"text\"",
        "\"delta\"",
        "\"arguments\"",
        "\"thinking\"",
        "\"type\"",
        "\"error\"",
        "\"usage\"",
        "\"choices\"",
        "\"prompt_tokens\"",
        "\"output_tokens\"",
        "\"a_key_that_is_longer_than_twenty_four_bytes\"",
        "héllo",
        "tok ",
        "\"x\\\"y\"",
        "\"content\":\"abc\"",
        "\"text\":\"hé\"",
        "\"type\":\"error\"",
        "\"arguments\":\"{}\"",
        "\"reasoning\":\"hm\\u00e9\"",
        "\"completion_tokens\":77",
        "{\"error\":",
        "\"delta\":\"x",
    ]);
    prop::collection::vec(tokens, 0..80).prop_map(|t| t.concat().into_bytes())
}

fn skim(bytes: &[u8], cuts: &[usize]) -> ringside::sse::json::Counts {
    let mut j = ringside::sse::json::JsonScan::default();
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    cuts.sort();
    let mut at = 0;
    for c in cuts.into_iter().chain(std::iter::once(bytes.len())) {
        j.feed(&bytes[at..c.max(at)]);
        at = c.max(at);
    }
    j.finish()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]
    /// The whole-string fast path and the byte-level states agree: fed whole, byte by byte
    /// (which takes only the byte-level states) or cut anywhere, the counts are the same.
    #[test]
    fn json_skim_fast_and_byte_paths_agree(bytes in json_soup(), cuts in proptest::collection::vec(0usize..4096, 0..12)) {
        let whole = skim(&bytes, &[]);
        let every: Vec<usize> = (0..bytes.len()).collect();
        prop_assert_eq!(skim(&bytes, &every), whole);
        prop_assert_eq!(skim(&bytes, &cuts), whole);
    }
}

#[test]
fn recorded_streams_classify_as_expected() {
    use ringside::sse::Kind::*;
    let (k, t) = scan_pieces(streams::OPENAI_CHAT.as_bytes(), &[]);
    assert_eq!(
        k,
        [Lifecycle, Text, Text, Protected, Lifecycle, Usage, Terminal]
    );
    assert_eq!(
        (t.text_bytes, t.input_tokens, t.output_tokens),
        (3 + 8, Some(21), Some(9)),
        "decoded UTF-8 bytes"
    );
    let (k, t) = scan_pieces(streams::RESPONSES.as_bytes(), &[]);
    assert_eq!(k, [Lifecycle, Lifecycle, Lifecycle, Text, Text, Terminal]);
    assert_eq!(t.text_bytes, 8);
    let (k, t) = scan_pieces(streams::ANTHROPIC.as_bytes(), &[]);
    assert_eq!(
        k,
        [
            Lifecycle, Lifecycle, Protected, Heartbeat, Text, Usage, Terminal
        ]
    );
    assert_eq!((t.text_bytes, t.output_tokens), (6, Some(15)));
}

/// Streams whose events repeat a few envelopes (the JSON before the output value) with digits
/// that change, at the same length or not, before or after a usage figure; values with escapes;
/// CRLF or LF; with or without an `event:` line. Built so that the scanner's envelope memo hits,
/// misses and recaptures.
fn envelope_stream() -> impl Strategy<Value = Vec<u8>> {
    let envelopes = prop::sample::select(vec![
        r#"{"type":"content_block_delta","index":@,"delta":{"type":"text_delta","text":"#,
        r#"{"type":"response.output_text.delta","sequence_number":@,"item_id":"msg_@","delta":"#,
        r#"{"id":"c@","created":17@,"choices":[{"index":0,"delta":{"content":"#,
        r#"{"id":"c@","choices":[{"index":0,"delta":{"tool_calls":[{"function":{"arguments":"#,
        r#"{"usage":{"output_tokens":@},"delta":{"text":"#,
        r#"{"type":"error","x@":@,"text":"#,
        r#"{"a@":"b@","thinking":"#,
        r#"{"type":"message_delta","usage":{"output_tokens":@}}"#,
    ]);
    let values = prop::sample::select(vec![
        r#""hi""#,
        r#""""#,
        r#""x\"y""#,
        r#""é@\u00e9""#,
        r#""a long value that goes on past the end of one sixty-four byte block, and more""#,
        "12",
        "null",
    ]);
    let suffixes = prop::sample::select(vec![
        "}}",
        "}]}",
        "}}]}}",
        r#","sequence_number":@}"#,
        r#","usage":{"input_tokens":@}}"#,
        "",
    ]);
    let digits = prop::sample::select(vec!["0", "7", "12", "345"]);
    let event = (
        envelopes,
        values,
        suffixes,
        digits,
        any::<bool>(),
        any::<bool>(),
    );
    prop::collection::vec(event, 1..40).prop_map(|events| {
        let mut out = String::new();
        for (envelope, value, suffix, d, named, crlf) in events {
            let nl = if crlf { "\r\n" } else { "\n" };
            if named {
                out += &format!("event: content_block_delta{nl}");
            }
            let data = if envelope.ends_with('}') {
                envelope.replace('@', d)
            } else {
                format!("{envelope}{value}{suffix}").replace('@', d)
            };
            out += &format!("data: {data}{nl}{nl}");
        }
        out.into_bytes()
    })
}

fn events_of(stream: &[u8], cuts: &[usize]) -> Vec<ringside::sse::Event> {
    let mut s = ringside::sse::Scanner::default();
    let mut events = Vec::new();
    let mut at = 0;
    for c in cuts.iter().copied().chain(std::iter::once(stream.len())) {
        s.feed(&stream[at..c.max(at)], |e| events.push(e));
        at = c.max(at);
    }
    s.finish(|e| events.push(e));
    events
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]
    /// The envelope memo changes nothing: a stream fed whole (where the memo hits) gives the same
    /// events, counts included, as fed byte by byte (where it never can) or cut anywhere.
    #[test]
    fn envelope_memo_gives_the_byte_paths_events(stream in envelope_stream(), cuts in proptest::collection::vec(0usize..8192, 0..12)) {
        let every: Vec<usize> = (0..stream.len()).collect();
        let whole = events_of(&stream, &[]);
        prop_assert_eq!(&events_of(&stream, &every), &whole);
        let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (stream.len() + 1)).collect();
        cuts.sort();
        prop_assert_eq!(&events_of(&stream, &cuts), &whole);
    }
}
