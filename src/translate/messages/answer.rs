//! An Anthropic Messages answer read into the neutral form, and written from it.

use crate::translate::answer::{Garbled, Stamp};
use crate::translate::ir::{Answer, Block, Finish, Usage};
use crate::translate::json::{Obj, str_field};
use serde_json::{Value, json};

pub fn read_answer(o: &Obj) -> Result<Answer, Garbled> {
    let content = o
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| Garbled("the answer has no content".into()))?;
    let mut blocks = Vec::new();
    for b in content {
        match b.get("type").and_then(Value::as_str) {
            Some("text") => blocks.push(Block::Text(
                b.get("text").and_then(Value::as_str).unwrap_or("").into(),
            )),
            Some("tool_use") => blocks.push(Block::ToolCall {
                id: b.get("id").and_then(Value::as_str).unwrap_or("").into(),
                name: b.get("name").and_then(Value::as_str).unwrap_or("").into(),
                arguments: b
                    .get("input")
                    .map(Value::to_string)
                    .unwrap_or_else(|| "{}".into()),
            }),
            Some("thinking") => blocks.push(Block::Thinking {
                text: b
                    .get("thinking")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .into(),
                signature: b
                    .get("signature")
                    .and_then(Value::as_str)
                    .map(str::to_string),
            }),
            _ => {}
        }
    }
    Ok(Answer {
        id: str_field(o, "id").unwrap_or("").into(),
        model: str_field(o, "model").unwrap_or("").into(),
        blocks,
        finish: str_field(o, "stop_reason").map(finish_of),
        usage: o.get("usage").map(usage_of).unwrap_or_default(),
    })
}

pub(in crate::translate) fn finish_of(s: &str) -> Finish {
    match s {
        "max_tokens" | "model_context_window_exceeded" => Finish::Length,
        "tool_use" => Finish::ToolCalls,
        "refusal" => Finish::ContentFilter,
        _ => Finish::Stop,
    }
}

pub(in crate::translate) fn stop_reason(f: Finish) -> &'static str {
    match f {
        Finish::Stop => "end_turn",
        Finish::Length => "max_tokens",
        Finish::ToolCalls => "tool_use",
        Finish::ContentFilter => "refusal",
    }
}

/// Anthropic's input count leaves out cache reads and writes; the neutral form counts them.
pub(in crate::translate) fn usage_of(u: &Value) -> Usage {
    let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
    let (read, write) = (
        n("cache_read_input_tokens"),
        n("cache_creation_input_tokens"),
    );
    Usage {
        input: n("input_tokens") + read + write,
        output: n("output_tokens"),
        cache_read: read,
        cache_write: write,
        reasoning: 0,
    }
}

pub(in crate::translate) fn usage_json(u: &Usage) -> Value {
    json!({
        "input_tokens": u.uncached_input(),
        "output_tokens": u.output,
        "cache_read_input_tokens": u.cache_read,
        "cache_creation_input_tokens": u.cache_write,
    })
}

pub fn write_answer(a: &Answer, stamp: Stamp) -> Value {
    let mut content = Vec::new();
    for b in &a.blocks {
        match b {
            Block::Text(t) if !t.is_empty() => content.push(json!({"type": "text", "text": t})),
            Block::ToolCall { id, name, arguments } => {
                let input = crate::translate::json::arguments_object(arguments)
                    .unwrap_or_else(|_| json!({}));
                content.push(json!({"type": "tool_use", "id": id, "name": name, "input": input}));
            }
            // Thinking from another provider has no Anthropic signature; the SDK reads it
            // as thinking all the same, and Ringside drops it on the way back.
            Block::Thinking { text, signature } if !text.is_empty() => content.push(json!({
                "type": "thinking", "thinking": text, "signature": signature.clone().unwrap_or_default(),
            })),
            _ => {}
        }
    }
    let finish = a.finish.map(|f| match f {
        Finish::Stop if a.has_tool_calls() => Finish::ToolCalls,
        f => f,
    });
    json!({
        "id": a.id,
        "type": "message",
        "role": "assistant",
        "model": stamp.model,
        "content": content,
        "stop_reason": finish.map(stop_reason).unwrap_or("end_turn"),
        "stop_sequence": null,
        "usage": usage_json(&a.usage),
    })
}
