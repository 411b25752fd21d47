//! Two cores' tables fed through the bus: what one learns, the other honours.

use super::bus::{bus, drain};
use super::classify::{Reason, Scope, Verdict, builtin_rules, classify};
use super::settings::{ProfileKind, profile};
use super::*;
use crate::ids::ConnId;

pub(super) fn settings(providers: usize, conns_each: usize) -> Settings {
    let mut s = Settings::default();
    for p in 0..providers {
        // Without jitter: these tests step the clock to exact cooldown and open-time edges.
        let mut policy = profile(ProfileKind::ApiKey, 1_800_000, 3_600_000);
        policy.cooldown.jitter_pct = 0;
        policy.breaker.jitter_pct = 0;
        s.providers.push(policy);
        s.provider_conns.push(
            (p * conns_each..(p + 1) * conns_each)
                .map(ConnId::new)
                .collect(),
        );
    }
    s
}

pub(super) fn verdict(status: u16, body: &str) -> Verdict {
    let none = |_: &str| None;
    let lower = body.to_lowercase();
    let a = super::classify::Answer {
        provider: "p",
        status,
        lower: &lower,
        get: &none,
        hint: None,
        request: b"",
    };
    classify(&[], &builtin_rules(), &a)
}

struct Cores {
    s: Settings,
    probes: Probes,
    tables: Vec<Tables>,
    bus: bus::Bus,
    rx: Vec<crossbeam_channel::Receiver<Event>>,
}

impl Cores {
    fn new(providers: usize, conns_each: usize) -> Cores {
        let s = settings(providers, conns_each);
        let (bus, rx) = bus(2);
        Cores {
            tables: (0..2)
                .map(|_| Tables::new(providers, providers * conns_each))
                .collect(),
            probes: Probes::new(providers),
            s,
            bus,
            rx,
        }
    }
    /// A failure at `now` of an attempt sent then.
    fn fail(&mut self, core: usize, site: Site, v: &Verdict, now: u64) {
        let bus = self.bus.clone();
        let site = Site { sent: now, ..site };
        self.tables[core].on_failure(&self.s, site, v, now, &mut |e| bus.broadcast(core, &e));
    }
    /// A failure at `now` of an attempt sent at `sent`.
    fn fail_sent(&mut self, core: usize, site: Site, sent: u64, v: &Verdict, now: u64) {
        let bus = self.bus.clone();
        let site = Site { sent, ..site };
        self.tables[core].on_failure(&self.s, site, v, now, &mut |e| bus.broadcast(core, &e));
    }
    fn ok(&mut self, core: usize, site: Site, now: u64) {
        let bus = self.bus.clone();
        self.tables[core].on_success(&self.s, site, now, &mut |e| bus.broadcast(core, &e));
    }
    fn sync(&mut self) {
        for i in 0..2 {
            let (t, s) = (&mut self.tables[i], &self.s);
            drain(&self.rx[i], |e| t.apply(e, s));
        }
    }
    fn check(&mut self, core: usize, site: Site, now: u64) -> Result<Admit, Exclusion> {
        self.tables[core].check(&self.s, &self.probes, site, now)
    }
}

const A: Site = Site {
    provider: 0,
    conn: ConnId::new(0),
    model: "m",
    tenant: 0,
    sent: 0,
    probe: false,
};
const B: Site = Site {
    provider: 0,
    conn: ConnId::new(1),
    model: "m",
    tenant: 0,
    sent: 0,
    probe: false,
};

#[test]
fn a_cooldown_learned_on_one_core_is_honoured_on_the_other() {
    let mut c = Cores::new(1, 2);
    // Key-wide 429s (a plain one locks only the model: `rate_limit_scope`).
    c.s.rate_limit_scope = rate_limit_scope::RateLimitScope::Connection;
    let mut v = verdict(429, "slow down");
    v.hint = Some(hints::Hint {
        ms: 5_000,
        source: hints::HintSource::RetryAfter,
    });
    c.fail(0, A, &v, 1_000);
    assert_eq!(c.check(1, A, 1_001), Ok(Admit::Yes), "not yet delivered");
    c.sync();
    assert_eq!(
        c.check(1, A, 1_001),
        Err(Exclusion::Cooling {
            reason: Some(Reason::RateLimited),
            ms: 4_999
        })
    );
    assert_eq!(
        c.check(1, B, 1_001),
        Ok(Admit::Yes),
        "the other key keeps serving"
    );
    assert_eq!(
        c.check(1, A, 6_000),
        Ok(Admit::Yes),
        "usable when the hint expires"
    );
}

#[test]
fn a_429_is_neutral_for_the_breaker_and_5xx_opens_it() {
    let mut c = Cores::new(1, 2);
    for i in 0..20 {
        c.fail(0, A, &verdict(429, ""), i * 100_000);
    }
    c.sync();
    assert_eq!(c.tables[1].breakers[0].state, breaker::BreakerState::Closed);
    // 12 server errors split over two cores open the breaker on both.
    for i in 0..12u64 {
        let v = verdict(503, "");
        let site = if i % 2 == 0 { A } else { B };
        c.tables[(i % 2) as usize].conns[site.conn] = Default::default(); // keep the key usable
        c.fail((i % 2) as usize, site, &v, 10_000_000 + i);
        c.sync();
    }
    for core in 0..2 {
        assert_eq!(
            c.tables[core].breakers[0].state,
            breaker::BreakerState::Open,
            "core {core}"
        );
    }
    let t = 10_000_000 + 11 + 30_000;
    c.tables[0].conns = vec![Default::default(); 2];
    c.tables[1].conns = vec![Default::default(); 2];
    assert_eq!(c.check(0, A, t), Ok(Admit::Probe));
    assert!(
        matches!(c.check(1, B, t), Err(Exclusion::BreakerOpen { .. })),
        "one probe only"
    );
    c.ok(0, A, t + 5);
    c.sync();
    assert_eq!(
        c.check(1, B, t + 6),
        Ok(Admit::Yes),
        "the probe's success closed it everywhere"
    );
}

#[test]
fn terminal_replicates_and_reset_epoch_wins() {
    let mut c = Cores::new(1, 2);
    c.fail(0, A, &verdict(402, "payment required"), 0);
    c.sync();
    assert_eq!(
        c.check(1, A, 10),
        Err(Exclusion::Terminal(cooldown::Terminal::CreditsExhausted))
    );
    let state = c.tables[1].conns[0].reset();
    c.bus.broadcast(
        1,
        &Event::Conn {
            conn: ConnId::new(0),
            state,
        },
    );
    c.sync();
    assert_eq!(c.check(0, A, 10), Ok(Admit::Yes));
}

#[test]
fn lockout_is_opt_in_and_model_scope_rules_always_lock() {
    let mut c = Cores::new(1, 2);
    c.fail(0, A, &verdict(503, ""), 0);
    assert!(c.tables[0].lockouts.is_empty());
    c.s.lockout.enabled = true;
    c.tables[0].conns[0] = Default::default();
    c.fail(0, A, &verdict(503, ""), 0);
    c.sync();
    assert_eq!(c.tables[1].lockouts.len(), 1);
    let other = Site {
        model: "other",
        ..A
    };
    c.tables[1].conns[0] = Default::default();
    assert_eq!(
        c.check(1, other, 1),
        Ok(Admit::Yes),
        "exact scope locks one model"
    );
    // A model-scoped verdict locks even with lockouts off, and leaves the key alone.
    let mut c = Cores::new(1, 2);
    let v = verdict(404, "The model `m` does not exist");
    assert_eq!(v.scope, Scope::Model);
    c.fail(0, A, &v, 0);
    assert!(matches!(c.check(0, A, 1), Err(Exclusion::Lockout { .. })));
    assert_eq!(c.check(0, other, 1), Ok(Admit::Yes));
    c.ok(0, A, 2);
    c.sync();
    assert!(
        c.tables[1].lockouts.is_empty(),
        "a success decays the entry away everywhere"
    );
}

#[test]
fn provider_scope_cools_every_connection_and_request_scope_nothing() {
    let mut c = Cores::new(2, 2);
    let mut v = verdict(429, "");
    v.scope = Scope::Provider;
    c.fail(0, A, &v, 0);
    c.sync();
    assert!(c.check(1, B, 1).is_err());
    assert_eq!(
        c.check(
            1,
            Site {
                provider: 1,
                conn: ConnId::new(2),
                model: "m",
                tenant: 0,
                sent: 0,
                probe: false,
            },
            1
        ),
        Ok(Admit::Yes)
    );
    let mut c = Cores::new(1, 2);
    c.fail(0, A, &verdict(400, "bad field"), 0);
    assert_eq!(c.check(0, A, 1), Ok(Admit::Yes));
}

#[test]
fn window_gate_is_opt_in() {
    let mut c = Cores::new(1, 2);
    c.s.gate_enabled = true;
    c.s.providers[0].gate.threshold = 3;
    c.s.rate_limit_scope = rate_limit_scope::RateLimitScope::Connection;
    for i in 0..3 {
        c.tables[0].conns = vec![Default::default(); 2];
        c.fail(0, A, &verdict(429, ""), i);
    }
    c.sync();
    c.tables[1].conns = vec![Default::default(); 2];
    assert!(matches!(
        c.check(1, B, 10),
        Err(Exclusion::ProviderGate { .. })
    ));
    c.ok(1, B, 11);
    c.sync();
    c.tables[0].conns = vec![Default::default(); 2];
    assert_eq!(c.check(0, A, 12), Ok(Admit::Yes));
}

#[test]
fn exclusion_waitability() {
    assert!(
        Exclusion::Cooling {
            reason: Some(Reason::RateLimited),
            ms: 1
        }
        .waitable()
    );
    assert!(
        !Exclusion::Cooling {
            reason: Some(Reason::QuotaExhausted),
            ms: 1
        }
        .waitable()
    );
    assert!(
        !Exclusion::Cooling {
            reason: Some(Reason::AuthFailure),
            ms: 1
        }
        .waitable()
    );
    assert!(!Exclusion::BreakerOpen { ms: 1 }.waitable());
    assert!(
        !Exclusion::Lockout {
            reason: Reason::ModelNotFound,
            ms: 1
        }
        .waitable()
    );
    assert!(!Exclusion::Terminal(cooldown::Terminal::Banned).waitable());
}

#[test]
fn account_limits_cool_sibling_keys() {
    let mut c = Cores::new(1, 3);
    c.s.account_siblings = vec![vec![ConnId::new(1)], vec![ConnId::new(0)], vec![]];
    c.fail(0, A, &verdict(429, ""), 0);
    c.sync();
    assert!(c.check(1, B, 1).is_err(), "same account: cooled too");
    let third = Site {
        provider: 0,
        conn: ConnId::new(2),
        model: "m",
        tenant: 0,
        sent: 0,
        probe: false,
    };
    assert_eq!(c.check(1, third, 1), Ok(Admit::Yes));
    // A server error is not an account limit.
    let mut c = Cores::new(1, 3);
    c.s.account_siblings = vec![vec![ConnId::new(1)], vec![ConnId::new(0)], vec![]];
    c.fail(0, A, &verdict(500, ""), 0);
    assert_eq!(c.check(0, B, 1), Ok(Admit::Yes));
}

/// A burst in flight to a failing key ends after the breaker opened, or after its probe closed
/// it: those failures are old news, on every core, and neither reopen it nor count again.
#[test]
fn failures_in_flight_across_an_opening_do_not_reopen_the_breaker() {
    let mut c = Cores::new(1, 2);
    let v = verdict(500, "internal error");
    let open_at = c.s.providers[0].breaker.open_at;
    for i in 0..u64::from(open_at) {
        c.fail(0, A, &v, 1_000 + i);
    }
    c.sync();
    assert_eq!(c.tables[1].breakers[0].state, BreakerState::Open);
    let opened = c.tables[0].breakers[0].opened_at;
    let open_ms = c.s.providers[0].breaker.open_ms;
    // Half-open when its time is up; a failure of a request sent before the opening lands.
    let later = opened + open_ms;
    let p = c.s.providers[0].breaker;
    c.tables[1].breakers[0].refresh(later, &p);
    assert_eq!(c.tables[1].breakers[0].state, BreakerState::HalfOpen);
    c.fail_sent(1, A, opened - 1, &v, later);
    assert_eq!(c.check(1, B, later), Ok(Admit::Probe), "still half-open");
    // The probe (on B) succeeds and closes it everywhere; more stale failures land on both cores.
    c.ok(1, B, later + 10);
    c.sync();
    for core in 0..2 {
        c.fail_sent(core, A, opened - 1, &v, later + 20);
        c.fail_sent(core, A, later + 5, &v, later + 20);
    }
    c.sync();
    for core in 0..2 {
        let b = &c.tables[core].breakers[0];
        assert_eq!(
            (b.state, b.failures),
            (BreakerState::Closed, 0),
            "core {core}"
        );
    }
    // A failure of a request sent since the close is news.
    c.fail(0, B, &v, later + 30);
    c.sync();
    assert_eq!(c.tables[1].breakers[0].failures, 1);
}
