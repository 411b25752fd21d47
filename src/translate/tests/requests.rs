use super::{target, translate};
use crate::translate::{Api, read, write};
use serde_json::json;

/// A Chat request with everything an agent sends: system, image, a tool call and its result,
/// tools, a forced tool choice, stop sequences and a JSON schema.
fn agent_chat() -> serde_json::Value {
    json!({
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [
                {"type": "text", "text": "What is in this image, and the weather in Paris?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
            ]},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
                {"id": "call_2", "type": "function", "function": {"name": "get_time", "arguments": ""}}
            ]},
            {"role": "tool", "tool_call_id": "call_1", "content": "18C"},
            {"role": "tool", "tool_call_id": "call_2", "content": "noon"}
        ],
        "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
                  {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}],
        "tool_choice": "required",
        "parallel_tool_calls": false,
        "stop": ["END"],
        "temperature": 0.2,
        "user": "u-1",
        "stream": true
    })
}

#[test]
fn chat_to_anthropic_lays_out_turns_as_anthropic_requires() {
    let out = translate(Api::Chat, Api::Messages, agent_chat());
    assert_eq!(
        out,
        json!({
            "model": "m",
            "max_tokens": 4096,
            "system": "Be brief.",
            "messages": [
                {"role": "user", "content": [
                    {"type": "text", "text": "What is in this image, and the weather in Paris?"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
                ]},
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Paris"}},
                    {"type": "tool_use", "id": "call_2", "name": "get_time", "input": {}}
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "call_1", "content": [{"type": "text", "text": "18C"}]},
                    {"type": "tool_result", "tool_use_id": "call_2", "content": [{"type": "text", "text": "noon"}]}
                ]}
            ],
            "tools": [
                {"name": "get_weather", "description": "Weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
                {"name": "get_time", "input_schema": {"type": "object"}}
            ],
            "tool_choice": {"type": "any", "disable_parallel_tool_use": true},
            "temperature": 0.2,
            "stop_sequences": ["END"],
            "metadata": {"user_id": "u-1"},
            "stream": true
        })
    );
}

/// The tool-use round trip of Anthropic's documentation, sent by an Anthropic client to an
/// OpenAI Chat provider.
#[test]
fn anthropic_tool_round_trip_to_chat() {
    let body = json!({
        "model": "claude-sonnet-4",
        "max_tokens": 1024,
        "system": [{"type": "text", "text": "You are a weather bot."}],
        "tools": [{"name": "get_weather", "description": "Get the current weather in a given location",
                   "input_schema": {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]}}],
        "messages": [
            {"role": "user", "content": "What's the weather like in San Francisco?"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "I should call the tool.", "signature": "sig"},
                {"type": "text", "text": "I'll check."},
                {"type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9", "name": "get_weather", "input": {"location": "San Francisco, CA"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01A09q90qw90lq917835lq9", "content": "15 degrees"},
                {"type": "text", "text": "And tomorrow?"}
            ]}
        ],
        "stream": true
    });
    let out = translate(Api::Messages, Api::Chat, body);
    assert_eq!(
        out,
        json!({
            "model": "m",
            "messages": [
                {"role": "system", "content": "You are a weather bot."},
                {"role": "user", "content": "What's the weather like in San Francisco?"},
                {"role": "assistant", "content": "I'll check.", "tool_calls": [
                    {"id": "toolu_01A09q90qw90lq917835lq9", "type": "function",
                     "function": {"name": "get_weather", "arguments": "{\"location\":\"San Francisco, CA\"}"}}
                ]},
                {"role": "tool", "tool_call_id": "toolu_01A09q90qw90lq917835lq9", "content": "15 degrees"},
                {"role": "user", "content": "And tomorrow?"}
            ],
            "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Get the current weather in a given location",
                       "parameters": {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]}}}],
            "max_completion_tokens": 1024,
            "stream": true,
            "stream_options": {"include_usage": true}
        })
    );
}

#[test]
fn responses_input_items_to_anthropic() {
    let body = json!({
        "model": "gpt-5",
        "instructions": "Answer in French.",
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "Weather?"}]},
            {"type": "function_call", "id": "fc_1", "call_id": "call_9", "name": "get_weather", "arguments": "{\"city\":\"Lyon\"}"},
            {"type": "function_call_output", "call_id": "call_9", "output": "rain"}
        ],
        "max_output_tokens": 300,
        "reasoning": {"effort": "high"},
        "text": {"format": {"type": "json_schema", "name": "w", "schema": {"type": "object"}, "strict": true}}
    });
    let out = translate(Api::Responses, Api::Messages, body);
    assert_eq!(out["system"], "Answer in French.");
    assert_eq!(out["messages"][1]["content"][0]["type"], "tool_use");
    assert_eq!(out["messages"][2]["content"][0]["tool_use_id"], "call_9");
    assert_eq!(
        out["output_config"],
        json!({"format": {"type": "json_schema", "schema": {"type": "object"}}})
    );
    // The client's cap (300) is below high effort's budget: the thinking is dropped, not the cap.
    assert_eq!(out["max_tokens"], 300);
    assert!(out.get("thinking").is_none());
}

#[test]
fn thinking_budget_fits_under_a_made_cap_and_clears_temperature() {
    let body = json!({"model": "x", "messages": [{"role": "user", "content": "hi"}],
                      "reasoning_effort": "medium", "temperature": 0.5});
    let conv = read(Api::Chat, body.to_string().as_bytes()).unwrap();
    let w = write(Api::Messages, &conv, target("claude")).unwrap();
    let out: serde_json::Value = serde_json::from_slice(&w.body).unwrap();
    assert_eq!(
        out["thinking"],
        json!({"type": "enabled", "budget_tokens": 4096})
    );
    assert_eq!(out["max_tokens"], 4096 + 4096);
    assert!(out.get("temperature").is_none());
    assert_eq!(w.dropped, vec!["temperature"]);
}

#[test]
fn chat_to_gemini_names_results_by_their_calls() {
    let out = translate(Api::Chat, Api::Gemini, agent_chat());
    assert_eq!(
        out["systemInstruction"],
        json!({"parts": [{"text": "Be brief."}]})
    );
    let contents = out["contents"].as_array().unwrap();
    assert_eq!(contents.len(), 3);
    assert_eq!(
        contents[0]["parts"][1]["inlineData"]["mimeType"],
        "image/png"
    );
    assert_eq!(contents[1]["role"], "model");
    let calls = contents[1]["parts"].as_array().unwrap();
    assert_eq!(calls[0]["functionCall"]["args"], json!({"city": "Paris"}));
    // Only the first call of a turn carries a signature.
    assert!(calls[0].get("thoughtSignature").is_some());
    assert!(calls[1].get("thoughtSignature").is_none());
    assert_eq!(
        contents[2]["parts"][1]["functionResponse"],
        json!({"id": "call_2", "name": "get_time", "response": {"output": "noon"}})
    );
    assert_eq!(
        out["toolConfig"],
        json!({"functionCallingConfig": {"mode": "ANY"}})
    );
    assert_eq!(out["generationConfig"]["stopSequences"], json!(["END"]));
    assert_eq!(
        out["tools"][0]["functionDeclarations"][0]["parametersJsonSchema"]["required"],
        json!(["city"])
    );
}

#[test]
fn parameters_without_an_equivalent_are_refused_or_dropped_by_name() {
    let read_chat = |extra: serde_json::Value| {
        let mut b = json!({"model": "x", "messages": [{"role": "user", "content": "hi"}]});
        for (k, v) in extra.as_object().unwrap() {
            b[k] = v.clone();
        }
        read(Api::Chat, b.to_string().as_bytes()).unwrap()
    };
    // Dropped and named.
    let c = read_chat(json!({"seed": 7, "presence_penalty": 0.5, "n": 1, "logprobs": false}));
    let w = write(Api::Messages, &c, target("c")).unwrap();
    assert_eq!(w.dropped, vec!["seed", "presence_penalty"]);
    // Gemini has a place for both.
    let w = write(Api::Gemini, &c, target("g")).unwrap();
    assert!(w.dropped.is_empty());
    // Refused: the answer would not be what was asked for.
    for refused in [
        json!({"n": 2}),
        json!({"logprobs": true}),
        json!({"modalities": ["text", "audio"]}),
    ] {
        let c = read_chat(refused.clone());
        let err = write(Api::Messages, &c, target("c")).unwrap_err();
        assert_eq!(
            &err.what,
            refused.as_object().unwrap().keys().next().unwrap()
        );
    }
    // A provider's own tools (Anthropic's web search, OpenAI's) run only there: another
    // provider answers without them, named; the functions beside them go on.
    let body = json!({"model": "x", "max_tokens": 9, "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"type": "web_search_20250305", "name": "web_search"}, {"name": "f", "input_schema": {"type": "object"}}]});
    let c = read(Api::Messages, body.to_string().as_bytes()).unwrap();
    let w = write(Api::Chat, &c, target("g")).unwrap();
    assert_eq!(w.dropped, vec!["tools:web_search_20250305"]);
    let out: serde_json::Value = serde_json::from_slice(&w.body).unwrap();
    assert_eq!(out["tools"][0]["function"]["name"], "f");
    let body = json!({"model": "x", "input": "hi", "tools": [{"type": "web_search"}]});
    let c = read(Api::Responses, body.to_string().as_bytes()).unwrap();
    let w = write(Api::Messages, &c, target("c")).unwrap();
    assert_eq!(w.dropped, vec!["tools:web_search"]);
    // Responses has no stop sequences.
    let c = read_chat(json!({"stop": "x"}));
    assert_eq!(
        write(Api::Responses, &c, target("r")).unwrap_err().what,
        "stop"
    );
    // A temperature above Anthropic's range is clamped and said.
    let c = read_chat(json!({"temperature": 1.7}));
    let w = write(Api::Messages, &c, target("c")).unwrap();
    assert_eq!(w.dropped, vec!["temperature"]);
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&w.body).unwrap()["temperature"].as_f64(),
        Some(1.0)
    );
}

#[test]
fn unreadable_bodies_say_what_is_wrong() {
    for (api, body, says) in [
        (Api::Chat, json!({"model": "x"}), "messages is required"),
        (
            Api::Chat,
            json!({"messages": [{"role": "wizard", "content": "x"}]}),
            "unknown role",
        ),
        (
            Api::Chat,
            json!({"messages": [{"role": "user", "content": [{"type": "input_audio"}]}]}),
            "cannot be translated",
        ),
        (
            Api::Messages,
            json!({"messages": [{"role": "user", "content": [{"type": "document", "source": {}}]}]}),
            "cannot be translated",
        ),
        (Api::Responses, json!({"model": "x"}), "input is required"),
    ] {
        let err = read(api, body.to_string().as_bytes()).unwrap_err();
        assert!(err.0.contains(says), "{api:?}: {} lacks {says:?}", err.0);
    }
    assert!(read(Api::Chat, b"{not json").is_err());
    assert!(read(Api::Chat, b"[1]").is_err());
}

#[test]
fn an_empty_text_block_and_foreign_thinking_never_reach_anthropic() {
    let body = json!({"model": "x", "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "", "reasoning_content": "hmm"},
        {"role": "user", "content": "next"}
    ]});
    let out = translate(Api::Chat, Api::Messages, body);
    // The assistant turn had nothing Anthropic takes: the user's turns around it become one.
    assert_eq!(
        out["messages"],
        json!([{"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "text", "text": "next"}]}])
    );
}
