//! A core-local drain signal: idle connections and the accept loop wait on it, and the core's
//! tick triggers it once the process starts shutting down.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

#[derive(Default)]
pub struct Drain {
    draining: Cell<bool>,
    /// Waiting connections' wakers by slot; freed slots are reused. Every keep-alive wait
    /// registers here, so no hashing (a `HashMap` showed up in profiles).
    waiters: RefCell<Slots>,
}

#[derive(Default)]
struct Slots {
    wakers: Vec<Option<Waker>>,
    free: Vec<usize>,
}

impl Drain {
    pub fn is_draining(&self) -> bool {
        self.draining.get()
    }

    pub fn trigger(&self) {
        if self.draining.replace(true) {
            return;
        }
        let waiters: Vec<Waker> = {
            let mut slots = self.waiters.borrow_mut();
            slots.free.clear();
            slots.wakers.drain(..).flatten().collect()
        };
        for w in waiters {
            w.wake();
        }
    }

    /// Resolves once draining starts.
    pub fn wait(&self) -> DrainWait<'_> {
        DrainWait {
            drain: self,
            slot: None,
        }
    }
}

pub struct DrainWait<'a> {
    drain: &'a Drain,
    slot: Option<usize>,
}

thread_local! {
    /// When this core's drain ends the streams still running (its grace's end), once a drain
    /// began. Read by every relay when it arms its next read, so it costs a stream nothing to
    /// carry and nothing per event beyond the read.
    static CUT_AT: std::cell::Cell<Option<std::time::Instant>> = const { std::cell::Cell::new(None) };
}

/// This core's streams still running at `at` are cut (an error event, a log line, a count).
pub fn cut_streams_at(at: std::time::Instant) {
    CUT_AT.with(|c| c.set(Some(at)));
}

/// When this core cuts its streams, once its drain began.
pub fn cut_at() -> Option<std::time::Instant> {
    CUT_AT.with(std::cell::Cell::get)
}

thread_local! {
    /// This core's cut, as a signal: requests still waiting for an upstream's response head
    /// wait on it too (a non-streaming completion can wait minutes for its head), so that the
    /// grace's end answers them instead of dropping them. One per core thread, for its life.
    static CUT: &'static Drain = Box::leak(Box::default());
}

/// Resolves when this core's grace ends (`cut_now`).
pub fn until_cut() -> DrainWait<'static> {
    CUT.with(|c| c.wait())
}

/// The grace has ended on this core: every `until_cut` resolves.
pub fn cut_now() {
    CUT.with(|c| c.trigger());
}

impl Future for DrainWait<'_> {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.drain.draining.get() {
            return Poll::Ready(());
        }
        let mut slots = self.drain.waiters.borrow_mut();
        let waker = Some(cx.waker().clone());
        match self.slot {
            Some(i) => slots.wakers[i] = waker,
            None => {
                let i = match slots.free.pop() {
                    Some(i) => {
                        slots.wakers[i] = waker;
                        i
                    }
                    None => {
                        slots.wakers.push(waker);
                        slots.wakers.len() - 1
                    }
                };
                drop(slots);
                self.slot = Some(i);
            }
        }
        Poll::Pending
    }
}

impl Drop for DrainWait<'_> {
    fn drop(&mut self) {
        if let Some(i) = self.slot {
            let mut slots = self.drain.waiters.borrow_mut();
            // After `trigger` the slots are gone: nothing to free.
            if let Some(w) = slots.wakers.get_mut(i) {
                *w = None;
                slots.free.push(i);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn poll(w: &mut DrainWait<'_>, count: &Arc<Count>) -> Poll<()> {
        let waker = Waker::from(count.clone());
        Pin::new(w).poll(&mut Context::from_waker(&waker))
    }

    #[test]
    fn trigger_wakes_every_live_waiter_once_and_slots_are_reused() {
        let drain = Drain::default();
        let (a, b, c) = (
            Arc::new(Count(AtomicUsize::new(0))),
            Arc::new(Count(AtomicUsize::new(0))),
            Arc::new(Count(AtomicUsize::new(0))),
        );
        let mut wa = drain.wait();
        let mut wb = drain.wait();
        assert!(poll(&mut wa, &a).is_pending());
        assert!(poll(&mut wb, &b).is_pending());
        // Polled again: the slot is updated, not duplicated.
        assert!(poll(&mut wa, &a).is_pending());
        drop(wb);
        let mut wc = drain.wait();
        assert!(poll(&mut wc, &c).is_pending());
        assert_eq!(drain.waiters.borrow().wakers.len(), 2, "b's slot reused");
        drain.trigger();
        drain.trigger();
        assert_eq!(a.0.load(Ordering::SeqCst), 1);
        assert_eq!(
            b.0.load(Ordering::SeqCst),
            0,
            "a dropped waiter is not woken"
        );
        assert_eq!(c.0.load(Ordering::SeqCst), 1);
        assert!(poll(&mut wa, &a).is_ready());
        assert!(drain.wait().poll_unpin_ready(&a));
        drop((wa, wc));
    }

    impl DrainWait<'_> {
        fn poll_unpin_ready(mut self, count: &Arc<Count>) -> bool {
            poll(&mut self, count).is_ready()
        }
    }
}
