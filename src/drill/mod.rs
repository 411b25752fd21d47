//! `ringside drill`: rehearse the 429 runbook against the operator's own config. The built-in
//! simulator stands in for every provider (same ids, dialects, connections and models; made-up
//! keys), Ringside runs the operator's config pointed at it, and clients that retry like the
//! SDKs send steady traffic through each scenario's three phases: steady, the fault, recovery.
//! Every figure is measured (at the clients and at the simulator) and held against a budget;
//! the result is a table, a JSON document and an HTML report, and the exit status says whether
//! every budget held.

mod contract;
mod env;
mod findings;
mod honesty;
pub mod plan;
mod report;
mod scenario;
mod signals;
mod spend;
mod stage;
mod traffic;
mod verdict;
mod watch;

use crate::demo::client;
use plan::{Scenario, Scope};
use stage::Stage;
use std::net::SocketAddr;
use std::time::Duration;

pub use verdict::Verdict;

#[derive(Clone, Debug)]
pub struct Options {
    pub config: String,
    pub drill_file: Option<String>,
    /// Only these scenarios (all when empty).
    pub scenarios: Vec<String>,
    /// Each phase's length, in seconds.
    pub phase_s: f64,
    pub concurrency: usize,
    pub client_retries: u32,
    /// Every n-th request streamed (0: none).
    pub stream_every: usize,
    pub deadline_ms: u64,
    /// Each request's prompt size (0: one word).
    pub body_bytes: usize,
    pub report: Option<String>,
    pub json: Option<String>,
    /// Drive a running Ringside instead of starting one.
    pub against: Option<Remote>,
}

/// The admin token the drill's Ringside is given (a variable name the stage makes a value for).
const ADMIN_ENV: &str = "DRILL_ADMIN_TOKEN";

/// A Ringside already running (in staging) whose providers point at a `ringside simulate`.
#[derive(Clone, Debug)]
pub struct Remote {
    pub proxy: SocketAddr,
    pub admin: SocketAddr,
    pub simulator: SocketAddr,
    /// Its admin token, when it has one.
    pub admin_token: Option<String>,
}

/// Run the drill; `Ok(true)` when every budget held.
pub fn run(o: &Options) -> Result<bool, String> {
    let text = std::fs::read_to_string(&o.config).map_err(|e| format!("{}: {e}", o.config))?;
    let file = match &o.drill_file {
        Some(p) => Some(std::fs::read_to_string(p).map_err(|e| format!("{p}: {e}"))?),
        None => None,
    };
    let file = plan::read(file.as_deref())?;
    let scenarios = plan::scenarios(&file, &o.scenarios, o.phase_s)?;
    let verdicts = match &o.against {
        Some(remote) => against(o, remote, &text, &scenarios, &file.models)?,
        None => local(o, &text, &scenarios, &file.models)?,
    };
    // (A closed pipe, `| head`, ends the table quietly: the JSON, the report and the exit
    // status still follow. `println!` would panic on it.)
    let _ = std::io::Write::write_all(
        &mut std::io::stdout(),
        format!("{}\n", report::table(&verdicts)).as_bytes(),
    );
    if let Some(p) = &o.json {
        let text = serde_json::to_string_pretty(&report::json(&verdicts)).unwrap_or_default();
        std::fs::write(p, text).map_err(|e| format!("{p}: {e}"))?;
    }
    if let Some(p) = &o.report {
        std::fs::write(p, report::html(&verdicts, &o.config)).map_err(|e| format!("{p}: {e}"))?;
    }
    Ok(verdicts.iter().all(|v| v.held))
}

/// The simulator and Ringside in this process, on the operator's config made into the drill's.
fn local(
    o: &Options,
    text: &str,
    scenarios: &[Scenario],
    models: &[contract::Declared],
) -> Result<Vec<Verdict>, String> {
    let port = || crate::demo::free_port().map_err(|e| format!("no free port: {e}"));
    let sim_addr = SocketAddr::from(([127, 0, 0, 1], port()?));
    let sim = crate::simulate::start(crate::simulate::SimOptions {
        listen: sim_addr,
        events: 8,
        interval_ms: 20,
        ..Default::default()
    })?;
    let (proxy_port, admin_port) = (port()?, port()?);
    let data_dir = std::env::temp_dir().join(format!("ringside-drill-{}", std::process::id()));
    let mut stage = stage::prepare(
        text,
        sim_addr,
        (proxy_port, admin_port),
        &data_dir.to_string_lossy(),
    )?;
    stage.text = stage.text.replacen(
        "[server]",
        &format!("[server]\nadmin_token_env = \"{ADMIN_ENV}\""),
        1,
    );
    let env = |var: &str| match var {
        ADMIN_ENV => Some(env::fake_key(var)),
        _ => stage.env(var),
    };
    let cfg = crate::config::load_str(&stage.text, &o.config, &env).map_err(|p| {
        let all: Vec<String> = p.iter().map(|x| x.to_string()).collect();
        format!("the config cannot run: {}", all.join("; "))
    })?;
    // Ringside's operational messages are kept and reported per scenario rather than written.
    crate::log::start_capture();
    let server = match crate::server::start(cfg, None) {
        Ok(s) => s,
        Err(e) => {
            crate::log::stop_capture();
            return Err(e);
        }
    };
    let remote = Remote {
        proxy: SocketAddr::from(([127, 0, 0, 1], proxy_port)),
        admin: SocketAddr::from(([127, 0, 0, 1], admin_port)),
        simulator: sim_addr,
        admin_token: Some(env::fake_key(ADMIN_ENV)),
    };
    let result = drive(o, &stage, scenarios, &remote, models);
    server.shutdown();
    server.join();
    crate::log::stop_capture();
    sim.stop();
    let _ = std::fs::remove_dir_all(&data_dir);
    result
}

/// The client side only, against a running Ringside and its simulator. The config says which
/// routes and connections there are; each key is the value of its `key_env` here (the key that
/// Ringside sends the simulator), so that key-scope faults find it.
fn against(
    o: &Options,
    remote: &Remote,
    text: &str,
    scenarios: &[Scenario],
    models: &[contract::Declared],
) -> Result<Vec<Verdict>, String> {
    let mut stage = stage::prepare(text, remote.simulator, (0, 0), "")?;
    for k in &mut stage.keys {
        match std::env::var(&k.var) {
            Ok(v) if !v.is_empty() => k.key = v,
            _ => crate::log::event(
                "warn",
                "drill: a key-scope fault cannot find this connection's key (its key_env is not set here)",
                serde_json::json!({"provider": k.provider, "connection": k.connection, "key_env": k.var}),
            ),
        }
    }
    call(remote.simulator, "GET", "/_sim/stats", "", None)
        .map_err(|e| format!("the simulator does not answer: {e}"))?;
    drive(o, &stage, scenarios, remote, models)
}

/// Run every scenario in turn, each from a clean state.
fn drive(
    o: &Options,
    stage: &Stage,
    scenarios: &[Scenario],
    remote: &Remote,
    models: &[contract::Declared],
) -> Result<Vec<Verdict>, String> {
    let d = scenario::Drive {
        stage,
        remote,
        token: remote.admin_token.clone().unwrap_or_default(),
        supports: contract::Supports::fold(&stage.declared, models),
        clients: traffic::Shape {
            concurrency: o.concurrency.max(1),
            stream_every: o.stream_every,
            client_retries: o.client_retries,
            deadline: Duration::from_millis(o.deadline_ms),
            cancel_after: None,
            body_bytes: o.body_bytes,
        },
        prices: spend::prices(&stage.text),
    };
    let mut verdicts = Vec::new();
    for (n, s) in scenarios.iter().enumerate() {
        if route_for(stage, s.scope).is_none() {
            if !o.scenarios.is_empty() {
                return Err(format!(
                    "{}: no route of the config has targets of more than one API",
                    s.name
                ));
            }
            // (Said on stderr: the table and the JSON hold what ran.)
            eprintln!(
                "drill: {} skipped: no route of the config has targets of more than one API",
                s.name
            );
            continue;
        }
        let at = (n + 1, scenarios.len());
        let began = report::progress(at, s, None);
        let v = d.scenario(s)?;
        report::progress(at, s, Some((v.held, began)));
        verdicts.push(v);
    }
    Ok(verdicts)
}

/// The watched counters now (empty when the scrape fails: no signal is then reported).
fn metrics(admin: SocketAddr, token: &str) -> std::collections::BTreeMap<String, f64> {
    let auth = format!("Bearer {token}");
    let headers: &[(&str, &str)] = if token.is_empty() {
        &[]
    } else {
        &[("authorization", &auth)]
    };
    client::request(
        admin,
        "GET",
        "/metrics",
        headers,
        b"",
        Duration::from_secs(10),
    )
    .map(|r| signals::scrape(&r.text()))
    .unwrap_or_default()
}

/// A few decision records of requests that did not simply succeed: first those whose client
/// hung up, then other failures, then requests that needed more than one attempt, and the
/// slowest request when it took seconds.
fn samples(all: Vec<serde_json::Value>) -> Vec<serde_json::Value> {
    // The slowest request too, when it waited seconds: what it waited for is in its record.
    let slowest = all
        .iter()
        .filter(|r| r["total_ms"].as_u64().unwrap_or(0) > 2_000)
        .max_by_key(|r| r["total_ms"].as_u64().unwrap_or(0))
        .cloned();
    let (mut failed, other): (Vec<_>, Vec<_>) = all
        .into_iter()
        .partition(|r| r["status"].as_u64().unwrap_or(0) >= 400 || r["outcome"] != "ok");
    failed.sort_by_key(|r| r["outcome"] != "client_gone");
    failed.truncate(3);
    failed.extend(
        other
            .into_iter()
            .filter(|r| r["attempts"].as_array().is_some_and(|a| a.len() > 1))
            .take(2),
    );
    failed.extend(slowest);
    failed
}

/// Every connection reset and every breaker closed, so that scenarios do not inherit.
fn clean_slate(stage: &Stage, admin: SocketAddr, token: &str) {
    for k in &stage.keys {
        let path = format!("/admin/connections/{}/{}/reset", k.provider, k.connection);
        let _ = call(admin, "POST", &path, "", Some(token));
    }
    let mut providers: Vec<&str> = stage.keys.iter().map(|k| k.provider.as_str()).collect();
    providers.dedup();
    for p in providers {
        let _ = call(
            admin,
            "POST",
            &format!("/admin/breakers/{p}/reset"),
            "",
            Some(token),
        );
    }
}

/// The route a scope's fault hits: the first, or for `CrossDialect` the first whose targets
/// speak more than one API (none: the config has no such route).
fn route_for(stage: &Stage, scope: Scope) -> Option<&stage::Route> {
    match scope {
        Scope::CrossDialect => stage.routes.iter().find(|r| r.crosses),
        _ => stage.routes.first(),
    }
}

/// The simulator fault bodies a scenario sets (and later clears).
fn fault_bodies(stage: &Stage, s: &Scenario) -> Vec<String> {
    let Some(route) = route_for(stage, s.scope) else {
        return Vec::new();
    };
    let (provider, model, connection) = &route.primary;
    let serving = |k: &&stage::Key| {
        &k.provider == provider && (k.models.is_empty() || k.models.contains(model))
    };
    let body = |sel: &str, v: &str| serde_json::json!({ sel: v, "spec": s.fault }).to_string();
    match s.scope {
        Scope::Key => {
            let first = stage
                .keys
                .iter()
                .filter(serving)
                .find(|k| connection.as_ref().is_none_or(|c| &k.connection == c));
            first.map(|k| body("key", &k.key)).into_iter().collect()
        }
        Scope::Provider | Scope::CrossDialect => stage
            .keys
            .iter()
            .filter(|k| &k.provider == provider)
            .map(|k| body("key", &k.key))
            .collect(),
        Scope::Account => {
            let first = stage
                .keys
                .iter()
                .filter(serving)
                .find(|k| k.account.is_some());
            let account = first.and_then(|k| k.account.as_ref());
            stage
                .keys
                .iter()
                .filter(|k| &k.provider == provider && k.account.as_ref() == account)
                .map(|k| body("key", &k.key))
                .collect()
        }
        Scope::Model => vec![body("model", model)],
        Scope::Primaries => {
            let mut models: Vec<&String> = stage.routes.iter().map(|r| &r.primary.1).collect();
            models.sort();
            models.dedup();
            models.into_iter().map(|m| body("model", m)).collect()
        }
    }
}

/// What the simulator counted: attempts, keys over their cap, requests that reached a model
/// without what they needed.
fn upstream(
    stage: &Stage,
    supports: &contract::Supports,
    stats: &serde_json::Value,
) -> verdict::Upstream {
    let over_cap = stage
        .keys
        .iter()
        .filter_map(|k| {
            let cap = k.max_concurrent?;
            let peak = stats["keys"][&k.key]["peak_concurrency"].as_u64()?;
            (peak > cap).then(|| (format!("{}/{}", k.provider, k.connection), peak, cap))
        })
        .collect();
    verdict::Upstream {
        attempts: stats["total"].as_u64().unwrap_or(0),
        over_cap,
        contract: contract::violations(&stage.keys, supports, stats),
    }
}

fn call(
    to: SocketAddr,
    method: &str,
    path: &str,
    body: &str,
    token: Option<&str>,
) -> Result<serde_json::Value, String> {
    let auth = token
        .filter(|t| !t.is_empty())
        .map(|t| format!("Bearer {t}"));
    let mut headers = vec![("content-type", "application/json")];
    if let Some(a) = &auth {
        headers.push(("authorization", a.as_str()));
    }
    let r = client::request(
        to,
        method,
        path,
        &headers,
        body.as_bytes(),
        Duration::from_secs(10),
    )
    .map_err(|e| format!("{method} {path}: {e}"))?;
    if r.status >= 300 {
        return Err(format!("{method} {path}: {} {}", r.status, r.text()));
    }
    Ok(r.json())
}
