//! The command line (clap): `serve`, `check`, `demo`, `simulate`, `drain`, `reload`, `status`,
//! `probe`, `drill`. Misuse (an unknown flag or subcommand) is refused with exit 2 and nothing
//! started; `ringside` alone serves.

mod admin_call;
mod check;
mod drill;
mod env_check;
mod probe;
mod serve;
mod simulate;
mod version;

use clap::{Args, Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "ringside",
    version = version::SHORT,
    about = "A resilience proxy for LLM APIs: many provider keys and models behind one endpoint,\nthrough rate limits, quota walls, outages and slow streams.",
    after_help = "Run `ringside demo` to see it work on loopback, `ringside check` before a start."
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the proxy (the default when no subcommand is given).
    #[command(after_help = format!("{}\n\nSignals: SIGTERM or SIGINT drain and stop (a second one stops at once);\nSIGHUP reloads the config file (an invalid one changes nothing), never stops.\n\nExamples:\n  ringside serve --config /etc/ringside/ringside.toml\n  RINGSIDE_CONFIG=./ringside.toml ringside", crate::env_vars::help()))]
    Serve(ConfigArg),
    /// Validate a config and print what the server would run with, or every problem in it.
    #[command(after_help = format!("{}\n\nExit status: 0 when the config is valid, 1 when it is not (its problems on stderr).\n\nExample:\n  ringside check --config ringside.toml", crate::env_vars::help()))]
    Check(ConfigArg),
    /// Run the simulator and the proxy on loopback with a scripted mix of faults.
    Demo,
    /// Run the fault-injecting upstream simulator.
    Simulate(simulate::SimArgs),
    /// Ask a running server to drain: /readyz answers 503, then in-flight requests finish.
    #[command(after_help = CONTROL_HELP)]
    Drain(ControlArgs),
    /// Ask a running server to reload its config file (as SIGHUP does) and print what changed.
    #[command(after_help = format!("Requests in flight finish on the config they started with; cooldowns, breakers, queues and leases stay with every connection whose provider, id and key are unchanged. An invalid file changes nothing: its problems are printed and the exit status is 1.\n\n{CONTROL_HELP}"))]
    Reload(ControlArgs),
    /// Print what a running server says of itself (version, generation, draining).
    #[command(after_help = CONTROL_HELP)]
    Status(ControlArgs),
    /// Ask the running server whether it is ready (its admin port's /readyz; --live:
    /// /healthz): exit 0 when it is, 1 when not. For container health checks.
    #[command(
        after_help = "The admin address comes from the config (admin_listen; RINGSIDE_ADMIN_LISTEN wins; a wildcard address is dialled on loopback). No token is needed.\n\nExit status: 0 ready (or live), 1 not.\n\nExample (Dockerfile):\n  HEALTHCHECK CMD [\"ringside\", \"probe\"]"
    )]
    Probe(ProbeArgs),
    /// Rehearse failover: run your config against the simulator through the 429 runbook's
    /// scenarios and hold each against its budget (exit 1 when one fails).
    #[command(after_help = drill::AFTER_HELP)]
    Drill(drill::DrillArgs),
}

/// How the control commands reach the server.
const CONTROL_HELP: &str = "The command goes to the server's control socket, <data_dir>/control.sock (data_dir from --config, or RINGSIDE_DATA_DIR; --socket names the socket itself). Only the server's own user (or root) may use it: no admin token or provider key is needed.

Example:
  sudo -u ringside ringside reload --config /etc/ringside/ringside.toml";

/// A control command's arguments: the server's config file (for its data directory), or its
/// socket.
#[derive(Args)]
struct ControlArgs {
    #[command(flatten)]
    config: ConfigArg,
    /// The control socket (default: control.sock in the config's data_dir).
    #[arg(long, value_name = "PATH")]
    socket: Option<String>,
}

#[derive(Args)]
struct ProbeArgs {
    #[command(flatten)]
    config: ConfigArg,
    /// Ask whether the process is up (/healthz), not whether it takes requests (/readyz).
    #[arg(long)]
    live: bool,
}

/// The config file when neither `--config` nor `RINGSIDE_CONFIG` names one.
const DEFAULT_CONFIG: &str = "./ringside.toml";

/// The config file: the server's own, or for `drain`, the running server's (its admin address
/// and token).
#[derive(Args)]
struct ConfigArg {
    /// The config file.
    #[arg(
        long,
        short = 'c',
        env = crate::env_vars::CONFIG,
        default_value = DEFAULT_CONFIG,
        value_name = "FILE"
    )]
    config: String,
}

/// Run the CLI; returns the process exit code.
pub fn main(args: Vec<String>) -> i32 {
    use clap::{CommandFactory, FromArgMatches};
    let argv = std::iter::once("ringside".to_string()).chain(args);
    // `--version` says which drivers this host offers: found when asked, not at build time.
    // (Leaked: clap keeps a `&'static str`, and this runs once per process.)
    let command = Cli::command().long_version(version::long().leak() as &str);
    let parsed = command
        .try_get_matches_from(argv)
        .and_then(|m| Cli::from_arg_matches(&m));
    let cli = match parsed {
        Ok(cli) => cli,
        Err(e) => {
            // --help and --version print and succeed; misuse prints why and exits 2.
            let _ = e.print();
            return e.exit_code();
        }
    };
    let command = cli.command.unwrap_or_else(|| {
        Command::Serve(ConfigArg {
            config: std::env::var(crate::env_vars::CONFIG)
                .unwrap_or_else(|_| DEFAULT_CONFIG.into()),
        })
    });
    let result = match command {
        Command::Serve(a) => serve::run(&a.config),
        Command::Check(a) => check::run(&a.config).map(Exit::from),
        Command::Demo => crate::demo::run().map(Exit::from),
        Command::Simulate(a) => simulate::run(a).map(Exit::from),
        Command::Drain(a) => {
            admin_call::drain(&a.config.config, a.socket.as_deref()).map(Exit::from)
        }
        Command::Reload(a) => {
            admin_call::reload(&a.config.config, a.socket.as_deref()).map(Exit::from)
        }
        Command::Status(a) => {
            admin_call::status(&a.config.config, a.socket.as_deref()).map(Exit::from)
        }
        Command::Drill(a) => drill::run(a),
        Command::Probe(a) => probe::run(&a.config.config, a.live)
            .map(|up| if up { Exit::Ok } else { Exit::NotReady }),
    };
    match result {
        Ok(code) => code.into(),
        Err(e) => {
            eprintln!("ringside: {e}");
            1
        }
    }
}

/// What a subcommand that ran to its end reports: success, or a deliberate failure status.
pub(crate) enum Exit {
    Ok,
    /// The drain cut streams that were still running when the grace ended.
    CutStreams,
    /// A drill's budget failed.
    BudgetFailed,
    /// `probe`: the server answered, not ready.
    NotReady,
}

impl From<()> for Exit {
    fn from(_: ()) -> Exit {
        Exit::Ok
    }
}

impl From<Exit> for i32 {
    fn from(e: Exit) -> i32 {
        match e {
            Exit::Ok => 0,
            Exit::CutStreams => 3,
            Exit::BudgetFailed | Exit::NotReady => 1,
        }
    }
}
