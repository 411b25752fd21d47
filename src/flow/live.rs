//! A connection's flow settings as the request path reads them: atomics, so that a reload can
//! change them under requests in flight without a lock (`FlowShared::apply`).

use super::settings::Knob;
use super::{ConnFlow, Saturation};
use std::sync::atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering::Relaxed};

const NONE: u64 = u64::MAX;

#[derive(Debug)]
pub struct LiveConnFlow {
    on_saturation: AtomicU8,
    /// `usize::MAX`: no account with limits of its own.
    account: AtomicUsize,
    max_wait_ms: AtomicU64,
    execution_max_wait_ms: AtomicU64,
    max_queue_depth: AtomicU64,
}

impl Default for LiveConnFlow {
    fn default() -> Self {
        LiveConnFlow {
            on_saturation: AtomicU8::new(0),
            account: AtomicUsize::new(usize::MAX),
            max_wait_ms: AtomicU64::new(NONE),
            execution_max_wait_ms: AtomicU64::new(NONE),
            max_queue_depth: AtomicU64::new(NONE),
        }
    }
}

fn opt(v: Option<u64>) -> u64 {
    v.unwrap_or(NONE)
}

impl LiveConnFlow {
    pub fn new(c: &ConnFlow) -> Self {
        let l = LiveConnFlow::default();
        l.set(c);
        l
    }

    pub fn set(&self, c: &ConnFlow) {
        let sat = match c.on_saturation {
            Saturation::Queue => 0,
            Saturation::Reject => 1,
            Saturation::FailOpen => 2,
        };
        self.on_saturation.store(sat, Relaxed);
        self.account.store(c.account.unwrap_or(usize::MAX), Relaxed);
        self.max_wait_ms.store(opt(c.max_wait_ms), Relaxed);
        self.execution_max_wait_ms
            .store(opt(c.execution_max_wait_ms), Relaxed);
        self.max_queue_depth.store(opt(c.max_queue_depth), Relaxed);
    }

    pub fn on_saturation(&self) -> Saturation {
        match self.on_saturation.load(Relaxed) {
            1 => Saturation::Reject,
            2 => Saturation::FailOpen,
            _ => Saturation::Queue,
        }
    }

    pub fn account(&self) -> Option<usize> {
        let a = self.account.load(Relaxed);
        (a != usize::MAX).then_some(a)
    }

    /// The connection's own value of a knob, if the config gives one.
    pub fn own(&self, k: Knob) -> Option<u64> {
        let v = match k {
            Knob::MaxWaitMs => &self.max_wait_ms,
            Knob::ExecutionMaxWaitMs => &self.execution_max_wait_ms,
            Knob::MaxQueueDepth => &self.max_queue_depth,
        }
        .load(Relaxed);
        (v != NONE).then_some(v)
    }
}
