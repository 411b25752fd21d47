//! One clock for every timer and state machine, so tests drive time by hand instead of sleeping.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Milliseconds on a monotonic scale shared by all cores of one process.
pub trait Clock {
    fn now_ms(&self) -> u64;
}

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// The real monotonic clock (milliseconds since the process first asked).
#[derive(Clone, Copy, Debug, Default)]
pub struct RealClock;

impl Clock for RealClock {
    fn now_ms(&self) -> u64 {
        epoch().elapsed().as_millis() as u64
    }
}

/// Monotonic milliseconds since process start; cheap enough for the hot path.
pub fn now_ms() -> u64 {
    RealClock.now_ms()
}

/// The same scale for an instant already read (one clock read serving both forms).
pub fn ms_at(t: Instant) -> u64 {
    t.saturating_duration_since(epoch()).as_millis() as u64
}

/// Wall-clock milliseconds since the Unix epoch (for logs and HTTP dates only).
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// A clock that moves only when told to: every state machine test uses it.
#[derive(Debug, Default)]
pub struct ManualClock {
    now: AtomicU64,
}

impl ManualClock {
    pub fn new(start_ms: u64) -> Self {
        ManualClock {
            now: AtomicU64::new(start_ms),
        }
    }
    pub fn advance(&self, ms: u64) {
        self.now.fetch_add(ms, Ordering::SeqCst);
    }
    pub fn set(&self, ms: u64) {
        self.now.store(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.now.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_told() {
        let c = ManualClock::new(10);
        assert_eq!(c.now_ms(), 10);
        c.advance(30_000);
        assert_eq!(c.now_ms(), 30_010);
        c.set(5);
        assert_eq!(c.now_ms(), 5);
    }

    #[test]
    fn real_clock_is_monotonic() {
        let a = now_ms();
        let b = now_ms();
        assert!(b >= a);
    }
}
