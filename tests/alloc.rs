//! No allocation per event on the forwarding path: the chunk tracker and the SSE scanner read
//! a long chunked stream (split into network-sized reads) under a counting allocator.

use ringside::http::chunk::ChunkTracker;
use ringside::sse::Scanner;
use ringside::sse::watchdog::{Watchdog, WatchdogSettings};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

#[path = "fixtures/streams.rs"]
mod streams;

struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// Count only this test's own thread (the harness's threads may allocate meanwhile).
    static COUNTING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn count() {
    if COUNTING.with(|c| c.get()) {
        ALLOCS.fetch_add(1, Relaxed);
    }
}

// SAFETY: every call is passed to the system allocator unchanged; counting touches only a
// thread-local flag and an atomic, which allocate nothing.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        count();
        // SAFETY: forwarding to the system allocator with the caller's layout.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: `p` came from `alloc` above with this layout.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        count();
        // SAFETY: as above.
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn chunked(stream: &[u8], times: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for _ in 0..times {
        for piece in stream.chunks(173) {
            out.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
            out.extend_from_slice(piece);
            out.extend_from_slice(b"\r\n");
        }
    }
    out.extend_from_slice(b"0\r\n\r\n");
    out
}

#[test]
fn reading_along_allocates_nothing_per_event() {
    for stream in [streams::OPENAI_CHAT, streams::RESPONSES, streams::ANTHROPIC] {
        let body = chunked(stream.as_bytes(), 200);
        let mut tracker = ChunkTracker::new();
        let mut scanner = Scanner::default();
        let mut dog = Watchdog::new(
            WatchdogSettings {
                enabled: true,
                ..Default::default()
            },
            0,
        );
        let mut events = 0u64;
        COUNTING.with(|c| c.set(true));
        let before = ALLOCS.load(Relaxed);
        for (i, read) in body.chunks(1460).enumerate() {
            tracker
                .feed(read, |p| scanner.feed(p, |_| events += 1))
                .expect("valid framing");
            dog.observe(i as u64, scanner.totals.text_bytes);
            let _ = dog.too_slow(i as u64, scanner.totals.protected);
        }
        let allocs = ALLOCS.load(Relaxed) - before;
        COUNTING.with(|c| c.set(false));
        assert!(tracker.is_done());
        assert!(events > 1000, "{events} events");
        assert_eq!(allocs, 0, "{allocs} allocations for {events} events");
    }
}
