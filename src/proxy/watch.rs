//! Watching the client while the upstream works: a readiness wait stays armed on the client
//! socket so that a disconnect aborts the upstream at once, instead of at the next write.
//! A pipelined request that arrives meanwhile stays in the socket for the next head read.
//!
//! The watch is armed only once a request has run for [`ARM_AFTER`]: most JSON requests finish
//! sooner, and for them an armed wait plus its cancellation would be two extra I/O operations.
//! It holds no buffer: a held stream's watch is one small readiness operation (a pending read
//! with its buffer was ~675 bytes per stream), and what woke it is told apart with a one-byte
//! `MSG_PEEK` that leaves the bytes where they are.
//!
//! The wait is polled only when it was woken. A held stream's task is woken once per event,
//! and each wake polls its whole path; polling the armed wait too on every one was about a
//! tenth of Ringside's user time at 5,000 streams (the runtime's operation entry and the
//! boxed wait, both cold since the last event, `perf`, 2026-12-04). So the wait is registered
//! with a waker of its own (`Alarm`) that marks it woken before waking the task.
//!
//! When the request ends with the wait still armed, the wait is handed on ([`ClientWatch::
//! finish`]) to the connection's wait for its next request, which is the same wait: readable
//! client socket. Cancelling it instead costs io_uring a search among all the core's armed
//! polls (measured 2.4 % of the CPU with 9,000 held streams, a cost that grows with the number
//! of streams), and the next request's wait would arm a new one.

use bytes::BytesMut;
use monoio::net::TcpStream;
use monoio::net::tcp::TcpOwnedReadHalf;
use std::future::Future;
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use super::keepalive::KeepAlive;
use crate::timer;

/// How long a request runs before its client is watched.
pub const ARM_AFTER: Duration = Duration::from_millis(20);

pub use super::exchange::Readiness;

/// The result of racing an upstream step against the client going away.
pub enum Raced<T> {
    Done(T),
    ClientGone,
}

/// What woke the watch, seen without taking it off the socket.
#[derive(Debug, PartialEq, Eq)]
enum Woke {
    /// The client sent bytes (a pipelined request): it is still there.
    Data,
    /// The client closed or reset its side.
    Gone,
    /// Nothing after all (a stale readiness): wait again.
    Nothing,
}

/// Peek at one byte of what the client sent, without waiting or consuming it.
fn peek(fd: RawFd) -> Woke {
    let mut byte = 0u8;
    loop {
        // SAFETY: `fd` is the client socket, open for the life of the watch; the kernel writes
        // at most one byte into `byte`.
        let n = unsafe {
            libc::recv(
                fd,
                (&raw mut byte).cast(),
                1,
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        if n > 0 {
            return Woke::Data;
        }
        if n == 0 {
            return Woke::Gone;
        }
        match std::io::Error::last_os_error().kind() {
            std::io::ErrorKind::Interrupted => continue,
            std::io::ErrorKind::WouldBlock => return Woke::Nothing,
            _ => return Woke::Gone,
        }
    }
}

/// The armed wait's own waker: it marks the wait woken, then wakes the task. One per armed
/// watch (made at its first poll), so no event of a held stream allocates.
struct Alarm {
    woken: AtomicBool,
    task: Waker,
}

impl Wake for Alarm {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Relaxed);
        self.task.wake_by_ref();
    }
}

/// Whether the armed wait must be polled now: it was woken since its last poll, or it has not
/// been polled with the task's current waker (a new wait must be polled once to register).
/// `Some` hands back the waker to poll it with.
fn due(alarm: &mut Option<Arc<Alarm>>, cx: &Context<'_>) -> Option<Waker> {
    match alarm {
        Some(a) if a.task.will_wake(cx.waker()) => a
            .woken
            .swap(false, Ordering::Relaxed)
            .then(|| Waker::from(a.clone())),
        _ => {
            let a = Arc::new(Alarm {
                woken: AtomicBool::new(false),
                task: cx.waker().clone(),
            });
            *alarm = Some(a.clone());
            Some(Waker::from(a))
        }
    }
}

pub struct ClientWatch<'a> {
    /// The client's read half: borrowed for the watch's life, so nothing else reads it.
    rd: &'a TcpOwnedReadHalf,
    /// The connection's read buffer. Kept as it is while the watch is unarmed, or when it
    /// already held bytes of a pipelined request at the start (nothing to watch for then);
    /// given back to the core when the watch arms.
    buf: BytesMut,
    /// Waiting for [`ARM_AFTER`] to pass.
    unarmed: bool,
    /// Fires [`ARM_AFTER`] after the start; one per watch (a timer per race would be
    /// registered and cancelled for every upstream read of a stream), registered at the first
    /// race that polls it.
    /// (Not an `Option`: 8 bytes fewer in every held stream's task; it is never polled once
    /// the watch is armed, and its wheel entry is let go then.)
    arm_timer: timer::Sleep,
    /// The armed readiness wait on the client socket.
    wait: Option<Readiness>,
    /// The armed wait's waker, which says whether it was woken.
    alarm: Option<Arc<Alarm>>,
    gone: bool,
    /// A waiting stream's keep-alive (`proxy::keepalive`; only where it is opted in).
    keepalive: Option<Box<KeepAlive>>,
}

impl<'a> ClientWatch<'a> {
    /// Start watching. `buf` is the connection's read buffer; if it already holds bytes of a
    /// pipelined request there is nothing to watch for and the buffer is kept as is.
    pub fn start(rd: &'a mut TcpOwnedReadHalf, buf: BytesMut) -> Self {
        let unarmed = buf.is_empty();
        ClientWatch {
            rd,
            unarmed,
            buf,
            arm_timer: if unarmed {
                timer::sleep_until(crate::clock::instant() + ARM_AFTER)
            } else {
                timer::Sleep::unset()
            },
            wait: None,
            alarm: None,
            gone: false,
            keepalive: None,
        }
    }

    /// Keep the client's wait alive while the request waits (see `proxy::keepalive`).
    pub(crate) fn keep_alive(&mut self, k: Box<KeepAlive>) {
        self.keepalive = Some(k);
    }

    /// Whether a waiting stream's head went out already.
    pub fn head_sent(&self) -> bool {
        self.keepalive.as_ref().is_some_and(|k| k.head_sent())
    }

    /// An answer is relayed (`true`): no keep-alive goes out meanwhile; or it could not be and
    /// the request waits again (`false`). Returns whether the head went out already.
    pub fn pause_keepalive(&mut self, paused: bool) -> bool {
        if let Some(k) = self.keepalive.as_mut() {
            k.pause(paused);
        }
        self.head_sent()
    }

    fn fd(&self) -> RawFd {
        // SAFETY: a read of the descriptor only; see `readiness`.
        unsafe { (*self.rd.0.get()).as_raw_fd() }
    }

    /// Arm the watch: the connection's buffer goes back to the core while a long request (a
    /// held stream) runs, and a readiness wait goes on the client socket.
    fn arm(&mut self) {
        self.unarmed = false;
        crate::http::buffers::give_back(std::mem::take(&mut self.buf));
        self.wait = Some(readiness(self.rd));
    }

    /// Poll the armed wait; true when the client is gone. A pipelined request's bytes end the
    /// watch (they stay in the socket for the next head read); a stale readiness arms again.
    fn client_gone(&mut self, cx: &Context<'_>) -> bool {
        if self.wait.is_none() {
            return false;
        }
        let Some(waker) = due(&mut self.alarm, cx) else {
            return false;
        };
        let mut cx = Context::from_waker(&waker);
        // A stale readiness is rare: after a few in a row the watch ends (as for a pipelined
        // request), rather than leave a wait that was made but never polled, so never
        // registered.
        for _ in 0..4 {
            let Some(w) = self.wait.as_mut() else {
                return false;
            };
            match w.as_mut().poll(&mut cx) {
                Poll::Pending => return false,
                Poll::Ready(Err(_)) => {}
                Poll::Ready(Ok(())) => match peek(self.fd()) {
                    Woke::Nothing => {
                        self.wait = Some(readiness(self.rd));
                        continue;
                    }
                    Woke::Data => {
                        self.wait = None;
                        return false;
                    }
                    Woke::Gone => {}
                },
            }
            self.wait = None;
            self.gone = true;
            return true;
        }
        self.wait = None;
        false
    }

    /// Await `f`, unless the client disconnects first (then `f` is dropped: an abort path).
    /// Hot callers pass `pin!(fut)`: the future then stays where the caller built it, instead
    /// of being copied into this one and again into the caller's state (~1.5 KB a time).
    pub async fn race<F: Future>(&mut self, f: F) -> Raced<F::Output> {
        if self.gone {
            return Raced::ClientGone;
        }
        let mut f = std::pin::pin!(f);
        std::future::poll_fn(|cx| {
            if let Poll::Ready(v) = f.as_mut().poll(cx) {
                return Poll::Ready(Raced::Done(v));
            }
            // The timer is polled only while unarmed, so it is never polled after completing.
            if self.unarmed && Pin::new(&mut self.arm_timer).poll(cx).is_ready() {
                self.arm_timer.let_go();
                self.arm();
            }
            if let Some(k) = self.keepalive.as_mut()
                && k.poll_due(cx).is_err()
            {
                self.gone = true;
                return Poll::Ready(Raced::ClientGone);
            }
            if self.client_gone(cx) {
                return Poll::Ready(Raced::ClientGone);
            }
            Poll::Pending
        })
        .await
    }

    /// Stop watching and hand back the read buffer: as it was if the watch never armed, empty
    /// if it did (the connection then waits for its next request holding none), and the wait
    /// if it is still armed: the connection's wait for its next request (`next_bytes`) takes
    /// it over instead of cancelling it and arming another. It consumed nothing from the
    /// socket.
    pub fn finish(self) -> (BytesMut, Option<Readiness>) {
        (self.buf, self.wait)
    }
}

/// A readiness wait on `rd`'s socket, registered when first polled.
pub fn readiness(rd: &TcpOwnedReadHalf) -> Readiness {
    let stream = rd.0.clone();
    Box::pin(async move {
        // SAFETY: the wait (`nowait::readable`) only reads the descriptor, in its first poll
        // and in a readiness check (`poll(2)`, epoll) when woken; the `Rc` keeps the stream
        // alive for as long as the wait. No `&mut` to the stream is held across an await: the
        // write half makes one only for the span of submitting a write.
        let s: &TcpStream = unsafe { &*stream.get() };
        crate::http::nowait::readable(s).await
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn pair() -> (std::net::TcpStream, std::net::TcpStream) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let client =
            std::net::TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let (server, _) = listener.accept().expect("accept");
        (client, server)
    }

    /// `peek` until loopback has delivered what the client did (bounded: a second).
    fn peek_soon(server: &std::net::TcpStream) -> Woke {
        for _ in 0..1000 {
            let woke = peek(server.as_raw_fd());
            if woke != Woke::Nothing {
                return woke;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        Woke::Nothing
    }

    #[test]
    fn peek_tells_a_pipelined_request_from_a_disconnect_and_takes_nothing() {
        let (mut client, server) = pair();
        assert_eq!(peek(server.as_raw_fd()), Woke::Nothing);
        client.write_all(b"GET / HTTP/1.1\r\n").expect("write");
        assert_eq!(peek_soon(&server), Woke::Data);
        // The bytes are still there for the next head read.
        let mut got = [0u8; 16];
        std::io::Read::read_exact(&mut &server, &mut got).expect("read");
        assert_eq!(&got, b"GET / HTTP/1.1\r\n");
        drop(client);
        assert_eq!(peek_soon(&server), Woke::Gone);
    }

    /// A task waker that counts its wakes.
    struct Counted(std::sync::atomic::AtomicUsize);

    impl Wake for Counted {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn the_armed_wait_is_polled_only_when_its_own_waker_fired() {
        let task = Arc::new(Counted(Default::default()));
        let task_waker = Waker::from(task.clone());
        let cx = Context::from_waker(&task_waker);
        let mut alarm = None;
        // A new wait is polled once, to register, with the alarm's waker.
        let registered = due(&mut alarm, &cx).expect("the first poll registers the wait");
        // The task's other wakes (its stream's events) do not poll it again.
        assert!(due(&mut alarm, &cx).is_none());
        assert!(due(&mut alarm, &cx).is_none());
        // The wait's readiness marks it woken and wakes the task, once.
        registered.wake_by_ref();
        assert_eq!(task.0.load(Ordering::Relaxed), 1);
        assert!(due(&mut alarm, &cx).is_some());
        assert!(due(&mut alarm, &cx).is_none());
        // Polled by another task's waker: registered again with an alarm for that one.
        let other = Waker::from(Arc::new(Counted(Default::default())));
        assert!(due(&mut alarm, &Context::from_waker(&other)).is_some());
        assert!(due(&mut alarm, &Context::from_waker(&other)).is_none());
        // The old registration's wake no longer counts for the wait.
        registered.wake();
        assert!(due(&mut alarm, &Context::from_waker(&other)).is_none());
    }

    #[test]
    fn a_reset_is_a_disconnect() {
        let (client, server) = pair();
        crate::http::nowait::reset_on_close(client.as_raw_fd()).expect("SO_LINGER");
        drop(client);
        assert_eq!(peek_soon(&server), Woke::Gone);
    }
}
