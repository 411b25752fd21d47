//! How long a core waited for a CPU: the kernel's own count of the time its thread was ready
//! to run but not running (`/proc/thread-self/schedstat`, "run delay"), and the share of the
//! last second it makes. A core that waits 15 % of its time for a CPU is on a host that runs
//! more than it has CPUs for: its events are already queueing behind other work, however
//! little work each one is for the core itself.
//!
//! Why this as well as the tick's lateness: lateness measures one wake every 50 ms, so a core
//! that does less per event looks quiet more often even when the host is just as short of CPU
//! (measured: with a cheaper event the same 5,000 streams joined fewer events and saved no CPU).
//! The run delay counts every wait the scheduler made the thread do. Measured on a 2-core host
//! with the load generator and the upstream on the same cores (`ringside-load streams`, 50
//! events 100 ms apart): each core waited 15–60 % of every half second with 5,000 held streams,
//! and 2–8 % with 1,000.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

use super::WINDOW;

/// Reads this thread's run delay. Open it on the thread it measures (the path names the
/// thread that opens it); reads after that may come from anywhere.
pub struct RunDelay {
    file: Option<File>,
    /// The last reading, and when it was taken.
    last: (Instant, Option<Duration>),
}

impl RunDelay {
    /// The calling thread's; one that cannot be read (a kernel without scheduler statistics)
    /// reads as `None` ever after.
    pub fn of_this_thread() -> RunDelay {
        let mut r = RunDelay {
            file: File::open("/proc/thread-self/schedstat").ok(),
            last: (Instant::now(), None),
        };
        r.last.1 = r.total();
        r
    }

    /// How long the thread waited for a CPU since the last call (or since it was opened), and
    /// the time that spanned; `None` where the kernel does not say.
    pub fn since_last(&mut self) -> Option<(Duration, Duration)> {
        let now = Instant::now();
        let total = self.total();
        let (then, before) = std::mem::replace(&mut self.last, (now, total));
        Some((total?.saturating_sub(before?), now - then))
    }

    /// The thread's total wait for a CPU since it started.
    pub fn total(&self) -> Option<Duration> {
        let file = self.file.as_ref()?;
        // "<ns on a CPU> <ns waiting for one> <timeslices>\n": three numbers, well under 64 bytes.
        let mut buf = [0u8; 64];
        let n = file.read_at(&mut buf, 0).ok()?;
        parse_run_delay(buf.get(..n)?)
    }
}

/// The second number of a schedstat line, in nanoseconds.
fn parse_run_delay(line: &[u8]) -> Option<Duration> {
    let text = std::str::from_utf8(line).ok()?;
    let ns = text.split_ascii_whitespace().nth(1)?.parse::<u64>().ok()?;
    Some(Duration::from_nanos(ns))
}

/// The last [`WINDOW`] ticks' waits for a CPU against the time they spanned, and whether that
/// share says the core is busy: at or past the mark it is, at half the mark or less it is
/// quiet again (between the two it stays as it was, so that joining, which makes the core
/// cheaper and the host less short, does not switch itself off).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WaitWindow {
    /// Per tick, microseconds waited and microseconds spanned; `next` is the oldest slot.
    waited_us: [u32; WINDOW as usize],
    spanned_us: [u32; WINDOW as usize],
    next: u8,
    busy: bool,
}

impl WaitWindow {
    /// One tick that spanned `spanned`, of which the thread waited `waited` for a CPU; busy
    /// from `mark_percent` of the window's time waited.
    pub fn observe(&mut self, waited: Duration, spanned: Duration, mark_percent: u8) {
        let i = usize::from(self.next);
        self.waited_us[i] = micros(waited.min(spanned));
        self.spanned_us[i] = micros(spanned);
        self.next = ((i + 1) % WINDOW as usize) as u8;
        let share = self.share_permille();
        let mark = u32::from(mark_percent) * 10;
        if share >= mark {
            self.busy = true;
        } else if share <= mark / 2 {
            self.busy = false;
        }
    }

    pub fn busy(&self) -> bool {
        self.busy
    }

    /// The share of the window's time spent waiting for a CPU, in thousandths.
    pub fn share_permille(&self) -> u32 {
        let waited: u64 = self.waited_us.iter().map(|&w| u64::from(w)).sum();
        let spanned: u64 = self.spanned_us.iter().map(|&s| u64::from(s)).sum();
        if spanned == 0 {
            return 0;
        }
        u32::try_from(waited * 1000 / spanned).unwrap_or(1000)
    }
}

fn micros(d: Duration) -> u32 {
    u32::try_from(d.as_micros()).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn the_second_number_of_the_line_is_the_wait() {
        assert_eq!(
            parse_run_delay(b"123456789 2500000 77\n"),
            Some(Duration::from_micros(2_500))
        );
        for bad in [&b""[..], b"12", b"12 x 3", b"\xff\xfe 1 2", b"1 -5 3"] {
            assert_eq!(parse_run_delay(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn this_thread_s_wait_is_read_and_never_goes_back() {
        let mut r = RunDelay::of_this_thread();
        // Every Linux kernel Ringside supports keeps scheduler statistics unless built
        // without them; the reader must then say None, never a made-up zero.
        let Some(first) = r.total() else {
            assert!(std::fs::read("/proc/thread-self/schedstat").is_err());
            return;
        };
        std::thread::yield_now();
        let second = r.total().expect("read once, read again");
        assert!(second >= first, "{first:?} then {second:?}");
        let (waited, spanned) = r.since_last().expect("a wait since it was opened");
        assert!(
            waited <= spanned + Duration::from_millis(1),
            "{waited:?} of {spanned:?}"
        );
    }

    #[test]
    fn fifteen_percent_of_the_second_waited_makes_it_busy_and_half_that_quiet() {
        let mut w = WaitWindow::default();
        // 1 ms of each 50 ms tick: 2 %.
        for _ in 0..WINDOW {
            w.observe(ms(1), ms(50), 15);
        }
        assert_eq!(w.share_permille(), 20);
        assert!(!w.busy());
        // Ticks that waited 20 ms of 50 raise the share; busy once it reaches 15 %.
        let mut turns = 0;
        while !w.busy() {
            w.observe(ms(20), ms(50), 15);
            turns += 1;
        }
        // 1 + 19n/20 ≥ 7.5 ms a tick on average: n = 7 (0.02 + 0.38 * 7/20 = 0.153).
        assert_eq!(turns, 7, "{w:?}");
        assert!(w.share_permille() >= 150);
        // Ticks that waited 6 ms (12 %) keep it busy: above half the mark.
        for _ in 0..2 * WINDOW {
            w.observe(ms(6), ms(50), 15);
            assert!(w.busy(), "{w:?}");
        }
        assert_eq!(w.share_permille(), 120);
        // At 3 ms of 50 (6 %) it is quiet once the window holds no more than 7.5 %.
        let mut turns = 0;
        while w.busy() {
            w.observe(ms(3), ms(50), 15);
            turns += 1;
        }
        assert!(w.share_permille() <= 75, "{w:?}");
        assert_eq!(turns, 15, "{w:?}");
    }

    #[test]
    fn the_shipped_mark_leaves_a_core_that_keeps_up_alone_and_keeps_a_loaded_one_joining() {
        let mark = crate::core_load::WAIT_MARK_PERCENT;
        let mut w = WaitWindow::default();
        // 1,000 held streams on the 2-core host: up to 7 % of each tick waited. Never busy.
        for _ in 0..3 * WINDOW {
            w.observe(Duration::from_micros(3_500), ms(50), mark);
            assert!(!w.busy(), "{w:?}");
        }
        // 5,000: 8–28 %, busy from the first second at 12 %.
        for _ in 0..WINDOW {
            w.observe(Duration::from_micros(6_000), ms(50), mark);
        }
        assert!(w.busy(), "{w:?}");
        // Its dips to 8 % do not end the joining.
        for _ in 0..3 * WINDOW {
            w.observe(Duration::from_micros(4_000), ms(50), mark);
            assert!(w.busy(), "{w:?}");
        }
        // Quiet again once the host has room: 4 %.
        for _ in 0..WINDOW {
            w.observe(ms(2), ms(50), mark);
        }
        assert!(!w.busy(), "{w:?}");
    }

    #[test]
    fn a_long_tick_weighs_by_its_length() {
        let mut w = WaitWindow::default();
        for _ in 0..WINDOW - 1 {
            w.observe(Duration::ZERO, ms(50), 15);
        }
        // One tick that spanned 500 ms, 400 of them waiting: 400 of 1,450 ms in the window.
        w.observe(ms(400), ms(500), 15);
        assert_eq!(w.share_permille(), 275);
        assert!(w.busy());
        // A wait longer than the span it is counted in (clocks read at slightly different
        // moments) counts as the whole span, not more.
        let mut w = WaitWindow::default();
        w.observe(ms(80), ms(50), 15);
        assert_eq!(w.share_permille(), 1000);
    }

    #[test]
    fn an_empty_window_or_a_mark_of_100_is_never_busy() {
        let w = WaitWindow::default();
        assert_eq!(w.share_permille(), 0);
        assert!(!w.busy());
        let mut w = WaitWindow::default();
        for _ in 0..3 * WINDOW {
            w.observe(ms(49), ms(50), 100);
        }
        assert!(!w.busy(), "98 % is under a 100 % mark: {w:?}");
    }

    #[test]
    fn absurd_times_saturate() {
        let mut w = WaitWindow::default();
        for _ in 0..WINDOW {
            w.observe(
                Duration::from_secs(10_000_000),
                Duration::from_secs(10_000_000),
                15,
            );
        }
        assert_eq!(w.share_permille(), 1000);
        assert!(w.busy());
    }
}
