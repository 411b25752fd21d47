//! The resilience engine: classify every failure, cool what failed, own every retry under one
//! budget. Each core owns its [`Tables`] (plain data, no locks); what one core learns it applies
//! and broadcasts as an [`Event`], and every other core merges it before its next decision.

pub mod breaker;
pub mod budget;
pub mod bus;
pub mod classify;
pub mod cooldown;
mod exclusion;
pub mod hints;
pub mod jitter;
pub mod lockout;
pub mod probe;
pub mod rate_limit_scope;
pub mod reason;
mod refusals;
pub mod repeats;
pub mod restate;
mod rules;
pub mod settings;
pub mod usage_wall;
pub mod window_gate;

use crate::ids::ConnId;
use breaker::{Admit, Breaker, BreakerState};
use classify::{Reason, Scope, Verdict};
use cooldown::ConnState;
pub use exclusion::{Exclusion, Ineligible};
use lockout::{Lock, LockScope, Lockouts};
pub use settings::Settings;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use window_gate::WindowGate;

/// A fact learned by one core, replicated to the others. Merging is idempotent for state
/// snapshots (`Conn`, `Lock`); counted facts (breaker, gate) are delivered once per core.
#[derive(Clone, Debug)]
pub enum Event {
    Conn {
        conn: ConnId,
        state: ConnState,
    },
    BreakerFailure {
        provider: usize,
        at: u64,
        /// The failing request's tenant (see `BreakerProfile::min_tenants`).
        tenant: u64,
    },
    BreakerSuccess {
        provider: usize,
        at: u64,
    },
    BreakerReset {
        provider: usize,
    },
    /// A synthetic probe found the provider answering (`proxy::prober`).
    BreakerProbeOk {
        provider: usize,
        at: u64,
    },
    GateFailure {
        provider: usize,
        at: u64,
    },
    GateSuccess {
        provider: usize,
    },
    Lock(Lock),
    LockDecay {
        conn: ConnId,
        model: Arc<str>,
    },
    LockClear {
        conn: ConnId,
        model: Option<Arc<str>>,
    },
    /// A session pinned to a connection (session affinity), until `until` (Unix ms).
    Pin {
        key: Arc<str>,
        conn: ConnId,
        until: u64,
    },
    /// The admin asks each core for decision records (its own ring): by request id, or the
    /// latest `limit`. Not resilience state; answered by the core, ignored by the tables.
    DecisionQuery {
        id: Option<Arc<str>>,
        limit: usize,
        reply: crossbeam_channel::Sender<Vec<crate::audit::Record>>,
    },
}

/// Shared, lock-free pieces: one half-open probe claim per provider.
#[derive(Debug)]
pub struct Probes(pub Vec<AtomicU64>);

impl Probes {
    pub fn new(providers: usize) -> Self {
        Probes((0..providers).map(|_| AtomicU64::new(0)).collect())
    }
}

/// Where an attempt went.
#[derive(Clone, Copy, Debug)]
pub struct Site<'a> {
    pub provider: usize,
    pub conn: ConnId,
    pub model: &'a str,
    /// The client (tenant) the attempt was made for (a hash; 0 when it sent no credential).
    pub tenant: u64,
    /// When the attempt was sent (`clock::now_ms`; for a pick, the pick's time): the breaker
    /// does not count a failure of one sent before its latest opening or close.
    pub sent: u64,
    /// The attempt is a half-open breaker's one request: only its failure reopens the breaker
    /// (any other failing then was admitted before this core heard of the opening).
    pub probe: bool,
}

/// One core's resilience tables.
#[derive(Debug)]
pub struct Tables {
    pub conns: Vec<ConnState>,
    pub breakers: Vec<Breaker>,
    pub gates: Vec<WindowGate>,
    pub lockouts: Lockouts,
}

impl Tables {
    pub fn new(providers: usize, connections: usize) -> Self {
        Tables {
            conns: vec![ConnState::default(); connections],
            breakers: vec![Breaker::default(); providers],
            gates: vec![WindowGate::default(); providers],
            lockouts: Lockouts::new(connections),
        }
    }

    /// Room for `providers` and `connections` slots after a reload; the `fresh` slots (new
    /// identities, or slots given out again) start clean. Everything else keeps its state.
    pub fn fit(
        &mut self,
        providers: usize,
        connections: usize,
        fresh_providers: &[usize],
        fresh_conns: &[ConnId],
    ) {
        fn grow<T: Clone + Default>(v: &mut Vec<T>, n: usize, fresh: impl Iterator<Item = usize>) {
            if v.len() < n {
                v.resize(n, T::default());
            }
            for i in fresh {
                if let Some(x) = v.get_mut(i) {
                    *x = T::default();
                }
            }
        }
        grow(
            &mut self.conns,
            connections,
            fresh_conns.iter().map(|c| c.index()),
        );
        grow(
            &mut self.breakers,
            providers,
            fresh_providers.iter().copied(),
        );
        grow(&mut self.gates, providers, fresh_providers.iter().copied());
        self.lockouts.fit(connections, fresh_conns);
    }

    /// Merge an event from any core (including this one's own, already applied ones: harmless
    /// for snapshots, so only other cores' events are passed here).
    pub fn apply(&mut self, ev: &Event, s: &Settings) {
        match ev {
            Event::Conn { conn, state } => {
                if let Some(c) = self.conns.get_mut(conn.index()) {
                    c.merge(state);
                }
            }
            Event::BreakerFailure {
                provider,
                at,
                tenant,
            } => {
                if let (Some(b), Some(p)) =
                    (self.breakers.get_mut(*provider), s.providers.get(*provider))
                {
                    b.on_failure(*at, *tenant, &p.breaker);
                }
            }
            Event::BreakerSuccess { provider, at } => {
                if let (Some(b), Some(p)) =
                    (self.breakers.get_mut(*provider), s.providers.get(*provider))
                {
                    // A probe's success: this replica may not have noticed the half-open yet.
                    b.refresh(*at, &p.breaker);
                    b.on_success(*at, &p.breaker);
                }
            }
            Event::BreakerProbeOk { provider, at } => {
                if let (Some(b), Some(p)) =
                    (self.breakers.get_mut(*provider), s.providers.get(*provider))
                {
                    b.on_probe_ok(*at, &p.breaker);
                }
            }
            Event::BreakerReset { provider } => {
                if let Some(b) = self.breakers.get_mut(*provider) {
                    b.reset();
                }
            }
            Event::GateFailure { provider, at } => {
                if let (Some(g), Some(p)) =
                    (self.gates.get_mut(*provider), s.providers.get(*provider))
                {
                    g.on_failure(*at, &p.gate);
                }
            }
            Event::GateSuccess { provider } => {
                if let Some(g) = self.gates.get_mut(*provider) {
                    g.on_success();
                }
            }
            Event::Lock(l) => self.lockouts.merge(l.clone()),
            Event::LockDecay { conn, model } => self.lockouts.on_success(*conn, model, model),
            Event::LockClear { conn, model } => {
                self.lockouts.clear(*conn, model.as_deref());
            }
            Event::DecisionQuery { .. } | Event::Pin { .. } => {}
        }
    }

    /// Whether `site` may be tried now. A half-open breaker admits exactly one probe.
    pub fn check(
        &mut self,
        s: &Settings,
        probes: &Probes,
        site: Site,
        now: u64,
    ) -> Result<Admit, Exclusion> {
        match self.blocked(s, site, now) {
            Some(e) => Err(e),
            None => self.admit(s, probes, site, now),
        }
    }

    /// What keeps `site` from being tried now, if anything. When several things block it, the
    /// one that lasts longest is reported (a terminal state first), so that a wait decision
    /// never wakes up to a candidate that is still blocked. Claims nothing.
    #[inline]
    pub fn blocked(&mut self, s: &Settings, site: Site, now: u64) -> Option<Exclusion> {
        let c = &self.conns[site.conn];
        // Fast path, the common case: nothing on record anywhere.
        if c.until <= now
            && c.terminal.is_none()
            && !self.lockouts.any_active(now)
            && !s.gate_enabled
            && self.breakers[site.provider].state != BreakerState::Open
        {
            return None;
        }
        self.blocked_slow(s, site, now)
    }

    #[cold]
    #[inline(never)]
    fn blocked_slow(&mut self, s: &Settings, site: Site, now: u64) -> Option<Exclusion> {
        let c = &self.conns[site.conn];
        if let Some(t) = c.terminal {
            return Some(Exclusion::Terminal(t));
        }
        let mut worst: Option<Exclusion> = None;
        let mut consider = |e: Exclusion| {
            if worst
                .as_ref()
                .is_none_or(|w| e.remaining_ms() > w.remaining_ms())
            {
                worst = Some(e);
            }
        };
        let policy = &s.providers[site.provider];
        if c.cooling(now) {
            consider(Exclusion::Cooling {
                reason: c.last.reason,
                ms: cooling_ms(
                    c,
                    policy,
                    (
                        s.provider_conns[site.provider].len(),
                        self.trouble(s, site.provider, now),
                    ),
                    now,
                ),
            });
        }
        if let Some(l) = self.lockouts.locked(site.conn, site.model, site.model, now) {
            consider(Exclusion::Lockout {
                reason: l.reason,
                ms: l.until - now,
            });
        }
        if s.gate_enabled
            && let Some(ms) = self.gates[site.provider].closed_for(now, &policy.gate)
        {
            consider(Exclusion::ProviderGate { ms });
        }
        let breaker = &mut self.breakers[site.provider];
        breaker.refresh(now, &policy.breaker);
        if breaker.state == BreakerState::Open {
            consider(Exclusion::BreakerOpen {
                ms: breaker.retry_after(now, &policy.breaker).max(1),
            });
        }
        worst
    }

    /// Admission by the provider breaker for a candidate that is not blocked: a half-open
    /// breaker lets exactly one probe through (claimed across all cores).
    pub fn admit(
        &mut self,
        s: &Settings,
        probes: &Probes,
        site: Site,
        now: u64,
    ) -> Result<Admit, Exclusion> {
        let policy = &s.providers[site.provider];
        match self.breakers[site.provider].admit(now, &policy.breaker, &probes.0[site.provider]) {
            Admit::No(ms) => Err(Exclusion::BreakerOpen { ms }),
            admit => Ok(admit),
        }
    }

    /// Record a judged failure: apply it here and hand each resulting event to `emit`.
    pub fn on_failure(
        &mut self,
        s: &Settings,
        site: Site,
        v: &Verdict,
        now: u64,
        emit: &mut dyn FnMut(Event),
    ) {
        let policy = &s.providers[site.provider];
        let lock_by_status =
            s.lockout.enabled && v.status != 0 && s.lockout.codes.contains(&v.status);
        let cool = |tables: &mut Tables, conn: ConnId, emit: &mut dyn FnMut(Event)| {
            if let Some(state) = tables.conns[conn].on_failure(v, now, &policy.cooldown) {
                emit(Event::Conn { conn, state });
            }
        };
        match v.scope {
            Scope::Request => {}
            Scope::Model => self.lock(s, site, v, LockScope::for_status(v.status), now, emit),
            Scope::Connection if self.limits_one_model(s, site, v, now) => {
                self.cool_model(s, site, v, now, emit);
                if lock_by_status {
                    self.lock(s, site, v, LockScope::for_status(v.status), now, emit);
                }
            }
            Scope::Connection => {
                cool(self, site.conn, emit);
                // Account-wide limits hold for every key of the account.
                if matches!(
                    v.reason,
                    Reason::RateLimited | Reason::QuotaExhausted | Reason::CreditsExhausted
                ) && let Some(siblings) = s.account_siblings.get(site.conn.index())
                {
                    for &conn in siblings {
                        cool(self, conn, emit);
                    }
                }
                if lock_by_status {
                    self.lock(s, site, v, LockScope::for_status(v.status), now, emit);
                }
            }
            Scope::Provider => {
                for &conn in &s.provider_conns[site.provider] {
                    cool(self, conn, emit);
                }
            }
        }
        let breaker = &mut self.breakers[site.provider];
        breaker.refresh(now, &policy.breaker);
        if v.reason.trips_breaker()
            && breaker.state != BreakerState::Open
            && (breaker.state != BreakerState::HalfOpen || site.probe)
            && breaker.is_news(site.sent)
        {
            breaker.on_failure(now, site.tenant, &policy.breaker);
            emit(Event::BreakerFailure {
                provider: site.provider,
                at: now,
                tenant: site.tenant,
            });
        }
        if s.gate_enabled
            && v.scope != Scope::Request
            && !matches!(v.reason, Reason::ModelNotFound | Reason::NotFound)
        {
            self.gates[site.provider].on_failure(now, &policy.gate);
            emit(Event::GateFailure {
                provider: site.provider,
                at: now,
            });
        }
    }

    fn lock(
        &mut self,
        s: &Settings,
        site: Site,
        v: &Verdict,
        scope: LockScope,
        now: u64,
        emit: &mut dyn FnMut(Event),
    ) {
        let exact = v
            .cooldown_ms
            .map(|ms| (ms, true))
            .or(v.hint.map(|h| (h.ms, h.source.is_header())));
        let at = lockout::LockAt {
            conn: site.conn,
            model: site.model,
            family: site.model,
        };
        if let Some(l) = self
            .lockouts
            .on_failure(&s.lockout, at, scope, v.reason, exact, now)
        {
            emit(Event::Lock(l));
        }
    }

    /// Record a success. Emits nothing in the common case (nothing to clear).
    pub fn on_success(&mut self, s: &Settings, site: Site, now: u64, emit: &mut dyn FnMut(Event)) {
        if let Some(state) = self.conns[site.conn].on_success(now) {
            emit(Event::Conn {
                conn: site.conn,
                state,
            });
        }
        let policy = &s.providers[site.provider];
        if self.breakers[site.provider].on_success(now, &policy.breaker) {
            emit(Event::BreakerSuccess {
                provider: site.provider,
                at: now,
            });
        }
        if s.gate_enabled && self.gates[site.provider].count() > 0 {
            self.gates[site.provider].on_success();
            emit(Event::GateSuccess {
                provider: site.provider,
            });
        }
        if self.lockouts.has_entry(site.conn, site.model, site.model) {
            self.lockouts.on_success(site.conn, site.model, site.model);
            emit(Event::LockDecay {
                conn: site.conn,
                model: Arc::from(site.model),
            });
        }
    }
}

/// How long a cooling key is out, as its next chance: a cooldown a probe may lift (the
/// provider's own trouble, `ConnState::probe_may_lift`) ends at the prober's next success, which
/// comes round to this key within one interval per key of the provider (`keys`, with how widely
/// the provider is in trouble) once the key is due (`ConnState::probe_due`); any other cooldown runs
/// its time.
fn cooling_ms(
    c: &ConnState,
    policy: &settings::ProviderPolicy,
    (keys, trouble): (usize, cooldown::Trouble),
    now: u64,
) -> u64 {
    let rest = c.cool_end().saturating_sub(now);
    let every = policy.breaker.probe_interval_ms;
    if every > 0 && c.probe_may_lift(trouble) {
        let due = c.probe_due(every).saturating_sub(now);
        rest.min(due + every.saturating_mul(keys.max(1) as u64))
    } else {
        rest
    }
}

#[cfg(test)]
mod tests;
