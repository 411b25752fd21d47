//! One upstream byte stream: plain TCP or TLS over TCP.

use monoio::BufResult;
use monoio::buf::{IoBuf, IoBufMut, IoVecBuf, IoVecBufMut};
use monoio::io::{AsyncReadRent, AsyncWriteRent};
use monoio::net::TcpStream;
use std::os::fd::AsRawFd;

use crate::http::standing;

pub use super::tls_stream::TlsStream;

pub enum UpStream {
    Plain(TcpStream),
    /// Nested, not a third variant: a third cost 8 bytes in every connection's task, where
    /// this fits beside the socket's.
    Layered(Layered),
}

/// A stream with a layer over its socket, boxed (a plain stream is the common case).
pub enum Layered {
    Tls(Box<TlsStream>),
    /// One stream on an HTTP/2 connection (`upstream::h2`): read as an HTTP/1.1 exchange, its
    /// request sent by [`super::h2::stream::H2Stream::send`], never written to.
    H2(Box<super::h2::stream::H2Stream>),
}

fn not_written() -> std::io::Error {
    std::io::Error::other("an HTTP/2 stream's request is sent whole, not written")
}

impl AsyncReadRent for UpStream {
    /// Not boxed: a TLS read is a readiness wait and rustls's record handling, about the size
    /// of a plain read, so it does not grow every connection's task (monoio-rustls's read,
    /// 744 bytes, did, and was boxed).
    async fn read<T: IoBufMut>(&mut self, buf: T) -> BufResult<usize, T> {
        match self {
            UpStream::Plain(s) => s.read(buf).await,
            UpStream::Layered(l) => match l {
                Layered::Tls(s) => s.read(buf).await,
                Layered::H2(s) => s.read_raw(buf).await,
            },
        }
    }

    async fn readv<T: IoVecBufMut>(&mut self, buf: T) -> BufResult<usize, T> {
        match self {
            UpStream::Plain(s) => s.readv(buf).await,
            UpStream::Layered(l) => match l {
                Layered::Tls(s) => s.readv(buf).await,
                Layered::H2(_) => (Err(std::io::ErrorKind::Unsupported.into()), buf),
            },
        }
    }
}

impl AsyncWriteRent for UpStream {
    async fn write<T: IoBuf>(&mut self, buf: T) -> BufResult<usize, T> {
        match self {
            UpStream::Plain(s) => s.write(buf).await,
            UpStream::Layered(l) => match l {
                Layered::Tls(s) => s.write(buf).await,
                Layered::H2(_) => (Err(not_written()), buf),
            },
        }
    }

    async fn writev<T: IoVecBuf>(&mut self, buf: T) -> BufResult<usize, T> {
        match self {
            UpStream::Plain(s) => s.writev(buf).await,
            UpStream::Layered(l) => match l {
                Layered::Tls(s) => s.writev(buf).await,
                Layered::H2(_) => (Err(not_written()), buf),
            },
        }
    }

    async fn flush(&mut self) -> std::io::Result<()> {
        match self {
            UpStream::Plain(s) => s.flush().await,
            UpStream::Layered(l) => match l {
                Layered::Tls(s) => s.flush().await,
                Layered::H2(_) => Ok(()),
            },
        }
    }

    async fn shutdown(&mut self) -> std::io::Result<()> {
        match self {
            UpStream::Plain(s) => s.shutdown().await,
            UpStream::Layered(l) => match l {
                Layered::Tls(s) => s.shutdown().await,
                Layered::H2(_) => Ok(()),
            },
        }
    }
}

impl UpStream {
    /// The HTTP/2 stream this is, if it is one.
    pub fn h2(&self) -> Option<&super::h2::stream::H2Stream> {
        match self {
            UpStream::Layered(l) => match l {
                Layered::H2(s) => Some(s),
                Layered::Tls(_) => None,
            },
            UpStream::Plain(_) => None,
        }
    }

    pub fn h2_mut(&mut self) -> Option<&mut super::h2::stream::H2Stream> {
        match self {
            UpStream::Layered(l) => match l {
                Layered::H2(s) => Some(s),
                Layered::Tls(_) => None,
            },
            UpStream::Plain(_) => None,
        }
    }

    /// Bytes taken off the socket that no read asked for yet (TLS records a session took in,
    /// its end); a plain stream leaves them all on the socket.
    pub fn holds_unread(&self) -> bool {
        match self {
            UpStream::Plain(_) => false,
            UpStream::Layered(l) => match l {
                Layered::Tls(s) => s.holds_unread(),
                Layered::H2(_) => false,
            },
        }
    }

    /// Read a stream's next bytes only once the socket is readable, on plain TCP.
    ///
    /// An io_uring receive armed on an idle socket runs in the kernel the moment the first
    /// segment lands, so a relayed event stream is read (and written on, and ACKed) one event
    /// at a time. Waiting for readiness first and receiving on the core's next turn reads what
    /// arrived meanwhile, as an epoll loop does. The wait holds no pooled buffer (`park`),
    /// and the receive does not wait (`http::nowait`): a
    /// pooled buffer is taken, filled and handed on in one poll, so a burst of events on
    /// thousands of streams holds no buffer across a trip through the ring. Readiness is exact
    /// (`relaxed = false`): on epoll a stale "readable" is checked with one poll(2) rather
    /// than trusted; a receive that finds nothing anyway waits again. TLS waits the same way
    /// unless decrypted bytes are already waiting or the last receive filled its room
    /// (`TlsStream::read_into`).
    pub async fn read_when_ready(&mut self, buf: &mut bytes::BytesMut) -> std::io::Result<usize> {
        match self {
            UpStream::Plain(s) => read_when_ready(s, buf, false).await,
            UpStream::Layered(l) => match l {
                Layered::Tls(s) => s.read_into(buf, true, false).await,
                Layered::H2(s) => s.read_into(buf).await,
            },
        }
    }
}

/// [`UpStream::read_when_ready`] on plain TCP. `standing`: an event stream's wait, through a
/// standing poll where there is one (`http::standing`; its owner releases it, [`PlainBody`]).
async fn read_when_ready(
    s: &mut TcpStream,
    buf: &mut bytes::BytesMut,
    standing: bool,
) -> std::io::Result<usize> {
    let fd = s.as_raw_fd();
    loop {
        crate::http::buffers::park(buf);
        if !(standing && standing::ready(fd).await) {
            crate::http::nowait::readable(s).await?;
        }
        crate::http::io::make_room(buf);
        let room = buf.capacity() - buf.len();
        if let Some(n) = crate::http::nowait::recv(fd, buf)? {
            if standing && n == room {
                // A full buffer may have left bytes that no arrival will announce.
                standing::still_ready(fd);
            }
            return Ok(n);
        }
    }
}

/// The relay's reads of a response body, by kind of stream. The relay is generic over this:
/// an `async` call's future is stored whole in its caller's, so a read through `UpStream`
/// would size every relay by its largest kind. Both reads are a readiness wait and a
/// non-blocking receive (`-Zprint-type-sizes`: TLS 208 bytes, plain 256), so the TLS relay
/// fits in the room the plain one takes in the connection's task (`deliver::commit`;
/// monoio-rustls's read was 744 bytes and its relay was boxed, 2 KB per TLS stream).
pub(crate) trait BodyRead {
    /// The next bytes of the body into `buf`; `event_stream`: wait for readiness first and
    /// hold no pooled buffer across the wait (see [`UpStream::read_when_ready`]).
    async fn read_body(
        &mut self,
        buf: &mut bytes::BytesMut,
        event_stream: bool,
    ) -> std::io::Result<usize>;
}

/// A plain TCP upstream's body. An event stream's reads wait through a standing poll on
/// io_uring (`http::standing`), armed once the stream has waited 20 ms and cancelled when this
/// is dropped, as the relay ends: before the socket can be pooled or closed.
pub(crate) struct PlainBody<'a>(pub &'a mut TcpStream);

impl Drop for PlainBody<'_> {
    fn drop(&mut self) {
        crate::http::standing::release(self.0.as_raw_fd());
    }
}

/// A TLS upstream's body; its event stream's standing poll is released with it, as for
/// [`PlainBody`].
pub(crate) struct TlsBody<'a>(pub &'a mut TlsStream);

impl Drop for TlsBody<'_> {
    fn drop(&mut self) {
        standing::release(self.0.raw_fd());
    }
}

impl BodyRead for PlainBody<'_> {
    async fn read_body(
        &mut self,
        buf: &mut bytes::BytesMut,
        event_stream: bool,
    ) -> std::io::Result<usize> {
        if event_stream {
            read_when_ready(self.0, buf, true).await
        } else {
            crate::http::io::read_more(self.0, buf).await
        }
    }
}

/// One HTTP/2 stream's body (its connection's task reads the socket; nothing to release). An
/// event stream's wait holds no pooled buffer, as a TLS or plain one's does not: the next
/// event is copied into one only once it came.
pub(crate) struct H2Body<'a>(pub &'a mut super::h2::stream::H2Stream);

impl BodyRead for H2Body<'_> {
    async fn read_body(
        &mut self,
        buf: &mut bytes::BytesMut,
        event_stream: bool,
    ) -> std::io::Result<usize> {
        if event_stream {
            crate::http::buffers::park(buf);
        }
        self.0.read_into(buf).await
    }
}

impl BodyRead for TlsBody<'_> {
    async fn read_body(
        &mut self,
        buf: &mut bytes::BytesMut,
        event_stream: bool,
    ) -> std::io::Result<usize> {
        self.0.read_into(buf, event_stream, event_stream).await
    }
}

#[cfg(test)]
mod tests;
