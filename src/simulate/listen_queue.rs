//! The simulator takes what waits in its listen queue in one go, not one connection per turn of
//! its loop.
//!
//! An accept through the runtime takes one connection, and the next is asked for only when the
//! accept loop runs again, after every other task the core has ready. The simulator's one core
//! relaying thousands of held streams turns slowly: in front of 9,000 streams (a benchmark's
//! first wave) its queue stayed full (4,096, `somaxconn`) for three seconds (`ss -ltn`), the
//! kernel dropped 2,290 SYNs, which TCP sends again only 1 s and 3 s later, and the slowest
//! streams' first byte came at 3 s. The benchmarks' p99 stream measured the simulator's accept
//! loop, not the proxy in front of it. A provider's edge is not that slow to accept.
//!
//! (Ringside's own data port was measured the same way with and without it: no difference at
//! 9,000, where its two cores' queues drain within 0.3 s, so it keeps the runtime's accept.)

use monoio::net::{TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd};

/// At most this many connections in one go, in the tests.
#[cfg(test)]
const PER_TURN: usize = 64;

/// Accept what waits in `listener`'s queue now, never waiting, and hand each connection to
/// `serve`: until the queue is empty, `most` were taken, or an accept fails (the runtime's own
/// next accept meets and reports that failure).
pub(super) fn accept_queued(listener: &TcpListener, most: usize, mut serve: impl FnMut(TcpStream)) {
    let fd = listener.as_raw_fd();
    // The epoll driver's listener is non-blocking and so must its sockets be; io_uring's are not.
    // SAFETY: fcntl reads the flags of a descriptor the listener owns.
    let nonblocking = unsafe { libc::fcntl(fd, libc::F_GETFL) } & libc::O_NONBLOCK != 0;
    let flags = libc::SOCK_CLOEXEC | if nonblocking { libc::SOCK_NONBLOCK } else { 0 };
    for _ in 0..most {
        if !queued(fd) {
            return;
        }
        // SAFETY: accept4 on the listener's descriptor, the peer's address not asked for. The
        // queue holds a connection and only this core accepts from its own listener (the
        // runtime's accept has completed), so a blocking listener does not block here.
        let accepted =
            unsafe { libc::accept4(fd, std::ptr::null_mut(), std::ptr::null_mut(), flags) };
        if accepted < 0 {
            return;
        }
        // SAFETY: `accepted` is a new descriptor that nothing else owns.
        let std = unsafe { std::net::TcpStream::from_raw_fd(accepted) };
        match TcpStream::from_std(std) {
            Ok(s) => serve(s),
            Err(_) => return,
        }
    }
}

/// Whether a connection waits in the listen queue of `fd` now.
fn queued(fd: std::os::fd::RawFd) -> bool {
    let mut ready = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one pollfd we own; a zero timeout never waits.
    let n = unsafe { libc::poll(&mut ready, 1, 0) };
    n == 1 && ready.revents & libc::POLLIN != 0
}

#[cfg(test)]
mod tests;
