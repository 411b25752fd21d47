//! Whether this core keeps up, and a busy flag with hysteresis for each of two signs. A core is
//! busy when its housekeeping tick runs late (its loop turns take long: the core itself is
//! saturated) or when it waits for a CPU (`cpu_wait`: the host runs more than it has CPUs for).
//! Either way events are already waiting for it, and each one sent as its own segment makes the
//! wait longer. `stream.coalesce_events = "auto"` joins a stream's events only then, as network
//! cards moderate interrupts only under load; a core that keeps up sends every event the moment
//! it comes.
//!
//! Late ticks are counted, not averaged: a core is busy once a quarter of its ticks in the last
//! second woke late, and quiet again when at most one in ten did. A core that keeps up still has
//! the odd late tick (a burst of events that all came at once): measured on a 2-core host with
//! 1,000 held streams, 3 % of ticks were 5 ms late, in clusters, and a smoothed mean crossed
//! the mark on single outliers; with 5,000 streams, 24 %. The wait for a CPU is a share of the
//! last second (`cpu_wait::WaitWindow`).
//!
//! The state is plain data of the core's own thread; the tick writes it, the relay reads it.

mod cpu_wait;

pub use cpu_wait::{RunDelay, WaitWindow};

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

/// The shipped wait mark (`stream.coalesce_busy_wait_percent`): a core that waited for a CPU
/// this share of the last second is busy, and quiet again at half of it. Above the 2–7 % a
/// core waits on a 2-core host that keeps up with 1,000 held streams, and at the foot of the
/// 8–28 % it waits with 5,000 (`cpu_wait`): at 15 % such a core went quiet in a dip and sent a
/// fifth of its events one by one, for 10 % more CPU per event than at 10 %; 0 makes the core
/// always busy, 100 never busy by this sign.
pub const WAIT_MARK_PERCENT: u8 = 10;

/// What one tick saw.
#[derive(Clone, Copy, Debug)]
pub struct Tick {
    /// How long after it was due the tick woke.
    pub late: Duration,
    /// How long it waited for a CPU since the tick before, and the time that spanned (`None`
    /// where the kernel does not say).
    pub waited: Option<(Duration, Duration)>,
}

/// Where each sign starts to count as busy.
#[derive(Clone, Copy, Debug)]
pub struct Marks {
    pub late: Duration,
    pub wait_percent: u8,
}

impl Marks {
    pub const SHIPPED: Marks = Marks {
        late: LATE_MARK,
        wait_percent: WAIT_MARK_PERCENT,
    };
}

/// The recent ticks' lateness and waits, and whether they say the core is busy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoopLoad {
    /// Exponentially weighted mean lateness, in microseconds (weight 1/4 for each new one):
    /// shown to operators, not used for the decision.
    lag_us: u32,
    /// One bit per recent tick, the newest lowest: set when it was late.
    late: u32,
    late_busy: bool,
    wait: WaitWindow,
}

impl LoopLoad {
    /// One wake of the tick.
    pub fn observe(&mut self, tick: Tick, marks: Marks) {
        let late = tick.late;
        let late_us = u32::try_from(late.as_micros()).unwrap_or(u32::MAX);
        // 3/4 of the old mean and 1/4 of the new sample, in 64 bits so nothing overflows.
        let mean = (3 * u64::from(self.lag_us) + u64::from(late_us)) / 4;
        self.lag_us = u32::try_from(mean).unwrap_or(u32::MAX);
        let window = (1u32 << WINDOW) - 1;
        self.late = ((self.late << 1) | u32::from(late >= marks.late)) & window;
        let n = self.late_ticks();
        if n >= BUSY_COUNT {
            self.late_busy = true;
        } else if n <= QUIET_COUNT {
            self.late_busy = false;
        }
        if let Some((waited, spanned)) = tick.waited {
            self.wait.observe(waited, spanned, marks.wait_percent);
        }
    }

    /// Busy by either sign.
    pub fn busy(&self) -> bool {
        self.late_busy || self.wait.busy()
    }

    /// The smoothed lateness.
    pub fn lag(&self) -> Duration {
        Duration::from_micros(self.lag_us.into())
    }

    /// How many of the last [`WINDOW`] ticks were late.
    pub fn late_ticks(&self) -> u32 {
        self.late.count_ones()
    }

    /// The share of the last second this core waited for a CPU, in thousandths.
    pub fn cpu_wait_permille(&self) -> u32 {
        self.wait.share_permille()
    }
}

thread_local! {
    /// The tick's state, written 20 times a second.
    static LOAD: Cell<LoopLoad> = Cell::new(LoopLoad::default());
    /// Its verdict apart, so that the relay's read per write is one byte, not the windows.
    static BUSY: Cell<bool> = const { Cell::new(false) };
}

/// Record one wake of this core's tick; returns the new state.
pub fn observe(tick: Tick, marks: Marks) -> LoopLoad {
    LOAD.with(|c| {
        let mut load = c.get();
        load.observe(tick, marks);
        c.set(load);
        BUSY.with(|b| b.set(load.busy()));
        load
    })
}

/// A tick that only woke `late` (no wait for a CPU known): tests that make a core busy.
pub fn late_tick(late: Duration) -> Tick {
    Tick { late, waited: None }
}

/// Whether this core is busy now (see the module's comment). A thread without a tick (a
/// test, the admin thread) is never busy.
pub fn busy() -> bool {
    BUSY.with(Cell::get)
}

#[cfg(test)]
mod tests {
    use super::*;

    const M: Duration = LATE_MARK;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// A tick `late` after it was due, judged against `mark`; no wait for a CPU known.
    fn obs(l: &mut LoopLoad, late: Duration, mark: Duration) {
        let marks = Marks {
            late: mark,
            ..Marks::SHIPPED
        };
        l.observe(late_tick(late), marks);
    }

    fn feed(l: &mut LoopLoad, lateness: &[u64]) {
        for &x in lateness {
            obs(l, ms(x), M);
        }
    }

    #[test]
    fn a_core_that_keeps_up_is_never_busy() {
        let mut l = LoopLoad::default();
        for _ in 0..1_000 {
            obs(&mut l, Duration::from_micros(1_300), M);
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
            obs(&mut l, ms(if i % 4 == 0 { 6 } else { 1 }), M);
        }
        assert_eq!(l.late_ticks(), 5);
        assert!(l.busy());
        // Between the counts the state stays as it is: three, then two late ticks left.
        let mut turns = 0;
        while l.late_ticks() > QUIET_COUNT {
            assert!(l.busy(), "after {turns} quiet ticks: {l:?}");
            obs(&mut l, ms(1), M);
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
            obs(&mut l, ms(4), M);
        }
        assert!(l.busy());
        // 0: every tick is late, so the core is busy from its fifth tick on.
        let always = Duration::ZERO;
        let mut l = LoopLoad::default();
        for _ in 0..4 {
            obs(&mut l, Duration::ZERO, always);
        }
        assert!(!l.busy());
        for _ in 0..50 {
            obs(&mut l, Duration::ZERO, always);
            assert!(l.busy());
        }
        // A high mark: a loaded loop stays quiet.
        let mut l = LoopLoad::default();
        for _ in 0..50 {
            obs(&mut l, ms(30), ms(60_000));
        }
        assert!(!l.busy(), "{l:?}");
    }

    #[test]
    fn absurd_lateness_saturates_instead_of_overflowing() {
        let mut l = LoopLoad::default();
        for _ in 0..5 {
            obs(&mut l, Duration::from_secs(100_000), M);
        }
        assert!(l.busy());
        assert!(l.lag() > Duration::from_secs(1_000));
    }

    #[test]
    fn the_thread_state_follows_its_observations() {
        std::thread::spawn(|| {
            assert!(!busy());
            for _ in 0..5 {
                observe(late_tick(ms(10)), Marks::SHIPPED);
            }
            assert!(busy());
        })
        .join()
        .unwrap();
    }

    /// A tick on time that waited `waited` of its 50 ms for a CPU.
    fn waited(l: &mut LoopLoad, waited: u64) {
        let tick = Tick {
            late: Duration::from_micros(900),
            waited: Some((ms(waited), ms(50))),
        };
        l.observe(tick, Marks::SHIPPED);
    }

    #[test]
    fn a_core_on_time_that_waits_for_a_cpu_is_busy() {
        let mut l = LoopLoad::default();
        // 2 ms of every 50 (4 %): a host with CPU to spare.
        for _ in 0..3 * WINDOW {
            waited(&mut l, 2);
        }
        assert!(!l.busy());
        assert_eq!(l.cpu_wait_permille(), 40);
        // Then every tick waits 10 ms of its 50 (20 %), never late: busy on the wait alone.
        for _ in 0..WINDOW {
            waited(&mut l, 10);
        }
        assert_eq!(l.late_ticks(), 0);
        assert_eq!(l.cpu_wait_permille(), 200);
        assert!(l.busy());
        // Joining made the core cheaper and it waits 5 ms (10 %): still busy, above half.
        for _ in 0..WINDOW {
            waited(&mut l, 5);
        }
        assert!(l.busy(), "{l:?}");
        // The host has CPU again.
        for _ in 0..WINDOW {
            waited(&mut l, 1);
        }
        assert!(!l.busy(), "{l:?}");
    }

    #[test]
    fn either_sign_is_enough_and_both_must_end() {
        let mut l = LoopLoad::default();
        // Late ticks without a known wait: busy by lateness.
        feed(&mut l, &[10; 5]);
        assert!(l.busy());
        // Then on time, but waiting 20 % for a CPU: the lateness ends, the wait keeps it busy.
        for _ in 0..WINDOW {
            waited(&mut l, 10);
        }
        assert_eq!(l.late_ticks(), 0);
        assert!(l.busy());
        for _ in 0..WINDOW {
            waited(&mut l, 0);
        }
        assert!(!l.busy());
    }

    #[test]
    fn the_relay_s_read_follows_the_tick() {
        std::thread::spawn(|| {
            assert!(!busy());
            let tick = Tick {
                late: Duration::ZERO,
                waited: Some((ms(30), ms(50))),
            };
            observe(tick, Marks::SHIPPED);
            assert!(busy(), "60 % of the one tick seen");
            let quiet = Tick {
                late: Duration::ZERO,
                waited: Some((Duration::ZERO, ms(50))),
            };
            for _ in 0..WINDOW {
                observe(quiet, Marks::SHIPPED);
            }
            assert!(!busy());
        })
        .join()
        .unwrap();
    }
}
