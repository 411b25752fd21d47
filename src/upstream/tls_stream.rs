//! A TLS upstream stream: rustls driven by readiness, with no buffers of our own.
//!
//! rustls keeps what TLS itself needs (the record it is assembling, decrypted bytes not yet
//! read, records not yet sent). Bytes go between the socket and those buffers by non-blocking
//! syscalls on a socket readiness said is ready (`http::nowait`), never by an io_uring
//! operation that would need a buffer of its own to outlive it. monoio-rustls, used before,
//! gave every connection a 16 KiB read buffer and a 16 KiB write buffer for its whole life on
//! top of rustls's own: a held TLS stream cost 40 KiB of the proxy's memory against 8 for a
//! plain one (`benches/held_streams_oha.sh` with `UPSTREAM_TLS=1`).
//!
//! Dropping any future here at any `.await` is safe: no operation is ever left in flight, and
//! rustls's state changes only inside synchronous calls.

use crate::http::nowait::{self, Nonblocking};
use bytes::BytesMut;
use monoio::BufResult;
use monoio::buf::{IoBuf, IoBufMut, IoVecBuf, IoVecBufMut};
use monoio::io::{AsyncReadRent, AsyncWriteRent};
use monoio::net::TcpStream;
use rustls::ClientConnection;
use std::io::{self, BufRead, Write};
use std::os::fd::AsRawFd;
use std::sync::Arc;

pub struct TlsStream {
    tcp: TcpStream,
    conn: ClientConnection,
}

impl TlsStream {
    /// Open a TLS session on `tcp` and complete its handshake.
    pub async fn connect(
        tcp: TcpStream,
        config: Arc<rustls::ClientConfig>,
        name: rustls_pki_types::ServerName<'static>,
    ) -> io::Result<TlsStream> {
        let conn = ClientConnection::new(config, name).map_err(io::Error::other)?;
        let mut s = TlsStream { tcp, conn };
        while s.conn.is_handshaking() {
            if s.conn.wants_write() {
                s.send_pending().await?;
            } else if s.receive().await? == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the server closed the connection during the TLS handshake",
                ));
            }
        }
        s.send_pending().await?;
        Ok(s)
    }

    /// Send the records rustls holds, waiting while the socket is full.
    async fn send_pending(&mut self) -> io::Result<()> {
        while self.conn.wants_write() {
            match self.conn.write_tls(&mut Nonblocking(self.tcp.as_raw_fd())) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.tcp.writable(false).await?,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Take what the socket holds into rustls, waiting for readiness first when it holds
    /// nothing, and decrypt it. `Ok(0)`: the server closed the TCP connection.
    async fn receive(&mut self) -> io::Result<usize> {
        let n = loop {
            match self.conn.read_tls(&mut Nonblocking(self.tcp.as_raw_fd())) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    nowait::readable(&self.tcp).await?;
                }
                Err(e) => return Err(e),
            }
        };
        let processed = self.conn.process_new_packets();
        // What the records asked for (an alert on a bad one, a key update's answer) goes out
        // as far as the socket takes it now; the rest before the next write.
        if self.conn.wants_write() {
            let _ = self.conn.write_tls(&mut Nonblocking(self.tcp.as_raw_fd()));
        }
        processed.map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        Ok(n)
    }

    /// Wait until decrypted bytes, the server's close or an error can be read.
    async fn until_readable(&mut self) -> io::Result<()> {
        while matches!(self.conn.reader().fill_buf(), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
        {
            self.receive().await?;
        }
        Ok(())
    }

    /// Copy decrypted bytes to `dst` (up to `len`): `Ok(0)` after the server's close_notify,
    /// `UnexpectedEof` when the TCP connection closed without one.
    fn copy_plain(&mut self, dst: *mut u8, len: usize) -> io::Result<usize> {
        let mut reader = self.conn.reader();
        let mut copied = 0;
        while copied < len {
            let chunk = match reader.fill_buf() {
                Ok(c) => c,
                Err(_) if copied > 0 => break,
                Err(e) => return Err(e),
            };
            if chunk.is_empty() {
                break;
            }
            let n = chunk.len().min(len - copied);
            // SAFETY: the caller's `dst` is valid for writes of `len` bytes; `chunk` is
            // rustls's own memory, which cannot overlap it.
            unsafe { std::ptr::copy_nonoverlapping(chunk.as_ptr(), dst.add(copied), n) };
            reader.consume(n);
            copied += n;
        }
        Ok(copied)
    }

    /// The next decrypted bytes into `buf`. `park`: hold no pooled buffer while waiting for
    /// them (a held event stream waits far longer than it reads): `buf` takes one only when
    /// there is something to copy into it.
    pub async fn read_into(&mut self, buf: &mut BytesMut, park: bool) -> io::Result<usize> {
        if park {
            crate::http::buffers::park(buf);
        }
        self.until_readable().await?;
        crate::http::io::make_room(buf);
        let spare = buf.spare_capacity_mut();
        let n = self.copy_plain(spare.as_mut_ptr().cast(), spare.len())?;
        // SAFETY: `copy_plain` initialised the first `n` bytes of the spare capacity.
        unsafe { buf.set_len(buf.len() + n) };
        Ok(n)
    }
}

impl AsyncReadRent for TlsStream {
    async fn read<T: IoBufMut>(&mut self, mut buf: T) -> BufResult<usize, T> {
        if let Err(e) = self.until_readable().await {
            return (Err(e), buf);
        }
        let res = self.copy_plain(buf.write_ptr(), buf.bytes_total());
        if let Ok(n) = res {
            // SAFETY: `copy_plain` initialised the first `n` bytes at `write_ptr`.
            unsafe { buf.set_init(n) };
        }
        (res, buf)
    }

    /// Into the first slice only (a short read, as `read` may be).
    async fn readv<T: IoVecBufMut>(&mut self, mut buf: T) -> BufResult<usize, T> {
        if let Err(e) = self.until_readable().await {
            return (Err(e), buf);
        }
        let (ptr, len) = match buf.write_iovec_len() {
            0 => (std::ptr::null_mut(), 0),
            // SAFETY: the buffer holds `write_iovec_len()` iovecs at `write_iovec_ptr()`.
            _ => unsafe {
                let v = *buf.write_iovec_ptr();
                (v.iov_base.cast::<u8>(), v.iov_len)
            },
        };
        let res = self.copy_plain(ptr, len);
        if let Ok(n) = res {
            // SAFETY: the first `n` bytes of the first slice were initialised.
            unsafe { buf.set_init(n) };
        }
        (res, buf)
    }
}

impl AsyncWriteRent for TlsStream {
    async fn write<T: IoBuf>(&mut self, buf: T) -> BufResult<usize, T> {
        // SAFETY: an `IoBuf` is valid for reads of `bytes_init()` bytes at `read_ptr()`.
        let data = unsafe { std::slice::from_raw_parts(buf.read_ptr(), buf.bytes_init()) };
        let res = self.write_slices(std::iter::once(data)).await;
        (res, buf)
    }

    async fn writev<T: IoVecBuf>(&mut self, buf: T) -> BufResult<usize, T> {
        let slices = (0..buf.read_iovec_len()).map(|i| {
            // SAFETY: the buffer holds `read_iovec_len()` iovecs at `read_iovec_ptr()`, each
            // valid for reads of its length while `buf` lives (this whole call).
            unsafe {
                let v = *buf.read_iovec_ptr().add(i);
                std::slice::from_raw_parts(v.iov_base.cast::<u8>().cast_const(), v.iov_len)
            }
        });
        let res = self.write_slices(slices).await;
        (res, buf)
    }

    async fn flush(&mut self) -> io::Result<()> {
        self.send_pending().await
    }

    async fn shutdown(&mut self) -> io::Result<()> {
        self.conn.send_close_notify();
        self.send_pending().await?;
        self.tcp.shutdown().await
    }
}

impl TlsStream {
    /// Encrypt as much of `slices` as rustls takes now (its outgoing limit) and send it.
    async fn write_slices<'b>(
        &mut self,
        slices: impl Iterator<Item = &'b [u8]>,
    ) -> io::Result<usize> {
        // Records left from before (a key update's answer) go first, so rustls has room.
        self.send_pending().await?;
        let mut taken = 0;
        for s in slices {
            let n = self.conn.writer().write(s)?;
            taken += n;
            if n < s.len() {
                break;
            }
        }
        self.send_pending().await?;
        Ok(taken)
    }
}
