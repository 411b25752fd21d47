//! Hot reload: read and check the config file, and apply it as the next generation without a
//! dropped connection or a cut stream.
//!
//! Two phases. First every core installs the new generation at its next tick (between
//! requests; requests in flight keep the generation they started on) and says so; only when
//! all have, what the old configuration alone held is let go: leases on removed connections
//! end with a reason and their stored terminal states are forgotten. State stays with every
//! identity that is unchanged (`slots`). Settings that cannot change live are reported as
//! needing a restart and keep their running values.

use super::core::Shared;
use super::generation::Gen;
use crate::config::{Config, Problem};
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering::*};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

mod changes;
pub use changes::Changes;

/// What asked for the reload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    Signal,
    Admin,
    /// `ringside reload` on the local control socket (`admin::control`).
    Control,
}

/// How a reload ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// The new generation serves every new request.
    Applied,
    /// The file has problems (or cannot be applied): the running config is unchanged.
    Rejected,
}

/// A reload's outcome, as logged, answered and shown by `GET /admin/config`.
#[derive(Clone, Debug, Serialize)]
pub struct Outcome {
    pub status: Status,
    pub cause: Cause,
    /// The generation serving new requests afterwards.
    pub generation: u64,
    pub at_unix_ms: u64,
    /// Every problem found, as `ringside check` says it.
    pub problems: Vec<String>,
    pub changes: Changes,
    /// Settings that changed in the file but apply only at the next start.
    pub needs_restart: Vec<&'static str>,
}

/// The reload's side of the shared state.
#[derive(Debug, Default)]
pub struct Reloads {
    /// The config file the process was started from (none: nothing to reload).
    path: Mutex<Option<String>>,
    /// One reload at a time.
    busy: Mutex<()>,
    pub applied: AtomicU64,
    pub rejected: AtomicU64,
    last: Mutex<Option<Outcome>>,
    /// Generations that may still have requests in flight (retired slots wait for them).
    alive: Mutex<Vec<Weak<Gen>>>,
}

impl Reloads {
    pub fn set_path(&self, path: &str) {
        *lock(&self.path) = Some(path.to_string());
    }

    pub fn last(&self) -> Option<Outcome> {
        lock(&self.last).clone()
    }

    /// The oldest generation some request may still run on (`current` if none).
    fn oldest_live(&self, current: u64) -> u64 {
        let mut alive = lock(&self.alive);
        alive.retain(|w| w.strong_count() > 0);
        alive
            .iter()
            .filter_map(|w| w.upgrade().map(|g| g.number))
            .min()
            .unwrap_or(current)
            .min(current)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// How long the cores get to install a generation (each does at its next tick, 50 ms apart).
const INSTALL_WAIT: Duration = Duration::from_secs(10);

/// Read the config file and apply it. Never panics on what the file holds; never leaves a
/// half-applied config behind.
pub fn reload(shared: &Shared, cause: Cause) -> Outcome {
    let _one = lock(&shared.reloads.busy);
    let old = shared.current();
    let mut out = Outcome {
        status: Status::Rejected,
        cause,
        generation: old.number,
        at_unix_ms: crate::clock::unix_ms(),
        problems: Vec::new(),
        changes: Changes::default(),
        needs_restart: Vec::new(),
    };
    match prepare(shared, &old) {
        Ok((generation, needs_restart)) => {
            out.changes = Changes::between(&old, &generation);
            out.needs_restart = needs_restart;
            out.generation = generation.number;
            out.status = Status::Applied;
            if let Err(p) = apply(shared, old, generation) {
                out.problems.push(p);
            }
            shared.reloads.applied.fetch_add(1, Relaxed);
        }
        Err(problems) => {
            out.problems = problems;
            shared.reloads.rejected.fetch_add(1, Relaxed);
        }
    }
    *lock(&shared.reloads.last) = Some(out.clone());
    out
}

/// Say how a reload went: every problem on its own line (as `ringside check` prints them),
/// then one line with the generation, what changed and what needs a restart.
pub fn log_outcome(out: &Outcome) {
    use crate::log::event;
    let cause = out.cause;
    for p in &out.problems {
        event(
            "error",
            "reload: problem",
            serde_json::json!({"problem": p, "cause": cause}),
        );
    }
    match out.status {
        Status::Applied => event(
            "info",
            "config reloaded",
            serde_json::json!({"generation": out.generation, "cause": cause,
                "changes": out.changes, "needs_restart": out.needs_restart}),
        ),
        Status::Rejected => event(
            "error",
            "config reload rejected: the running config is unchanged",
            serde_json::json!({"generation": out.generation, "cause": cause,
                "problems": out.problems.len()}),
        ),
    }
    for s in &out.needs_restart {
        event(
            "warn",
            "reload: this setting changed in the file and applies at the next restart",
            serde_json::json!({"setting": s}),
        );
    }
}

/// The next generation from the file, or every reason it cannot be applied.
fn prepare(shared: &Shared, old: &Arc<Gen>) -> Result<(Arc<Gen>, Vec<&'static str>), Vec<String>> {
    let Some(path) = lock(&shared.reloads.path).clone() else {
        return Err(vec![
            "this instance was not started from a config file: nothing to reload".into(),
        ]);
    };
    if shared.lifecycle.is_draining() {
        return Err(vec!["draining: a reload would not serve anything".into()]);
    }
    let mut config = crate::config::load_file(&path, &crate::config::real_env)
        .map_err(|ps| ps.iter().map(Problem::without_source).collect::<Vec<_>>())?;
    let needs_restart = keep_restart_only(&old.config, &mut config);
    // Judged on what will run: the admin port keeps the address it started with.
    if let Some(why) = config.server.admin_exposure_problem() {
        return Err(vec![format!(
            "server.admin_token_env: {why} (the admin address changes only at a restart)"
        )]);
    }
    let number = old.number + 1;
    let mut slots = lock(&shared.slots);
    let oldest = shared.reloads.oldest_live(old.number);
    let plan = slots
        .assign(&mut config, number, oldest)
        .map_err(|e| vec![e])?;
    let mut generation = Gen::build(number, config, &mut slots);
    generation.fresh_conns = plan.fresh_conns;
    generation.fresh_providers = plan.fresh_providers;
    generation.retired_conns = plan.retired_conns;
    Ok((Arc::new(generation), needs_restart))
}

/// Publish `generation`, wait for every core to install it, then let go of what only `old` held.
fn apply(shared: &Shared, old: Arc<Gen>, generation: Arc<Gen>) -> Result<(), String> {
    // Flow settings first: a request admitted on the new generation finds its limits.
    for p in &generation.config.providers {
        for c in &p.connections {
            let was = (!generation.fresh_conns.contains(&c.index))
                .then(|| old.config.connection(c.index).map(|(_, o)| &o.flow))
                .flatten();
            shared.flow.apply(c.index, &c.flow, was);
        }
    }
    for &c in &generation.fresh_conns {
        for m in &shared.metrics {
            m.reset_connection(c);
        }
    }
    for &p in &generation.fresh_providers {
        if let Some(probe) = shared.probes.0.get(p) {
            probe.store(0, Relaxed);
        }
    }
    shared.leases.rename(&generation.conn_labels);
    shared.tokens.seed(&generation.config, shared.store);
    lock(&shared.reloads.alive).push(Arc::downgrade(&old));
    crate::notify::reloading("reloading the config");
    shared.stage(generation.clone());
    let installed = wait_installed(shared, generation.number);
    shared.commit(generation.clone());
    crate::notify::notify(&format!(
        "READY=1\nSTATUS=serving generation {}",
        generation.number
    ));
    // Phase two: every core serves the new generation.
    for &slot in &generation.retired_conns {
        let Some((p, c)) = old.conn_labels.get(slot.index()) else {
            continue;
        };
        let label = format!("{p}/{c}");
        shared
            .store
            .lease_nowait(crate::store::leases::Op::RevokeConnection {
                connection: label,
                reason: "CONNECTION_REMOVED".into(),
            });
        shared.store.delete(Shared::terminal_key(&old, slot));
    }
    installed
}

fn wait_installed(shared: &Shared, number: u64) -> Result<(), String> {
    let until = Instant::now() + INSTALL_WAIT;
    loop {
        let behind: Vec<usize> = (0..shared.installed.len())
            .filter(|&i| shared.installed[i].load(Acquire) < number)
            .collect();
        if behind.is_empty() {
            return Ok(());
        }
        if Instant::now() >= until {
            return Err(format!(
                "cores {behind:?} had not installed generation {number} after {} s; they will at their next tick",
                INSTALL_WAIT.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Settings the running process cannot change: the file's value is reported and the running
/// one kept, so that every generation agrees with what was started.
fn keep_restart_only(old: &Config, new: &mut Config) -> Vec<&'static str> {
    let mut needs = Vec::new();
    macro_rules! keep {
        ($name:literal, $($field:tt)+) => {
            if format!("{:?}", old.$($field)+) != format!("{:?}", new.$($field)+) {
                needs.push($name);
                new.$($field)+ = old.$($field)+.clone();
            }
        };
    }
    keep!("server.listen", server.listen);
    keep!("server.admin_listen", server.admin_listen);
    keep!("server.workers", server.workers);
    keep!("server.driver", server.driver);
    keep!("server.data_dir", server.data_dir);
    keep!("server.pin_workers", server.pin_workers);
    keep!("server.access_log", server.access_log);
    keep!("server.max_connections", server.max_connections);
    keep!(
        "server.max_unauthenticated_per_address",
        server.max_unauthenticated_per_address
    );
    keep!(
        "server.max_connections_per_address",
        server.max_connections_per_address
    );
    keep!("store.map_size_mb", store_map_size);
    keep!("store.durability", store_fast);
    keep!("upstream.tls_roots", upstream.tls_roots);
    keep!("upstream.ca_file", upstream.ca_file);
    keep!("upstream.connect_timeout_ms", upstream.connect_timeout_ms);
    keep!("upstream.connects_in_flight", upstream.connects_in_flight);
    keep!("upstream.dns_ttl_ms", upstream.dns_ttl_ms);
    keep!("upstream.h2_ping_interval_ms", upstream.h2_ping_interval_ms);
    keep!("upstream.h2_ping_timeout_ms", upstream.h2_ping_timeout_ms);
    keep!(
        "upstream.pool_max_idle_per_upstream",
        upstream.pool_max_idle_per_upstream
    );
    keep!(
        "upstream.pool_idle_timeout_ms",
        upstream.pool_idle_timeout_ms
    );
    keep!("flow (tenant limits)", tenant_limits);
    keep!("RINGSIDE_RATE_LIMIT_*", flow_env);
    keep!("fleet", fleet);
    keep!("telemetry", telemetry);
    keep!("resilience.decision_ring", resilience.decision_ring);
    keep!(
        "resilience.decision_ring_plain",
        resilience.decision_ring_plain
    );
    if format!("{:?}", old.accounts) != format!("{:?}", new.accounts)
        || memberships(old) != memberships(new)
    {
        needs.push("providers.accounts");
    }
    // Account limits and memberships stay as started: keys name the running accounts.
    let ids: Vec<&str> = old.accounts.iter().map(|a| a.id.as_str()).collect();
    let new_ids: Vec<String> = new.accounts.iter().map(|a| a.id.clone()).collect();
    for p in &mut new.providers {
        for c in &mut p.connections {
            c.flow.account = c
                .flow
                .account
                .and_then(|a| new_ids.get(a))
                .and_then(|id| ids.iter().position(|x| x == id));
        }
    }
    new.accounts = old.accounts.clone();
    needs
}

/// Which account each key belongs to, by `provider/connection`.
fn memberships(c: &Config) -> Vec<(String, Option<String>)> {
    let mut out: Vec<(String, Option<String>)> = c
        .providers
        .iter()
        .flat_map(|p| {
            p.connections.iter().map(move |k| {
                let account = k
                    .flow
                    .account
                    .and_then(|a| c.accounts.get(a))
                    .map(|a| a.id.clone());
                (format!("{}/{}", p.id, k.id), account)
            })
        })
        .filter(|(_, a)| a.is_some())
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests;
