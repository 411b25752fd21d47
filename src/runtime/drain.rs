//! A core-local drain signal: idle connections and the accept loop wait on it, and the core's
//! tick triggers it once the process starts shutting down.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

#[derive(Default)]
pub struct Drain {
    draining: Cell<bool>,
    waiters: RefCell<HashMap<u64, Waker>>,
    next: Cell<u64>,
}

impl Drain {
    pub fn is_draining(&self) -> bool {
        self.draining.get()
    }

    pub fn trigger(&self) {
        if self.draining.replace(true) {
            return;
        }
        let waiters: Vec<Waker> = self.waiters.borrow_mut().drain().map(|(_, w)| w).collect();
        for w in waiters {
            w.wake();
        }
    }

    /// Resolves once draining starts.
    pub fn wait(&self) -> DrainWait<'_> {
        DrainWait {
            drain: self,
            id: None,
        }
    }
}

pub struct DrainWait<'a> {
    drain: &'a Drain,
    id: Option<u64>,
}

impl Future for DrainWait<'_> {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.drain.draining.get() {
            return Poll::Ready(());
        }
        let id = match self.id {
            Some(id) => id,
            None => {
                let id = self.drain.next.get();
                self.drain.next.set(id + 1);
                self.id = Some(id);
                id
            }
        };
        self.drain
            .waiters
            .borrow_mut()
            .insert(id, cx.waker().clone());
        Poll::Pending
    }
}

impl Drop for DrainWait<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.id {
            self.drain.waiters.borrow_mut().remove(&id);
        }
    }
}
