//! What the load-aware strategies look at: requests in flight per connection (global atomics,
//! shared by every core), and, per core, a latency average and the quota headroom learned from
//! rate-limit headers.

use crate::dialect::ratelimit::{Family, RateLimits};
use crate::ids::ConnId;
use std::sync::atomic::{AtomicU32, Ordering};

/// One option's load as the strategies see it (a target aggregates its connections).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Load {
    pub in_flight: u32,
    /// Moving average time to first byte (ms); 0 = unknown.
    pub latency_ms: u32,
    /// Remaining quota in permille of the limit; 1000 when unknown.
    pub headroom: u16,
    /// Time until the quota window resets (ms); u64::MAX when unknown.
    pub reset_in_ms: u64,
    pub cost: f64,
}

/// Quota as last reported by the upstream for one connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Quota {
    pub headroom: u16,
    /// Monotonic ms at which the window resets (0 = unknown).
    pub reset_at: u64,
}

impl Default for Quota {
    fn default() -> Self {
        Quota {
            headroom: 1000,
            reset_at: 0,
        }
    }
}

/// Core-local load memory.
#[derive(Debug, Default)]
pub struct LoadTable {
    pub latency: Vec<u32>,
    pub quota: Vec<Quota>,
}

impl LoadTable {
    pub fn new(connections: usize) -> Self {
        LoadTable {
            latency: vec![0; connections],
            quota: vec![Quota::default(); connections],
        }
    }

    /// Room for `connections` slots; the `fresh` ones start with no memory.
    pub fn fit(&mut self, connections: usize, fresh: &[ConnId]) {
        if self.latency.len() < connections {
            self.latency.resize(connections, 0);
            self.quota.resize(connections, Quota::default());
        }
        for &c in fresh {
            if let (Some(l), Some(q)) = (
                self.latency.get_mut(c.index()),
                self.quota.get_mut(c.index()),
            ) {
                *l = 0;
                *q = Quota::default();
            }
        }
    }

    /// Exponential moving average (1/4 weight to the new sample).
    pub fn observe_latency(&mut self, conn: ConnId, ms: u64) {
        if let Some(l) = self.latency.get_mut(conn.index()) {
            let ms = ms.min(u64::from(u32::MAX)) as u32;
            *l = if *l == 0 {
                ms.max(1)
            } else {
                (*l * 3 + ms) / 4
            };
        }
    }

    /// What an answer's head said about the connection's limits (`RateLimits`, read once per
    /// answer): the tightest window, OpenAI's or Anthropic's requests or tokens, is its
    /// headroom until the window's reset.
    pub fn observe_quota(&mut self, conn: ConnId, limits: &RateLimits, now: u64) {
        let mut best: Option<Quota> = None;
        for f in [
            Family::OpenAiRequests,
            Family::OpenAiTokens,
            Family::AnthropicRequests,
            Family::AnthropicTokens,
        ] {
            let w = limits.window(f);
            let (Some(r), Some(l)) = (w.remaining, w.limit) else {
                continue;
            };
            if l <= 0.0 {
                continue;
            }
            let headroom = ((r / l).clamp(0.0, 1.0) * 1000.0) as u16;
            let q = Quota {
                headroom,
                reset_at: w.reset_ms.map_or(0, |ms| now + ms),
            };
            // The tightest limit decides.
            if best.is_none_or(|b| q.headroom < b.headroom) {
                best = Some(q);
            }
        }
        if let (Some(q), Some(slot)) = (best, self.quota.get_mut(conn.index())) {
            *slot = q;
        }
    }

    /// The load of one connection now.
    pub fn load(&self, conn: ConnId, in_flight: &[AtomicU32], now: u64) -> Load {
        let q = self.quota.get(conn.index()).copied().unwrap_or_default();
        let (headroom, reset_in_ms) = if q.reset_at > now {
            (q.headroom, q.reset_at - now)
        } else if q.reset_at == 0 {
            (q.headroom, u64::MAX)
        } else {
            (1000, u64::MAX) // the window has reset since we heard
        };
        Load {
            in_flight: in_flight
                .get(conn.index())
                .map_or(0, |a| a.load(Ordering::Relaxed)),
            latency_ms: self.latency.get(conn.index()).copied().unwrap_or(0),
            headroom,
            reset_in_ms,
            cost: 0.0,
        }
    }
}

/// Counts a request in flight on a connection until dropped (every exit path releases it).
pub struct InFlight<'a>(&'a AtomicU32);

impl<'a> InFlight<'a> {
    pub fn enter(counter: &'a AtomicU32) -> Self {
        counter.fetch_add(1, Ordering::Relaxed);
        InFlight(counter)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn learns_headroom_from_the_tightest_limit() {
        let mut t = LoadTable::new(1);
        let h = RateLimits::from_pairs(
            [
                ("x-ratelimit-remaining-requests", "50"),
                ("x-ratelimit-limit-requests", "100"),
                ("x-ratelimit-reset-requests", "10s"),
                ("x-ratelimit-remaining-tokens", "100"),
                ("x-ratelimit-limit-tokens", "1000"),
                ("x-ratelimit-reset-tokens", "2s"),
            ],
            0,
        );
        t.observe_quota(ConnId::new(0), &h, 1_000);
        let none: [AtomicU32; 1] = [AtomicU32::new(3)];
        let l = t.load(ConnId::new(0), &none, 1_500);
        assert_eq!((l.headroom, l.reset_in_ms, l.in_flight), (100, 1_500, 3));
        assert_eq!(
            t.load(ConnId::new(0), &none, 5_000).headroom,
            1000,
            "window reset since"
        );
    }

    #[test]
    fn latency_average_and_in_flight_guard() {
        let mut t = LoadTable::new(1);
        t.observe_latency(ConnId::new(0), 100);
        t.observe_latency(ConnId::new(0), 200);
        assert_eq!(t.latency[0], 125);
        let c = AtomicU32::new(0);
        {
            let _g = InFlight::enter(&c);
            assert_eq!(c.load(Ordering::Relaxed), 1);
        }
        assert_eq!(c.load(Ordering::Relaxed), 0);
    }
}
