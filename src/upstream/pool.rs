//! A core's pool of idle upstream connections: LIFO (the warmest first), bounded per upstream,
//! with an idle timeout. Only connections whose response was read to the end come back here,
//! and one that idled a while is checked before use: its server may have closed it or written
//! on it meanwhile (as Envoy and Go's transport watch idle connections for, and nginx's
//! keepalive cache does).

use super::UpConn;
use std::collections::VecDeque;

/// How long a connection idles before it is checked for a close or unasked bytes at reuse.
const QUIET_CHECK_AFTER_MS: u64 = 10;

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
            let idle_ms = now_ms.saturating_sub(idle.since_ms);
            if idle_ms >= self.idle_timeout_ms {
                // Everything below is older still.
                list.clear();
                return None;
            }
            // A server closes or writes on an idle connection at its own idle timeout (seconds),
            // not within milliseconds of its answer: under load the warmest connection comes
            // back within a core's turn or two and skips the check (measured: with a 1 ms
            // threshold, half of all JSON requests at 54k/s paid the system call). A stray
            // empty line right after an answer needs no check: the head parser skips it.
            if idle_ms >= QUIET_CHECK_AFTER_MS && idle.conn.stirred() {
                continue;
            }
            let mut conn = idle.conn;
            conn.reused = true;
            return Some(conn);
        }
        None
    }

    pub fn put(&mut self, key: usize, mut conn: UpConn, now_ms: u64) {
        if self.max_idle == 0 {
            return;
        }
        // An idle connection holds no read buffer: it goes back to the core, and the next
        // request's first read takes one (`http::buffers`).
        if conn.buf.is_empty() {
            crate::http::buffers::give_back(std::mem::take(&mut conn.buf));
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
