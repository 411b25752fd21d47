use super::*;

const API_KEY: BreakerProfile = BreakerProfile {
    degraded_at: 7,
    open_at: 12,
    open_ms: 30_000,
    escalate_after: 3,
    max_multiplier: 4,
    probe_interval_ms: 0,
    probe_timeout_ms: 10_000,
    min_tenants: 1,
    jitter_pct: 0,
};

#[test]
fn one_tenant_alone_cannot_open_a_multi_tenant_breaker() {
    let p = BreakerProfile {
        min_tenants: 2,
        ..API_KEY
    };
    let mut b = Breaker::default();
    for i in 0..40 {
        b.on_failure(i, 7, &p);
    }
    assert_eq!(b.state, BreakerState::Degraded, "40 failures of one tenant");
    // A second tenant failing too: the provider is unwell for more than one client.
    b.on_failure(41, 9, &p);
    assert_eq!(b.state, BreakerState::Open);
    // Once clean again, the tenants seen are forgotten.
    let mut b = Breaker::default();
    b.on_failure(1, 7, &p);
    assert!(b.on_success(5, &p));
    for i in 0..20 {
        b.on_failure(10 + i, 9, &p);
    }
    assert_eq!(
        b.state,
        BreakerState::Degraded,
        "tenant 7's old failure is forgotten"
    );
    // A single-tenant profile opens as before.
    let mut b = Breaker::default();
    for i in 0..12 {
        b.on_failure(i, 7, &API_KEY);
    }
    assert_eq!(b.state, BreakerState::Open);
}

#[test]
fn degrades_then_opens_then_half_opens() {
    let mut b = Breaker::default();
    let probe = AtomicU64::new(0);
    for i in 0..6 {
        b.on_failure(i, 1, &API_KEY);
    }
    assert_eq!(b.state, BreakerState::Closed);
    b.on_failure(6, 1, &API_KEY);
    assert_eq!(b.state, BreakerState::Degraded);
    assert_eq!(b.admit(7, &API_KEY, &probe), Admit::Yes);
    for i in 7..12 {
        b.on_failure(i, 1, &API_KEY);
    }
    assert_eq!(b.state, BreakerState::Open);
    assert_eq!(b.admit(1_000, &API_KEY, &probe), Admit::No(29_011));
    // Failures while open do not extend it.
    b.on_failure(20_000, 1, &API_KEY);
    assert_eq!(b.retry_after(20_000, &API_KEY), 10_011);
    assert_eq!(b.admit(30_011, &API_KEY, &probe), Admit::Probe);
    assert_eq!(b.state, BreakerState::HalfOpen);
}

#[test]
fn exactly_one_probe_across_cores() {
    let probe = AtomicU64::new(0);
    let mut a = Breaker::default();
    let mut b = Breaker::default();
    for i in 0..12 {
        a.on_failure(i, 1, &API_KEY);
        b.on_failure(i, 1, &API_KEY);
    }
    let t = 40_000;
    assert_eq!(a.admit(t, &API_KEY, &probe), Admit::Probe);
    // The others are told to come back in a second, not the probe's whole timeout: the probe
    // usually answers in milliseconds and closes the breaker.
    assert_eq!(b.admit(t, &API_KEY, &probe), Admit::No(PROBE_OUT_RETRY_MS));
    const { assert!(API_KEY.probe_timeout_ms > PROBE_OUT_RETRY_MS) };
    assert!(matches!(a.admit(t + 1, &API_KEY, &probe), Admit::No(_)));
    // A 429 is neutral: the claim is released, the state stays half-open.
    release_probe(&probe);
    assert_eq!(b.admit(t + 2, &API_KEY, &probe), Admit::Probe);
    // The probe succeeds: every core closes.
    assert!(b.on_success(50_000, &API_KEY));
    assert!(a.on_success(50_000, &API_KEY));
    assert_eq!(
        (a.state, b.state),
        (BreakerState::Closed, BreakerState::Closed)
    );
    assert_eq!(a.admit(t + 3, &API_KEY, &probe), Admit::Yes);
}

#[test]
fn a_lost_probe_expires() {
    let probe = AtomicU64::new(0);
    let mut b = Breaker::default();
    for i in 0..12 {
        b.on_failure(i, 1, &API_KEY);
    }
    assert_eq!(b.admit(30_011, &API_KEY, &probe), Admit::Probe);
    assert!(matches!(b.admit(35_000, &API_KEY, &probe), Admit::No(_)));
    assert_eq!(b.admit(40_012, &API_KEY, &probe), Admit::Probe);
}

#[test]
fn failed_probe_reopens_and_escalates() {
    let probe = AtomicU64::new(0);
    let mut b = Breaker::default();
    let mut t = 0;
    let mut opens = Vec::new();
    for _ in 0..12 {
        b.on_failure(t, 1, &API_KEY);
    }
    for _ in 0..6 {
        t += b.open_ms(&API_KEY);
        assert_eq!(b.admit(t, &API_KEY, &probe), Admit::Probe);
        release_probe(&probe);
        b.on_failure(t, 1, &API_KEY);
        assert_eq!(b.state, BreakerState::Open);
        opens.push(b.open_ms(&API_KEY));
    }
    assert_eq!(opens, [30_000, 30_000, 60_000, 120_000, 120_000, 120_000]);
}

#[test]
fn successes_recover_gradually_and_are_ignored_while_open() {
    let mut b = Breaker::default();
    for i in 0..8 {
        b.on_failure(i, 1, &API_KEY);
    }
    assert_eq!(b.state, BreakerState::Degraded);
    assert!(b.on_success(50_000, &API_KEY));
    assert_eq!((b.state, b.failures), (BreakerState::Closed, 7));
    let mut b = Breaker::default();
    for i in 0..12 {
        b.on_failure(i, 1, &API_KEY);
    }
    assert!(!b.on_success(50_000, &API_KEY));
    assert_eq!(b.state, BreakerState::Open);
    assert!(
        !Breaker::default().on_success(50_000, &API_KEY),
        "nothing to report"
    );
}

#[test]
fn a_provider_that_flaps_waits_longer_each_time() {
    let p = BreakerProfile {
        open_ms: 1_000,
        escalate_after: 1,
        max_multiplier: 8,
        probe_interval_ms: 100,
        ..API_KEY
    };
    let probe = AtomicU64::new(0);
    let mut b = Breaker::default();
    let mut t = 0;
    let mut opens = Vec::new();
    let mut probes = Vec::new();
    for _ in 0..5 {
        for _ in 0..12 {
            t += 1;
            b.on_failure(t, 1, &p);
        }
        assert_eq!(b.state, BreakerState::Open);
        opens.push(b.open_ms(&p));
        probes.push(b.probe_every(&p));
        // A probe finds it answering; the real request let through succeeds: closed.
        b.on_probe_ok(t + 10, &p);
        assert_eq!(b.admit(t + 11, &p, &probe), Admit::Probe);
        release_probe(&probe);
        assert!(b.on_success(t + 12, &p));
        t += 100;
    }
    // Each opening soon after a close counts on: longer open times, sparser probes (capped).
    assert_eq!(opens, [1_000, 2_000, 4_000, 8_000, 8_000]);
    assert_eq!(
        probes,
        [Some(100), Some(200), Some(400), Some(800), Some(1_600)]
    );
    // Quiet for longer than the longest opening: the count starts again.
    t += Breaker::max_open_ms(&p);
    for _ in 0..12 {
        t += 1;
        b.on_failure(t, 1, &p);
    }
    assert_eq!((b.open_ms(&p), b.probe_every(&p)), (1_000, Some(100)));
}

#[test]
fn a_failure_sent_before_the_latest_opening_or_close_is_not_news() {
    let mut b = Breaker::default();
    assert!(
        b.is_news(0),
        "a breaker that never opened counts every failure"
    );
    for i in 0..12 {
        b.on_failure(1_000 + i, 1, &API_KEY);
    }
    assert_eq!(b.state, BreakerState::Open);
    let opened = b.opened_at;
    assert!(!b.is_news(opened - 1), "in flight when it opened");
    assert!(b.is_news(opened), "sent since");
    // Half-open once its time is up; the one request let through closes it.
    b.refresh(opened + API_KEY.open_ms, &API_KEY);
    assert_eq!(b.state, BreakerState::HalfOpen);
    assert!(!b.is_news(opened - 1), "still old news while half-open");
    let closed = opened + API_KEY.open_ms + 100;
    assert!(b.on_success(closed, &API_KEY));
    assert_eq!(b.state, BreakerState::Closed);
    assert!(!b.is_news(closed - 1), "sent before it closed");
    assert!(b.is_news(closed));
}
