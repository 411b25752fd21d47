//! An OpenAI Responses answer read into the neutral form, and written from it.

use crate::translate::answer::{Garbled, Stamp, made_id};
use crate::translate::ir::{Answer, Block, Finish, Usage};
use crate::translate::json::{Obj, str_field};
use serde_json::{Value, json};

pub fn read_answer(o: &Obj) -> Result<Answer, Garbled> {
    let output = o
        .get("output")
        .and_then(Value::as_array)
        .ok_or_else(|| Garbled("the answer has no output".into()))?;
    let mut blocks = Vec::new();
    for item in output {
        let s = |k: &str| {
            item.get(k)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        match item.get("type").and_then(Value::as_str) {
            Some("message") => {
                for part in item
                    .get("content")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let text = part.get("text").or_else(|| part.get("refusal"));
                    if let Some(t) = text.and_then(Value::as_str) {
                        blocks.push(Block::Text(t.into()));
                    }
                }
            }
            Some("function_call") => blocks.push(Block::ToolCall {
                id: s("call_id"),
                name: s("name"),
                arguments: s("arguments"),
            }),
            Some("reasoning") => {
                let text: String = item
                    .get("summary")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|p| p.get("text").and_then(Value::as_str))
                    .collect();
                if !text.is_empty() {
                    blocks.push(Block::Thinking {
                        text,
                        signature: None,
                    });
                }
            }
            _ => {}
        }
    }
    let mut a = Answer {
        id: str_field(o, "id").unwrap_or("").into(),
        model: str_field(o, "model").unwrap_or("").into(),
        blocks,
        finish: None,
        usage: o.get("usage").map(usage_of).unwrap_or_default(),
    };
    a.finish = Some(finish_of(o, a.has_tool_calls()));
    Ok(a)
}

/// Responses has a status, not a finish reason: `incomplete` says why in its details.
pub(in crate::translate) fn finish_of(o: &Obj, calls: bool) -> Finish {
    let reason = o
        .get("incomplete_details")
        .and_then(|d| d.get("reason"))
        .and_then(Value::as_str);
    match (str_field(o, "status"), reason) {
        (Some("incomplete"), Some("content_filter")) => Finish::ContentFilter,
        (Some("incomplete"), _) => Finish::Length,
        _ if calls => Finish::ToolCalls,
        _ => Finish::Stop,
    }
}

pub(in crate::translate) fn usage_of(u: &Value) -> Usage {
    let n = |p: &str| u.pointer(p).and_then(Value::as_u64).unwrap_or(0);
    Usage {
        input: n("/input_tokens"),
        output: n("/output_tokens"),
        cache_read: n("/input_tokens_details/cached_tokens"),
        cache_write: 0,
        reasoning: n("/output_tokens_details/reasoning_tokens"),
    }
}

pub(in crate::translate) fn usage_json(u: &Usage) -> Value {
    json!({
        "input_tokens": u.input,
        "input_tokens_details": {"cached_tokens": u.cache_read},
        "output_tokens": u.output,
        "output_tokens_details": {"reasoning_tokens": u.reasoning},
        "total_tokens": u.input + u.output,
    })
}

/// The output items of an answer, in order: reasoning, then text in one message, then calls.
pub(in crate::translate) fn output_items(a: &Answer, stamp: Stamp) -> Vec<Value> {
    let mut items = Vec::new();
    for b in &a.blocks {
        if let Block::Thinking { text, .. } = b {
            items.push(json!({
                "id": made_id("rs_", stamp, items.len()), "type": "reasoning",
                "summary": [{"type": "summary_text", "text": text}],
            }));
        }
    }
    let text = a.text();
    if !text.is_empty() || !a.has_tool_calls() {
        items.push(json!({
            "id": made_id("msg_", stamp, items.len()), "type": "message", "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }));
    }
    for b in &a.blocks {
        if let Block::ToolCall {
            id,
            name,
            arguments,
        } = b
        {
            items.push(json!({
                "id": made_id("fc_", stamp, items.len()), "type": "function_call", "status": "completed",
                "call_id": id, "name": name, "arguments": if arguments.is_empty() { "{}" } else { arguments },
            }));
        }
    }
    items
}

/// `status` and `incomplete_details` for a finish.
pub(in crate::translate) fn status_of(f: Option<Finish>) -> (&'static str, Value) {
    match f {
        Some(Finish::Length) => ("incomplete", json!({"reason": "max_output_tokens"})),
        Some(Finish::ContentFilter) => ("incomplete", json!({"reason": "content_filter"})),
        _ => ("completed", Value::Null),
    }
}

pub fn write_answer(a: &Answer, stamp: Stamp) -> Value {
    let (status, incomplete) = status_of(a.finish);
    json!({
        "id": a.id,
        "object": "response",
        "created_at": stamp.created,
        "status": status,
        "error": null,
        "incomplete_details": incomplete,
        "model": stamp.model,
        "output": output_items(a, stamp),
        "parallel_tool_calls": true,
        "tool_choice": "auto",
        "tools": [],
        "usage": usage_json(&a.usage),
    })
}
