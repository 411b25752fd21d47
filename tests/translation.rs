//! Fallback across providers end to end, on io_uring and on epoll: a client of one API served
//! by a provider of another when its own is at a wall, the request translated (the simulator
//! runs strict: it refuses what the real provider would), the answer, whole or streamed, in the
//! client's API; Gemini and Azure reached with their own paths and credentials.

mod common;
use common::cross::{config, sim};
use common::*;
use serde_json::{Value, json};

both_drivers!(
    a_chat_client_falls_back_to_anthropic,
    an_anthropic_client_falls_back_to_openai,
    a_responses_client_is_served_by_gemini,
    a_tool_round_trip_crosses_to_gemini,
    azure_takes_its_deployment_path_and_key,
    a_route_can_forbid_crossing,
    a_request_no_other_api_can_take_stays_home,
    an_error_answer_reaches_the_client_in_its_own_shape,
);

/// The simulator's three words, as every API carries them.
const WORDS: &str = "Hello from the";

fn sse_events(text: &str) -> Vec<(String, Value)> {
    text.split("\n\n")
        .filter(|b| !b.trim().is_empty())
        .map(|b| {
            let (mut name, mut data) = (String::new(), String::new());
            for line in b.lines() {
                if let Some(n) = line.strip_prefix("event: ") {
                    name = n.into();
                } else if let Some(d) = line.strip_prefix("data: ") {
                    data = d.into();
                }
            }
            (
                name,
                serde_json::from_str(&data).unwrap_or(Value::String(data)),
            )
        })
        .collect()
}

fn a_chat_client_falls_back_to_anthropic(driver: &str) {
    let sim = sim(&["key:sk-sim-a=429"]);
    let proxy = Proxy::start(driver, 1, "", &config(sim.addr, &["oa", "an"], ""));
    let r = proxy.post("/v1/chat/completions", &[], &chat("r", false));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("x-ringside-connection"), Some("an/k"));
    assert_eq!(r.header("x-ringside-translated"), Some("chat->messages"));
    let v = r.json();
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(v["model"], "r");
    assert_eq!(v["choices"][0]["message"]["content"], WORDS);
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    assert_eq!(v["usage"]["completion_tokens"], 3);
    // Streamed: chunks, the usage chunk asked for, [DONE].
    let body = r#"{"model":"r","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}"#;
    let r = proxy.post("/v1/chat/completions", &[], body);
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("content-type")
            .map(|c| c.starts_with("text/event-stream")),
        Some(true)
    );
    let text = r.text();
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    let evs = sse_events(&text);
    let content: String = evs
        .iter()
        .filter_map(|(_, v)| {
            v.pointer("/choices/0/delta/content")
                .and_then(Value::as_str)
        })
        .collect();
    assert_eq!(content, WORDS);
    assert!(
        evs.iter().any(|(_, v)| v["usage"]["prompt_tokens"] == 9),
        "{text}"
    );
    let id = r.header("x-request-id").unwrap_or_default().to_string();
    let d = proxy.decision(&id);
    assert_eq!(d["outcome"], "ok", "{d}");
    assert_eq!(d["stream_stats"]["terminal"], true, "{d}");
}

fn an_anthropic_client_falls_back_to_openai(driver: &str) {
    let sim = sim(&["key:sk-sim-b=529"]);
    let proxy = Proxy::start(driver, 1, "", &config(sim.addr, &["an", "oa"], ""));
    let body = json!({"model": "r", "max_tokens": 64, "system": "Be brief.",
        "messages": [{"role": "user", "content": "hi"}]});
    let r = proxy.post(
        "/v1/messages",
        &[("anthropic-version", "2023-06-01")],
        &body.to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("x-ringside-translated"), Some("messages->chat"));
    let v = r.json();
    assert_eq!(v["type"], "message");
    assert_eq!(v["content"][0], json!({"type": "text", "text": WORDS}));
    assert_eq!(v["stop_reason"], "end_turn");
    let mut body = body;
    body["stream"] = true.into();
    let r = proxy.post("/v1/messages", &[], &body.to_string());
    let evs = sse_events(&r.text());
    let names: Vec<&str> = evs.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.first(), Some(&"message_start"));
    assert_eq!(names.last(), Some(&"message_stop"));
    let text: String = evs
        .iter()
        .filter_map(|(_, v)| v.pointer("/delta/text").and_then(Value::as_str))
        .collect();
    assert_eq!(text, WORDS);
}

fn a_responses_client_is_served_by_gemini(driver: &str) {
    let sim = sim(&["key:sk-sim-a=500", "key:sk-sim-b=503"]);
    let proxy = Proxy::start(driver, 1, "", &config(sim.addr, &["oa", "an", "gm"], ""));
    let r = proxy.post(
        "/v1/responses",
        &[],
        r#"{"model":"r","input":"hi","instructions":"Be brief."}"#,
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("x-ringside-connection"), Some("gm/k"));
    let v = r.json();
    assert_eq!(v["object"], "response");
    assert_eq!(v["status"], "completed");
    assert_eq!(v["output"][0]["content"][0]["text"], WORDS);
    let r = proxy.post(
        "/v1/responses",
        &[],
        r#"{"model":"r","input":"hi","stream":true}"#,
    );
    let evs = sse_events(&r.text());
    let (last, v) = evs.last().unwrap();
    assert_eq!(last, "response.completed", "{}", r.text());
    assert_eq!(v["response"]["output"][0]["content"][0]["text"], WORDS);
    // Gemini was asked with its key header and path.
    let seen = ringside::demo::client::request(sim.addr, "GET", "/_sim/requests", &[], b"", T)
        .unwrap()
        .json();
    let gem = seen["requests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["key"] == "sk-sim-c")
        .expect("gemini asked");
    assert!(
        gem["path"]
            .as_str()
            .unwrap()
            .starts_with("/v1beta/models/gemini-x:"),
        "{gem}"
    );
    assert!(
        gem["headers"].to_string().contains("x-goog-api-key"),
        "{gem}"
    );
}

fn a_tool_round_trip_crosses_to_gemini(driver: &str) {
    let sim = sim(&["key:sk-sim-a=429"]);
    let proxy = Proxy::start(driver, 1, "", &config(sim.addr, &["oa", "gm"], ""));
    // The second turn of a tool use: the call and its result travel in Gemini's shape (the
    // strict simulator refuses a result without its function's name).
    let body = json!({"model": "r", "messages": [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "18C"}],
        "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]});
    let r = proxy.post("/v1/chat/completions", &[], &body.to_string());
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["choices"][0]["message"]["content"], WORDS);
}

fn azure_takes_its_deployment_path_and_key(driver: &str) {
    let sim = sim(&[]);
    let proxy = Proxy::start(driver, 1, "", &config(sim.addr, &["az"], ""));
    let r = proxy.post("/v1/chat/completions", &[], &chat("r", false));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.header("x-ringside-translated"),
        None,
        "same API: passed through"
    );
    let seen = ringside::demo::client::request(sim.addr, "GET", "/_sim/requests", &[], b"", T)
        .unwrap()
        .json();
    let q = &seen["requests"][0];
    assert_eq!(
        q["path"], "/openai/deployments/deploy-x/chat/completions?api-version=2024-10-21",
        "{q}"
    );
    assert_eq!(q["key"], "sk-sim-d");
    assert!(q["headers"].to_string().contains("\"api-key\""), "{q}");
}

fn a_route_can_forbid_crossing(driver: &str) {
    let sim = sim(&["key:sk-sim-a=429"]);
    let proxy = Proxy::start(
        driver,
        1,
        "",
        &config(sim.addr, &["oa", "an"], "cross_dialect = false\n"),
    );
    let r = proxy.post("/v1/chat/completions", &[], &chat("r", false));
    assert_eq!(r.status, 429, "{}", r.text());
    let seen = ringside::demo::client::request(sim.addr, "GET", "/_sim/stats", &[], b"", T)
        .unwrap()
        .json();
    assert!(
        seen.to_string().contains("sk-sim-a") && !seen.to_string().contains("sk-sim-b"),
        "{seen}"
    );
}

fn a_request_no_other_api_can_take_stays_home(driver: &str) {
    // Two choices (`n`) have no equivalent at Anthropic: that target is passed over, said in the
    // decision record, and the OpenAI wall is the answer.
    let sim = sim(&["key:sk-sim-a=429"]);
    let proxy = Proxy::start(driver, 1, "", &config(sim.addr, &["oa", "an"], ""));
    let body = r#"{"model":"r","n":2,"messages":[{"role":"user","content":"hi"}]}"#;
    let r = proxy.post("/v1/chat/completions", &[], body);
    assert_eq!(r.status, 429, "{}", r.text());
    let id = r.header("x-request-id").unwrap_or_default().to_string();
    let d = proxy.decision(&id);
    assert!(d.to_string().contains("untranslatable"), "{d}");
    // A parameter that tunes but does not shape the answer is dropped and named.
    let body = r#"{"model":"r","seed":7,"messages":[{"role":"user","content":"hi"}]}"#;
    let r = proxy.post("/v1/chat/completions", &[], body);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("x-ringside-dropped"), Some("seed"));
}

fn an_error_answer_reaches_the_client_in_its_own_shape(driver: &str) {
    // Anthropic's validation error (a 400 it would not take again anywhere) reaches a Chat
    // client as a Chat error, with Ringside's code for it and the provider's words.
    let sim = sim(&[
        "key:sk-sim-a=429",
        "key:sk-sim-b=400;message=tools.0.name: String should match pattern",
    ]);
    let proxy = Proxy::start(driver, 1, "", &config(sim.addr, &["oa", "an"], ""));
    let r = proxy.post("/v1/chat/completions", &[], &chat("r", false));
    assert_eq!(r.status, 400, "{}", r.text());
    let v = r.json();
    assert_eq!(v["error"]["code"], "upstream_invalid_request", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("String should match pattern"),
        "{v}"
    );
    assert!(
        v.get("type").is_none(),
        "a Chat error, not Anthropic's: {v}"
    );
}
