//! Exclusive session leases (hard fence): a managed client session owns one connection across
//! requests. The authoritative book lives in the store writer's memory (the single writer is the
//! serialization point, so two cores racing for the last connection get exactly one winner);
//! every change is committed before it is acknowledged. Cores read a lease inline from LMDB to
//! fence a request, and a per-connection atomic (`LeaseView`) to keep other traffic off a
//! leased connection.
//!
//! The owner value (`vlo_` + 43 base64url characters) is never kept: rows are keyed by its
//! SHA-256. Generations are monotonic per owner; a transition to another connection (health,
//! cooldown, quota) keeps the generation, so the client never notices.

use serde::{Deserialize, Serialize};

pub use super::lease_book::Book;
pub use super::lease_view::LeaseView;

pub const DEFAULT_TTL_MS: u64 = 120_000;
pub const MIN_TTL_MS: u64 = 1_000;
pub const MAX_TTL_MS: u64 = 1_800_000;
/// Ended rows are kept this long (so an owner's generation keeps climbing), then pruned.
pub const ENDED_RETENTION_MS: u64 = 24 * 3600 * 1000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum State {
    Active,
    Released,
    Expired,
    Invalidated,
}

/// One owner's lease (its latest row).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    /// SHA-256 hex of the owner value.
    pub owner: String,
    /// The client key id that holds it.
    pub client: String,
    /// `provider/connection`.
    pub connection: String,
    pub generation: u64,
    pub state: State,
    pub acquired_at: u64,
    pub renewed_at: u64,
    pub expires_at: u64,
    #[serde(default)]
    pub ended_at: Option<u64>,
    #[serde(default)]
    pub end_reason: Option<String>,
}

impl Lease {
    pub fn live(&self, now: u64) -> bool {
        self.state == State::Active && self.expires_at > now
    }

    /// The state as seen at `now` (an active row past its expiry reads as expired).
    pub fn state_at(&self, now: u64) -> State {
        if self.state == State::Active && self.expires_at <= now {
            State::Expired
        } else {
            self.state
        }
    }

    pub fn store_key(owner: &str) -> String {
        format!("lease/{owner}")
    }
}

#[derive(Clone, Debug)]
pub enum Op {
    /// Take the first free connection of `candidates` (in preference order).
    Acquire {
        owner: String,
        client: String,
        candidates: Vec<String>,
        ttl_ms: u64,
    },
    Renew {
        owner: String,
        generation: u64,
        client: String,
        ttl_ms: u64,
    },
    Release {
        owner: String,
        generation: u64,
        client: String,
        reason: String,
    },
    /// Move a live lease to the first free connection of `candidates`, same generation.
    Transition {
        owner: String,
        generation: u64,
        client: String,
        candidates: Vec<String>,
        reason: String,
    },
    /// Operator revocation of one owner's lease.
    Revoke { owner: String, reason: String },
    /// Every lease of a client key (the key was revoked).
    RevokeClient { client: String, reason: String },
    /// Every lease on a connection (`provider/connection`): a reload removed it or changed
    /// its key.
    RevokeConnection { connection: String, reason: String },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Acquired(Lease),
    Reused(Lease),
    Renewed(Lease),
    Released(Lease),
    Transitioned(Lease),
    Revoked(usize),
    /// The owner holds a live lease through another client key.
    OwnerAlreadyActive,
    /// Every candidate is held by another owner; `retry_at` is the earliest of their expiries.
    Busy {
        retry_at: Option<u64>,
    },
    /// No live lease with that generation and key.
    Stale,
    /// The store could not commit: nothing changed.
    Unavailable,
}

/// What a request's lease headers are worth at dispatch.
#[derive(Debug, PartialEq, Eq)]
pub enum Fence {
    /// Serve on this connection (`provider/connection`).
    Valid(String),
    /// No live lease for this owner.
    Required,
    /// Another generation, or another client key.
    Stale,
}

/// Check a request's owner, generation and client against the stored row.
pub fn fence(row: Option<&Lease>, generation: u64, client: &str, now: u64) -> Fence {
    match row {
        Some(l) if l.live(now) => {
            if l.generation != generation || l.client != client {
                Fence::Stale
            } else {
                Fence::Valid(l.connection.clone())
            }
        }
        _ => Fence::Required,
    }
}

#[cfg(test)]
#[path = "leases_tests.rs"]
mod tests;
