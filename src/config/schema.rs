//! The TOML file as written by operators. Unknown keys are errors (typos must not pass silently).

use serde::Deserialize;

#[derive(Debug, Default, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    #[serde(default)]
    pub server: ServerSection,
    #[serde(default)]
    pub limits: LimitsSection,
    #[serde(default)]
    pub upstream: UpstreamSection,
    #[serde(default)]
    pub providers: Vec<ProviderSection>,
    #[serde(default)]
    pub routes: Vec<RouteSection>,
}

#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields, default)]
pub struct ServerSection {
    pub listen: String,
    pub admin_listen: String,
    /// 0 = one worker per core.
    pub workers: usize,
    /// "auto" | "uring" | "epoll"
    pub driver: String,
    pub data_dir: String,
    /// Name of the environment variable holding the admin token.
    pub admin_token_env: Option<String>,
    pub shutdown_grace_ms: u64,
    /// One JSON access-log line per request on stdout.
    pub access_log: bool,
    /// Pin each worker to a CPU.
    pub pin_workers: bool,
}

impl Default for ServerSection {
    fn default() -> Self {
        ServerSection {
            listen: "127.0.0.1:8080".into(),
            admin_listen: "127.0.0.1:8081".into(),
            workers: 0,
            driver: "auto".into(),
            data_dir: "./ringside-data".into(),
            admin_token_env: None,
            shutdown_grace_ms: 10_000,
            access_log: true,
            pin_workers: true,
        }
    }
}

#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsSection {
    pub max_head_bytes: usize,
    pub max_headers: usize,
    pub max_body_bytes: usize,
    pub header_read_timeout_ms: u64,
    pub body_read_timeout_ms: u64,
    pub keepalive_idle_ms: u64,
    pub max_requests_per_connection: u64,
}

impl Default for LimitsSection {
    fn default() -> Self {
        LimitsSection {
            max_head_bytes: 32 * 1024,
            max_headers: 100,
            max_body_bytes: 16 * 1024 * 1024,
            header_read_timeout_ms: 10_000,
            body_read_timeout_ms: 60_000,
            keepalive_idle_ms: 60_000,
            max_requests_per_connection: 0,
        }
    }
}

#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields, default)]
pub struct UpstreamSection {
    pub connect_timeout_ms: u64,
    /// Time from sending the request to the response head.
    pub first_byte_timeout_ms: u64,
    /// Longest silence between two reads of a response body.
    pub idle_read_timeout_ms: u64,
    pub pool_max_idle_per_upstream: usize,
    pub pool_idle_timeout_ms: u64,
    /// "webpki" | "system" | "both"
    pub tls_roots: String,
    /// Extra PEM CA file trusted for private upstreams.
    pub ca_file: Option<String>,
    pub dns_ttl_ms: u64,
    /// Most upstream attempts per client request (retries and fallbacks together).
    pub max_attempts: u32,
}

impl Default for UpstreamSection {
    fn default() -> Self {
        UpstreamSection {
            connect_timeout_ms: 5_000,
            first_byte_timeout_ms: 120_000,
            idle_read_timeout_ms: 600_000,
            pool_max_idle_per_upstream: 64,
            pool_idle_timeout_ms: 60_000,
            tls_roots: "webpki".into(),
            ca_file: None,
            dns_ttl_ms: 30_000,
            max_attempts: 3,
        }
    }
}

#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct ProviderSection {
    pub id: String,
    /// "openai" | "anthropic"
    pub dialect: String,
    pub base_url: String,
    /// "api_key" | "oauth"
    #[serde(default = "default_auth")]
    pub auth: String,
    /// Sent as `anthropic-version` when the client did not send one.
    #[serde(default)]
    pub anthropic_version: Option<String>,
    #[serde(default)]
    pub connections: Vec<ConnectionSection>,
}

fn default_auth() -> String {
    "api_key".into()
}

#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct ConnectionSection {
    pub id: String,
    /// Environment variable that holds the credential. Secrets are never inline.
    pub key_env: String,
    #[serde(default)]
    pub models: Vec<String>,
    #[serde(default = "one")]
    pub weight: u32,
    #[serde(default)]
    pub priority: u32,
}

fn one() -> u32 {
    1
}

#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct RouteSection {
    pub name: String,
    #[serde(default = "default_strategy")]
    pub strategy: String,
    pub targets: Vec<TargetSection>,
}

fn default_strategy() -> String {
    "priority".into()
}

#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct TargetSection {
    pub provider: String,
    pub model: String,
    /// Pin this target to one connection of the provider.
    #[serde(default)]
    pub connection: Option<String>,
}
