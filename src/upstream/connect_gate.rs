//! New connections under way to one server, per core, and the connects waiting their turn.
//!
//! A burst of new connections (a restart, a reload, a wave of held streams over HTTP/1.1, one
//! connection each) would otherwise send every SYN at once. A server's listen queue (511 by
//! default for nginx and Node, at most `somaxconn`) drops what it cannot hold, and a dropped
//! SYN is sent again only 1 s, 3 s and 7 s later (TCP's retransmission); a server that takes
//! them all handshakes each the slower for the rest. Either way connects that a moment's
//! wait would have served run past the connect timeout, fail, and count against the
//! provider's breaker, which then refuses everything else for a while.
//!
//! So a core keeps a window of connects under way to each server (the TCP connect, an egress
//! tunnel and the TLS handshake), and the rest wait their turn, first come first served. The
//! window is `[upstream] connects_in_flight` (128) while the server keeps pace; a connect that
//! takes more than a quarter of the connect timeout, or times out, halves it (at most once a
//! quarter of the timeout, never below [`FLOOR`]), and each quick one widens it by one again,
//! back to the configured figure. On a 2-core host, 9,000 held streams through a loaded TLS
//! front all connected with 128 a core, where windows of 512 or 2,048, or one that grew with
//! each quick connect, timed connects out and opened the breaker (`benches/HISTORY.md`,
//! 2026-12-07): a server that slows under a burst serves it no faster for more at once. The
//! connect timeout starts with the turn; the wait itself is bounded by the attempt's deadline,
//! as every wait of an attempt is, and by a connect timeout once a connect to the server has
//! timed out since it began ([`NoTurn`]): behind a server gone, a request moves on as soon as
//! it would have without the queue, not after every connect ahead of it has timed out too.
//!
//! [`Gate`] is one server's plain data, tested on its own with times given; [`Gates`] keeps a
//! core's and hands out turns ([`Gates::turn`]) that give their place back when ended or
//! dropped, however the connect ended.

mod gate;

pub use gate::{Ended, FLOOR, Gate, Look};
use std::cell::RefCell;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// A core's gates, one per server (host and port) it connects to.
#[derive(Default)]
pub struct Gates {
    servers: RefCell<Vec<Server>>,
    next_key: std::cell::Cell<u64>,
}

struct Server {
    /// Stable while the entry lives (entries move in the list as others go).
    key: u64,
    host: Box<str>,
    port: u16,
    gate: Gate,
}

/// A turn to connect, given back when dropped: with what [`Turn::end`] said of the server's
/// pace, or saying nothing (the attempt gone mid-connect).
pub struct Turn<'a> {
    gates: &'a Gates,
    key: u64,
    /// The time within which a connect counts as quick.
    target: Duration,
    how: Ended,
}

impl Turn<'_> {
    /// The connect ended: made, `took` long (less any time it chose to wait, such as for a
    /// TLS ticket), or timed out, or failed in a way that is no news of the server's pace.
    pub fn end(mut self, how: Connect) {
        self.how = match how {
            Connect::Made(took) if took <= self.target => Ended::Quick,
            Connect::Made(_) => Ended::Slow,
            Connect::TimedOut => Ended::TimedOut,
            Connect::Failed => Ended::Unknown,
        };
    }
}

/// A connect's end, as [`Turn::end`] hears it.
#[derive(Clone, Copy, Debug)]
pub enum Connect {
    Made(Duration),
    TimedOut,
    /// Refused, a TLS failure, this host's own shortage.
    Failed,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        let now = crate::clock::instant();
        self.gates
            .with(self.key, |g| g.done(self.how, now, self.target));
    }
}

/// No turn came within a connect timeout, and connects to the server were timing out
/// meanwhile: the wait ends, as the connect would have, so that the request may go elsewhere
/// rather than queue behind a server that may be gone.
#[derive(Debug)]
pub struct NoTurn;

impl Gates {
    /// A turn to connect to `host:port` within this core's window for it, at most `most` (0:
    /// no limit), and whether it had to wait for it; `timeout`: the connect timeout, a quarter
    /// of which makes a connect quick. A wait ends without a turn ([`NoTurn`]) once it has
    /// lasted `timeout` and a connect to the server has timed out since it began.
    pub async fn turn(
        &self,
        host: &str,
        port: u16,
        most: u32,
        timeout: Duration,
    ) -> Result<(Turn<'_>, bool), NoTurn> {
        let patience_ends = crate::clock::instant() + timeout;
        let mut wait = Wait {
            gates: self,
            stage: Stage::New,
            patience_ends,
        };
        // Wakes a wait when its patience ends: a timeout seen before then ends it there. Only
        // a connect that waits sets it on the core's wheel.
        let mut patience = std::pin::pin!(crate::timer::sleep_until(patience_ends));
        let mut patience_over = false;
        let key = std::future::poll_fn(|cx| {
            loop {
                let now = crate::clock::instant();
                let now = if patience_over {
                    now.max(patience_ends)
                } else {
                    now
                };
                match wait.poll_turn(host, port, most, now, cx) {
                    Poll::Pending if !patience_over => {
                        if patience.as_mut().poll(cx).is_pending() {
                            return Poll::Pending;
                        }
                        patience_over = true;
                    }
                    looked => return looked,
                }
            }
        })
        .await?;
        let waited = matches!(wait.stage, Stage::Queued(..));
        // The turn is the caller's now: the wait's own drop gives nothing back.
        wait.stage = Stage::Taken;
        let turn = Turn {
            gates: self,
            key,
            target: timeout / 4,
            how: Ended::Unknown,
        };
        Ok((turn, waited))
    }

    /// Arrive at `host:port`'s gate, its entry made if new (idle entries of other servers go
    /// first): its key, and the waiter's id if it must wait.
    fn arrive(
        &self,
        (host, port): (&str, u16),
        most: u32,
        waker: &Waker,
        patience_ends: Instant,
    ) -> (u64, Option<u64>) {
        let mut servers = self.servers.borrow_mut();
        if let Some(s) = servers
            .iter_mut()
            .find(|s| s.port == port && &*s.host == host)
        {
            return (s.key, s.gate.arrive(most, waker, patience_ends));
        }
        servers.retain(|s| !s.gate.idle());
        let key = self.next_key.get();
        self.next_key.set(key + 1);
        let mut gate = Gate::default();
        let id = gate.arrive(most, waker, patience_ends);
        servers.push(Server {
            key,
            host: host.into(),
            port,
            gate,
        });
        (key, id)
    }

    /// `f` on the gate under `key`; `None` if it is gone, which only an idle gate is (no turn
    /// or waiter of its own keeps a key it could ask with).
    fn with<R>(&self, key: u64, f: impl FnOnce(&mut Gate) -> R) -> Option<R> {
        let mut servers = self.servers.borrow_mut();
        servers
            .iter_mut()
            .find(|s| s.key == key)
            .map(|s| f(&mut s.gate))
    }

    /// Connects waiting for a turn and under way on this core, over all servers.
    #[cfg(test)]
    pub fn counts(&self) -> (usize, u32) {
        self.servers
            .borrow()
            .iter()
            .map(|s| s.gate.counts())
            .fold((0, 0), |(w, u), (a, b, _)| (w + a, u + b))
    }
}

/// Waiting for a turn. Dropped while still queued (its attempt ended), it leaves the queue,
/// passing on a turn it was given meanwhile.
struct Wait<'a> {
    gates: &'a Gates,
    stage: Stage,
    patience_ends: Instant,
}

enum Stage {
    /// Not at the gate yet.
    New,
    /// Queued: the gate's key and the waiter's id.
    Queued(u64, u64),
    /// The turn is taken (or was never waited for, or given up): nothing to give back here.
    Taken,
}

impl Wait<'_> {
    /// `Ready(Ok(key))` once the turn is this connect's, `Ready(Err)` when it gives up.
    fn poll_turn(
        &mut self,
        host: &str,
        port: u16,
        most: u32,
        now: Instant,
        cx: &mut Context<'_>,
    ) -> Poll<Result<u64, NoTurn>> {
        match self.stage {
            Stage::New => {
                let at = (host, port);
                match self.gates.arrive(at, most, cx.waker(), self.patience_ends) {
                    (key, None) => Poll::Ready(Ok(key)),
                    (key, Some(id)) => {
                        self.stage = Stage::Queued(key, id);
                        Poll::Pending
                    }
                }
            }
            Stage::Queued(key, id) => match self.gates.with(key, |g| g.poll(id, cx.waker(), now)) {
                Some(Look::Wait) => Poll::Pending,
                Some(Look::GiveUp) => {
                    // Off the queue already: nothing to give back when dropped.
                    self.stage = Stage::Taken;
                    Poll::Ready(Err(NoTurn))
                }
                // A queued waiter keeps its gate from going: `None` cannot happen, and going
                // without a turn is the safe answer if it did.
                Some(Look::Turn) | None => Poll::Ready(Ok(key)),
            },
            Stage::Taken => Poll::Pending,
        }
    }
}

impl Drop for Wait<'_> {
    fn drop(&mut self) {
        if let Stage::Queued(key, id) = self.stage {
            self.gates.with(key, |g| g.leave(id));
        }
    }
}

#[cfg(test)]
mod tests;
