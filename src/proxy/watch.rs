//! Watching the client while the upstream works: one read stays pending on the client socket
//! so that a disconnect aborts the upstream at once, instead of at the next write.
//! A pipelined request that arrives meanwhile is kept, not lost.

use bytes::BytesMut;
use monoio::BufResult;
use monoio::buf::{IoBufMut, SliceMut};
use monoio::io::{CancelableAsyncReadRent, Canceller};
use monoio::net::tcp::TcpOwnedReadHalf;
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

type ReadFut<'a> = Pin<Box<dyn Future<Output = BufResult<usize, SliceMut<BytesMut>>> + 'a>>;

/// The result of racing an upstream step against the client going away.
pub enum Raced<T> {
    Done(T),
    ClientGone,
}

pub struct ClientWatch<'a> {
    fut: Option<ReadFut<'a>>,
    canceller: Option<Canceller>,
    saved: Option<BytesMut>,
    gone: bool,
}

impl<'a> ClientWatch<'a> {
    /// Start watching. `buf` is the connection's read buffer; if it already holds bytes of a
    /// pipelined request there is nothing to watch for and the buffer is kept as is.
    pub fn start(rd: &'a mut TcpOwnedReadHalf, mut buf: BytesMut) -> Self {
        if !buf.is_empty() {
            return ClientWatch {
                fut: None,
                canceller: None,
                saved: Some(buf),
                gone: false,
            };
        }
        if buf.capacity() < 1024 {
            buf.reserve(crate::http::io::READ_CHUNK);
        }
        let cap = buf.capacity();
        let canceller = Canceller::new();
        let fut: ReadFut<'a> =
            Box::pin(rd.cancelable_read(buf.slice_mut(0..cap), canceller.handle()));
        ClientWatch {
            fut: Some(fut),
            canceller: Some(canceller),
            saved: None,
            gone: false,
        }
    }

    pub fn is_gone(&self) -> bool {
        self.gone
    }

    /// Await `f`, unless the client disconnects first (then `f` is dropped: an abort path).
    pub async fn race<F: Future>(&mut self, f: F) -> Raced<F::Output> {
        if self.gone {
            return Raced::ClientGone;
        }
        let mut f = std::pin::pin!(f);
        std::future::poll_fn(|cx| {
            if let Poll::Ready(v) = f.as_mut().poll(cx) {
                return Poll::Ready(Raced::Done(v));
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
            return buf;
        }
        self.saved.take().unwrap_or_default()
    }
}
