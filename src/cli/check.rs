//! `ringside check`: validate a config and print what the server would run with, or every
//! problem in it, in one run.

use crate::config::{load_file, real_env};

/// Validate a config and print what it sets up, or every problem in it.
pub fn run(path: &str) -> Result<(), String> {
    // A report piped into `head` ends quietly when the pipe closes, as other tools do (Rust
    // ignores SIGPIPE, which turns the closed pipe into a panic in `println!`).
    // SAFETY: restoring the default disposition of one signal, before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    // Problems and warnings go to stderr, the report to stdout.
    for w in super::env_check::warnings(&real_env) {
        eprintln!("warning: {w}");
    }
    match load_file(path, &real_env) {
        Ok(cfg) => {
            let data_dir_note = match writable(&cfg.server.data_dir) {
                Ok(note) => note,
                Err(e) => {
                    eprintln!("server.data_dir: {} {e}", cfg.server.data_dir);
                    return Err(format!("{path}: 1 problem(s)"));
                }
            };
            println!("{path}: ok");
            println!(
                "  listen {} (admin {}), {} worker(s), driver {}",
                cfg.server.listen,
                cfg.server.admin_listen,
                cfg.server.workers,
                cfg.server.driver.as_str()
            );
            if let Some((soft, hard)) = crate::fd_limit::current() {
                print_open_files(&cfg, soft, hard);
            }
            println!("  data_dir {}: {data_dir_note}", cfg.server.data_dir);
            let budgets = budgets_in_force(&cfg);
            for p in &cfg.providers {
                print_provider(&cfg, p, &budgets);
            }
            for r in &cfg.routes {
                println!(
                    "  route {} ({}) -> {} target(s)",
                    r.name,
                    r.strategy.as_str(),
                    r.targets.len()
                );
                if r.cross_dialect {
                    print_translation(&cfg, r);
                }
            }
            print_tenants(&cfg);
            Ok(())
        }
        Err(problems) => {
            for p in &problems {
                eprintln!("{p}");
            }
            Err(format!("{path}: {} problem(s)", problems.len()))
        }
    }
}

/// What the open-file limit allows, and which figure the default client cap takes for this
/// config (`state::descriptor_cap`).
fn print_open_files(cfg: &crate::config::Config, soft: u64, hard: u64) {
    let h1 = crate::fd_limit::streams_allowed(hard);
    let h2 = crate::state::descriptor_cap::clients_allowed(
        crate::fd_limit::budget(hard),
        Default::default(),
    );
    let by_settings = cfg.providers.iter().any(|p| p.endpoint.set_to_http1());
    let applies = if cfg.server.max_connections > 0 {
        format!(
            "; max_connections = {} caps them",
            cfg.server.max_connections
        )
    } else if by_settings {
        "; a provider here is reached over HTTP/1.1 by its settings, so the first applies".into()
    } else {
        String::new()
    };
    println!(
        "  open files: soft limit {soft}, hard {hard}; serve raises it to {hard}, enough for about {h1} held streams over HTTP/1.1 (two descriptors each), about {h2} where every provider speaks HTTP/2 (one each){applies}"
    );
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
/// A provider: where, its resilience profile, how it is reached, its connections.
fn print_provider(
    cfg: &crate::config::Config,
    p: &crate::config::Provider,
    budgets: &crate::flow::settings::Budgets,
) {
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
    print_transport(p);
    print_connections(p, budgets);
}

/// How the provider is reached: TLS and HTTP/2, the egress proxy (and where it came from: a
/// host-wide `HTTPS_PROXY` is easy to miss), the provider's own TLS settings. Credentials only
/// as whether there are any.
fn print_transport(p: &crate::config::Provider) {
    let ep = &p.endpoint;
    let mut line = if ep.tls {
        "    transport: TLS".to_string()
    } else {
        "    transport: plaintext".to_string()
    };
    line += match ep.http2 {
        crate::config::Http2::Auto if ep.tls => ", HTTP/2 where the provider offers it",
        crate::config::Http2::Auto => ", HTTP/1.1",
        crate::config::Http2::Always => ", HTTP/2 only",
        crate::config::Http2::Never => ", HTTP/1.1 only",
    };
    match &ep.via {
        Some(v) => {
            let auth = if v.authorization.is_some() {
                "with credentials"
            } else {
                "without credentials"
            };
            line += &format!(
                ", through proxy {}:{} (from {}, {auth})",
                v.host, v.port, v.from
            );
        }
        None => line += ", direct",
    }
    if let Some(own) = &ep.own_tls {
        if own.ca_pem.is_some() {
            line += ", its own CA";
        }
        if own.client_cert_pem.is_some() {
            line += ", a client certificate";
        }
        if let Some(name) = &own.server_name {
            line += &format!(", server name and Host {name}");
        }
    }
    println!("{line}");
}

fn print_connections(p: &crate::config::Provider, budgets: &crate::flow::settings::Budgets) {
    use crate::flow::settings::Knob;
    println!("{}", budget_sources());
    for c in &p.connections {
        let f = &c.flow;
        let show = |k: Knob, own: Option<u64>| {
            let v = budgets.effective(k, own);
            format!("{} {} ({})", k.name(), v.value, v.source.as_str())
        };
        println!(
            "    connection {}: max_concurrent {}, min_time_ms {}, on_saturation {}, {}, {}, {}",
            c.id,
            if f.max_concurrent == 0 {
                "unlimited".to_string()
            } else {
                f.max_concurrent.to_string()
            },
            f.min_time_ms,
            f.on_saturation.as_str(),
            show(Knob::MaxWaitMs, f.max_wait_ms),
            show(Knob::ExecutionMaxWaitMs, f.execution_max_wait_ms),
            show(Knob::MaxQueueDepth, f.max_queue_depth),
        );
    }
}

/// Whether the server can use its data dir: made if missing, and written to.
fn writable(dir: &str) -> Result<&'static str, String> {
    // Tried, not guessed: made as `serve` makes it (its store inside), then a file written and
    // removed, so that a directory `check` passes is one `serve` can use.
    let existed = std::path::Path::new(dir).is_dir();
    let store = std::path::Path::new(dir).join("store");
    std::fs::create_dir_all(&store).map_err(|e| format!("cannot be created: {e}"))?;
    let probe = store.join(format!(".check-{}", std::process::id()));
    std::fs::write(&probe, b"").map_err(|e| format!("is not writable by this user: {e}"))?;
    let _ = std::fs::remove_file(&probe);
    Ok(if existed {
        "writable"
    } else {
        "created, writable"
    })
}

/// Which of a route's targets serve clients of another API, translated, and what they refuse.
fn print_translation(cfg: &crate::config::Config, r: &crate::config::RouteSpec) {
    use crate::dialect::Endpoint;
    use crate::translate::session::target_api;
    for t in &r.targets {
        let Some(p) = cfg.providers.iter().find(|p| p.id == t.provider) else {
            continue;
        };
        let clients: Vec<(&str, crate::translate::Api)> = [
            Endpoint::ChatCompletions,
            Endpoint::Responses,
            Endpoint::Messages,
        ]
        .into_iter()
        .filter_map(|e| {
            Some((
                crate::translate::Api::of_endpoint(e)?.as_str(),
                target_api(e, p.dialect)?,
            ))
        })
        .collect();
        if clients.is_empty() {
            continue;
        }
        let served: Vec<String> = clients
            .iter()
            .map(|(c, a)| format!("{c} as {}", a.as_str()))
            .collect();
        let mut refused: Vec<&str> = Vec::new();
        for (_, a) in &clients {
            for x in crate::translate::policy::refused_by(*a) {
                if !refused.contains(&x) {
                    refused.push(x);
                }
            }
        }
        println!(
            "    {}/{}: translated for {}; refuses {} (docs/dialects.md)",
            t.provider,
            t.model,
            served.join(", "),
            refused.join(", ")
        );
    }
}

/// The tenants' budgets, and the served models without a price (billed $0 against a dollar
/// budget: the operator adds them to `[[prices]]`).
fn print_tenants(cfg: &crate::config::Config) {
    for r in &cfg.tenants.rules {
        let b = r.budget;
        println!(
            "  tenant {}: {} tokens/day, {} tokens/month, ${}/day, ${}/month (0: none)",
            r.name,
            b.tokens_per_day,
            b.tokens_per_month,
            b.micro_usd_per_day as f64 / 1e6,
            b.micro_usd_per_month as f64 / 1e6
        );
    }
    let mut unpriced: Vec<String> = Vec::new();
    for p in &cfg.providers {
        let routed = cfg.routes.iter().flat_map(|r| &r.targets);
        let models = p.connections.iter().flat_map(|c| &c.models);
        let targets = routed.filter(|t| t.provider == p.id).map(|t| &t.model);
        for m in models.chain(targets).filter(|m| m.as_str() != "*") {
            let name = format!("{}/{m}", p.id);
            if cfg.prices.of(&p.id, m).is_none() && !unpriced.contains(&name) {
                unpriced.push(name);
            }
        }
    }
    if !unpriced.is_empty() {
        let dollars = cfg
            .tenants
            .rules
            .iter()
            .any(|r| r.budget.micro_usd_per_day > 0 || r.budget.micro_usd_per_month > 0);
        let what = if dollars { "warning" } else { "note" };
        println!(
            "  {what}: no price for {} (billed $0 against dollar budgets; add them to [[prices]])",
            unpriced.join(", ")
        );
    }
}
