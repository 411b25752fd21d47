//! The TOML file as written by operators. Unknown keys are errors (typos must not pass silently).

use serde::Deserialize;

// The `[resilience]` section and its rules are in `schema_resilience.rs`.
pub use super::schema_resilience::*;

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
    #[serde(default)]
    pub resilience: ResilienceSection,
    #[serde(default)]
    pub flow: FlowSection,
    #[serde(default)]
    pub stream: StreamSection,
    #[serde(default)]
    pub clients: Vec<ClientSection>,
    #[serde(default)]
    pub store: StoreSection,
    #[serde(default)]
    pub session: SessionSection,
    #[serde(default)]
    pub fleet: FleetSection,
}

/// Fleet mode: several instances share what they learn through Redis (or Valkey).
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields, default)]
pub struct FleetSection {
    /// `redis://host:port[/db]`, or `rediss://` for TLS; empty: fleet mode off. Never a
    /// password in it: `password_env` names the variable that holds it.
    pub redis_url: String,
    pub password_env: Option<String>,
    /// The variable holding the fleet's shared secret (required): every message and entry a
    /// member writes to Redis is signed with it, and what is not signed with it is ignored.
    pub secret_env: Option<String>,
    /// An ACL user name, if Redis has users.
    pub username: Option<String>,
    /// How this instance is named to the others (default: host name and listen port).
    pub instance_id: Option<String>,
    /// Prefix of every key and channel (several fleets can share one Redis).
    pub key_prefix: String,
    /// Each Redis call's limit.
    pub timeout_ms: u64,
    /// What a capped connection admits while Redis is away: "local_share" (its cap divided by
    /// the instances last seen, at least 1) or "reject" (nothing).
    pub when_unavailable: String,
}

impl Default for FleetSection {
    fn default() -> Self {
        FleetSection {
            redis_url: String::new(),
            password_env: None,
            secret_env: None,
            username: None,
            instance_id: None,
            key_prefix: "ringside".into(),
            timeout_ms: 500,
            when_unavailable: "local_share".into(),
        }
    }
}

/// Session affinity (soft pins).
#[derive(Debug, Default, Deserialize, Clone)]
#[serde(deny_unknown_fields, default)]
pub struct SessionSection {
    /// Pin a session (`x-ringside-session`, `x-session-id`, `x-codex-session-id`) to the
    /// connection it used for this long; 0 disables.
    pub affinity_ttl_ms: u64,
    /// Default TTL of an exclusive session lease (0 = 120 s; clamped to 1 s - 30 min).
    pub lease_ttl_ms: u64,
}

/// The durable store under `server.data_dir`.
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields, default)]
pub struct StoreSection {
    pub map_size_mb: u64,
    /// "durable" (sync every commit) or "fast" (no sync: the last writes may be lost on power loss).
    pub durability: String,
    /// Environment variable with the key that seals refreshed OAuth tokens in the store; without
    /// it they are kept in memory only (never in clear).
    pub token_key_env: Option<String>,
}

impl Default for StoreSection {
    fn default() -> Self {
        StoreSection {
            map_size_mb: 1024,
            durability: "durable".into(),
            token_key_env: None,
        }
    }
}

/// A client key. The key itself is never in the file: `key_env` names the variable that holds
/// it (hashed at load), or `key_sha256` is its SHA-256 in hex.
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct ClientSection {
    pub id: String,
    #[serde(default)]
    pub key_env: Option<String>,
    #[serde(default)]
    pub key_sha256: Option<String>,
    /// "inference" | "lease:exclusive" | "admin"
    #[serde(default = "default_scopes")]
    pub scopes: Vec<String>,
    /// `provider/connection` this key may use (absent: all).
    #[serde(default)]
    pub allowed_connections: Option<Vec<String>>,
    /// Tenant for quotas and fair queueing (default: the id).
    #[serde(default)]
    pub tenant: Option<String>,
    /// Priority class of its requests, 0 (first) to 9.
    #[serde(default = "default_client_priority")]
    pub priority: u8,
    /// When its streams' events are joined into fuller segments (`stream.coalesce_events` for
    /// this key's requests; absent: the instance's setting).
    #[serde(default)]
    pub coalesce_events: Option<crate::sse::Coalesce>,
}

fn default_scopes() -> Vec<String> {
    vec!["inference".into()]
}

fn default_client_priority() -> u8 {
    5
}

/// The stream guard.
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields, default)]
pub struct StreamSection {
    /// Read streams along at all (false: plain relay, for comparison benchmarks).
    pub guard: bool,
    /// Before commit, hold a 200 stream's first bytes at most this long (0 disables early
    /// recovery) and this many bytes; commit at the first useful event.
    pub holdback_ms: u64,
    pub holdback_bytes: usize,
    /// Time from the response head to the first useful event.
    pub readiness_timeout_ms: u64,
    /// Longest a streamed attempt may last (0 = no limit beyond the execution budget).
    pub total_timeout_ms: u64,
    /// The throughput watchdog (also `STREAM_THROUGHPUT_WATCHDOG_ENABLED=true`).
    pub watchdog: bool,
    pub watchdog_warmup_ms: u64,
    pub watchdog_window_ms: u64,
    pub watchdog_min_bytes_per_second: u64,
    pub watchdog_min_useful_bytes: u64,
    /// When to join a streamed answer's writes into fuller segments (`MSG_MORE`): less CPU
    /// per event, events held up to about 200 ms. `"auto"`: only while the core is busy;
    /// `true`: always, for traffic nobody watches arrive token by token; `false`: never.
    pub coalesce_events: crate::sse::Coalesce,
    /// How late (ms) a core's tick may wake before it counts as late; a quarter of the last
    /// second's ticks late makes the core busy, and `"auto"` joins its streams' events.
    pub coalesce_busy_lag_ms: u64,
    /// The share of the last second (percent) a core may wait for a CPU before it counts as
    /// busy; quiet again at half of it (`core_load::cpu_wait`).
    pub coalesce_busy_wait_percent: u64,
}

impl Default for StreamSection {
    fn default() -> Self {
        StreamSection {
            guard: true,
            holdback_ms: 750,
            holdback_bytes: 64 * 1024,
            readiness_timeout_ms: 80_000,
            total_timeout_ms: 0,
            watchdog: false,
            watchdog_warmup_ms: 30_000,
            watchdog_window_ms: 30_000,
            watchdog_min_bytes_per_second: 4,
            watchdog_min_useful_bytes: 1,
            coalesce_events: crate::sse::Coalesce::WhenBusy,
            coalesce_busy_lag_ms: 4,
            coalesce_busy_wait_percent: crate::core_load::WAIT_MARK_PERCENT.into(),
        }
    }
}

/// Process-wide flow control: per-tenant quotas (a tenant is a client key).
#[derive(Debug, Default, Deserialize, Clone)]
#[serde(deny_unknown_fields, default)]
pub struct FlowSection {
    /// 0 = unlimited.
    pub tenant_requests_per_minute: u32,
    pub tenant_tokens_per_minute: u64,
    pub tenant_max_concurrent: u32,
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
    /// Accept a non-loopback `admin_listen` without a token (warned at every start).
    pub admin_unauthenticated_ok: bool,
    /// Host names (besides IP literals and `localhost`) the admin port answers to.
    pub admin_hosts: Vec<String>,
    /// Client connections held at once on the data port, all cores together (0: derived from
    /// the open-file limit).
    pub max_connections: usize,
    /// Connections from one client address that have not yet presented a valid key.
    pub max_unauthenticated_per_address: usize,
    /// Connections one client address may hold (0: all but a sixteenth of `max_connections`,
    /// so that one host cannot lock out the others); `trusted_proxies` are exempt.
    pub max_connections_per_address: usize,
    /// Host names the data port answers to without client keys, besides IP literals and local
    /// names (`localhost`, names without a dot, `.local`, `.internal`, ...): a `Host` naming
    /// anything else gets 421 (DNS rebinding). `*.example.com` covers its subdomains.
    pub hosts: Vec<String>,
    /// How long in-flight requests and streams may run on after the listeners close.
    pub shutdown_grace_ms: u64,
    /// How long the data port keeps accepting after a drain starts (with `/readyz` at 503), so
    /// that load balancers see the instance leave before its port closes.
    pub drain_delay_ms: u64,
    /// One JSON access-log line per request on stdout.
    pub access_log: bool,
    /// Pin each worker to a CPU.
    pub pin_workers: bool,
    /// Peers (addresses or CIDR ranges) whose `X-Forwarded-For` is believed: the access log
    /// records the first hop they name as the client.
    pub trusted_proxies: Vec<String>,
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
            admin_unauthenticated_ok: false,
            admin_hosts: Vec::new(),
            max_connections: 0,
            max_unauthenticated_per_address: 256,
            max_connections_per_address: 0,
            hosts: Vec::new(),
            // LLM streams run for minutes: the grace is sized to let them finish.
            shutdown_grace_ms: 120_000,
            drain_delay_ms: 5_000,
            access_log: true,
            pin_workers: true,
            trusted_proxies: Vec::new(),
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
    /// A client that accepts no byte of its answer for this long is cut (per write).
    pub client_send_timeout_ms: u64,
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
            client_send_timeout_ms: 60_000,
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
    /// Idle connections kept per upstream, per core. Large by default: a wave of held streams
    /// that end together comes back as a wave of new ones, and every connection closed in
    /// between is a connect (and a TLS handshake) for one of them.
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
            pool_max_idle_per_upstream: 4096,
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
    /// For Anthropic with `auth = "oauth"`: the `anthropic-beta` value OAuth clients must send
    /// (merged with the client's own).
    #[serde(default)]
    pub oauth_beta: Option<String>,
    #[serde(default)]
    pub connections: Vec<ConnectionSection>,
    /// Resilience profile: "auto" (local for loopback upstreams, else by auth), "oauth",
    /// "api_key" or "local".
    #[serde(default = "default_profile")]
    pub profile: String,
    /// Overrides of the profile's breaker thresholds.
    #[serde(default)]
    pub breaker: BreakerOverride,
    /// Overrides of the profile's connection cooldown.
    #[serde(default)]
    pub cooldown: CooldownOverride,
    /// Region and policy tags of this provider (requests may require them).
    #[serde(default)]
    pub region: Option<String>,
    #[serde(default)]
    pub tags: Vec<String>,
    /// Client headers that carry credentials or billing scope (`openai-organization`,
    /// `openai-project`, `x-goog-api-key`, `ocp-apim-subscription-key`) are dropped unless named
    /// here.
    #[serde(default)]
    pub forward_headers: Vec<String>,
    /// Limits of an upstream account (organisation) shared by the keys that name it.
    #[serde(default)]
    pub accounts: Vec<AccountSection>,
}

fn default_profile() -> String {
    "auto".into()
}

#[derive(Debug, Default, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct BreakerOverride {
    pub degraded_at: Option<u32>,
    pub open_at: Option<u32>,
    pub open_ms: Option<u64>,
}

#[derive(Debug, Default, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct CooldownOverride {
    pub base_ms: Option<u64>,
    pub max_level: Option<u8>,
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
    /// Upstream account (organisation) this key belongs to. Keys of one account share its
    /// limits: a rate limit or quota wall on one cools them all, so that extra keys are never
    /// used to evade a limit.
    #[serde(default)]
    pub account: Option<String>,
    /// Flow control for this key (Bottleneck's knobs); 0 = unlimited.
    #[serde(default)]
    pub max_concurrent: u32,
    /// Minimum spacing between two starts, in ms.
    #[serde(default)]
    pub min_time_ms: u64,
    /// Starts allowed per refresh interval (0 = no reservoir).
    #[serde(default)]
    pub reservoir: i64,
    #[serde(default)]
    pub reservoir_refresh_ms: u64,
    /// "queue" | "reject" | "fail_open" when every slot is taken.
    #[serde(default = "default_saturation")]
    pub on_saturation: String,
    /// Overrides of the process-wide budgets (win over env and admin settings).
    #[serde(default)]
    pub max_wait_ms: Option<u64>,
    #[serde(default)]
    pub execution_max_wait_ms: Option<u64>,
    #[serde(default)]
    pub max_queue_depth: Option<u64>,
    /// Claude subscription (Anthropic OAuth) only: at the five-hour usage wall, accept the
    /// provider's offer to keep serving this account at lower priority (`usage_wall::lane`).
    #[serde(default)]
    pub low_priority_lane: bool,
    /// Claude subscription only: at the five-hour wall, claim the once-a-week limit reset
    /// (`usage_wall::reset`).
    #[serde(default)]
    pub auto_limit_reset: bool,
    /// The account's organization id, for the limit reset's claim.
    #[serde(default)]
    pub organization_uuid: Option<String>,
    /// OAuth only: environment variable with the refresh token (the access token is `key_env`).
    #[serde(default)]
    pub refresh_token_env: Option<String>,
    /// OAuth only: environment variable with the access token's expiry (Unix ms or s), if known.
    #[serde(default)]
    pub expires_at_env: Option<String>,
    /// OAuth only: the token endpoint (Anthropic's by default).
    #[serde(default)]
    pub token_url: Option<String>,
    /// OAuth only: the client id the tokens were issued to (Claude Code's by default).
    #[serde(default)]
    pub client_id: Option<String>,
}

fn default_saturation() -> String {
    "queue".into()
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
    /// Default request deadline for this route (else `resilience.deadline_ms`).
    #[serde(default)]
    pub deadline_ms: Option<u64>,
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
    /// What the target supports; unset means "not restricted".
    #[serde(default)]
    pub tools: Option<bool>,
    #[serde(default)]
    pub vision: Option<bool>,
    #[serde(default)]
    pub structured_output: Option<bool>,
    /// Context window in tokens.
    #[serde(default)]
    pub context_window: Option<u64>,
    /// Overrides the provider's region and tags.
    #[serde(default)]
    pub region: Option<String>,
    #[serde(default)]
    pub tags: Option<Vec<String>>,
    /// Relative price, for the `cost` strategy (lower first).
    #[serde(default)]
    pub cost: Option<f64>,
}

/// `[[providers.accounts]]`: what an upstream account allows across all its keys.
#[derive(Debug, Deserialize, Clone, Default)]
#[serde(deny_unknown_fields)]
pub struct AccountSection {
    pub id: String,
    /// Requests at once across the account's keys (0 = unlimited).
    #[serde(default)]
    pub max_concurrent: u32,
    /// Minimum spacing between two starts across the account's keys, in ms.
    #[serde(default)]
    pub min_time_ms: u64,
}
