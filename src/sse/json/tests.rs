use super::*;

fn scan(s: &str) -> Counts {
    let mut j = JsonScan::default();
    j.feed(s.as_bytes());
    j.finish()
}

#[test]
fn counts_output_by_key() {
    let c = scan(r#"{"choices":[{"delta":{"content":"Hello, wo\"rld"}}]}"#);
    assert_eq!((c.text, c.choices), (13, true), "decoded bytes");
    let c = scan(
        r#"{"type":"content_block_delta","delta":{"type":"input_json_delta","partial_json":"{\"a\":1"}}"#,
    );
    assert_eq!((c.text, c.tool), (0, 6));
    let c = scan(r#"{"delta":{"type":"thinking_delta","thinking":"hmm"}}"#);
    assert_eq!(c.reasoning, 3);
    let c = scan(r#"{"type":"response.output_text.delta","delta":"héllo"}"#);
    assert_eq!(c.text, 6, "UTF-8 bytes");
}

#[test]
fn usage_and_errors() {
    let c = scan(
        r#"{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":345,"total_tokens":357}}"#,
    );
    assert_eq!(
        (c.usage, c.input_tokens, c.output_tokens),
        (true, Some(12), Some(345))
    );
    let c = scan(r#"{"type":"message_delta","usage":{"output_tokens":7}}"#);
    assert_eq!(c.output_tokens, Some(7));
    assert!(scan(r#"{"error":{"message":"x"}}"#).error);
    assert!(scan(r#"{"type":"error","error":{"type":"overloaded_error"}}"#).error);
    assert!(!scan(r#"{"choices":[{"delta":{"content":"error"}}]}"#).error);
    assert!(
        !scan(r#"{"a":{"error":1}}"#).error,
        "only a top-level error"
    );
}

#[test]
fn any_split_gives_the_same_counts() {
    let s = r#"{"choices":[{"delta":{"content":"a\\b\"c","tool_calls":[{"function":{"arguments":"{}"}}]}}],"usage":{"prompt_tokens":5}}"#;
    let whole = scan(s);
    for cut in 0..s.len() {
        let mut j = JsonScan::default();
        j.feed(&s.as_bytes()[..cut]);
        j.feed(&s.as_bytes()[cut..]);
        assert_eq!(j.finish(), whole, "cut at {cut}");
    }
}
