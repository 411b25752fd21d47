//! `[[tenants]]` and `[[prices]]` as operators write them: what each tenant may spend and use,
//! and what tokens cost (`flow::spend`, `flow::price`).

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
