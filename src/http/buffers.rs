//! Read buffers that belong to the core, not to the stream. A held event stream spends almost
//! all its life waiting for the next event; it waits for readiness with no buffer, takes one
//! from its core's pool when bytes are there, and gives it back once they are written on. So
//! the memory of thousands of held streams is the kernel's socket buffers plus a few pooled
//! buffers per core, not 16 KiB each (HAProxy's model: a buffer only while data is in flight).

use bytes::BytesMut;
use std::cell::RefCell;

use super::io::READ_CHUNK;

/// Buffers a core keeps for reuse; more are freed (a burst of simultaneous reads is rare and
/// short, and a pool this size is 1 MiB per core).
const KEEP: usize = 64;

thread_local! {
    static POOL: RefCell<Vec<BytesMut>> = const { RefCell::new(Vec::new()) };
}

/// A read buffer of at least [`READ_CHUNK`] free bytes: a pooled one, else a new one.
pub fn take() -> BytesMut {
    POOL.with(|p| p.borrow_mut().pop())
        .unwrap_or_else(|| BytesMut::with_capacity(READ_CHUNK))
}

/// Give back an empty buffer whose bytes have all been written on. It goes to the pool only
/// when its whole allocation is free again (every `Bytes` split off it has been dropped);
/// otherwise it is simply dropped, and the allocation goes when its last piece does.
pub fn give_back(mut b: BytesMut) {
    if !b.is_empty() || b.capacity() == 0 {
        return;
    }
    if b.try_reclaim(READ_CHUNK) {
        POOL.with(|p| {
            let mut p = p.borrow_mut();
            if p.len() < KEEP {
                p.push(b);
            }
        });
    }
}

/// Held bytes up to this size are moved out of a pooled buffer before a wait.
const PARK_UP_TO: usize = 1024;

/// Before a wait: an empty buffer goes back to the pool, and a few held bytes (the start of an
/// event a stream guard holds back, half an event) move into an allocation of their own, so
/// that the wait pins no 16 KiB buffer. The next read moves them back into a pooled one
/// (`io::make_room`).
///
/// Which buffer is pooled is told by its allocation, not its room: bytes left after a head or
/// an event was split off sit part-way into a pooled buffer, whose capacity then counts only
/// from them to its end (measured: with a `capacity() >= READ_CHUNK` test, a stream whose
/// response head came with half an event held its 16 KiB through the wait, and thousands of
/// streams starting together held thousands of buffers at once). A parked copy is exactly as
/// long as its bytes.
pub fn park(buf: &mut BytesMut) {
    if buf.is_empty() {
        give_back(std::mem::take(buf));
    } else if buf.len() <= PARK_UP_TO && !is_parked(buf) {
        let mut pooled = std::mem::replace(buf, BytesMut::from(&buf[..]));
        pooled.clear();
        give_back(pooled);
    }
}

/// Whether `buf` is a parked copy: its capacity is its length. A pooled buffer whose bytes end
/// exactly at its end reads the same; it is then kept through the wait, as before.
fn is_parked(buf: &BytesMut) -> bool {
    buf.capacity() == buf.len()
}

/// How many buffers this core's pool holds (tests).
pub fn pooled() -> usize {
    POOL.with(|p| p.borrow().len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_bytes_part_way_into_a_pooled_buffer_are_parked_and_the_buffer_pooled() {
        // A response head split off the front leaves half an event behind it: the buffer's
        // room now counts from those bytes, below READ_CHUNK, but it is still a pooled one.
        let mut buf = take();
        buf.extend_from_slice(b"HTTP/1.1 200 OK\r\n\r\ndata: {\"half");
        let _ = buf.split_to(19);
        assert!(buf.capacity() < READ_CHUNK);
        let before = pooled();
        park(&mut buf);
        assert_eq!(&buf[..], b"data: {\"half");
        assert_eq!(
            buf.capacity(),
            buf.len(),
            "the bytes moved into their own allocation"
        );
        assert_eq!(
            pooled(),
            before + 1,
            "the pooled buffer went back to the pool"
        );
        // Parked again (a spurious wake): nothing moves.
        park(&mut buf);
        assert_eq!(&buf[..], b"data: {\"half");
        assert_eq!(pooled(), before + 1);
        // The next read takes a pooled buffer and gives the parked copy up.
        crate::http::io::make_room(&mut buf);
        assert!(buf.capacity() >= READ_CHUNK / 4);
        assert_eq!(&buf[..], b"data: {\"half");
        assert_eq!(pooled(), before);
    }

    #[test]
    fn a_pooled_buffer_too_full_to_read_into_goes_back_when_replaced() {
        // Bytes near the end of a pooled buffer leave little room: the next read moves them
        // into another pooled buffer, and this one returns to the pool instead of being freed.
        let mut buf = take();
        buf.resize(READ_CHUNK - 100, b'x');
        let _ = buf.split_to(READ_CHUNK - 1_200);
        assert!(buf.capacity() < READ_CHUNK / 4);
        // (A buffer in the pool for the read to take.)
        give_back(BytesMut::with_capacity(READ_CHUNK));
        let before = pooled();
        crate::http::io::make_room(&mut buf);
        assert_eq!(buf.len(), 1_100);
        assert!(buf.capacity() >= READ_CHUNK / 4);
        // One taken for the read, the replaced one given back.
        assert_eq!(pooled(), before);
    }

    #[test]
    fn a_buffer_comes_back_only_when_its_pieces_are_gone() {
        let mut b = take();
        b.extend_from_slice(b"data: {}\n\n");
        let piece = b.split().freeze();
        let before = pooled();
        // A piece is still being written: the buffer cannot be reused yet.
        give_back(std::mem::take(&mut b));
        assert_eq!(pooled(), before);
        drop(piece);
        let mut c = take();
        c.extend_from_slice(b"event");
        let piece = c.split().freeze();
        drop(piece);
        give_back(c);
        assert_eq!(pooled(), before + 1);
        let again = take();
        assert!(again.capacity() >= READ_CHUNK);
        assert_eq!(pooled(), before);
    }
}
