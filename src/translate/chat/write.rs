//! A conversation written as a Chat Completions request.

use crate::translate::ir::{
    Block, Conversation, Image, OutputFormat, Reasoning, Role, Tool, ToolChoice, Turn,
};
use crate::translate::json::put_f64;
use crate::translate::policy::Out;
use crate::translate::{Cannot, TargetModel};
use serde_json::{Map, Value, json};

/// Parameters Chat Completions has a place for, taken from the neutral form's list as they are.
const TAKES: [&str; 11] = [
    "n",
    "seed",
    "presence_penalty",
    "frequency_penalty",
    "logprobs",
    "top_logprobs",
    "logit_bias",
    "metadata",
    "service_tier",
    "store",
    "prediction",
];

pub fn write_request(c: &Conversation, t: TargetModel, out: &mut Out) -> Result<Value, Cannot> {
    let mut o = Map::new();
    o.insert("model".into(), t.model.into());
    let mut messages = Vec::new();
    if !c.system.is_empty() {
        messages.push(json!({"role": "system", "content": c.system.join("\n\n")}));
    }
    for turn in &c.turns {
        write_turn(turn, &mut messages)?;
    }
    o.insert("messages".into(), messages.into());
    if !c.tools.is_empty() {
        let tools: Vec<Value> = c.tools.iter().map(write_tool).collect();
        o.insert("tools".into(), tools.into());
    }
    if let Some(tc) = &c.tool_choice {
        o.insert("tool_choice".into(), write_tool_choice(tc));
    }
    if let Some(p) = c.parallel_tool_calls {
        o.insert("parallel_tool_calls".into(), p.into());
    }
    if let Some(n) = c.max_tokens {
        o.insert("max_completion_tokens".into(), n.into());
    }
    put_f64(&mut o, "temperature", c.temperature);
    put_f64(&mut o, "top_p", c.top_p);
    if c.stop.len() > 4 {
        return Err(Cannot {
            what: "stop".into(),
            why: "Chat Completions takes at most 4 stop sequences",
        });
    }
    if !c.stop.is_empty() {
        o.insert("stop".into(), json!(c.stop));
    }
    if let Some(f) = &c.output {
        o.insert("response_format".into(), write_format(f));
    }
    match c.reasoning {
        Some(Reasoning::Off) | None => {}
        Some(r) => {
            if let Some(e) = r.effort() {
                o.insert("reasoning_effort".into(), e.as_str().into());
            }
        }
    }
    if let Some(u) = &c.user {
        o.insert("user".into(), u.clone().into());
    }
    if c.stream {
        o.insert("stream".into(), true.into());
        // Usage arrives at the stream's end only when asked for.
        o.insert("stream_options".into(), json!({"include_usage": true}));
    }
    for (name, v) in &c.params {
        if TAKES.contains(&name.as_str()) {
            o.insert(name.clone(), v.clone());
        }
    }
    out.rest(&c.params, &TAKES)?;
    Ok(Value::Object(o))
}

fn write_turn(turn: &Turn, messages: &mut Vec<Value>) -> Result<(), Cannot> {
    match turn.role {
        Role::User => {
            let mut parts = Vec::new();
            for b in &turn.blocks {
                match b {
                    // Each result is its own `tool` message, ahead of the user's words.
                    Block::ToolResult {
                        id,
                        content,
                        is_error,
                    } => messages.push(json!({
                        "role": "tool",
                        "tool_call_id": id,
                        "content": crate::translate::ir::result_text(content, *is_error),
                    })),
                    Block::Text(t) => parts.push(json!({"type": "text", "text": t})),
                    Block::Image(i) => parts.push(write_image(i)),
                    Block::ToolCall { .. } | Block::Thinking { .. } => {}
                }
            }
            if !parts.is_empty() {
                messages.push(json!({"role": "user", "content": simplify(parts)}));
            }
        }
        Role::Assistant => {
            let mut text = String::new();
            let mut calls = Vec::new();
            for b in &turn.blocks {
                match b {
                    Block::Text(t) => text.push_str(t),
                    Block::ToolCall { id, name, arguments } => calls.push(json!({
                        "id": id, "type": "function",
                        "function": {"name": name, "arguments": if arguments.is_empty() { "{}" } else { arguments }},
                    })),
                    // Another provider's reasoning is not Chat's to take back.
                    _ => {}
                }
            }
            let mut m = json!({"role": "assistant", "content": if text.is_empty() && !calls.is_empty() { Value::Null } else { text.into() }});
            if !calls.is_empty() {
                m["tool_calls"] = calls.into();
            }
            messages.push(m);
        }
    }
    Ok(())
}

/// One text part alone is sent as a plain string (what every Chat server takes).
fn simplify(mut parts: Vec<Value>) -> Value {
    if parts.len() == 1 && parts[0]["type"] == "text" {
        return parts.remove(0)["text"].take();
    }
    parts.into()
}

pub(in crate::translate) fn write_image(i: &Image) -> Value {
    let mut img = json!({"url": i.as_url()});
    if let Image::Url {
        detail: Some(d), ..
    } = i
    {
        img["detail"] = d.clone().into();
    }
    json!({"type": "image_url", "image_url": img})
}

fn write_tool(t: &Tool) -> Value {
    let mut f = json!({"name": t.name, "parameters": t.parameters});
    if let Some(d) = &t.description {
        f["description"] = d.clone().into();
    }
    if let Some(s) = t.strict {
        f["strict"] = s.into();
    }
    json!({"type": "function", "function": f})
}

fn write_tool_choice(tc: &ToolChoice) -> Value {
    match tc {
        ToolChoice::Auto => "auto".into(),
        ToolChoice::Required => "required".into(),
        ToolChoice::None => "none".into(),
        ToolChoice::Named(n) => json!({"type": "function", "function": {"name": n}}),
    }
}

fn write_format(f: &OutputFormat) -> Value {
    match f {
        OutputFormat::JsonObject => json!({"type": "json_object"}),
        OutputFormat::JsonSchema {
            name,
            schema,
            strict,
        } => {
            let mut js = json!({"name": name, "schema": schema});
            if let Some(s) = strict {
                js["strict"] = (*s).into();
            }
            json!({"type": "json_schema", "json_schema": js})
        }
    }
}
