//! The `[resilience]` section as written by operators: cooldown and breaker tuning, model
//! lockouts, classification rules and restatement rules (validated in `config/resilience.rs`).

use serde::Deserialize;

#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields, default)]
pub struct ResilienceSection {
    /// Cap on a connection cooldown (also on rate-limit hints).
    pub max_cooldown_ms: u64,
    /// Quota exhaustion without a reset hint cools the key this long.
    pub quota_cooldown_ms: u64,
    /// Default request deadline (a client may send `x-ringside-deadline-ms`).
    pub deadline_ms: u64,
    /// Most time one request spends waiting out cooldowns.
    pub max_wait_ms: u64,
    /// The opt-in provider window gate.
    pub provider_gate: bool,
    /// The built-in relay quota restatement (403/400 + 额度不足 -> 429).
    pub builtin_restate: bool,
    /// What a plain 429 cools first: "model" (the model on the key; the key once a second
    /// model is limited too) or "connection" (the key).
    pub rate_limit_scope: String,
    /// Recent decision records kept for the admin API: those worth explaining (a retry, a
    /// wait, an error, a refusal) ...
    pub decision_ring: usize,
    /// ... and, in a ring of their own, plain first-try successes (kept small: the ring's
    /// memory is touched by every request, see `runtime::decisions`).
    pub decision_ring_plain: usize,
    /// Distinct tenants whose failures it takes to open a provider's breaker (default: 2 with
    /// client keys, 1 without).
    pub breaker_min_tenants: Option<u32>,
    /// The request header that says a request is a client's retry, with its retry number (the
    /// OpenAI and Anthropic SDKs send `x-stainless-retry-count`; "" turns this off).
    pub client_retry_header: String,
    /// How long (ms) a request Ringside gave up on is remembered: the same request (same
    /// client or session, same body) again within it is the client's retry, and gets only what
    /// is left of the first one's attempts (0 turns this off).
    pub retry_window_ms: u64,
    /// Jitter on the waits Ringside computes (backoff cooldowns, breaker open time, lease
    /// `Retry-After`), ± this fraction (0 to 0.5; 0 turns it off). Waits an upstream announced
    /// are honoured as given.
    pub jitter: f64,
    pub lockout: LockoutSection,
    pub rules: Vec<RuleSection>,
    pub restate: Vec<RestateSection>,
}

impl Default for ResilienceSection {
    fn default() -> Self {
        ResilienceSection {
            max_cooldown_ms: 1_800_000,
            quota_cooldown_ms: 3_600_000,
            deadline_ms: 600_000,
            max_wait_ms: 30_000,
            provider_gate: false,
            builtin_restate: true,
            rate_limit_scope: "model".into(),
            decision_ring: 1024,
            decision_ring_plain: 64,
            breaker_min_tenants: None,
            client_retry_header: "x-stainless-retry-count".into(),
            retry_window_ms: crate::resilience::settings::DEFAULT_RETRY_WINDOW_MS,
            jitter: 0.2,
            lockout: LockoutSection::default(),
            rules: Vec::new(),
            restate: Vec::new(),
        }
    }
}

#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields, default)]
pub struct LockoutSection {
    pub enabled: bool,
    pub codes: Vec<u16>,
    pub base_ms: u64,
    pub max_ms: u64,
    pub max_steps: u32,
    pub exponential: bool,
}

impl Default for LockoutSection {
    /// The resolved settings' defaults are the one source of truth.
    fn default() -> Self {
        let d = crate::resilience::lockout::LockoutSettings::default();
        LockoutSection {
            enabled: d.enabled,
            codes: d.codes,
            base_ms: d.base_ms,
            max_ms: d.max_ms,
            max_steps: d.max_steps,
            exponential: d.exponential,
        }
    }
}

/// An operator classification rule (evaluated before the built-in ones).
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct RuleSection {
    pub id: String,
    #[serde(default)]
    pub provider: Option<String>,
    #[serde(default)]
    pub statuses: Vec<u16>,
    /// Case-insensitive body substrings (never regexes).
    #[serde(default)]
    pub markers: Vec<String>,
    /// `"header-name: substring"`.
    #[serde(default)]
    pub header_markers: Vec<String>,
    #[serde(default)]
    pub exclude: Vec<String>,
    pub reason: String,
    #[serde(default = "default_scope")]
    pub scope: String,
    #[serde(default)]
    pub cooldown_ms: Option<u64>,
}

fn default_scope() -> String {
    "connection".into()
}

/// An operator restatement rule.
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct RestateSection {
    pub id: String,
    #[serde(default)]
    pub provider: Option<String>,
    pub from: Vec<u16>,
    #[serde(default = "default_to")]
    pub to: u16,
    pub markers: Vec<String>,
    #[serde(default)]
    pub exclude: Vec<String>,
    #[serde(default = "default_restate_ms")]
    pub retry_after_ms: u64,
}

fn default_to() -> u16 {
    429
}

fn default_restate_ms() -> u64 {
    60_000
}
