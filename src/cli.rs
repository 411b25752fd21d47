//! Command line: `serve | check | demo | simulate`.

use crate::config::{load_file, real_env};
use crate::simulate::{SimOptions, parse_fault_arg};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

pub const USAGE: &str = "usage:
  ringside [serve] [--config FILE]      run the proxy (default config ./ringside.toml)
  ringside check [--config FILE]        validate a config and print every problem
  ringside demo                         simulator + proxy on loopback with a scripted mix
  ringside simulate [--listen ADDR] [--workers N] [--events N] [--interval-ms N]
                    [--latency-ms N] [--fault key:KEY=SPEC | model:MODEL=SPEC]... [--epoll]
                                        run the fault-injecting upstream simulator";

fn flag_value(args: &[String], name: &str) -> Result<Option<String>, String> {
    match args.iter().position(|a| a == name) {
        Some(i) => args
            .get(i + 1)
            .cloned()
            .map(Some)
            .ok_or_else(|| format!("{name} needs a value")),
        None => Ok(None),
    }
}

/// Run the CLI; returns the process exit code.
pub fn main(args: Vec<String>) -> i32 {
    let (cmd, rest) = match args.first().map(String::as_str) {
        Some(c @ ("serve" | "check" | "demo" | "simulate")) => (c.to_string(), args[1..].to_vec()),
        Some("-h" | "--help" | "help") => {
            println!("{USAGE}");
            return 0;
        }
        _ => ("serve".to_string(), args.clone()),
    };
    let result = match cmd.as_str() {
        "check" => check(&rest),
        "demo" => crate::demo::run(),
        "simulate" => simulate(&rest),
        _ => serve(&rest),
    };
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("ringside: {e}");
            if e.starts_with("usage") { 2 } else { 1 }
        }
    }
}

fn config_path(args: &[String]) -> Result<String, String> {
    Ok(flag_value(args, "--config")?.unwrap_or_else(|| "./ringside.toml".into()))
}

fn check(args: &[String]) -> Result<(), String> {
    // A report piped into `head` ends quietly when the pipe closes, as other tools do (Rust
    // ignores SIGPIPE, which turns the closed pipe into a panic in `println!`).
    // SAFETY: restoring the default disposition of one signal, before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let path = config_path(args)?;
    match load_file(&path, &real_env) {
        Ok(cfg) => {
            println!("{path}: ok");
            println!(
                "  listen {} (admin {}), {} worker(s), driver {:?}",
                cfg.server.listen, cfg.server.admin_listen, cfg.server.workers, cfg.server.driver
            );
            if let Some((soft, hard)) = crate::fd_limit::current() {
                println!(
                    "  open files: soft limit {soft}, hard {hard}; serve raises it to {hard}, enough for about {} held streams (two descriptors each)",
                    crate::fd_limit::streams_allowed(hard)
                );
            }
            let budgets = budgets_in_force(&cfg);
            for p in &cfg.providers {
                println!(
                    "  provider {} ({}) {}:{} with {} connection(s)",
                    p.id,
                    p.dialect.as_str(),
                    p.endpoint.host,
                    p.endpoint.port,
                    p.connections.len()
                );
                let policy = cfg
                    .resilience
                    .providers
                    .iter()
                    .zip(&cfg.providers)
                    .find(|(_, x)| x.id == p.id);
                if let Some((pol, _)) = policy {
                    println!(
                        "    profile {}: cooldown base {} ms (max level {}), breaker degraded at {} / open at {} for {} ms",
                        pol.kind.as_str(),
                        pol.cooldown.base_ms,
                        pol.cooldown.max_level,
                        pol.breaker.degraded_at,
                        pol.breaker.open_at,
                        pol.breaker.open_ms
                    );
                }
                print_connections(p, &budgets);
            }
            for r in &cfg.routes {
                println!(
                    "  route {} ({}) -> {} target(s)",
                    r.name,
                    r.strategy.as_str(),
                    r.targets.len()
                );
            }
            Ok(())
        }
        Err(problems) => {
            for p in &problems {
                println!("{p}");
            }
            Err(format!("{path}: {} problem(s)", problems.len()))
        }
    }
}

fn serve(args: &[String]) -> Result<(), String> {
    let path = config_path(args)?;
    // Before the config is resolved: `max_connections = 0` is derived from this limit.
    let limit = crate::fd_limit::raise();
    let cfg = load_file(&path, &real_env).map_err(|ps| {
        let lines: Vec<String> = ps.iter().map(|p| p.to_string()).collect();
        format!("invalid config:\n  {}", lines.join("\n  "))
    })?;
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, stop.clone())
            .map_err(|e| format!("cannot install signal handler: {e}"))?;
    }
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
    let server = crate::server::start(cfg, log)?;
    if let Some((level, msg)) = admin_note {
        crate::log::event(level, msg, serde_json::json!({"admin": admin.to_string()}));
    }
    for (id, scopes) in crate::clients::managed::minted_without_authentication(server.shared.store)
    {
        crate::log::event(
            "warn",
            "managed client key created before admin changes required authentication: review it, revoke it if you did not create it (DELETE /admin/clients/{id})",
            serde_json::json!({"client": id, "scopes": scopes}),
        );
    }
    crate::log::event(
        "info",
        "ringside started",
        serde_json::json!({"listen": listen.to_string(), "admin": admin.to_string(), "cores": server.drivers.len(),
                           "drivers": server.drivers, "open_mode": open}),
    );
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
    }
    crate::log::event(
        "info",
        "shutting down: draining in-flight requests",
        serde_json::json!({}),
    );
    server.shutdown();
    server.join();
    if let Some(log) = log_at_exit {
        log.finish(Duration::from_secs(2));
    }
    crate::log::event("info", "ringside stopped", serde_json::json!({}));
    Ok(())
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

fn simulate(args: &[String]) -> Result<(), String> {
    let mut opts = SimOptions::default();
    let mut i = 0;
    while i < args.len() {
        let v = || {
            args.get(i + 1)
                .cloned()
                .ok_or_else(|| format!("usage: {} needs a value", args[i]))
        };
        let num = |s: String| {
            s.parse::<u64>()
                .map_err(|_| format!("usage: {} needs a number", args[i]))
        };
        match args[i].as_str() {
            "--listen" => {
                opts.listen = v()?
                    .parse()
                    .map_err(|_| "usage: --listen needs IP:PORT".to_string())?
            }
            "--workers" => opts.workers = num(v()?)? as usize,
            "--events" => opts.events = num(v()?)? as u32,
            "--interval-ms" => opts.interval_ms = num(v()?)?,
            "--latency-ms" => opts.latency_ms = num(v()?)?,
            "--fault" => opts.faults.push(parse_fault_arg(&v()?)?),
            "--epoll" => {
                opts.force_epoll = true;
                i += 1;
                continue;
            }
            other => return Err(format!("usage: unknown option {other}\n{USAGE}")),
        }
        i += 2;
    }
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, stop.clone()).map_err(|e| e.to_string())?;
    }
    let sim = crate::simulate::start(opts.clone())?;
    crate::log::event(
        "info",
        "simulator started",
        serde_json::json!({"listen": opts.listen.to_string(), "workers": opts.workers}),
    );
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
    }
    sim.stop();
    Ok(())
}

/// Where the queue budgets shown by `check` come from.
fn budget_sources() -> String {
    let names: Vec<String> = crate::flow::settings::Knob::ALL
        .iter()
        .map(|k| format!("{} (or {})", k.env(), k.seed_env()))
        .collect();
    format!(
        "    queue budgets: the connection's own, else saved with PATCH /admin/settings (admin), else the environment ({}), else the default",
        names.join(", ")
    )
}

/// The process-wide queue budgets as the server would start with them: the environment, then
/// what `PATCH /admin/settings` saved in the store (read-only, so a live server is not
/// disturbed). A store that cannot be read is said, not fatal: the config itself is fine.
fn budgets_in_force(cfg: &crate::config::Config) -> crate::flow::settings::Budgets {
    use crate::flow::settings::{Budgets, SAVED_PREFIX};
    let budgets = Budgets::new(cfg.flow_env);
    match crate::store::read_saved(&cfg.server.data_dir, cfg.store_map_size, SAVED_PREFIX) {
        Ok(rows) => budgets.apply_saved(rows),
        Err(e) => println!("  note: saved settings not shown: {e}"),
    }
    budgets
}

/// `check`'s lines for a provider's connections: flow settings and each queue budget in force,
/// with where it came from.
fn print_connections(p: &crate::config::Provider, budgets: &crate::flow::settings::Budgets) {
    use crate::flow::settings::Knob;
    println!("{}", budget_sources());
    for c in &p.connections {
        let f = &c.flow;
        let show = |k: Knob, own: Option<u64>| {
            let v = budgets.effective(k, own);
            format!("{} {} ({:?})", k.name(), v.value, v.source).to_lowercase()
        };
        println!(
            "    connection {}: max_concurrent {}, min_time_ms {}, on_saturation {:?}, {}, {}, {}",
            c.id,
            if f.max_concurrent == 0 {
                "unlimited".to_string()
            } else {
                f.max_concurrent.to_string()
            },
            f.min_time_ms,
            f.on_saturation,
            show(Knob::MaxWaitMs, f.max_wait_ms),
            show(Knob::ExecutionMaxWaitMs, f.execution_max_wait_ms),
            show(Knob::MaxQueueDepth, f.max_queue_depth),
        );
    }
}
