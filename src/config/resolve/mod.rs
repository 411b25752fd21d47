//! Turns a parsed [`FileConfig`] into a [`Config`], collecting every problem (not just the
//! first): one resolver per section (`server`, `providers`, `routes`; `[resilience]`, `[stream]`
//! and `[[clients]]` in `config::resilience`).

pub mod budgets;
pub mod egress;
mod listener_tls;
mod oauth;
pub mod provider_tls;
mod providers;
mod routes;
mod sections;
mod server;

#[cfg(test)]
pub use providers::parse_base_url;
pub(super) use server::exposure_problem;
pub use server::{available_cores, default_address_share};

use super::problems::Problems;
use super::schema::FileConfig;
use super::*;

pub(super) fn resolve(file: FileConfig, env: EnvLookup) -> Result<Config, Vec<Problem>> {
    let mut p = Problems::default();
    let server = server::server(&mut p, &file, env);
    let mut providers = providers::providers(&mut p, &file, env);
    let accounts = providers::accounts(&mut p, &file, &mut providers);
    let routes = routes::routes(&mut p, &file, &providers);
    for (i, m) in file.models.iter().enumerate() {
        if m.name.is_empty() {
            p.add(format!("models[{i}].name"), "must not be empty");
        }
    }
    let resilience = super::resilience::resolve(&mut p, &file, &providers, env);
    let stream = sections::stream(&mut p, &file.stream, env);
    let clients = sections::clients(&mut p, &file, &providers, env);
    let fleet = super::fleet::resolve(&mut p, &file.fleet, &server, env);
    let telemetry = sections::telemetry(&mut p, &file.telemetry, env);
    let (tenant_limits, tenants, prices) = budgets::resolve(&mut p, &file);
    // With client keys (several tenants) a breaker opens only on failures of at least two of
    // them, unless the operator says otherwise; an open (single-tenant) instance keeps one.
    let min_tenants = file
        .resilience
        .breaker_min_tenants
        .unwrap_or(if clients.is_open() { 1 } else { 2 });
    p.in_range(
        "resilience.breaker_min_tenants",
        min_tenants,
        1,
        crate::resilience::breaker::MAX_TENANTS as u32,
    );
    let mut resilience = resilience;
    for pol in &mut resilience.providers {
        pol.breaker.min_tenants = min_tenants;
    }
    store_checks(&mut p, &file.store);
    let token_key = oauth::token_key(&mut p, file.store.token_key_env.as_deref(), env);
    if !p.0.is_empty() {
        return Err(p.0);
    }
    for (i, pr) in providers.iter_mut().enumerate() {
        pr.slot = i;
    }
    let mut prices = prices;
    budgets::price_served(&mut prices, &providers);
    let locator = providers
        .iter()
        .enumerate()
        .flat_map(|(pi, p)| (0..p.connections.len()).map(move |ci| (pi, ci)))
        .collect();
    Ok(Config {
        server,
        limits: file.limits,
        upstream: file.upstream,
        providers,
        routes,
        models: file.models,
        locator,
        resilience,
        flow_env: crate::flow::settings::Budgets::read_env(env),
        accounts,
        tenant_limits,
        tenants,
        prices,
        idempotency: file.idempotency.clamped(),
        stream,
        clients,
        store_map_size: (file.store.map_size_mb.clamp(1, 1 << 20) as usize) << 20,
        store_fast: file.store.durability == "fast",
        token_key,
        affinity_ttl_ms: file.session.affinity_ttl_ms.min(30 * 86_400_000),
        lease_ttl_ms: match file.session.lease_ttl_ms {
            0 => crate::store::leases::DEFAULT_TTL_MS,
            t => t.clamp(
                crate::store::leases::MIN_TTL_MS,
                crate::store::leases::MAX_TTL_MS,
            ),
        },
        fleet,
        telemetry,
    })
}

/// `[store]`'s settings that are checked, not resolved.
fn store_checks(p: &mut Problems, store: &super::schema::StoreSection) {
    if !matches!(store.durability.as_str(), "durable" | "fast") {
        p.add(
            "store.durability",
            format!("`{}` is not one of durable, fast", store.durability),
        );
    }
    p.in_range("store.map_size_mb", store.map_size_mb, 1, 1 << 20);
}
