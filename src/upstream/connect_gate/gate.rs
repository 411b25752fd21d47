//! One server's connects on one core (`super`): the window, the connects under way and the
//! waiters, as plain data with times given.

use std::collections::VecDeque;
use std::task::Waker;
use std::time::{Duration, Instant};

/// The smallest window: a server that slows for reasons of its own is still tried.
pub const FLOOR: u32 = 4;

/// How a connect under way ended, as news of the server's pace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// Made within the target time (a quarter of the connect timeout): the window may grow.
    Quick,
    /// Made later: the server is not keeping up; the window halves.
    Slow,
    /// Timed out: the window halves, and waiters that have waited a connect timeout give up
    /// (the server may be gone; their requests may go elsewhere).
    TimedOut,
    /// Says nothing of the server's pace (refused, a TLS failure, this host's own shortage,
    /// the attempt gone): the window stays.
    Unknown,
}

/// One server's connects: how many are under way, the window, and those waiting a turn.
#[derive(Debug, Default)]
pub struct Gate {
    /// Connects under way, counting waiters given a turn that have not looked yet.
    under_way: u32,
    /// How many may be under way now (`None` until the first arrival sets it to `most`).
    window: Option<u32>,
    /// The window while the server keeps pace (the last arrival's setting); 0: no limit.
    most: u32,
    /// When the window last halved: one slow spell halves it once, not once per connect.
    last_cut: Option<Instant>,
    /// Connects to this server that timed out, ever.
    timeouts: u64,
    waiters: VecDeque<Waiter>,
    next_id: u64,
}

#[derive(Debug)]
struct Waiter {
    id: u64,
    waker: Waker,
    /// Given a turn, not yet taken.
    turn: bool,
    /// When it has waited a connect timeout: from then on a connect timing out (one since it
    /// came, `timeouts_seen`) ends its wait.
    patience_ends: Instant,
    timeouts_seen: u64,
}

/// What a waiter finds when it looks again.
#[derive(Debug, PartialEq, Eq)]
pub enum Look {
    /// Its turn came: it is the waiter's now.
    Turn,
    /// It waited a connect timeout and connects to the server have been timing out: it gives
    /// up (and has left the queue).
    GiveUp,
    Wait,
}

impl Gate {
    /// A connect arrives: `None` to go now (a turn taken), or its id to wait with, woken by
    /// `waker` when its turn comes (or when it should give up, past `patience_ends`). `most`
    /// 0: no limit. One waiting keeps later ones waiting, even where a turn is free, so none
    /// is passed by a later arrival.
    pub fn arrive(&mut self, most: u32, waker: &Waker, patience_ends: Instant) -> Option<u64> {
        self.most = most;
        if most == 0 || (self.under_way < self.limit() && self.waiters.is_empty()) {
            self.under_way += 1;
            return None;
        }
        let id = self.next_id;
        self.next_id += 1;
        self.waiters.push_back(Waiter {
            id,
            waker: waker.clone(),
            turn: false,
            patience_ends,
            timeouts_seen: self.timeouts,
        });
        Some(id)
    }

    /// Waiter `id` looks again at `now`: its turn, giving up, or waiting on, to be woken by
    /// `waker`.
    pub fn poll(&mut self, id: u64, waker: &Waker, now: Instant) -> Look {
        let Some(at) = self.waiters.iter().position(|w| w.id == id) else {
            // Not queued: cannot happen for an id this gate gave (a waiter leaves only by
            // taking its turn, giving up or `leave`, after which it never looks again).
            return Look::Turn;
        };
        let w = &mut self.waiters[at];
        if w.turn {
            self.waiters.remove(at);
            return Look::Turn;
        }
        if now >= w.patience_ends && self.timeouts > w.timeouts_seen {
            self.waiters.remove(at);
            return Look::GiveUp;
        }
        if !w.waker.will_wake(waker) {
            w.waker = waker.clone();
        }
        Look::Wait
    }

    /// Waiter `id` is gone (its attempt ended while it waited): a turn it was given goes on to
    /// the next waiter.
    pub fn leave(&mut self, id: u64) {
        if let Some(at) = self.waiters.iter().position(|w| w.id == id)
            && let Some(gone) = self.waiters.remove(at)
            && gone.turn
        {
            self.under_way = self.under_way.saturating_sub(1);
            self.give_turns();
        }
    }

    /// A connect under way ended, `how` at `now`, the target time `target`: the window
    /// learns from it, and the freed turn (or more, the window grown) goes to the first
    /// waiters without one.
    pub fn done(&mut self, how: Ended, now: Instant, target: Duration) {
        self.under_way = self.under_way.saturating_sub(1);
        match how {
            Ended::Quick => self.window = Some(self.limit().saturating_add(1)),
            Ended::Slow | Ended::TimedOut
                if self
                    .last_cut
                    .is_none_or(|t| now.duration_since(t) >= target) =>
            {
                self.window = Some((self.limit() / 2).max(FLOOR));
                self.last_cut = Some(now);
            }
            Ended::Slow | Ended::TimedOut | Ended::Unknown => {}
        }
        if how == Ended::TimedOut {
            self.timeouts += 1;
            // Those that have waited a connect timeout look again, and give up. They came in
            // order, each with the same patience: the first that has not waited so long ends
            // the look.
            for w in self.waiters.iter().take_while(|w| w.patience_ends <= now) {
                if !w.turn {
                    w.waker.wake_by_ref();
                }
            }
        }
        self.give_turns();
    }

    fn give_turns(&mut self) {
        let limit = self.limit();
        for next in self.waiters.iter_mut().filter(|w| !w.turn) {
            if self.under_way >= limit {
                return;
            }
            next.turn = true;
            next.waker.wake_by_ref();
            self.under_way += 1;
        }
    }

    /// The window within its bounds (a reload may have lowered the configured figure since);
    /// no bound at all where the figure is 0.
    fn limit(&self) -> u32 {
        match self.most {
            0 => u32::MAX,
            most => self.window.unwrap_or(most).min(most),
        }
    }

    /// Nothing under way and no one waiting: the entry may go.
    pub fn idle(&self) -> bool {
        self.under_way == 0 && self.waiters.is_empty()
    }

    /// Connects waiting for a turn, under way, and the window.
    #[cfg(test)]
    pub fn counts(&self) -> (usize, u32, u32) {
        let given = self.waiters.iter().filter(|w| w.turn).count();
        (self.waiters.len() - given, self.under_way, self.limit())
    }
}
