//! A simulator that calls tools (`--call-tools`): a request that offers tools and does not end
//! with a tool's result is answered with a call to its first tool, in its API's shape, whole or
//! streamed; a request that ends with a result is answered with text. What a client's tool loop
//! (call, result, answer) meets, through a translation or not.

use super::body::Api;
use serde_json::{Value, json};

/// The arguments every call carries.
const ARGS: &str = r#"{"city":"Paris"}"#;

/// The tool to call, when the request offers tools and its last turn is not a tool's result.
pub fn to_call(api: Api, body: &[u8]) -> Option<String> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let (name, answered) = match api {
        Api::Chat => (
            v.pointer("/tools/0/function/name"),
            v["messages"].as_array()?.last()?["role"] == "tool",
        ),
        Api::Messages => {
            let last = v["messages"].as_array()?.last()?;
            let results = last["content"].as_array().into_iter().flatten();
            (
                v.pointer("/tools/0/name"),
                results.into_iter().any(|b| b["type"] == "tool_result"),
            )
        }
        Api::Responses => (
            v.pointer("/tools/0/name"),
            v["input"]
                .as_array()
                .and_then(|a| a.last())
                .is_some_and(|i| i["type"] == "function_call_output"),
        ),
        Api::Gemini => {
            let last = v["contents"].as_array()?.last()?;
            let parts = last["parts"].as_array().into_iter().flatten();
            (
                v.pointer("/tools/0/functionDeclarations/0/name"),
                parts
                    .into_iter()
                    .any(|p| p.get("functionResponse").is_some()),
            )
        }
        _ => return None,
    };
    if answered {
        return None;
    }
    name.and_then(Value::as_str).map(str::to_string)
}

/// A whole answer that calls `name`.
pub fn answer(api: Api, model: &str, seq: u64, name: &str) -> Vec<u8> {
    let id = format!("call_sim{seq}");
    let args: Value = serde_json::from_str(ARGS).unwrap_or_default();
    let v = match api {
        Api::Messages => {
            json!({"id": format!("msg_sim{seq}"), "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "tool_use", "id": format!("toolu_sim{seq}"), "name": name, "input": args}],
            "stop_reason": "tool_use", "stop_sequence": null, "usage": {"input_tokens": 9, "output_tokens": 5}})
        }
        Api::Responses => {
            json!({"id": format!("resp_sim{seq}"), "object": "response", "created_at": 1_700_000_000u64,
            "status": "completed", "model": model,
            "output": [{"type": "function_call", "id": format!("fc_sim{seq}"), "call_id": id, "name": name,
                        "arguments": ARGS, "status": "completed"}],
            "usage": {"input_tokens": 9, "output_tokens": 5, "total_tokens": 14}})
        }
        Api::Gemini => {
            json!({"candidates": [{"content": {"role": "model", "parts": [{"functionCall": {"name": name, "args": args}}]},
            "finishReason": "STOP", "index": 0}], "modelVersion": model,
            "usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 5, "totalTokenCount": 14}})
        }
        _ => {
            json!({"id": format!("chatcmpl-sim{seq}"), "object": "chat.completion", "created": 1_700_000_000u64, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": null,
                "tool_calls": [{"id": id, "type": "function", "function": {"name": name, "arguments": ARGS}}]},
                "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": 9, "completion_tokens": 5, "total_tokens": 14}})
        }
    };
    serde_json::to_vec(&v).unwrap_or_default()
}

fn named(kind: &str, v: Value) -> Vec<u8> {
    format!("event: {kind}\ndata: {v}\n\n").into_bytes()
}

fn data(v: Value) -> Vec<u8> {
    format!("data: {v}\n\n").into_bytes()
}

/// The events of a streamed answer that calls `name` (its arguments in two pieces).
pub fn events(api: Api, model: &str, seq: u64, name: &str, include_usage: bool) -> Vec<Vec<u8>> {
    match api {
        Api::Messages => messages_events(model, seq, name),
        Api::Responses => responses_events(model, seq, name),
        Api::Gemini => vec![
            format!(
                "data: {}\r\n\r\n",
                String::from_utf8_lossy(&answer(api, model, seq, name))
            )
            .into_bytes(),
        ],
        _ => chat_events(model, seq, name, include_usage),
    }
}

fn messages_events(model: &str, seq: u64, name: &str) -> Vec<Vec<u8>> {
    let (a, b) = ARGS.split_at(8);
    let mid = format!("msg_sim{seq}");
    vec![
        named(
            "message_start",
            json!({"type": "message_start", "message": {"id": mid, "type": "message", "role": "assistant",
            "model": model, "content": [], "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 9, "output_tokens": 1}}}),
        ),
        named(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "tool_use", "id": format!("toolu_sim{seq}"), "name": name, "input": {}}}),
        ),
        named(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": a}}),
        ),
        named(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": b}}),
        ),
        named(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        named(
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 5}}),
        ),
        named("message_stop", json!({"type": "message_stop"})),
    ]
}

fn responses_events(model: &str, seq: u64, name: &str) -> Vec<Vec<u8>> {
    let (a, b) = ARGS.split_at(8);
    let (rid, fid, id) = (
        format!("resp_sim{seq}"),
        format!("fc_sim{seq}"),
        format!("call_sim{seq}"),
    );
    let item = |status: &str, args: &str| json!({"type": "function_call", "id": fid, "call_id": id, "name": name, "arguments": args, "status": status});
    let base = json!({"id": rid, "object": "response", "created_at": 1_700_000_000u64, "status": "in_progress", "model": model, "output": []});
    let mut done = base.clone();
    done["status"] = "completed".into();
    done["output"] = json!([item("completed", ARGS)]);
    done["usage"] = json!({"input_tokens": 9, "output_tokens": 5, "total_tokens": 14});
    let delta = |n: u64, d: &str| {
        named(
            "response.function_call_arguments.delta",
            json!({"type": "response.function_call_arguments.delta",
        "sequence_number": n, "item_id": fid, "output_index": 0, "delta": d}),
        )
    };
    vec![
        named(
            "response.created",
            json!({"type": "response.created", "sequence_number": 0, "response": base}),
        ),
        named(
            "response.output_item.added",
            json!({"type": "response.output_item.added", "sequence_number": 1, "output_index": 0, "item": item("in_progress", "")}),
        ),
        delta(2, a),
        delta(3, b),
        named(
            "response.function_call_arguments.done",
            json!({"type": "response.function_call_arguments.done", "sequence_number": 4, "item_id": fid, "output_index": 0, "arguments": ARGS}),
        ),
        named(
            "response.output_item.done",
            json!({"type": "response.output_item.done", "sequence_number": 5, "output_index": 0, "item": item("completed", ARGS)}),
        ),
        named(
            "response.completed",
            json!({"type": "response.completed", "sequence_number": 6, "response": done}),
        ),
    ]
}

fn chat_events(model: &str, seq: u64, name: &str, include_usage: bool) -> Vec<Vec<u8>> {
    let (a, b) = ARGS.split_at(8);
    let id = format!("call_sim{seq}");
    let chunk = |delta: Value, finish: Value| {
        data(
            json!({"id": format!("chatcmpl-sim{seq}"), "object": "chat.completion.chunk", "created": 1_700_000_000u64,
            "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}),
        )
    };
    let mut evs = vec![
        chunk(json!({"role": "assistant", "content": null}), Value::Null),
        chunk(
            json!({"tool_calls": [{"index": 0, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]}),
            Value::Null,
        ),
        chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": a}}]}),
            Value::Null,
        ),
        chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": b}}]}),
            Value::Null,
        ),
        chunk(json!({}), "tool_calls".into()),
    ];
    if include_usage {
        evs.push(data(json!({"id": format!("chatcmpl-sim{seq}"), "object": "chat.completion.chunk", "created": 1_700_000_000u64,
            "model": model, "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 5, "total_tokens": 14}})));
    }
    evs.push(b"data: [DONE]\n\n".to_vec());
    evs
}
