//! Leases kept elsewhere: in fleet mode the lease book lives in Redis, shared by every
//! instance, and the fleet's lease thread answers what the store writer answers alone
//! otherwise. The store routes lease operations, fence reads and listings there once the
//! fleet has said where (`Store::lease_elsewhere`). Session pins and managed client keys stay
//! in each instance's store, and every write of them is also handed to the fleet, which
//! replays it on the other instances (`Store::replicate_to`).

use super::leases::{Lease, Op, Outcome};
use super::{Reply, Store};
use std::time::Duration;

/// The lease book could not be read or written (Redis away): the asker fails closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BookUnavailable;

/// What the lease thread is asked.
pub enum Remote {
    /// An operation, answered once it is applied.
    Lease(Op, Reply),
    /// One owner's row, to fence a request (`Err`: the book could not be read).
    Row(
        String,
        futures_channel::oneshot::Sender<Result<Option<Lease>, BookUnavailable>>,
    ),
    /// Every row (the admin's listing).
    Rows(crossbeam_channel::Sender<Result<Vec<Lease>, BookUnavailable>>),
    /// An `Idempotency-Key` operation on the fleet's book (Redis away: the instance's own).
    Idempotency(
        super::idempotency::Op,
        Option<futures_channel::oneshot::Sender<super::idempotency::Outcome>>,
    ),
}

/// The store entries every instance of a fleet shares: session pins and managed client keys.
pub const SHARED: [&str; 3] = ["pin/", "clientkey/", "client/"];

/// A write of a shared entry (`None`: deleted).
#[derive(Debug)]
pub struct Replicated {
    pub key: String,
    pub value: Option<serde_json::Value>,
}

/// How long a fence read may take before the request is refused (fail closed).
const FENCE_WAIT: Duration = Duration::from_secs(2);

impl Reply {
    /// Answer the asker, whoever it is.
    pub fn send(self, outcome: Outcome) {
        match self {
            Reply::Task(r) => {
                let _ = r.send(outcome);
            }
            Reply::Thread(r) => {
                let _ = r.send(outcome);
            }
            Reply::None => {}
        }
    }
}

impl Store {
    /// From now on, lease operations, fence reads and listings go to `to` (fleet mode).
    pub fn lease_elsewhere(&self, to: crossbeam_channel::Sender<Remote>) {
        let _ = self.remote.set(to);
    }

    /// From now on, writes of shared entries are also handed to `to` (fleet mode).
    pub fn replicate_to(&self, to: crossbeam_channel::Sender<Replicated>) {
        let _ = self.replica.set(to);
    }

    /// Hand a write of a shared entry to the fleet (nothing outside fleet mode).
    pub(super) fn replicate(&self, key: &str, value: Option<&serde_json::Value>) {
        // An expired pin is purged by every instance itself (and expires in Redis).
        if let Some(to) = self.replica.get()
            && SHARED.iter().any(|p| key.starts_with(p))
            && (value.is_some() || !key.starts_with("pin/"))
        {
            let _ = to.send(Replicated {
                key: key.to_string(),
                value: value.cloned(),
            });
        }
    }

    /// Whether the lease book is elsewhere (fleet mode).
    pub fn leases_elsewhere(&self) -> bool {
        self.remote.get().is_some()
    }

    /// Send a lease operation where the book is; false when that is gone.
    pub(super) fn route(&self, op: Op, reply: Reply) -> Result<(), (Op, Reply)> {
        match self.remote.get() {
            Some(to) => to.send(Remote::Lease(op, reply)).map_err(|e| match e.0 {
                Remote::Lease(op, reply) => (op, reply),
                _ => unreachable_pair(),
            }),
            None => Err((op, reply)),
        }
    }

    /// The row an inference request is fenced against: read where the book is (in fleet mode a
    /// round trip to Redis). `Err`: it could not be read, and the request is refused.
    pub async fn fence_row(&self, owner: &str) -> Result<Option<Lease>, BookUnavailable> {
        let Some(to) = self.remote.get() else {
            return Ok(self.lease_row(owner));
        };
        let (tx, rx) = futures_channel::oneshot::channel();
        if to.send(Remote::Row(owner.to_string(), tx)).is_err() {
            return Err(BookUnavailable);
        }
        match crate::timer::timeout(FENCE_WAIT, rx).await {
            Ok(Ok(row)) => row,
            _ => Err(BookUnavailable),
        }
    }

    /// Every lease row, wherever the book is (admin listing; a plain thread may wait).
    pub fn lease_rows(&self) -> Result<Vec<Lease>, BookUnavailable> {
        let Some(to) = self.remote.get() else {
            return Ok(self
                .scan("lease/")
                .into_iter()
                .filter_map(|(_, v)| serde_json::from_value(v).ok())
                .collect());
        };
        let (tx, rx) = crossbeam_channel::bounded(1);
        to.send(Remote::Rows(tx)).map_err(|_| BookUnavailable)?;
        rx.recv_timeout(FENCE_WAIT).map_err(|_| BookUnavailable)?
    }
}

/// A failed send gives back what was sent; only a lease is ever sent by `route`.
fn unreachable_pair() -> (Op, Reply) {
    (
        Op::Revoke {
            owner: String::new(),
            reason: String::new(),
        },
        Reply::None,
    )
}
