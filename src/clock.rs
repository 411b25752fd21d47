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
        now_ms()
    }
}

/// Monotonic milliseconds since process start; cheap enough for the hot path.
pub fn now_ms() -> u64 {
    read(|t| &mut t.mono_ms, || ms_at(instant()))
}

/// Now, read once per poll of a connection's task (see [`per_poll`]); elsewhere read afresh.
pub fn instant() -> Instant {
    read(|t| &mut t.instant, Instant::now)
}

/// Time since `t`, on the kept clock.
pub fn since(t: Instant) -> std::time::Duration {
    instant().saturating_duration_since(t)
}

/// The clock as one poll of a task saw it: each reading is taken at its first use and kept
/// until the poll ends. nginx reads the time once per turn of its event loop for the same
/// reason: a proxied request asked for it ~20 times (time to first byte, budgets, deadlines,
/// quota stamps), each a clock read and a conversion, ~1,300 instructions in all.
#[derive(Clone, Copy, Default)]
struct Turn {
    active: bool,
    instant: Option<Instant>,
    mono_ms: Option<u64>,
    unix_ms: Option<u64>,
}

thread_local! {
    static TURN: std::cell::Cell<Turn> = const {
        std::cell::Cell::new(Turn { active: false, instant: None, mono_ms: None, unix_ms: None })
    };
}

fn read<T: Copy>(field: fn(&mut Turn) -> &mut Option<T>, fresh: impl FnOnce() -> T) -> T {
    TURN.with(|cell| {
        let mut turn = cell.get();
        if let Some(v) = *field(&mut turn) {
            return v;
        }
        let v = fresh();
        if turn.active {
            // `fresh` may have filled other fields (now_ms reads the instant): keep them.
            let mut now = cell.get();
            *field(&mut now) = Some(v);
            cell.set(now);
        }
        v
    })
}

pin_project_lite::pin_project! {
    /// A task whose every poll reads the clock at most once per form; see [`per_poll`].
    pub struct PerPoll<F> {
        #[pin]
        inner: F,
    }
}

/// Run `f` with the clock kept for the length of each of its polls. Within one poll the time
/// does not move (a poll never blocks, so it lasts microseconds); between polls it does.
pub fn per_poll<F: std::future::Future>(f: F) -> PerPoll<F> {
    PerPoll { inner: f }
}

impl<F: std::future::Future> std::future::Future for PerPoll<F> {
    type Output = F::Output;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<F::Output> {
        let on = Turn {
            active: true,
            ..Turn::default()
        };
        TURN.with(|t| t.set(on));
        // Other tasks read afresh: nothing kept leaks into them, even when this poll panics
        // (a contained panic must not leave the core's clock frozen).
        let _end = EndTurn;
        self.project().inner.poll(cx)
    }
}

/// Ends the kept turn when a poll returns or unwinds.
struct EndTurn;

impl Drop for EndTurn {
    fn drop(&mut self) {
        TURN.with(|t| t.set(Turn::default()));
    }
}

/// The same scale for an instant already read (one clock read serving both forms).
pub fn ms_at(t: Instant) -> u64 {
    t.saturating_duration_since(epoch()).as_millis() as u64
}

/// Wall-clock milliseconds since the Unix epoch (for logs and HTTP dates only).
pub fn unix_ms() -> u64 {
    read(
        |t| &mut t.unix_ms,
        || {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0)
        },
    )
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
    fn per_poll_keeps_the_clock_for_one_poll_only() {
        use std::future::Future;
        use std::task::{Context, Poll, Waker};
        let mut polls = 0;
        let seen = std::cell::RefCell::new(Vec::new());
        let mut task = std::pin::pin!(per_poll(std::future::poll_fn(|_| {
            let (a, ua) = (instant(), unix_ms());
            std::thread::sleep(std::time::Duration::from_millis(3));
            let (b, ub) = (instant(), unix_ms());
            seen.borrow_mut().push((a, b, ua, ub));
            polls += 1;
            if polls == 2 {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })));
        let mut cx = Context::from_waker(Waker::noop());
        assert!(task.as_mut().poll(&mut cx).is_pending());
        // Outside a poll the clock is read afresh: nothing kept leaks out.
        let outside = instant();
        std::thread::sleep(std::time::Duration::from_millis(3));
        assert!(instant() > outside);
        assert!(task.as_mut().poll(&mut cx).is_ready());
        let seen = seen.borrow();
        for (a, b, ua, ub) in seen.iter() {
            assert_eq!(a, b, "one poll, one reading");
            assert_eq!(ua, ub);
        }
        assert!(seen[1].0 > seen[0].0, "the next poll reads again");
        assert!(seen[1].0 > outside);
    }

    #[test]
    fn a_poll_that_panics_leaves_the_clock_running() {
        use std::future::Future;
        use std::task::{Context, Waker};
        let mut task = std::pin::pin!(per_poll(std::future::poll_fn(|_| -> std::task::Poll<()> {
            let _ = instant();
            panic!("inside a kept turn");
        })));
        let mut cx = Context::from_waker(Waker::noop());
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _ = task.as_mut().poll(&mut cx);
        }));
        assert!(caught.is_err());
        let a = instant();
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert!(instant() > a, "read afresh after the unwound poll");
    }

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
