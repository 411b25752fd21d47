//! `ringside serve`: start the server, then run its life from the main thread: signals, the
//! drain, and the exit status.
//!
//! SIGTERM (or `POST /admin/drain`) drains: `/readyz` answers 503 at once while the data port
//! keeps accepting for `drain_delay_ms` (load balancers see the instance leave; SIGINT, Ctrl-C
//! at a terminal, skips this delay), then the listeners close, idle keep-alive connections
//! close at their next request boundary, and in-flight requests and streams get up to
//! `shutdown_grace_ms`. What is still running then is
//! cut: the process says how many and exits with status 3. A second SIGTERM or SIGINT ends the
//! delay and the grace at once. SIGHUP reloads the config file (`state::reload`); it never
//! ends the process.

use super::Exit;
use crate::config::{load_file, real_env};
use crossbeam_channel::{Receiver, RecvTimeoutError};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Run the proxy until it has drained.
pub(super) fn run(path: &str) -> Result<Exit, String> {
    // Before the caps are set: `max_connections = 0` is derived from this limit.
    let limit = crate::fd_limit::raise();
    let cfg = load_file(path, &real_env).map_err(|ps| {
        let lines: Vec<String> = ps.iter().map(|p| p.to_string()).collect();
        format!("invalid config:\n  {}", lines.join("\n  "))
    })?;
    for w in super::env_check::warnings(&real_env) {
        crate::log::event("warn", &w, serde_json::json!({}));
    }
    let signals = signals()?;
    let log = cfg.server.access_log.then(crate::log::LogSink::start);
    let log_at_exit = log.clone();
    if let Some(limit) = limit {
        crate::log::event(
            "info",
            "open-file limit",
            serde_json::json!({"limit": limit, "streams": crate::fd_limit::streams_allowed(limit)}),
        );
    }
    let listen = cfg.server.listen;
    let admin = cfg.server.admin_listen;
    let open = cfg.clients.is_open();
    if open {
        crate::log::event(
            "warn",
            "no client keys configured: running open (sidecar mode); anyone who reaches the port may use it",
            serde_json::json!({}),
        );
    }
    let admin_note = admin_access_note(&cfg);
    let grace = cfg.server.shutdown_grace;
    let data_dir = cfg.server.data_dir.clone();
    let delay = cfg.server.drain_delay;
    let server = crate::server::start(cfg, log)?;
    server.shared.reloads.set_path(path);
    // `ringside reload`, `drain` and `status` ask here; removed when this returns.
    let _control = crate::admin::control::start(server.shared.clone(), &data_dir)?;
    if let Some((level, msg)) = admin_note {
        crate::log::event(level, msg, serde_json::json!({"admin": admin.to_string()}));
    }
    warn_unauthenticated_keys(server.shared.store);
    crate::log::event(
        "info",
        "ringside started",
        serde_json::json!({"listen": listen.to_string(), "admin": admin.to_string(), "cores": server.drivers.len(),
                           "drivers": server.drivers, "open_mode": open}),
    );
    crate::notify::notify(&format!("READY=1\nSTATUS=serving on {listen}"));
    let shared = server.shared.clone();
    let interactive = serve_until_drain(&shared, &signals);
    let delay = if interactive { Duration::ZERO } else { delay };
    drain(&shared, &signals, delay, grace, path);
    server.shutdown();
    // A second signal during the grace ends it (the cores look at `hurry`).
    let watcher = {
        let shared = shared.clone();
        std::thread::spawn(move || {
            if wait_or_signal(&signals, grace + Duration::from_secs(1), "", || {
                shared.lifecycle.is_stopped()
            }) {
                shared.lifecycle.hurry();
            }
        })
    };
    server.join();
    let _ = watcher.join();
    if let Some(log) = log_at_exit {
        log.finish(Duration::from_secs(2));
    }
    let cut = shared.lifecycle.cut();
    if cut > 0 {
        crate::log::event(
            "warn",
            "ringside stopped: requests still running when the grace ended were cut",
            serde_json::json!({"cut": cut, "shutdown_grace_ms": grace.as_millis() as u64}),
        );
        return Ok(Exit::CutStreams);
    }
    crate::log::event("info", "ringside stopped", serde_json::json!({}));
    Ok(Exit::Ok)
}

/// Managed client keys minted before admin changes needed authentication: one warning each.
fn warn_unauthenticated_keys(store: &crate::store::Store) {
    for (id, scopes) in crate::clients::managed::minted_without_authentication(store) {
        crate::log::event(
            "warn",
            "managed client key created before admin changes required authentication: review it, revoke it if you did not create it (DELETE /admin/clients/{id})",
            serde_json::json!({"client": id, "scopes": scopes}),
        );
    }
}

/// Serve until SIGTERM, SIGINT or `POST /admin/drain`; SIGHUP reloads the config meanwhile.
/// Returns whether it was SIGINT: Ctrl-C at a terminal, where no load balancer needs the
/// drain delay (the grace still applies).
fn serve_until_drain(shared: &crate::state::core::Shared, signals: &Receiver<i32>) -> bool {
    loop {
        match signals.recv_timeout(Duration::from_millis(50)) {
            Ok(SIGHUP) => reload(shared),
            Ok(s) => return s == SIGINT,
            Err(RecvTimeoutError::Timeout) if shared.lifecycle.drain_requested() => return false,
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return false,
        }
    }
}

/// `/readyz` at 503 while the data port still accepts, for `delay` (a second signal ends it).
fn drain(
    shared: &Arc<crate::state::core::Shared>,
    signals: &Receiver<i32>,
    delay: Duration,
    grace: Duration,
    path: &str,
) {
    crate::notify::notify("STOPPING=1\nSTATUS=draining");
    shared.lifecycle.start_draining();
    crate::log::event(
        "info",
        "draining: /readyz answers 503; the data port closes after the drain delay",
        serde_json::json!({"drain_delay_ms": delay.as_millis() as u64,
                           "shutdown_grace_ms": grace.as_millis() as u64}),
    );
    if wait_or_signal(signals, delay, path, || false) {
        shared.lifecycle.hurry();
    }
    crate::log::event(
        "info",
        "shutting down: listeners closed, in-flight requests finishing",
        serde_json::json!({}),
    );
}

/// Wait up to `limit` or until `done`; true when SIGTERM or SIGINT came meanwhile (SIGHUP is
/// answered with a config check when `path` names the file).
fn wait_or_signal(
    signals: &Receiver<i32>,
    limit: Duration,
    path: &str,
    done: impl Fn() -> bool,
) -> bool {
    let until = Instant::now() + limit;
    while !done() {
        let now = Instant::now();
        if now >= until {
            return false;
        }
        match signals.recv_timeout((until - now).min(Duration::from_millis(50))) {
            Ok(SIGHUP) if !path.is_empty() => check_only(path),
            Ok(SIGHUP) => {}
            Ok(_) => return true,
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return false,
        }
    }
    false
}

/// SIGTERM, SIGINT and SIGHUP, delivered as values on a channel.
fn signals() -> Result<Receiver<i32>, String> {
    let mut it = signal_hook::iterator::Signals::new([SIGTERM, SIGINT, SIGHUP])
        .map_err(|e| format!("cannot install signal handlers: {e}"))?;
    let (tx, rx) = crossbeam_channel::unbounded();
    std::thread::Builder::new()
        .name("ringside-signals".into())
        .spawn(move || {
            for s in it.forever() {
                if tx.send(s).is_err() {
                    return;
                }
            }
        })
        .map_err(|e| format!("cannot start the signal thread: {e}"))?;
    Ok(rx)
}

/// SIGHUP: reload the config file (`state::reload`), on this thread: the signals wait
/// meanwhile, and a reload takes at most a few core ticks.
fn reload(shared: &crate::state::core::Shared) {
    use crate::state::audit_trail::{Actor, generation};
    let before = generation(shared.current().number);
    let out = crate::state::reload::reload(shared, crate::state::reload::Cause::Signal);
    crate::state::reload::log_outcome(&out);
    let what = (&Actor::Signal("SIGHUP"), "reload");
    let after = serde_json::to_value(&out).ok();
    (shared.audit_trail).record_command(shared.store, what, Some(before), after);
}

/// SIGHUP while draining: nothing new will be served, so nothing is applied.
fn check_only(path: &str) {
    crate::log::event(
        "warn",
        "SIGHUP while draining: the config is not reloaded",
        serde_json::json!({"config": path}),
    );
}

/// What the operator should know about the admin port's access at start.
fn admin_access_note(cfg: &crate::config::Config) -> Option<(&'static str, &'static str)> {
    let s = &cfg.server;
    if s.admin_token.is_some() {
        None
    } else if !s.admin_listen.ip().is_loopback() {
        Some((
            "warn",
            "admin port reachable from other hosts without a token (server.admin_unauthenticated_ok): anyone who reaches it can read state and metrics",
        ))
    } else {
        Some((
            "info",
            "admin API is read-only without a token: set server.admin_token_env to make changes through it",
        ))
    }
}
