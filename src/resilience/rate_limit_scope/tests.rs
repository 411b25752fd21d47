//! A plain 429 locks the model on the key; a second limited model cools the key. On a manual
//! clock, one core.

use super::super::classify::{Reason, Verdict, builtin_rules, classify};
use super::super::tests::verdict;
use super::super::{Exclusion, Settings, Site, Tables};
use super::RateLimitScope;
use crate::ids::ConnId;
use crate::resilience::hints::{Hint, HintSource};

/// One provider's three keys without jitter; keys 0 and 1 share an account.
fn settings() -> Settings {
    let mut s = super::super::tests::settings(1, 3);
    s.account_siblings = vec![vec![ConnId::new(1)], vec![ConnId::new(0)], vec![]];
    s
}

fn site(slot: usize, model: &str) -> Site<'_> {
    Site {
        provider: 0,
        conn: ConnId::new(slot),
        model,
        tenant: 0,
        sent: 0,
        probe: false,
    }
}

fn fail(t: &mut Tables, s: &Settings, at: Site, v: &Verdict, now: u64) -> usize {
    let mut events = 0;
    let at = Site { sent: now, ..at };
    t.on_failure(s, at, v, now, &mut |_| events += 1);
    events
}

#[test]
fn a_plain_429_locks_the_model_not_the_key() {
    let s = settings();
    let mut t = Tables::new(1, 3);
    fail(
        &mut t,
        &s,
        site(2, "gpt-4o"),
        &verdict(429, "slow down"),
        1_000,
    );
    assert!(!t.conns[2].cooling(1_001), "the key keeps serving");
    assert_eq!(t.blocked(&s, site(2, "gpt-4o-mini"), 1_001), None);
    assert_eq!(
        t.blocked(&s, site(2, "gpt-4o"), 1_001),
        Some(Exclusion::Lockout {
            reason: Reason::RateLimited,
            ms: 2_999
        }),
        "the model is locked for the key's own backoff base (3 s)"
    );
    assert_eq!(
        t.blocked(&s, site(2, "gpt-4o"), 4_000),
        None,
        "and lifts on time"
    );
    // The entry stays as escalation memory, but the request path's quick test sees no lock.
    assert_eq!(t.lockouts.len(), 1);
    assert!(t.lockouts.any_active(3_999) && !t.lockouts.any_active(4_000));
}

#[test]
fn a_second_limited_model_cools_the_key() {
    let s = settings();
    let mut t = Tables::new(1, 3);
    fail(&mut t, &s, site(2, "gpt-4o"), &verdict(429, ""), 1_000);
    fail(&mut t, &s, site(2, "gpt-4o-mini"), &verdict(429, ""), 1_500);
    assert!(
        t.conns[2].cooling(1_501),
        "two models limited: the limit is the key's"
    );
    assert!(matches!(
        t.blocked(&s, site(2, "o3"), 1_501),
        Some(Exclusion::Cooling { .. })
    ));
    // Once the first lock is over, a 429 for another model is one model's again.
    fail(&mut t, &s, site(2, "o3"), &verdict(429, ""), 60_000);
    assert!(!t.conns[2].cooling(60_001));
    assert!(matches!(
        t.blocked(&s, site(2, "o3"), 60_001),
        Some(Exclusion::Lockout { .. })
    ));
}

#[test]
fn concurrent_429s_of_a_locked_model_do_not_stack_and_later_ones_escalate() {
    let s = settings();
    let mut t = Tables::new(1, 3);
    let v = verdict(429, "");
    assert_eq!(fail(&mut t, &s, site(2, "m"), &v, 1_000), 1);
    assert_eq!(
        fail(&mut t, &s, site(2, "m"), &v, 1_200),
        0,
        "still locked: nothing new"
    );
    let until = |t: &mut Tables, now| {
        t.blocked(&s, site(2, "m"), now)
            .and_then(|e| e.remaining_ms())
    };
    assert_eq!(until(&mut t, 1_200), Some(2_800));
    // After it lifts, the next 429 doubles it (3 s, 6 s, 12 s ... the key's own backoff).
    fail(&mut t, &s, site(2, "m"), &v, 5_000);
    assert_eq!(until(&mut t, 5_000), Some(6_000));
    fail(&mut t, &s, site(2, "m"), &v, 12_000);
    assert_eq!(until(&mut t, 12_000), Some(12_000));
    // A success halves the memory (four failures' worth to two): the next lock is shorter.
    t.on_success(&s, site(2, "m"), 30_000, &mut |_| {});
    fail(&mut t, &s, site(2, "m"), &v, 31_000);
    assert_eq!(until(&mut t, 31_000), Some(6_000));
}

#[test]
fn the_upstream_hint_sets_the_lock() {
    let s = settings();
    let mut t = Tables::new(1, 3);
    let mut v = verdict(429, "");
    v.hint = Some(Hint {
        ms: 2_000,
        source: HintSource::RetryAfter,
    });
    fail(&mut t, &s, site(2, "m"), &v, 1_000);
    assert_eq!(
        t.blocked(&s, site(2, "m"), 1_000)
            .and_then(|e| e.remaining_ms()),
        Some(2_000)
    );
}

#[test]
fn keys_of_one_account_share_the_models_lock() {
    let s = settings();
    let mut t = Tables::new(1, 3);
    let mut locks = Vec::new();
    t.on_failure(&s, site(0, "m"), &verdict(429, ""), 1_000, &mut |e| {
        locks.push(e)
    });
    assert_eq!(locks.len(), 2, "one lock for each key of the account");
    assert!(t.blocked(&s, site(1, "m"), 1_001).is_some());
    assert_eq!(t.blocked(&s, site(1, "other"), 1_001), None);
    assert_eq!(t.blocked(&s, site(2, "m"), 1_001), None, "another account");
}

#[test]
fn quota_walls_ruled_scopes_and_the_connection_setting_cool_the_key() {
    let mut s = settings();
    let mut t = Tables::new(1, 3);
    // A quota wall is the account's, whatever the model.
    fail(
        &mut t,
        &s,
        site(2, "m"),
        &verdict(429, "insufficient_quota"),
        1_000,
    );
    assert!(t.conns[2].cooling(1_001));
    // Not a 429: a rate-limit message in a 403 is a rule's verdict, scoped to the key.
    let mut t = Tables::new(1, 3);
    fail(
        &mut t,
        &s,
        site(2, "m"),
        &verdict(403, "rate limit exceeded"),
        1_000,
    );
    assert!(t.conns[2].cooling(1_001));
    s.rate_limit_scope = RateLimitScope::Connection;
    let mut t = Tables::new(1, 3);
    fail(&mut t, &s, site(2, "m"), &verdict(429, ""), 1_000);
    assert!(t.conns[2].cooling(1_001));
    assert!(t.lockouts.is_empty());
}

#[test]
fn a_key_that_serves_one_model_cools_as_a_whole() {
    let mut s = settings();
    s.one_model = vec![false, false, true];
    let mut t = Tables::new(1, 3);
    fail(&mut t, &s, site(2, "m"), &verdict(429, ""), 1_000);
    assert!(t.conns[2].cooling(1_001));
    assert!(t.lockouts.is_empty());
}

#[test]
fn a_usage_wall_is_the_accounts_and_cools_the_key() {
    let s = settings();
    let mut t = Tables::new(1, 3);
    let wall =
        |name: &str| (name == "anthropic-ratelimit-unified-status").then(|| "rejected".to_string());
    let a = super::super::classify::Answer {
        provider: "p",
        status: 429,
        lower: "{\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\"}}",
        get: &wall,
        hint: None,
        request: b"",
    };
    let v = classify(&[], &builtin_rules(), &a);
    assert_eq!(v.rule.as_deref(), Some("usage_wall"));
    fail(&mut t, &s, site(2, "claude-opus"), &v, 1_000);
    assert!(t.conns[2].cooling(1_001));
    assert!(t.lockouts.is_empty());
}

#[test]
fn the_scope_setting_parses() {
    assert_eq!(RateLimitScope::parse("model"), Some(RateLimitScope::Model));
    assert_eq!(
        RateLimitScope::parse("connection"),
        Some(RateLimitScope::Connection)
    );
    assert_eq!(RateLimitScope::parse("key"), None);
}
