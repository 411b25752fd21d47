//! Whether this core keeps up: how late its housekeeping tick wakes, smoothed, and a busy flag
//! with hysteresis. A core whose tick runs late is saturated (its loop turns take long, or the
//! host gives it too little CPU): events are already waiting for it, and each one sent as its
//! own segment makes the wait longer. `stream.coalesce_events = "auto"` joins a stream's events
//! only then, as network cards moderate interrupts only under load; a core that keeps up sends
//! every event the moment it comes.
//!
//! The state is plain data of the core's own thread; the tick writes it, the relay reads it.

use std::cell::Cell;
use std::time::Duration;

/// Where busy begins and ends. A tick that keeps up still wakes about 1 ms late (the timer's
/// own granularity), so the marks sit above that.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Marks {
    /// A smoothed lag at or above this makes the core busy.
    pub busy_at: Duration,
    /// A busy core is quiet again once its smoothed lag falls below this.
    pub quiet_below: Duration,
}

impl Marks {
    /// The shipped marks: busy from 4 ms, quiet again below 1.5 ms.
    pub const DEFAULT: Marks = Marks::busy_from_ms(4);

    /// Busy from `ms` of smoothed lag, quiet again below 3/8 of it (0: always busy).
    pub const fn busy_from_ms(ms: u32) -> Marks {
        let us = ms as u64 * 1_000;
        Marks {
            busy_at: Duration::from_micros(us),
            quiet_below: Duration::from_micros(us * 3 / 8),
        }
    }
}

/// The smoothed lateness of a periodic wake, and whether it says the core is busy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoopLoad {
    /// Exponentially weighted mean lateness, in microseconds (weight 1/4 for each new one).
    lag_us: u32,
    busy: bool,
}

impl LoopLoad {
    /// One wake, `late` after it was due.
    pub fn observe(&mut self, late: Duration, marks: Marks) {
        let late_us = u32::try_from(late.as_micros()).unwrap_or(u32::MAX);
        // 3/4 of the old mean and 1/4 of the new sample, in 64 bits so nothing overflows.
        let mean = (3 * u64::from(self.lag_us) + u64::from(late_us)) / 4;
        self.lag_us = u32::try_from(mean).unwrap_or(u32::MAX);
        let lag = Duration::from_micros(mean);
        if lag >= marks.busy_at {
            self.busy = true;
        } else if lag < marks.quiet_below {
            self.busy = false;
        }
    }

    pub fn busy(&self) -> bool {
        self.busy
    }

    pub fn lag(&self) -> Duration {
        Duration::from_micros(self.lag_us.into())
    }
}

thread_local! {
    static LOAD: Cell<LoopLoad> = const { Cell::new(LoopLoad { lag_us: 0, busy: false }) };
}

/// Record one wake of this core's tick, `late` after it was due; returns the new state.
pub fn observe(late: Duration, marks: Marks) -> LoopLoad {
    LOAD.with(|c| {
        let mut load = c.get();
        load.observe(late, marks);
        c.set(load);
        load
    })
}

/// Whether this core is busy now (see the module's comment). A thread without a tick (a
/// test, the admin thread) is never busy.
pub fn busy() -> bool {
    LOAD.with(|c| c.get().busy)
}

#[cfg(test)]
mod tests {
    use super::*;

    const M: Marks = Marks::DEFAULT;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_core_that_keeps_up_is_never_busy() {
        let mut l = LoopLoad::default();
        for _ in 0..1_000 {
            l.observe(Duration::from_micros(300), M);
        }
        assert!(!l.busy());
        // The mean settles on the steady lateness (less the integer division's truncation).
        let lag = l.lag().as_micros();
        assert!((295..=300).contains(&lag), "{l:?}");
    }

    #[test]
    fn one_late_wake_is_not_enough() {
        let mut l = LoopLoad::default();
        l.observe(ms(12), M);
        assert!(!l.busy(), "one 12 ms wake smooths to 3 ms: {l:?}");
        l.observe(ms(12), M);
        assert!(l.busy(), "a second one makes 5.25 ms: {l:?}");
    }

    #[test]
    fn busy_holds_until_the_lag_falls_below_the_quiet_mark() {
        let mut l = LoopLoad::default();
        for _ in 0..20 {
            l.observe(ms(8), M);
        }
        assert!(l.busy());
        // Between the two marks the state stays as it is.
        let mut turns = 0;
        while l.lag() >= M.quiet_below {
            assert!(l.busy(), "after {turns} quiet wakes: {l:?}");
            l.observe(Duration::ZERO, M);
            turns += 1;
        }
        assert!(!l.busy());
        // 8 ms decays by 3/4 a wake: below 1.5 ms after 6 of them.
        assert_eq!(turns, 6);
        // And in the same band from below, it stays quiet.
        for _ in 0..50 {
            l.observe(ms(2), M);
        }
        assert!(!l.busy(), "{l:?}");
    }

    #[test]
    fn marks_from_the_configuration() {
        assert_eq!(M.busy_at, ms(4));
        assert_eq!(M.quiet_below, Duration::from_micros(1_500));
        // 0: busy from the first wake and never quiet again.
        let always = Marks::busy_from_ms(0);
        let mut l = LoopLoad::default();
        l.observe(Duration::ZERO, always);
        assert!(l.busy());
        for _ in 0..10 {
            l.observe(Duration::ZERO, always);
        }
        assert!(l.busy());
        // A high mark: a loaded loop stays quiet.
        let mut l = LoopLoad::default();
        for _ in 0..50 {
            l.observe(ms(30), Marks::busy_from_ms(60_000));
        }
        assert!(!l.busy(), "{l:?}");
    }

    #[test]
    fn absurd_lateness_saturates_instead_of_overflowing() {
        let mut l = LoopLoad::default();
        l.observe(Duration::from_secs(100_000), M);
        l.observe(Duration::from_secs(100_000), M);
        assert!(l.busy());
        assert!(l.lag() > Duration::from_secs(1_000));
    }

    #[test]
    fn the_thread_state_follows_its_observations() {
        std::thread::spawn(|| {
            assert!(!busy());
            for _ in 0..4 {
                observe(ms(10), M);
            }
            assert!(busy());
        })
        .join()
        .unwrap();
    }
}
