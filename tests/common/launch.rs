//! How a test proxy is launched: its config file's text from the test's server lines, and
//! the process, with the markers the tests use (`# open files N`: started under that open-file
//! limit).

use super::{binary, proxy_env};
use std::process::{Child, Command, Stdio};

/// The binary serving `config`, its stdout and stderr sent where asked. `# open files N` in
/// the server section: it starts under that open-file limit, soft and hard.
pub(super) fn spawn(
    config: &std::path::Path,
    extra_server: &str,
    stdout: Stdio,
    stderr: Stdio,
) -> Child {
    let mut command = Command::new(binary());
    command
        .args(["serve", "--config", config.to_str().unwrap_or_default()])
        .envs(proxy_env())
        .stdout(stdout)
        .stderr(stderr);
    if let Some(n) = open_files(extra_server) {
        use std::os::unix::process::CommandExt;
        let limit = libc::rlimit {
            rlim_cur: n,
            rlim_max: n,
        };
        // SAFETY: setrlimit is async-signal-safe, reads a struct copied into the closure and
        // touches only the child.
        unsafe {
            command.pre_exec(move || match libc::setrlimit(libc::RLIMIT_NOFILE, &limit) {
                0 => Ok(()),
                _ => Err(std::io::Error::last_os_error()),
            });
        }
    }
    command.spawn().expect("spawn ringside")
}

/// The open-file limit a `# open files N` line in the server section asks for.
fn open_files(extra_server: &str) -> Option<u64> {
    let line = extra_server
        .lines()
        .find_map(|l| l.trim().strip_prefix("# open files "))?;
    line.trim().parse().ok()
}

pub(super) fn config_text(
    p: u16,
    a: u16,
    driver: &str,
    workers: usize,
    extra_server: &str,
    body: &str,
    data: &std::path::Path,
) -> String {
    // The admin API takes changes only with a token: tests use one unless they set
    // their own (or say `# no admin token` to test the port without one).
    let token =
        if extra_server.contains("admin_token_env") || extra_server.contains("# no admin token") {
            ""
        } else {
            "admin_token_env = \"RINGSIDE_TEST_ADMIN_TOKEN\"\n"
        };
    // A short drain delay: tests that stop the server do not wait 5 s each.
    let delay = if extra_server.contains("drain_delay_ms") {
        ""
    } else {
        "drain_delay_ms = 300\n"
    };
    let grace = if extra_server.contains("shutdown_grace_ms") {
        ""
    } else {
        "shutdown_grace_ms = 5000\n"
    };
    // `# admin on every address`: the admin port listens on 0.0.0.0 (still reached on loopback).
    let admin_ip = if extra_server.contains("# admin on every address") {
        "0.0.0.0"
    } else {
        "127.0.0.1"
    };
    format!(
        "[server]\nlisten = \"127.0.0.1:{p}\"\nadmin_listen = \"{admin_ip}:{a}\"\nworkers = {workers}\ndriver = \"{driver}\"\ndata_dir = \"{}\"\n{grace}{delay}{token}{extra_server}\n{body}",
        data.display()
    )
}
