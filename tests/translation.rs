//! Fallback across providers end to end, on io_uring and on epoll: a client of one API served
//! by a provider of another when its own is at a wall, the request translated (the simulator
//! runs strict: it refuses what the real provider would), the answer, whole or streamed, in the
//! client's API; Gemini and Azure reached with their own paths and credentials.

mod common;
use common::*;
use ringside::simulate::{SimOptions, parse_fault_arg};
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
    routes_match_the_ids_agents_send,
    a_fallback_that_cannot_honour_the_request_is_not_tried,
);

/// One simulator standing in for every provider (strict), with faults by key.
fn sim(faults: &[&str]) -> ringside::simulate::Simulator {
    let mut opts = SimOptions {
        events: 3,
        strict: true,
        ..Default::default()
    };
    for f in faults {
        opts.faults.push(parse_fault_arg(f).expect("fault"));
    }
    start_sim(opts)
}

/// Four providers on the simulator (OpenAI key a, Anthropic b, Gemini c, Azure d) and a route
/// over the first three in `order`.
fn config(sim: std::net::SocketAddr, order: &[&str], route_extra: &str) -> String {
    let mut s = String::new();
    for (id, dialect, base, key, extra) in [
        ("oa", "openai", format!("http://{sim}/v1"), "A", ""),
        ("an", "anthropic", format!("http://{sim}/v1"), "B", ""),
        ("gm", "gemini", format!("http://{sim}/v1beta"), "C", ""),
        (
            "az",
            "azure",
            format!("http://{sim}"),
            "D",
            "api_version = \"2024-10-21\"\n",
        ),
    ] {
        s.push_str(&format!(
            "[[providers]]\nid = \"{id}\"\ndialect = \"{dialect}\"\nbase_url = \"{base}\"\n{extra}\
             [[providers.connections]]\nid = \"k\"\nkey_env = \"SIM_KEY_{key}\"\n\n"
        ));
    }
    s.push_str(&format!("[[routes]]\nname = \"r\"\n{route_extra}"));
    for p in order {
        let model = match *p {
            "oa" => "gpt-x",
            "an" => "claude-x",
            "gm" => "gemini-x",
            _ => "deploy-x",
        };
        s.push_str(&format!(
            "[[routes.targets]]\nprovider = \"{p}\"\nmodel = \"{model}\"\n"
        ));
    }
    s
}

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

fn routes_match_the_ids_agents_send(driver: &str) {
    // Claude Code's and Codex's model ids change every release: a pattern route passes the
    // client's id on (`model = "*"`), and a default route takes what no name or pattern does.
    let sim = sim(&[]);
    let mut body = config(sim.addr, &[], "");
    body = body.replace("[[routes]]\nname = \"r\"\n", "");
    body.push_str(
        "[[routes]]\nname = \"*\"\n[[routes.targets]]\nprovider = \"oa\"\nmodel = \"gpt-x\"\n\
         [[routes]]\nname = \"claude-*\"\n[[routes.targets]]\nprovider = \"an\"\nmodel = \"*\"\n",
    );
    let proxy = Proxy::start(driver, 1, "", &body);
    let msg = json!({"model": "claude-opus-4-8", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]});
    let r = proxy.post("/v1/messages", &[], &msg.to_string());
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("x-ringside-route"), Some("claude-*"));
    let r = proxy.post("/v1/chat/completions", &[], &chat("gpt-6.2-sol", false));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("x-ringside-route"), Some("*"));
    let seen = ringside::demo::client::request(sim.addr, "GET", "/_sim/requests", &[], b"", T)
        .unwrap()
        .json();
    let models: Vec<&str> = seen["requests"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|q| q["model"].as_str())
        .collect();
    assert_eq!(
        models,
        ["claude-opus-4-8", "gpt-x"],
        "the client's id passed on, the default's model used"
    );
}

#[test]
fn check_names_the_targets_translated_and_what_they_refuse() {
    let dir = std::env::temp_dir().join(format!("ringside-check-x-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let addr = "127.0.0.1:9".parse().expect("addr");
    std::fs::write(dir.join("x.toml"), config(addr, &["oa", "an", "gm"], "")).expect("write");
    let out = std::process::Command::new(binary())
        .args(["check", "--config", "x.toml"])
        .current_dir(&dir)
        .envs(proxy_env())
        .output()
        .expect("check");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("oa/gpt-x: translated for messages as chat; refuses modalities"),
        "{text}"
    );
    assert!(text.contains("an/claude-x: translated for chat as messages, responses as messages; refuses n, logprobs"), "{text}");
    assert!(
        text.contains(
            "gm/gemini-x: translated for chat as gemini, responses as gemini, messages as gemini"
        ),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn a_fallback_that_cannot_honour_the_request_is_not_tried(driver: &str) {
    // claude-3-5-haiku has no structured output (the built-in table): a request with a JSON
    // schema is not sent there when gpt-4o is at its wall; one without is.
    let sim = sim(&["key:sk-sim-a=429"]);
    let body = config(sim.addr, &["oa", "an"], "")
        .replace("\"gpt-x\"", "\"gpt-4o\"")
        .replace("\"claude-x\"", "\"claude-3-5-haiku-20241022\"");
    let proxy = Proxy::start(driver, 1, "", &body);
    let schema = r#"{"model":"r","messages":[{"role":"user","content":"hi"}],
        "response_format":{"type":"json_schema","json_schema":{"name":"a","schema":{"type":"object"}}}}"#;
    let r = proxy.post("/v1/chat/completions", &[], schema);
    assert_eq!(r.status, 429, "{}", r.text());
    let id = r.header("x-request-id").unwrap_or_default().to_string();
    assert!(
        proxy
            .decision(&id)
            .to_string()
            .contains("no_structured_output")
    );
    let r = proxy.post("/v1/chat/completions", &[], &chat("r", false));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("x-ringside-connection"), Some("an/k"));
    // The operator's [[models]] overrides the table.
    let body = body + "[[models]]\nname = \"claude-3-5-haiku*\"\nstructured_output = true\n";
    let proxy = Proxy::start(driver, 1, "", &body);
    let r = proxy.post("/v1/chat/completions", &[], schema);
    assert_eq!(r.status, 200, "{}", r.text());
}
