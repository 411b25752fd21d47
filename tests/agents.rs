//! The coding agents people put behind such a proxy, run non-interactively against Ringside and
//! the strict simulator: Claude Code (`claude -p`) and Codex (`codex exec`), pinned from npm
//! (`tests/agents`). Each asks for a model of its own provider whose every key is at a wall
//! and is answered by the other provider, translated; then the fallback's stream is cut after
//! its first events, and the agent meets the failure in its own API: Claude Code asks again
//! without a stream and is answered, Codex reconnects and shows Ringside's message. Each case
//! has a proxy and a simulator of its own (a cut cools its key; a wall locks its model).
//! Then each meets a provider whose every key fails, and its own retries are measured: client
//! requests × Ringside's upstream attempts.
//! `RINGSIDE_SKIP_SDK_TESTS=1` leaves these out on a machine without node or the registries.

mod common;
use common::*;
use ringside::simulate::{SimOptions, parse_fault_arg};
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The installed agents' directory (`node_modules/.bin/claude`, `.../codex`), once per run.
fn agents() -> Option<PathBuf> {
    if std::env::var_os("RINGSIDE_SKIP_SDK_TESTS").is_some_and(|v| v != "0") {
        eprintln!("RINGSIDE_SKIP_SDK_TESTS is set: the agent checks are left out");
        return None;
    }
    static DIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let dir = DIR.get_or_init(|| common::node::install("agents-node", "tests/agents"));
    match dir {
        Ok(d) => Some(d.join("node_modules/.bin")),
        Err(e) => panic!(
            "{e}\n(set RINGSIDE_SKIP_SDK_TESTS=1 on a machine without node or the registries)"
        ),
    }
}

/// An Anthropic and an OpenAI provider on the simulator, one key each, and the route `name`:
/// `first` (at its wall) then `then`; any other model goes to the OpenAI provider.
fn config(sim: std::net::SocketAddr, name: &str, first: &str, then: &str) -> String {
    let mut c = "[resilience]\nmax_wait_ms = 0\n".to_string();
    for (id, dialect, key) in [("ant", "anthropic", "A"), ("oai", "openai", "B")] {
        c += &format!(
            "[[providers]]\nid = \"{id}\"\ndialect = \"{dialect}\"\nbase_url = \"http://{sim}/v1\"\n  [[providers.connections]]\n  id = \"k\"\n  key_env = \"SIM_KEY_{key}\"\n"
        );
    }
    let routes: [(&str, &[&str]); 2] = [(name, &[first, then]), ("*", &["oai/gpt-ok"])];
    for (route, targets) in routes {
        c += &format!("[[routes]]\nname = \"{route}\"\n");
        for t in targets {
            let (p, m) = t.split_once('/').unwrap_or_default();
            c += &format!("[[routes.targets]]\nprovider = \"{p}\"\nmodel = \"{m}\"\n");
        }
    }
    c
}

/// A proxy on `driver` and its simulator with `faults`.
fn stage(
    driver: &str,
    faults: &[&str],
    cfg: impl Fn(std::net::SocketAddr) -> String,
) -> (Proxy, ringside::simulate::Simulator) {
    let sim = start_sim(SimOptions {
        faults: faults
            .iter()
            .map(|f| parse_fault_arg(f).expect("fault"))
            .collect(),
        strict: true,
        ..SimOptions::default()
    });
    let proxy = Proxy::start(driver, 1, "", &cfg(sim.addr));
    (proxy, sim)
}

fn said(out: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The decision records' (target, outcome) pairs, oldest first.
fn outcomes(proxy: &Proxy) -> Vec<(String, String)> {
    let (_, d) = proxy.admin("GET", "/admin/decisions?limit=100");
    let mut all: Vec<(String, String)> = d["decisions"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|r| {
            let s = |k: &str| r[k].as_str().unwrap_or("").to_string();
            (s("target"), s("outcome"))
        })
        .collect();
    all.reverse();
    all
}

fn claude(bin: &std::path::Path, proxy: &Proxy, model: &str) -> Output {
    claude_with(bin, proxy, model, &[])
}

fn claude_with(bin: &std::path::Path, proxy: &Proxy, model: &str, env: &[(&str, &str)]) -> Output {
    let home = tempdir::new();
    // (Bounded: an agent that waits for ever fails the test instead of hanging the run.)
    Command::new("timeout")
        .arg("180")
        .arg(bin.join("claude"))
        .args(["-p", "--model", model, "Say hello"])
        .current_dir(&home.0)
        .env("HOME", &home.0)
        .env("ANTHROPIC_BASE_URL", format!("http://{}", proxy.addr))
        .env("ANTHROPIC_API_KEY", "sk-client")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env_remove("ANTHROPIC_AUTH_TOKEN")
        .envs(env.iter().copied())
        .output()
        .expect("run claude")
}

fn codex(bin: &std::path::Path, proxy: &Proxy, model: &str) -> Output {
    codex_with(bin, proxy, model, "")
}

/// Codex with `provider` added to its provider's settings (its retry counts).
fn codex_with(bin: &std::path::Path, proxy: &Proxy, model: &str, provider: &str) -> Output {
    let home = tempdir::new();
    let codex_home = home.0.join("codex");
    std::fs::create_dir_all(&codex_home).expect("codex home");
    std::fs::write(
        codex_home.join("config.toml"),
        format!(
            "model = \"{model}\"\nmodel_provider = \"ringside\"\n[model_providers.ringside]\nname = \"Ringside\"\nbase_url = \"http://{}/v1\"\nenv_key = \"RINGSIDE_CLIENT_KEY\"\nwire_api = \"responses\"\n{provider}",
            proxy.addr
        ),
    )
    .expect("codex config");
    Command::new("timeout")
        .arg("180")
        .arg(bin.join("codex"))
        .args(["exec", "--skip-git-repo-check", "Say hello"])
        .current_dir(&home.0)
        .env("HOME", &home.0)
        .env("CODEX_HOME", &codex_home)
        .env("RINGSIDE_CLIENT_KEY", "sk-client")
        .env_remove("OPENAI_API_KEY")
        .output()
        .expect("run codex")
}

const ANSWER: &str = "Hello from the Ringside upstream simulator";

/// The agent ended well and printed the simulator's answer.
fn assert_answered(out: &Output) {
    assert!(
        out.status.success() && said(out).contains(ANSWER),
        "{}",
        said(out)
    );
}

fn claude_code_across_providers(driver: &str) {
    let Some(bin) = agents() else { return };
    // Claude at its wall: GPT answers, in Anthropic's API.
    let wall = "model:claude-wall=429;retry-after=60";
    let (proxy, _sim) = stage(driver, &[wall], |s| {
        config(s, "claude-wall", "ant/claude-wall", "oai/gpt-ok")
    });
    let out = claude(&bin, &proxy, "claude-wall");
    assert_answered(&out);
    let first = outcomes(&proxy).into_iter().next();
    assert_eq!(first, Some(("oai/gpt-ok".into(), "ok".into())));
    // The fallback's stream cut after five events: Claude Code meets Anthropic's error event,
    // asks again (without a stream, once the key's short cooldown is over) and is answered.
    let cut = "model:gpt-cut=reset-mid-stream;after=5";
    let (proxy, _sim) = stage(driver, &[wall, cut], |s| {
        config(s, "claude-wall", "ant/claude-wall", "oai/gpt-cut")
    });
    let out = claude(&bin, &proxy, "claude-wall");
    assert_answered(&out);
    let seen = outcomes(&proxy);
    assert_eq!(
        seen.first(),
        Some(&("oai/gpt-cut".into(), "failed_after_commit".into())),
        "{seen:?}"
    );
    assert_eq!(
        seen.last(),
        Some(&("oai/gpt-cut".into(), "ok".into())),
        "{seen:?}"
    );
}

fn codex_across_providers(driver: &str) {
    let Some(bin) = agents() else { return };
    // GPT at its wall: Claude answers, in the Responses API.
    let wall = "model:gpt-wall=429;retry-after=60";
    let (proxy, _sim) = stage(driver, &[wall], |s| {
        config(s, "gpt-wall", "oai/gpt-wall", "ant/claude-ok")
    });
    let out = codex(&bin, &proxy, "gpt-wall");
    assert_answered(&out);
    assert_eq!(
        outcomes(&proxy).first(),
        Some(&("ant/claude-ok".into(), "ok".into()))
    );
    // The fallback's stream cut after five events: Codex reads `response.failed`, reconnects
    // (each time the stream is cut again, or no target is ready yet) and shows the message.
    let cut = "model:claude-cut=reset-mid-stream;after=5";
    let (proxy, _sim) = stage(driver, &[wall, cut], |s| {
        config(s, "gpt-wall", "oai/gpt-wall", "ant/claude-cut")
    });
    let out = codex(&bin, &proxy, "gpt-wall");
    let text = said(&out);
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("the upstream stream failed after it had started"),
        "{text}"
    );
    let cuts = outcomes(&proxy)
        .iter()
        .filter(|(t, o)| t == "ant/claude-cut" && o == "failed_after_commit")
        .count();
    assert!(cuts >= 2, "Codex reconnected after the cut: {cuts}");
}

/// Every key of `model`'s provider answers 500 and never cools, so that every attempt reaches
/// the simulator: three keys, three attempts a request.
fn failing(sim: std::net::SocketAddr, dialect: &str, model: &str) -> String {
    let mut c = format!(
        "[upstream]\nmax_attempts = 3\n[resilience]\nmax_wait_ms = 0\n[[providers]]\nid = \"p\"\ndialect = \"{dialect}\"\nbase_url = \"http://{sim}/v1\"\n  [providers.breaker]\n  open_at = 1000\n  [providers.cooldown]\n  base_ms = 0\n"
    );
    for k in ["A", "B", "C"] {
        c += &format!("  [[providers.connections]]\n  id = \"{k}\"\n  key_env = \"SIM_KEY_{k}\"\n");
    }
    c + &format!(
        "[[routes]]\nname = \"*\"\n[[routes.targets]]\nprovider = \"p\"\nmodel = \"{model}\"\n"
    )
}

/// The agent's requests that Ringside saw for `model` (its decision records), the upstream
/// attempts they cost, and how many were known as the same request again.
fn amplification(proxy: &Proxy, model: &str) -> (usize, usize, usize) {
    let (_, d) = proxy.admin("GET", "/admin/decisions?limit=100");
    let all = d["decisions"].as_array().cloned().unwrap_or_default();
    let mine: Vec<_> = all.iter().filter(|r| r["model"] == model).collect();
    let attempts = mine
        .iter()
        .map(|r| r["attempts"].as_array().map_or(0, Vec::len))
        .sum();
    let repeats = mine
        .iter()
        .filter(|r| r["same_request_retry"] == true)
        .count();
    (mine.len(), attempts, repeats)
}

/// The real agents retry a failed request their own way (Claude Code sends
/// `x-stainless-retry-count: 0` on every try, Codex no count at all): each repeat is known as
/// the same request and spends what is left of the first one's budget, one attempt, instead of
/// three more. Measured as the issue names it: client requests × Ringside's upstream attempts.
fn agents_repeats_spend_one_budget(driver: &str) {
    let Some(bin) = agents() else { return };
    let down = "model:model-down=500";
    // Claude Code, up to 3 retries of its own (it reads `x-should-retry: false` and stops).
    let (proxy, sim) = stage(driver, &[down], |s| failing(s, "anthropic", "model-down"));
    let retries = [("CLAUDE_CODE_MAX_RETRIES", "3")];
    let out = claude_with(&bin, &proxy, "model-down", &retries);
    assert!(!out.status.success(), "{}", said(&out));
    let claude_code = amplification(&proxy, "model-down");
    // Codex, 3 request retries within each of 3 stream reconnects (16 tries of one request;
    // it writes a map of its body in another order on each reconnect).
    let (proxy, codex_sim) = stage(driver, &[down], |s| failing(s, "openai", "model-down"));
    let retries = "request_max_retries = 3\nstream_max_retries = 3\n";
    let out = codex_with(&bin, &proxy, "model-down", retries);
    assert!(!out.status.success(), "{}", said(&out));
    let codex = amplification(&proxy, "model-down");
    for (agent, (requests, attempts, repeats), sim) in [
        ("claude code", claude_code, &sim),
        ("codex", codex, &codex_sim),
    ] {
        eprintln!(
            "{agent}: {requests} client requests, {attempts} upstream attempts ({:.2} a request)",
            attempts as f64 / requests.max(1) as f64
        );
        assert!(requests >= 1, "{agent} reached Ringside");
        assert_eq!(
            repeats,
            requests - 1,
            "{agent}: every try after the first is known"
        );
        assert_eq!(
            attempts,
            3 + repeats,
            "{agent}: one budget, then one attempt a try"
        );
        let reached = sim_stats(sim)["total"].as_u64().unwrap_or(0);
        assert_eq!(reached, attempts as u64, "{agent}: the simulator's count");
    }
    assert!(codex.0 >= 8, "Codex retried its own way: {codex:?}");
}

#[test]
fn agents_repeats_spend_one_budget_on_io_uring() {
    agents_repeats_spend_one_budget("uring");
}

#[test]
fn agents_repeats_spend_one_budget_on_epoll() {
    agents_repeats_spend_one_budget("epoll");
}

#[test]
fn claude_code_across_providers_on_io_uring() {
    claude_code_across_providers("uring");
}

#[test]
fn claude_code_across_providers_on_epoll() {
    claude_code_across_providers("epoll");
}

#[test]
fn codex_across_providers_on_io_uring() {
    codex_across_providers("uring");
}

#[test]
fn codex_across_providers_on_epoll() {
    codex_across_providers("epoll");
}
