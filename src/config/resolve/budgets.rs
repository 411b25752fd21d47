//! `[[tenants]]` and `[[prices]]`: validated into the tenants' rules and the price table.

use super::super::problems::Problems;
use super::super::schema::FileConfig;
use crate::flow::price::{Price, Prices};
use crate::flow::spend::Budget;
use crate::flow::tenant::TenantLimits;
use rustc_hash::FxHashMap as HashMap;

/// A configured tenant: its name, its minute limits and its budgets.
#[derive(Clone, Debug)]
pub struct TenantRule {
    pub name: String,
    /// The tenant id requests carry (`clients::tenant_id` of the name).
    pub id: u64,
    pub limits: TenantLimits,
    pub budget: Budget,
}

/// The configured tenants, by tenant id (`clients::tenant_id` of the name).
#[derive(Clone, Debug, Default)]
pub struct TenantRules {
    pub rules: Vec<TenantRule>,
    by_id: HashMap<u64, usize>,
    /// Each configured tenant's id by its name: a gateway's `x-ringside-tenant` is looked up
    /// here rather than hashed (SHA-256 per request cost a tenth of a budgeted request).
    by_name: HashMap<String, u64>,
}

impl TenantRules {
    pub fn of(&self, tenant: u64) -> Option<&TenantRule> {
        self.by_id.get(&tenant).map(|&i| &self.rules[i])
    }

    /// The id of the tenant with this name; an unconfigured name's is its digest's
    /// (`clients::tenant_id`), the same either way.
    pub fn id_of(&self, name: &str) -> u64 {
        match self.by_name.get(name) {
            Some(&id) => id,
            None => crate::clients::tenant_id(name),
        }
    }
}

/// Dollars to micro-dollars: a budget must be a finite amount, not below zero.
fn micro(p: &mut Problems, at: &str, usd: Option<f64>) -> u64 {
    match usd {
        None => 0,
        Some(v) if v.is_finite() && v >= 0.0 => (v * 1e6).round() as u64,
        Some(_) => {
            p.add(at.to_string(), "must be a number of dollars, 0 or more");
            0
        }
    }
}

/// `[flow]`'s tenant limits (every tenant's defaults), `[[tenants]]` and `[[prices]]`.
pub(in crate::config) fn resolve(
    p: &mut Problems,
    file: &FileConfig,
) -> (TenantLimits, TenantRules, Prices) {
    let defaults = TenantLimits {
        requests_per_minute: file.flow.tenant_requests_per_minute,
        tokens_per_minute: file.flow.tenant_tokens_per_minute,
        max_concurrent: file.flow.tenant_max_concurrent,
    };
    (defaults, tenants(p, file, defaults), prices(p, file))
}

fn tenants(p: &mut Problems, file: &FileConfig, defaults: TenantLimits) -> TenantRules {
    let mut out = TenantRules::default();
    for (i, t) in file.tenants.iter().enumerate() {
        let at = format!("tenants[{i}]");
        if t.id.is_empty() || t.id.len() > 128 || t.id.chars().any(|c| c.is_control()) {
            p.add(
                format!("{at}.id"),
                "must be 1-128 characters, no control characters",
            );
            continue;
        }
        let id = crate::clients::tenant_id(&t.id);
        if out.by_id.contains_key(&id) {
            p.add(format!("{at}.id"), format!("duplicate tenant `{}`", t.id));
            continue;
        }
        let rule = TenantRule {
            name: t.id.clone(),
            id,
            limits: TenantLimits {
                requests_per_minute: t
                    .requests_per_minute
                    .unwrap_or(defaults.requests_per_minute),
                tokens_per_minute: t.tokens_per_minute.unwrap_or(defaults.tokens_per_minute),
                max_concurrent: t.max_concurrent.unwrap_or(defaults.max_concurrent),
            },
            budget: Budget {
                tokens_per_day: t.tokens_per_day.unwrap_or(0),
                tokens_per_month: t.tokens_per_month.unwrap_or(0),
                micro_usd_per_day: micro(p, &format!("{at}.usd_per_day"), t.usd_per_day),
                micro_usd_per_month: micro(p, &format!("{at}.usd_per_month"), t.usd_per_month),
            },
        };
        out.by_id.insert(id, out.rules.len());
        out.by_name.insert(t.id.clone(), id);
        out.rules.push(rule);
    }
    out
}

/// The price table a config file states (over the built-in table), its invalid rows left out
/// (`check` says them).
/// Every model a connection serves, priced once now (`Prices::remember`).
pub(super) fn price_served(prices: &mut Prices, providers: &[crate::config::Provider]) {
    prices.remember(providers.iter().flat_map(|pr| {
        pr.connections
            .iter()
            .flat_map(move |c| c.models.iter().map(move |m| (pr.id.as_str(), m.as_str())))
    }));
}

pub fn prices_in(file: &FileConfig) -> Prices {
    prices(&mut Problems::default(), file)
}

fn prices(p: &mut Problems, file: &FileConfig) -> Prices {
    let mut out = Prices::default();
    for (i, s) in file.prices.iter().enumerate() {
        let at = format!("prices[{i}]");
        let ok = |v: f64| v.is_finite() && v >= 0.0;
        if s.model.is_empty() {
            p.add(format!("{at}.model"), "must not be empty");
            continue;
        }
        let cached = s.cached_input.unwrap_or(s.input);
        if !(ok(s.input) && ok(s.output) && ok(cached)) {
            p.add(at, "prices are dollars per million tokens, 0 or more");
            continue;
        }
        let price = Price {
            input: s.input,
            output: s.output,
            cached_input: cached,
        };
        out.entries
            .push((s.provider.clone(), s.model.clone(), price));
    }
    out
}
