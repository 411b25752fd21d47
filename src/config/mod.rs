//! Configuration: the TOML schema, environment overrides, validation with a location for every
//! problem, and the resolved, immutable [`Config`] the cores share.

mod endpoint;
pub use endpoint::{Endpoint, Http2};
mod fleet;
mod parse;
mod problems;
pub use problems::Problem;
mod renumber;
pub use fleet::{FleetSettings, FleetUnavailable};
pub use renumber::NO_SLOT;
mod peek;
mod resilience;
mod resolve;
pub mod schema;
pub use peek::{admin_listen_of, data_dir_of};
mod schema_budgets;
mod schema_providers;
mod schema_resilience;
mod schema_telemetry;
mod strategy;
use crate::dialect::Dialect;
use crate::ids::ConnId;
pub use resolve::budgets::prices_in;
pub use resolve::egress::{Egress, bypassed};
pub use resolve::provider_tls::ProviderTls;
pub use resolve::{available_cores, default_address_share};
pub use schema::FileConfig;
use std::net::SocketAddr;
use std::time::Duration;
pub use strategy::Strategy;

/// A credential. Its Debug and Display never show the value.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Self {
        Secret(s.into())
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(***)")
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DriverChoice {
    Auto,
    Uring,
    Epoll,
}

impl DriverChoice {
    /// As written in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            DriverChoice::Auto => "auto",
            DriverChoice::Uring => "uring",
            DriverChoice::Epoll => "epoll",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuthKind {
    ApiKey,
    OAuth,
}

#[derive(Clone, Debug)]
pub struct Connection {
    pub id: String,
    pub secret: Secret,
    pub models: Vec<String>,
    pub weight: u32,
    pub priority: u32,
    /// The connection's slot in every per-connection table (metrics, state tables).
    pub index: ConnId,
    pub flow: crate::flow::ConnFlow,
    /// Claude subscription accounts: the usage-wall lane and limit reset opt-ins (both off).
    pub usage_wall: crate::resilience::usage_wall::lane::OptIn,
    /// The organization id the limit reset is claimed for.
    pub organization: Option<String>,
    /// OAuth with a refresh token: how the access token is renewed (boxed: most have none).
    pub oauth: Option<Box<OAuthRefresh>>,
}

/// How an OAuth connection's access token is refreshed.
#[derive(Clone, Debug)]
pub struct OAuthRefresh {
    /// The refresh token the environment gave (a refresh may rotate it: the live one is in
    /// `upstream::tokens`).
    pub refresh: Secret,
    /// The token endpoint; its `base_path` is the path.
    pub token_url: Endpoint,
    pub client_id: String,
    /// The access token's expiry (Unix ms), when the environment said.
    pub expires_at_ms: Option<u64>,
}

#[derive(Clone, Debug)]
pub struct Provider {
    pub id: String,
    pub dialect: Dialect,
    /// Azure OpenAI's `api-version` (the provider speaks OpenAI's APIs at Azure's paths, with
    /// `api-key`); `None` for every other provider.
    pub azure_api_version: Option<String>,
    pub auth: AuthKind,
    pub endpoint: Endpoint,
    pub anthropic_version: String,
    /// Anthropic with OAuth: sent in `anthropic-beta`, ahead of the client's own values
    /// (empty for every other provider).
    pub oauth_beta: String,
    pub connections: Vec<Connection>,
    pub region: Option<String>,
    pub tags: Vec<String>,
    /// The provider's place in the per-provider state (breakers, probes): fixed for the life of
    /// the process, so that a reload keeps it (`renumber`).
    pub slot: usize,
    /// Credential and billing headers of clients this provider may receive (lower case).
    pub forward_headers: Vec<String>,
}

#[derive(Clone, Debug)]
pub struct ServerSettings {
    pub listen: SocketAddr,
    pub admin_listen: SocketAddr,
    pub workers: usize,
    pub driver: DriverChoice,
    pub data_dir: String,
    pub admin_token: Option<Secret>,
    /// A non-loopback admin address without a token was allowed explicitly.
    pub admin_unauthenticated_ok: bool,
    /// Extra host names the admin port answers to (DNS-rebinding guard).
    pub admin_hosts: Vec<String>,
    /// Client connections held at once, all cores together (0: what the descriptors allow,
    /// `state::conn_caps::Cap::Descriptors`).
    pub max_connections: usize,
    /// Not-yet-authenticated connections per client address.
    pub max_unauthenticated_per_address: usize,
    /// Connections one client address may hold (trusted proxies are exempt; 0: all but a
    /// sixteenth of the cap in force).
    pub max_connections_per_address: usize,
    /// Host names the open data port answers to besides IP literals and local names
    /// (lower case; `*.x` covers x's subdomains).
    pub hosts: Vec<String>,
    pub shutdown_grace: Duration,
    /// Accepting on after a drain starts, with `/readyz` at 503.
    pub drain_delay: Duration,
    pub access_log: bool,
    pub pin_workers: bool,
    /// Peers whose `X-Forwarded-For` names the client (the access log's `forwarded_for`).
    pub trusted_proxies: Vec<ipnet::IpNet>,
    /// TLS on the data port (`tls_cert_file`, `tls_key_file`), read with the config.
    pub tls: Option<std::sync::Arc<rustls::ServerConfig>>,
}

impl ServerSettings {
    /// Why this admin port would be exposed (reachable from other hosts, no token, no
    /// consent), if it would: the rule `check` and the start apply, and a reload too, on
    /// the address that keeps running.
    pub fn admin_exposure_problem(&self) -> Option<String> {
        resolve::exposure_problem(
            self.admin_listen,
            self.admin_token.is_some(),
            self.admin_unauthenticated_ok,
        )
    }
}

/// A route as the config declares it, its strategy parsed.
#[derive(Clone, Debug)]
pub struct RouteSpec {
    pub name: String,
    pub strategy: Strategy,
    pub targets: Vec<schema::TargetSection>,
    /// Default request deadline for this route (else `resilience.deadline_ms`).
    pub deadline_ms: Option<u64>,
    pub cross_dialect: bool, // targets of another API are tried, translated
    pub keepalive_ms: Option<u32>, // keep-alive of its waiting streams (`stream.keepalive_ms`)
}

/// The validated configuration every core reads (shared behind an `Arc`, never mutated).
#[derive(Clone, Debug)]
pub struct Config {
    pub server: ServerSettings,
    pub limits: schema::LimitsSection,
    pub upstream: schema::UpstreamSection,
    pub providers: Vec<Provider>,
    pub routes: Vec<RouteSpec>,
    /// `[[models]]`: what models support, over the built-in table (`route::eligibility`).
    pub models: Vec<schema::ModelSection>,
    /// (provider index, index within the provider) by connection slot; `NO_SLOT` where a slot
    /// holds no connection of this config (removed by a reload).
    pub locator: Vec<(usize, usize)>,
    /// Resolved resilience settings (profiles, rules, budgets).
    pub resilience: crate::resilience::Settings,
    /// `RINGSIDE_RATE_LIMIT_*` as read at load time (flow budgets' defaults).
    pub flow_env: [Option<u64>; 3],
    /// Upstream accounts with limits of their own (`[[providers.accounts]]`).
    pub accounts: Vec<crate::flow::account::AccountLimits>,
    pub tenant_limits: crate::flow::tenant::TenantLimits,
    pub tenants: resolve::budgets::TenantRules, // `[[tenants]]`: minute limits and budgets
    pub prices: crate::flow::price::Prices,     // `[[prices]]`, over the built-in table
    pub idempotency: schema::IdempotencySection, // `[idempotency]`, within its bounds
    pub stream: crate::sse::StreamSettings,
    /// Client keys (empty: open, sidecar mode).
    pub clients: crate::clients::Clients,
    /// The durable store: map size in bytes, and whether commits skip the sync.
    pub store_map_size: usize,
    pub store_fast: bool,
    /// Seals refreshed OAuth tokens in the store (`[store] token_key_env`).
    pub token_key: Option<Secret>,
    /// Session affinity TTL (0 = off).
    pub affinity_ttl_ms: u64,
    /// Default exclusive-lease TTL.
    pub lease_ttl_ms: u64,
    /// Fleet mode (`[fleet]`), when `redis_url` is set.
    pub fleet: Option<FleetSettings>,
    /// OpenTelemetry export (`[telemetry]`), when an endpoint is set.
    pub telemetry: Option<crate::telemetry::Settings>,
}

impl Config {
    pub fn connection_count(&self) -> usize {
        self.providers.iter().map(|p| p.connections.len()).sum()
    }
    /// How many connection slots the flat indices span (at least `connection_count`; more
    /// after a reload removed connections).
    pub fn slot_count(&self) -> usize {
        self.locator.len()
    }
    /// How many provider slots the provider indices span.
    pub fn provider_slot_count(&self) -> usize {
        self.resilience.providers.len()
    }
    /// (provider, connection) for a flat connection index.
    pub fn connection(&self, index: ConnId) -> Option<(&Provider, &Connection)> {
        let &(pi, ci) = self.locator.get(index.index())?;
        let p = self.providers.get(pi)?;
        Some((p, p.connections.get(ci)?))
    }

    /// A connection's credential, to redact wherever an upstream echoes it (empty if unknown).
    pub fn secret_of(&self, index: ConnId) -> &[u8] {
        self.connection(index)
            .map(|(_, c)| c.secret.expose().as_bytes())
            .unwrap_or_default()
    }

    /// The provider slot of a flat connection index.
    pub fn provider_of(&self, index: ConnId) -> Option<usize> {
        self.connection(index).map(|(p, _)| p.slot)
    }
}

/// Look up environment variables (real or, for the demo and tests, a fixed map).
pub type EnvLookup<'a> = &'a dyn Fn(&str) -> Option<String>;

pub fn real_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// Read, override from the environment, and validate a config file.
pub fn load_file(path: &str, env: EnvLookup) -> Result<Config, Vec<Problem>> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        vec![Problem {
            at: path.to_string(),
            message: format!("cannot read config file: {e}"),
        }]
    })?;
    load_str(&text, path, env)
}

/// Parse and validate config text. `origin` names the file in messages.
pub fn load_str(text: &str, origin: &str, env: EnvLookup) -> Result<Config, Vec<Problem>> {
    let mut file: FileConfig = parse::file_config(text, origin)?;
    let env_problems = apply_env_overrides(&mut file, env);
    match resolve::resolve(file, env) {
        Ok(cfg) if env_problems.is_empty() => Ok(cfg),
        Ok(_) => Err(env_problems),
        Err(mut problems) => {
            problems.splice(0..0, env_problems);
            Err(problems)
        }
    }
}

/// `RINGSIDE_*` variables override the file (useful in containers). A value that cannot be
/// used is a problem named after its variable, never ignored.
fn apply_env_overrides(file: &mut FileConfig, env: EnvLookup) -> Vec<Problem> {
    let mut problems = Vec::new();
    if let Some(v) = env(crate::env_vars::LISTEN) {
        file.server.listen = v;
    }
    if let Some(v) = env(crate::env_vars::ADMIN_LISTEN) {
        file.server.admin_listen = v;
    }
    if let Some(v) = env(crate::env_vars::WORKERS) {
        match v.trim().parse() {
            Ok(n) => file.server.workers = n,
            Err(_) => problems.push(Problem {
                at: crate::env_vars::WORKERS.into(),
                message: format!("`{v}` is not a number of workers (0: one per CPU)"),
            }),
        }
    }
    if let Some(v) = env(crate::env_vars::DRIVER) {
        file.server.driver = v;
    }
    if let Some(v) = env(crate::env_vars::DATA_DIR) {
        file.server.data_dir = v;
    }
    problems
}

#[cfg(test)]
mod tests;
