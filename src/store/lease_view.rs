//! What the cores see of the leases: per connection, until when it is held. Kept by the store
//! writer after each commit; read on the request path with one atomic load per candidate.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Per connection, until when (unix ms) another owner's lease holds it: what keeps other
/// traffic off a leased connection. Written only by the store writer, after each commit.
#[derive(Debug)]
pub struct LeaseView {
    labels: HashMap<String, usize>,
    until: Box<[AtomicU64]>,
    /// Connections with a non-zero entry (expired ones count until the writer clears them):
    /// zero lets requests skip the lease check and its clock read.
    held: AtomicU64,
}

impl LeaseView {
    pub fn new(labels: &[(String, String)]) -> LeaseView {
        LeaseView {
            labels: labels
                .iter()
                .enumerate()
                .map(|(i, (p, c))| (format!("{p}/{c}"), i))
                .collect(),
            until: (0..labels.len()).map(|_| AtomicU64::new(0)).collect(),
            held: AtomicU64::new(0),
        }
    }

    pub fn index(&self, label: &str) -> Option<usize> {
        self.labels.get(label).copied()
    }

    pub fn set(&self, label: &str, until: u64) {
        if let Some(&i) = self.labels.get(label) {
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
    pub fn leased_until(&self, conn: usize, now_unix: u64) -> Option<u64> {
        let u = self.until.get(conn)?.load(Relaxed);
        (u > now_unix).then_some(u)
    }

    /// No connection has been leased since the writer last freed them all.
    pub fn none(&self) -> bool {
        self.held.load(Relaxed) == 0
    }
}
