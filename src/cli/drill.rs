//! `ringside drill`: the arguments, then `crate::drill`.

use super::Exit;
use clap::Args;

pub(super) const AFTER_HELP: &str =
    "Scenarios (each: steady traffic, the fault, recovery): key-429-retry-after, key-429-no-hint,
key-429-reset-headers, account-429, token-budget-429, model-429, primaries-fail-together,
provider-wall-cross-dialect, provider-outage, provider-resets, quota-wall-403,
stream-fails-after-first-byte, clients-cancel-mid-queue, slow-streams; a drill file adds your own and changes budgets:

  [budgets]
  max_amplification = 1.5      # upstream attempts per client request
  min_success = 0.95
  max_after_deadline = 0
  max_recovery_s = 5
  [[scenarios]]
  name = \"slow-key\"
  fault = \"slow-drip\"          # any simulator fault (docs/simulator.md)
  scope = \"key\"                # key | account | provider | model | primaries | cross_dialect
  fault_s = 10

Real keys are never read: every key_env becomes a made-up key for the simulator.
Exit status: 0 when every budget held, 1 otherwise.

Example:
  ringside drill --config ringside.toml --report drill.html --json drill.json";

#[derive(Args)]
pub(super) struct DrillArgs {
    /// The config to rehearse.
    #[arg(long, short = 'c', env = "RINGSIDE_CONFIG", default_value = super::DEFAULT_CONFIG, value_name = "FILE")]
    config: String,
    /// A drill file: budgets and scenarios of your own.
    #[arg(long = "drill", value_name = "FILE")]
    drill_file: Option<String>,
    /// Only these scenarios (comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    scenarios: Vec<String>,
    /// The fault's and the recovery's length (the steady traffic before them: half of it).
    #[arg(long, default_value_t = 2.0, value_name = "SECONDS")]
    phase: f64,
    /// Each scenario's whole length instead (steady a fifth, fault and recovery two each).
    #[arg(long, value_name = "SECONDS", conflicts_with = "phase")]
    duration: Option<f64>,
    /// The size of each request's prompt, like your traffic's (0: a one-word prompt).
    #[arg(long, default_value_t = 0, value_name = "BYTES")]
    body_bytes: usize,
    /// Clients sending at once.
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
    /// How often a client retries a failed request, as the SDKs do (their default: 2).
    #[arg(long, default_value_t = 2, value_name = "N")]
    client_retries: u32,
    /// Every n-th request is streamed (0: none).
    #[arg(long, default_value_t = 3, value_name = "N")]
    stream_every: usize,
    /// The clients' deadline per request, retries included.
    #[arg(long, default_value_t = 30_000, value_name = "MS")]
    deadline_ms: u64,
    /// Write the HTML report here.
    #[arg(long, value_name = "FILE")]
    report: Option<String>,
    /// Write the JSON document here.
    #[arg(long, value_name = "FILE")]
    json: Option<String>,
    /// Drive an already running Ringside (in staging) instead of starting one; its providers
    /// must point at a `ringside simulate`, named by --simulator, and --admin names its admin
    /// port (token from RINGSIDE_ADMIN_TOKEN). --config is its config, keys from their key_env.
    #[arg(long, value_name = "URL", requires_all = ["admin", "simulator"])]
    against: Option<String>,
    /// The running Ringside's admin port (with --against).
    #[arg(long, value_name = "URL", requires = "against")]
    admin: Option<String>,
    /// The simulator the running Ringside's providers point at (with --against).
    #[arg(long, value_name = "URL", requires = "against")]
    simulator: Option<String>,
}

/// `http://host:port` (or `host:port`) as an address.
fn address(url: &str) -> Result<std::net::SocketAddr, String> {
    use std::net::ToSocketAddrs;
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split('/').next().unwrap_or(rest);
    authority
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| format!("{url}: not an address (http://host:port)"))
}

pub(super) fn run(a: DrillArgs) -> Result<Exit, String> {
    let phase = a.duration.map_or(a.phase, |d| d / 2.5);
    if !(phase > 0.0 && phase <= 3600.0) {
        return Err(
            "--phase: between 0 and 3600 seconds (--duration: two and a half times that)".into(),
        );
    }
    if a.body_bytes > 1 << 20 {
        return Err("--body-bytes: at most 1 MiB".into());
    }
    let o = crate::drill::Options {
        config: a.config,
        drill_file: a.drill_file,
        scenarios: a.scenarios,
        phase_s: phase,
        body_bytes: a.body_bytes,
        concurrency: a.concurrency.clamp(1, 1024),
        client_retries: a.client_retries,
        stream_every: a.stream_every,
        deadline_ms: a.deadline_ms.max(1),
        report: a.report,
        json: a.json,
        against: match (&a.against, &a.admin, &a.simulator) {
            (Some(p), Some(ad), Some(sim)) => Some(crate::drill::Remote {
                proxy: address(p)?,
                admin: address(ad)?,
                simulator: address(sim)?,
                admin_token: std::env::var("RINGSIDE_ADMIN_TOKEN").ok(),
            }),
            _ => None,
        },
    };
    Ok(if crate::drill::run(&o)? {
        Exit::Ok
    } else {
        Exit::BudgetFailed
    })
}
