//! The real OpenAI and Anthropic SDKs, Python (pinned in tests/sdk/requirements.txt) and Node
//! (pinned in tests/sdk/package-lock.json), against the real server and the simulator on
//! loopback, both drivers (on epoll the providers behind the simulator's TLS front over HTTP/2): every endpoint an SDK user calls, streaming helpers, fail-over
//! behind the SDK's back, and the errors an SDK raises (type, code, request id, a stream cut
//! mid-way, a body over the limit). The checks are in tests/sdk/check_clients.py and
//! tests/sdk/check_clients.mjs; the two languages' HTTP stacks (httpx, undici) frame, reuse and
//! read connections differently.
//!
//! The first run makes a virtual environment and a node_modules under the target directory and
//! installs the SDKs from PyPI and npm (about 30 s); later runs reuse them. On a machine without
//! python3, node or the registries, set `RINGSIDE_SKIP_SDK_TESTS=1` to leave these out (they
//! fail otherwise, so that a CI that cannot run them says so).

mod common;
use common::sim_tls::SimTls;
use common::*;
use ringside::simulate::front::H2Faults;
use ringside::simulate::{SimOptions, Simulator, parse_fault_arg};
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

both_drivers!(
    real_sdk_clients_work_through_ringside,
    real_sdk_clients_cross_providers
);

/// The SDKs of one API answered by a provider of the other (docs/dialects.md): JSON, streams,
/// images, schemas and tool history in the provider's shape (the simulator runs strict), a
/// stream cut after a fallback seen as the SDK's own error.
fn real_sdk_clients_cross_providers(driver: &str) {
    if std::env::var_os("RINGSIDE_SKIP_SDK_TESTS").is_some_and(|v| v != "0") {
        return;
    }
    let python = venv().unwrap_or_else(|e| panic!("{e}"));
    let node_script = node_modules().unwrap_or_else(|e| panic!("{e}"));
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/sdk/check_translation.py");
    let (python, script) = (python.to_string_lossy(), script.to_string_lossy());
    cross_checks(
        driver,
        &python,
        &script,
        "12 of 12 translation checks passed",
    );
    // The Node SDKs, from the copy beside their node_modules (as `node_modules` places it).
    let node = node_script.with_file_name("check_translation.mjs");
    cross_checks(
        driver,
        "node",
        &node.to_string_lossy(),
        "10 of 10 Node translation checks passed",
    );
}

/// One language's translation checks against a proxy and simulator of their own (the walls and
/// cuts they meet open breakers that another language's run would find open).
fn cross_checks(driver: &str, program: &str, script: &str, passed: &str) {
    let faults = [
        "model:gpt-wall=429",
        "model:claude-wall=529",
        "model:gpt-cut=reset-mid-stream;after=5",
        "model:claude-cut=reset-mid-stream;after=5",
    ];
    let opts = SimOptions {
        faults: faults
            .iter()
            .map(|f| parse_fault_arg(f).expect("fault spec"))
            .collect(),
        strict: true,
        call_tools: true,
        ..SimOptions::default()
    };
    let up = Upstream::start(driver, opts);
    let proxy = Proxy::start(driver, 2, "", &up.config(cross_config));
    let base = format!("http://{}", proxy.addr);
    run_checks(driver, program, &[script, &base], passed);
    up.assert_http2_only();
}

/// The simulator and where Ringside reaches it: on epoll behind its TLS front, over HTTP/2 as
/// real providers are reached; on io_uring itself, over plaintext HTTP/1.1. The SDKs' headers,
/// streams and faults cross both upstream paths, each driver once.
enum Upstream {
    Front(SimTls),
    Plain(Simulator),
}

impl Upstream {
    fn start(driver: &str, opts: SimOptions) -> Upstream {
        if driver == "epoll" {
            Upstream::Front(SimTls::start(opts, true, H2Faults::default()))
        } else {
            Upstream::Plain(start_sim(opts))
        }
    }

    fn sim(&self) -> &Simulator {
        match self {
            Upstream::Front(f) => &f.sim,
            Upstream::Plain(p) => p,
        }
    }

    /// The config `providers` writes for a base URL (without `/v1`), with the front's CA.
    fn config(&self, providers: fn(&str) -> String) -> String {
        match self {
            Upstream::Front(f) => {
                format!("[upstream]\nca_file = \"{}\"\n", f.ca_file.display())
                    + &providers(&format!("https://localhost:{}", f.tls.port()))
            }
            Upstream::Plain(p) => providers(&format!("http://{}", p.addr)),
        }
    }

    /// Through the front, HTTP/2 alone was spoken (probes included).
    fn assert_http2_only(&self) {
        if let Upstream::Front(f) = self {
            let counts = f.front();
            assert!(counts["connections_h2"].as_u64() >= Some(1), "{counts}");
            assert_eq!(counts["connections_http1"], 0, "{counts}");
        }
    }
}

/// An OpenAI and an Anthropic provider on the simulator, a model of each at its wall, one
/// healthy and one whose streams are cut; four routes from one to the other.
fn cross_config(base: &str) -> String {
    let mut c = "[resilience]\nmax_wait_ms = 0\n".to_string();
    for (id, dialect, models) in [
        ("oai", "openai", ["gpt-wall", "gpt-ok", "gpt-cut"]),
        (
            "ant",
            "anthropic",
            ["claude-wall", "claude-ok", "claude-cut"],
        ),
    ] {
        c += &format!(
            "[[providers]]\nid = \"{id}\"\ndialect = \"{dialect}\"\nbase_url = \"{base}/v1\"\n"
        );
        for (m, name) in models.iter().zip(["wall", "ok", "cut"]) {
            c += &format!(
                "  [[providers.connections]]\n  id = \"{name}\"\n  key_env = \"SIM_KEY_A\"\n  models = [\"{m}\"]\n"
            );
        }
    }
    for (route, first, then) in [
        ("gpt-to-claude", "oai/gpt-wall", "ant/claude-ok"),
        ("claude-to-gpt", "ant/claude-wall", "oai/gpt-ok"),
        ("gpt-to-claude-cut", "oai/gpt-wall", "ant/claude-cut"),
        ("claude-to-gpt-cut", "ant/claude-wall", "oai/gpt-cut"),
    ] {
        c += &format!("[[routes]]\nname = \"{route}\"\n");
        for t in [first, then] {
            let (p, m) = t.split_once('/').unwrap_or_default();
            c += &format!("[[routes.targets]]\nprovider = \"{p}\"\nmodel = \"{m}\"\n");
        }
    }
    c
}

fn real_sdk_clients_work_through_ringside(driver: &str) {
    if std::env::var_os("RINGSIDE_SKIP_SDK_TESTS").is_some_and(|v| v != "0") {
        eprintln!("RINGSIDE_SKIP_SDK_TESTS is set: the SDK checks are left out");
        return;
    }
    let skip_hint =
        "(set RINGSIDE_SKIP_SDK_TESTS=1 on a machine without python3, node or the registries)";
    let python = venv().unwrap_or_else(|e| panic!("{e}\n{skip_hint}"));
    let node_script = node_modules().unwrap_or_else(|e| panic!("{e}\n{skip_hint}"));
    let faults = [
        "key:sk-sim-bad=429;retry-after=30;ratelimit-headers",
        "model:gpt-dead=429;retry-after=20",
        "model:gpt-mid=reset-mid-stream;after=5",
        "model:claude-mid=reset-mid-stream;after=5",
    ];
    let opts = SimOptions {
        faults: faults
            .iter()
            .map(|f| parse_fault_arg(f).expect("fault spec"))
            .collect(),
        ..SimOptions::default()
    };
    let up = Upstream::start(driver, opts);
    let (sim, body) = (up.sim(), up.config(sdk_config));
    let proxy = Proxy::start(driver, 2, "", &body);
    let base = format!("http://{}", proxy.addr);
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/sdk/check_clients.py");
    let python = python.to_string_lossy().into_owned();
    let script = script.to_string_lossy().into_owned();
    run_checks(
        driver,
        &python,
        &[&script, &base],
        "19 of 19 SDK checks passed",
    );
    let node_script = node_script.to_string_lossy().into_owned();
    run_checks(
        driver,
        "node",
        &[&node_script, &base],
        "16 of 16 Node SDK checks passed",
    );
    // The client's own key never reached the upstream: only the connection keys did.
    let keys = sim_stats(sim)["keys"].clone();
    assert!(keys.get("client-key").is_none(), "{keys}");
    assert!(
        attempts_for(sim, "sk-sim-bad") >= 1,
        "the limited key was tried first: {keys}"
    );
    up.assert_http2_only();
}

/// Run one language's checks against Ringside; they pass when the program says `passed`.
fn run_checks(driver: &str, program: &str, args: &[&str], passed: &str) {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run {program}: {e}"));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{program} checks failed on {driver}:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains(passed), "{text}");
}

/// Two providers on the simulator: an OpenAI one with a rate-limited key tried first, a
/// healthy one and a spent one, and an Anthropic one. The models whose streams are cut
/// mid-way have keys of their own, three each: a cut after the commit cools its key, so each
/// language's cut check finds a fresh one, and no check finds the healthy keys cooling.
fn sdk_config(base: &str) -> String {
    format!(
        r#"
[resilience]
max_wait_ms = 0

[[providers]]
id = "oai"
dialect = "openai"
base_url = "{base}/v1"
  [[providers.connections]]
  id = "limited"
  key_env = "SIM_KEY_BAD"
  models = ["gpt-4o-mini"]
  priority = 0
  [[providers.connections]]
  id = "healthy"
  key_env = "SIM_KEY_A"
  models = ["gpt-4o-mini"]
  priority = 1
  [[providers.connections]]
  id = "cut-1"
  key_env = "SIM_KEY_D"
  models = ["gpt-mid"]
  [[providers.connections]]
  id = "cut-2"
  key_env = "SIM_KEY_C"
  models = ["gpt-mid"]
  [[providers.connections]]
  id = "cut-3"
  key_env = "SIM_KEY_B"
  models = ["gpt-mid"]
  [[providers.connections]]
  id = "spent"
  key_env = "SIM_KEY_B"
  models = ["gpt-dead"]

[[providers]]
id = "ant"
dialect = "anthropic"
base_url = "{base}/v1"
  [[providers.connections]]
  id = "claude"
  key_env = "SIM_KEY_C"
  models = ["claude-sonnet-4-5"]
  [[providers.connections]]
  id = "claude-cut-1"
  key_env = "SIM_KEY_D"
  models = ["claude-mid"]
  [[providers.connections]]
  id = "claude-cut-2"
  key_env = "SIM_KEY_A"
  models = ["claude-mid"]
  [[providers.connections]]
  id = "claude-cut-3"
  key_env = "SIM_KEY_B"
  models = ["claude-mid"]

# Waiting streams kept alive (the SDKs' short read timeout checks).
[[routes]]
name = "patient"
keepalive_ms = 300
targets = [{{ provider = "oai", model = "gpt-4o-mini", connection = "healthy" }}]
[[routes]]
name = "patient-claude"
keepalive_ms = 300
targets = [{{ provider = "ant", model = "claude-sonnet-4-5" }}]
"#
    )
}

/// The virtual environment with the pinned SDKs, made once per test run and reused across runs
/// while the requirements file is unchanged.
fn venv() -> Result<PathBuf, String> {
    static VENV: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    VENV.get_or_init(make_venv).clone()
}

fn make_venv() -> Result<PathBuf, String> {
    common::venv::python("sdk-venv", "tests/sdk/requirements.txt")
}

/// The pinned Node SDKs, installed once per test run (`npm ci` from the lock file) and reused
/// across runs while the lock file is unchanged. Returns the check script, copied beside its
/// node_modules so that its imports resolve there.
fn node_modules() -> Result<PathBuf, String> {
    static NODE: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    NODE.get_or_init(install_node_sdks).clone()
}

fn install_node_sdks() -> Result<PathBuf, String> {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/sdk");
    let dir = common::node::install("sdk-node", "tests/sdk")?;
    for name in ["check_clients.mjs", "check_translation.mjs"] {
        std::fs::copy(src.join(name), dir.join(name))
            .map_err(|e| format!("tests/sdk/{name}: {e}"))?;
    }
    Ok(dir.join("check_clients.mjs"))
}
