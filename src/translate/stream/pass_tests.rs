use super::super::{Standing, Translator};

const USAGE: &str = "data: {\"id\":\"c\",\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":8}}\n\n";

fn text(event: &str) -> String {
    format!(
        "data: {{\"id\":\"c\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{event}\"}}}}],\"usage\":null}}\n\n"
    )
}

/// The stream fed in two parts split at `at`: what the client read.
fn relay(upstream: &str, at: usize) -> String {
    let mut t = Translator::without_usage("r");
    assert!(t.passes_through());
    let mut out = Vec::new();
    let (a, b) = upstream.as_bytes().split_at(at);
    t.feed(a, &mut out);
    t.feed(b, &mut out);
    // How the stream ended is the stream guard's to tell, not the filter's.
    assert_eq!(t.finish(&mut out), Standing::Open);
    String::from_utf8(out).expect("utf-8")
}

#[test]
fn the_usage_chunk_is_left_out_and_everything_else_passes_as_sent() {
    let upstream = format!(
        ": keep-alive\n\n{}{}{USAGE}data: [DONE]\n\n",
        text("Hi"),
        text("[]")
    );
    let want = format!(
        ": keep-alive\n\n{}{}data: [DONE]\n\n",
        text("Hi"),
        text("[]")
    );
    // Split anywhere: the tail of a read waits for the rest of its event.
    for at in 0..=upstream.len() {
        assert_eq!(relay(&upstream, at), want, "split at {at}");
    }
}

#[test]
fn crlf_lines_and_a_spaced_empty_array_are_read_too() {
    let usage = "data: {\"choices\": [],\"usage\":{\"prompt_tokens\":1}}\r\n\r\n";
    let upstream = format!("data: {{\"choices\":[{{}}]}}\r\n\r\n{usage}data: [DONE]\r\n\r\n");
    let out = relay(&upstream, 5);
    assert_eq!(out, "data: {\"choices\":[{}]}\r\n\r\ndata: [DONE]\r\n\r\n");
}

#[test]
fn a_stream_cut_short_and_an_error_pass_as_sent() {
    assert_eq!(relay(&text("Hi"), 10), text("Hi"));
    // The last event, cut at the close without its blank line, still goes out whole.
    let out = relay("data: {\"choices\":[{\"delta\":{}}]}", 4);
    assert_eq!(out, "data: {\"choices\":[{\"delta\":{}}]}\n\n");
    let upstream = format!(
        "data: {{\"error\":{{\"message\":\"x\"}}}}\n\n{}",
        text("after")
    );
    assert_eq!(relay(&upstream, 7), upstream);
}

#[test]
fn a_usage_field_beside_choices_is_not_the_usage_chunk() {
    let upstream =
        "data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}],\"usage\":{\"prompt_tokens\":1}}\n\n";
    assert_eq!(relay(upstream, 0), upstream);
}
