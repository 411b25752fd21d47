//! A Chat Completions request read into the neutral form.

use crate::translate::Unreadable;
use crate::translate::ir::{
    Block, Conversation, Effort, Image, OutputFormat, Reasoning, Role, Tool, ToolChoice,
};
use crate::translate::json::{
    Obj, array, object, opt_bool, opt_f64, opt_string, opt_u64, stops, str_field,
};
use serde_json::{Value, json};

/// Fields this reader turns into the neutral form; every other field is a named parameter.
const KNOWN: [&str; 17] = [
    "model",
    "messages",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "top_p",
    "stop",
    "response_format",
    "reasoning_effort",
    "user",
    "stream",
    "stream_options",
    "functions",
    "function_call",
];

pub fn read_request(o: &Obj) -> Result<Conversation, Unreadable> {
    if o.contains_key("functions") || o.contains_key("function_call") {
        return Err(Unreadable::new(
            "functions and function_call are the deprecated form of tools and tool_choice; send tools",
        ));
    }
    let mut c = Conversation {
        model: str_field(o, "model").unwrap_or("").to_string(),
        max_tokens: match opt_u64(o, "max_completion_tokens")? {
            Some(n) => Some(n),
            None => opt_u64(o, "max_tokens")?,
        },
        temperature: opt_f64(o, "temperature")?,
        top_p: opt_f64(o, "top_p")?,
        stop: stops(o.get("stop"))?,
        user: opt_string(o, "user", "")?,
        stream: opt_bool(o, "stream")?.unwrap_or(false),
        include_usage: o
            .get("stream_options")
            .and_then(|s| s.get("include_usage"))
            .and_then(Value::as_bool)
            .unwrap_or(false),
        parallel_tool_calls: opt_bool(o, "parallel_tool_calls")?,
        ..Default::default()
    };
    let messages = o
        .get("messages")
        .ok_or_else(|| Unreadable::new("messages is required"))?;
    for (i, m) in array(messages, "messages")?.iter().enumerate() {
        read_message(&mut c, object(m, &format!("messages[{i}]"))?, i)?;
    }
    if let Some(tools) = o.get("tools").filter(|v| !v.is_null()) {
        for (i, t) in array(tools, "tools")?.iter().enumerate() {
            c.tools.push(read_tool(object(t, "tools[]")?, i)?);
        }
    }
    c.tool_choice = o
        .get("tool_choice")
        .map(read_tool_choice)
        .transpose()?
        .flatten();
    c.output = o
        .get("response_format")
        .map(read_format)
        .transpose()?
        .flatten();
    if let Some(e) = str_field(o, "reasoning_effort") {
        c.reasoning = Some(match e {
            "none" => Reasoning::Off,
            e => Reasoning::Effort(
                Effort::parse(e)
                    .ok_or_else(|| Unreadable::new(format!("unknown reasoning_effort {e:?}")))?,
            ),
        });
    }
    for (k, v) in o {
        if !KNOWN.contains(&k.as_str()) {
            c.params.push((k.clone(), v.clone()));
        }
    }
    Ok(c)
}

/// The text of a `content` that is a string or an array of text parts.
fn text_of(v: &Value, at: &str) -> Result<String, Unreadable> {
    match v {
        Value::Null => Ok(String::new()),
        Value::String(s) => Ok(s.clone()),
        Value::Array(parts) => {
            let mut s = String::new();
            for p in parts {
                if let Some(t) = p.get("text").and_then(Value::as_str) {
                    s.push_str(t);
                } else {
                    return Err(Unreadable::new(format!("{at} may hold only text parts")));
                }
            }
            Ok(s)
        }
        _ => Err(Unreadable::new(format!(
            "{at} must be a string or an array"
        ))),
    }
}

fn read_parts(v: &Value, at: &str) -> Result<Vec<Block>, Unreadable> {
    match v {
        Value::Null => Ok(Vec::new()),
        Value::String(s) => Ok(vec![Block::Text(s.clone())]),
        Value::Array(parts) => parts.iter().map(|p| read_part(p, at)).collect(),
        _ => Err(Unreadable::new(format!(
            "{at} must be a string or an array"
        ))),
    }
}

fn read_part(p: &Value, at: &str) -> Result<Block, Unreadable> {
    let o = object(p, at)?;
    match str_field(o, "type") {
        Some("text") => Ok(Block::Text(str_field(o, "text").unwrap_or("").to_string())),
        Some("image_url") => {
            let img = o.get("image_url").ok_or_else(|| {
                Unreadable::new(format!("{at}: image_url part without image_url"))
            })?;
            let (url, detail) = match img {
                Value::String(u) => (u.as_str(), None),
                Value::Object(i) => (
                    str_field(i, "url").unwrap_or(""),
                    str_field(i, "detail").map(str::to_string),
                ),
                _ => {
                    return Err(Unreadable::new(format!(
                        "{at}: image_url must be an object"
                    )));
                }
            };
            Ok(Block::Image(Image::from_url(url, detail)))
        }
        Some(other) => Err(Unreadable::new(format!(
            "{at}: a {other:?} part cannot be translated to another provider's API"
        ))),
        None => Err(Unreadable::new(format!("{at}: a part without a type"))),
    }
}

fn read_message(c: &mut Conversation, m: &Obj, i: usize) -> Result<(), Unreadable> {
    let at = format!("messages[{i}].content");
    let content = m.get("content").unwrap_or(&Value::Null);
    match str_field(m, "role") {
        Some("system" | "developer") => c.system.push(text_of(content, &at)?),
        Some("user") => c.push(Role::User, read_parts(content, &at)?),
        Some("assistant") => {
            let mut blocks = read_parts(content, &at)?;
            if let Some(r) = str_field(m, "reasoning_content").filter(|r| !r.is_empty()) {
                blocks.insert(
                    0,
                    Block::Thinking {
                        text: r.to_string(),
                        signature: None,
                    },
                );
            }
            if let Some(calls) = m.get("tool_calls").filter(|v| !v.is_null()) {
                for call in array(calls, "tool_calls")? {
                    blocks.push(read_call(object(call, "tool_calls[]")?)?);
                }
            }
            c.push(Role::Assistant, blocks);
        }
        Some("tool") => {
            let id = str_field(m, "tool_call_id").ok_or_else(|| {
                Unreadable::new(format!("messages[{i}]: a tool message needs tool_call_id"))
            })?;
            let result = Block::ToolResult {
                id: id.to_string(),
                content: read_parts(content, &at)?,
                is_error: false,
            };
            c.push(Role::User, vec![result]);
        }
        Some(r) => {
            return Err(Unreadable::new(format!(
                "messages[{i}]: unknown role {r:?}"
            )));
        }
        None => return Err(Unreadable::new(format!("messages[{i}]: role is required"))),
    }
    Ok(())
}

fn read_call(call: &Obj) -> Result<Block, Unreadable> {
    let f = call
        .get("function")
        .and_then(Value::as_object)
        .ok_or_else(|| Unreadable::new("a tool call needs function"))?;
    Ok(Block::ToolCall {
        id: str_field(call, "id")
            .ok_or_else(|| Unreadable::new("a tool call needs an id"))?
            .to_string(),
        name: str_field(f, "name").unwrap_or("").to_string(),
        arguments: str_field(f, "arguments").unwrap_or("").to_string(),
    })
}

fn read_tool(t: &Obj, i: usize) -> Result<Tool, Unreadable> {
    if str_field(t, "type") != Some("function") {
        return Err(Unreadable::new(format!(
            "tools[{i}]: only function tools can be translated to another provider's API"
        )));
    }
    let f = t
        .get("function")
        .and_then(Value::as_object)
        .ok_or_else(|| Unreadable::new(format!("tools[{i}] needs function")))?;
    crate::translate::json::tool(f, &format!("tools[{i}].function"), "parameters")
}

fn read_tool_choice(v: &Value) -> Result<Option<ToolChoice>, Unreadable> {
    Ok(Some(match v {
        Value::Null => return Ok(None),
        Value::String(s) => match s.as_str() {
            "auto" => ToolChoice::Auto,
            "required" => ToolChoice::Required,
            "none" => ToolChoice::None,
            s => return Err(Unreadable::new(format!("unknown tool_choice {s:?}"))),
        },
        Value::Object(o) => ToolChoice::Named(
            o.get("function")
                .and_then(|f| f.get("name"))
                .and_then(Value::as_str)
                .ok_or_else(|| Unreadable::new("tool_choice needs function.name"))?
                .to_string(),
        ),
        _ => return Err(Unreadable::new("tool_choice must be a string or an object")),
    }))
}

fn read_format(v: &Value) -> Result<Option<OutputFormat>, Unreadable> {
    let o = object(v, "response_format")?;
    Ok(match str_field(o, "type") {
        Some("text") | None => None,
        Some("json_object") => Some(OutputFormat::JsonObject),
        Some("json_schema") => {
            let js = o
                .get("json_schema")
                .and_then(Value::as_object)
                .ok_or_else(|| Unreadable::new("response_format needs json_schema"))?;
            Some(OutputFormat::JsonSchema {
                name: str_field(js, "name").unwrap_or("answer").to_string(),
                schema: js.get("schema").cloned().unwrap_or_else(|| json!({})),
                strict: js.get("strict").and_then(Value::as_bool),
            })
        }
        Some(t) => {
            return Err(Unreadable::new(format!(
                "unknown response_format type {t:?}"
            )));
        }
    })
}
