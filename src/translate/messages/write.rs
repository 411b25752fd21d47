//! A conversation written as an Anthropic Messages request.

use crate::translate::ir::{
    Block, Conversation, Image, OutputFormat, Reasoning, Role, Tool, ToolChoice,
};
use crate::translate::json::put_f64;
use crate::translate::policy::Out;
use crate::translate::{Cannot, TargetModel, json::arguments_object};
use serde_json::{Map, Value, json};

/// Parameters the Messages API has a place for, taken as they are.
const TAKES: [&str; 3] = ["top_k", "service_tier", "container"];

pub fn write_request(c: &Conversation, t: TargetModel, out: &mut Out) -> Result<Value, Cannot> {
    let mut o = Map::new();
    o.insert("model".into(), t.model.into());
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
    o.insert("max_tokens".into(), max_tokens.into());
    if !c.system.is_empty() {
        o.insert("system".into(), c.system.join("\n\n").into());
    }
    let messages = write_turns(c)?;
    o.insert("messages".into(), messages.into());
    if !c.tools.is_empty() {
        let tools: Vec<Value> = c.tools.iter().map(write_tool).collect();
        o.insert("tools".into(), tools.into());
    }
    if let Some(tc) = write_tool_choice(c) {
        o.insert("tool_choice".into(), tc);
    }
    let thinking_on = thinking.is_some_and(|b| max_tokens > b.max(1024));
    if thinking_on {
        let budget = thinking.unwrap_or(1024).max(1024);
        o.insert(
            "thinking".into(),
            json!({"type": "enabled", "budget_tokens": budget}),
        );
    }
    // With thinking on, Anthropic refuses a temperature other than 1 and any top_k.
    match c.temperature {
        Some(_) if thinking_on => out.drop("temperature"),
        Some(x) if x > 1.0 => {
            out.drop("temperature");
            o.insert("temperature".into(), 1.into());
        }
        x => put_f64(&mut o, "temperature", x),
    }
    put_f64(&mut o, "top_p", c.top_p);
    if !c.stop.is_empty() {
        o.insert("stop_sequences".into(), json!(c.stop));
    }
    if let Some(f) = &c.output {
        let schema = match f {
            OutputFormat::JsonObject => json!({"type": "object"}),
            OutputFormat::JsonSchema { schema, .. } => schema.clone(),
        };
        o.insert(
            "output_config".into(),
            json!({"format": {"type": "json_schema", "schema": schema}}),
        );
    }
    if let Some(u) = &c.user {
        o.insert("metadata".into(), json!({"user_id": u}));
    }
    if c.stream {
        o.insert("stream".into(), true.into());
    }
    for (name, v) in &c.params {
        if TAKES.contains(&name.as_str()) && !(thinking_on && name == "top_k") {
            o.insert(name.clone(), v.clone());
        }
    }
    out.rest(&c.params, &TAKES)?;
    Ok(Value::Object(o))
}

fn write_turns(c: &Conversation) -> Result<Vec<Value>, Cannot> {
    let mut messages: Vec<Value> = Vec::new();
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
            Some(last) if last["role"] == role => {
                if let Some(a) = last["content"].as_array_mut() {
                    a.extend(blocks);
                }
            }
            _ => messages.push(json!({"role": role, "content": blocks})),
        }
    }
    Ok(messages)
}

fn write_block(b: &Block, role: Role) -> Result<Option<Value>, Cannot> {
    Ok(Some(match b {
        // Anthropic refuses empty text blocks.
        Block::Text(t) if t.is_empty() => return Ok(None),
        Block::Text(t) => json!({"type": "text", "text": t}),
        Block::Image(i) => write_image(i),
        Block::ToolCall {
            id,
            name,
            arguments,
        } => json!({
            "type": "tool_use", "id": id, "name": name,
            "input": arguments_object(arguments).map_err(|why| Cannot { what: "tool_calls".into(), why })?,
        }),
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
            let mut r = json!({"type": "tool_result", "tool_use_id": id, "content": parts});
            if *is_error {
                r["is_error"] = true.into();
            }
            r
        }
        // A signature binds thinking to Anthropic; thinking without one came from elsewhere and
        // cannot be replayed (Anthropic would refuse the block).
        Block::Thinking {
            text,
            signature: Some(s),
        } if role == Role::Assistant => {
            json!({"type": "thinking", "thinking": text, "signature": s})
        }
        Block::Thinking { .. } => return Ok(None),
    }))
}

fn write_image(i: &Image) -> Value {
    match i {
        Image::Url { url, .. } => json!({"type": "image", "source": {"type": "url", "url": url}}),
        Image::Inline { media_type, data } => json!({
            "type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}
        }),
    }
}

fn write_tool(t: &Tool) -> Value {
    let mut v = json!({"name": t.name, "input_schema": t.parameters});
    if let Some(d) = &t.description {
        v["description"] = d.clone().into();
    }
    v
}

fn write_tool_choice(c: &Conversation) -> Option<Value> {
    let mut v = match &c.tool_choice {
        None if c.parallel_tool_calls == Some(false) && !c.tools.is_empty() => {
            json!({"type": "auto"})
        }
        None => return None,
        Some(ToolChoice::Auto) => json!({"type": "auto"}),
        Some(ToolChoice::Required) => json!({"type": "any"}),
        Some(ToolChoice::None) => return Some(json!({"type": "none"})),
        Some(ToolChoice::Named(n)) => json!({"type": "tool", "name": n}),
    };
    if c.parallel_tool_calls == Some(false) {
        v["disable_parallel_tool_use"] = true.into();
    }
    Some(v)
}
