//! Giving memory back. The binary's allocator (mimalloc) keeps freed memory for reuse, which is
//! right for the steady state; but a refused upload can have held up to `max_body_bytes` that
//! nothing will reuse soon, and a client that sends them on purpose would otherwise grow the
//! process with every attempt. After such a refusal the core's heap is collected, so what it
//! freed goes back to the system.

/// Collect the calling thread's allocator heap (cold path: after a refused large body).
pub fn release() {
    // SAFETY: mi_collect takes no pointers; it only walks the calling thread's own heap. When
    // the process's allocator is not mimalloc (the library's tests) the heap is empty.
    unsafe { libmimalloc_sys::mi_collect(true) }
}
