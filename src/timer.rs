//! Core-local deadlines: every wait on the request path that has a deadline (a keep-alive read,
//! the rest of a head, the first response byte, a stream's stall window, the client watch's
//! arming) is an entry in this core's timer wheel instead of a monoio `Sleep`.
//!
//! Why our own: a monoio `Sleep` is 640 bytes (a cache-padded waker cell made for timers that
//! threads share, which ours never are), and arming, polling and dropping one cost ~500-900
//! instructions (callgrind): about 14% of a proxied JSON request's user-space instructions with
//! four of them per request. An entry here is 16 bytes in the waiting future and a slot push
//! and a `swap_remove` in the wheel. Only the ticker, one task per core, sleeps on monoio's
//! timer, until the next slot that holds an entry.
//!
//! The wheel has [`SLOTS`] slots of one millisecond: an entry lives in slot `tick % SLOTS`, and
//! a slot is scanned when its tick comes round, so an entry more than `SLOTS` ms away is seen
//! (and kept) once per turn of the wheel until it is due. A deadline fires at the first
//! millisecond at or after it, never before.
//!
//! The wheel is plain data owned by its core's thread; the ticker is spawned by [`install`] at
//! a core's start, or by the first wait on a thread that did not call it.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

mod wheel;

use wheel::NONE;
#[cfg(test)]
use wheel::State;
pub use wheel::{SLOTS, Wheel};

/// A core's wheel with its time origin and whether its ticker runs.
struct Core {
    origin: Instant,
    wheel: Wheel,
    ticker_running: bool,
    /// Bumped by [`install`]: a ticker of an earlier runtime, dropped late, then changes nothing.
    generation: u64,
}

thread_local! {
    static CORE: RefCell<Core> = RefCell::new(Core {
        origin: Instant::now(),
        wheel: Wheel::new(),
        ticker_running: false,
        generation: 0,
    });
}

fn with<R>(f: impl FnOnce(&mut Core) -> R) -> R {
    CORE.with_borrow_mut(f)
}

/// The tick at or after `at` (a deadline never fires early).
fn tick_at(origin: Instant, at: Instant) -> u64 {
    let d = at.saturating_duration_since(origin);
    d.as_secs() * 1000 + u64::from(d.subsec_nanos().div_ceil(1_000_000))
}

/// The last whole tick by `now`.
fn tick_by(origin: Instant, now: Instant) -> u64 {
    let d = now.saturating_duration_since(origin);
    d.as_secs() * 1000 + u64::from(d.subsec_millis())
}

/// Start this thread's ticker on a fresh wheel: call once at the start of each runtime.
/// (Entries and the ticker of an earlier runtime on the same thread are dropped.)
pub fn install() {
    with(|c| {
        c.origin = Instant::now();
        c.wheel = Wheel::new();
        c.ticker_running = true;
        c.generation += 1;
    });
    monoio::spawn(ticker());
}

/// Clears `ticker_running` when the ticker task is dropped, so the next wait starts another.
struct Running(u64);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = CORE.try_with(|c| {
            if let Ok(mut c) = c.try_borrow_mut()
                && c.generation == self.0
            {
                c.ticker_running = false;
                c.wheel.ticker = None;
                c.wheel.ticker_at = u64::MAX;
            }
        });
    }
}

/// The one task per core that sleeps on monoio's timer: until the next slot that holds an
/// entry, or until an entry sooner than that arrives (it is then woken to sleep less).
async fn ticker() {
    let (origin, generation) = with(|c| (c.origin, c.generation));
    let _running = Running(generation);
    let mut sleep = std::pin::pin!(monoio::time::sleep_until(origin.into()));
    let mut sleeping_until = 0u64;
    let mut due = Vec::new();
    loop {
        std::future::poll_fn(|cx| {
            let next = with(|c| {
                let w = &mut c.wheel;
                let next = w.next_tick();
                w.ticker_at = next.unwrap_or(u64::MAX);
                match &w.ticker {
                    Some(t) if t.will_wake(cx.waker()) => {}
                    _ => w.ticker = Some(cx.waker().clone()),
                }
                next
            });
            let Some(next) = next else {
                return Poll::Pending;
            };
            if next != sleeping_until {
                sleeping_until = next;
                let at = origin + Duration::from_millis(next);
                sleep.as_mut().reset(at.into());
            }
            sleep.as_mut().poll(cx)
        })
        .await;
        sleeping_until = 0;
        let now = Instant::now();
        with(|c| c.wheel.advance(tick_by(c.origin, now), &mut due));
        for w in due.drain(..) {
            w.wake();
        }
    }
}

/// A wait until a deadline on this core's wheel; `Unpin`, 16 bytes. Not `Send`: its entry
/// lives in the wheel of the thread that polled it.
///
/// A deadline moved later is moved lazily (HAProxy's and nginx's way with timers): the wheel's
/// entry stays where it is, the sleep alone learns the new deadline, and when the entry fires
/// early the sleep puts it where the deadline now is. A held stream moves its read deadline at
/// every event; moving the entry each time cost three loads of memory that had gone cold since
/// the stream's last event (its entry, its old slot, and the entry moved into its place there),
/// the largest single cost of an event in user space (`perf`, 5,000 held streams).
pub struct Sleep {
    /// The deadline.
    tick: u64,
    id: u32,
    /// How far before the deadline the wheel's entry sits (0 when it sits at it).
    lead: u32,
    _core_local: std::marker::PhantomData<*const ()>,
}

/// Wait until `at` (at the latest a millisecond and a scheduling round after it).
pub fn sleep_until(at: Instant) -> Sleep {
    let tick = with(|c| tick_at(c.origin, at));
    Sleep {
        tick,
        id: NONE,
        lead: 0,
        _core_local: std::marker::PhantomData,
    }
}

impl Sleep {
    /// A sleep with no deadline yet (until [`Sleep::reset`]); never polled as it is.
    pub fn unset() -> Sleep {
        Sleep {
            tick: u64::MAX,
            id: NONE,
            lead: 0,
            _core_local: std::marker::PhantomData,
        }
    }

    /// Let the wheel's entry go (a sleep that fired and is not polled again), as a drop would.
    pub fn let_go(&mut self) {
        if self.id != NONE {
            let id = std::mem::replace(&mut self.id, NONE);
            with(|c| c.wheel.remove(id));
        }
    }

    /// Wait until `at` instead (fired or not). Later than where the wheel's entry sits: the
    /// entry is left there (see [`Sleep`]).
    pub fn reset(&mut self, at: Instant) {
        with(|c| {
            let tick = tick_at(c.origin, at);
            let placed = self.tick - u64::from(self.lead);
            self.tick = tick;
            if self.id == NONE {
                return;
            }
            if let Some(lead) = tick.checked_sub(placed).and_then(|d| u32::try_from(d).ok()) {
                self.lead = lead;
                return;
            }
            self.lead = 0;
            // `false` (already due) leaves it fired: the next poll is ready.
            c.wheel.reset(self.id, tick);
        });
    }

    /// Poll a registered sleep: ready once its deadline has passed; an entry that fired before
    /// it (placed early, see [`Sleep`]) is put at the deadline.
    fn poll_registered(&mut self, w: &mut Wheel, waker: &std::task::Waker) -> bool {
        if !w.poll(self.id, waker) {
            return false;
        }
        if self.lead == 0 || self.tick <= w.done() {
            return true;
        }
        self.lead = 0;
        // `false` from `reset`: the entry is gone or the deadline is due after all.
        !w.reset(self.id, self.tick) || w.poll(self.id, waker)
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let (ready, spawn) = with(|c| {
            if this.id != NONE {
                return (this.poll_registered(&mut c.wheel, cx.waker()), false);
            }
            match c.wheel.insert(this.tick, Some(cx.waker().clone())) {
                None => (true, false),
                Some(id) => {
                    this.id = id;
                    let spawn = !c.ticker_running;
                    c.ticker_running = true;
                    (false, spawn)
                }
            }
        });
        if spawn {
            monoio::spawn(ticker());
        }
        if ready {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if self.id != NONE {
            let id = self.id;
            let _ = CORE.try_with(|c| {
                if let Ok(mut c) = c.try_borrow_mut() {
                    c.wheel.remove(id);
                }
            });
        }
    }
}

/// The deadline passed before the work finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Elapsed;

pin_project_lite::pin_project! {
    /// `f`, unless a deadline comes first. A struct rather than an `async fn`: an async fn
    /// would hold `f` twice (as its argument, then pinned), doubling every future it wraps.
    pub struct Timeout<F> {
        #[pin]
        f: F,
        sleep: Sleep,
    }
}

impl<F: Future> Future for Timeout<F> {
    type Output = Result<F::Output, Elapsed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Poll::Ready(v) = this.f.poll(cx) {
            return Poll::Ready(Ok(v));
        }
        Pin::new(this.sleep).poll(cx).map(|()| Err(Elapsed))
    }
}

/// `f`, unless `at` comes first.
pub fn timeout_at<F: Future>(at: Instant, f: F) -> Timeout<F> {
    Timeout {
        f,
        sleep: sleep_until(at),
    }
}

/// `f`, unless `d` passes first.
pub fn timeout<F: Future>(d: Duration, f: F) -> Timeout<F> {
    timeout_at(crate::clock::instant() + d, f)
}

/// Ask `ready` every `every` until it answers, or `None` once `end` would pass: waiting on
/// something another task (or core) finishes, rarely enough that a poll costs nothing.
pub async fn poll_until<T>(
    end: Instant,
    every: Duration,
    mut ready: impl FnMut() -> Option<T>,
) -> Option<T> {
    loop {
        if let Some(v) = ready() {
            return Some(v);
        }
        let next = crate::clock::instant() + every;
        if next >= end {
            return None;
        }
        sleep_until(next).await;
    }
}

#[cfg(test)]
mod tests;
