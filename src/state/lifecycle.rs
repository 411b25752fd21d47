//! Where the process is in its life, as every thread sees it: serving, draining (`/readyz`
//! answers 503 while the data port still accepts), shutting down (listeners closed, in-flight
//! requests finishing within the grace), stopped. Plain atomics: the cores, the admin thread
//! and the main thread only set and read flags.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};

#[derive(Default)]
pub struct Lifecycle {
    /// A drain began: `/readyz` answers 503; the data port still accepts until `shutdown`.
    draining: AtomicBool,
    /// `POST /admin/drain` asked for a drain (the main thread runs it, as for SIGTERM).
    drain_requested: AtomicBool,
    /// A second signal: the grace is over now.
    hurry: AtomicBool,
    /// Every core has finished: the admin port closes.
    stopped: AtomicBool,
    /// Client connections still open when the grace ended (their requests were cut).
    cut: AtomicUsize,
}

impl Lifecycle {
    pub fn start_draining(&self) {
        self.draining.store(true, SeqCst);
    }
    pub fn is_draining(&self) -> bool {
        self.draining.load(SeqCst)
    }
    pub fn request_drain(&self) {
        self.drain_requested.store(true, SeqCst);
    }
    pub fn drain_requested(&self) -> bool {
        self.drain_requested.load(SeqCst)
    }
    pub fn hurry(&self) {
        self.hurry.store(true, SeqCst);
    }
    pub fn in_a_hurry(&self) -> bool {
        self.hurry.load(SeqCst)
    }
    pub fn mark_stopped(&self) {
        self.stopped.store(true, SeqCst);
    }
    pub fn is_stopped(&self) -> bool {
        self.stopped.load(SeqCst)
    }
    pub fn count_cut(&self, n: usize) {
        self.cut.fetch_add(n, SeqCst);
    }
    pub fn cut(&self) -> usize {
        self.cut.load(SeqCst)
    }
}
