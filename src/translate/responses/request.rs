//! An OpenAI Responses request read into the neutral form, and written from it.

use crate::translate::ir::{
    Block, Conversation, Effort, Image, OutputFormat, Reasoning, Role, ToolChoice,
};
use crate::translate::ir::{ClientTools, FREE_FORM_ARG, result_text};
use crate::translate::json::{
    Obj, array, object, opt_bool, opt_f64, opt_string, opt_u64, put_f64, str_field,
};
use crate::translate::policy::Out;
use crate::translate::{Cannot, TargetModel, Unreadable};
use serde_json::{Map, Value, json};

const KNOWN: [&str; 14] = [
    "model",
    "instructions",
    "input",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "max_output_tokens",
    "temperature",
    "top_p",
    "text",
    "reasoning",
    "user",
    "stream",
    "store",
];

pub fn read_request(o: &Obj) -> Result<Conversation, Unreadable> {
    let mut c = Conversation {
        model: str_field(o, "model").unwrap_or("").to_string(),
        max_tokens: opt_u64(o, "max_output_tokens")?,
        temperature: opt_f64(o, "temperature")?,
        top_p: opt_f64(o, "top_p")?,
        user: opt_string(o, "user", "")?,
        stream: opt_bool(o, "stream")?.unwrap_or(false),
        parallel_tool_calls: opt_bool(o, "parallel_tool_calls")?,
        ..Default::default()
    };
    if let Some(i) = opt_string(o, "instructions", "")? {
        c.system.push(i);
    }
    match o.get("input") {
        None | Some(Value::Null) => return Err(Unreadable::new("input is required")),
        Some(Value::String(s)) => c.push(Role::User, vec![Block::Text(s.clone())]),
        Some(v) => {
            for (i, item) in array(v, "input")?.iter().enumerate() {
                read_item(&mut c, object(item, "input[]")?, i)?;
            }
        }
    }
    if let Some(tools) = o.get("tools").filter(|v| !v.is_null()) {
        super::tools::read_tools(&mut c, tools, None)?;
    }
    c.tool_choice = match o.get("tool_choice") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(match s.as_str() {
            "auto" => ToolChoice::Auto,
            "required" => ToolChoice::Required,
            "none" => ToolChoice::None,
            s => return Err(Unreadable::new(format!("unknown tool_choice {s:?}"))),
        }),
        Some(Value::Object(t)) => Some(ToolChoice::Named(
            str_field(t, "name")
                .ok_or_else(|| Unreadable::new("tool_choice needs a name"))?
                .to_string(),
        )),
        Some(_) => return Err(Unreadable::new("tool_choice must be a string or an object")),
    };
    if let Some(f) = o
        .get("text")
        .and_then(|t| t.get("format"))
        .and_then(Value::as_object)
    {
        c.output = match str_field(f, "type") {
            Some("json_object") => Some(OutputFormat::JsonObject),
            Some("json_schema") => Some(OutputFormat::JsonSchema {
                name: str_field(f, "name").unwrap_or("answer").to_string(),
                schema: f.get("schema").cloned().unwrap_or_else(|| json!({})),
                strict: f.get("strict").and_then(Value::as_bool),
            }),
            _ => None,
        };
    }
    if let Some(e) = o
        .get("reasoning")
        .and_then(|r| r.get("effort"))
        .and_then(Value::as_str)
    {
        c.reasoning = match e {
            "none" => Some(Reasoning::Off),
            e => Effort::parse(e).map(Reasoning::Effort),
        };
    }
    for (k, v) in o {
        if !KNOWN.contains(&k.as_str()) {
            c.params.push((k.clone(), v.clone()));
        }
    }
    Ok(c)
}

fn read_item(c: &mut Conversation, it: &Obj, i: usize) -> Result<(), Unreadable> {
    match str_field(it, "type") {
        Some("message") | None => {
            let content = it.get("content").unwrap_or(&Value::Null);
            match str_field(it, "role") {
                Some("system" | "developer") => c.system.push(plain_text(content)),
                Some("user") => c.push(Role::User, read_content(content, i)?),
                Some("assistant") => c.push(Role::Assistant, read_content(content, i)?),
                r => return Err(Unreadable::new(format!("input[{i}]: unknown role {r:?}"))),
            }
        }
        Some(kind @ ("function_call" | "custom_tool_call")) => {
            let name = str_field(it, "name").unwrap_or("");
            let arguments = if kind == "custom_tool_call" {
                let input = str_field(it, "input").unwrap_or("");
                json!({ FREE_FORM_ARG: input }).to_string()
            } else {
                str_field(it, "arguments").unwrap_or("").to_string()
            };
            let call = Block::ToolCall {
                id: str_field(it, "call_id").unwrap_or("").to_string(),
                name: ClientTools::neutral_name(str_field(it, "namespace"), name),
                arguments,
            };
            c.push(Role::Assistant, vec![call]);
        }
        // Tools given mid-conversation (Codex's): tools like any other.
        Some("additional_tools") => {
            if let Some(tools) = it.get("tools") {
                super::tools::read_tools(c, tools, None)?;
            }
        }
        Some("function_call_output" | "custom_tool_call_output") => {
            let content = match it.get("output") {
                Some(Value::String(s)) => vec![Block::Text(s.clone())],
                Some(v @ Value::Array(_)) => read_content(v, i)?,
                _ => Vec::new(),
            };
            let result = Block::ToolResult {
                id: str_field(it, "call_id").unwrap_or("").to_string(),
                content,
                is_error: false,
            };
            c.push(Role::User, vec![result]);
        }
        // Reasoning items are OpenAI's encrypted state: no other provider can read them.
        Some("reasoning") => {}
        Some(t) => {
            return Err(Unreadable::new(format!(
                "input[{i}]: a {t:?} item cannot be translated to another provider's API"
            )));
        }
    }
    Ok(())
}

fn plain_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(a) => a
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    }
}

fn read_content(v: &Value, i: usize) -> Result<Vec<Block>, Unreadable> {
    match v {
        Value::String(s) => Ok(vec![Block::Text(s.clone())]),
        Value::Array(parts) => parts
            .iter()
            .map(|p| {
                let o = object(p, "content[]")?;
                match str_field(o, "type") {
                    Some("input_text" | "output_text" | "text") => {
                        Ok(Block::Text(str_field(o, "text").unwrap_or("").to_string()))
                    }
                    Some("input_image") => {
                        let url = str_field(o, "image_url").ok_or_else(|| {
                            Unreadable::new(format!(
                                "input[{i}]: only images by image_url can be translated"
                            ))
                        })?;
                        Ok(Block::Image(Image::from_url(
                            url,
                            str_field(o, "detail").map(str::to_string),
                        )))
                    }
                    Some("refusal") => Ok(Block::Text(
                        str_field(o, "refusal").unwrap_or("").to_string(),
                    )),
                    t => Err(Unreadable::new(format!(
                        "input[{i}]: a {t:?} part cannot be translated to another provider's API"
                    ))),
                }
            })
            .collect(),
        Value::Null => Ok(Vec::new()),
        _ => Err(Unreadable::new(format!(
            "input[{i}].content must be a string or an array"
        ))),
    }
}

/// Parameters the Responses API has a place for, taken as they are.
const TAKES: [&str; 6] = [
    "top_logprobs",
    "metadata",
    "service_tier",
    "truncation",
    "include",
    "safety_identifier",
];

pub fn write_request(c: &Conversation, t: TargetModel, out: &mut Out) -> Result<Value, Cannot> {
    if !c.stop.is_empty() {
        return Err(Cannot {
            what: "stop".into(),
            why: "the Responses API has no stop sequences",
        });
    }
    let mut o = Map::new();
    o.insert("model".into(), t.model.into());
    if !c.system.is_empty() {
        o.insert("instructions".into(), c.system.join("\n\n").into());
    }
    o.insert("input".into(), write_input(c).into());
    if !c.tools.is_empty() {
        let tools: Vec<Value> = c
            .tools
            .iter()
            .map(|t| {
                let mut v = json!({"type": "function", "name": t.name, "parameters": t.parameters});
                if let Some(d) = &t.description {
                    v["description"] = d.clone().into();
                }
                if let Some(s) = t.strict {
                    v["strict"] = s.into();
                }
                v
            })
            .collect();
        o.insert("tools".into(), tools.into());
    }
    if let Some(tc) = &c.tool_choice {
        let v = match tc {
            ToolChoice::Auto => "auto".into(),
            ToolChoice::Required => "required".into(),
            ToolChoice::None => "none".into(),
            ToolChoice::Named(n) => json!({"type": "function", "name": n}),
        };
        o.insert("tool_choice".into(), v);
    }
    if let Some(p) = c.parallel_tool_calls {
        o.insert("parallel_tool_calls".into(), p.into());
    }
    if let Some(n) = c.max_tokens {
        o.insert("max_output_tokens".into(), n.into());
    }
    put_f64(&mut o, "temperature", c.temperature);
    put_f64(&mut o, "top_p", c.top_p);
    if let Some(f) = &c.output {
        let format = match f {
            OutputFormat::JsonObject => json!({"type": "json_object"}),
            OutputFormat::JsonSchema {
                name,
                schema,
                strict,
            } => {
                let mut v = json!({"type": "json_schema", "name": name, "schema": schema});
                if let Some(s) = strict {
                    v["strict"] = (*s).into();
                }
                v
            }
        };
        o.insert("text".into(), json!({"format": format}));
    }
    if let Some(e) = c.reasoning.and_then(Reasoning::effort) {
        o.insert("reasoning".into(), json!({"effort": e.as_str()}));
    }
    if let Some(u) = &c.user {
        o.insert("user".into(), u.clone().into());
    }
    // Ringside keeps no state at the provider for the client: every turn is in the request.
    o.insert("store".into(), false.into());
    if c.stream {
        o.insert("stream".into(), true.into());
    }
    for (name, v) in &c.params {
        if TAKES.contains(&name.as_str()) {
            o.insert(name.clone(), v.clone());
        }
    }
    out.rest(&c.params, &TAKES)?;
    Ok(Value::Object(o))
}

fn write_input(c: &Conversation) -> Vec<Value> {
    let mut items = Vec::new();
    for turn in &c.turns {
        let mut parts = Vec::new();
        let (text_type, role) = match turn.role {
            Role::User => ("input_text", "user"),
            Role::Assistant => ("output_text", "assistant"),
        };
        let flush = |parts: &mut Vec<Value>, items: &mut Vec<Value>| {
            if !parts.is_empty() {
                items.push(
                    json!({"type": "message", "role": role, "content": std::mem::take(parts)}),
                );
            }
        };
        for b in &turn.blocks {
            match b {
                Block::Text(t) => parts.push(json!({"type": text_type, "text": t})),
                Block::Image(i) => {
                    let mut v = json!({"type": "input_image", "image_url": i.as_url()});
                    if let Image::Url {
                        detail: Some(d), ..
                    } = i
                    {
                        v["detail"] = d.clone().into();
                    }
                    parts.push(v);
                }
                Block::ToolCall {
                    id,
                    name,
                    arguments,
                } => {
                    flush(&mut parts, &mut items);
                    items.push(json!({
                        "type": "function_call", "call_id": id, "name": name,
                        "arguments": if arguments.is_empty() { "{}" } else { arguments },
                    }));
                }
                Block::ToolResult {
                    id,
                    content,
                    is_error,
                } => {
                    flush(&mut parts, &mut items);
                    items.push(json!({
                        "type": "function_call_output", "call_id": id,
                        "output": result_text(content, *is_error),
                    }));
                }
                Block::Thinking { .. } => {}
            }
        }
        flush(&mut parts, &mut items);
    }
    items
}
