//! The global gate of one connection: concurrency, spacing between starts and an optional
//! reservoir, held for the connection as a whole across every core with lock-free atomics.
//! Cores with waiters publish their most urgent priority; a freed slot goes to the core with
//! the most urgent waiter, ties taken in turn after the core served last, so no core can hog
//! a connection and a waiter on any core is woken by a slot freed on any other.

use serde::Serialize;
use std::sync::atomic::{AtomicI64, AtomicU8, AtomicU32, AtomicU64, Ordering::*};

/// Cores addressable by the waiting mask (more cores share slots, modulo).
pub const MAX_CORES: usize = 64;
/// Published priority of a core without waiters.
pub const NO_WAITERS: u8 = u8::MAX;

/// What one [`Gate::take`] took besides the slot: the spacing turn (`next_start` before and
/// after) and a reservoir token.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Taken {
    spacing: Option<(u64, u64)>,
    reservoir: bool,
}

/// Why a start cannot happen now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Blocked {
    /// Every slot is taken: a release will wake us.
    Full,
    /// Spacing or the reservoir: try again in this many ms.
    Later(u64),
}

#[derive(Debug)]
pub struct Gate {
    /// 0 = unlimited.
    pub max_concurrent: AtomicU32,
    pub min_time_ms: AtomicU64,
    /// Extra spacing learned from rate-limit headers (0 = none), until the window it was
    /// learned in resets (monotonic ms): an upstream that stops sending the headers must not
    /// leave its last, tightest spacing in force for good.
    pub learned_spacing_ms: AtomicU64,
    pub learned_until_ms: AtomicU64,
    /// Reservoir size on refresh; 0 = no reservoir.
    pub reservoir_amount: AtomicI64,
    pub reservoir_refresh_ms: AtomicU64,
    running: AtomicU32,
    next_start: AtomicU64,
    reservoir: AtomicI64,
    reservoir_at: AtomicU64,
    /// Live waiters across all cores.
    queued: AtomicU32,
    /// Bit per core with waiters (who to wake when a slot frees).
    pub waiting_cores: AtomicU64,
    /// Most urgent waiting priority per core (`NO_WAITERS` when none).
    core_prio: [AtomicU8; MAX_CORES],
    /// The core that took the last slot from the queue (ties rotate after it).
    last_core: AtomicU32,
    /// In fleet mode, how many of the cap's slots this instance holds (`fleet::caps`);
    /// `NO_SHARE` outside fleet mode or for an uncapped connection.
    fleet_share: AtomicU32,
    pub stats: GateStats,
}

/// [`Gate::fleet_share`] when no fleet limits the gate.
pub const NO_SHARE: u32 = u32::MAX;

#[derive(Debug, Default, Serialize)]
pub struct GateStats {
    pub started: AtomicU64,
    pub rejected_full: AtomicU64,
    pub rejected_saturated: AtomicU64,
    pub queue_timeouts: AtomicU64,
    pub execution_timeouts: AtomicU64,
    pub cancelled: AtomicU64,
    /// Wait times: how many waited, for how long in all, and the histograms
    /// (`ringside_queue_wait_seconds`, and the deprecated milliseconds family) all read from it.
    #[serde(skip)]
    pub wait: crate::histogram::Histogram,
}

impl GateStats {
    pub fn observe_wait(&self, ms: u64) {
        self.wait.observe_us(ms.saturating_mul(1_000));
    }
}

impl Default for Gate {
    fn default() -> Self {
        Gate {
            max_concurrent: AtomicU32::new(0),
            min_time_ms: AtomicU64::new(0),
            learned_spacing_ms: AtomicU64::new(0),
            learned_until_ms: AtomicU64::new(0),
            reservoir_amount: AtomicI64::new(0),
            reservoir_refresh_ms: AtomicU64::new(0),
            running: AtomicU32::new(0),
            next_start: AtomicU64::new(0),
            reservoir: AtomicI64::new(0),
            reservoir_at: AtomicU64::new(0),
            queued: AtomicU32::new(0),
            waiting_cores: AtomicU64::new(0),
            core_prio: std::array::from_fn(|_| AtomicU8::new(NO_WAITERS)),
            last_core: AtomicU32::new(0),
            fleet_share: AtomicU32::new(NO_SHARE),
            stats: GateStats::default(),
        }
    }
}

impl Gate {
    pub fn new(max_concurrent: u32, min_time_ms: u64, reservoir: i64, refresh_ms: u64) -> Self {
        let g = Gate::default();
        g.max_concurrent.store(max_concurrent, Relaxed);
        g.min_time_ms.store(min_time_ms, Relaxed);
        g.reservoir_amount.store(reservoir, Relaxed);
        g.reservoir_refresh_ms.store(refresh_ms, Relaxed);
        g.reservoir.store(reservoir, Relaxed);
        g
    }

    /// A new reservoir size and refresh period (a reload changed them): full again.
    pub fn reset_reservoir(&self, amount: i64, refresh_ms: u64) {
        self.reservoir_amount.store(amount, Relaxed);
        self.reservoir_refresh_ms.store(refresh_ms, Relaxed);
        self.reservoir.store(amount, Relaxed);
    }

    pub fn running(&self) -> u32 {
        self.running.load(Acquire)
    }

    pub fn queued(&self) -> u32 {
        self.queued.load(Acquire)
    }

    /// Whether someone already waits (a newcomer must not overtake them).
    pub fn has_queue(&self) -> bool {
        self.waiting_cores.load(Acquire) != 0
    }

    /// Publish this core's most urgent waiting priority (`None`: no waiters).
    pub fn publish(&self, core: usize, priority: Option<u8>) {
        let slot = core % MAX_CORES;
        self.core_prio[slot].store(priority.unwrap_or(NO_WAITERS), Release);
        match priority {
            Some(_) => self.waiting_cores.fetch_or(1 << slot, AcqRel),
            None => self.waiting_cores.fetch_and(!(1 << slot), AcqRel),
        };
    }

    /// Whether the next free slot belongs to `core`: it has the most urgent waiter, and among
    /// equally urgent cores it comes first in turn after the core served last.
    pub fn my_turn(&self, core: usize) -> bool {
        let me = core % MAX_CORES;
        let mine = self.core_prio[me].load(Acquire);
        if mine == NO_WAITERS {
            return false;
        }
        let last = self.last_core.load(Acquire) as usize % MAX_CORES;
        let mut bits = self.waiting_cores.load(Acquire);
        let mut best: Option<(u8, usize)> = None;
        while bits != 0 {
            let c = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let p = self.core_prio[c].load(Acquire);
            if p == NO_WAITERS {
                continue;
            }
            // Distance after the last served core: the one served last goes to the back.
            let dist = (c + MAX_CORES - last - 1) % MAX_CORES;
            if best.is_none_or(|(bp, bd)| (p, dist) < (bp, bd)) {
                best = Some((p, dist));
            }
        }
        best.is_some_and(|(bp, bd)| (bp, bd) == (mine, (me + MAX_CORES - last - 1) % MAX_CORES))
    }

    /// Record that `core` took a slot from the queue.
    pub fn served(&self, core: usize) {
        self.last_core.store((core % MAX_CORES) as u32, Release);
    }

    /// No cap, no spacing, no reservoir and nobody waiting: admission has nothing to count.
    pub fn unlimited(&self) -> bool {
        self.max_concurrent.load(Relaxed) == 0
            && self.spacing_ms() == 0
            && self.reservoir_amount.load(Relaxed) == 0
            && !self.has_queue()
    }

    pub fn spacing_ms(&self) -> u64 {
        let learned = self.learned_spacing_ms.load(Relaxed);
        if learned == 0 {
            return self.min_time_ms.load(Relaxed);
        }
        self.spacing_at(crate::clock::now_ms())
    }

    /// The spacing in force at `now` (monotonic ms).
    pub fn spacing_at(&self, now: u64) -> u64 {
        let learned = if now < self.learned_until_ms.load(Relaxed) {
            self.learned_spacing_ms.load(Relaxed)
        } else {
            0
        };
        self.min_time_ms.load(Relaxed).max(learned)
    }

    /// Forget what the headers taught (an operator's reset of the connection).
    pub fn forget_learned(&self) {
        self.learned_spacing_ms.store(0, Relaxed);
    }

    /// Take a slot if concurrency, spacing and reservoir all allow it right now.
    pub fn try_start(&self, now: u64) -> Result<(), Blocked> {
        self.take(now).map(|_| ())
    }

    /// [`Gate::try_start`], with what it took, so that [`Gate::give_back`] can return it when
    /// a second gate (the key's account) refuses the same start.
    pub fn take(&self, now: u64) -> Result<Taken, Blocked> {
        let mut taken = Taken::default();
        let max = self.max_concurrent.load(Relaxed);
        let share = self.fleet_share.load(SeqCst);
        let mut r = self.running.load(Acquire);
        loop {
            if (max > 0 && r >= max) || r >= share {
                return Err(Blocked::Full);
            }
            match self
                .running
                .compare_exchange_weak(r, r + 1, SeqCst, Acquire)
            {
                Ok(_) => break,
                Err(v) => r = v,
            }
        }
        // The fleet may have lowered the share meanwhile (`set_fleet_share`): either it saw
        // this start or this start sees its new share and backs out.
        if share != NO_SHARE && r >= self.fleet_share.load(SeqCst) {
            self.release();
            return Err(Blocked::Full);
        }
        let spacing = self.spacing_ms();
        if spacing > 0 {
            let mut ns = self.next_start.load(Acquire);
            loop {
                if now < ns {
                    self.running.fetch_sub(1, AcqRel);
                    return Err(Blocked::Later(ns - now));
                }
                match self
                    .next_start
                    .compare_exchange_weak(ns, now + spacing, AcqRel, Acquire)
                {
                    Ok(_) => {
                        taken.spacing = Some((ns, now + spacing));
                        break;
                    }
                    Err(v) => ns = v,
                }
            }
        }
        if self.reservoir_amount.load(Relaxed) > 0 {
            self.refresh_reservoir(now);
            let mut v = self.reservoir.load(Acquire);
            loop {
                if v <= 0 {
                    self.running.fetch_sub(1, AcqRel);
                    let at = self.reservoir_at.load(Acquire);
                    let every = self.reservoir_refresh_ms.load(Relaxed).max(1);
                    return Err(Blocked::Later((at + every).saturating_sub(now).max(1)));
                }
                match self
                    .reservoir
                    .compare_exchange_weak(v, v - 1, AcqRel, Acquire)
                {
                    Ok(_) => {
                        taken.reservoir = true;
                        break;
                    }
                    Err(x) => v = x,
                }
            }
        }
        self.stats.started.fetch_add(1, Relaxed);
        Ok(taken)
    }

    /// Undo a [`Gate::take`] whose request never started: the slot, the spacing turn (unless
    /// another start has moved it since) and the reservoir token all come back.
    pub fn give_back(&self, taken: Taken) {
        self.release();
        if let Some((before, set)) = taken.spacing {
            let _ = self
                .next_start
                .compare_exchange(set, before, AcqRel, Acquire);
        }
        if taken.reservoir {
            self.reservoir.fetch_add(1, AcqRel);
        }
        let _ = self
            .stats
            .started
            .fetch_update(Relaxed, Relaxed, |n| n.checked_sub(1));
    }

    fn refresh_reservoir(&self, now: u64) {
        let every = self.reservoir_refresh_ms.load(Relaxed);
        if every == 0 {
            return;
        }
        let at = self.reservoir_at.load(Acquire);
        if now >= at + every
            && self
                .reservoir_at
                .compare_exchange(at, now, AcqRel, Acquire)
                .is_ok()
        {
            self.reservoir
                .store(self.reservoir_amount.load(Relaxed), Release);
        }
    }

    /// This instance's share of the cap, set by the fleet (`NO_SHARE`: none applies).
    pub fn fleet_share(&self) -> u32 {
        self.fleet_share.load(SeqCst)
    }

    /// Set this instance's share of the cap; returns what runs now. Lowering it never takes
    /// a running slot away: the fleet asks Redis to keep at least what runs.
    pub fn set_fleet_share(&self, share: u32) -> u32 {
        self.fleet_share.store(share, SeqCst);
        self.running.load(SeqCst)
    }

    /// Free a slot (the request has ended and its upstream connection is closed or pooled).
    pub fn release(&self) {
        let _ = self
            .running
            .fetch_update(AcqRel, Acquire, |r| r.checked_sub(1));
    }

    /// One more live waiter (for the depth limit and visibility) unless `depth` (0: unbounded)
    /// are already waiting. One atomic step: a check and a separate add let two cores both
    /// take the last place (`ringside drill` saw a queue of 4 behind a depth of 3).
    pub fn try_enqueue(&self, depth: u64) -> bool {
        self.queued
            .fetch_update(AcqRel, Acquire, |q| {
                (depth == 0 || u64::from(q) < depth).then(|| q.saturating_add(1))
            })
            .is_ok()
    }

    /// A live waiter left (granted, timed out or cancelled).
    pub fn dequeue(&self) {
        let _ = self
            .queued
            .fetch_update(AcqRel, Acquire, |q| q.checked_sub(1));
    }

    /// Learn from the upstream's rate-limit headers: when few requests remain before the
    /// window resets, spread what is left over the rest of the window; otherwise relax.
    pub fn learn(&self, remaining: Option<f64>, limit: Option<f64>, reset_ms: Option<u64>) {
        let spacing = match (remaining, reset_ms) {
            (Some(r), Some(reset)) => {
                let low = limit.map_or(r <= 2.0, |l| l > 0.0 && (r <= 2.0 || r / l <= 0.1));
                if low {
                    (reset as f64 / (r.max(0.0) + 1.0)).min(60_000.0) as u64
                } else {
                    0
                }
            }
            _ => return,
        };
        if spacing > 0 {
            let reset = reset_ms.unwrap_or(0);
            let until = crate::clock::now_ms().saturating_add(reset);
            self.learned_until_ms.store(until, Relaxed);
        }
        self.learned_spacing_ms.store(spacing, Relaxed);
    }
}

#[cfg(test)]
mod tests;
