//! Watching the client while the upstream works: one read stays pending on the client socket
//! so that a disconnect aborts the upstream at once, instead of at the next write.
//! A pipelined request that arrives meanwhile is kept, not lost.
//!
//! The watch is armed only once a request has run for [`ARM_AFTER`]: most JSON requests finish
//! sooner, and for them a pending read plus its cancellation would be two extra I/O operations.

use bytes::BytesMut;
use monoio::BufResult;
use monoio::buf::{IoBufMut, SliceMut};
use monoio::io::{CancelableAsyncReadRent, Canceller};
use monoio::net::tcp::TcpOwnedReadHalf;
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::{Duration, Instant};

use crate::timer;

/// What the watch reads into: enough to tell a disconnect from a pipelined request.
const WATCH_BYTES: usize = 64;

/// How long a request runs before its client is watched.
pub const ARM_AFTER: Duration = Duration::from_millis(20);

type ReadFut<'a> = Pin<Box<dyn Future<Output = BufResult<usize, SliceMut<BytesMut>>> + 'a>>;

/// The result of racing an upstream step against the client going away.
pub enum Raced<T> {
    Done(T),
    ClientGone,
}

pub struct ClientWatch<'a> {
    /// The read half and buffer, until the watch is armed.
    idle: Option<(&'a mut TcpOwnedReadHalf, BytesMut)>,
    arm_at: Instant,
    /// Fires at `arm_at`; one per watch, made at the first race that could need it (a timer
    /// per race would be registered and cancelled for every upstream read of a stream).
    arm_timer: Option<timer::Sleep>,
    fut: Option<ReadFut<'a>>,
    canceller: Option<Canceller>,
    saved: Option<BytesMut>,
    gone: bool,
}

impl<'a> ClientWatch<'a> {
    /// Start watching. `buf` is the connection's read buffer; if it already holds bytes of a
    /// pipelined request there is nothing to watch for and the buffer is kept as is.
    pub fn start(rd: &'a mut TcpOwnedReadHalf, buf: BytesMut) -> Self {
        let arm_at = crate::clock::instant() + ARM_AFTER;
        let (idle, saved) = if buf.is_empty() {
            (Some((rd, buf)), None)
        } else {
            (None, Some(buf))
        };
        ClientWatch {
            idle,
            arm_at,
            arm_timer: None,
            fut: None,
            canceller: None,
            saved,
            gone: false,
        }
    }

    /// Put a read on the client socket.
    fn arm(&mut self) {
        let Some((rd, buf)) = self.idle.take() else {
            return;
        };
        // A request still running is a long one (a held stream): its connection's read buffer
        // goes back to the core while it runs, and the watch reads into a few bytes (a
        // disconnect reads none; a pipelined request's first bytes are kept, the rest read
        // later as usual).
        crate::http::buffers::give_back(buf);
        let buf = BytesMut::with_capacity(WATCH_BYTES);
        let cap = buf.capacity();
        let canceller = Canceller::new();
        let handle = canceller.handle();
        self.fut = Some(Box::pin(async move {
            rd.cancelable_read(buf.slice_mut(0..cap), handle).await
        }));
        self.canceller = Some(canceller);
    }

    /// Await `f`, unless the client disconnects first (then `f` is dropped: an abort path).
    /// Hot callers pass `pin!(fut)`: the future then stays where the caller built it, instead
    /// of being copied into this one and again into the caller's state (~1.5 KB a time).
    pub async fn race<F: Future>(&mut self, f: F) -> Raced<F::Output> {
        if self.gone {
            return Raced::ClientGone;
        }
        let mut f = std::pin::pin!(f);
        if self.idle.is_some() && self.arm_timer.is_none() {
            self.arm_timer = Some(timer::sleep_until(self.arm_at));
        }
        std::future::poll_fn(|cx| {
            if let Poll::Ready(v) = f.as_mut().poll(cx) {
                return Poll::Ready(Raced::Done(v));
            }
            // The timer is polled only while unarmed, so it is never polled after completing.
            if self.idle.is_some()
                && let Some(t) = self.arm_timer.as_mut()
                && Pin::new(t).poll(cx).is_ready()
            {
                self.arm_timer = None;
                self.arm();
            }
            if let Some(w) = self.fut.as_mut()
                && let Poll::Ready((res, slice)) = w.as_mut().poll(cx)
            {
                self.fut = None;
                self.saved = Some(slice.into_inner());
                match res {
                    // The client sent more bytes (a pipelined request): keep them, stop watching.
                    Ok(n) if n > 0 => {}
                    _ => {
                        self.gone = true;
                        return Poll::Ready(Raced::ClientGone);
                    }
                }
            }
            Poll::Pending
        })
        .await
    }

    /// Stop watching and hand back the read buffer (with any bytes the client sent meanwhile).
    pub async fn finish(mut self) -> BytesMut {
        if let Some(fut) = self.fut.take() {
            if let Some(c) = self.canceller.take() {
                let _ = c.cancel();
            }
            let (res, slice) = fut.await;
            let buf = slice.into_inner();
            if matches!(res, Ok(0)) {
                self.gone = true;
            }
            // Nothing read: the connection waits for its next request with no buffer.
            return if buf.is_empty() { BytesMut::new() } else { buf };
        }
        if let Some((_, buf)) = self.idle.take() {
            return buf;
        }
        match self.saved.take() {
            Some(buf) if !buf.is_empty() || buf.capacity() > WATCH_BYTES => buf,
            _ => BytesMut::new(),
        }
    }
}
