//! `ringside demo`: the simulator and the proxy on loopback with an embedded config, a short
//! scripted mix of requests (one faulty key among healthy ones), and what happened to each.

pub mod client;

use crate::config::load_str;
use crate::simulate::{SimOptions, parse_fault_arg};
use std::net::SocketAddr;
use std::time::Duration;

/// A loopback port that was free a moment ago.
pub fn free_port() -> std::io::Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

const DEMO_CONFIG: &str = r#"
[server]
listen = "127.0.0.1:{PROXY}"
admin_listen = "127.0.0.1:{ADMIN}"
workers = 2
access_log = false
data_dir = "{DATA}"
shutdown_grace_ms = 2000

[[providers]]
id = "sim-openai"
dialect = "openai"
base_url = "http://127.0.0.1:{SIM}/v1"
  [[providers.connections]]
  id = "key-limited"
  key_env = "DEMO_KEY_LIMITED"
  models = ["gpt-4o-mini"]
  [[providers.connections]]
  id = "key-flaky"
  key_env = "DEMO_KEY_FLAKY"
  models = ["gpt-4o-mini"]
  [[providers.connections]]
  id = "key-a"
  key_env = "DEMO_KEY_A"
  models = ["gpt-4o-mini"]
  [[providers.connections]]
  id = "key-b"
  key_env = "DEMO_KEY_B"
  models = ["gpt-4o-mini"]

[[providers]]
id = "sim-relay"
dialect = "openai"
base_url = "http://127.0.0.1:{SIM}/v1"
  [[providers.connections]]
  id = "relay-key"
  key_env = "DEMO_KEY_RELAY"
  models = ["gpt-4o-mini"]

[[providers]]
id = "sim-anthropic"
dialect = "anthropic"
base_url = "http://127.0.0.1:{SIM}/v1"
  [[providers.connections]]
  id = "claude-key"
  key_env = "DEMO_KEY_C"
  models = ["claude-sonnet-4"]

[[providers]]
id = "claude-max"
dialect = "anthropic"
auth = "oauth"
base_url = "http://127.0.0.1:{SIM}/v1"
  [[providers.connections]]
  id = "seat-at-wall"
  key_env = "DEMO_OAUTH_WALL"
  models = ["claude-opus-4"]
  low_priority_lane = true
  [[providers.connections]]
  id = "seat-expired"
  key_env = "DEMO_OAUTH_EXPIRED"
  refresh_token_env = "DEMO_OAUTH_REFRESH"
  token_url = "http://127.0.0.1:{SIM}/v1/oauth/token"
  models = ["claude-haiku-4"]

[[routes]]
name = "demo-chat"
strategy = "round_robin"
targets = [{ provider = "sim-openai", model = "gpt-4o-mini" }]

[[routes]]
name = "relay-first"
strategy = "priority"
targets = [{ provider = "sim-relay", model = "gpt-4o-mini" }, { provider = "sim-openai", model = "gpt-4o-mini" }]
"#;

fn demo_env(name: &str) -> Option<String> {
    Some(
        match name {
            "DEMO_KEY_A" => "sk-demo-a",
            "DEMO_KEY_B" => "sk-demo-b",
            "DEMO_KEY_FLAKY" => "sk-demo-flaky",
            "DEMO_KEY_C" => "sk-ant-demo-c",
            "DEMO_KEY_LIMITED" => "sk-demo-limited",
            "DEMO_KEY_RELAY" => "sk-demo-relay",
            "DEMO_OAUTH_WALL" => "sk-ant-oat01-demo-wall",
            "DEMO_OAUTH_EXPIRED" => "sk-ant-oat01-demo-expired",
            "DEMO_OAUTH_REFRESH" => "sim-refresh-demo",
            _ => return None,
        }
        .to_string(),
    )
}

pub fn run() -> Result<(), String> {
    let port = |_| free_port().map_err(|e| format!("no free port: {e}"));
    let (sim_port, proxy_port, admin_port) = (port(0)?, port(1)?, port(2)?);
    let sim = start_simulator(sim_port)?;
    let data_dir = std::env::temp_dir().join(format!("ringside-demo-{}", std::process::id()));
    let text = DEMO_CONFIG
        .replace("{PROXY}", &proxy_port.to_string())
        .replace("{ADMIN}", &admin_port.to_string())
        .replace("{SIM}", &sim_port.to_string())
        .replace("{DATA}", &data_dir.to_string_lossy());
    let cfg = load_str(&text, "embedded demo config", &demo_env).map_err(|p| {
        p.iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join("; ")
    })?;
    let server = crate::server::start(cfg, None)?;
    let proxy = SocketAddr::from(([127, 0, 0, 1], proxy_port));
    println!(
        "ringside on {proxy} with {} core(s), drivers {:?}\n",
        server.drivers.len(),
        server.drivers
    );
    let failures = run_script(proxy);
    report(SocketAddr::from(([127, 0, 0, 1], admin_port)), &sim);
    server.shutdown();
    server.join();
    sim.stop();
    let _ = std::fs::remove_dir_all(&data_dir);
    if failures > 0 {
        return Err(format!("{failures} demo request(s) failed"));
    }
    println!(
        "\ndemo finished: every request a faulty key failed moved on to a healthy key, and cooling keys were skipped on both cores."
    );
    Ok(())
}

/// The simulator with the demo's faulty keys.
fn start_simulator(port: u16) -> Result<crate::simulate::Simulator, String> {
    let sim_addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut opts = SimOptions {
        listen: sim_addr,
        events: 6,
        interval_ms: 20,
        ..Default::default()
    };
    opts.faults
        .push(parse_fault_arg("key:sk-demo-flaky=reset-before-headers")?);
    opts.faults
        .push(parse_fault_arg("key:sk-demo-limited=429;retry-after=30")?);
    opts.faults
        .push(parse_fault_arg("key:sk-demo-relay=403-quota")?);
    opts.faults
        .push(parse_fault_arg("key:sk-ant-oat01-demo-wall=usage-wall")?);
    opts.faults.push(parse_fault_arg(
        "key:sk-ant-oat01-demo-expired=expired-token",
    )?);
    let sim = crate::simulate::start(opts)?;
    println!("upstream simulator on {sim_addr}:");
    println!("  key-flaky resets every connection, key-limited answers 429 (Retry-After: 30),");
    println!("  relay-key is a relay answering quota exhaustion with 403 \"额度不足\",");
    println!(
        "  seat-at-wall is a Claude subscription at its five-hour usage wall (slow lane offered),"
    );
    println!(
        "  seat-expired is one whose OAuth access token has expired (its refresh token works)"
    );
    Ok(sim)
}

/// The scripted requests: (method, path, body).
fn script() -> Vec<(&'static str, &'static str, String)> {
    let chat = |stream: bool, model: &str| {
        format!(
            r#"{{"model":"{model}","stream":{stream},"messages":[{{"role":"user","content":"hello"}}]}}"#
        )
    };
    let anthropic = r#"{"model":"claude-sonnet-4","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hello"}]}"#;
    let claude = |model: &str| {
        format!(
            r#"{{"model":"{model}","max_tokens":64,"messages":[{{"role":"user","content":"hello"}}]}}"#
        )
    };
    let responses = r#"{"model":"gpt-4o-mini","stream":true,"input":"hello"}"#;
    vec![
        ("POST", "/v1/chat/completions", chat(false, "demo-chat")),
        ("POST", "/v1/chat/completions", chat(false, "demo-chat")),
        ("POST", "/v1/chat/completions", chat(false, "demo-chat")),
        ("POST", "/v1/chat/completions", chat(true, "demo-chat")),
        ("POST", "/v1/chat/completions", chat(false, "demo-chat")),
        ("POST", "/v1/chat/completions", chat(true, "demo-chat")),
        ("POST", "/v1/chat/completions", chat(false, "relay-first")),
        ("POST", "/v1/chat/completions", chat(true, "relay-first")),
        ("POST", "/v1/responses", responses.to_string()),
        ("POST", "/v1/messages", anthropic.to_string()),
        ("POST", "/v1/messages", claude("claude-opus-4")),
        ("POST", "/v1/messages", claude("claude-opus-4")),
        ("POST", "/v1/messages", claude("claude-haiku-4")),
        ("GET", "/v1/models", String::new()),
        ("POST", "/v1/chat/completions", chat(false, "no-such-model")),
        ("POST", "/v1/chat/completions", "{not json".to_string()),
    ]
}

/// Send the script and print a line per request; returns how many requests failed outright.
fn run_script(proxy: SocketAddr) -> usize {
    println!(
        "{:<3} {:<26} {:<16} {:>6} {:<24} {:<22} decisions (x-ringside-attempts)",
        "#", "endpoint", "model", "status", "connection", "outcome"
    );
    let mut failures = 0;
    for (i, (method, path, body)) in script().iter().enumerate() {
        let model = serde_json::from_str::<serde_json::Value>(body)
            .ok()
            .and_then(|v| v["model"].as_str().map(str::to_string))
            .unwrap_or_else(|| "-".into());
        let mut headers = vec![("content-type", "application/json")];
        if path.starts_with("/v1/messages") {
            headers.push(("anthropic-version", "2023-06-01"));
        }
        let timeout = Duration::from_secs(10);
        match client::request(proxy, method, path, &headers, body.as_bytes(), timeout) {
            Ok(r) => println!(
                "{:<3} {:<26} {:<16} {:>6} {:<24} {:<22} {}",
                i + 1,
                format!("{method} {path}"),
                model,
                r.status,
                r.header("x-ringside-connection").unwrap_or("-"),
                outcome_of(&r),
                r.header("x-ringside-attempts").unwrap_or("-"),
            ),
            Err(e) => {
                failures += 1;
                println!("{:<4} {method} {path}: request failed: {e}", i + 1);
            }
        }
    }
    failures
}

/// One answer in a few words: a stream and its events, an error code, or a JSON body's size.
fn outcome_of(r: &client::Reply) -> String {
    if r.header("content-type")
        .is_some_and(|c| c.starts_with("text/event-stream"))
    {
        format!("stream of {} events", client::count_events(&r.body))
    } else if r.status >= 400 {
        let v = r.json();
        let code = v["error"]["code"].as_str().unwrap_or("?").to_string();
        format!("error {code}")
    } else {
        format!("{} bytes of JSON", r.body.len())
    }
}

/// What Ringside learned about each connection, and what the upstream saw per key.
fn report(admin: SocketAddr, sim: &crate::simulate::Simulator) {
    println!("\nwhat Ringside learned (GET /admin/connections):");
    let timeout = Duration::from_secs(5);
    if let Ok(r) = client::request(admin, "GET", "/admin/connections", &[], b"", timeout) {
        for c in r.json()["connections"].as_array().into_iter().flatten() {
            println!(
                "  {:<14} {:<12} {:<9} cooling {:>6} ms  last error {}",
                c["provider"].as_str().unwrap_or("?"),
                c["connection"].as_str().unwrap_or("?"),
                c["state"].as_str().unwrap_or("?"),
                c["cooling_ms"],
                c["last_error"]["reason"].as_str().unwrap_or("-"),
            );
            let lane = &c["usage_wall"]["lane"];
            if !lane.is_null() {
                println!(
                    "  {:<27} usage-wall lane {}, {} served on it",
                    "",
                    lane["state"].as_str().unwrap_or("?"),
                    lane["served"]
                );
            }
            let oauth = &c["oauth"];
            if !oauth.is_null() {
                println!(
                    "  {:<27} OAuth token refreshed {} time(s), expires in {} s",
                    "", oauth["refreshes"], oauth["expires_in_s"]
                );
            }
        }
    }
    println!("\nwhat the upstream saw, per key:");
    let stats = sim.state.stats.to_json();
    if let Some(keys) = stats["keys"].as_object() {
        for (k, v) in keys {
            println!(
                "  {k:<16} attempts {:>3}  peak concurrency {}",
                v["attempts"], v["peak_concurrency"]
            );
        }
    }
}
