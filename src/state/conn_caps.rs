//! How many client connections the data port holds: all of them together (`[server]
//! max_connections`, by default what the open-file limit allows); from one address
//! (`max_connections_per_address`, by default all but a sixteenth, so that one host can never
//! lock every other out; a trusted proxy in front is exempt); and, when client keys are in
//! use, how many from one address have not yet presented a valid key
//! (`max_unauthenticated_per_address`), so that idle or keyless connections from one host cannot
//! take every descriptor. Counters are atomics shared by the cores; per-address counts live in
//! fixed tables of hashed slots (two addresses sharing a slot share a cap: conservative,
//! bounded memory, no lock).

use std::cell::Cell;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering::Relaxed};

use super::descriptor_cap::clients_allowed;
pub use super::descriptor_cap::{Cap, UpstreamUse};

/// Slots of the per-address tables (indices fit 16 bits).
const SLOTS: usize = 4096;

/// Why a connection was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// `max_connections` are open.
    Full,
    /// Its address holds `max_connections_per_address`.
    AddressShare,
    /// Its address holds `max_unauthenticated_per_address` keyless connections.
    AddressFull,
}

impl Refused {
    pub const ALL: [Refused; 3] = [Refused::Full, Refused::AddressShare, Refused::AddressFull];

    /// The metric label, and the setting that decides.
    pub fn as_str(self) -> &'static str {
        match self {
            Refused::Full => "max_connections",
            Refused::AddressShare => "max_connections_per_address",
            Refused::AddressFull => "max_unauthenticated_per_address",
        }
    }
}

/// Connections refused at accept since start, by [`Refused`]
/// (`ringside_connections_refused_total{reason}`), and the last address refused (the warn
/// line names it).
pub struct RefusedCounts {
    pub by_reason: [AtomicU64; 3],
    last: std::sync::Mutex<Option<IpAddr>>,
}

pub static REFUSED: RefusedCounts = RefusedCounts {
    by_reason: [const { AtomicU64::new(0) }; 3],
    last: std::sync::Mutex::new(None),
};

impl RefusedCounts {
    fn count(&self, why: Refused, peer: Option<IpAddr>) -> Refused {
        self.by_reason[why as usize].fetch_add(1, Relaxed);
        // Never waits: a refusal while another core writes the address keeps the other's.
        if let (Ok(mut last), Some(ip)) = (self.last.try_lock(), peer) {
            *last = Some(ip);
        }
        why
    }

    pub fn total(&self) -> u64 {
        self.by_reason.iter().map(|c| c.load(Relaxed)).sum()
    }

    pub fn last_address(&self) -> Option<IpAddr> {
        self.last.try_lock().ok().and_then(|l| *l)
    }
}

pub struct ConnCaps {
    open: AtomicUsize,
    cap: Cap,
    /// Connections open per address slot, and the most one address may hold (`None`: all but
    /// a sixteenth of the cap in force).
    per_address: Box<[AtomicU32]>,
    address_share: Option<u32>,
    unauthenticated: Box<[AtomicU32]>,
    per_address_unauthenticated: u32,
}

/// A slot taken in one of the tables.
fn take(table: &[AtomicU32], i: u16, cap: u32) -> bool {
    let slot = &table[usize::from(i)];
    if slot.fetch_add(1, Relaxed) >= cap {
        slot.fetch_sub(1, Relaxed);
        return false;
    }
    true
}

impl ConnCaps {
    /// `max` (0: by descriptors); `address_share`: the most one address may hold (0: all but a
    /// sixteenth of the cap in force); `unauthenticated`: the most keyless ones from one
    /// address.
    pub fn new(max: usize, address_share: usize, unauthenticated: usize) -> ConnCaps {
        let cap = match max {
            0 => Cap::Descriptors(crate::fd_limit::connections_budget()),
            n => Cap::Set(n),
        };
        Self::with_cap(cap, address_share, unauthenticated)
    }

    pub fn with_cap(cap: Cap, address_share: usize, unauthenticated: usize) -> ConnCaps {
        let share = |n: usize| u32::try_from(n).unwrap_or(u32::MAX).max(1);
        ConnCaps {
            open: AtomicUsize::new(0),
            cap,
            per_address: (0..SLOTS).map(|_| AtomicU32::new(0)).collect(),
            address_share: (address_share > 0).then(|| share(address_share)),
            unauthenticated: (0..SLOTS).map(|_| AtomicU32::new(0)).collect(),
            per_address_unauthenticated: share(unauthenticated),
        }
    }

    /// The caps in force with the upstream holding `up`: on all connections, and on one
    /// address's.
    pub fn limits(&self, up: UpstreamUse) -> (usize, u32) {
        let total = match self.cap {
            Cap::Set(n) => n.max(1),
            Cap::Descriptors(budget) => clients_allowed(budget, up),
        };
        let share = self.address_share.unwrap_or_else(|| {
            let derived = crate::config::default_address_share(total);
            u32::try_from(derived).unwrap_or(u32::MAX)
        });
        (total, share)
    }

    /// Admit a new connection from `peer` with the upstream holding `up`. `keyed`: client keys
    /// are in use, so the connection counts as unauthenticated until its first request
    /// presents a valid key. `trusted`: the peer is a proxy in front
    /// (`server.trusted_proxies`), whose share is not capped.
    pub fn admit(
        &self,
        peer: Option<IpAddr>,
        keyed: bool,
        trusted: bool,
        up: UpstreamUse,
    ) -> Result<Ticket<'_>, Refused> {
        let (max, address_share) = self.limits(up);
        if self.open.fetch_add(1, Relaxed) >= max {
            self.open.fetch_sub(1, Relaxed);
            return Err(REFUSED.count(Refused::Full, peer));
        }
        let i = peer.map(slot_of);
        let share = i.filter(|_| !trusted);
        if let Some(i) = share
            && !take(&self.per_address, i, address_share)
        {
            self.open.fetch_sub(1, Relaxed);
            return Err(REFUSED.count(Refused::AddressShare, peer));
        }
        let keyless = i.filter(|_| keyed);
        if let Some(k) = keyless
            && !take(&self.unauthenticated, k, self.per_address_unauthenticated)
        {
            if let Some(s) = share {
                self.per_address[usize::from(s)].fetch_sub(1, Relaxed);
            }
            self.open.fetch_sub(1, Relaxed);
            return Err(REFUSED.count(Refused::AddressFull, peer));
        }
        Ok(Ticket {
            caps: self,
            share,
            slot: Cell::new(keyless),
            peer,
        })
    }

    pub fn open(&self) -> usize {
        self.open.load(Relaxed)
    }
}

fn slot_of(ip: IpAddr) -> u16 {
    use std::hash::{Hash, Hasher};
    let mut h = rustc_hash::FxHasher::default();
    ip.hash(&mut h);
    (h.finish() % SLOTS as u64) as u16
}

/// One admitted connection; gives its place back when dropped.
pub struct Ticket<'a> {
    caps: &'a ConnCaps,
    /// The per-address slot its address's share counts it in (16-bit: this lives in every
    /// held stream's task).
    share: Option<u16>,
    /// The per-address slot it holds while unauthenticated.
    slot: Cell<Option<u16>>,
    /// The client's address (for the access log), when the socket gave one.
    pub peer: Option<IpAddr>,
}

impl Ticket<'_> {
    /// The connection presented a valid key: it no longer counts against its address.
    pub fn authenticated(&self) {
        if let Some(i) = self.slot.take() {
            self.caps.unauthenticated[usize::from(i)].fetch_sub(1, Relaxed);
        }
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        self.authenticated();
        if let Some(i) = self.share {
            self.caps.per_address[usize::from(i)].fetch_sub(1, Relaxed);
        }
        self.caps.open.fetch_sub(1, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::default_address_share;

    const UP: UpstreamUse = UpstreamUse {
        h2_connections: 0,
        http1: false,
    };

    fn zero(caps: &ConnCaps) -> bool {
        caps.unauthenticated.iter().all(|s| s.load(Relaxed) == 0)
            && caps.per_address.iter().all(|s| s.load(Relaxed) == 0)
    }

    #[test]
    fn total_and_per_address_caps_hold_and_give_back() {
        let caps = ConnCaps::new(3, 3, 2);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let t1 = caps.admit(Some(a), true, false, UP).unwrap();
        let t2 = caps.admit(Some(a), true, false, UP).unwrap();
        assert_eq!(
            caps.admit(Some(a), true, false, UP).err(),
            Some(Refused::AddressFull)
        );
        // Authenticated connections no longer count against the address.
        t1.authenticated();
        let t3 = caps.admit(Some(a), true, false, UP).unwrap();
        assert_eq!(
            caps.admit(Some(b), true, false, UP).err(),
            Some(Refused::Full)
        );
        drop(t2);
        let t4 = caps.admit(Some(b), false, false, UP).unwrap();
        assert_eq!(caps.open(), 3);
        drop((t1, t3, t4));
        assert_eq!(caps.open(), 0);
        assert!(zero(&caps));
        // Open mode (no keys): only the total and the address's share apply.
        let all: Vec<_> = (0..3)
            .map(|_| caps.admit(Some(a), false, false, UP).unwrap())
            .collect();
        assert_eq!(all.len(), 3);
    }

    #[test]
    fn one_address_leaves_room_for_the_others_unless_it_is_a_trusted_proxy() {
        assert_eq!(default_address_share(9_968), 9_345);
        assert_eq!(default_address_share(16), 15);
        assert_eq!(default_address_share(1), 1);
        let caps = ConnCaps::new(16, default_address_share(16), 100);
        let a: IpAddr = "127.0.0.1".parse().unwrap();
        let b: IpAddr = "127.0.0.2".parse().unwrap();
        let held: Vec<_> = (0..15)
            .map(|_| caps.admit(Some(a), false, false, UP).unwrap())
            .collect();
        assert_eq!(
            caps.admit(Some(a), false, false, UP).err(),
            Some(Refused::AddressShare)
        );
        let other = caps.admit(Some(b), false, false, UP).unwrap();
        drop(other);
        // A proxy in front may hold all of it.
        let proxy = caps.admit(Some(a), false, true, UP).unwrap();
        assert_eq!(caps.open(), 16);
        drop((held, proxy));
        assert!(zero(&caps));
        assert!(REFUSED.total() >= 1);
    }

    #[test]
    fn by_descriptors_the_cap_follows_the_upstream() {
        let http1 = UpstreamUse {
            h2_connections: 0,
            http1: true,
        };
        let h2 = |n| UpstreamUse {
            h2_connections: n,
            http1: false,
        };
        let caps = ConnCaps::with_cap(Cap::Descriptors(64), 0, 100);
        assert_eq!(caps.limits(http1), (32, 30));
        assert_eq!(caps.limits(h2(4)), (59, 56));
        let a: IpAddr = "10.0.0.9".parse().unwrap();
        let b: IpAddr = "10.0.0.10".parse().unwrap();
        // Over HTTP/2, 56 from one address (its share of 59), 3 more from another...
        let many: Vec<_> = (0..56)
            .map(|_| caps.admit(Some(a), false, false, h2(4)).unwrap())
            .collect();
        let others: Vec<_> = (0..3)
            .map(|_| caps.admit(Some(b), false, false, h2(4)).unwrap())
            .collect();
        assert_eq!(
            caps.admit(Some(b), false, false, h2(4)).err(),
            Some(Refused::Full)
        );
        // ...and once a provider answers over HTTP/1.1, none until clients leave.
        drop(others);
        assert_eq!(
            caps.admit(Some(b), false, false, http1).err(),
            Some(Refused::Full)
        );
        drop(many);
        let back = caps.admit(Some(b), false, false, http1);
        assert!(back.is_ok());
        drop(back);
        assert!(zero(&caps));
        // A cap set in the file holds whatever the upstream does.
        let set = ConnCaps::new(5, 0, 100);
        assert_eq!(set.limits(http1), (5, 4));
        assert_eq!(set.limits(h2(1_000)), (5, 4));
    }
}
