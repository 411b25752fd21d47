//! A core's pool of idle upstream connections: LIFO (the warmest first), bounded per upstream,
//! with an idle timeout. Only connections whose response was read to the end come back here.

use super::UpConn;
use std::collections::VecDeque;

struct Idle {
    conn: UpConn,
    since_ms: u64,
}

pub struct Pool {
    /// Indexed by provider index (small and dense): no hashing on the request path. Each list
    /// runs coldest (front) to warmest (back).
    idle: Vec<VecDeque<Idle>>,
    max_idle: usize,
    idle_timeout_ms: u64,
}

impl Pool {
    pub fn new(max_idle: usize, idle_timeout_ms: u64) -> Pool {
        Pool {
            idle: Vec::new(),
            max_idle,
            idle_timeout_ms,
        }
    }

    /// The most recently returned live connection for `key`, if any.
    pub fn take(&mut self, key: usize, now_ms: u64) -> Option<UpConn> {
        let list = self.idle.get_mut(key)?;
        while let Some(idle) = list.pop_back() {
            if now_ms.saturating_sub(idle.since_ms) < self.idle_timeout_ms {
                let mut conn = idle.conn;
                conn.reused = true;
                return Some(conn);
            }
            // Everything below is older still.
            list.clear();
        }
        None
    }

    pub fn put(&mut self, key: usize, conn: UpConn, now_ms: u64) {
        if self.max_idle == 0 {
            return;
        }
        if self.idle.len() <= key {
            self.idle.resize_with(key + 1, VecDeque::new);
        }
        let list = &mut self.idle[key];
        if list.len() >= self.max_idle {
            list.pop_front(); // drop the coldest
        }
        list.push_back(Idle {
            conn,
            since_ms: now_ms,
        });
    }

    /// Close connections idle for longer than the timeout (run on a tick).
    pub fn sweep(&mut self, now_ms: u64) {
        let t = self.idle_timeout_ms;
        for list in &mut self.idle {
            list.retain(|i| now_ms.saturating_sub(i.since_ms) < t);
        }
    }

    pub fn clear(&mut self) {
        self.idle.clear();
    }
}
