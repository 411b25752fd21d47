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
pub fn park(buf: &mut BytesMut) {
    if buf.is_empty() {
        give_back(std::mem::take(buf));
    } else if buf.len() <= PARK_UP_TO && buf.capacity() >= READ_CHUNK {
        let mut pooled = std::mem::replace(buf, BytesMut::from(&buf[..]));
        pooled.clear();
        give_back(pooled);
    }
}

/// How many buffers this core's pool holds (tests).
pub fn pooled() -> usize {
    POOL.with(|p| p.borrow().len())
}

#[cfg(test)]
mod tests {
    use super::*;

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
