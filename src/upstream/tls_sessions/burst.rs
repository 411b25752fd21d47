//! A burst of new connections to one server when its kept tickets have run out: whether a
//! connection waits for a ticket that a handshake under way is about to bring, or handshakes
//! in full now. Plain data, fed by the store (`super`), tested on its own.
//!
//! TLS 1.3 tickets are used once each (RFC 8446 C.4, rustls's rule), and a server sends a
//! few per handshake (two by default in OpenSSL, BoringSSL and rustls; as many as asked, up
//! to its cap, where it honours RFC 9149's ticket request). A cold burst of a thousand
//! connects (a restart, a reload, a spike) outruns them: each connect that finds none kept
//! handshakes in full, and its own tickets come too late for the burst. Here a connect that
//! finds none kept waits when the handshakes under way are expected to bring tickets for more
//! connections than are already waiting for them (counting those that the waiters ahead will
//! bring when they resume, `ROUNDS` deep); otherwise it handshakes in full (and its tickets,
//! in turn, are waited for). A wait ends when a ticket comes, or when the
//! handshakes it counted on are over without bringing enough (`Burst::settle`, which also
//! learns what the server sends): a server that sends fewer tickets than expected, or none,
//! costs a burst one wait once, then is known. The connect's own deadline bounds a wait
//! (`Connector::wait_for_ticket`): a time learned from the handshakes themselves, tried, cut
//! waits short on a saturated core, where a deep queue legitimately waits longer.

use std::collections::VecDeque;
use std::task::{Poll, Waker};

/// Tickets expected from a server not yet seen to send any: two after a full handshake (the
/// default of OpenSSL, BoringSSL and rustls servers), one after a resumption (OpenSSL's). A
/// server that honours the ticket request (`super::ASK`) is seen to send sixteen after its
/// first answer, and serves a burst with one full handshake in 65 from then on; guessing
/// sixteen from the start would keep a burst waiting for tickets most servers never send,
/// until their first answer (seconds, for a long completion).
const GUESS_FULL: u32 = 2;
const GUESS_RESUMED: u32 = 1;

/// How many handshakes deep a burst's connects queue for tickets: a server that sends one
/// ticket after a resumption (OpenSSL) keeps as many in circulation as its full handshakes
/// brought, so each of them serves a queue of waiters one resumption after another. Four
/// deep, a burst from such a server resumes eight connects for each full handshake; the
/// deepest waiter waits about four handshakes (and their first answers).
const ROUNDS: usize = 4;

/// What a connect that finds no ticket kept does.
#[derive(Debug, PartialEq, Eq)]
pub enum Arrival {
    /// Handshake now: resuming (a ticket is kept) or in full (none is coming for it).
    Go,
    /// Wait for one of the tickets on their way (this waiter's id).
    Wait(u64),
}

/// One server's burst state: the tickets on their way, the connects waiting for them, and
/// what the server has been seen to do.
#[derive(Debug, Default)]
pub struct Burst {
    /// Tickets the handshakes under way are expected to bring and have not brought yet.
    coming: u32,
    /// Connects waiting for one, first come first served.
    waiters: VecDeque<(u64, Waker)>,
    next_id: u64,
    /// Tickets the server's last full and last resumed handshakes brought.
    per_full: Option<u32>,
    per_resumed: Option<u32>,
}

impl Burst {
    /// A connect before its handshake, `kept` tickets kept: go if one is kept that no earlier
    /// waiter is owed, or if the tickets kept and coming are all spoken for by earlier waiters;
    /// else wait, woken by `waker`. First come, first served: a connect that took a ticket
    /// woken for a waiter would leave that waiter to look again and find none.
    pub fn arrive(&mut self, kept: usize, waker: &Waker) -> Arrival {
        let queued = self.waiters.len();
        if kept > queued || self.room(kept) <= queued {
            return Arrival::Go;
        }
        let id = self.next_id;
        self.next_id += 1;
        self.waiters.push_back((id, waker.clone()));
        Arrival::Wait(id)
    }

    /// A waiter looks again, `kept` tickets kept: `Ready(true)` to handshake with one (the
    /// waiters ahead of it are owed one each first), `Ready(false)` to handshake in full (none
    /// is coming for it any more), `Pending` to wait on (woken by `waker`).
    pub fn poll_wait(&mut self, id: u64, kept: usize, waker: &Waker) -> Poll<bool> {
        let Some(at) = self.waiters.iter().position(|(w, _)| *w == id) else {
            return Poll::Ready(kept > 0);
        };
        if kept > at || self.room(kept) <= at {
            self.waiters.remove(at);
            return Poll::Ready(kept > at);
        }
        let kept = &mut self.waiters[at].1;
        if !kept.will_wake(waker) {
            *kept = waker.clone();
        }
        Poll::Pending
    }

    /// A waiter gives up (its wait timed out, or its request went away), `kept` tickets kept:
    /// one it was owed passes to the first waiter behind those owed one, which is woken.
    pub fn leave(&mut self, id: u64, kept: usize, wake: &mut Vec<Waker>) {
        if let Some(at) = self.waiters.iter().position(|(w, _)| *w == id) {
            self.waiters.remove(at);
            if at < kept {
                self.ticket_kept(kept, wake);
            }
        }
    }

    /// A ticket was kept, making `kept`: the waiter it is for is woken to take it (the
    /// first waiters take the tickets kept before it; a server sends several at once).
    pub fn ticket_kept(&self, kept: usize, wake: &mut Vec<Waker>) {
        if let Some((_, w)) = kept.checked_sub(1).and_then(|i| self.waiters.get(i)) {
            wake.push(w.clone());
        }
    }

    /// A handshake starts, `resuming` or in full: the tickets it is expected to bring.
    pub fn start(&mut self, resuming: bool) -> u32 {
        let n = self.expected(resuming);
        self.coming += n;
        n
    }

    fn expected(&self, resumed: bool) -> u32 {
        if resumed {
            self.per_resumed.unwrap_or(GUESS_RESUMED)
        } else {
            self.per_full.unwrap_or(GUESS_FULL)
        }
    }

    /// A handshake that was expected to bring `owed` more tickets finished, `resumed` or
    /// not (a server may turn a ticket down), `kept` tickets kept: what it is expected to
    /// bring now.
    pub fn handshake_done(
        &mut self,
        owed: u32,
        resumed: bool,
        kept: usize,
        wake: &mut Vec<Waker>,
    ) -> u32 {
        let now = self.expected(resumed);
        self.coming = self.coming.saturating_sub(owed) + now;
        if now < owed {
            self.wake_excess(kept, wake);
        }
        now
    }

    /// A TLS 1.2 session was kept: every waiter may resume with it (it is reused, not used
    /// up), and is woken to.
    pub fn session_kept(&self, wake: &mut Vec<Waker>) {
        wake.extend(self.waiters.iter().map(|(_, w)| w.clone()));
    }

    /// `n` of a handshake's expected tickets came (each kept, `ticket_kept`).
    pub fn arrived(&mut self, n: u32) {
        self.coming = self.coming.saturating_sub(n);
    }

    /// A connection will bring no more tickets (its first data came after them, or it
    /// closed): the `owed` it did not bring are no longer coming, and the waiters they were
    /// counted for go. `brought`: every ticket it brought, when it got as far as its data,
    /// which is what the server sends after a handshake like it. `kept`: tickets kept.
    pub fn settle(
        &mut self,
        owed: u32,
        brought: Option<(bool, u32)>,
        kept: usize,
        wake: &mut Vec<Waker>,
    ) {
        self.coming = self.coming.saturating_sub(owed);
        match brought {
            Some((true, n)) => self.per_resumed = Some(n),
            Some((false, n)) => self.per_full = Some(n),
            None => {}
        }
        self.wake_excess(kept, wake);
    }

    /// How many waiters the tickets coming and the `kept` ones (not yet taken by the waiters
    /// woken for them) serve within `ROUNDS` handshakes: each waiter that resumes brings at
    /// least one ticket more where the server sends any after a resumption, so they serve
    /// waiters `ROUNDS` deep; otherwise once.
    fn room(&self, kept: usize) -> usize {
        let tickets = (self.coming as usize).saturating_add(kept);
        if self.expected(true) > 0 {
            tickets.saturating_mul(ROUNDS)
        } else {
            tickets
        }
    }

    /// Wake the waiters beyond the room the tickets coming and kept make: they go in full.
    fn wake_excess(&self, kept: usize, wake: &mut Vec<Waker>) {
        let room = self.room(kept);
        wake.extend(self.waiters.iter().skip(room).map(|(_, w)| w.clone()));
    }

    /// Tickets coming and connects waiting (for tests and the debug view).
    pub fn counts(&self) -> (u32, usize) {
        (self.coming, self.waiters.len())
    }
}

#[cfg(test)]
mod tests;
