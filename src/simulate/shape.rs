//! What a real provider refuses in a request body, checked when the simulator runs strict:
//! the rules a translated request must keep (Anthropic's required `max_tokens`, alternating
//! roles, non-empty text, every tool result after its call; Gemini's `contents`, roles and
//! named function responses; Chat's roles and tool messages). A message names the rule broken.

use super::body::Api;
use serde_json::Value;

pub fn problem(api: Api, body: &[u8]) -> Option<String> {
    let Ok(v) = serde_json::from_slice::<Value>(body) else {
        return Some("the body is not JSON".into());
    };
    match api {
        Api::Chat => chat(&v),
        Api::Messages => messages(&v),
        Api::Responses => v
            .get("input")
            .is_none()
            .then(|| "input: Field required".into()),
        Api::Gemini => gemini(&v),
        _ => None,
    }
}

fn chat(v: &Value) -> Option<String> {
    let Some(messages) = v
        .get("messages")
        .and_then(Value::as_array)
        .filter(|m| !m.is_empty())
    else {
        return Some("messages: a non-empty array is required".into());
    };
    let mut calls: Vec<&str> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        match m.get("role").and_then(Value::as_str) {
            Some("system" | "developer" | "user") => {}
            Some("assistant") => {
                for c in m
                    .get("tool_calls")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    calls.push(c.get("id").and_then(Value::as_str).unwrap_or(""));
                }
            }
            Some("tool") => {
                let id = m.get("tool_call_id").and_then(Value::as_str).unwrap_or("");
                if !calls.contains(&id) {
                    return Some(format!(
                        "messages[{i}]: a tool message must answer a preceding tool call (tool_call_id {id:?})"
                    ));
                }
            }
            r => return Some(format!("messages[{i}].role: invalid value {r:?}")),
        }
    }
    None
}

fn messages(v: &Value) -> Option<String> {
    if !v.get("max_tokens").is_some_and(Value::is_u64) {
        return Some("max_tokens: Field required".into());
    }
    let Some(messages) = v
        .get("messages")
        .and_then(Value::as_array)
        .filter(|m| !m.is_empty())
    else {
        return Some("messages: at least one message is required".into());
    };
    let mut last_calls: Vec<&str> = Vec::new();
    // A `system` message between turns (Claude Code sends them, under a beta) takes no turn.
    let mut turn = 0;
    for (i, m) in messages.iter().enumerate() {
        let role = m.get("role").and_then(Value::as_str);
        if role == Some("system") && i > 0 {
            continue;
        }
        let want = if turn % 2 == 0 { "user" } else { "assistant" };
        turn += 1;
        if role != Some(want) {
            return Some(format!(
                "messages.{i}.role: roles must alternate, starting with user (got {role:?})"
            ));
        }
        let blocks: Vec<&Value> = match m.get("content") {
            Some(Value::String(s)) if s.is_empty() => {
                return Some(format!(
                    "messages.{i}: text content blocks must be non-empty"
                ));
            }
            Some(Value::String(_)) => Vec::new(),
            Some(Value::Array(a)) if !a.is_empty() => a.iter().collect(),
            _ => {
                return Some(format!(
                    "messages.{i}.content: a string or a non-empty array is required"
                ));
            }
        };
        let mut calls = Vec::new();
        for b in blocks {
            match b.get("type").and_then(Value::as_str) {
                Some("text")
                    if b.get("text")
                        .and_then(Value::as_str)
                        .is_none_or(str::is_empty) =>
                {
                    return Some(format!(
                        "messages.{i}: text content blocks must be non-empty"
                    ));
                }
                Some("tool_use") => {
                    if !b.get("input").is_some_and(Value::is_object) {
                        return Some(format!("messages.{i}: tool_use.input must be an object"));
                    }
                    calls.push(b.get("id").and_then(Value::as_str).unwrap_or(""));
                }
                Some("tool_result") => {
                    let id = b.get("tool_use_id").and_then(Value::as_str).unwrap_or("");
                    if !last_calls.contains(&id) {
                        return Some(format!(
                            "messages.{i}: tool_result {id:?} does not follow its tool_use"
                        ));
                    }
                }
                Some("text" | "image" | "thinking" | "document") => {}
                t => return Some(format!("messages.{i}: unknown content block type {t:?}")),
            }
        }
        last_calls = calls;
    }
    None
}

fn gemini(v: &Value) -> Option<String> {
    let Some(contents) = v
        .get("contents")
        .and_then(Value::as_array)
        .filter(|c| !c.is_empty())
    else {
        return Some("contents is not specified".into());
    };
    for (i, c) in contents.iter().enumerate() {
        match c.get("role").and_then(Value::as_str) {
            Some("user" | "model") => {}
            r => {
                return Some(format!(
                    "contents[{i}].role: please use a valid role: user, model (got {r:?})"
                ));
            }
        }
        let Some(parts) = c
            .get("parts")
            .and_then(Value::as_array)
            .filter(|p| !p.is_empty())
        else {
            return Some(format!("contents[{i}].parts must not be empty"));
        };
        for p in parts {
            if let Some(r) = p.get("functionResponse")
                && r.get("name")
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
            {
                return Some(format!("contents[{i}]: functionResponse.name is required"));
            }
        }
    }
    None
}
