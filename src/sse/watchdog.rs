//! The throughput watchdog: after a warm-up and a full rolling window, a stream whose useful
//! output rate stays below the minimum is aborted. It judges nothing while a tool call or
//! reasoning is in progress; heartbeats and metadata are not progress. Fixed-size buckets: no
//! allocation, per stream or per event.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WatchdogSettings {
    pub enabled: bool,
    pub warmup_ms: u64,
    pub window_ms: u64,
    pub min_bytes_per_second: u64,
    /// Below this much output in the window the rate is not judged (0 output always is).
    pub min_useful_bytes: u64,
}

impl WatchdogSettings {
    pub const DEFAULT: WatchdogSettings = WatchdogSettings {
        enabled: false,
        warmup_ms: 30_000,
        window_ms: 30_000,
        min_bytes_per_second: 4,
        min_useful_bytes: 1,
    };
}

impl Default for WatchdogSettings {
    fn default() -> Self {
        Self::DEFAULT
    }
}

const BUCKETS: usize = 32;

/// Every held stream carries one, so its buckets are 32-bit (half the memory): a bucket's
/// count saturates at 4 GiB, and its number counts from the stream's first bucket, which
/// lasts 4 billion buckets (over four months at the narrowest, 1 ms).
#[derive(Clone, Debug)]
pub struct Watchdog {
    s: WatchdogSettings,
    started: u64,
    /// Useful bytes per bucket of `window_ms / BUCKETS`, indexed by bucket number modulo.
    buckets: [u32; BUCKETS],
    /// Which bucket each slot holds: its number from the stream's first, plus one (0: none).
    stamps: [u32; BUCKETS],
}

impl Watchdog {
    pub fn new(s: WatchdogSettings, now: u64) -> Self {
        Watchdog {
            s,
            started: now,
            buckets: [0; BUCKETS],
            stamps: [0; BUCKETS],
        }
    }

    fn width(&self) -> u64 {
        (self.s.window_ms / BUCKETS as u64).max(1)
    }

    /// The stamp of bucket number `n`.
    fn stamp_of(&self, n: u64) -> u32 {
        let from_start = n.saturating_sub(self.started / self.width());
        from_start.saturating_add(1).min(u64::from(u32::MAX)) as u32
    }

    /// The bucket number slot `i` holds, if any.
    fn number_at(&self, i: usize) -> Option<u64> {
        let stamp = self.stamps[i];
        (stamp != 0).then(|| self.started / self.width() + u64::from(stamp) - 1)
    }

    /// Record useful output that arrived at `now`.
    pub fn observe(&mut self, now: u64, useful_bytes: u64) {
        if useful_bytes == 0 {
            return;
        }
        let n = now / self.width();
        let i = (n % BUCKETS as u64) as usize;
        let stamp = self.stamp_of(n);
        if self.stamps[i] != stamp {
            self.stamps[i] = stamp;
            self.buckets[i] = 0;
        }
        let add = useful_bytes.min(u64::from(u32::MAX)) as u32;
        self.buckets[i] = self.buckets[i].saturating_add(add);
    }

    /// Useful bytes within the rolling window ending at `now`.
    pub fn window_bytes(&self, now: u64) -> u64 {
        let w = self.width();
        let newest = now / w;
        let oldest = newest.saturating_sub(BUCKETS as u64 - 1);
        (0..BUCKETS)
            .filter(|&i| {
                self.number_at(i)
                    .is_some_and(|n| n >= oldest && n <= newest)
            })
            .map(|i| u64::from(self.buckets[i]))
            .sum()
    }

    /// Whether the stream should be aborted now (`protected`: a tool call or reasoning is in
    /// progress).
    pub fn too_slow(&self, now: u64, protected: bool) -> bool {
        if !self.s.enabled || protected {
            return false;
        }
        if now.saturating_sub(self.started) < self.s.warmup_ms + self.s.window_ms {
            return false;
        }
        self.slow_with(self.window_bytes(now))
    }

    /// Whether `bytes` of useful output in one window is too slow.
    fn slow_with(&self, bytes: u64) -> bool {
        let measurable = bytes == 0 || bytes >= self.s.min_useful_bytes;
        let rate = bytes * 1000 / self.s.window_ms.max(1);
        measurable && rate < self.s.min_bytes_per_second
    }

    /// When the stream will be too slow if nothing more arrives: the watchdog checks when bytes
    /// arrive, and a stream gone silent must not wait for the idle timeout instead. `None`:
    /// never (disabled, or a tool call or reasoning in progress).
    pub fn silent_deadline(&self, now: u64, protected: bool) -> Option<u64> {
        if !self.s.enabled || protected {
            return None;
        }
        let earliest = now.max(self.started + self.s.warmup_ms + self.s.window_ms);
        let w = self.width();
        let newest = earliest / w;
        let oldest = newest.saturating_sub(BUCKETS as u64 - 1);
        // The buckets still in the window at `earliest`, oldest first: each leaves the window
        // `BUCKETS` buckets after its own.
        let mut live = [(0u64, 0u64); BUCKETS];
        let mut n = 0;
        for i in 0..BUCKETS {
            if let Some(stamp) = self.number_at(i)
                && stamp >= oldest
                && stamp <= newest
            {
                live[n] = (stamp, u64::from(self.buckets[i]));
                n += 1;
            }
        }
        let live = &mut live[..n];
        live.sort_unstable();
        let mut bytes: u64 = live.iter().map(|&(_, b)| b).sum();
        if self.slow_with(bytes) {
            return Some(earliest);
        }
        for &(stamp, b) in live.iter() {
            bytes -= b;
            if self.slow_with(bytes) {
                return Some(earliest.max((stamp + BUCKETS as u64) * w));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on() -> WatchdogSettings {
        WatchdogSettings {
            enabled: true,
            warmup_ms: 30_000,
            window_ms: 30_000,
            min_bytes_per_second: 4,
            min_useful_bytes: 1,
        }
    }

    #[test]
    fn judges_only_after_warmup_and_a_full_window() {
        let w = Watchdog::new(on(), 0);
        assert!(!w.too_slow(59_999, false));
        assert!(
            w.too_slow(60_000, false),
            "nothing useful for a whole minute"
        );
        assert!(
            !Watchdog::new(WatchdogSettings::default(), 0).too_slow(600_000, false),
            "off by default"
        );
    }

    #[test]
    fn rate_over_the_rolling_window() {
        let mut w = Watchdog::new(on(), 0);
        // 5 bytes per second: above 4 B/s.
        for t in (0..90_000).step_by(1_000) {
            w.observe(t, 5);
            assert!(!w.too_slow(t, false), "at {t}");
        }
        // Then a trickle of 1 byte per second: the window drains below the floor.
        let mut aborted_at = None;
        for t in (90_000..200_000).step_by(1_000) {
            w.observe(t, 1);
            if w.too_slow(t, false) {
                aborted_at = Some(t);
                break;
            }
        }
        let t = aborted_at.expect("aborted");
        assert!((95_000..125_000).contains(&t), "aborted at {t}");
    }

    #[test]
    fn protected_phases_and_heartbeats_are_not_judged() {
        let w = Watchdog::new(on(), 0);
        assert!(!w.too_slow(100_000, true), "a tool call in progress");
        let mut w = Watchdog::new(on(), 0);
        for t in (0..100_000).step_by(500) {
            w.observe(t, 0); // heartbeats and metadata: no progress
        }
        assert!(w.too_slow(100_000, false));
    }

    #[test]
    fn a_silent_stream_is_judged_when_its_output_leaves_the_window() {
        let s = on();
        let mut w = Watchdog::new(s, 0);
        // Plenty of output early on, then silence.
        w.observe(1_000, 10_000);
        let warm = s.warmup_ms + s.window_ms;
        let at = w.silent_deadline(2_000, false).expect("judged some time");
        // Not before the warm-up and a window, and not while the early output is in the window.
        assert!(at >= warm, "{at}");
        assert!(at >= 1_000 + s.window_ms, "{at}");
        assert!(w.too_slow(at, false), "slow at its deadline");
        assert!(!w.too_slow(at - 1, false) || at == warm);
        // Nothing is judged during a tool call, nor when the watchdog is off.
        assert_eq!(w.silent_deadline(2_000, true), None);
        let off = Watchdog::new(WatchdogSettings::default(), 0);
        assert_eq!(off.silent_deadline(2_000, false), None);
    }

    #[test]
    fn the_same_judgement_far_from_the_clocks_zero_and_past_32_bit_counts() {
        // A stream that starts at a large clock reading behaves as one that starts at zero.
        let t0 = 1_796_083_200_000;
        let mut far = Watchdog::new(on(), t0);
        let mut near = Watchdog::new(on(), 0);
        for t in (0..200_000).step_by(1_000) {
            let bytes = if t < 90_000 { 5 } else { 1 };
            far.observe(t0 + t, bytes);
            near.observe(t, bytes);
            assert_eq!(
                far.too_slow(t0 + t, false),
                near.too_slow(t, false),
                "at {t}"
            );
            assert_eq!(far.window_bytes(t0 + t), near.window_bytes(t));
        }
        // A bucket's count saturates rather than wrapping to a small number.
        let mut w = Watchdog::new(on(), 0);
        w.observe(1_000, u64::from(u32::MAX));
        w.observe(1_000, 10);
        assert_eq!(w.window_bytes(1_000), u64::from(u32::MAX));
    }
}
