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
    /// Per upstream, how often its idle connections were forgotten (one was found closed).
    forgotten: Vec<u16>,
    /// Per upstream, the config generation from which it is reached where it now is (a
    /// reload moved it there): a connection made for an earlier one is not pooled again.
    since: Vec<u64>,
    max_idle: usize,
    idle_timeout_ms: u64,
}

impl Pool {
    pub fn new(max_idle: usize, idle_timeout_ms: u64) -> Pool {
        Pool {
            idle: Vec::new(),
            forgotten: Vec::new(),
            since: Vec::new(),
            max_idle,
            idle_timeout_ms,
        }
    }

    /// The most recently returned live connection for `key`, if any.
    #[inline]
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
            conn.pool_gen = self.forgets(key);
            return Some(conn);
        }
        None
    }

    /// Keep `conn`, made for config generation `generation`, for the next request to `key`.
    pub fn put(&mut self, key: usize, mut conn: UpConn, now_ms: u64, generation: u64) {
        if self.max_idle == 0 || generation < self.since.get(key).copied().unwrap_or(0) {
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

    /// Close connections idle for longer than the timeout (run on a tick). Each list runs
    /// coldest to warmest, so only the expired ones at its front are looked at: a pool of
    /// thousands costs the tick nothing while none expire.
    pub fn sweep(&mut self, now_ms: u64) {
        let t = self.idle_timeout_ms;
        for list in &mut self.idle {
            while list
                .front()
                .is_some_and(|i| now_ms.saturating_sub(i.since_ms) >= t)
            {
                list.pop_front();
            }
        }
    }

    /// Upstream `key` is reached elsewhere from config generation `generation` on (a reload
    /// moved it, or gave its slot to another): its idle connections go, and so do those still
    /// serving requests of an earlier generation, when they come back.
    pub fn moved(&mut self, key: usize, generation: u64) {
        if let Some(list) = self.idle.get_mut(key) {
            list.clear();
        }
        if self.since.len() <= key {
            self.since.resize(key + 1, 0);
        }
        self.since[key] = generation;
    }

    /// Drop every idle connection to the upstream `key` (one of them was found closed).
    pub fn forget(&mut self, key: usize) {
        if let Some(list) = self.idle.get_mut(key) {
            list.clear();
        }
        if self.forgotten.len() <= key {
            self.forgotten.resize(key + 1, 0);
        }
        self.forgotten[key] = self.forgotten[key].wrapping_add(1);
    }

    /// How often `key`'s idle connections were forgotten (0 for an upstream never forgotten).
    fn forgets(&self, key: usize) -> u16 {
        self.forgotten.get(key).copied().unwrap_or(0)
    }

    /// Whether `conn`'s idle siblings were forgotten since it was taken: another connection
    /// taken with it was already found closed.
    pub fn forgotten_since_taken(&self, key: usize, conn: &UpConn) -> bool {
        self.forgets(key) != conn.pool_gen
    }

    pub fn clear(&mut self) {
        self.idle.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::UpStream;
    use std::os::fd::AsRawFd;

    /// A pooled connection over a loopback pair (the peer is kept open, so none is stirred).
    fn conn(peers: &mut Vec<std::net::TcpStream>) -> UpConn {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let ours =
            std::net::TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        peers.push(listener.accept().expect("accept").0);
        ours.set_nonblocking(true).expect("nonblocking");
        let fd = ours.as_raw_fd();
        UpConn {
            stream: UpStream::Plain(monoio::net::TcpStream::from_std(ours).expect("register")),
            buf: bytes::BytesMut::new(),
            reused: false,
            pool_gen: 0,
            fd,
        }
    }

    fn in_runtime(f: impl FnOnce()) {
        monoio::RuntimeBuilder::<monoio::LegacyDriver>::new()
            .build()
            .expect("runtime")
            .block_on(async { f() });
    }

    #[test]
    fn sweep_retires_only_the_expired_and_take_gives_the_warmest() {
        in_runtime(|| {
            let mut peers = Vec::new();
            let mut pool = Pool::new(16, 100);
            let fds: Vec<_> = (0..4u64)
                .map(|i| {
                    let c = conn(&mut peers);
                    let fd = c.fd;
                    pool.put(0, c, i * 40, 0);
                    fd
                })
                .collect();
            // Idle 130, 90, 50 and 10 ms at 130: the coldest one is retired.
            pool.sweep(130);
            assert_eq!(pool.idle[0].len(), 3);
            // The warmest first, and it skips the quiet check (idle under 10 ms).
            let warm = pool.take(0, 125).expect("a pooled connection");
            assert_eq!(warm.fd, fds[3]);
            assert!(warm.reused);
            // Nothing expired: the sweep leaves the rest.
            pool.sweep(135);
            assert_eq!(pool.idle[0].len(), 2);
            assert_eq!(pool.take(0, 135).map(|c| c.fd), Some(fds[2]));
            // Past the timeout for the last one: `take` finds nothing usable.
            assert!(pool.take(0, 200).is_none());
            assert!(pool.idle[0].is_empty());
        });
    }

    #[test]
    fn a_full_pool_drops_its_coldest_zero_pools_nothing_and_a_moved_one_keeps_none_of_before() {
        in_runtime(|| {
            let mut peers = Vec::new();
            let mut pool = Pool::new(2, 60_000);
            let fds: Vec<_> = (0..3)
                .map(|_| {
                    let c = conn(&mut peers);
                    let fd = c.fd;
                    pool.put(1, c, 0, 0);
                    fd
                })
                .collect();
            assert_eq!(pool.idle[1].len(), 2);
            assert_eq!(pool.take(1, 0).map(|c| c.fd), Some(fds[2]));
            assert_eq!(pool.take(1, 0).map(|c| c.fd), Some(fds[1]));
            assert!(pool.take(1, 0).is_none());
            assert!(pool.take(7, 0).is_none(), "an upstream never pooled");

            let mut none = Pool::new(0, 60_000);
            none.put(0, conn(&mut peers), 0, 0);
            assert!(none.take(0, 0).is_none());

            // Moved by generation 3: its idle ones go, and one that served a request of
            // generation 2 is not kept; one of generation 3 is.
            pool.put(1, conn(&mut peers), 0, 2);
            pool.moved(1, 3);
            assert!(pool.take(1, 0).is_none());
            pool.put(1, conn(&mut peers), 0, 2);
            assert!(pool.take(1, 0).is_none(), "made for where it was");
            pool.put(1, conn(&mut peers), 0, 3);
            assert!(pool.take(1, 0).is_some());
        });
    }

    #[test]
    fn a_closed_connection_is_believed_once_per_burst() {
        in_runtime(|| {
            let mut peers = Vec::new();
            let mut pool = Pool::new(8, 60_000);
            for _ in 0..3 {
                pool.put(0, conn(&mut peers), 0, 0);
            }
            // Two requests take a connection each; the first is found closed.
            let (first, second) = (pool.take(0, 0).expect("one"), pool.take(0, 0).expect("two"));
            assert!(!pool.forgotten_since_taken(0, &first));
            pool.forget(0);
            assert!(pool.idle[0].is_empty(), "its idle siblings go");
            // The one taken with it is not believed closed while idle too.
            assert!(pool.forgotten_since_taken(0, &second));
            // A connection that served since, taken after the forget, is believed again.
            pool.put(0, first, 5, 0);
            let later = pool.take(0, 5).expect("pooled again");
            assert!(!pool.forgotten_since_taken(0, &later));
            // Other upstreams are not touched.
            pool.put(1, conn(&mut peers), 0, 0);
            let other = pool.take(1, 0).expect("another upstream");
            assert!(!pool.forgotten_since_taken(1, &other));
        });
    }
}
