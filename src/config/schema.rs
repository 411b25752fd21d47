//! The TOML file as written by operators. Unknown keys are errors (typos must not pass silently).

use serde::Deserialize;

// The `[resilience]` section and its rules are in `schema_resilience.rs`; providers, their
// connections and accounts, and routes in `schema_providers.rs`.
pub use super::schema_budgets::*;
pub use super::schema_providers::*;
pub use super::schema_resilience::*;
pub use super::schema_telemetry::*;

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
    #[serde(default)]
    pub telemetry: TelemetrySection,
    /// What models support, by name or pattern (`claude-*`): over the built-in table, judged
    /// before a fallback to a provider of another API.
    #[serde(default)]
    pub models: Vec<ModelSection>,
    /// Tenants' limits and budgets, and what tokens cost (`schema_budgets.rs`).
    #[serde(default)]
    pub tenants: Vec<TenantSection>,
    #[serde(default)]
    pub prices: Vec<PriceSection>,
    #[serde(default)]
    pub idempotency: IdempotencySection,
}

/// `[[models]]`: what a model supports (unset: the built-in table's word, else unrestricted).
#[derive(Debug, Default, Deserialize, Clone, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ModelSection {
    /// A model name, or a pattern where `*` stands for any run of characters.
    pub name: String,
    #[serde(default)]
    pub context_window: Option<u64>,
    /// The most output the model gives in one answer.
    #[serde(default)]
    pub max_output_tokens: Option<u64>,
    #[serde(default)]
    pub tools: Option<bool>,
    #[serde(default)]
    pub vision: Option<bool>,
    #[serde(default)]
    pub structured_output: Option<bool>,
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
    /// Pin a session (`x-ringside-session`, `x-session-id`, `x-codex-session-id`, the agents'
    /// `x-claude-code-session-id` and `session-id`) to the connection it used for this long;
    /// 0 disables.
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
    /// A streaming request with nothing to send for this long (a queue, a cooldown, a slow
    /// first byte) gets its head and then the dialect's keep-alive every this many ms, so
    /// that read timeouts of SDKs and load balancers do not fire; 0 = off (a route's own
    /// `keepalive_ms` wins).
    pub keepalive_ms: u64,
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
            keepalive_ms: 0,
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
    /// TLS on the data port: a PEM certificate chain and its key (both or neither).
    pub tls_cert_file: Option<String>,
    pub tls_key_file: Option<String>,
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
            tls_cert_file: None,
            tls_key_file: None,
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
    /// Connects under way at once per server and core (`upstream::connect_gate`); 0: no limit.
    pub connects_in_flight: u32,
    /// Time from sending the request to the response head.
    pub first_byte_timeout_ms: u64,
    /// Longest silence between two reads of a response body.
    pub idle_read_timeout_ms: u64,
    /// Idle connections kept per upstream, per core. Large by default: a wave of held streams
    /// that end together comes back as a wave of new ones, each needing a connection.
    pub pool_max_idle_per_upstream: usize,
    pub pool_idle_timeout_ms: u64,
    /// "webpki" | "system" | "both"
    pub tls_roots: String,
    /// Extra PEM CA file trusted for private upstreams.
    pub ca_file: Option<String>,
    pub dns_ttl_ms: u64,
    /// Most upstream attempts per client request (retries and fallbacks together).
    pub max_attempts: u32,
    /// `https://` providers without a `proxy` of their own go through `HTTPS_PROXY` unless
    /// `NO_PROXY` names them (loopback hosts never do).
    pub proxy_from_env: bool,
    /// An HTTP/2 connection to a provider is PINGed this often, busy or idle...
    pub h2_ping_interval_ms: u64,
    /// ...and closed when a PING goes unanswered this long (its streams fail as one lost
    /// connection).
    pub h2_ping_timeout_ms: u64,
}

impl Default for UpstreamSection {
    fn default() -> Self {
        UpstreamSection {
            connect_timeout_ms: 5_000,
            connects_in_flight: 128,
            first_byte_timeout_ms: 120_000,
            idle_read_timeout_ms: 600_000,
            pool_max_idle_per_upstream: 4096,
            pool_idle_timeout_ms: 60_000,
            tls_roots: "webpki".into(),
            ca_file: None,
            dns_ttl_ms: 30_000,
            max_attempts: 3,
            proxy_from_env: true,
            h2_ping_interval_ms: 30_000,
            h2_ping_timeout_ms: 10_000,
        }
    }
}
