//! The stream as monoio's reader and writer (the response head and the request go through
//! these; a held stream's body is read by `TlsStream::read_into`).

use super::TlsStream;
use monoio::BufResult;
use monoio::buf::{IoBuf, IoBufMut, IoVecBuf, IoVecBufMut};
use monoio::io::{AsyncReadRent, AsyncWriteRent};
use std::io;
use std::mem::MaybeUninit;

impl AsyncReadRent for TlsStream {
    async fn read<T: IoBufMut>(&mut self, mut buf: T) -> BufResult<usize, T> {
        // SAFETY: an `IoBufMut` is valid for writes of `bytes_total()` bytes at `write_ptr()`.
        let dst = unsafe {
            std::slice::from_raw_parts_mut(
                buf.write_ptr().cast::<MaybeUninit<u8>>(),
                buf.bytes_total(),
            )
        };
        let res = self.read_plain(dst).await;
        if let Ok(n) = res {
            // SAFETY: `read_plain` initialised the first `n` bytes at `write_ptr`.
            unsafe { buf.set_init(n) };
        }
        (res, buf)
    }

    /// Into the first slice only (a short read, as `read` may be).
    async fn readv<T: IoVecBufMut>(&mut self, mut buf: T) -> BufResult<usize, T> {
        let dst: &mut [MaybeUninit<u8>] = match buf.write_iovec_len() {
            0 => &mut [],
            // SAFETY: the buffer holds `write_iovec_len()` iovecs at `write_iovec_ptr()`, each
            // valid for writes of its length while `buf` lives (this whole call).
            _ => unsafe {
                let v = *buf.write_iovec_ptr();
                std::slice::from_raw_parts_mut(v.iov_base.cast::<MaybeUninit<u8>>(), v.iov_len)
            },
        };
        let res = self.read_plain(dst).await;
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
        self.send_unsent().await
    }

    async fn shutdown(&mut self) -> io::Result<()> {
        self.send_unsent().await?;
        self.close_now()?;
        self.send_unsent().await?;
        self.tcp.shutdown().await
    }
}
