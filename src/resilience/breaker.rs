//! The provider circuit breaker (closed / degraded / open / half-open). Only server errors and
//! transport failures count; a 429 is neutral.
//!
//! Each core keeps its own copy, fed with every failure and success any core observed (the
//! events carry the time they happened, so the copies agree). The one half-open probe is
//! claimed through a shared atomic so that exactly one core sends it.
//!
//! An open breaker ends when its open time is over or, sooner, when a synthetic probe (the
//! prober's cheap request, `proxy::prober`) found the provider answering again: recovery
//! follows the provider, not a timer. Open times grow with consecutive openings (a half-open
//! probe that fails, or an opening soon after the last close), so a flapping provider is
//! probed less and less often.

use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
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
    /// How often a synthetic probe asks whether the provider is back while the breaker is
    /// open (0: never; the open time alone decides). Doubles with each consecutive opening.
    pub probe_interval_ms: u64,
    /// How long a claimed probe may stay unanswered before another core may probe.
    pub probe_timeout_ms: u64,
    /// Distinct clients (tenants) whose failures it takes to open the breaker: with 2 or more,
    /// one tenant's own slow or failing requests cannot close a provider for everyone else.
    pub min_tenants: u32,
    /// Jitter on the open time, ± percent (`resilience.jitter`).
    pub jitter_pct: u8,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Breaker {
    pub state: BreakerState,
    pub failures: u32,
    pub opened_at: u64,
    pub open_cycles: u32,
    pub last_failure: u64,
    /// When a synthetic probe last found the provider answering (0: never).
    pub probe_ok_at: u64,
    /// When the breaker last closed after an opening, and the open cycles it had then: an
    /// opening soon after resumes the count (a flapping provider waits longer each time).
    closed_at: u64,
    closed_cycles: u32,
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
            probe_ok_at: 0,
            closed_at: 0,
            closed_cycles: 0,
            tenants: [0; MAX_TENANTS],
            distinct: 0,
        }
    }
}

/// While another request is the half-open probe, others are told to come back this soon.
pub const PROBE_OUT_RETRY_MS: u64 = 1_000;

impl Breaker {
    /// The same breaker with each of its times passed through `f` (0, never, stays 0): to
    /// keep it across a restart on the wall clock (`runtime::saved`).
    pub fn with_times(&self, f: impl Fn(u64) -> u64) -> Breaker {
        let mut b = self.clone();
        for t in [
            &mut b.opened_at,
            &mut b.last_failure,
            &mut b.probe_ok_at,
            &mut b.closed_at,
        ] {
            *t = f(*t);
        }
        b
    }

    /// Whether there is anything worth keeping across a restart.
    pub fn troubled(&self) -> bool {
        self.state != BreakerState::Closed || self.failures > 0
    }

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

    /// The longest the breaker stays open (the open time's cap).
    pub fn max_open_ms(p: &BreakerProfile) -> u64 {
        p.open_ms.saturating_mul(p.max_multiplier.max(1))
    }

    /// How often the prober asks while the breaker is open (`None`: it does not): the
    /// profile's interval, doubled with each consecutive opening, never above the open time.
    pub fn probe_every(&self, p: &BreakerProfile) -> Option<u64> {
        if p.probe_interval_ms == 0 {
            return None;
        }
        let shift = self.open_cycles.saturating_sub(1).min(20);
        Some((p.probe_interval_ms << shift).min(self.open_ms(p).max(p.probe_interval_ms)))
    }

    /// Lazy open -> half-open once the open time has passed or a synthetic probe found the
    /// provider answering since the breaker opened.
    pub fn refresh(&mut self, now: u64, p: &BreakerProfile) {
        if self.state == BreakerState::Open
            && (now >= self.opened_at + self.open_ms(p) || self.probe_ok_at > self.opened_at)
        {
            self.state = BreakerState::HalfOpen;
        }
    }

    /// The next chance of success while open, in ms (0 unless open): the next synthetic
    /// probe's answer where the provider is probed, else the rest of the open time. This is
    /// what clients are told to wait, never the longest timer.
    pub fn retry_after(&self, now: u64, p: &BreakerProfile) -> u64 {
        match self.state {
            BreakerState::Open => {
                let rest = (self.opened_at + self.open_ms(p)).saturating_sub(now);
                self.probe_every(p).map_or(rest, |every| rest.min(every))
            }
            _ => 0,
        }
    }

    /// A synthetic probe found the provider answering at `at` (from any core).
    pub fn on_probe_ok(&mut self, at: u64, p: &BreakerProfile) {
        self.probe_ok_at = self.probe_ok_at.max(at);
        self.refresh(at, p);
    }

    /// Open at `at`: one more consecutive opening (resuming the count of an opening that closed
    /// a short while ago).
    fn open(&mut self, at: u64, p: &BreakerProfile) {
        let recent =
            self.closed_cycles > 0 && at.saturating_sub(self.closed_at) < Self::max_open_ms(p);
        let resumed = if recent { self.closed_cycles } else { 0 };
        self.open_cycles = self.open_cycles.max(resumed) + 1;
        self.state = BreakerState::Open;
        self.opened_at = at;
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

    /// Whether the failure of an attempt sent at `sent` is news to the breaker. One sent before
    /// its latest opening or close belongs to a stretch it has already judged: a burst of
    /// requests in flight to a failing key ends after the breaker opened, or after its probe
    /// closed it, and would otherwise reopen it at once for twice as long.
    pub fn is_news(&self, sent: u64) -> bool {
        sent >= self.opened_at.max(self.closed_at)
    }

    /// A counted failure observed at `at` (by any core) on a request of `tenant`.
    pub fn on_failure(&mut self, at: u64, tenant: u64, p: &BreakerProfile) {
        self.refresh(at, p);
        self.last_failure = self.last_failure.max(at);
        match self.state {
            // Failures while open never extend the open time.
            BreakerState::Open => {}
            BreakerState::HalfOpen => self.open(at, p),
            BreakerState::Closed | BreakerState::Degraded => {
                self.failures += 1;
                let tenants = self.note_tenant(tenant);
                let enough_tenants = tenants >= p.min_tenants.clamp(1, MAX_TENANTS as u32);
                if self.failures >= p.open_at && enough_tenants {
                    self.open(at, p);
                } else if self.failures >= p.degraded_at {
                    self.state = BreakerState::Degraded;
                }
            }
        }
    }

    /// A success at `at`; returns whether it changed anything (worth telling other cores).
    pub fn on_success(&mut self, at: u64, p: &BreakerProfile) -> bool {
        match self.state {
            // A success of a request sent before the breaker opened proves nothing.
            BreakerState::Open => false,
            BreakerState::HalfOpen => {
                // Closed; the openings are remembered for a while (see `open`).
                *self = Breaker {
                    closed_at: at,
                    closed_cycles: self.open_cycles,
                    ..Breaker::default()
                };
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

#[cfg(test)]
mod tests;
