//! A Chat Completions answer read into the neutral form, and written from it.

use crate::translate::answer::{Garbled, Stamp};
use crate::translate::ir::{Answer, Block, Finish, Usage};
use crate::translate::wire::{ChatAnswer, ChatUsage, Text};

pub fn read_answer(a: &ChatAnswer) -> Result<Answer, Garbled> {
    let choice = a
        .choices
        .as_ref()
        .and_then(|c| c.first())
        .ok_or_else(|| Garbled("the answer has no choices".into()))?;
    let text = |t: &Text| t.as_deref().unwrap_or("").to_string();
    let mut blocks = Vec::new();
    if let Some(m) = &choice.message {
        if let Some(r) = m.reasoning_content.as_deref().filter(|r| !r.is_empty()) {
            blocks.push(Block::Thinking {
                text: r.into(),
                signature: None,
            });
        }
        let said = m.content.as_deref().filter(|t| !t.is_empty());
        if let Some(t) = said.or(m.refusal.as_deref()).filter(|t| !t.is_empty()) {
            blocks.push(Block::Text(t.into()));
        }
        for call in m.tool_calls.iter().flatten() {
            let f = call.function.as_ref();
            blocks.push(Block::ToolCall {
                id: text(&call.id),
                name: f.map(|f| text(&f.name)).unwrap_or_default(),
                arguments: f.map(|f| text(&f.arguments)).unwrap_or_default(),
            });
        }
    }
    Ok(Answer {
        id: text(&a.id),
        model: text(&a.model),
        blocks,
        finish: choice.finish_reason.as_deref().map(finish_of),
        usage: a.usage.as_ref().map(ChatUsage::neutral).unwrap_or_default(),
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
struct ChatAnswerOut<'a> {
    id: &'a str,
    object: &'static str,
    created: u64,
    model: &'a str,
    choices: [ChatChoiceOut<'a>; 1],
    usage: ChatUsageOut,
}

#[derive(serde::Serialize)]
struct ChatChoiceOut<'a> {
    index: u32,
    message: ChatMessageOut<'a>,
    logprobs: Option<()>,
    finish_reason: &'static str,
}

#[derive(serde::Serialize)]
struct ChatMessageOut<'a> {
    role: &'static str,
    content: Option<String>,
    refusal: Option<()>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<ChatCallOut<'a>>,
}

#[derive(serde::Serialize)]
struct ChatCallOut<'a> {
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
    let tool_calls: Vec<ChatCallOut> = a
        .blocks
        .iter()
        .filter_map(|b| match b {
            Block::ToolCall {
                id,
                name,
                arguments,
            } => Some(ChatCallOut {
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
    let answer = ChatAnswerOut {
        id: &a.id,
        object: "chat.completion",
        created: stamp.created,
        model: stamp.model,
        choices: [ChatChoiceOut {
            index: 0,
            message: ChatMessageOut {
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
