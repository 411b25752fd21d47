//! A standing readiness wait: one multishot poll per held event stream's upstream socket,
//! armed once the stream has waited a while (`patience`) and cancelled when it ends, instead
//! of a one-shot poll armed through the runtime's ring before every event.
//!
//! Why: a held stream waits for readiness before each event (`http::nowait`). Through monoio
//! that wait is a one-shot `POLL_ADD`, so every event paid for arming a poll in the kernel
//! (looking the file up, `tcp_poll`, hashing the request: about 5 % of the proxy's CPU per
//! event at 5,000 streams, `perf`, 2026-12-03). A multishot poll stays on the socket's wait
//! queue and posts a completion each time data lands, as an epoll registration does.
//!
//! How: monoio 0.2.4 keeps its ring to itself, and a multishot completion would confuse its
//! one-completion-per-operation slab, so each core has a small ring of its own for these
//! polls. One task per core (the reaper) waits, through monoio, for that ring's descriptor to
//! become readable, then hands each completion to its stream: a flag and a wake. The epoll
//! driver keeps its own registration per socket and needs none of this: there, and wherever
//! the ring cannot be built, the wait is `nowait::readable` as before.
//!
//! Readiness is edge-like: a completion per arrival. Where no arrival would follow, the wait
//! must not sleep: a receive that filled its buffer may have left bytes behind, so its caller
//! says so ([`still_ready`]); and once the peer has closed or reset the connection (a
//! completion that says so may also have announced the last bytes, which the next receive
//! takes first), every later wait returns at once, so the receive after them finds the end.

use std::cell::RefCell;
use std::future::poll_fn;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::task::{Context, Poll, Waker};

use io_uring::{IoUring, cqueue, opcode, types};

/// The ring's completion queue: room for a burst of arrivals on thousands of streams between
/// two turns of the reaper (128 KiB per core). An overflow is not lost: the kernel keeps it
/// and the reaper flushes it; a poll it ends is armed again.
const CQ_ENTRIES: u32 = 8192;
/// Submissions go in one or two at a time (an arm or a cancel), each submitted at once.
const SQ_ENTRIES: u32 = 32;
/// The `user_data` of a cancel's own completion (ignored).
const CANCEL: u64 = u64::MAX;
/// `by_fd`'s mark for a socket whose poll failed: it waits the old way until released.
const OFF: u32 = u32::MAX;

/// What a slot's poll is doing.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Arm {
    Free,
    /// Armed: completions will come.
    Armed,
    /// The kernel ended the poll (an overflow, an error): armed again at the next wait.
    Ended,
    /// Its stream is gone and the poll cancelled: the slot is free at its last completion.
    Cancelled,
    /// The poll failed (a kernel without multishot polls): the stream waits the old way.
    Failed,
}

struct Slot {
    /// Bumped when the slot is freed, so that a late completion of a former poll is ignored.
    generation: u32,
    arm: Arm,
    ready: bool,
    /// The peer closed or reset: no arrival will follow to announce what is left (the last
    /// bytes, the end, the error), so every wait from now on returns at once.
    hangup: bool,
    waker: Option<Waker>,
}

/// A core's standing polls, apart from the ring they are armed on (the reaper reads the ring's
/// completions while it updates these).
#[derive(Default)]
struct Slots {
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// A socket's slot plus one (0: none; [`OFF`]), by descriptor: a stream's state holds
    /// nothing of its poll, so that every held stream's task stays the size it was.
    by_fd: Vec<u32>,
}

/// A core's ring of standing polls.
struct Ring {
    ring: IoUring,
    table: Slots,
}

thread_local! {
    /// `None` until the first arm on an io_uring core; stays `None` where it cannot be built.
    static RING: RefCell<Option<Ring>> = const { RefCell::new(None) };
    /// The ring was tried on this core and could not be built.
    static UNAVAILABLE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn user_data(slot: u32, generation: u32) -> u64 {
    (u64::from(generation) << 32) | u64::from(slot)
}

impl Slots {
    /// A free slot, armed afresh.
    fn take(&mut self) -> u32 {
        let slot = self.free.pop().unwrap_or_else(|| {
            self.slots.push(Slot {
                generation: 0,
                arm: Arm::Free,
                ready: false,
                hangup: false,
                waker: None,
            });
            (self.slots.len() - 1) as u32
        });
        let s = &mut self.slots[slot as usize];
        (s.arm, s.ready, s.hangup) = (Arm::Armed, false, false);
        slot
    }

    /// Free `slot`: its generation moves on, so that what its poll still posts is ignored.
    fn free_slot(&mut self, slot: u32) {
        let s = &mut self.slots[slot as usize];
        s.generation = s.generation.wrapping_add(1);
        (s.arm, s.ready, s.waker) = (Arm::Free, false, None);
        self.free.push(slot);
    }

    /// `slot`'s poll failed: free it, and `fd` waits the old way until released.
    fn fail(&mut self, fd: RawFd, slot: u32) {
        self.free_slot(slot);
        self.mark(fd, OFF);
    }

    /// Slots in use: this core's held streams with a poll (armed, ended or being cancelled).
    fn in_use(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// The live slot of `fd`'s standing poll, if it has one.
    fn slot_of(&self, fd: RawFd) -> Option<u32> {
        match self.by_fd.get(fd as usize).copied() {
            None | Some(0) | Some(OFF) => None,
            Some(k) => Some(k - 1),
        }
    }

    fn mark(&mut self, fd: RawFd, value: u32) {
        let i = fd as usize;
        if self.by_fd.len() <= i {
            self.by_fd.resize(i + 1, 0);
        }
        self.by_fd[i] = value;
    }

    /// One completion: a readiness for an armed poll, or the end of one.
    fn handle(&mut self, cqe: cqueue::Entry) {
        let ud = cqe.user_data();
        if ud == CANCEL {
            return;
        }
        let (slot, generation) = (ud as u32, (ud >> 32) as u32);
        let crowded = self.in_use() >= PREFETCH_FROM;
        let Some(s) = self.slots.get_mut(slot as usize) else {
            return;
        };
        if s.generation != generation {
            return;
        }
        let more = cqueue::more(cqe.flags());
        match s.arm {
            Arm::Armed => {
                let refused = cqe.result() < 0 && cqe.result() != -libc::ECANCELED;
                // A refusal (a kernel without multishot polls says EINVAL) is no readiness:
                // it fails the slot, and its stream waits the old way. Any other end of the
                // poll is armed again at the next wait.
                s.ready |= !refused;
                // (One completion may announce the last bytes and the close together; the
                // receive that takes the bytes leaves the close for the next one.)
                let ends = (libc::POLLERR | libc::POLLHUP | libc::POLLRDHUP) as i32;
                s.hangup |= !refused && cqe.result() & ends != 0;
                if !more {
                    s.arm = if refused { Arm::Failed } else { Arm::Ended };
                }
                if let Some(w) = &s.waker {
                    if crowded {
                        prefetch_task(w.data());
                    }
                    w.wake_by_ref();
                }
            }
            Arm::Cancelled if !more => self.free_slot(slot),
            _ => {}
        }
    }
}

/// Streams held on a core from which their tasks are loaded ahead: fewer tasks than this
/// (about 0.9 MiB of them) stay in a core's own cache between events, and loading them ahead
/// would be instructions spent for nothing.
const PREFETCH_FROM: usize = 256;

/// How much of a woken stream's task to load ahead: the connection's task, whose future
/// `proxy::connection`'s size test holds to 3,520 bytes, with the runtime's 64 around it.
pub const TASK_BYTES: usize = 3_584;

/// Start loading a woken stream's task into the core's caches. A held stream's state has gone
/// cold since its last event, and the task runs only after the reaper has handed out its whole
/// batch of completions; loading each task's lines now, all at once, overlaps what would
/// otherwise be one cache miss after another as the task walks its state (about a sixth less
/// user time per event at 5,000 streams, `docs/design/performance.md`). The runtime's waker
/// points at the task's allocation; a prefetch reads nothing into the program and never
/// faults, whatever the address, so a waker of another kind costs only the loads.
#[inline]
fn prefetch_task(task: *const ()) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let start = task.cast::<i8>();
        for offset in (0..TASK_BYTES).step_by(64) {
            // SAFETY: SSE is part of every x86_64 target, and a prefetch touches no memory the
            // program can observe.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(start.wrapping_add(offset)) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = task;
}

impl Ring {
    fn build() -> io::Result<Ring> {
        // Cooperative task running, as the runtime's own ring (`runtime::worker`); kernels
        // before 5.19 refuse it.
        let ring = IoUring::builder()
            .setup_coop_taskrun()
            .setup_cqsize(CQ_ENTRIES)
            .build(SQ_ENTRIES)
            .or_else(|_| {
                IoUring::builder()
                    .setup_cqsize(CQ_ENTRIES)
                    .build(SQ_ENTRIES)
            })?;
        Ok(Ring {
            ring,
            table: Slots::default(),
        })
    }

    /// Push one submission and submit it now: an arm must be in place before the wait it is
    /// made for, and a cancel before its socket is closed (the poll holds the file open).
    fn submit_one(&mut self, entry: io_uring::squeue::Entry) -> io::Result<()> {
        // SAFETY: a poll and a cancel refer to no memory of ours.
        while unsafe { self.ring.submission().push(&entry) }.is_err() {
            self.ring.submit()?;
        }
        self.ring.submit()?;
        Ok(())
    }

    /// Arm `slot`'s poll on `fd` (again, after the kernel ended it); on failure the slot is
    /// freed and `fd` waits the old way until released.
    fn submit_poll(&mut self, fd: RawFd, slot: u32) -> bool {
        let ud = user_data(slot, self.table.slots[slot as usize].generation);
        let poll = opcode::PollAdd::new(types::Fd(fd), libc::POLLIN as u32)
            .multi(true)
            .build()
            .user_data(ud);
        if self.submit_one(poll).is_ok() {
            self.table.slots[slot as usize].arm = Arm::Armed;
            return true;
        }
        self.table.fail(fd, slot);
        false
    }

    /// Hand every completion to its slot.
    fn drain(&mut self) {
        loop {
            for cqe in &mut self.ring.completion() {
                self.table.handle(cqe);
            }
            // Completions the queue had no room for wait in the kernel until asked for
            // (`submit` asks for them when the overflow flag is up).
            if !self.ring.submission().cq_overflow() || self.ring.submit().is_err() {
                return;
            }
        }
    }

    /// One poll of `slot`'s wait: ready, failed (false), or pending with the waker kept.
    fn poll_slot(&mut self, fd: RawFd, slot: u32, cx: &Context<'_>) -> Poll<bool> {
        let s = &mut self.table.slots[slot as usize];
        if s.ready || s.hangup {
            s.ready = false;
            return Poll::Ready(true);
        }
        let arm = s.arm;
        match arm {
            Arm::Failed => {
                self.table.fail(fd, slot);
                return Poll::Ready(false);
            }
            Arm::Ended if !self.submit_poll(fd, slot) => return Poll::Ready(false),
            _ => {}
        }
        let s = &mut self.table.slots[slot as usize];
        match &s.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => s.waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

/// A new runtime starts on this thread: forget the ring of an earlier one, whose reaper that
/// runtime took with it (monoio leaves a task waiting on I/O unpolled when it ends). Closing the
/// ring ends its polls. A core calls this before its runtime starts (`runtime::worker`); tests
/// that run several runtimes on one thread call it for each.
pub fn start_of_runtime() {
    RING.with(|r| *r.borrow_mut() = None);
    UNAVAILABLE.with(|u| u.set(false));
}

/// Build this core's ring and start its reaper, once; false where it cannot be built.
fn ensure_ring() -> bool {
    if UNAVAILABLE.with(|u| u.get()) {
        return false;
    }
    if RING.with(|r| r.borrow().is_some()) {
        return true;
    }
    let built = Ring::build().and_then(|ring| {
        // The reaper's handle on the ring's descriptor: a duplicate, so that the two close
        // their own. monoio's `readable` is a `POLL_ADD` on any descriptor; a ring's is
        // readable while completions wait in it.
        // SAFETY: `dup` of a descriptor this ring owns.
        let dup = unsafe { libc::dup(ring.ring.as_raw_fd()) };
        if dup < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `dup` is a new descriptor that nothing else owns.
        let std_fd = unsafe { std::os::unix::net::UnixStream::from_raw_fd(dup) };
        let waiter = monoio::net::UnixStream::from_std(std_fd)?;
        Ok((ring, waiter))
    });
    match built {
        Ok((ring, waiter)) => {
            RING.with(|r| *r.borrow_mut() = Some(ring));
            monoio::spawn(reap(waiter));
            true
        }
        Err(_) => {
            UNAVAILABLE.with(|u| u.set(true));
            false
        }
    }
}

/// The core's reaper: each time the ring holds completions, hand them out.
async fn reap(waiter: monoio::net::UnixStream) {
    loop {
        RING.with(|r| {
            if let Some(r) = r.borrow_mut().as_mut() {
                r.drain();
            }
        });
        if waiter.readable(false).await.is_err() {
            // The ring's descriptor cannot be waited on: its streams would never wake.
            // Fail them all (each falls back to the runtime's wait) and use no ring here.
            UNAVAILABLE.with(|u| u.set(true));
            RING.with(|r| {
                if let Some(r) = r.borrow_mut().as_mut() {
                    for s in &mut r.table.slots {
                        s.arm = Arm::Failed;
                        if let Some(w) = s.waker.take() {
                            w.wake();
                        }
                    }
                }
            });
            return;
        }
    }
}

/// Arm `fd`'s standing poll unless it has one: true once it has; false on the epoll driver,
/// where this core has no ring, or once the poll failed (the caller then waits with
/// `nowait::readable`). [`ready`] arms once the stream earned it; the poll is the socket's until
/// [`release`], which its owner must call before the socket is closed or handed on.
pub fn armed(fd: RawFd) -> bool {
    if fd < 0 || monoio::utils::is_legacy() || !ensure_ring() {
        return false;
    }
    RING.with(|r| {
        let mut r = r.borrow_mut();
        let Some(ring) = r.as_mut() else {
            return false;
        };
        match ring.table.by_fd.get(fd as usize).copied() {
            Some(OFF) => false,
            Some(k) if k != 0 => true,
            _ => {
                let slot = ring.table.take();
                let ok = ring.submit_poll(fd, slot);
                if ok {
                    ring.table.mark(fd, slot + 1);
                }
                ok
            }
        }
    })
}

/// Wait until `fd` was readable since its last wait, through its standing poll (armed once the
/// stream has earned one, `patience`). False: there is none (yet), or it failed, and the
/// caller waits the old way. A stream's every wait after that is one lookup in a table.
pub async fn ready(fd: RawFd) -> bool {
    poll_fn(|cx| {
        let live = |cx: &Context<'_>| {
            RING.with(|r| {
                let mut r = r.borrow_mut();
                let ring = r.as_mut()?;
                let slot = ring.table.slot_of(fd)?;
                Some(ring.poll_slot(fd, slot, cx))
            })
        };
        match live(cx) {
            Some(p) => p,
            // A stream's first waits, until it has earned a poll, go the old way.
            None if patience::earned(fd) && armed(fd) => live(cx).unwrap_or(Poll::Ready(false)),
            None => Poll::Ready(false),
        }
    })
    .await
}

/// The caller's receive on `fd` filled its buffer: bytes may be left that no arrival will
/// announce, so the next wait returns at once (a receive that finds nothing waits again).
pub fn still_ready(fd: RawFd) {
    let _ = RING.try_with(|r| {
        if let Some(ring) = r.borrow_mut().as_mut()
            && let Some(slot) = ring.table.slot_of(fd)
        {
            ring.table.slots[slot as usize].ready = true;
        }
    });
}

/// `fd`'s stream is done with it: cancel its standing poll (at once: the poll holds the
/// socket open), and forget a failed one's mark.
pub fn release(fd: RawFd) {
    patience::forget(fd);
    // (At a thread's end the ring may be gone already: its polls went with it.)
    let _ = RING.try_with(|r| {
        let Ok(mut r) = r.try_borrow_mut() else {
            return;
        };
        let Some(ring) = r.as_mut() else {
            return;
        };
        let slot = ring.table.slot_of(fd);
        if let Some(k) = ring.table.by_fd.get_mut(fd as usize) {
            *k = 0;
        }
        let Some(slot) = slot else {
            return;
        };
        let s = &mut ring.table.slots[slot as usize];
        s.waker = None;
        if s.arm != Arm::Armed {
            ring.table.free_slot(slot);
            return;
        }
        s.arm = Arm::Cancelled;
        let ud = user_data(slot, s.generation);
        let cancel = opcode::AsyncCancel::new(ud).build().user_data(CANCEL);
        // Not cancelled (the ring refused the submission): the slot stays taken, its
        // generation ignoring what comes, rather than reused under a live poll.
        let _ = ring.submit_one(cancel);
    });
}

/// How many standing polls this core holds, armed or being cancelled (the core's tick reports
/// it as `ringside_standing_polls`).
pub fn held() -> usize {
    RING.with(|r| r.borrow().as_ref().map_or(0, |ring| ring.table.in_use()))
}

/// Until this core's reaper has seen every cancel's last completion (tests; bounded: two
/// seconds): how many polls are still held then.
#[cfg(test)]
pub(crate) async fn until_none_held() -> usize {
    for _ in 0..200 {
        if held() == 0 {
            return 0;
        }
        monoio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    held()
}

pub(crate) mod patience;
#[cfg(test)]
mod tests;
