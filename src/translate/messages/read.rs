//! An Anthropic Messages request read into the neutral form.

use crate::translate::Unreadable;
use crate::translate::ir::{
    Block, Conversation, Effort, Image, OutputFormat, Reasoning, Role, Tool, ToolChoice,
};
use crate::translate::json::{Obj, array, object, opt_bool, opt_f64, opt_u64, stops, str_field};
use serde_json::{Value, json};

const KNOWN: [&str; 14] = [
    "model",
    "system",
    "messages",
    "tools",
    "tool_choice",
    "max_tokens",
    "temperature",
    "top_p",
    "stop_sequences",
    "stream",
    "metadata",
    "thinking",
    "output_config",
    "output_format",
];

pub fn read_request(o: &Obj) -> Result<Conversation, Unreadable> {
    let mut c = Conversation {
        model: str_field(o, "model").unwrap_or("").to_string(),
        max_tokens: opt_u64(o, "max_tokens")?,
        temperature: opt_f64(o, "temperature")?,
        top_p: opt_f64(o, "top_p")?,
        stop: stops(o.get("stop_sequences"))?,
        stream: opt_bool(o, "stream")?.unwrap_or(false),
        ..Default::default()
    };
    read_system(&mut c, o.get("system").unwrap_or(&Value::Null), "system")?;
    let messages = o
        .get("messages")
        .ok_or_else(|| Unreadable::new("messages is required"))?;
    for (i, m) in array(messages, "messages")?.iter().enumerate() {
        let m = object(m, "messages[]")?;
        let role = match str_field(m, "role") {
            Some("user") => Role::User,
            Some("assistant") => Role::Assistant,
            // A system message between turns (Claude Code's, under a beta): every other API
            // takes instructions once, so it joins the system prompt (docs/dialects.md).
            Some("system") => {
                read_system(
                    &mut c,
                    m.get("content").unwrap_or(&Value::Null),
                    "messages[]",
                )?;
                continue;
            }
            r => {
                return Err(Unreadable::new(format!(
                    "messages[{i}]: role must be user, assistant or system, not {r:?}"
                )));
            }
        };
        let blocks = read_blocks(m.get("content").unwrap_or(&Value::Null), i)?;
        c.push(role, blocks);
    }
    if let Some(tools) = o.get("tools").filter(|v| !v.is_null()) {
        for (i, t) in array(tools, "tools")?.iter().enumerate() {
            let t = object(t, "tools[]")?;
            match str_field(t, "type").filter(|ty| *ty != "custom") {
                // A server tool (web search, code execution, ...) runs at Anthropic: another
                // provider answers without it, and says so (`x-ringside-dropped: tools:<type>`).
                Some(ty) => c
                    .params
                    .push((format!("tools:{ty}"), Value::Object(t.clone()))),
                None => c.tools.push(read_tool(t, i)?),
            }
        }
    }
    if let Some(tc) = o.get("tool_choice").and_then(Value::as_object) {
        c.tool_choice = Some(match str_field(tc, "type") {
            Some("any") => ToolChoice::Required,
            Some("none") => ToolChoice::None,
            Some("tool") => ToolChoice::Named(str_field(tc, "name").unwrap_or("").to_string()),
            _ => ToolChoice::Auto,
        });
        if tc.get("disable_parallel_tool_use").and_then(Value::as_bool) == Some(true) {
            c.parallel_tool_calls = Some(false);
        }
    }
    if let Some(u) = o
        .get("metadata")
        .and_then(|m| m.get("user_id"))
        .and_then(Value::as_str)
    {
        c.user = Some(u.to_string());
    }
    c.reasoning = read_thinking(o)?;
    c.output = read_output(o)?;
    for (k, v) in o {
        if !KNOWN.contains(&k.as_str()) {
            c.params.push((k.clone(), v.clone()));
        }
    }
    Ok(c)
}

/// System text: a string or text blocks.
fn read_system(c: &mut Conversation, v: &Value, at: &str) -> Result<(), Unreadable> {
    match v {
        Value::Null => {}
        Value::String(s) => c.system.push(s.clone()),
        v => {
            for b in array(v, at)? {
                if let Some(t) = b.get("text").and_then(Value::as_str) {
                    c.system.push(t.to_string());
                }
            }
        }
    }
    Ok(())
}

fn read_thinking(o: &Obj) -> Result<Option<Reasoning>, Unreadable> {
    if let Some(t) = o.get("thinking").and_then(Value::as_object) {
        return Ok(match str_field(t, "type") {
            Some("enabled") => Some(Reasoning::Budget(
                opt_u64(t, "budget_tokens")?.unwrap_or(1024),
            )),
            Some("adaptive") => Some(Reasoning::Effort(Effort::Medium)),
            Some("disabled") => Some(Reasoning::Off),
            _ => None,
        });
    }
    let effort = o
        .get("output_config")
        .and_then(|c| c.get("effort"))
        .and_then(Value::as_str);
    Ok(effort.and_then(Effort::parse).map(Reasoning::Effort))
}

fn read_output(o: &Obj) -> Result<Option<OutputFormat>, Unreadable> {
    let format = o
        .get("output_config")
        .and_then(|c| c.get("format"))
        .or_else(|| o.get("output_format"));
    let Some(f) = format.and_then(Value::as_object) else {
        return Ok(None);
    };
    match str_field(f, "type") {
        Some("json_schema") => Ok(Some(OutputFormat::JsonSchema {
            name: "answer".into(),
            schema: f.get("schema").cloned().unwrap_or_else(|| json!({})),
            strict: Some(true),
        })),
        t => Err(Unreadable::new(format!("unknown output format type {t:?}"))),
    }
}

fn read_blocks(v: &Value, i: usize) -> Result<Vec<Block>, Unreadable> {
    match v {
        Value::String(s) => Ok(vec![Block::Text(s.clone())]),
        Value::Array(a) => a
            .iter()
            .filter_map(|b| read_block(b, i).transpose())
            .collect(),
        _ => Err(Unreadable::new(format!(
            "messages[{i}].content must be a string or an array"
        ))),
    }
}

fn read_block(b: &Value, i: usize) -> Result<Option<Block>, Unreadable> {
    let o = object(b, "content[]")?;
    Ok(Some(match str_field(o, "type") {
        Some("text") => Block::Text(str_field(o, "text").unwrap_or("").to_string()),
        Some("image") => Block::Image(read_image(o, i)?),
        Some("tool_use") => Block::ToolCall {
            id: str_field(o, "id").unwrap_or("").to_string(),
            name: str_field(o, "name").unwrap_or("").to_string(),
            arguments: o
                .get("input")
                .map(Value::to_string)
                .unwrap_or_else(|| "{}".into()),
        },
        Some("tool_result") => Block::ToolResult {
            id: str_field(o, "tool_use_id").unwrap_or("").to_string(),
            content: match o.get("content") {
                None | Some(Value::Null) => Vec::new(),
                Some(c) => read_blocks(c, i)?,
            },
            is_error: o.get("is_error").and_then(Value::as_bool).unwrap_or(false),
        },
        Some("thinking") => Block::Thinking {
            text: str_field(o, "thinking").unwrap_or("").to_string(),
            // An empty signature marks thinking that came from another provider.
            signature: str_field(o, "signature")
                .filter(|s| !s.is_empty())
                .map(str::to_string),
        },
        // Encrypted reasoning only Anthropic can read: nothing another provider can use.
        Some("redacted_thinking") => return Ok(None),
        Some(t) => {
            return Err(Unreadable::new(format!(
                "messages[{i}]: a {t:?} block cannot be translated to another provider's API"
            )));
        }
        None => {
            return Err(Unreadable::new(format!(
                "messages[{i}]: a block without a type"
            )));
        }
    }))
}

fn read_image(o: &Obj, i: usize) -> Result<Image, Unreadable> {
    let src = o
        .get("source")
        .and_then(Value::as_object)
        .ok_or_else(|| Unreadable::new(format!("messages[{i}]: an image needs a source")))?;
    match str_field(src, "type") {
        Some("base64") => Ok(Image::Inline {
            media_type: str_field(src, "media_type")
                .unwrap_or("image/png")
                .to_string(),
            data: str_field(src, "data").unwrap_or("").to_string(),
        }),
        Some("url") => Ok(Image::Url {
            url: str_field(src, "url").unwrap_or("").to_string(),
            detail: None,
        }),
        t => Err(Unreadable::new(format!(
            "messages[{i}]: image source {t:?} cannot be translated"
        ))),
    }
}

fn read_tool(t: &Obj, i: usize) -> Result<Tool, Unreadable> {
    crate::translate::json::tool(t, &format!("tools[{i}]"), "input_schema")
}
