//! A conversation written as a Gemini `generateContent` request. The model is named in the
//! path, not the body (`translate::upstream_path`).

use crate::translate::ir::result_text;
use crate::translate::ir::{Block, Conversation, Image, OutputFormat, Reasoning, Role, ToolChoice};
use crate::translate::json::{arguments_object, put_f64};
use crate::translate::policy::Out;
use crate::translate::{Cannot, TargetModel};
use serde_json::{Map, Value, json};

/// Gemini thinking models refuse a replayed function call without the signature Gemini gave it;
/// a call that came from another provider has none, and Google documents this value for
/// history that did not come from Gemini.
const FOREIGN_SIGNATURE: &str = "skip_thought_signature_validator";

/// The neutral form's parameters Gemini has a place for, under Gemini's names.
const TAKES: [(&str, &str); 4] = [
    ("top_k", "topK"),
    ("seed", "seed"),
    ("presence_penalty", "presencePenalty"),
    ("frequency_penalty", "frequencyPenalty"),
];

pub fn write_request(c: &Conversation, _t: TargetModel, out: &mut Out) -> Result<Value, Cannot> {
    let mut o = Map::new();
    let mut contents = Vec::new();
    for turn in &c.turns {
        let mut parts = Vec::new();
        let mut signed = false;
        for b in &turn.blocks {
            if let Some(p) = write_part(c, b, &mut signed)? {
                parts.push(p);
            }
        }
        if parts.is_empty() {
            continue;
        }
        let role = match turn.role {
            Role::User => "user",
            Role::Assistant => "model",
        };
        contents.push(json!({"role": role, "parts": parts}));
    }
    o.insert("contents".into(), contents.into());
    if !c.system.is_empty() {
        o.insert(
            "systemInstruction".into(),
            json!({"parts": [{"text": c.system.join("\n\n")}]}),
        );
    }
    if !c.tools.is_empty() {
        let decls: Vec<Value> = c
            .tools
            .iter()
            .map(|t| {
                let mut d = json!({"name": t.name, "parametersJsonSchema": t.parameters});
                if let Some(desc) = &t.description {
                    d["description"] = desc.clone().into();
                }
                d
            })
            .collect();
        // One tool holding every declaration: some models take only one tool.
        o.insert("tools".into(), json!([{"functionDeclarations": decls}]));
    }
    if let Some(tc) = &c.tool_choice {
        let cfg = match tc {
            ToolChoice::Auto => json!({"mode": "AUTO"}),
            ToolChoice::Required => json!({"mode": "ANY"}),
            ToolChoice::None => json!({"mode": "NONE"}),
            ToolChoice::Named(n) => json!({"mode": "ANY", "allowedFunctionNames": [n]}),
        };
        o.insert("toolConfig".into(), json!({"functionCallingConfig": cfg}));
    }
    if c.parallel_tool_calls == Some(false) {
        out.drop("parallel_tool_calls");
    }
    o.insert("generationConfig".into(), generation_config(c, out).into());
    out.rest(&c.params, &TAKES.map(|(n, _)| n))?;
    Ok(Value::Object(o))
}

fn generation_config(c: &Conversation, out: &mut Out) -> Map<String, Value> {
    let mut g = Map::new();
    if let Some(n) = c.max_tokens {
        g.insert("maxOutputTokens".into(), n.into());
    }
    put_f64(&mut g, "temperature", c.temperature);
    put_f64(&mut g, "topP", c.top_p);
    if !c.stop.is_empty() {
        g.insert("stopSequences".into(), json!(c.stop));
    }
    match &c.output {
        None => {}
        Some(OutputFormat::JsonObject) => {
            g.insert("responseMimeType".into(), "application/json".into());
        }
        Some(OutputFormat::JsonSchema { schema, .. }) => {
            g.insert("responseMimeType".into(), "application/json".into());
            g.insert("responseJsonSchema".into(), schema.clone());
        }
    }
    match c.reasoning {
        None => {}
        // Some Gemini models cannot think less than their floor; the default is left to them.
        Some(Reasoning::Off) => out.drop("reasoning"),
        Some(r) => {
            let budget = r.budget().unwrap_or(1024);
            g.insert(
                "thinkingConfig".into(),
                json!({"thinkingBudget": budget, "includeThoughts": true}),
            );
        }
    }
    for (name, gname) in TAKES {
        if let Some(v) = c.param(name).filter(|v| !v.is_null()) {
            g.insert(gname.into(), v.clone());
        }
    }
    g
}

fn write_part(c: &Conversation, b: &Block, signed: &mut bool) -> Result<Option<Value>, Cannot> {
    Ok(Some(match b {
        Block::Text(t) if t.is_empty() => return Ok(None),
        Block::Text(t) => json!({"text": t}),
        Block::Image(Image::Inline { media_type, data }) => {
            json!({"inlineData": {"mimeType": media_type, "data": data}})
        }
        Block::Image(Image::Url { url, .. }) => {
            json!({"fileData": {"fileUri": url, "mimeType": mime_of(url)}})
        }
        Block::ToolCall {
            id,
            name,
            arguments,
        } => {
            let args = arguments_object(arguments).map_err(|why| Cannot {
                what: "tool_calls".into(),
                why,
            })?;
            let mut p = json!({"functionCall": {"id": id, "name": name, "args": args}});
            // With parallel calls only the first carries a signature.
            if !*signed {
                p["thoughtSignature"] = FOREIGN_SIGNATURE.into();
                *signed = true;
            }
            p
        }
        Block::ToolResult {
            id,
            content,
            is_error,
        } => {
            let name = c.call_name(id).ok_or_else(|| Cannot {
                what: "tool result".into(),
                why: "Gemini names a result's function, and no call in the conversation has its id",
            })?;
            let text = result_text(content, false);
            let response = if *is_error {
                json!({"error": text})
            } else {
                json!({"output": text})
            };
            json!({"functionResponse": {"id": id, "name": name, "response": response}})
        }
        // Gemini's own thoughts come back as signatures on parts, not as text to replay.
        Block::Thinking { .. } => return Ok(None),
    }))
}

/// Gemini's `fileData` needs a type: guessed from the address's extension.
fn mime_of(url: &str) -> &'static str {
    let path = url
        .split(['?', '#'])
        .next()
        .unwrap_or(url)
        .to_ascii_lowercase();
    match path.rsplit('.').next() {
        Some("png") => "image/png",
        Some("gif") => "image/gif",
        Some("webp") => "image/webp",
        Some("pdf") => "application/pdf",
        _ => "image/jpeg",
    }
}
