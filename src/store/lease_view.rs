//! What the cores see of the leases: per connection, until when it is held. Kept by the store
//! writer after each commit; read on the request path with one atomic load per candidate.

use crate::ids::ConnId;
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Per connection, until when (unix ms) another owner's lease holds it: what keeps other
/// traffic off a leased connection. Written only by the store writer, after each commit.
#[derive(Debug)]
pub struct LeaseView {
    /// Connection slot by `provider/connection` (the writer's side; a reload renames).
    labels: Mutex<HashMap<String, usize>>,
    until: Box<[AtomicU64]>,
    /// Connections with a non-zero entry (expired ones count until the writer clears them):
    /// zero lets requests skip the lease check and its clock read.
    held: AtomicU64,
}

impl LeaseView {
    /// `labels` by connection slot; room for `capacity` slots.
    pub fn new(labels: &[(String, String)], capacity: usize) -> LeaseView {
        let view = LeaseView {
            labels: Mutex::default(),
            until: (0..capacity.max(labels.len()))
                .map(|_| AtomicU64::new(0))
                .collect(),
            held: AtomicU64::new(0),
        };
        view.rename(labels);
        view
    }

    /// The connections by slot after a reload (`("", "")` where a slot holds none). A slot
    /// whose connection went away is free here; its leases are ended by the reload.
    pub fn rename(&self, labels: &[(String, String)]) {
        let mut map = self.labels.lock().unwrap_or_else(|e| e.into_inner());
        map.clear();
        for (i, (p, c)) in labels.iter().enumerate() {
            if !p.is_empty() {
                map.insert(format!("{p}/{c}"), i);
            }
        }
        for (i, (p, _)) in labels.iter().enumerate() {
            if p.is_empty() {
                self.clear(i);
            }
        }
    }

    fn clear(&self, i: usize) {
        if let Some(u) = self.until.get(i)
            && u.swap(0, Relaxed) != 0
        {
            self.held.fetch_sub(1, Relaxed);
        }
    }

    pub fn set(&self, label: &str, until: u64) {
        let slot = self
            .labels
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(label)
            .copied();
        if let Some(i) = slot {
            let old = self.until[i].swap(until, Relaxed);
            match (old, until) {
                (0, 1..) => {
                    self.held.fetch_add(1, Relaxed);
                }
                (1.., 0) => {
                    self.held.fetch_sub(1, Relaxed);
                }
                _ => {}
            }
        }
    }

    /// Until when connection `conn` is leased (0 or past: free).
    pub fn leased_until(&self, conn: ConnId, now_unix: u64) -> Option<u64> {
        let u = self.until.get(conn.index())?.load(Relaxed);
        (u > now_unix).then_some(u)
    }

    /// No connection has been leased since the writer last freed them all.
    pub fn none(&self) -> bool {
        self.held.load(Relaxed) == 0
    }
}
