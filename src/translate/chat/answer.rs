//! A Chat Completions answer read into the neutral form, and written from it.

use crate::translate::answer::{Garbled, Stamp};
use crate::translate::ir::{Answer, Block, Finish, Usage};
use crate::translate::json::{Obj, str_field};
use serde_json::Value;

pub fn read_answer(o: &Obj) -> Result<Answer, Garbled> {
    let choice = o
        .get("choices")
        .and_then(|c| c.get(0))
        .ok_or_else(|| Garbled("the answer has no choices".into()))?;
    let msg = choice.get("message").and_then(Value::as_object);
    let mut blocks = Vec::new();
    if let Some(m) = msg {
        if let Some(r) = str_field(m, "reasoning_content").filter(|r| !r.is_empty()) {
            blocks.push(Block::Thinking {
                text: r.into(),
                signature: None,
            });
        }
        let text = str_field(m, "content")
            .filter(|t| !t.is_empty())
            .or_else(|| str_field(m, "refusal"));
        if let Some(t) = text.filter(|t| !t.is_empty()) {
            blocks.push(Block::Text(t.into()));
        }
        for call in m
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let f = call.get("function");
            blocks.push(Block::ToolCall {
                id: call.get("id").and_then(Value::as_str).unwrap_or("").into(),
                name: f
                    .and_then(|f| f.get("name"))
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .into(),
                arguments: f
                    .and_then(|f| f.get("arguments"))
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .into(),
            });
        }
    }
    let finish = choice
        .get("finish_reason")
        .and_then(Value::as_str)
        .map(finish_of);
    Ok(Answer {
        id: str_field(o, "id").unwrap_or("").into(),
        model: str_field(o, "model").unwrap_or("").into(),
        blocks,
        finish,
        usage: o.get("usage").map(usage_of).unwrap_or_default(),
    })
}

pub(in crate::translate) fn finish_of(s: &str) -> Finish {
    match s {
        "length" => Finish::Length,
        "tool_calls" | "function_call" => Finish::ToolCalls,
        "content_filter" => Finish::ContentFilter,
        _ => Finish::Stop,
    }
}

pub(in crate::translate) fn finish_str(f: Finish) -> &'static str {
    match f {
        Finish::Stop => "stop",
        Finish::Length => "length",
        Finish::ToolCalls => "tool_calls",
        Finish::ContentFilter => "content_filter",
    }
}

pub(in crate::translate) fn usage_of(u: &Value) -> Usage {
    let n = |v: Option<&Value>| v.and_then(Value::as_u64).unwrap_or(0);
    Usage {
        input: n(u.get("prompt_tokens")),
        output: n(u.get("completion_tokens")),
        cache_read: n(u.pointer("/prompt_tokens_details/cached_tokens")),
        cache_write: 0,
        reasoning: n(u.pointer("/completion_tokens_details/reasoning_tokens")),
    }
}

/// Chat's `usage` object (the answer's and the stream's last chunk).
pub(in crate::translate) fn usage_out(u: &Usage) -> ChatUsageOut {
    ChatUsageOut {
        prompt_tokens: u.input,
        completion_tokens: u.output,
        total_tokens: u.input + u.output,
        prompt_tokens_details: Cached {
            cached_tokens: u.cache_read,
        },
        completion_tokens_details: Reasoning {
            reasoning_tokens: u.reasoning,
        },
    }
}

/// A Chat answer as written: typed, so that serde writes it straight into bytes (a `Value`
/// tree cost a translated JSON request about a third of its instructions).
#[derive(serde::Serialize)]
struct ChatAnswer<'a> {
    id: &'a str,
    object: &'static str,
    created: u64,
    model: &'a str,
    choices: [ChatChoice<'a>; 1],
    usage: ChatUsageOut,
}

#[derive(serde::Serialize)]
struct ChatChoice<'a> {
    index: u32,
    message: ChatMessage<'a>,
    logprobs: Option<()>,
    finish_reason: &'static str,
}

#[derive(serde::Serialize)]
struct ChatMessage<'a> {
    role: &'static str,
    content: Option<String>,
    refusal: Option<()>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<ChatCall<'a>>,
}

#[derive(serde::Serialize)]
struct ChatCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: ChatFunctionOut<'a>,
}

#[derive(serde::Serialize)]
struct ChatFunctionOut<'a> {
    name: &'a str,
    arguments: &'a str,
}

#[derive(serde::Serialize)]
pub(in crate::translate) struct ChatUsageOut {
    prompt_tokens: u64,
    completion_tokens: u64,
    total_tokens: u64,
    prompt_tokens_details: Cached,
    completion_tokens_details: Reasoning,
}

#[derive(serde::Serialize)]
struct Cached {
    cached_tokens: u64,
}

#[derive(serde::Serialize)]
struct Reasoning {
    reasoning_tokens: u64,
}

pub fn write_answer(a: &Answer, stamp: Stamp) -> Vec<u8> {
    let tool_calls: Vec<ChatCall> = a
        .blocks
        .iter()
        .filter_map(|b| match b {
            Block::ToolCall {
                id,
                name,
                arguments,
            } => Some(ChatCall {
                id,
                kind: "function",
                function: ChatFunctionOut {
                    name,
                    arguments: if arguments.is_empty() {
                        "{}"
                    } else {
                        arguments
                    },
                },
            }),
            _ => None,
        })
        .collect();
    let text = a.text();
    // A turn of calls alone has no content (null), as OpenAI writes it.
    let content = (!text.is_empty() || tool_calls.is_empty()).then_some(text);
    let finish = a.finish.map(|f| match f {
        Finish::Stop if a.has_tool_calls() => Finish::ToolCalls,
        f => f,
    });
    let answer = ChatAnswer {
        id: &a.id,
        object: "chat.completion",
        created: stamp.created,
        model: stamp.model,
        choices: [ChatChoice {
            index: 0,
            message: ChatMessage {
                role: "assistant",
                content,
                refusal: None,
                tool_calls,
            },
            logprobs: None,
            finish_reason: finish.map(finish_str).unwrap_or("stop"),
        }],
        usage: usage_out(&a.usage),
    };
    serde_json::to_vec(&answer).unwrap_or_default()
}
