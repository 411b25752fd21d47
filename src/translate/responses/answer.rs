//! An OpenAI Responses answer read into the neutral form, and written from it.

use crate::translate::answer::{Garbled, Stamp, made_id};
use crate::translate::ir::{Answer, Block, ClientTools, Finish, Usage};
use crate::translate::wire::{RespUsage, ResponsesAnswer, Text};
use serde_json::{Value, json};

pub fn read_answer(r: &ResponsesAnswer) -> Result<Answer, Garbled> {
    let output = r
        .output
        .as_ref()
        .ok_or_else(|| Garbled("the answer has no output".into()))?;
    let text = |t: &Text| t.as_deref().unwrap_or("").to_string();
    let mut blocks = Vec::new();
    for item in output {
        match item.kind.as_deref() {
            Some("message") => {
                for part in item.content.iter().flatten() {
                    if let Some(t) = part.text.as_deref().or(part.refusal.as_deref()) {
                        blocks.push(Block::Text(t.into()));
                    }
                }
            }
            Some("function_call") => blocks.push(Block::ToolCall {
                id: text(&item.call_id),
                name: text(&item.name),
                arguments: text(&item.arguments),
            }),
            Some("reasoning") => {
                let summary = item.summary.iter().flatten();
                let thought: String = summary.filter_map(|p| p.text.as_deref()).collect();
                if !thought.is_empty() {
                    blocks.push(Block::Thinking {
                        text: thought,
                        signature: None,
                    });
                }
            }
            _ => {}
        }
    }
    let mut a = Answer {
        id: text(&r.id),
        model: text(&r.model),
        blocks,
        finish: None,
        usage: r.usage.as_ref().map(RespUsage::neutral).unwrap_or_default(),
    };
    let reason = r
        .incomplete_details
        .as_ref()
        .and_then(|d| d.reason.as_deref());
    a.finish = Some(finish_of(r.status.as_deref(), reason, a.has_tool_calls()));
    Ok(a)
}

/// Responses has a status, not a finish reason: `incomplete` says why in its details.
pub(in crate::translate) fn finish_of(
    status: Option<&str>,
    reason: Option<&str>,
    calls: bool,
) -> Finish {
    match (status, reason) {
        (Some("incomplete"), Some("content_filter")) => Finish::ContentFilter,
        (Some("incomplete"), _) => Finish::Length,
        _ if calls => Finish::ToolCalls,
        _ => Finish::Stop,
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
            items.push(call_item(stamp, items.len(), id, name, arguments));
        }
    }
    items
}

/// A call as the client named its tool: a free-form tool's call carries its text (`input`), a
/// namespaced tool's its namespace.
fn call_item(stamp: Stamp, n: usize, id: &str, name: &str, arguments: &str) -> Value {
    let (namespace, client_name) = stamp.tools.client_name(name);
    let mut item = if stamp.tools.is_free_form(name) {
        json!({"id": made_id("ctc_", stamp, n), "type": "custom_tool_call", "status": "completed",
            "call_id": id, "name": client_name, "input": ClientTools::free_form_input(arguments)})
    } else {
        let arguments = if arguments.is_empty() {
            "{}"
        } else {
            arguments
        };
        json!({"id": made_id("fc_", stamp, n), "type": "function_call", "status": "completed",
            "call_id": id, "name": client_name, "arguments": arguments})
    };
    if let Some(ns) = namespace {
        item["namespace"] = ns.into();
    }
    item
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
