//! Routes across providers end to end, on io_uring and on epoll: pattern and default routes
//! for the ids agents send, eligibility by what a model supports before a fallback to another
//! API, and what `check` says of a route across APIs. (The translations themselves:
//! `tests/translation.rs`.)

mod common;
use common::cross::{config, sim};
use common::*;
use serde_json::json;

both_drivers!(
    routes_match_the_ids_agents_send,
    a_fallback_that_cannot_honour_the_request_is_not_tried,
);

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

#[test]
fn check_names_the_targets_translated_and_what_they_refuse() {
    let dir = std::env::temp_dir().join(format!("ringside-check-x-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let body = config(
        "127.0.0.1:9".parse().expect("addr"),
        &["oa", "an", "gm"],
        "",
    );
    std::fs::write(dir.join("x.toml"), body).expect("write");
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
