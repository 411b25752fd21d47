//! Reading the client's request body: `100 Continue` when asked for, the size limit answered
//! before the body is read, and each failure as its own status (413, 408, 400).

use super::exchange::Request;
use super::stop::Stop;
use crate::http::io::{ReadError, read_body};
use bytes::{Bytes, BytesMut};
use monoio::io::AsyncWriteRentExt;
use monoio::net::tcp::{TcpOwnedReadHalf, TcpOwnedWriteHalf};
use std::time::Duration;

/// Read (and discard) the body so the connection stays in sync; false if that failed.
pub(super) async fn drain_body(
    ctx: &mut Request<'_>,
    rd: &mut TcpOwnedReadHalf,
    wr: &mut TcpOwnedWriteHalf,
    buf: &mut BytesMut,
) -> bool {
    read_client_body(ctx, rd, wr, buf).await.is_ok()
}

/// The largest body read and thrown away to keep a refused caller's connection open; a larger
/// one is not read at all (the connection closes after the answer).
const DRAIN_REFUSED_MAX: u64 = 64 * 1024;

/// After a refusal decided on the head: read a small body (so the connection stays usable),
/// never a large one, and never send `100 Continue`. False when the connection must close.
pub(super) async fn drain_small_body(
    ctx: &mut Request<'_>,
    rd: &mut TcpOwnedReadHalf,
    _wr: &mut TcpOwnedWriteHalf,
    buf: &mut BytesMut,
) -> bool {
    use crate::http::Framing;
    match ctx.head.framing {
        Framing::Empty => true,
        Framing::Length(n) if n <= DRAIN_REFUSED_MAX && !ctx.head.expects_continue() => {
            let timeout = Duration::from_millis(ctx.config().limits.body_read_timeout_ms);
            read_body(rd, buf, ctx.head.framing, n as usize, timeout)
                .await
                .is_ok()
        }
        _ => false,
    }
}

pub(super) async fn read_client_body(
    ctx: &mut Request<'_>,
    rd: &mut TcpOwnedReadHalf,
    wr: &mut TcpOwnedWriteHalf,
    buf: &mut BytesMut,
) -> Result<Bytes, Stop> {
    let limits = &ctx.config().limits;
    // `100 Continue` is HTTP/1.1 (an HTTP/1.0 client cannot read an interim answer).
    if ctx.head.framing != crate::http::Framing::Empty
        && ctx.head.version_minor >= 1
        && ctx.head.expects_continue()
        && buf.is_empty()
    {
        if let crate::http::Framing::Length(n) = ctx.head.framing
            && n > limits.max_body_bytes as u64
        {
            return Err(Stop::BodyTooLarge {
                max: limits.max_body_bytes,
            });
        }
        let (res, _) = wr.write_all(&b"HTTP/1.1 100 Continue\r\n\r\n"[..]).await;
        if res.is_err() {
            return Err(Stop::ClientGone);
        }
    }
    let timeout = Duration::from_millis(limits.body_read_timeout_ms);
    match read_body(rd, buf, ctx.head.framing, limits.max_body_bytes, timeout).await {
        Ok(b) => {
            ctx.record.bytes_in = b.len() as u64;
            Ok(b)
        }
        Err(ReadError::BodyTooLarge) => {
            // What the refused body held is freed by now: give it back to the system.
            crate::memory::release();
            Err(Stop::BodyTooLarge {
                max: limits.max_body_bytes,
            })
        }
        Err(ReadError::Timeout) => Err(Stop::BodyTimeout),
        Err(ReadError::BadChunk(e)) => Err(Stop::BadChunkedBody(e.to_string())),
        Err(_) => Err(Stop::TruncatedBody),
    }
}
