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
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// Slots in the wheel (a power of two): one turn is this many milliseconds.
pub const SLOTS: usize = 512;
const MASK: u64 = SLOTS as u64 - 1;
/// No entry (an unregistered sleep, or an idle ticker's target).
const NONE: u32 = u32::MAX;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum State {
    Free,
    Armed,
    Fired,
}

struct Entry {
    tick: u64,
    waker: Option<Waker>,
    /// Index in its slot's list while armed.
    pos: u32,
    state: State,
}

/// The wheel itself: ticks in, wakers out. No clock and no I/O, so tests drive it by hand.
pub struct Wheel {
    /// Every tick up to and including this one has been fired.
    done: u64,
    entries: Vec<Entry>,
    free: Vec<u32>,
    slots: Vec<Vec<u32>>,
    armed: usize,
    /// The tick the ticker sleeps until (`u64::MAX`: idle, waiting for an entry).
    ticker_at: u64,
    ticker: Option<Waker>,
}

impl Default for Wheel {
    fn default() -> Self {
        Wheel::new()
    }
}

impl Wheel {
    pub fn new() -> Self {
        Wheel {
            done: 0,
            entries: Vec::new(),
            free: Vec::new(),
            slots: (0..SLOTS).map(|_| Vec::new()).collect(),
            armed: 0,
            ticker_at: u64::MAX,
            ticker: None,
        }
    }

    /// The last tick fired.
    pub fn done(&self) -> u64 {
        self.done
    }

    /// Entries waiting to fire.
    pub fn armed(&self) -> usize {
        self.armed
    }

    /// Register a wait for `tick`. `None`: it is already due (nothing registered).
    pub fn insert(&mut self, tick: u64, waker: Option<Waker>) -> Option<u32> {
        if tick <= self.done {
            return None;
        }
        let id = match self.free.pop() {
            Some(id) => id,
            None => {
                self.entries.push(Entry {
                    tick: 0,
                    waker: None,
                    pos: 0,
                    state: State::Free,
                });
                (self.entries.len() - 1) as u32
            }
        };
        let e = &mut self.entries[id as usize];
        e.waker = waker;
        self.arm(id, tick);
        Some(id)
    }

    fn arm(&mut self, id: u32, tick: u64) {
        let slot = &mut self.slots[(tick & MASK) as usize];
        let e = &mut self.entries[id as usize];
        e.tick = tick;
        e.state = State::Armed;
        e.pos = slot.len() as u32;
        slot.push(id);
        self.armed += 1;
        // A deadline sooner than the one the ticker sleeps until: it must sleep less.
        if tick < self.ticker_at {
            self.ticker_at = tick;
            if let Some(t) = self.ticker.take() {
                t.wake();
            }
        }
    }

    /// Take an armed entry out of its slot (it stays allocated).
    fn unlink(&mut self, id: u32) {
        let e = &self.entries[id as usize];
        let (slot, pos) = ((e.tick & MASK) as usize, e.pos as usize);
        let list = &mut self.slots[slot];
        list.swap_remove(pos);
        if let Some(&moved) = list.get(pos) {
            self.entries[moved as usize].pos = pos as u32;
        }
        self.armed -= 1;
    }

    /// Forget an entry, armed or fired; its id may be handed out again.
    pub fn remove(&mut self, id: u32) {
        // An id this wheel never gave (a sleep from before `install` on this thread): nothing.
        let Some(state) = self.entries.get(id as usize).map(|e| e.state) else {
            return;
        };
        if state == State::Armed {
            self.unlink(id);
        }
        if state != State::Free {
            let e = &mut self.entries[id as usize];
            e.state = State::Free;
            e.waker = None;
            self.free.push(id);
        }
    }

    /// Move an entry (armed or fired) to `tick`. `false`: that is already due (the entry is
    /// then fired).
    pub fn reset(&mut self, id: u32, tick: u64) -> bool {
        let Some((state, old)) = self.entries.get(id as usize).map(|e| (e.state, e.tick)) else {
            return false;
        };
        match state {
            State::Free => return false,
            State::Armed if old == tick => return true,
            State::Armed => self.unlink(id),
            State::Fired => {}
        }
        if tick <= self.done {
            self.entries[id as usize].state = State::Fired;
            return false;
        }
        self.arm(id, tick);
        true
    }

    /// Has the entry fired? If not, `waker` is the one it will wake.
    pub fn poll(&mut self, id: u32, waker: &Waker) -> bool {
        // An unknown or freed id reads as fired: a wait ends early rather than never.
        let Some(e) = self.entries.get_mut(id as usize) else {
            return true;
        };
        if e.state != State::Armed {
            return true;
        }
        match &e.waker {
            Some(w) if w.will_wake(waker) => {}
            _ => e.waker = Some(waker.clone()),
        }
        false
    }

    /// Fire every entry due by `now`, pushing the wakers to wake into `due`.
    pub fn advance(&mut self, now: u64, due: &mut Vec<Waker>) {
        if now <= self.done {
            return;
        }
        // A gap longer than a turn visits every slot once: each entry is in exactly one.
        let span = (now - self.done).min(SLOTS as u64);
        for t in self.done + 1..=self.done + span {
            let slot = (t & MASK) as usize;
            let mut i = 0;
            while i < self.slots[slot].len() {
                let id = self.slots[slot][i];
                let e = &mut self.entries[id as usize];
                if e.tick > now {
                    i += 1;
                    continue;
                }
                e.state = State::Fired;
                if let Some(w) = e.waker.take() {
                    due.push(w);
                }
                self.unlink(id);
            }
        }
        self.done = now;
    }

    /// The first tick after `done` whose slot holds an entry (it may be one a turn later: a
    /// wasted wake at most once per turn per far entry). `None`: nothing armed.
    pub fn next_tick(&self) -> Option<u64> {
        if self.armed == 0 {
            return None;
        }
        (self.done + 1..=self.done + SLOTS as u64)
            .find(|&t| !self.slots[(t & MASK) as usize].is_empty())
    }
}

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
pub struct Sleep {
    tick: u64,
    id: u32,
    _core_local: std::marker::PhantomData<*const ()>,
}

/// Wait until `at` (at the latest a millisecond and a scheduling round after it).
pub fn sleep_until(at: Instant) -> Sleep {
    let tick = with(|c| tick_at(c.origin, at));
    Sleep {
        tick,
        id: NONE,
        _core_local: std::marker::PhantomData,
    }
}

impl Sleep {
    /// Wait until `at` instead (fired or not).
    pub fn reset(&mut self, at: Instant) {
        with(|c| {
            self.tick = tick_at(c.origin, at);
            if self.id != NONE {
                // `false` (already due) leaves it fired: the next poll is ready.
                c.wheel.reset(self.id, self.tick);
            }
        });
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let (ready, spawn) = with(|c| {
            if this.id != NONE {
                return (c.wheel.poll(this.id, cx.waker()), false);
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

#[cfg(test)]
mod tests;
