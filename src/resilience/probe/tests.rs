//! Probes on a manual clock: when a provider is probed, with which key, and what an answer ends.

use super::super::tests::{settings, verdict};
use super::*;
use crate::resilience::breaker::Admit;
use crate::resilience::{Probes, Site};

fn site(conn: usize) -> Site<'static> {
    Site {
        provider: 0,
        conn: ConnId::new(conn),
        model: "m",
        tenant: 1,
        sent: 0,
        probe: false,
    }
}

/// Key `conn`'s attempt sent at `at`.
fn sent(conn: usize, at: u64) -> Site<'static> {
    Site {
        sent: at,
        ..site(conn)
    }
}

fn keys() -> Vec<ConnId> {
    vec![ConnId::new(0), ConnId::new(1)]
}

/// Two keys of one provider; `fail` 500s on key 0 from t = 1000.
fn failing(fail: u64) -> (Settings, Tables, Vec<Event>) {
    let s = settings(1, 2);
    let mut t = Tables::new(1, 2);
    let mut events = Vec::new();
    for i in 0..fail {
        let v = verdict(500, "internal error");
        t.on_failure(&s, sent(0, 1_000 + i), &v, 1_000 + i, &mut |e| {
            events.push(e)
        });
    }
    (s, t, events)
}

/// Both keys of the provider down with 500s from t = 1000 (key 0 `fail` times).
fn both_failing(fail: u64) -> (Settings, Tables) {
    let (s, mut t, _) = failing(fail);
    let v = verdict(500, "internal error");
    t.on_failure(&s, sent(1, 1_000), &v, 1_000, &mut |_| {});
    (s, t)
}

#[test]
fn a_healthy_provider_is_not_probed() {
    let s = settings(1, 2);
    let mut t = Tables::new(1, 2);
    assert_eq!(t.probe_need(&s, 0, 5_000), None);
    // One key down while the other serves: the trouble is the key's (or its model's), which a
    // model list cannot speak for; its timer runs.
    let (s, mut t, _) = failing(1);
    assert_eq!(t.probe_need(&s, 0, 1_100), None);
    let e = t.blocked(&s, site(0), 1_100).expect("cooling");
    assert_eq!(e.remaining_ms(), Some(2_900), "the cooldown's own time");
    // Probes off for the provider: never, whatever its state.
    let (mut s, mut t, _) = failing(1);
    s.providers[0].breaker.probe_interval_ms = 0;
    assert_eq!(t.probe_need(&s, 0, 1_100), None);
}

#[test]
fn a_key_cooling_for_a_5xx_is_probed_and_lifted_by_an_answer() {
    let (s, mut t) = both_failing(1);
    let need = t.probe_need(&s, 0, 1_100).expect("probed");
    assert_eq!(
        need.keys,
        keys(),
        "the keys cooling for the provider's trouble"
    );
    assert_eq!(need.every_ms, s.providers[0].breaker.probe_interval_ms);
    // What a client is told about the key: the next probe, not the 3 s cooldown.
    let e = t.blocked(&s, site(0), 1_100).expect("cooling");
    assert_eq!(e.remaining_ms(), Some(600), "2 keys x 300 ms");
    // A 5xx answer changes nothing.
    let mut events = Vec::new();
    t.on_probe(
        &s,
        0,
        ConnId::new(0),
        ProbeAnswer::of_status(503),
        1_200,
        &mut |e| events.push(e),
    );
    assert!(events.is_empty());
    assert!(t.blocked(&s, site(0), 1_200).is_some());
    // An answer: the key serves at once, on this core and (by the event) on the others.
    t.on_probe(
        &s,
        0,
        ConnId::new(0),
        ProbeAnswer::of_status(200),
        1_500,
        &mut |e| events.push(e),
    );
    assert!(
        t.blocked(&s, site(0), 1_500).is_none(),
        "lifted 1.5 s early"
    );
    let mut other = Tables::new(1, 2);
    let v = verdict(500, "internal error");
    other.on_failure(&s, sent(0, 1_000), &v, 1_000, &mut |_| {});
    for e in &events {
        other.apply(e, &s);
    }
    assert!(other.blocked(&s, site(0), 1_500).is_none(), "replicated");
    assert_eq!(t.probe_need(&s, 0, 1_500), None, "nothing left to ask");
}

#[test]
fn a_refused_key_or_a_rate_limit_is_not_lifted() {
    let (s, mut t, _) = failing(1);
    let mut events = Vec::new();
    t.on_probe(
        &s,
        0,
        ConnId::new(0),
        ProbeAnswer::of_status(401),
        1_200,
        &mut |e| events.push(e),
    );
    assert!(
        t.blocked(&s, site(0), 1_200).is_some(),
        "401: the key is not proven"
    );
    // A 429's cooldown is the key's own limit: a probe does not end it, nor is it probed.
    let mut t = Tables::new(1, 2);
    t.on_failure(
        &s,
        sent(1, 1_000),
        &verdict(429, "rate limit"),
        1_000,
        &mut |_| {},
    );
    assert_eq!(t.probe_need(&s, 0, 1_100), None);
    t.on_probe(
        &s,
        0,
        ConnId::new(1),
        ProbeAnswer::of_status(200),
        1_200,
        &mut |_| {},
    );
    assert!(t.blocked(&s, site(1), 1_200).is_some());
}

#[test]
fn an_open_breaker_half_opens_on_a_probe_and_grows_its_spacing_when_it_flaps() {
    let (s, mut t, _) = failing(12);
    let p = &s.providers[0].breaker;
    assert_eq!(t.breakers[0].state, BreakerState::Open);
    let need = t.probe_need(&s, 0, 1_100).expect("probed");
    assert_eq!(need.every_ms, p.probe_interval_ms);
    // Told: the next probe, not the open time.
    let e = t.blocked(&s, site(1), 1_100).expect("open");
    assert_eq!(e.remaining_ms(), Some(p.probe_interval_ms));
    let mut events = Vec::new();
    t.on_probe(
        &s,
        0,
        ConnId::new(0),
        ProbeAnswer::of_status(200),
        1_300,
        &mut |e| events.push(e),
    );
    assert_eq!(
        t.breakers[0].state,
        BreakerState::HalfOpen,
        "long before 3 s"
    );
    // The one real request let through fails: open again, probed half as often.
    let probe = std::sync::atomic::AtomicU64::new(0);
    assert_eq!(
        t.check(&s, &Probes(vec![probe]), site(1), 1_301),
        Ok(Admit::Probe)
    );
    // (A failure of another request then, admitted before the opening was heard of here,
    // is not the probe's and reopens nothing.)
    let v = verdict(500, "internal error");
    t.on_failure(&s, sent(0, 1_300), &v, 1_350, &mut |_| {});
    assert_eq!(t.breakers[0].state, BreakerState::HalfOpen);
    let probe_site = Site {
        probe: true,
        ..sent(1, 1_301)
    };
    t.on_failure(&s, probe_site, &v, 1_400, &mut |_| {});
    assert_eq!(t.breakers[0].state, BreakerState::Open);
    let need = t.probe_need(&s, 0, 1_500).expect("probed");
    assert_eq!(need.every_ms, 2 * p.probe_interval_ms);
    // A probe's answer from before this opening proves nothing about it.
    t.breakers[0].on_probe_ok(1_350, p);
    assert_eq!(t.breakers[0].state, BreakerState::Open);
}

#[test]
fn a_stream_cut_after_its_first_byte_runs_its_timer() {
    let s = settings(1, 2);
    let mut t = Tables::new(1, 2);
    let mut v = crate::resilience::classify::transport(false);
    v.mid_stream = true;
    t.on_failure(&s, sent(0, 1_000), &v, 1_000, &mut |_| {});
    assert_eq!(t.probe_need(&s, 0, 1_100), None);
    let e = t.blocked(&s, site(0), 1_100).expect("cooling");
    assert_eq!(e.remaining_ms(), Some(2_900), "the cooldown's own time");
    let mut events = Vec::new();
    let up = ProbeAnswer::of_status(200);
    t.on_probe(&s, 0, ConnId::new(0), up, 1_200, &mut |e| events.push(e));
    assert!(events.is_empty() && t.blocked(&s, site(0), 1_200).is_some());
}

#[test]
fn a_key_that_answers_probes_but_fails_requests_is_tried_less_and_less() {
    // A provider of one key: its trouble is the provider's.
    let s = settings(1, 1);
    let mut t = Tables::new(1, 1);
    let every = s.providers[0].breaker.probe_interval_ms;
    let up = ProbeAnswer::of_status(200);
    let v = verdict(500, "internal error");
    let mut now = 1_000;
    t.on_failure(&s, sent(0, now), &v, now, &mut |_| {});
    let mut gaps = Vec::new();
    for _ in 0..4 {
        // Probed from the first tick it is due, lifted, then its first request fails again.
        let due = (now..now + 60_000)
            .step_by(10)
            .find(|at| t.probe_need(&s, 0, *at).is_some())
            .expect("probed within a minute");
        gaps.push(due - now);
        t.on_probe(&s, 0, ConnId::new(0), up, due, &mut |_| {});
        assert!(t.blocked(&s, site(0), due).is_none(), "lifted");
        now = due + 10;
        t.on_failure(&s, sent(0, now), &v, now, &mut |_| {});
    }
    assert_eq!(gaps, vec![0, every, 3 * every, 7 * every]);
    // What a client is told follows the same schedule (one key: one probe spacing after it).
    let e = t.blocked(&s, site(0), now).expect("cooling");
    assert_eq!(e.remaining_ms(), Some(15 * every + every));
}

/// One key's own failing answers (its model list fails or hangs too) cannot hold an open breaker
/// for its whole time: the key that is not cooling is asked, and its answer half-opens the
/// breaker while the failing key runs its cooldown.
#[test]
fn an_open_breaker_is_probed_with_the_keys_not_cooling() {
    let (s, mut t, _) = failing(12);
    let p = &s.providers[0].breaker;
    assert_eq!(t.breakers[0].state, BreakerState::Open);
    let need = t.probe_need(&s, 0, 1_100).expect("probed");
    assert_eq!(need.keys, vec![ConnId::new(1)], "the key not cooling");
    let mut events = Vec::new();
    let up = ProbeAnswer::of_status(200);
    t.on_probe(&s, 0, ConnId::new(1), up, 1_400, &mut |e| events.push(e));
    assert!(matches!(
        events[..],
        [Event::BreakerProbeOk { at: 1_400, .. }]
    ));
    t.breakers[0].refresh(1_400, p);
    assert_eq!(t.breakers[0].state, BreakerState::HalfOpen);
    assert!(
        t.blocked(&s, site(0), 1_400).is_some(),
        "key 0 still cooling"
    );
}
