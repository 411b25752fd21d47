use super::*;

fn kinds(stream: &str) -> (Vec<Kind>, Totals) {
    let mut s = Scanner::default();
    let mut out = Vec::new();
    s.feed(stream.as_bytes(), |e| out.push(e.kind));
    (out, s.totals)
}

const CHAT: &str = "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n\
data: {\"choices\":[{\"delta\":{\"content\":\"Hello\"}}]}\n\n\
: keep-alive\n\n\
data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"function\":{\"arguments\":\"{\\\"q\\\":1}\"}}]}}]}\n\n\
data: {\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":5}}\n\n\
data: [DONE]\n\n";

const ANTHROPIC: &str = "event: message_start\r\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":25}}}\r\n\r\n\
event: content_block_start\r\ndata: {\"type\":\"content_block_start\",\"index\":0}\r\n\r\n\
event: ping\r\ndata: {\"type\": \"ping\"}\r\n\r\n\
event: content_block_delta\r\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"hmm\"}}\r\n\r\n\
event: content_block_delta\r\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi there\"}}\r\n\r\n\
event: message_delta\r\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":12}}\r\n\r\n\
event: message_stop\r\ndata: {\"type\":\"message_stop\"}\r\n\r\n";

const RESPONSES: &str = "event: response.created\ndata: {\"type\":\"response.created\"}\n\n\
event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"Yo\"}\n\n\
event: response.function_call_arguments.delta\ndata: {\"type\":\"response.function_call_arguments.delta\",\"delta\":\"{\\\"a\"}\n\n\
event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":3,\"output_tokens\":4}}}\n\n";

#[test]
fn openai_chat_stream() {
    let (k, t) = kinds(CHAT);
    assert_eq!(
        k,
        [
            Kind::Lifecycle,
            Kind::Text,
            Kind::Protected,
            Kind::Usage,
            Kind::Terminal
        ]
    );
    assert_eq!((t.text_bytes, t.heartbeats, t.terminal), (5, 1, true));
    assert_eq!((t.input_tokens, t.output_tokens), (Some(9), Some(5)));
}

#[test]
fn anthropic_stream_with_crlf() {
    let (k, t) = kinds(ANTHROPIC);
    assert_eq!(
        k,
        [
            Kind::Lifecycle,
            Kind::Lifecycle,
            Kind::Heartbeat,
            Kind::Protected,
            Kind::Text,
            Kind::Usage,
            Kind::Terminal
        ]
    );
    assert_eq!(
        (t.text_bytes, t.input_tokens, t.output_tokens),
        (8, Some(25), Some(12))
    );
}

#[test]
fn responses_stream() {
    let (k, t) = kinds(RESPONSES);
    assert_eq!(
        k,
        [Kind::Lifecycle, Kind::Text, Kind::Protected, Kind::Terminal]
    );
    assert_eq!((t.text_bytes, t.output_tokens), (2, Some(4)));
}

#[test]
fn errors_in_band() {
    let (k, t) = kinds("data: {\"error\":{\"message\":\"rate limited\"}}\n\n");
    assert_eq!((k, t.errors), (vec![Kind::Error], 1));
    let (k, _) = kinds(
        "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\"}}\n\n",
    );
    assert_eq!(k, [Kind::Error]);
}

#[test]
fn multi_line_data_and_odd_lines() {
    let s = "data: {\"choices\":[{\"delta\":\ndata: {\"content\":\"ab\"}}]}\n\nid: 7\n\nretry: 100\ndata\n\n";
    let (k, t) = kinds(s);
    assert_eq!(k[0], Kind::Text);
    assert_eq!(t.text_bytes, 2);
    assert_eq!(k.len(), 3);
    let (k, _) = kinds("data:[DONE]\n\n");
    assert_eq!(k, [Kind::Terminal]);
    let (k, _) = kinds("data: [DONE] \n\n");
    assert_ne!(k, [Kind::Terminal], "exactly [DONE]");
}

#[test]
fn every_split_gives_the_same_events() {
    for stream in [CHAT, ANTHROPIC, RESPONSES] {
        let (whole, totals) = kinds(stream);
        let b = stream.as_bytes();
        for a in 0..b.len() {
            for c in [a, (a + 7).min(b.len()), b.len()] {
                let mut s = Scanner::default();
                let mut got = Vec::new();
                s.feed(&b[..a], |e| got.push(e.kind));
                s.feed(&b[a..c], |e| got.push(e.kind));
                s.feed(&b[c..], |e| got.push(e.kind));
                assert_eq!(got, whole, "split at {a}/{c}");
                assert_eq!(s.totals, totals);
            }
        }
    }
}

#[test]
fn garbage_never_panics() {
    let mut s = Scanner::default();
    let junk: Vec<u8> = (0..5000u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    s.feed(&junk, |_| {});
    s.feed(b"\n\n\r\r\n:::\ndata: {\"a\":[[[[\"\n\n", |_| {});
}

#[test]
fn an_event_left_open_at_the_end_counts() {
    let mut s = Scanner::default();
    let mut k = Vec::new();
    s.feed(
        b"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: [DONE]",
        |e| k.push(e.kind),
    );
    assert!(!s.totals.terminal);
    s.finish(|e| k.push(e.kind));
    assert_eq!(k, [Kind::Text, Kind::Terminal]);
    s.finish(|e| k.push(e.kind));
    assert_eq!(k.len(), 2, "nothing twice");
}
