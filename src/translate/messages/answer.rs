//! An Anthropic Messages answer read into the neutral form, and written from it.

use crate::translate::answer::{Garbled, Stamp};
use crate::translate::ir::{Answer, Block, Finish, Usage};
use crate::translate::wire::{AnthUsage, MessagesAnswer, Text};
use serde_json::{Value, json};

pub fn read_answer(a: &MessagesAnswer) -> Result<Answer, Garbled> {
    let content = a
        .content
        .as_ref()
        .ok_or_else(|| Garbled("the answer has no content".into()))?;
    let text = |t: &Text| t.as_deref().unwrap_or("").to_string();
    let mut blocks = Vec::new();
    for b in content {
        match b.kind.as_deref() {
            Some("text") => blocks.push(Block::Text(text(&b.text))),
            Some("tool_use") => blocks.push(Block::ToolCall {
                id: text(&b.id),
                name: text(&b.name),
                arguments: b.input.map_or("{}", |i| i.get()).to_string(),
            }),
            Some("thinking") => blocks.push(Block::Thinking {
                text: text(&b.thinking),
                signature: b.signature.as_deref().map(str::to_string),
            }),
            _ => {}
        }
    }
    Ok(Answer {
        id: text(&a.id),
        model: text(&a.model),
        blocks,
        finish: a.stop_reason.as_deref().map(finish_of),
        usage: a.usage.as_ref().map(AnthUsage::neutral).unwrap_or_default(),
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
