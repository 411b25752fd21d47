//! `ringside drill` end to end: the real binary rehearses small configs against its built-in
//! simulator. A healthy config holds every budget (exit 0) and its JSON agrees with the
//! simulator's counts; a config that multiplies attempts under an outage fails on amplification
//! (exit 1, named), and one whose fallback lacks tools fails on the contract too; the HTML report opens in headless Chromium with every scenario.

mod common;
use common::*;
use serde_json::Value;
use std::process::Command;

/// The start of every config here: a server and the `openai` provider, its keys to follow.
const OPENAI: &str = "[server]\nlisten = \"0.0.0.0:8080\"\n[[providers]]\nid = \"openai\"\ndialect = \"openai\"\nbase_url = \"https://api.openai.com/v1\"\n";

fn config(keys: usize, provider_extra: &str, extra: &str) -> String {
    let mut s = String::from(OPENAI);
    s.push_str(provider_extra);
    for i in 0..keys {
        s.push_str(&format!(
            "  [[providers.connections]]\n  id = \"key-{i}\"\n  key_env = \"OPENAI_KEY_{i}\"\n  models = [\"gpt-4o\"]\n  max_concurrent = 8\n"
        ));
    }
    s.push_str(
        "[[routes]]\nname = \"smart\"\ntargets = [{ provider = \"openai\", model = \"gpt-4o\" }]\n",
    );
    s + extra
}

/// Run the drill; its exit code and its JSON document.
fn drill(cfg: &str, scenarios: &str, extra: &[&str]) -> (Option<i32>, Value, tempdir::Dir) {
    let dir = tempdir::new();
    let path = dir.0.join("ringside.toml");
    std::fs::write(&path, cfg).expect("write config");
    let json = dir.0.join("drill.json");
    // Four clients unless the test says how many.
    let clients: &[&str] = if extra.contains(&"--concurrency") {
        &[]
    } else {
        &["--concurrency", "4"]
    };
    let out = Command::new(binary())
        .args(["drill", "--config"])
        .arg(&path)
        .args(["--scenarios", scenarios, "--phase", "1"])
        .args(clients)
        .arg("--json")
        .arg(&json)
        .args(extra)
        // (Relative paths in `extra`, a report's, land in the test's own directory.)
        .current_dir(&dir.0)
        .env_remove("RINGSIDE_CONFIG")
        .output()
        .expect("run the drill");
    let doc = std::fs::read_to_string(&json)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_else(|| {
            panic!(
                "no JSON: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
    (out.status.code(), doc, dir)
}

#[test]
fn a_healthy_config_holds_every_budget() {
    let (code, doc, dir) = drill(
        &config(2, "", ""),
        "key-429-retry-after,quota-wall-403",
        &["--report", "report.html"],
    );
    assert_eq!(code, Some(0), "{doc:#}");
    assert_eq!(doc["held"], true);
    let report = std::fs::read_to_string(dir.0.join("report.html")).unwrap_or_default();
    assert!(report.contains("every budget held"), "{report}");
    let scenarios = doc["scenarios"].as_array().cloned().unwrap_or_default();
    assert_eq!(scenarios.len(), 2);
    for s in &scenarios {
        let f = &s["figures"];
        let (requests, upstream) = (
            f["requests"].as_f64().unwrap_or(0.0),
            f["upstream_attempts"].as_f64().unwrap_or(0.0),
        );
        assert!(requests > 10.0, "{f}");
        // The simulator's own count is the numerator: never fewer attempts than requests
        // served, and the ratio is what the document says.
        assert!(upstream >= f["succeeded"].as_f64().unwrap_or(0.0), "{f}");
        let amp = f["amplification"].as_f64().unwrap_or(0.0);
        assert!((amp - upstream / requests).abs() < 1e-9, "{f}");
        assert!(f["client_sends"].as_f64().unwrap_or(0.0) >= requests);
        assert_eq!(f["after_deadline"], 0);
        assert_eq!(s["held"], true, "{s}");
        // What it spent: the simulator reports 17 tokens per answer (9 + 8).
        let tokens = f["spent"]["tokens"].as_f64().unwrap_or(0.0);
        assert!(
            tokens >= 17.0 * f["succeeded"].as_f64().unwrap_or(0.0) * 0.5,
            "{f}"
        );
        assert!(f["spent"]["usd"].as_f64().is_some(), "{f}");
    }
    // What an operator would have seen: the limited key started cooling.
    let signals = scenarios[0]["signals"].to_string();
    assert!(
        signals.contains("key-0") && signals.contains("cooling"),
        "{signals}"
    );
    // And what the logs said: the operational message, naming the key and why.
    let logged = scenarios[0]["logged"].to_string();
    assert!(
        logged.contains("connection cooling") && logged.contains("openai/key-0 (rate_limited)"),
        "{logged}"
    );
    assert!(report.contains("What the logs said"), "{report}");
    assert!(report.contains("connections not active"), "{report}");
    // The state timeline saw the key cooling during the fault.
    let states = scenarios[0]["figures"]["states"].to_string();
    assert!(states.contains("\"cooling\":1"), "{states}");
    // Every fail-fast answer is held against the next success; none here (the other key
    // absorbed the limit), and the check is reported.
    assert_eq!(
        scenarios[0]["figures"]["retry_after"]["overstatement_p90_s"],
        0.0
    );
    drop(dir);
}

/// A drill file's own scenario: the first key answers 500 (a key scope, so that the breaker's
/// count stays far from opening within the short phase).
const KEY_500: &str = "[[scenarios]]\nname = \"key-500\"\nfault = \"500\"\nscope = \"key\"\n[scenarios.budgets]\nmax_amplification = 1.2\n";

#[test]
fn attempts_multiplied_by_a_failing_key_fail_on_amplification() {
    // Keys that never cool: every request tries the failing first key again before the next.
    let cfg = config(
        3,
        "  [providers.cooldown]\n  base_ms = 0\n  [providers.breaker]\n  open_at = 1000\n",
        "[upstream]\nmax_attempts = 10\n",
    );
    let dir = tempdir::new();
    let file = dir.0.join("drill.toml");
    std::fs::write(&file, KEY_500).expect("drill file");
    let file = file.to_string_lossy().into_owned();
    let (code, doc, _dir) = drill(&cfg, "key-500", &["--drill", &file]);
    assert_eq!(code, Some(1), "{doc:#}");
    assert_eq!(doc["held"], false);
    let s = &doc["scenarios"][0];
    let amp = s["checks"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["figure"] == "amplification"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(amp["held"], false, "{s:#}");
    assert!(s["figures"]["amplification"].as_f64().unwrap_or(0.0) > 1.2);
    // The same config with keys that cool holds: the failing key is left alone.
    let (code, doc, _dir) = drill(&config(3, "", ""), "key-500", &["--drill", &file]);
    assert_eq!(code, Some(0), "{doc:#}");
}

/// Three keys that never cool and a breaker that never opens, then a fallback to another
/// provider's small model, which the drill file says has no tools.
fn with_fallback(fallback_caps: &str) -> String {
    let cfg = config(
        3,
        "  [providers.cooldown]\n  base_ms = 0\n  [providers.breaker]\n  open_at = 1000\n",
        "[upstream]\nmax_attempts = 10\n[[providers]]\nid = \"backup\"\ndialect = \"openai\"\nbase_url = \"https://backup.example/v1\"\n  [[providers.connections]]\n  id = \"b-0\"\n  key_env = \"BACKUP_KEY\"\n  models = [\"small\"]\n",
    );
    cfg.replace(
        "targets = [{ provider = \"openai\", model = \"gpt-4o\" }]",
        &format!(
            "targets = [{{ provider = \"openai\", model = \"gpt-4o\" }}, {{ provider = \"backup\", model = \"small\"{fallback_caps} }}]"
        ),
    )
}

fn check<'a>(scenario: &'a Value, figure: &str) -> &'a Value {
    scenario["checks"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["figure"] == figure))
        .unwrap_or_else(|| panic!("no {figure} check: {scenario:#}"))
}

#[test]
fn retries_and_a_fallback_without_tools_fail_on_amplification_and_the_contract() {
    let dir = tempdir::new();
    let file = dir.0.join("drill.toml");
    std::fs::write(
        &file,
        "[[models]]\nprovider = \"backup\"\nmodel = \"small\"\ntools = false\n",
    )
    .expect("drill file");
    let file = file.to_string_lossy().into_owned();
    let (code, doc, _d) = drill(&with_fallback(""), "provider-outage", &["--drill", &file]);
    assert_eq!(code, Some(1), "{doc:#}");
    let s = &doc["scenarios"][0];
    assert_eq!(check(s, "amplification")["held"], false, "{s:#}");
    let contract = check(s, "contract violations");
    assert_eq!(contract["held"], false, "{s:#}");
    assert!(
        contract["value"]
            .as_str()
            .is_some_and(|v| v.contains("tools at backup/small")),
        "{contract}"
    );
    let violations = s["figures"]["contract_violations"].to_string();
    assert!(violations.contains("\"need\":\"tools\""), "{violations}");
    // Said in the config, the fallback is kept from requests that need tools: the contract
    // holds (the attempts are still multiplied).
    let (code, doc, _d) = drill(
        &with_fallback(", tools = false"),
        "provider-outage",
        &["--drill", &file],
    );
    assert_eq!(code, Some(1), "{doc:#}");
    let s = &doc["scenarios"][0];
    assert_eq!(check(s, "contract violations")["held"], true, "{s:#}");
    assert_eq!(check(s, "amplification")["held"], false, "{s:#}");
}

#[test]
fn the_report_opens_in_a_browser_with_every_scenario() {
    common::apt::ensure("chromium", "chromium");
    let python = common::venv::python("watch-venv", "tests/watch/requirements.txt")
        .unwrap_or_else(|e| panic!("python environment: {e}"));
    let dir = tempdir::new();
    let path = dir.0.join("ringside.toml");
    std::fs::write(&path, config(2, "", "")).expect("write config");
    let report = dir.0.join("drill.html");
    let status = Command::new(binary())
        .args(["drill", "--config"])
        .arg(&path)
        .args([
            "--scenarios",
            "key-429-no-hint,model-429",
            "--phase",
            "1",
            "--concurrency",
            "2",
            "--report",
        ])
        .arg(&report)
        .output()
        .expect("run the drill");
    assert!(status.status.code().is_some());
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/drill/check_report.py");
    let out = Command::new(python)
        .arg(script)
        .arg(&report)
        .output()
        .expect("browser");
    let seen: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(
        seen["names"],
        serde_json::json!(["key-429-no-hint", "model-429"]),
        "{seen}"
    );
    assert!(seen["bars"].as_u64().unwrap_or(0) > 0, "{seen}");
    assert_eq!(seen["errors"], serde_json::json!([]));
}

/// `--against`: the client side only, against a Ringside already running on its own simulator
/// (staging); the key-scope fault finds the key through its `key_env`.
#[test]
fn against_a_running_ringside_the_drill_drives_its_simulator() {
    let sim = start_sim(ringside::simulate::SimOptions::default());
    let proxy = Proxy::start("uring", 2, "", &priority_keys(sim.addr, &["a", "b"], ""));
    let config = proxy.dir.0.join("ringside.toml");
    let json = proxy.dir.0.join("drill.json");
    let url = |a: std::net::SocketAddr| format!("http://{a}");
    let out = Command::new(binary())
        .args(["drill", "--config"])
        .arg(&config)
        .args(["--against", &url(proxy.addr), "--admin", &url(proxy.admin)])
        .args([
            "--simulator",
            &url(sim.addr),
            "--scenarios",
            "key-429-retry-after",
        ])
        .args(["--phase", "1", "--concurrency", "2", "--json"])
        .arg(&json)
        .envs(proxy_env())
        .env("RINGSIDE_ADMIN_TOKEN", ADMIN_TOKEN)
        .output()
        .expect("run the drill");
    let doc: Value = std::fs::read_to_string(&json)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_else(|| panic!("{}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(out.status.code(), Some(0), "{doc:#}");
    // The fault reached the running Ringside's first key, which it then left alone.
    let signals = doc["scenarios"][0]["signals"].to_string();
    assert!(
        signals.contains("connection=\\\"a\\\"") && signals.contains("cooling"),
        "{signals}"
    );
    assert!(attempts_for(&sim, "sk-sim-a") >= 1);
}

#[test]
fn an_account_wide_limit_hits_the_accounts_keys_and_the_other_account_serves() {
    let mut cfg = String::from(OPENAI);
    cfg.push_str(
        "  [[providers.accounts]]\n  id = \"org-a\"\n  [[providers.accounts]]\n  id = \"org-b\"\n",
    );
    for (i, org) in ["org-a", "org-a", "org-b"].iter().enumerate() {
        cfg.push_str(&format!(
            "  [[providers.connections]]\n  id = \"key-{i}\"\n  key_env = \"K{i}\"\n  account = \"{org}\"\n  models = [\"gpt-4o\"]\n"
        ));
    }
    cfg.push_str(
        "[[routes]]\nname = \"smart\"\ntargets = [{ provider = \"openai\", model = \"gpt-4o\" }]\n",
    );
    let (code, doc, _d) = drill(&cfg, "account-429", &[]);
    assert_eq!(code, Some(0), "{doc:#}");
    let s = &doc["scenarios"][0];
    let signals = s["signals"].to_string();
    for hit in ["key-0", "key-1"] {
        assert!(
            signals.contains(&format!("connection=\\\"{hit}\\\",to=\\\"cooling\\\"")),
            "{hit}: {signals}"
        );
    }
    assert!(
        !signals.contains("key-2"),
        "the other account is untouched: {signals}"
    );
    assert!(
        s["figures"]["success_ratio"].as_f64().unwrap_or(0.0) >= 0.95,
        "{s:#}"
    );
}

/// The example config's shape: both keys serve two models, and the route falls back to the
/// second model on key-1. A 429 for the first model on every key locks that model on each key
/// (a plain 429 is one model's until a second model is limited too): the fallback on the same
/// key keeps serving, no key cools, and attempts stay within budget.
#[test]
fn a_models_429_leaves_the_keys_other_model_serving() {
    let mut cfg = String::from(OPENAI);
    for i in 0..2 {
        cfg.push_str(&format!(
            "  [[providers.connections]]\n  id = \"key-{i}\"\n  key_env = \"K{i}\"\n  models = [\"gpt-4o\", \"gpt-4o-mini\"]\n"
        ));
    }
    cfg.push_str(
        "[[routes]]\nname = \"smart\"\ntargets = [{ provider = \"openai\", model = \"gpt-4o\" }, { provider = \"openai\", model = \"gpt-4o-mini\", connection = \"key-1\" }]\n",
    );
    let (code, doc, _d) = drill(&cfg, "model-429", &[]);
    assert_eq!(code, Some(0), "{doc:#}");
    let s = &doc["scenarios"][0];
    let signals = s["signals"].to_string();
    for key in ["key-0", "key-1"] {
        assert!(
            signals.contains(&format!(
                "ringside_model_lockouts_total{{provider=\\\"openai\\\",connection=\\\"{key}\\\"}}"
            )),
            "{key}: {signals}"
        );
    }
    assert!(!signals.contains("cooling"), "no key cooled: {signals}");
    let logged = s["logged"].to_string();
    assert!(
        logged.contains("model locked out") && !logged.contains("connection cooling"),
        "{logged}"
    );
    let states = s["figures"]["states"].to_string();
    assert!(states.contains("\"model_locked\":2"), "{states}");
    assert!(
        s["figures"]["success_ratio"].as_f64().unwrap_or(0.0) >= 0.99,
        "{s:#}"
    );
}

#[test]
fn queues_are_measured_against_their_depth_cap() {
    // Two slots per key, eight clients: requests queue; key-0's queue may hold three.
    let cfg = config(2, "", "").replace(
        "  max_concurrent = 8\n",
        "  max_concurrent = 2\n  max_queue_depth = 3\n",
    );
    let (_code, doc, _d) = drill(&cfg, "key-429-retry-after", &["--concurrency", "8"]);
    let s = &doc["scenarios"][0];
    let queues = s["figures"]["queues"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(!queues.is_empty(), "nothing queued: {s:#}");
    for q in &queues {
        assert_eq!(q["depth_cap"], 3, "{q}");
        assert!(q["peak_queued"].as_u64().unwrap_or(99) <= 3, "{q}");
        assert!(q["waited"].as_u64().unwrap_or(0) > 0, "{q}");
    }
    assert_eq!(
        check(s, "queues over their depth cap")["held"],
        true,
        "{s:#}"
    );
}

#[test]
fn clients_that_hang_up_while_waiting_are_not_sent_upstream() {
    // One key: while it cools, requests wait for it, and their clients hang up after 500 ms.
    let (_code, doc, _d) = drill(&config(1, "", ""), "clients-cancel-mid-queue", &[]);
    let s = &doc["scenarios"][0];
    assert!(s["figures"]["cancelled"].as_u64().unwrap_or(0) > 0, "{s:#}");
    let c = check(s, "sent upstream after the client hung up");
    assert_eq!(c["held"], true, "{s:#}");
    // Ringside saw them go: answered 499 in its own records.
    assert!(
        s["signals"].to_string().contains("status=\\\"499\\\""),
        "{}",
        s["signals"]
    );
}

/// A route across APIs (Claude first, GPT behind it): with every Anthropic key at its usage
/// wall, the Messages clients are answered by the OpenAI provider, translated; a config without
/// such a route refuses the scenario by name.
#[test]
fn a_provider_at_its_wall_falls_back_to_another_api() {
    let cfg = config(
        1,
        "",
        "[[providers]]\nid = \"anthropic\"\ndialect = \"anthropic\"\nbase_url = \"https://api.anthropic.com/v1\"\n  [[providers.connections]]\n  id = \"claude-a\"\n  key_env = \"ANTHROPIC_KEY_A\"\n  models = [\"claude-sonnet-4-5\"]\n  [[providers.connections]]\n  id = \"claude-b\"\n  key_env = \"ANTHROPIC_KEY_B\"\n  models = [\"claude-sonnet-4-5\"]\n[[routes]]\nname = \"claude\"\ntargets = [{ provider = \"anthropic\", model = \"claude-sonnet-4-5\" }, { provider = \"openai\", model = \"gpt-4o\" }]\n",
    );
    let (code, doc, _d) = drill(&cfg, "provider-wall-cross-dialect", &[]);
    let s = &doc["scenarios"][0];
    assert_eq!(code, Some(0), "{s:#}");
    assert_eq!(check(s, "success")["held"], true, "{s:#}");
    assert_eq!(check(s, "amplification")["held"], true, "{s:#}");
    // Both Anthropic keys were at the wall: requests of the fault's first moments went from
    // them to the OpenAI provider (translated), as their decision records say.
    let samples = s["samples"].as_array().cloned().unwrap_or_default();
    assert!(
        samples.iter().any(|r| {
            let attempts = r["attempts"].as_array().cloned().unwrap_or_default();
            attempts.len() > 1 && attempts.last().is_some_and(|a| a["provider"] == "openai")
        }),
        "{samples:#?}"
    );

    let dir = tempdir::new();
    let path = dir.0.join("ringside.toml");
    std::fs::write(&path, config(1, "", "")).expect("write config");
    let out = Command::new(binary())
        .args(["drill", "--config"])
        .arg(&path)
        .args(["--scenarios", "provider-wall-cross-dialect", "--phase", "1"])
        .env_remove("RINGSIDE_CONFIG")
        .output()
        .expect("run the drill");
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("no route of the config has targets of more than one API"),
        "{said}"
    );
}
