//! Validating and resolving the `[resilience]` section and each provider's profile into the
//! [`Settings`] the cores read.

use super::problems::Problems;
use super::schema::{FileConfig, ProviderSection};
use super::schema_resilience::{LockoutSection, RestateSection, RuleSection};
use super::{AuthKind, EnvLookup, Provider};
use crate::ids::ConnId;
use crate::resilience::Settings;
use crate::resilience::classify::{Reason, Rule, Scope};
use crate::resilience::lockout::LockoutSettings;
use crate::resilience::rate_limit_scope::RateLimitScope;
use crate::resilience::restate::RestateRule;
use crate::resilience::settings::{ProfileKind, ProviderPolicy, apply_gate_env, profile};

fn is_loopback(host: &str) -> bool {
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

fn policy(
    out: &mut Problems,
    at: &str,
    ps: &ProviderSection,
    p: &Provider,
    r: &super::schema::ResilienceSection,
    env: EnvLookup,
) -> ProviderPolicy {
    let kind = match ps.profile.as_str() {
        "auto" if is_loopback(&p.endpoint.host) => ProfileKind::Local,
        "auto" => match p.auth {
            AuthKind::OAuth => ProfileKind::OAuth,
            AuthKind::ApiKey => ProfileKind::ApiKey,
        },
        "oauth" => ProfileKind::OAuth,
        "api_key" => ProfileKind::ApiKey,
        "local" => ProfileKind::Local,
        other => {
            out.add(
                format!("{at}.profile"),
                format!("`{other}` is not one of auto, oauth, api_key, local"),
            );
            ProfileKind::ApiKey
        }
    };
    let mut pol = profile(kind, r.max_cooldown_ms, r.quota_cooldown_ms);
    apply_gate_env(&mut pol, env);
    let b = &ps.breaker;
    if let Some(v) = b.open_at {
        pol.breaker.open_at =
            out.clamped(&format!("{at}.breaker.open_at"), v.into(), 1, 1000) as u32;
    }
    if let Some(v) = b.degraded_at {
        pol.breaker.degraded_at =
            out.clamped(&format!("{at}.breaker.degraded_at"), v.into(), 1, 1000) as u32;
    }
    pol.breaker.degraded_at = pol.breaker.degraded_at.min(pol.breaker.open_at);
    if let Some(v) = b.open_ms {
        pol.breaker.open_ms = out.clamped(&format!("{at}.breaker.open_ms"), v, 100, 86_400_000);
    }
    if let Some(v) = b.probe_interval_ms
        && v > 0
    {
        pol.breaker.probe_interval_ms =
            out.clamped(&format!("{at}.breaker.probe_interval_ms"), v, 50, 3_600_000);
    } else if b.probe_interval_ms == Some(0) {
        pol.breaker.probe_interval_ms = 0;
    }
    if let Some(v) = ps.cooldown.base_ms {
        pol.cooldown.base_ms = out.clamped(&format!("{at}.cooldown.base_ms"), v, 0, 86_400_000);
    }
    if let Some(v) = ps.cooldown.max_level {
        pol.cooldown.max_level =
            out.clamped(&format!("{at}.cooldown.max_level"), v.into(), 0, 32) as u8;
    }
    pol
}

/// Resolve the resilience settings; problems are appended to `out`.
fn rate_limit_scope(out: &mut Problems, value: &str) -> RateLimitScope {
    RateLimitScope::parse(value).unwrap_or_else(|| {
        out.add(
            "resilience.rate_limit_scope",
            "must be \"model\" or \"connection\"",
        );
        RateLimitScope::default()
    })
}

pub(super) fn resolve(
    out: &mut Problems,
    file: &FileConfig,
    providers: &[Provider],
    env: EnvLookup,
) -> Settings {
    let r = &file.resilience;
    let mut s = Settings::default();
    out.clamped(
        "resilience.max_cooldown_ms",
        r.max_cooldown_ms,
        1_000,
        86_400_000,
    );
    out.clamped(
        "resilience.quota_cooldown_ms",
        r.quota_cooldown_ms,
        1_000,
        30 * 86_400_000,
    );
    s.deadline_ms = out.clamped("resilience.deadline_ms", r.deadline_ms, 1, 86_400_000);
    s.max_wait_ms = out.clamped("resilience.max_wait_ms", r.max_wait_ms, 0, 3_600_000);
    s.decision_ring = out.clamped(
        "resilience.decision_ring",
        r.decision_ring as u64,
        0,
        1_000_000,
    ) as usize;
    s.decision_ring_plain = out.clamped(
        "resilience.decision_ring_plain",
        r.decision_ring_plain as u64,
        0,
        1_000_000,
    ) as usize;
    s.gate_enabled = r.provider_gate;
    s.rate_limit_scope = rate_limit_scope(out, &r.rate_limit_scope);
    s.client_retry_header = client_retry_header(out, &r.client_retry_header);
    s.retry_window_ms = out.clamped("resilience.retry_window_ms", r.retry_window_ms, 0, 600_000);
    s.lockout = lockout(out, &r.lockout);
    let known = |p: &Option<String>| {
        p.as_ref()
            .is_none_or(|id| providers.iter().any(|x| &x.id == id))
    };
    if r.rules.len() > 50 {
        out.add("resilience.rules", "at most 50 operator rules");
    }
    for (i, rs) in r.rules.iter().enumerate() {
        let at = format!("resilience.rules[{i}]");
        if !known(&rs.provider) {
            out.add(format!("{at}.provider"), "no such provider");
        }
        s.operator_rules.push(rule(out, &at, rs));
    }
    let mut restate: Vec<RestateRule> = Vec::new();
    for (i, rs) in r.restate.iter().enumerate() {
        let at = format!("resilience.restate[{i}]");
        if !known(&rs.provider) {
            out.add(format!("{at}.provider"), "no such provider");
        }
        restate.push(restatement(out, &at, rs));
    }
    s.account_siblings = account_siblings(file, providers);
    s.one_model = one_model(providers);
    if r.builtin_restate {
        restate.push(crate::resilience::restate::builtin());
    }
    s.restate = restate;
    if !(0.0..=0.5).contains(&r.jitter) {
        out.add(
            "resilience.jitter",
            "must be 0 to 0.5 (a fraction: 0.2 is ±20 %)",
        );
    }
    let jitter_pct = (r.jitter.clamp(0.0, 0.5) * 100.0).round() as u8;
    s.jitter_pct = jitter_pct;
    for (i, (ps, p)) in file.providers.iter().zip(providers).enumerate() {
        let mut pol = policy(out, &format!("providers[{i}]"), ps, p, r, env);
        pol.cooldown.jitter_pct = jitter_pct;
        pol.breaker.jitter_pct = jitter_pct;
        s.providers.push(pol);
        s.provider_conns
            .push(p.connections.iter().map(|c| c.index).collect());
    }
    s
}

/// `[resilience.lockout]`: per-model lockouts.
fn lockout(out: &mut Problems, l: &LockoutSection) -> LockoutSettings {
    if l.codes.iter().any(|c| !(100..=599).contains(c)) {
        out.add(
            "resilience.lockout.codes",
            "codes must be HTTP statuses (100 to 599)",
        );
    }
    let base_ms = out.clamped("resilience.lockout.base_ms", l.base_ms, 0, 600_000);
    LockoutSettings {
        enabled: l.enabled,
        codes: if l.codes.is_empty() {
            LockoutSettings::default().codes
        } else {
            l.codes.clone()
        },
        base_ms,
        max_ms: out
            .clamped("resilience.lockout.max_ms", l.max_ms, 5_000, 3_600_000)
            .max(base_ms),
        max_steps: out.clamped("resilience.lockout.max_steps", l.max_steps.into(), 0, 20) as u32,
        exponential: l.exponential,
        reset_after_ms: LockoutSettings::default().reset_after_ms,
    }
}

/// One operator rule (`[[resilience.rules]]`), at `at`.
fn rule(out: &mut Problems, at: &str, rs: &RuleSection) -> Rule {
    let reason = Reason::parse(&rs.reason).unwrap_or_else(|| {
        out.add(
            format!("{at}.reason"),
            format!("`{}` is not a known reason", rs.reason),
        );
        Reason::ServerError
    });
    let scope = Scope::parse(&rs.scope).unwrap_or_else(|| {
        out.add(
            format!("{at}.scope"),
            "must be one of request, model, connection, provider",
        );
        Scope::Connection
    });
    let mut header_markers = Vec::new();
    for h in &rs.header_markers {
        match h.split_once(':') {
            Some((n, v)) if !n.trim().is_empty() => {
                header_markers.push((n.trim().to_ascii_lowercase(), v.trim().to_ascii_lowercase()))
            }
            _ => out.add(
                format!("{at}.header_markers"),
                format!("`{h}` is not `name: substring`"),
            ),
        }
    }
    if rs.statuses.is_empty() && rs.markers.is_empty() && header_markers.is_empty() {
        out.add(at, "a rule needs statuses, markers or header_markers");
    }
    Rule {
        id: rs.id.clone(),
        provider: rs.provider.clone(),
        statuses: rs.statuses.clone(),
        markers: rs.markers.iter().map(|m| m.to_lowercase()).collect(),
        codes: Vec::new(),
        header_markers,
        exclude: rs.exclude.iter().map(|m| m.to_lowercase()).collect(),
        reason,
        scope,
        cooldown_ms: rs.cooldown_ms,
    }
}

/// One restatement (`[[resilience.restate]]`), at `at`.
fn restatement(out: &mut Problems, at: &str, rs: &RestateSection) -> RestateRule {
    if rs.markers.is_empty() {
        out.add(
            format!("{at}.markers"),
            "a restatement needs at least one marker",
        );
    }
    out.clamped(&format!("{at}.to"), rs.to.into(), 100, 599);
    RestateRule {
        id: rs.id.clone(),
        provider: rs.provider.clone(),
        from: rs.from.clone(),
        to: rs.to,
        markers: rs.markers.iter().map(|m| m.to_lowercase()).collect(),
        exclude: rs.exclude.iter().map(|m| m.to_lowercase()).collect(),
        retry_after_ms: rs.retry_after_ms,
    }
}

/// `resilience.client_retry_header`, lower-cased ("" turns the rule off).
fn client_retry_header(out: &mut Problems, name: &str) -> String {
    let name = name.trim().to_ascii_lowercase();
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        out.add(
            "resilience.client_retry_header",
            "must be a header name (letters, digits, `-`)",
        );
    }
    name
}

/// By flat connection index, the other keys of the same provider that name the same
/// `account`: an account-wide limit (rate limit, quota wall, spent credits) cools them all.
/// By flat connection index: whether the key serves exactly one model.
fn one_model(providers: &[Provider]) -> Vec<bool> {
    let conns = || providers.iter().flat_map(|p| &p.connections);
    let mut one = vec![false; conns().map(|c| c.index.index() + 1).max().unwrap_or(0)];
    for c in conns() {
        one[c.index] = c.models.len() == 1;
    }
    one
}

fn account_siblings(file: &FileConfig, providers: &[Provider]) -> Vec<Vec<ConnId>> {
    let count = providers.iter().map(|p| p.connections.len()).sum();
    let mut siblings = vec![Vec::new(); count];
    for (ps, p) in file.providers.iter().zip(providers) {
        let accounts: Vec<(Option<&str>, ConnId)> = ps
            .connections
            .iter()
            .zip(&p.connections)
            .map(|(cs, c)| (cs.account.as_deref(), c.index))
            .collect();
        for &(account, conn) in &accounts {
            let Some(account) = account else { continue };
            if let Some(list) = siblings.get_mut(conn.index()) {
                list.extend(
                    accounts
                        .iter()
                        .filter(|&&(a, other)| a == Some(account) && other != conn)
                        .map(|&(_, other)| other),
                );
            }
        }
    }
    siblings
}
