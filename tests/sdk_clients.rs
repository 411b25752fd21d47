//! The real OpenAI and Anthropic Python SDKs (pinned in tests/sdk/requirements.txt) against
//! the real server and the simulator on loopback, both drivers: every endpoint an SDK user
//! calls, streaming helpers, fail-over behind the SDK's back, and the errors an SDK raises
//! (type, code, request id, a stream cut mid-way, a body over the limit). The checks are in tests/sdk/check_clients.py.
//!
//! The first run makes a virtual environment under the target directory and installs the SDKs
//! from PyPI (about 30 s); later runs reuse it. On a machine without python3 or PyPI, set
//! `RINGSIDE_SKIP_SDK_TESTS=1` to leave these out (they fail otherwise, so that a CI that
//! cannot run them says so).

mod common;
use common::*;
use ringside::simulate::{SimOptions, parse_fault_arg};
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

both_drivers!(real_sdk_clients_work_through_ringside);

fn real_sdk_clients_work_through_ringside(driver: &str) {
    if std::env::var_os("RINGSIDE_SKIP_SDK_TESTS").is_some_and(|v| v != "0") {
        eprintln!("RINGSIDE_SKIP_SDK_TESTS is set: the SDK checks are left out");
        return;
    }
    let python = match venv() {
        Ok(p) => p,
        Err(e) => {
            panic!("{e}\n(set RINGSIDE_SKIP_SDK_TESTS=1 on a machine without python3 or PyPI)")
        }
    };
    let faults = [
        "key:sk-sim-bad=429;retry-after=30;ratelimit-headers",
        "model:gpt-dead=429;retry-after=20",
        "model:gpt-mid=reset-mid-stream;after=5",
        "model:claude-mid=reset-mid-stream;after=5",
    ];
    let sim = start_sim(SimOptions {
        faults: faults
            .iter()
            .map(|f| parse_fault_arg(f).expect("fault spec"))
            .collect(),
        ..SimOptions::default()
    });
    let s = sim.addr;
    let body = format!(
        r#"
[resilience]
max_wait_ms = 0

[[providers]]
id = "oai"
dialect = "openai"
base_url = "http://{s}/v1"
  [[providers.connections]]
  id = "limited"
  key_env = "SIM_KEY_BAD"
  models = ["gpt-4o-mini"]
  priority = 0
  [[providers.connections]]
  id = "healthy"
  key_env = "SIM_KEY_A"
  models = ["gpt-4o-mini", "gpt-mid"]
  priority = 1
  [[providers.connections]]
  id = "spent"
  key_env = "SIM_KEY_B"
  models = ["gpt-dead"]

[[providers]]
id = "ant"
dialect = "anthropic"
base_url = "http://{s}/v1"
  [[providers.connections]]
  id = "claude"
  key_env = "SIM_KEY_C"
  models = ["claude-sonnet-4-5", "claude-mid"]
"#
    );
    let proxy = Proxy::start(driver, 2, "", &body);
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/sdk/check_clients.py");
    let out = Command::new(&python)
        .arg(&script)
        .arg(format!("http://{}", proxy.addr))
        .output()
        .expect("run the SDK checks");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "SDK checks failed on {driver}:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("17 of 17 SDK checks passed"), "{text}");
    // The client's own key never reached the upstream: only the connection keys did.
    let keys = sim_stats(&sim)["keys"].clone();
    assert!(keys.get("client-key").is_none(), "{keys}");
    assert!(
        attempts_for(&sim, "sk-sim-bad") >= 1,
        "the limited key was tried first: {keys}"
    );
}

/// The virtual environment with the pinned SDKs, made once per test run and reused across runs
/// while the requirements file is unchanged.
fn venv() -> Result<PathBuf, String> {
    static VENV: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    VENV.get_or_init(make_venv).clone()
}

fn make_venv() -> Result<PathBuf, String> {
    let reqs = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/sdk/requirements.txt");
    let wanted = std::fs::read_to_string(&reqs).map_err(|e| format!("{}: {e}", reqs.display()))?;
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("sdk-venv");
    let python = dir.join("bin/python");
    let stamp = dir.join("installed.txt");
    if std::fs::read_to_string(&stamp).is_ok_and(|s| s == wanted) && python.exists() {
        return Ok(python);
    }
    let _ = std::fs::remove_dir_all(&dir);
    run(Command::new("python3").args(["-m", "venv"]).arg(&dir))?;
    run(Command::new(&python)
        .args([
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            "-r",
        ])
        .arg(&reqs))?;
    std::fs::write(&stamp, wanted).map_err(|e| e.to_string())?;
    Ok(python)
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{cmd:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}
