use super::*;

/// Two keys (connection slots).
const KEY0: ConnId = ConnId::new(0);
const KEY1: ConnId = ConnId::new(1);

fn on(t: &mut Lockouts, s: &LockoutSettings, status: u16, now: u64) -> Lock {
    t.on_failure(
        s,
        LockAt {
            conn: KEY0,
            model: "gpt-4o",
            family: "gpt-4o",
        },
        LockScope::for_status(status),
        Reason::RateLimited,
        None,
        now,
    )
    .unwrap()
}

#[test]
fn scope_by_status() {
    assert_eq!(LockScope::for_status(429), LockScope::Family);
    assert_eq!(LockScope::for_status(403), LockScope::Family);
    assert_eq!(LockScope::for_status(402), LockScope::Family);
    assert_eq!(LockScope::for_status(404), LockScope::Model);
    assert_eq!(LockScope::for_status(503), LockScope::Exact);
    let s = LockoutSettings::default();
    let mut t = Lockouts::new(2);
    t.on_failure(
        &s,
        LockAt {
            conn: KEY0,
            model: "claude-opus-4",
            family: "claude",
        },
        LockScope::Family,
        Reason::RateLimited,
        None,
        0,
    );
    assert!(
        t.locked(KEY0, "claude-sonnet-4", "claude", 1).is_some(),
        "family shares"
    );
    assert!(
        t.locked(KEY1, "claude-sonnet-4", "claude", 1).is_none(),
        "other connection free"
    );
    t.on_failure(
        &s,
        LockAt {
            conn: KEY1,
            model: "gpt-4o",
            family: "gpt",
        },
        LockScope::Exact,
        Reason::ServerError,
        None,
        0,
    );
    assert!(t.locked(KEY1, "GPT-4o", "gpt", 1).is_some());
    assert!(
        t.locked(KEY1, "gpt-4o-mini", "gpt", 1).is_none(),
        "exact is one model"
    );
}

#[test]
fn escalates_caps_and_expires() {
    let s = LockoutSettings::default();
    let mut t = Lockouts::new(1);
    let mut now = 0;
    let mut got = Vec::new();
    for _ in 0..6 {
        let l = on(&mut t, &s, 429, now);
        got.push(l.until - now);
        now = l.until;
    }
    assert_eq!(
        got,
        [120_000, 240_000, 480_000, 960_000, 1_800_000, 1_800_000]
    );
    assert!(
        t.locked(KEY0, "gpt-4o", "gpt-4o", now).is_none(),
        "expired at its end"
    );
    // After the escalation memory lapses it starts over.
    now += s.reset_after_ms + 1_800_000 + 1;
    assert_eq!(on(&mut t, &s, 429, now).until - now, 120_000);
}

#[test]
fn exact_hints() {
    let s = LockoutSettings::default();
    let mut t = Lockouts::new(1);
    let l = t
        .on_failure(
            &s,
            LockAt {
                conn: KEY0,
                model: "m",
                family: "m",
            },
            LockScope::Family,
            Reason::QuotaExhausted,
            Some((86_400_000, true)),
            0,
        )
        .unwrap();
    assert_eq!(l.until, 86_400_000, "header reset is authoritative");
    let l = t
        .on_failure(
            &s,
            LockAt {
                conn: KEY0,
                model: "n",
                family: "n",
            },
            LockScope::Family,
            Reason::QuotaExhausted,
            Some((86_400_000, false)),
            0,
        )
        .unwrap();
    assert_eq!(l.until, s.max_ms, "prose hints are capped");
}

#[test]
fn success_halves_then_removes() {
    let s = LockoutSettings::default();
    let mut t = Lockouts::new(1);
    let mut now = 0;
    for _ in 0..3 {
        now = on(&mut t, &s, 429, now).until;
    }
    assert!(t.has_entry(KEY0, "gpt-4o", "gpt-4o"));
    t.on_success(KEY0, "gpt-4o", "gpt-4o"); // 3 -> 1
    assert_eq!(t.len(), 1);
    t.on_success(KEY0, "gpt-4o", "gpt-4o"); // 1 -> 0: gone
    assert_eq!(t.len(), 0);
    assert!(!t.has_entry(KEY0, "gpt-4o", "gpt-4o"));
}

#[test]
fn merge_clear_and_sweep() {
    let s = LockoutSettings::default();
    let mut a = Lockouts::new(1);
    let mut b = Lockouts::new(1);
    let l = on(&mut a, &s, 503, 0);
    b.merge(l.clone());
    b.merge(l);
    assert_eq!(b.len(), 1);
    assert!(b.locked(KEY0, "gpt-4o", "gpt-4o", 1).is_some());
    assert_eq!(b.clear(KEY0, Some("GPT-4O")), 1);
    assert!(b.locked(KEY0, "gpt-4o", "gpt-4o", 1).is_none());
    a.sweep(&s, 200_000);
    assert_eq!(a.len(), 1, "escalation memory kept after expiry");
    a.sweep(&s, 10_000_000);
    assert_eq!(a.len(), 0);
    assert_eq!(a.active(0).count(), 0);
}
