//! How many client connections the data port holds: all of them together (`[server]
//! max_connections`, by default what the open-file limit allows), and, when client keys are in
//! use, how many from one address have not yet presented a valid key
//! (`max_unauthenticated_per_address`), so that idle or keyless connections from one host cannot
//! take every descriptor. Counters are atomics shared by the cores; per-address counts live in a
//! fixed table of hashed slots (two addresses sharing a slot share a cap: conservative, bounded
//! memory, no lock).

use std::cell::Cell;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering::Relaxed};

/// Slots of the per-address table.
const SLOTS: usize = 4096;

/// Connections refused at accept, since start (`ringside_connections_refused_total`).
pub static REFUSED: AtomicU64 = AtomicU64::new(0);

pub struct ConnCaps {
    open: AtomicUsize,
    max: usize,
    unauthenticated: Box<[AtomicU32]>,
    per_address: u32,
}

/// Why a connection was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// `max_connections` are open.
    Full,
    /// Its address holds `max_unauthenticated_per_address` keyless connections.
    AddressFull,
}

impl ConnCaps {
    pub fn new(max: usize, per_address: usize) -> ConnCaps {
        ConnCaps {
            open: AtomicUsize::new(0),
            max: max.max(1),
            unauthenticated: (0..SLOTS).map(|_| AtomicU32::new(0)).collect(),
            per_address: u32::try_from(per_address).unwrap_or(u32::MAX).max(1),
        }
    }

    /// Admit a new connection from `peer`. `keyed`: client keys are in use, so the connection
    /// counts as unauthenticated until its first request presents a valid key.
    pub fn admit(&self, peer: Option<IpAddr>, keyed: bool) -> Result<Ticket<'_>, Refused> {
        if self.open.fetch_add(1, Relaxed) >= self.max {
            self.open.fetch_sub(1, Relaxed);
            REFUSED.fetch_add(1, Relaxed);
            return Err(Refused::Full);
        }
        let slot = match peer {
            Some(ip) if keyed => {
                let i = slot_of(ip);
                if self.unauthenticated[i].fetch_add(1, Relaxed) >= self.per_address {
                    self.unauthenticated[i].fetch_sub(1, Relaxed);
                    self.open.fetch_sub(1, Relaxed);
                    REFUSED.fetch_add(1, Relaxed);
                    return Err(Refused::AddressFull);
                }
                Some(i)
            }
            _ => None,
        };
        Ok(Ticket {
            caps: self,
            slot: Cell::new(slot),
            peer,
        })
    }

    pub fn open(&self) -> usize {
        self.open.load(Relaxed)
    }
}

fn slot_of(ip: IpAddr) -> usize {
    use std::hash::{Hash, Hasher};
    let mut h = rustc_hash::FxHasher::default();
    ip.hash(&mut h);
    (h.finish() as usize) % SLOTS
}

/// One admitted connection; gives its place back when dropped.
pub struct Ticket<'a> {
    caps: &'a ConnCaps,
    /// The per-address slot it holds while unauthenticated.
    slot: Cell<Option<usize>>,
    /// The client's address (for the access log), when the socket gave one.
    pub peer: Option<IpAddr>,
}

impl Ticket<'_> {
    /// The connection presented a valid key: it no longer counts against its address.
    pub fn authenticated(&self) {
        if let Some(i) = self.slot.take() {
            self.caps.unauthenticated[i].fetch_sub(1, Relaxed);
        }
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        self.authenticated();
        self.caps.open.fetch_sub(1, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn total_and_per_address_caps_hold_and_give_back() {
        let caps = ConnCaps::new(3, 2);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let t1 = caps.admit(Some(a), true).unwrap();
        let t2 = caps.admit(Some(a), true).unwrap();
        assert_eq!(caps.admit(Some(a), true).err(), Some(Refused::AddressFull));
        // Authenticated connections no longer count against the address.
        t1.authenticated();
        let t3 = caps.admit(Some(a), true).unwrap();
        assert_eq!(caps.admit(Some(b), true).err(), Some(Refused::Full));
        drop(t2);
        let t4 = caps.admit(Some(b), false).unwrap();
        assert_eq!(caps.open(), 3);
        drop((t1, t3, t4));
        assert_eq!(caps.open(), 0);
        assert!(caps.unauthenticated.iter().all(|s| s.load(Relaxed) == 0));
        // Open mode (no keys): only the total applies.
        let all: Vec<_> = (0..3)
            .map(|_| caps.admit(Some(a), false).unwrap())
            .collect();
        assert_eq!(all.len(), 3);
    }
}
