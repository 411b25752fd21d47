//! A conversation written as an Anthropic Messages request: typed, so that serde writes it
//! straight into bytes (a `serde_json::Value` tree built a map per object and hashed every key:
//! most of a translated request's writing).

use crate::translate::Cannot;
use crate::translate::TargetModel;
use crate::translate::ir::{
    Block, Conversation, Image, OutputFormat, Reasoning, Role, Tool, ToolChoice,
};
use crate::translate::json::arguments_raw;
use crate::translate::policy::Out;
use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;

/// Parameters the Messages API has a place for, taken as they are.
const TAKES: [&str; 3] = ["top_k", "service_tier", "container"];

#[derive(Serialize)]
struct Request<'a> {
    model: &'a str,
    max_tokens: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<String>,
    messages: Vec<Message<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<ToolOut<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<Choice<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<Thinking>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f64>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    stop_sequences: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    output_config: Option<OutputConfig<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    metadata: Option<Metadata<'a>>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_k: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    service_tier: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    container: Option<&'a Value>,
}

#[derive(Serialize)]
struct Message<'a> {
    role: &'static str,
    content: Vec<Part<'a>>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Part<'a> {
    Text {
        text: &'a str,
    },
    Image {
        source: Source<'a>,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: &'a RawValue,
    },
    ToolResult {
        tool_use_id: &'a str,
        content: Vec<Part<'a>>,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
    Thinking {
        thinking: &'a str,
        signature: &'a str,
    },
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Source<'a> {
    Url { url: &'a str },
    Base64 { media_type: &'a str, data: &'a str },
}

#[derive(Serialize)]
struct ToolOut<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a str>,
    input_schema: &'a Value,
}

#[derive(Serialize)]
struct Choice<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    disable_parallel_tool_use: bool,
}

#[derive(Serialize)]
struct Thinking {
    #[serde(rename = "type")]
    kind: &'static str,
    budget_tokens: u64,
}

#[derive(Serialize)]
struct OutputConfig<'a> {
    format: Format<'a>,
}

#[derive(Serialize)]
struct Format<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    schema: &'a Value,
}

#[derive(Serialize)]
struct Metadata<'a> {
    user_id: &'a str,
}

/// `{"type": "object"}`, the schema of a plain JSON object answer.
static ANY_OBJECT: std::sync::LazyLock<Value> =
    std::sync::LazyLock::new(|| serde_json::json!({"type": "object"}));

pub fn write_request(c: &Conversation, t: TargetModel, out: &mut Out) -> Result<Vec<u8>, Cannot> {
    let thinking = c.reasoning.and_then(Reasoning::budget);
    // Anthropic requires a cap; the thinking budget must fit under it.
    let mut max_tokens = c.max_tokens.unwrap_or(t.default_max_tokens).max(1);
    if let Some(b) = thinking {
        let budget = b.max(1024);
        if max_tokens <= budget {
            if c.max_tokens.is_some() {
                out.drop("reasoning");
            } else {
                max_tokens = budget + t.default_max_tokens;
            }
        }
    }
    let thinking_on = thinking.is_some_and(|b| max_tokens > b.max(1024));
    // With thinking on, Anthropic refuses a temperature other than 1 and any top_k.
    let temperature = match c.temperature.filter(|x| x.is_finite()) {
        Some(_) if thinking_on => {
            out.drop("temperature");
            None
        }
        Some(x) if x > 1.0 => {
            out.drop("temperature");
            Some(1.0)
        }
        x => x,
    };
    let param = |name: &str| {
        c.params
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v)
            .filter(|_| !(thinking_on && name == "top_k"))
    };
    let request = Request {
        model: t.model,
        max_tokens,
        system: (!c.system.is_empty()).then(|| c.system.join("\n\n")),
        messages: write_turns(c)?,
        tools: c.tools.iter().map(write_tool).collect(),
        tool_choice: write_tool_choice(c),
        thinking: thinking_on.then(|| Thinking {
            kind: "enabled",
            budget_tokens: thinking.unwrap_or(1024).max(1024),
        }),
        temperature,
        top_p: c.top_p.filter(|x| x.is_finite()),
        stop_sequences: &c.stop,
        output_config: c.output.as_ref().map(|f| OutputConfig {
            format: Format {
                kind: "json_schema",
                schema: match f {
                    OutputFormat::JsonObject => &ANY_OBJECT,
                    OutputFormat::JsonSchema { schema, .. } => schema,
                },
            },
        }),
        metadata: c.user.as_deref().map(|user_id| Metadata { user_id }),
        stream: c.stream,
        top_k: param("top_k"),
        service_tier: param("service_tier"),
        container: param("container"),
    };
    out.rest(&c.params, &TAKES)?;
    serde_json::to_vec(&request).map_err(|_| Cannot {
        what: "body".into(),
        why: "the request could not be written",
    })
}

fn write_turns(c: &Conversation) -> Result<Vec<Message<'_>>, Cannot> {
    let mut messages: Vec<Message> = Vec::new();
    for turn in &c.turns {
        let mut blocks = Vec::new();
        // Tool results first in a user turn: Anthropic wants them right after the calls.
        let results = turn
            .blocks
            .iter()
            .filter(|b| matches!(b, Block::ToolResult { .. }));
        let others = turn
            .blocks
            .iter()
            .filter(|b| !matches!(b, Block::ToolResult { .. }));
        for b in results.chain(others) {
            if let Some(v) = write_block(b, turn.role)? {
                blocks.push(v);
            }
        }
        if blocks.is_empty() {
            continue; // an empty turn is refused; nothing is lost without it
        }
        let role = match turn.role {
            Role::User => "user",
            Role::Assistant => "assistant",
        };
        match messages.last_mut() {
            Some(last) if last.role == role => last.content.extend(blocks),
            _ => messages.push(Message {
                role,
                content: blocks,
            }),
        }
    }
    Ok(messages)
}

fn write_block(b: &Block, role: Role) -> Result<Option<Part<'_>>, Cannot> {
    Ok(Some(match b {
        // Anthropic refuses empty text blocks.
        Block::Text(t) if t.is_empty() => return Ok(None),
        Block::Text(t) => Part::Text { text: t },
        Block::Image(i) => Part::Image {
            source: match i {
                Image::Url { url, .. } => Source::Url { url },
                Image::Inline { media_type, data } => Source::Base64 { media_type, data },
            },
        },
        Block::ToolCall {
            id,
            name,
            arguments: args,
        } => Part::ToolUse {
            id,
            name,
            input: arguments_raw(args).map_err(|why| Cannot {
                what: "tool_calls".into(),
                why,
            })?,
        },
        Block::ToolResult {
            id,
            content,
            is_error,
        } => {
            let mut parts = Vec::new();
            for b in content {
                if let Some(v) = write_block(b, role)? {
                    parts.push(v);
                }
            }
            Part::ToolResult {
                tool_use_id: id,
                content: parts,
                is_error: *is_error,
            }
        }
        // A signature binds thinking to Anthropic; thinking without one came from elsewhere and
        // cannot be replayed (Anthropic would refuse the block).
        Block::Thinking {
            text,
            signature: Some(s),
        } if role == Role::Assistant => Part::Thinking {
            thinking: text,
            signature: s,
        },
        Block::Thinking { .. } => return Ok(None),
    }))
}

fn write_tool(t: &Tool) -> ToolOut<'_> {
    ToolOut {
        name: &t.name,
        description: t.description.as_deref(),
        input_schema: &t.parameters,
    }
}

fn write_tool_choice(c: &Conversation) -> Option<Choice<'_>> {
    let (kind, name) = match &c.tool_choice {
        None if c.parallel_tool_calls == Some(false) && !c.tools.is_empty() => ("auto", None),
        None => return None,
        Some(ToolChoice::Auto) => ("auto", None),
        Some(ToolChoice::Required) => ("any", None),
        Some(ToolChoice::None) => {
            return Some(Choice {
                kind: "none",
                name: None,
                disable_parallel_tool_use: false,
            });
        }
        Some(ToolChoice::Named(n)) => ("tool", Some(n.as_str())),
    };
    Some(Choice {
        kind,
        name,
        disable_parallel_tool_use: c.parallel_tool_calls == Some(false),
    })
}
