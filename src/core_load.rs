//! Whether this core keeps up: how late its housekeeping tick wakes, and a busy flag with
//! hysteresis. A core whose ticks run late is saturated (its loop turns take long, or the host
//! gives it too little CPU): events are already waiting for it, and each one sent as its own
//! segment makes the wait longer. `stream.coalesce_events = "auto"` joins a stream's events
//! only then, as network cards moderate interrupts only under load; a core that keeps up sends
//! every event the moment it comes.
//!
//! Busy is counted, not averaged: a core is busy once a quarter of its ticks in the last second
//! woke late, and quiet again when at most one in ten did. A core that keeps up still has the
//! odd late tick (a burst of events that all came at once): measured on a 2-core host with
//! 1,000 held streams, 3 % of ticks were 5 ms late, in clusters, and a smoothed mean crossed
//! the mark on single outliers; with 5,000 streams, 24 %.
//!
//! The state is plain data of the core's own thread; the tick writes it, the relay reads it.

use std::cell::Cell;
use std::time::Duration;

/// How many recent ticks are counted: one second of 50 ms ticks.
pub const WINDOW: u32 = 20;
/// Late ticks among the last [`WINDOW`] that make the core busy (a quarter).
pub const BUSY_COUNT: u32 = 5;
/// A busy core is quiet again when at most this many of the last [`WINDOW`] were late.
pub const QUIET_COUNT: u32 = 2;

/// The shipped late mark (`stream.coalesce_busy_lag_ms`): a tick that wakes this long after it
/// was due is late. A tick that keeps up still wakes about 1 ms late (the timer's own
/// granularity), so the mark sits above that; 0 makes every tick late (always busy).
pub const LATE_MARK: Duration = Duration::from_millis(4);

/// The recent ticks' lateness, and whether it says the core is busy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoopLoad {
    /// Exponentially weighted mean lateness, in microseconds (weight 1/4 for each new one):
    /// shown to operators, not used for the decision.
    lag_us: u32,
    /// One bit per recent tick, the newest lowest: set when it was late.
    late: u32,
    busy: bool,
}

impl LoopLoad {
    /// One wake, `late` after it was due; late at or past `mark`.
    pub fn observe(&mut self, late: Duration, mark: Duration) {
        let late_us = u32::try_from(late.as_micros()).unwrap_or(u32::MAX);
        // 3/4 of the old mean and 1/4 of the new sample, in 64 bits so nothing overflows.
        let mean = (3 * u64::from(self.lag_us) + u64::from(late_us)) / 4;
        self.lag_us = u32::try_from(mean).unwrap_or(u32::MAX);
        let window = (1u32 << WINDOW) - 1;
        self.late = ((self.late << 1) | u32::from(late >= mark)) & window;
        let n = self.late_ticks();
        if n >= BUSY_COUNT {
            self.busy = true;
        } else if n <= QUIET_COUNT {
            self.busy = false;
        }
    }

    pub fn busy(&self) -> bool {
        self.busy
    }

    /// The smoothed lateness.
    pub fn lag(&self) -> Duration {
        Duration::from_micros(self.lag_us.into())
    }

    /// How many of the last [`WINDOW`] ticks were late.
    pub fn late_ticks(&self) -> u32 {
        self.late.count_ones()
    }
}

thread_local! {
    static LOAD: Cell<LoopLoad> = const { Cell::new(LoopLoad { lag_us: 0, late: 0, busy: false }) };
}

/// Record one wake of this core's tick, `late` after it was due (late at or past `mark`);
/// returns the new state.
pub fn observe(late: Duration, mark: Duration) -> LoopLoad {
    LOAD.with(|c| {
        let mut load = c.get();
        load.observe(late, mark);
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

    const M: Duration = LATE_MARK;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn feed(l: &mut LoopLoad, lateness: &[u64]) {
        for &x in lateness {
            l.observe(ms(x), M);
        }
    }

    #[test]
    fn a_core_that_keeps_up_is_never_busy() {
        let mut l = LoopLoad::default();
        for _ in 0..1_000 {
            l.observe(Duration::from_micros(1_300), M);
        }
        assert!(!l.busy());
        assert_eq!(l.late_ticks(), 0);
        // The shown mean settles on the steady lateness (less the integer division's loss).
        let lag = l.lag().as_micros();
        assert!((1_295..=1_300).contains(&lag), "{l:?}");
    }

    #[test]
    fn a_cluster_of_late_ticks_is_not_enough() {
        let mut l = LoopLoad::default();
        // A burst: four ticks in a row very late, then the core keeps up again.
        feed(&mut l, &[1, 40, 40, 40, 40, 1, 1]);
        assert!(!l.busy(), "4 of 20: {l:?}");
        // The same again a second later: the first burst has left the window.
        feed(&mut l, &[1; 16]);
        feed(&mut l, &[40, 40, 40, 40]);
        assert_eq!(l.late_ticks(), 4);
        assert!(!l.busy());
    }

    #[test]
    fn a_quarter_of_the_last_second_late_makes_it_busy_until_one_in_ten() {
        let mut l = LoopLoad::default();
        // One late tick in four, spread out: the fifth makes five in the window.
        for i in 0..20 {
            l.observe(ms(if i % 4 == 0 { 6 } else { 1 }), M);
        }
        assert_eq!(l.late_ticks(), 5);
        assert!(l.busy());
        // Between the counts the state stays as it is: three, then two late ticks left.
        let mut turns = 0;
        while l.late_ticks() > QUIET_COUNT {
            assert!(l.busy(), "after {turns} quiet ticks: {l:?}");
            l.observe(ms(1), M);
            turns += 1;
        }
        assert!(!l.busy());
        // The late ticks were the 1st, 5th, 9th, 13th and 17th of twenty: the first three
        // leave the window after 1, 5 and 9 more ticks.
        assert_eq!(turns, 9);
        // And from below, three or four late ticks keep it quiet.
        feed(&mut l, &[6, 1, 6]);
        assert_eq!(l.late_ticks(), 4);
        assert!(!l.busy(), "{l:?}");
    }

    #[test]
    fn the_mark_from_the_configuration() {
        assert_eq!(M, ms(4));
        // Exactly at the mark is late.
        let mut l = LoopLoad::default();
        for _ in 0..5 {
            l.observe(ms(4), M);
        }
        assert!(l.busy());
        // 0: every tick is late, so the core is busy from its fifth tick on.
        let always = Duration::ZERO;
        let mut l = LoopLoad::default();
        for _ in 0..4 {
            l.observe(Duration::ZERO, always);
        }
        assert!(!l.busy());
        for _ in 0..50 {
            l.observe(Duration::ZERO, always);
            assert!(l.busy());
        }
        // A high mark: a loaded loop stays quiet.
        let mut l = LoopLoad::default();
        for _ in 0..50 {
            l.observe(ms(30), ms(60_000));
        }
        assert!(!l.busy(), "{l:?}");
    }

    #[test]
    fn absurd_lateness_saturates_instead_of_overflowing() {
        let mut l = LoopLoad::default();
        for _ in 0..5 {
            l.observe(Duration::from_secs(100_000), M);
        }
        assert!(l.busy());
        assert!(l.lag() > Duration::from_secs(1_000));
    }

    #[test]
    fn the_thread_state_follows_its_observations() {
        std::thread::spawn(|| {
            assert!(!busy());
            for _ in 0..5 {
                observe(ms(10), M);
            }
            assert!(busy());
        })
        .join()
        .unwrap();
    }
}
