//! `[[tenants]]`, `[[prices]]` and `[idempotency]` as operators write them: what each tenant
//! may spend and use, what tokens cost (`flow::spend`, `flow::price`), and how long one
//! request's answer is kept for its duplicates (`proxy::idempotent`).

use serde::Deserialize;

/// A tenant: a client key's `tenant`, or the name a trusted fronting gateway sends in
/// `x-ringside-tenant`. Each limit is optional; the minute limits default to `[flow]`'s.
#[derive(Debug, Default, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct TenantSection {
    pub id: String,
    pub requests_per_minute: Option<u32>,
    pub tokens_per_minute: Option<u64>,
    pub max_concurrent: Option<u32>,
    pub tokens_per_day: Option<u64>,
    pub tokens_per_month: Option<u64>,
    pub usd_per_day: Option<f64>,
    pub usd_per_month: Option<f64>,
}

/// A model's price in dollars per million tokens (over the built-in table).
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct PriceSection {
    pub model: String,
    /// Only this provider's model (else the model wherever it is served).
    pub provider: Option<String>,
    pub input: f64,
    pub output: f64,
    /// Prompt tokens read from the provider's cache (else the input price).
    pub cached_input: Option<f64>,
}

/// `[idempotency]`: one answer per `Idempotency-Key` (per tenant).
#[derive(Debug, Deserialize, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct IdempotencySection {
    /// How long a completed JSON answer is replayed to a duplicate, in seconds (0: the header
    /// is not honoured); at most a day.
    pub window_s: u64,
    /// The most keys kept at once (answers nearest their end make way).
    pub max_keys: usize,
    /// A larger answer is not kept (a later duplicate goes upstream again).
    pub max_answer_bytes: usize,
}

impl Default for IdempotencySection {
    fn default() -> Self {
        IdempotencySection {
            window_s: 300,
            max_keys: 10_000,
            max_answer_bytes: 1 << 20,
        }
    }
}

impl IdempotencySection {
    /// Within its bounds (a day, a million keys, 16 MiB).
    pub fn clamped(&self) -> IdempotencySection {
        IdempotencySection {
            window_s: self.window_s.min(86_400),
            max_keys: self.max_keys.clamp(1, 1_000_000),
            max_answer_bytes: self.max_answer_bytes.clamp(1 << 10, 16 << 20),
        }
    }
}
