//! Reading heads and bodies off monoio streams into one growable buffer, with limits and
//! deadlines. Reads append at the buffer's end (monoio reads at offset 0 of whatever buffer it
//! is given, so we hand it the spare capacity as a slice).

use super::chunk::{ChunkError, ChunkTracker};
use super::head::{Framing, Head, HeadError, HeadLimits, parse_request};
use bytes::{Bytes, BytesMut};
use monoio::buf::IoBufMut;
use monoio::io::AsyncReadRent;
use std::io;
use std::time::Duration;

/// Smallest free space we offer a read; also the initial buffer size.
pub const READ_CHUNK: usize = 16 * 1024;

/// Bodies up to this size are copied out of the read buffer rather than shared with it.
const COPY_BODY_UP_TO: usize = READ_CHUNK / 2;

/// Read once, appending to `buf`. Returns the number of bytes read (0 = EOF).
/// If this future is dropped mid-read the buffer is lost: only drop it on abort paths.
pub async fn read_more<S: AsyncReadRent>(s: &mut S, buf: &mut BytesMut) -> io::Result<usize> {
    make_room(buf);
    let b = std::mem::take(buf);
    let len = b.len();
    let cap = b.capacity();
    let (res, slice) = s.read(b.slice_mut(len..cap)).await;
    *buf = slice.into_inner();
    res
}

/// Make room for a read: a connection that gave its buffer back while it waited takes one
/// from the core's pool (the few bytes a small one holds, such as the client watch's, are
/// moved into it); a nearly full buffer grows.
pub fn make_room(buf: &mut BytesMut) {
    if buf.capacity() < READ_CHUNK / 4 {
        let mut pooled = super::buffers::take();
        pooled.extend_from_slice(buf);
        // The one replaced may itself be a pooled buffer with its bytes near its end: it goes
        // back rather than being freed (a parked copy or an empty one is simply dropped).
        let mut old = std::mem::replace(buf, pooled);
        old.clear();
        super::buffers::give_back(old);
    } else if buf.capacity() - buf.len() < READ_CHUNK / 4 {
        buf.reserve(READ_CHUNK);
    }
}

/// Why reading a request failed.
#[derive(Debug)]
pub enum ReadError {
    /// The peer closed (cleanly, between requests, when `buf` was empty).
    Closed,
    Io(io::Error),
    /// Deadline passed while reading (408).
    Timeout,
    Head(HeadError),
    /// Body over the limit (413).
    BodyTooLarge,
    /// Bad chunked framing in the body (400).
    BadChunk(ChunkError),
    /// The peer closed in the middle of a message (400).
    Truncated,
}

async fn read_with_deadline<S: AsyncReadRent>(
    s: &mut S,
    buf: &mut BytesMut,
    deadline: std::time::Instant,
) -> Result<usize, ReadError> {
    if deadline <= crate::clock::instant() {
        return Err(ReadError::Timeout);
    }
    match crate::timer::timeout_at(deadline, read_more(s, buf)).await {
        Ok(Ok(n)) => Ok(n),
        Ok(Err(e)) => Err(ReadError::Io(e)),
        Err(_) => Err(ReadError::Timeout),
    }
}

/// Read and parse one request head. `idle` bounds the wait for the first byte (keep-alive idle),
/// `head_timeout` bounds the time from the first byte to the end of the head.
pub async fn read_request_head<S: AsyncReadRent>(
    s: &mut S,
    buf: &mut BytesMut,
    limits: HeadLimits,
    idle: Duration,
    head_timeout: Duration,
) -> Result<Head, ReadError> {
    if buf.is_empty() {
        let deadline = crate::clock::instant() + idle;
        match read_with_deadline(s, buf, deadline).await {
            Ok(0) => return Err(ReadError::Closed),
            Ok(_) => {}
            // An idle keep-alive connection that times out is simply closed, no 408.
            Err(ReadError::Timeout) => return Err(ReadError::Closed),
            Err(e) => return Err(e),
        }
    }
    let deadline = crate::clock::instant() + head_timeout;
    loop {
        match parse_request(buf, limits).map_err(ReadError::Head)? {
            Some((head, used)) => {
                let _ = buf.split_to(used);
                return Ok(head);
            }
            None => {
                if read_with_deadline(s, buf, deadline).await? == 0 {
                    return Err(ReadError::Truncated);
                }
            }
        }
    }
}

/// Make room for `more` bytes in a body capped at `max`: capacity doubles as usual but never
/// past `max`, so a body near the limit holds at most `max` bytes (plain doubling would reach
/// twice the limit, and three times during the copy).
fn grow_within(body: &mut Vec<u8>, more: usize, max: usize) {
    let need = body.len() + more;
    if need > body.capacity() {
        let target = (body.capacity() * 2).max(need).max(4096).min(max.max(need));
        body.reserve_exact(target - body.len());
    }
}

/// Read a whole request body (Content-Length or chunked), capped at `max`.
pub async fn read_body<S: AsyncReadRent>(
    s: &mut S,
    buf: &mut BytesMut,
    framing: Framing,
    max: usize,
    timeout: Duration,
) -> Result<Bytes, ReadError> {
    let deadline = crate::clock::instant() + timeout;
    match framing {
        Framing::Empty | Framing::Close => Ok(Bytes::new()),
        Framing::Length(n) => {
            if n > max as u64 {
                return Err(ReadError::BodyTooLarge);
            }
            let n = n as usize;
            if buf.capacity() < n {
                buf.reserve(n - buf.len());
            }
            while buf.len() < n {
                if read_with_deadline(s, buf, deadline).await? == 0 {
                    return Err(ReadError::Truncated);
                }
            }
            if n <= COPY_BODY_UP_TO {
                // A small body gets its own allocation, so the connection's read buffer is
                // free again the moment the request is read: a long request (a held stream)
                // then gives it back to the core instead of pinning 16 KiB for a 200-byte body.
                let body = Bytes::copy_from_slice(&buf[..n]);
                bytes::Buf::advance(buf, n);
                return Ok(body);
            }
            Ok(buf.split_to(n).freeze())
        }
        Framing::Chunked => {
            let mut tracker = ChunkTracker::new();
            let mut body = Vec::new();
            let mut over = false;
            loop {
                let used = tracker
                    .feed(buf, |p| {
                        if over || body.len() + p.len() > max {
                            over = true;
                        } else {
                            grow_within(&mut body, p.len(), max);
                            body.extend_from_slice(p);
                        }
                    })
                    .map_err(ReadError::BadChunk)?;
                let _ = buf.split_to(used);
                if over {
                    return Err(ReadError::BodyTooLarge);
                }
                if tracker.is_done() {
                    return Ok(Bytes::from(body));
                }
                if read_with_deadline(s, buf, deadline).await? == 0 {
                    return Err(ReadError::Truncated);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::grow_within;

    #[test]
    fn a_growing_body_never_holds_more_than_its_cap() {
        let max = 8 * 1024 * 1024 + 123;
        let mut body = Vec::new();
        while body.len() + 10_000 <= max {
            grow_within(&mut body, 10_000, max);
            body.extend_from_slice(&[0u8; 10_000]);
            assert!(body.capacity() <= max, "{}", body.capacity());
        }
        // Small bodies still grow geometrically (few copies).
        let mut small = Vec::new();
        let mut grows = 0;
        for _ in 0..1000 {
            let cap = small.capacity();
            grow_within(&mut small, 100, max);
            small.extend_from_slice(&[0u8; 100]);
            grows += usize::from(small.capacity() != cap);
        }
        assert!(grows <= 6, "{grows}");
    }
}
