//! The provider circuit breaker (closed / degraded / open / half-open) and the opt-in provider
//! window gate. Only server errors and transport failures count; a 429 is neutral.
//!
//! Each core keeps its own copy, fed with every failure and success any core observed (the
//! events carry the time they happened, so the copies agree). The one half-open probe is
//! claimed through a shared atomic so that exactly one core sends it.

use serde::Serialize;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BreakerState {
    Closed,
    Degraded,
    Open,
    HalfOpen,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct BreakerProfile {
    pub degraded_at: u32,
    pub open_at: u32,
    pub open_ms: u64,
    /// Open cycles before the open time starts doubling.
    pub escalate_after: u32,
    pub max_multiplier: u64,
    /// How long a claimed probe may stay unanswered before another core may probe.
    pub probe_timeout_ms: u64,
    /// Distinct clients (tenants) whose failures it takes to open the breaker: with 2 or more,
    /// one tenant's own slow or failing requests cannot close a provider for everyone else.
    pub min_tenants: u32,
    /// Jitter on the open time, ± percent (`resilience.jitter`).
    pub jitter_pct: u8,
}

#[derive(Clone, Debug, Serialize)]
pub struct Breaker {
    pub state: BreakerState,
    pub failures: u32,
    pub opened_at: u64,
    pub open_cycles: u32,
    pub last_failure: u64,
    /// The distinct tenants among the failures counted since the breaker was last clean (the
    /// first few; enough to compare with `min_tenants`).
    #[serde(skip)]
    tenants: [u64; MAX_TENANTS],
    #[serde(skip)]
    distinct: u8,
}

/// The most distinct tenants a breaker remembers (`min_tenants` is clamped to it).
pub const MAX_TENANTS: usize = 4;

/// What the breaker lets through right now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admit {
    Yes,
    /// Half-open: this request is the probe (it holds the claim).
    Probe,
    /// Open (or another core's probe is out): retry after this many ms.
    No(u64),
}

impl Default for Breaker {
    fn default() -> Self {
        Breaker {
            state: BreakerState::Closed,
            failures: 0,
            opened_at: 0,
            open_cycles: 0,
            last_failure: 0,
            tenants: [0; MAX_TENANTS],
            distinct: 0,
        }
    }
}

/// While another request is the half-open probe, others are told to come back this soon.
pub const PROBE_OUT_RETRY_MS: u64 = 1_000;

impl Breaker {
    /// How long the breaker stays open, jittered by the moment it opened (so every core,
    /// applying the same events, computes the same time).
    pub fn open_ms(&self, p: &BreakerProfile) -> u64 {
        let ms = if self.open_cycles <= p.escalate_after {
            p.open_ms
        } else {
            let shift = (self.open_cycles - p.escalate_after).min(20);
            (p.open_ms << shift).min(p.open_ms.saturating_mul(p.max_multiplier.max(1)))
        };
        super::jitter::spread(ms, p.jitter_pct, self.opened_at)
    }

    /// Lazy open -> half-open once the open time has passed.
    pub fn refresh(&mut self, now: u64, p: &BreakerProfile) {
        if self.state == BreakerState::Open && now >= self.opened_at + self.open_ms(p) {
            self.state = BreakerState::HalfOpen;
        }
    }

    /// Remaining open time (0 unless open).
    pub fn retry_after(&self, now: u64, p: &BreakerProfile) -> u64 {
        match self.state {
            BreakerState::Open => (self.opened_at + self.open_ms(p)).saturating_sub(now),
            _ => 0,
        }
    }

    /// Whether a request may go; half-open admits the single probe claimed in `probe`.
    pub fn admit(&mut self, now: u64, p: &BreakerProfile, probe: &AtomicU64) -> Admit {
        self.refresh(now, p);
        match self.state {
            BreakerState::Closed | BreakerState::Degraded => Admit::Yes,
            BreakerState::Open => Admit::No(self.retry_after(now, p).max(1)),
            BreakerState::HalfOpen => {
                let held = probe.load(Ordering::Acquire);
                if held > now {
                    // The probe usually answers in well under a second and then closes the
                    // breaker: say so, rather than the probe's whole timeout (`ringside drill`
                    // measured clients told 30 s while the probe closed it at once).
                    return Admit::No((held - now).min(PROBE_OUT_RETRY_MS));
                }
                match probe.compare_exchange(
                    held,
                    now + p.probe_timeout_ms,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(_) => Admit::Probe,
                    Err(v) => Admit::No(v.saturating_sub(now).max(1)),
                }
            }
        }
    }

    /// Remember `tenant` among the failing tenants; returns how many distinct ones there are.
    fn note_tenant(&mut self, tenant: u64) -> u32 {
        let n = usize::from(self.distinct);
        if !self.tenants[..n].contains(&tenant) && n < MAX_TENANTS {
            self.tenants[n] = tenant;
            self.distinct += 1;
        }
        u32::from(self.distinct)
    }

    /// A counted failure observed at `at` (by any core) on a request of `tenant`.
    pub fn on_failure(&mut self, at: u64, tenant: u64, p: &BreakerProfile) {
        self.refresh(at, p);
        self.last_failure = self.last_failure.max(at);
        match self.state {
            // Failures while open never extend the open time.
            BreakerState::Open => {}
            BreakerState::HalfOpen => {
                self.open_cycles += 1;
                self.state = BreakerState::Open;
                self.opened_at = at;
            }
            BreakerState::Closed | BreakerState::Degraded => {
                self.failures += 1;
                let tenants = self.note_tenant(tenant);
                let enough_tenants = tenants >= p.min_tenants.clamp(1, MAX_TENANTS as u32);
                if self.failures >= p.open_at && enough_tenants {
                    self.state = BreakerState::Open;
                    self.opened_at = at;
                    self.open_cycles += 1;
                } else if self.failures >= p.degraded_at {
                    self.state = BreakerState::Degraded;
                }
            }
        }
    }

    /// A success; returns whether it changed anything (worth telling other cores).
    pub fn on_success(&mut self, p: &BreakerProfile) -> bool {
        match self.state {
            // A success of a request sent before the breaker opened proves nothing.
            BreakerState::Open => false,
            BreakerState::HalfOpen => {
                *self = Breaker::default();
                true
            }
            BreakerState::Closed | BreakerState::Degraded => {
                if self.failures == 0 {
                    return false;
                }
                self.failures -= 1;
                if self.failures == 0 {
                    self.distinct = 0;
                }
                if self.failures <= p.degraded_at {
                    self.state = BreakerState::Closed;
                }
                true
            }
        }
    }

    pub fn reset(&mut self) {
        *self = Breaker::default();
    }
}

/// Release a probe claim without a verdict (the probe got a 429 or its client left).
pub fn release_probe(probe: &AtomicU64) {
    probe.store(0, Ordering::Release);
}

/// A half-open probe claimed for one attempt (or nothing, when the breaker admitted freely):
/// released when dropped, whichever way the attempt ends, after its verdict was recorded.
pub struct ProbeGuard<'a>(Option<&'a AtomicU64>);

impl<'a> ProbeGuard<'a> {
    pub fn new(admit: Admit, claim: &'a AtomicU64) -> Self {
        ProbeGuard((admit == Admit::Probe).then_some(claim))
    }

    /// This attempt holds the half-open probe claim.
    pub fn is_claimed(&self) -> bool {
        self.0.is_some()
    }

    /// Release the claim now (its verdict is recorded); dropping the guard then does nothing.
    pub fn release(&mut self) {
        if let Some(claim) = self.0.take() {
            release_probe(claim);
        }
    }
}

impl Drop for ProbeGuard<'_> {
    fn drop(&mut self) {
        if let Some(claim) = self.0 {
            release_probe(claim);
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct GateProfile {
    pub threshold: u32,
    pub window_ms: u64,
    pub cooldown_ms: u64,
}

/// Opt-in provider window gate: `threshold` failures within `window_ms` close the provider
/// for `cooldown_ms` after the last one; a success clears the window.
#[derive(Clone, Debug, Default, Serialize)]
pub struct WindowGate {
    failures: VecDeque<u64>,
}

impl WindowGate {
    const KEEP: usize = 200;

    pub fn on_failure(&mut self, at: u64, p: &GateProfile) {
        self.failures.push_back(at);
        while self.failures.front().is_some_and(|&t| t + p.window_ms < at)
            || self.failures.len() > Self::KEEP
        {
            self.failures.pop_front();
        }
    }

    pub fn on_success(&mut self) {
        self.failures.clear();
    }

    /// Remaining closed time, if closed.
    pub fn closed_for(&self, now: u64, p: &GateProfile) -> Option<u64> {
        let last = *self.failures.back()?;
        let recent = self
            .failures
            .iter()
            .filter(|&&t| t + p.window_ms >= last)
            .count();
        if recent < p.threshold as usize {
            return None;
        }
        let end = last + p.cooldown_ms;
        (end > now).then(|| end - now)
    }

    pub fn count(&self) -> usize {
        self.failures.len()
    }
}

#[cfg(test)]
mod tests;
