//! The `[[providers]]` (with their connections and accounts) and `[[routes]]` sections as
//! written by operators (validated in `config/resolve/providers.rs` and `routes.rs`).

use serde::Deserialize;

#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct ProviderSection {
    pub id: String,
    /// "openai" | "anthropic" | "gemini" | "azure" (OpenAI's APIs at Azure: `api-key`, the
    /// deployment in the path)
    pub dialect: String,
    /// Azure OpenAI: `api-version` (a date such as `2024-10-21`, `preview`, or `v1` for the
    /// `/openai/v1/` API, which takes the deployment as the model).
    #[serde(default)]
    pub api_version: Option<String>,
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
    /// An HTTP CONNECT proxy to reach the provider through (`http://host:port`), or `none`
    /// (direct, whatever `HTTPS_PROXY` says); unset: `HTTPS_PROXY`/`NO_PROXY` decide.
    #[serde(default)]
    pub proxy: Option<String>,
    /// The variable holding the proxy's `user:password`.
    #[serde(default)]
    pub proxy_auth_env: Option<String>,
    /// A PEM CA file trusted for this provider only (beside `[upstream]`'s roots).
    #[serde(default)]
    pub ca_file: Option<String>,
    /// A client certificate chain and its key (PEM) for providers that ask for one (mTLS).
    #[serde(default)]
    pub client_cert_file: Option<String>,
    #[serde(default)]
    pub client_key_file: Option<String>,
    /// The name sent in SNI and checked on the certificate, when not the URL's host (a private
    /// endpoint reached by address).
    #[serde(default)]
    pub tls_server_name: Option<String>,
    /// "auto" (HTTP/2 where the provider's TLS handshake offers it), "always" or "never".
    #[serde(default)]
    pub http2: Option<String>,
}

fn default_profile() -> String {
    "auto".into()
}

#[derive(Debug, Default, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct BreakerOverride {
    pub degraded_at: Option<u32>,
    pub open_at: Option<u32>,
    /// The first opening's time (each consecutive one doubles it, up to the profile's cap).
    pub open_ms: Option<u64>,
    /// How often the prober asks whether the provider is back while it is in trouble (0: it
    /// does not; the open times and cooldowns alone decide).
    pub probe_interval_ms: Option<u64>,
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
    /// Whether targets of another API than the client's are tried, the request and answer
    /// translated (default true).
    #[serde(default = "yes")]
    pub cross_dialect: bool,
    /// This route's keep-alive for waiting streams (else `stream.keepalive_ms`; 0 = off).
    #[serde(default)]
    pub keepalive_ms: Option<u64>,
}

fn yes() -> bool {
    true
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
