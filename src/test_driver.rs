//! Tests that run a future on either of monoio's drivers: io_uring, and epoll where Ringside
//! falls back to it. Each call builds a runtime of its own, with the timer on and the core's
//! timer wheel ticking on it.

/// Run `f` to its end on a fresh runtime: io_uring when `uring`, else epoll.
pub fn on_driver<F: std::future::Future>(uring: bool, f: F) -> F::Output {
    // The wheel's ticker is a task of the runtime: an earlier runtime on this thread may have
    // ended with its ticker never dropped, so each starts its own.
    let f = async {
        crate::timer::install();
        f.await
    };
    if uring {
        monoio::RuntimeBuilder::<monoio::IoUringDriver>::new()
            .enable_timer()
            .build()
            .expect("io_uring runtime")
            .block_on(f)
    } else {
        monoio::RuntimeBuilder::<monoio::LegacyDriver>::new()
            .enable_timer()
            .build()
            .expect("epoll runtime")
            .block_on(f)
    }
}
