use crate::translate::Api;
use crate::translate::answer::{Stamp, error_message, read, translate};
use crate::translate::ir::{Block, Finish, Usage};
use serde_json::{Value, json};

const STAMP: Stamp = Stamp {
    model: "client-model",
    created: 1_700_000_000,
    request_id: "req-42",
    tools: &crate::translate::ir::ClientTools::NONE,
};

fn tr(from: Api, to: Api, body: Value) -> Value {
    serde_json::from_slice(&translate(from, to, body.to_string().as_bytes(), STAMP).unwrap())
        .unwrap()
}

/// Anthropic's documented tool-use answer, for a Chat client.
#[test]
fn anthropic_tool_use_answer_for_a_chat_client() {
    let out = tr(
        Api::Messages,
        Api::Chat,
        json!({
            "id": "msg_01Aq9w938a90dw8q", "type": "message", "role": "assistant", "model": "claude-sonnet-4",
            "content": [
                {"type": "text", "text": "I'll check the weather."},
                {"type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9", "name": "get_weather", "input": {"location": "San Francisco, CA"}}
            ],
            "stop_reason": "tool_use", "stop_sequence": null,
            "usage": {"input_tokens": 10, "output_tokens": 25, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 5}
        }),
    );
    assert_eq!(
        out,
        json!({
            "id": "msg_01Aq9w938a90dw8q", "object": "chat.completion", "created": 1_700_000_000, "model": "client-model",
            "choices": [{"index": 0, "logprobs": null, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": "I'll check the weather.", "refusal": null,
                "tool_calls": [{"id": "toolu_01A09q90qw90lq917835lq9", "type": "function",
                                "function": {"name": "get_weather", "arguments": "{\"location\":\"San Francisco, CA\"}"}}]
            }}],
            // Chat's prompt count includes what the cache read and wrote.
            "usage": {"prompt_tokens": 115, "completion_tokens": 25, "total_tokens": 140,
                      "prompt_tokens_details": {"cached_tokens": 100}, "completion_tokens_details": {"reasoning_tokens": 0}}
        })
    );
}

/// OpenAI's documented Chat answer, for an Anthropic client.
#[test]
fn chat_answer_for_an_anthropic_client() {
    let out = tr(
        Api::Chat,
        Api::Messages,
        json!({
            "id": "chatcmpl-123", "object": "chat.completion", "created": 1677652288, "model": "gpt-4o-mini",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello there, how may I assist you today?"},
                         "logprobs": null, "finish_reason": "length"}],
            "usage": {"prompt_tokens": 9, "completion_tokens": 12, "total_tokens": 21,
                      "prompt_tokens_details": {"cached_tokens": 4}}
        }),
    );
    assert_eq!(
        out,
        json!({
            "id": "chatcmpl-123", "type": "message", "role": "assistant", "model": "client-model",
            "content": [{"type": "text", "text": "Hello there, how may I assist you today?"}],
            "stop_reason": "max_tokens", "stop_sequence": null,
            // Anthropic's input count leaves out the cached part.
            "usage": {"input_tokens": 5, "output_tokens": 12, "cache_read_input_tokens": 4, "cache_creation_input_tokens": 0}
        })
    );
}

/// Gemini's parallel calls come without ids: each gets its own, and `STOP` means tool calls.
#[test]
fn gemini_parallel_calls_get_distinct_ids() {
    let body = json!({
        "candidates": [{"content": {"role": "model", "parts": [
            {"text": "thinking...", "thought": true},
            {"functionCall": {"name": "a", "args": {"x": 1}}, "thoughtSignature": "c2ln"},
            {"functionCall": {"name": "b", "args": {}}}
        ]}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 20, "candidatesTokenCount": 7, "thoughtsTokenCount": 30,
                          "cachedContentTokenCount": 8, "totalTokenCount": 57},
        "modelVersion": "gemini-2.5-flash", "responseId": "r1"
    });
    let a = read(Api::Gemini, body.to_string().as_bytes(), STAMP).unwrap();
    assert_eq!(a.finish, Some(Finish::ToolCalls));
    let ids: Vec<&str> = a
        .blocks
        .iter()
        .filter_map(|b| match b {
            Block::ToolCall { id, .. } => Some(id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(ids, ["call_req420", "call_req421"]);
    assert_eq!(
        a.usage,
        Usage {
            input: 20,
            output: 37,
            cache_read: 8,
            cache_write: 0,
            reasoning: 30
        }
    );
    let out = tr(Api::Gemini, Api::Chat, body);
    assert_eq!(out["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(
        out["choices"][0]["message"]["tool_calls"][1]["function"]["arguments"],
        "{}"
    );
}

#[test]
fn gemini_finish_reasons() {
    for (reason, finish) in [
        ("MAX_TOKENS", Finish::Length),
        ("SAFETY", Finish::ContentFilter),
        ("RECITATION", Finish::ContentFilter),
        ("STOP", Finish::Stop),
    ] {
        let body = json!({"candidates": [{"content": {"parts": [{"text": "x"}]}, "finishReason": reason}]});
        let a = read(Api::Gemini, body.to_string().as_bytes(), STAMP).unwrap();
        assert_eq!(a.finish, Some(finish), "{reason}");
    }
    // A blocked prompt has no candidate.
    let body = json!({"promptFeedback": {"blockReason": "SAFETY"}});
    let a = read(Api::Gemini, body.to_string().as_bytes(), STAMP).unwrap();
    assert_eq!(a.finish, Some(Finish::ContentFilter));
}

#[test]
fn responses_answer_for_chat_and_back() {
    let body = json!({
        "id": "resp_1", "object": "response", "status": "incomplete",
        "incomplete_details": {"reason": "max_output_tokens"}, "model": "gpt-5",
        "output": [
            {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "plan"}]},
            {"type": "message", "id": "msg_1", "role": "assistant", "content": [{"type": "output_text", "text": "Hi", "annotations": []}]}
        ],
        "usage": {"input_tokens": 3, "output_tokens": 9, "input_tokens_details": {"cached_tokens": 1},
                  "output_tokens_details": {"reasoning_tokens": 6}, "total_tokens": 12}
    });
    let chat = tr(Api::Responses, Api::Chat, body);
    assert_eq!(chat["choices"][0]["finish_reason"], "length");
    assert_eq!(chat["choices"][0]["message"]["content"], "Hi");
    assert_eq!(
        chat["usage"]["completion_tokens_details"]["reasoning_tokens"],
        6
    );
    let resp = tr(Api::Chat, Api::Responses, chat);
    assert_eq!(resp["status"], "incomplete");
    assert_eq!(
        resp["incomplete_details"],
        json!({"reason": "max_output_tokens"})
    );
    assert_eq!(
        resp["output"][0]["content"][0],
        json!({"type": "output_text", "text": "Hi", "annotations": []})
    );
    assert_eq!(resp["usage"]["total_tokens"], 12);
}

#[test]
fn a_garbled_answer_is_an_error_not_a_panic() {
    for (api, body) in [
        (Api::Chat, &b"{\"choices\": []}"[..]),
        (Api::Messages, b"{\"content\": 3}"),
        (Api::Responses, b"[]"),
        (Api::Gemini, b"not json"),
    ] {
        assert!(read(api, body, STAMP).is_err(), "{api:?}");
    }
}

#[test]
fn error_messages_from_every_api() {
    assert_eq!(
        error_message(br#"{"error":{"message":"Rate limit reached","type":"requests"}}"#),
        "Rate limit reached"
    );
    assert_eq!(
        error_message(
            br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#
        ),
        "Overloaded"
    );
    assert_eq!(
        error_message(
            br#"{"error":{"code":429,"message":"Quota exceeded","status":"RESOURCE_EXHAUSTED"}}"#
        ),
        "Quota exceeded"
    );
    assert_eq!(
        error_message(b"upstream connect error\r\n"),
        "upstream connect error"
    );
}
