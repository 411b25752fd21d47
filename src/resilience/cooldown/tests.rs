use super::*;
use crate::resilience::classify::{Scope, transport};
use crate::resilience::hints::{Hint, HintSource};

const P: CooldownProfile = CooldownProfile {
    base_ms: 3_000,
    max_ms: 1_800_000,
    max_level: 5,
    quota_ms: 3_600_000,
    auth_retries: 3,
    rejections_to_ban: 3,
    jitter_pct: 0,
};

fn v(reason: Reason, status: u16, hint: Option<u64>) -> Verdict {
    Verdict {
        reason,
        scope: Scope::Connection,
        status,
        cooldown_ms: None,
        hint: hint.map(|ms| Hint {
            ms,
            source: HintSource::RetryAfter,
        }),
        retryable: true,
        rule: None,
        lasting: true,
        mid_stream: false,
    }
}

#[test]
fn words_alone_give_a_short_cooldown_and_no_terminal_state() {
    for reason in [
        Reason::Banned,
        Reason::CreditsExhausted,
        Reason::QuotaExhausted,
    ] {
        let mut s = ConnState::default();
        let mut verdict = v(reason, 400, None);
        verdict.lasting = false;
        s.on_failure(&verdict, 1_000, &P).unwrap();
        assert_eq!(s.terminal, None, "{reason:?}");
        assert!(s.until <= 1_000 + P.max_ms, "{reason:?}: {}", s.until);
        assert!(s.until < 1_000 + P.quota_ms, "{reason:?}");
        // A quota hint from words is capped like any other.
        let mut s = ConnState::default();
        let mut verdict = v(reason, 429, Some(86_400_000));
        verdict.lasting = false;
        s.on_failure(&verdict, 1_000, &P).unwrap();
        assert_eq!(s.until, 1_000 + P.max_ms, "{reason:?}");
    }
}

/// Fail once the previous cooldown has passed; returns the cooldown granted.
fn fail_after_expiry(s: &mut ConnState, now: &mut u64, verdict: &Verdict) -> u64 {
    *now = (*now).max(s.until);
    s.on_failure(verdict, *now, &P).unwrap();
    s.until - *now
}

#[test]
fn backoff_grows_and_caps() {
    let mut s = ConnState::default();
    let mut now = 1_000;
    let server = v(Reason::ServerError, 500, None);
    let got: Vec<u64> = (0..8)
        .map(|_| fail_after_expiry(&mut s, &mut now, &server))
        .collect();
    assert_eq!(
        got,
        [3_000, 6_000, 12_000, 24_000, 48_000, 96_000, 96_000, 96_000]
    );
    let oauth = CooldownProfile {
        base_ms: 5_000,
        max_level: 8,
        max_ms: 600_000,
        ..P
    };
    let mut s = ConnState::default();
    let mut now = 0;
    let mut last = 0;
    for _ in 0..12 {
        now = now.max(s.until);
        s.on_failure(&server, now, &oauth).unwrap();
        last = s.until - now;
    }
    assert_eq!(last, 600_000, "capped at max_ms");
}

#[test]
fn upstream_hint_replaces_the_formula_and_resets_the_level() {
    let mut s = ConnState::default();
    let mut now = 0;
    fail_after_expiry(&mut s, &mut now, &v(Reason::ServerError, 500, None));
    fail_after_expiry(&mut s, &mut now, &v(Reason::ServerError, 500, None));
    assert_eq!(s.level(), 2);
    let got = fail_after_expiry(&mut s, &mut now, &v(Reason::RateLimited, 429, Some(7_000)));
    assert_eq!((got, s.level()), (7_000, 0));
    // A huge hint for a rate limit is clamped to the cap; quota keeps it.
    let got = fail_after_expiry(
        &mut s,
        &mut now,
        &v(Reason::RateLimited, 429, Some(1 << 40)),
    );
    assert_eq!(got, P.max_ms);
    let got = fail_after_expiry(
        &mut s,
        &mut now,
        &v(Reason::QuotaExhausted, 429, Some(86_400_000)),
    );
    assert_eq!(got, 86_400_000);
    // An assumed daily reset is a guess: the cap bounds it.
    let mut daily = v(Reason::QuotaExhausted, 429, None);
    daily.hint = Some(Hint {
        ms: 20 * 3_600_000,
        source: HintSource::DailyReset,
    });
    assert_eq!(fail_after_expiry(&mut s, &mut now, &daily), P.max_ms);
    daily.hint = Some(Hint {
        ms: 600_000,
        source: HintSource::DailyReset,
    });
    assert_eq!(fail_after_expiry(&mut s, &mut now, &daily), 600_000);
}

#[test]
fn concurrent_failures_do_not_stack() {
    let mut s = ConnState::default();
    assert!(
        s.on_failure(&v(Reason::ServerError, 500, None), 0, &P)
            .is_some()
    );
    let until = s.until;
    assert!(
        s.on_failure(&v(Reason::ServerError, 500, None), 10, &P)
            .is_none()
    );
    assert!(
        s.on_failure(&v(Reason::RateLimited, 429, Some(999_000)), 20, &P)
            .is_none()
    );
    assert_eq!((s.until, s.level()), (until, 1));
    // Two cores failing the same connection at once merge to one level.
    let mut a = ConnState::default();
    let mut b = ConnState::default();
    let ea = a.on_failure(&transport(false), 100, &P).unwrap();
    let eb = b.on_failure(&transport(false), 101, &P).unwrap();
    a.merge(&eb);
    b.merge(&ea);
    assert_eq!(a, b);
    assert_eq!(a.level(), 1);
}

#[test]
fn success_clears_level_but_not_a_newer_cooldown() {
    let mut s = ConnState::default();
    let mut now = 0;
    fail_after_expiry(&mut s, &mut now, &v(Reason::ServerError, 500, None));
    fail_after_expiry(&mut s, &mut now, &v(Reason::ServerError, 500, None));
    now = s.until;
    assert!(s.on_success(now).is_some());
    assert_eq!(s.level(), 0);
    assert!(!s.has_error());
    assert!(s.on_success(now + 1).is_none(), "nothing left to clear");
    let got = fail_after_expiry(&mut s, &mut now, &v(Reason::ServerError, 500, None));
    assert_eq!(got, 3_000, "escalation starts over");
}

#[test]
fn terminal_states_are_sticky_until_reset() {
    let mut s = ConnState::default();
    s.on_failure(&v(Reason::CreditsExhausted, 402, None), 0, &P)
        .unwrap();
    assert_eq!(s.terminal, Some(Terminal::CreditsExhausted));
    assert!(
        s.on_failure(&v(Reason::RateLimited, 429, Some(1_000)), 5, &P)
            .is_none()
    );
    assert!(s.on_success(10).is_none());
    let mut other = ConnState::default();
    other.merge(&s);
    assert_eq!(other.terminal, Some(Terminal::CreditsExhausted));
    let r = s.reset();
    assert_eq!((r.epoch, r.terminal), (1, None));
    other.merge(&r);
    assert_eq!(other.terminal, None, "a reset wins over the older epoch");
    other.merge(&ConnState {
        terminal: Some(Terminal::Banned),
        ..Default::default()
    });
    assert_eq!(other.terminal, None, "stale epoch ignored");
}

#[test]
fn expired_after_bounded_auth_retries_and_banned_after_rejections() {
    let mut s = ConnState::default();
    let mut now = 0;
    let auth = v(Reason::AuthFailure, 401, None);
    fail_after_expiry(&mut s, &mut now, &auth);
    fail_after_expiry(&mut s, &mut now, &auth);
    assert_eq!(s.terminal, None);
    now = s.until;
    s.on_failure(&auth, now, &P).unwrap();
    assert_eq!(s.terminal, Some(Terminal::Expired));

    let mut s = ConnState::default();
    let mut now = 0;
    let rej = v(Reason::Rejected, 403, None);
    fail_after_expiry(&mut s, &mut now, &rej);
    fail_after_expiry(&mut s, &mut now, &rej);
    now = s.until;
    s.on_success(now).unwrap(); // not consecutive any more
    fail_after_expiry(&mut s, &mut now, &rej);
    assert_eq!(s.terminal, None);
    fail_after_expiry(&mut s, &mut now, &rej);
    now = s.until;
    s.on_failure(&rej, now, &P).unwrap();
    assert_eq!(s.terminal, Some(Terminal::Banned));
    // Ban markers ban at once.
    let mut s = ConnState::default();
    s.on_failure(&v(Reason::Banned, 403, None), 0, &P).unwrap();
    assert_eq!(s.terminal, Some(Terminal::Banned));
}

#[test]
fn merge_is_order_independent() {
    let mut a = ConnState::default();
    let e1 = a
        .on_failure(&v(Reason::ServerError, 500, None), 0, &P)
        .unwrap();
    let e2 = a.on_success(5_000).unwrap();
    let e3 = a
        .on_failure(&v(Reason::RateLimited, 429, Some(2_000)), 6_000, &P)
        .unwrap();
    let events = [e1, e2, e3];
    let orders = [
        [0, 1, 2],
        [2, 1, 0],
        [1, 2, 0],
        [2, 0, 1],
        [0, 2, 1],
        [1, 0, 2],
    ];
    for o in orders {
        let mut r = ConnState::default();
        for i in o {
            r.merge(&events[i]);
            r.merge(&events[i]); // duplicates are harmless
        }
        assert_eq!(r, a, "order {o:?}");
    }
}

#[test]
fn rejections_ban_only_when_consecutive() {
    // 403, 429, 403, 403: the 429 in between starts the count again, so no ban yet.
    let mut s = ConnState::default();
    let mut now = 0;
    let rej = v(Reason::Rejected, 403, None);
    let limited = v(Reason::RateLimited, 429, None);
    fail_after_expiry(&mut s, &mut now, &rej);
    fail_after_expiry(&mut s, &mut now, &limited);
    fail_after_expiry(&mut s, &mut now, &rej);
    fail_after_expiry(&mut s, &mut now, &rej);
    assert_eq!(s.terminal, None);
    assert_eq!(s.last.rejections, 2);
    // A third one in a row bans.
    now = s.until;
    s.on_failure(&rej, now, &P).unwrap();
    assert_eq!(s.terminal, Some(Terminal::Banned));
    // The same for authentication failures.
    let mut s = ConnState::default();
    let mut now = 0;
    let auth = v(Reason::AuthFailure, 401, None);
    fail_after_expiry(&mut s, &mut now, &auth);
    fail_after_expiry(&mut s, &mut now, &auth);
    fail_after_expiry(&mut s, &mut now, &limited);
    fail_after_expiry(&mut s, &mut now, &auth);
    assert_eq!(s.terminal, None);
}

#[test]
fn computed_cooldowns_are_jittered_within_bounds_and_hints_are_not() {
    let p = CooldownProfile {
        jitter_pct: 20,
        ..P
    };
    let mut seen = std::collections::HashSet::new();
    for now in 0..200u64 {
        let mut s = ConnState::default();
        let t = now * 1_000;
        s.on_failure(&v(Reason::RateLimited, 429, None), t, &p)
            .unwrap();
        let ms = s.until - t;
        assert!((2_400..=3_600).contains(&ms), "{ms}");
        seen.insert(ms);
        // An upstream's own hint is honoured as given.
        let mut s = ConnState::default();
        s.on_failure(&v(Reason::RateLimited, 429, Some(7_000)), t, &p)
            .unwrap();
        assert_eq!(s.until - t, 7_000);
    }
    assert!(seen.len() > 20, "spread, not one value: {}", seen.len());
}
