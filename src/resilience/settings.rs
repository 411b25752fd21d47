//! Resolved resilience settings: per-provider profiles (OAuth, API key, local) with operator
//! overrides, the lockout settings, rule tables and request budget defaults.

use super::breaker::BreakerProfile;
use super::classify::{Rule, builtin_rules};
use super::cooldown::CooldownProfile;
use super::lockout::LockoutSettings;
use super::restate::RestateRule;
use super::window_gate::GateProfile;
use crate::ids::ConnId;
use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProfileKind {
    OAuth,
    ApiKey,
    Local,
}

impl ProfileKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ProfileKind::OAuth => "oauth",
            ProfileKind::ApiKey => "api_key",
            ProfileKind::Local => "local",
        }
    }
}

/// Everything that shapes how one provider's failures are handled.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProviderPolicy {
    pub kind: ProfileKind,
    #[serde(skip)]
    pub cooldown: CooldownProfile,
    pub breaker: BreakerProfile,
    pub gate: GateProfile,
}

/// Built-in profile defaults (where they differ from the reference gateway's, these are the
/// ones Ringside ships, chosen for its own behaviour).
/// `resilience.retry_window_ms`'s default: an SDK's or an agent's retries of one request come
/// within a minute.
pub const DEFAULT_RETRY_WINDOW_MS: u64 = 60_000;

/// `resilience.jitter`'s default: computed waits vary by ±20 %.
pub const DEFAULT_JITTER_PCT: u8 = 20;

pub fn profile(kind: ProfileKind, max_cooldown_ms: u64, quota_ms: u64) -> ProviderPolicy {
    let (base_ms, max_level) = match kind {
        ProfileKind::OAuth => (5_000, 8),
        ProfileKind::ApiKey => (3_000, 5),
        ProfileKind::Local => (2_000, 3),
    };
    // Open times start short and double with each consecutive opening up to the reference
    // gateway's longest (480 s, 120 s, 60 s): with the prober asking every few hundred ms,
    // they bound only how long a provider that answers probes but fails requests waits.
    let breaker = match kind {
        ProfileKind::OAuth => BreakerProfile {
            degraded_at: 5,
            open_at: 8,
            open_ms: 5_000,
            escalate_after: 1,
            max_multiplier: 96,
            probe_interval_ms: 500,
            probe_timeout_ms: 30_000,
            min_tenants: 1,
            jitter_pct: DEFAULT_JITTER_PCT,
        },
        ProfileKind::ApiKey => BreakerProfile {
            degraded_at: 7,
            open_at: 12,
            open_ms: 3_000,
            escalate_after: 1,
            max_multiplier: 40,
            probe_interval_ms: 300,
            probe_timeout_ms: 30_000,
            min_tenants: 1,
            jitter_pct: DEFAULT_JITTER_PCT,
        },
        ProfileKind::Local => BreakerProfile {
            degraded_at: 2,
            open_at: 2,
            open_ms: 1_000,
            escalate_after: 1,
            max_multiplier: 60,
            probe_interval_ms: 250,
            probe_timeout_ms: 30_000,
            min_tenants: 1,
            jitter_pct: DEFAULT_JITTER_PCT,
        },
    };
    let gate = match kind {
        ProfileKind::OAuth => GateProfile {
            threshold: 10,
            window_ms: 900_000,
            cooldown_ms: 300_000,
        },
        ProfileKind::ApiKey => GateProfile {
            threshold: 15,
            window_ms: 1_800_000,
            cooldown_ms: 600_000,
        },
        ProfileKind::Local => GateProfile {
            threshold: 2,
            window_ms: 300_000,
            cooldown_ms: 60_000,
        },
    };
    ProviderPolicy {
        kind,
        cooldown: CooldownProfile {
            base_ms,
            max_ms: max_cooldown_ms,
            max_level,
            quota_ms,
            auth_retries: 3,
            rejections_to_ban: 3,
            jitter_pct: DEFAULT_JITTER_PCT,
        },
        breaker,
        gate,
    }
}

/// Resolved settings, shared read-only by every core.
#[derive(Clone, Debug)]
pub struct Settings {
    /// By provider index.
    pub providers: Vec<ProviderPolicy>,
    /// Flat connection indices of each provider (for provider-scoped verdicts).
    pub provider_conns: Vec<Vec<ConnId>>,
    /// Other keys of the same upstream account, by flat connection index.
    pub account_siblings: Vec<Vec<ConnId>>,
    pub gate_enabled: bool,
    /// By flat connection index: keys that serve exactly one model (a plain 429 cools them:
    /// there is no other model to keep serving).
    pub one_model: Vec<bool>,
    /// What a plain 429 cools first (`resilience.rate_limit_scope`).
    pub rate_limit_scope: super::rate_limit_scope::RateLimitScope,
    pub lockout: LockoutSettings,
    pub operator_rules: Vec<Rule>,
    pub builtin_rules: Vec<Rule>,
    pub restate: Vec<RestateRule>,
    /// Request budget defaults.
    pub deadline_ms: u64,
    pub max_wait_ms: u64,
    /// How many decision records the admin rings keep: notable ones, plain successes.
    pub decision_ring: usize,
    pub decision_ring_plain: usize,
    /// The header a client's retry number comes in (lower case; empty: not read).
    pub client_retry_header: String,
    /// How long a request given up on is remembered, so that the same request again is known
    /// as the client's retry (`repeats`; 0: never).
    pub retry_window_ms: u64,
    /// Jitter on computed waits, ± percent (`resilience.jitter`).
    pub jitter_pct: u8,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            providers: Vec::new(),
            provider_conns: Vec::new(),
            account_siblings: Vec::new(),
            gate_enabled: false,
            one_model: Vec::new(),
            rate_limit_scope: Default::default(),
            lockout: LockoutSettings::default(),
            operator_rules: Vec::new(),
            builtin_rules: builtin_rules(),
            restate: vec![super::restate::builtin()],
            deadline_ms: 600_000,
            max_wait_ms: 30_000,
            decision_ring: 1024,
            decision_ring_plain: 64,
            client_retry_header: "x-stainless-retry-count".into(),
            retry_window_ms: DEFAULT_RETRY_WINDOW_MS,
            jitter_pct: DEFAULT_JITTER_PCT,
        }
    }
}

impl Settings {
    /// Whether judging an answer may read the header `name`: the retry hints' headers
    /// ([`crate::dialect::ratelimit::judged`]) and the rules' header markers. A held stream
    /// keeps no other header of its response head (`Head::keep_only`).
    pub fn reads_header(&self, name: &[u8]) -> bool {
        let same = |n: &str| n.len() == name.len() && n.as_bytes().eq_ignore_ascii_case(name);
        std::str::from_utf8(name).is_ok_and(crate::dialect::ratelimit::judged)
            || self
                .operator_rules
                .iter()
                .chain(&self.builtin_rules)
                .any(|r| r.header_markers.iter().any(|(h, _)| same(h)))
    }
}

/// `RINGSIDE_PROVIDER_BREAKER_{OAUTH,API_KEY}_{FAILURE_THRESHOLD,FAILURE_WINDOW_MS,COOLDOWN_MS}`
/// override the window-gate profile (any finite number >= 0; garbage is ignored).
pub fn apply_gate_env(
    policy: &mut ProviderPolicy,
    env: &dyn Fn(&str) -> Option<String>,
) -> Vec<String> {
    let prefix = match policy.kind {
        ProfileKind::OAuth => crate::env_vars::BREAKER_OAUTH,
        ProfileKind::ApiKey => crate::env_vars::BREAKER_API_KEY,
        ProfileKind::Local => return Vec::new(),
    };
    let mut used = Vec::new();
    let mut num = |suffix: &str| -> Option<u64> {
        let name = format!("{prefix}{suffix}");
        let v: f64 = env(&name)?.trim().parse().ok()?;
        (v.is_finite() && v >= 0.0).then(|| {
            used.push(name);
            v as u64
        })
    };
    if let Some(v) = num("FAILURE_THRESHOLD") {
        policy.gate.threshold = (v as u32).max(1);
    }
    if let Some(v) = num("FAILURE_WINDOW_MS") {
        policy.gate.window_ms = v;
    }
    if let Some(v) = num("COOLDOWN_MS") {
        policy.gate.cooldown_ms = v;
    }
    used
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profile_defaults_match_the_issue() {
        let o = profile(ProfileKind::OAuth, 1_800_000, 3_600_000);
        assert_eq!(
            (
                o.cooldown.base_ms,
                o.breaker.degraded_at,
                o.breaker.open_at,
                o.breaker.open_ms
            ),
            (5_000, 5, 8, 5_000)
        );
        assert_eq!(
            (o.gate.threshold, o.gate.window_ms, o.gate.cooldown_ms),
            (10, 900_000, 300_000)
        );
        let a = profile(ProfileKind::ApiKey, 1_800_000, 3_600_000);
        assert_eq!(
            (
                a.cooldown.base_ms,
                a.breaker.degraded_at,
                a.breaker.open_at,
                a.breaker.open_ms
            ),
            (3_000, 7, 12, 3_000)
        );
        assert_eq!(
            (a.gate.threshold, a.gate.window_ms, a.gate.cooldown_ms),
            (15, 1_800_000, 600_000)
        );
        let l = profile(ProfileKind::Local, 1_800_000, 3_600_000);
        assert_eq!((l.breaker.open_at, l.breaker.open_ms), (2, 1_000));
        // The longest opening stays the reference gateway's.
        let longest =
            |p: &ProviderPolicy| crate::resilience::breaker::Breaker::max_open_ms(&p.breaker);
        assert_eq!(
            (longest(&o), longest(&a), longest(&l)),
            (480_000, 120_000, 60_000)
        );
    }

    #[test]
    fn gate_env_overrides() {
        let mut a = profile(ProfileKind::ApiKey, 1, 1);
        let env = |n: &str| match n {
            "RINGSIDE_PROVIDER_BREAKER_API_KEY_FAILURE_THRESHOLD" => Some("4".to_string()),
            "RINGSIDE_PROVIDER_BREAKER_API_KEY_COOLDOWN_MS" => Some("junk".to_string()),
            "RINGSIDE_PROVIDER_BREAKER_OAUTH_COOLDOWN_MS" => Some("5".to_string()),
            _ => None,
        };
        let used = apply_gate_env(&mut a, &env);
        assert_eq!((a.gate.threshold, a.gate.cooldown_ms), (4, 600_000));
        assert_eq!(used.len(), 1);
    }
}
