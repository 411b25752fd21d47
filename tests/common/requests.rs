//! What the tests send and count: providers and routes for a config, chat bodies and raw
//! requests, concurrent posts, the simulator's counts, a decision trail's attempts; the binary's
//! subcommands run to their end.

use ringside::demo::client::{self, Reply};
use ringside::simulate::Simulator;
use std::net::SocketAddr;
use std::time::Duration;

/// Providers for the simulator: one OpenAI provider with keys A, B (and optionally more).
pub fn openai_provider(id: &str, sim: SocketAddr, keys: &[(&str, &str)], models: &str) -> String {
    let mut s = format!(
        "[[providers]]\nid = \"{id}\"\ndialect = \"openai\"\nbase_url = \"http://{sim}/v1\"\n"
    );
    for (cid, env) in keys {
        s.push_str(&format!("  [[providers.connections]]\n  id = \"{cid}\"\n  key_env = \"{env}\"\n  models = [{models}]\n"));
    }
    s
}

pub fn chat(model: &str, stream: bool) -> String {
    format!(
        r#"{{"model":"{model}","stream":{stream},"messages":[{{"role":"user","content":"hi"}}]}}"#
    )
}

/// A keep-alive chat request as raw bytes, for tests that drive the socket by hand.
pub fn raw_chat(model: &str, stream: bool) -> String {
    raw_request(&chat(model, stream), None)
}

/// [`raw_chat`] with an `x-request-id`, to find its decision record afterwards.
pub fn raw_chat_with_id(model: &str, stream: bool, id: &str) -> String {
    raw_request(&chat(model, stream), Some(id))
}

/// A keep-alive chat completions request carrying `body`, as raw bytes.
pub fn raw_request(body: &str, id: Option<&str>) -> String {
    let id = id
        .map(|id| format!("x-request-id: {id}\r\n"))
        .unwrap_or_default();
    format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n{id}content-length: {}\r\n\r\n{body}",
        body.len()
    )
}

pub fn sim_stats(sim: &Simulator) -> serde_json::Value {
    sim.state.stats.to_json()
}

pub fn attempts_for(sim: &Simulator, key: &str) -> u64 {
    sim_stats(sim)["keys"][key]["attempts"]
        .as_u64()
        .unwrap_or(0)
}

/// The attempt count at the head of `x-ringside-attempts` (`2; p/a 429 rate_limited next; ...`).
pub fn attempt_count(r: &ringside::demo::client::Reply) -> usize {
    r.header("x-ringside-attempts")
        .and_then(|v| v.split(';').next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// Keys A, B, C in priority order (A first), on one OpenAI provider `sim`, serving model `m`,
/// with a `[resilience]`/provider tail appended.
pub fn priority_keys(sim: SocketAddr, keys: &[&str], provider_extra: &str) -> String {
    let mut s = format!(
        "[[providers]]\nid = \"sim\"\ndialect = \"openai\"\nbase_url = \"http://{sim}/v1\"\n{provider_extra}\n"
    );
    for (i, k) in keys.iter().enumerate() {
        s.push_str(&format!(
            "  [[providers.connections]]\n  id = \"{k}\"\n  key_env = \"SIM_KEY_{}\"\n  models = [\"m\"]\n  priority = {i}\n",
            k.to_uppercase()
        ));
    }
    s
}

/// `n` copies of one POST sent at once, each on its own connection: the replies, in any order.
pub fn post_concurrently(
    to: SocketAddr,
    path: &'static str,
    body: &'static str,
    n: usize,
) -> Vec<Reply> {
    let threads: Vec<_> = (0..n)
        .map(|_| {
            std::thread::spawn(move || {
                client::request(
                    to,
                    "POST",
                    path,
                    &[],
                    body.as_bytes(),
                    Duration::from_secs(30),
                )
                .expect("request")
            })
        })
        .collect();
    threads
        .into_iter()
        .map(|t| t.join().expect("thread"))
        .collect()
}

/// The binary run with `args` in `dir` (no config from the environment, the test keys set),
/// its output.
pub fn ringside(args: &[&str], dir: &std::path::Path) -> std::process::Output {
    ringside_with(args, dir, &[])
}

/// [`ringside`] with `env` set besides. The machine's own proxy variables are left out: a
/// test's providers are not routed by the host's egress unless the test says so.
pub fn ringside_with(
    args: &[&str],
    dir: &std::path::Path,
    env: &[(&str, &str)],
) -> std::process::Output {
    let mut cmd = std::process::Command::new(super::binary());
    cmd.args(args)
        .current_dir(dir)
        .env_remove("RINGSIDE_CONFIG");
    for name in ["HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy"] {
        cmd.env_remove(name);
    }
    cmd.envs(super::proxy_env())
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run ringside")
}
