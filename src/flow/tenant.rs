//! Tenant quotas: requests per minute, tokens per minute and requests at once, per client key,
//! across every connection and every core (a tenant cannot dodge its limit by being spread over
//! more upstream keys). A fixed, lock-free table of atomics keyed by the tenant's hash; minute
//! windows are fixed (reset on the first use in a new minute).

use serde::Serialize;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::*};

/// Limits per tenant; 0 = unlimited.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TenantLimits {
    pub requests_per_minute: u32,
    pub tokens_per_minute: u64,
    pub max_concurrent: u32,
}

impl TenantLimits {
    pub fn any(&self) -> bool {
        self.requests_per_minute > 0 || self.tokens_per_minute > 0 || self.max_concurrent > 0
    }
}

#[derive(Debug, Default)]
struct Slot {
    /// Tenant id (0 = free).
    id: AtomicU64,
    running: AtomicU32,
    /// Requests of this tenant waiting in a connection queue (any core).
    queued: AtomicU32,
    /// Minute index of the counters below.
    minute: AtomicU64,
    requests: AtomicU32,
    tokens: AtomicU64,
}

/// Which limit refused a request, and when trying again makes sense.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OverQuota {
    Concurrent,
    RequestsPerMinute { retry_ms: u64 },
    TokensPerMinute { retry_ms: u64 },
}

#[derive(Debug)]
pub struct Tenants {
    slots: Box<[Slot]>,
    pub limits: TenantLimits,
    /// In fleet mode, where the fleet-wide count is kept (`admit_fleet`).
    remote: std::sync::OnceLock<crossbeam_channel::Sender<TenantAsk>>,
}

/// What the fleet's quota keeper is asked: count a request for a tenant across the fleet (its
/// `holder` id counts it as running until released), or release it.
#[derive(Debug)]
pub enum TenantAsk {
    Admit {
        tenant: u64,
        /// The tenant's own limits (`[[tenants]]`, else `[flow]`'s).
        limits: TenantLimits,
        tokens: u64,
        holder: u64,
        /// `None`: counted; `Some`: refused; dropped unanswered: the fleet could not be asked.
        reply: futures_channel::oneshot::Sender<Option<OverQuota>>,
    },
    /// The request counted under `holder` ended (the keeper knows its tenant).
    Release { holder: u64 },
    /// Reserve `ask` on the tenant's fleet-wide spend counters of `periods` (day, month) while
    /// each budgeted one (`limits`, 0 = none; the ledger's counter order) is under its limit;
    /// the answer is the index of the first spent (`None`: reserved).
    Reserve {
        tenant: u64,
        limits: [u64; 4],
        ask: [u64; 4],
        periods: (u64, u64),
        reply: futures_channel::oneshot::Sender<Option<usize>>,
    },
    /// Correct a reservation by what the request really spent (negative: give back).
    Settle {
        tenant: u64,
        periods: (u64, u64),
        delta: [i64; 4],
    },
    /// What the tenant spent fleet-wide in `periods` (the ledger's counter order), for the
    /// admin API.
    Spent {
        tenant: u64,
        periods: (u64, u64),
        reply: futures_channel::oneshot::Sender<[u64; 4]>,
    },
    /// The tenant's fleet-wide day and month start over (an admin's reset).
    Reset { tenant: u64, periods: (u64, u64) },
}

/// How long admission waits for the fleet's count before deciding on this instance's alone.
const FLEET_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

const SLOTS: usize = 4096;
const PROBE: usize = 32;

/// A request counted as running for its tenant until dropped.
#[derive(Debug)]
pub struct TenantPermit {
    tenants: &'static Tenants,
    /// The tenant's slot (low 16 bits) and, in fleet mode, the id it is counted as running
    /// under across the fleet (the rest; 0: not counted there). One word: every request's task
    /// holds a permit for its whole life.
    packed: u64,
}

const SLOT_BITS: u32 = 16;

impl TenantPermit {
    fn slot(&self) -> usize {
        (self.packed & ((1 << SLOT_BITS) - 1)) as usize
    }

    fn fleet_holder(&self) -> u64 {
        self.packed >> SLOT_BITS
    }
}

impl Drop for TenantPermit {
    fn drop(&mut self) {
        let _ = self.tenants.slots[self.slot()]
            .running
            .fetch_update(AcqRel, Acquire, |r| r.checked_sub(1));
        let holder = self.fleet_holder();
        if holder != 0
            && let Some(to) = self.tenants.remote.get()
        {
            let _ = to.send(TenantAsk::Release { holder });
        }
    }
}

impl Tenants {
    pub fn new(limits: TenantLimits) -> Self {
        Tenants {
            slots: (0..SLOTS).map(|_| Slot::default()).collect(),
            limits,
            remote: Default::default(),
        }
    }

    /// From now on quotas hold across the fleet: admission asks `to` too (fleet mode).
    pub fn count_elsewhere(&self, to: crossbeam_channel::Sender<TenantAsk>) {
        let _ = self.remote.set(to);
    }

    /// The fleet's quota and spend keeper, in fleet mode.
    pub fn fleet(&self) -> Option<&crossbeam_channel::Sender<TenantAsk>> {
        self.remote.get()
    }

    /// Whether quotas are counted across a fleet (`admit_fleet`).
    pub fn counted_elsewhere(&self) -> bool {
        self.remote.get().is_some()
    }

    /// [`Tenants::admit`], and in fleet mode the fleet-wide count as well (one round trip to
    /// Redis; a fleet that does not answer leaves the decision to this instance's count).
    pub async fn admit_fleet(
        &'static self,
        id: u64,
        tokens: u64,
        now: u64,
        limits: TenantLimits,
    ) -> Result<TenantPermit, OverQuota> {
        let mut permit = self.admit_with(id, tokens, now, limits)?;
        let Some(to) = self.remote.get() else {
            return Ok(permit);
        };
        let holder: u64 = (rand::random::<u64>() >> SLOT_BITS) | 1;
        let (reply, answer) = futures_channel::oneshot::channel();
        let asked = to.send(TenantAsk::Admit {
            tenant: id,
            limits,
            tokens,
            holder,
            reply,
        });
        if asked.is_err() {
            return Ok(permit);
        }
        match crate::timer::timeout(FLEET_WAIT, answer).await {
            Ok(Ok(None)) => {
                permit.packed |= holder << SLOT_BITS;
                Ok(permit)
            }
            Ok(Ok(Some(over))) => Err(over),
            _ => Ok(permit),
        }
    }

    /// The tenant's slot: claimed on first sight; when the table is full, tenants share the
    /// overflow slot 0 (limits then hold for them together, which errs on the safe side).
    fn slot(&self, id: u64) -> usize {
        let id = id.max(1);
        let start = (id as usize) % (SLOTS - 1) + 1;
        for k in 0..PROBE {
            let i = (start + k - 1) % (SLOTS - 1) + 1;
            let cur = self.slots[i].id.load(Acquire);
            if cur == id {
                return i;
            }
            if cur == 0 {
                match self.slots[i].id.compare_exchange(0, id, AcqRel, Acquire) {
                    Ok(_) => return i,
                    Err(v) if v == id => return i,
                    Err(_) => {}
                }
            }
        }
        0
    }

    /// Count a new request of `tokens` estimated tokens for tenant `id` at `now` (ms).
    pub fn admit(&'static self, id: u64, tokens: u64, now: u64) -> Result<TenantPermit, OverQuota> {
        self.admit_with(id, tokens, now, self.limits)
    }

    /// [`Tenants::admit`] under a configured tenant's own limits (`[[tenants]]`).
    pub fn admit_with(
        &'static self,
        id: u64,
        tokens: u64,
        now: u64,
        l: TenantLimits,
    ) -> Result<TenantPermit, OverQuota> {
        let i = self.slot(id);
        let s = &self.slots[i];
        if l.max_concurrent > 0 {
            let took = s
                .running
                .fetch_update(AcqRel, Acquire, |r| (r < l.max_concurrent).then_some(r + 1));
            if took.is_err() {
                return Err(OverQuota::Concurrent);
            }
        } else {
            s.running.fetch_add(1, AcqRel);
        }
        let permit = TenantPermit {
            tenants: self,
            packed: i as u64,
        };
        let minute = now / 60_000;
        let seen = s.minute.load(Acquire);
        if seen != minute
            && s.minute
                .compare_exchange(seen, minute, AcqRel, Acquire)
                .is_ok()
        {
            s.requests.store(0, Release);
            s.tokens.store(0, Release);
        }
        let retry_ms = (minute + 1) * 60_000 - now;
        if l.requests_per_minute > 0 {
            let r = s.requests.fetch_update(AcqRel, Acquire, |n| {
                (n < l.requests_per_minute).then_some(n + 1)
            });
            if r.is_err() {
                return Err(OverQuota::RequestsPerMinute { retry_ms });
            }
        } else {
            s.requests.fetch_add(1, AcqRel);
        }
        if l.tokens_per_minute > 0 {
            let t = s.tokens.fetch_update(AcqRel, Acquire, |n| {
                (n == 0 || n + tokens <= l.tokens_per_minute).then_some(n + tokens)
            });
            if t.is_err() {
                return Err(OverQuota::TokensPerMinute { retry_ms });
            }
        } else {
            s.tokens.fetch_add(tokens, AcqRel);
        }
        Ok(permit)
    }

    /// A request of tenant `id` starts / stops waiting in a queue (for visibility).
    pub fn queued(&self, id: u64, delta: i32) {
        let q = &self.slots[self.slot(id)].queued;
        if delta >= 0 {
            q.fetch_add(delta as u32, AcqRel);
        } else {
            let _ = q.fetch_update(AcqRel, Acquire, |v| v.checked_sub(delta.unsigned_abs()));
        }
    }

    /// Tenants seen, for the admin API (ids are hashes, never keys).
    pub fn snapshot(&self, now: u64) -> Vec<serde_json::Value> {
        let minute = now / 60_000;
        self.slots
            .iter()
            .filter(|s| s.id.load(Relaxed) != 0)
            .map(|s| {
                let current = s.minute.load(Relaxed) == minute;
                serde_json::json!({
                    "tenant": format!("{:016x}", s.id.load(Relaxed)),
                    "running": s.running.load(Relaxed),
                    "queued": s.queued.load(Relaxed),
                    "requests_this_minute": if current { s.requests.load(Relaxed) } else { 0 },
                    "tokens_this_minute": if current { s.tokens.load(Relaxed) } else { 0 },
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::sync::Arc;

    fn t(l: TenantLimits) -> &'static Tenants {
        Box::leak(Box::new(Tenants::new(l)))
    }

    #[test]
    fn requests_per_minute_with_a_manual_clock() {
        let ts = t(TenantLimits {
            requests_per_minute: 2,
            ..Default::default()
        });
        let now = 120_000 + 10_000;
        assert!(ts.admit(7, 0, now).is_ok());
        assert!(ts.admit(7, 0, now + 1).is_ok());
        assert_eq!(
            ts.admit(7, 0, now + 2).unwrap_err(),
            OverQuota::RequestsPerMinute { retry_ms: 49_998 }
        );
        assert!(
            ts.admit(8, 0, now + 3).is_ok(),
            "another tenant has its own quota"
        );
        assert!(ts.admit(7, 0, 180_000).is_ok(), "a new minute");
    }

    #[test]
    fn tokens_and_concurrency() {
        let ts = t(TenantLimits {
            tokens_per_minute: 1_000,
            max_concurrent: 2,
            ..Default::default()
        });
        let a = ts.admit(1, 600, 0).unwrap();
        let b = ts.admit(1, 300, 0).unwrap();
        assert_eq!(ts.admit(1, 10, 0).unwrap_err(), OverQuota::Concurrent);
        drop(b);
        assert!(matches!(
            ts.admit(1, 200, 0),
            Err(OverQuota::TokensPerMinute { .. })
        ));
        drop(a);
        // A single request larger than the whole quota still runs alone in a fresh minute.
        assert!(ts.admit(2, 5_000, 0).is_ok());
        assert_eq!(ts.snapshot(0).len(), 2);
    }

    #[test]
    fn spread_over_threads_the_limit_holds() {
        let ts = t(TenantLimits {
            requests_per_minute: 1_000,
            ..Default::default()
        });
        let ok = Arc::new(AtomicU32::new(0));
        let hs: Vec<_> = (0..4)
            .map(|_| {
                let (ts, ok) = (ts, ok.clone());
                std::thread::spawn(move || {
                    for _ in 0..1_000 {
                        if ts.admit(42, 0, 1).is_ok() {
                            ok.fetch_add(1, Relaxed);
                        }
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(ok.load(Relaxed), 1_000);
    }
}
