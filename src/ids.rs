//! Index types for the request path's tables: a connection's slot and a target's place in its
//! route entry. Each is its own type so that one cannot be passed where the other is meant (both
//! were `usize`, and the per-connection tables took any number), and each is as narrow as its
//! range, which keeps a held stream's candidate in 8 bytes instead of 16.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A connection's slot: its place in every per-connection table (cooldowns, lockouts, load,
/// flow, walls, tokens, leases, metrics). Slots are numbered once per process and kept across
/// reloads for the same `provider/connection` (`state::slots`), so a table indexed by one stays
/// right while requests of an older generation finish.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct ConnId(u32);

impl ConnId {
    /// No connection: what a lease bound before one was chosen holds.
    pub const NONE: ConnId = ConnId(u32::MAX);

    /// The slot numbered `slot`. Slots come from the config's own count of connections, far
    /// below 2^32; one beyond that range reads as `NONE`, which no table holds.
    pub const fn new(slot: usize) -> ConnId {
        if slot >= u32::MAX as usize {
            ConnId::NONE
        } else {
            ConnId(slot as u32)
        }
    }

    /// The slot as an index into a per-connection `Vec`.
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for ConnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A target's place in its route entry's list (`route::Entry::targets`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TargetIdx(u32);

impl TargetIdx {
    /// The target at `place`; one beyond 2^32 (no config has as many) reads as the last
    /// place, which no entry holds.
    pub const fn new(place: usize) -> TargetIdx {
        if place > u32::MAX as usize {
            TargetIdx(u32::MAX)
        } else {
            TargetIdx(place as u32)
        }
    }

    /// The place as an index into the entry's targets.
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

/// Per-connection tables are `Vec`s or slices in slot order, and a route's targets a `Vec`:
/// `table[conn]`, as with any index (the caller knows the slot is in range, as it would for a
/// `usize`; `get(conn.index())` where it may not be).
macro_rules! index_by {
    ($id:ty => $($table:ty),+) => {$(
        impl<T> std::ops::Index<$id> for $table {
            type Output = T;

            fn index(&self, at: $id) -> &T {
                &self[at.index()]
            }
        }

        impl<T> std::ops::IndexMut<$id> for $table {
            fn index_mut(&mut self, at: $id) -> &mut T {
                &mut self[at.index()]
            }
        }
    )+};
}

index_by!(ConnId => [T], Vec<T>);
index_by!(TargetIdx => [T], Vec<T>);

/// The names of one connection, kept for the life of the process (decision records and log
/// lines borrow them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConnNames {
    pub provider: &'static str,
    pub connection: &'static str,
    /// `provider/connection`.
    pub label: &'static str,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indices_round_trip_and_out_of_range_reads_as_none() {
        assert_eq!(ConnId::new(7).index(), 7);
        assert_eq!(ConnId::new(usize::MAX), ConnId::NONE);
        assert_eq!(TargetIdx::new(3).index(), 3);
        assert_eq!(TargetIdx::new(1 << 20).index(), 1 << 20);
        assert_eq!(
            serde_json::to_string(&ConnId::new(4)).ok().as_deref(),
            Some("4")
        );
    }
}
