//! Codex's Responses requests across providers: tools given mid-conversation
//! (`additional_tools`), tool namespaces, and free-form (`custom`) tools whose calls carry text.
//! Other providers see functions; the calls come back to Codex in its own terms.

use super::translate;
use crate::translate::answer::{Stamp, translate as answer};
use crate::translate::stream::Translator;
use crate::translate::{Api, read};
use serde_json::{Value, json};

/// A Codex-shaped request: its tools in an `additional_tools` item (a free-form `exec` with a
/// grammar and a function in the default namespace, `sleep` in namespace `clock`), then an
/// earlier free-form call and its output, then the user's words.
fn codex_request() -> Value {
    json!({
        "model": "gpt-6.2-sol", "stream": true, "store": false,
        "input": [
            {"type": "additional_tools", "role": "developer", "tools": [
                {"type": "namespace", "name": "functions", "tools": [
                    {"type": "custom", "name": "exec", "description": "Run code.",
                     "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}},
                    {"type": "function", "name": "wait", "strict": false,
                     "parameters": {"type": "object", "properties": {"cell_id": {"type": "string"}}}}
                ]},
                {"type": "namespace", "name": "clock", "tools": [
                    {"type": "function", "name": "sleep",
                     "parameters": {"type": "object", "properties": {"duration_ms": {"type": "number"}}}}
                ]}
            ]},
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "You are Codex."}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "list files"}]},
            {"type": "custom_tool_call", "call_id": "call_1", "name": "exec", "input": "ls -la"},
            {"type": "custom_tool_call_output", "call_id": "call_1", "output": "README.md"},
            {"type": "function_call", "call_id": "call_2", "namespace": "clock", "name": "sleep", "arguments": "{\"duration_ms\":5}"},
            {"type": "function_call_output", "call_id": "call_2", "output": "slept"},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "and now?"}]}
        ]
    })
}

#[test]
fn codex_tools_reach_anthropic_as_functions() {
    let out = translate(Api::Responses, Api::Messages, codex_request());
    let names: Vec<&str> = out["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names, ["exec", "wait", "clock__sleep"]);
    let exec = &out["tools"][0];
    assert_eq!(exec["input_schema"]["required"], json!(["input"]));
    let said = exec["description"].as_str().unwrap();
    assert!(
        said.starts_with("Run code.") && said.contains("start: /.+/"),
        "{said}"
    );
    // The earlier calls, as functions with their arguments, and their results.
    let turns = out["messages"].as_array().unwrap();
    let call = &turns[1]["content"][0];
    assert_eq!(call["type"], "tool_use");
    assert_eq!(
        (&call["name"], &call["input"]),
        (&json!("exec"), &json!({"input": "ls -la"}))
    );
    let results = &turns[2]["content"][0];
    assert_eq!(
        (&results["type"], &results["tool_use_id"]),
        (&json!("tool_result"), &json!("call_1"))
    );
    assert_eq!(turns[3]["content"][0]["name"], "clock__sleep");
    let system = out["system"].as_str().unwrap_or_default();
    assert!(system.contains("You are Codex."), "{out}");
}

#[test]
fn calls_come_back_to_codex_in_its_own_terms() {
    let conv = read(Api::Responses, codex_request().to_string().as_bytes()).unwrap();
    let stamp = Stamp {
        model: "gpt-6.2-sol",
        created: 1,
        request_id: "r1",
        tools: &conv.client_tools,
    };
    let claude = json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
        "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "exec", "input": {"input": "cat README.md"}},
            {"type": "tool_use", "id": "toolu_2", "name": "clock__sleep", "input": {"duration_ms": 1}}
        ],
        "stop_reason": "tool_use", "usage": {"input_tokens": 3, "output_tokens": 4}});
    let body = answer(
        Api::Messages,
        Api::Responses,
        claude.to_string().as_bytes(),
        stamp,
    )
    .unwrap();
    let v: Value = serde_json::from_slice(&body).unwrap();
    let items = v["output"].as_array().unwrap();
    assert_eq!(items[0]["type"], "custom_tool_call");
    assert_eq!(
        (&items[0]["name"], &items[0]["input"]),
        (&json!("exec"), &json!("cat README.md"))
    );
    assert_eq!(items[0]["call_id"], "toolu_1");
    assert_eq!(items[1]["type"], "function_call");
    assert_eq!(
        (&items[1]["namespace"], &items[1]["name"]),
        (&json!("clock"), &json!("sleep"))
    );
    assert_eq!(items[1]["arguments"], "{\"duration_ms\":1}");

    // The same calls streamed: the free-form call's text in one delta when it is whole.
    let stream = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"claude-x\",\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n\
event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"exec\",\"input\":{}}}\n\n\
event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"input\\\": \\\"cat \"}}\n\n\
event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"README.md\\\"}\"}}\n\n\
event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n\
event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":9}}\n\n\
event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
    let mut t = Translator::new(
        Api::Messages,
        Api::Responses,
        "gpt-6.2-sol",
        "r1",
        1,
        false,
        conv.client_tools.clone(),
    );
    let mut out = Vec::new();
    t.feed(stream.as_bytes(), &mut out);
    t.finish(&mut out);
    let text = String::from_utf8(out).unwrap();
    assert!(!text.contains("function_call_arguments"), "{text}");
    let deltas: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("custom_tool_call_input.delta\","))
        .collect();
    assert_eq!(deltas.len(), 1, "{text}");
    assert!(deltas[0].contains("\"delta\":\"cat README.md\""), "{text}");
    let completed = text
        .lines()
        .rfind(|l| l.contains("response.completed\","))
        .unwrap();
    let v: Value = serde_json::from_str(completed.trim_start_matches("data: ")).unwrap();
    let item = &v["response"]["output"][0];
    assert_eq!(
        (&item["type"], &item["input"]),
        (&json!("custom_tool_call"), &json!("cat README.md"))
    );
}
