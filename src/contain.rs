//! Panic containment for connection tasks.
//!
//! monoio does not catch a panic in a task (it leaves that out for speed): the panic unwinds
//! through the core's runtime and ends the core's thread, and with it every connection, stream
//! and queued request on that core. A bug that one request reaches must cost that request only.
//! So each connection's task runs inside [`Contained`]: a panic while polling it is caught,
//! counted, reported once on stderr (the standard hook has already printed where it happened),
//! and the task ends there. Ending it drops its future, which closes the client socket and
//! releases what the request held through its guards (concurrency permits, in-flight counts,
//! pooled connections: a half-read upstream connection is closed, never pooled).
//!
//! Catching costs nothing on the normal path: `catch_unwind` compiles to a call with an
//! unwind landing pad.

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::task::{Context, Poll};

pin_project_lite::pin_project! {
    /// A task whose panics end the task, not the core; see the module docs.
    pub struct Contained<F> {
        #[pin]
        inner: F,
        panics: &'static AtomicU64,
        core: Option<usize>,
    }
}

/// Run `f` with its panics contained; each one adds to `panics`. `core`: the core it runs on
/// (None: the admin thread).
pub fn contained<F: Future<Output = ()>>(
    f: F,
    panics: &'static AtomicU64,
    core: Option<usize>,
) -> Contained<F> {
    Contained {
        inner: f,
        panics,
        core,
    }
}

impl<F: Future<Output = ()>> Future for Contained<F> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.project();
        let inner = this.inner;
        // Unwind safety: after a panic the future is never polled again, only dropped, and the
        // core-local state it touched is plain data whose borrows are released on unwind.
        match catch_unwind(AssertUnwindSafe(move || inner.poll(cx))) {
            Ok(p) => p,
            Err(payload) => {
                let n = this.panics.fetch_add(1, Relaxed) + 1;
                // The message, not a `{:?}` of anything the request carried: the standard hook
                // printed the location already, and payloads are our own format strings.
                let msg = payload
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                crate::log::event(
                    "error",
                    "a connection task panicked: its connection was closed, the core goes on",
                    serde_json::json!({"core": *this.core, "panic": msg, "panics_total": n}),
                );
                Poll::Ready(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::rc::Rc;

    static PANICS: AtomicU64 = AtomicU64::new(0);

    /// A future that is pending once, then panics while holding a guard.
    struct Bomb {
        polled: bool,
        guard: Option<Guard>,
    }
    struct Guard(Rc<Cell<u32>>);
    impl Drop for Guard {
        fn drop(&mut self) {
            self.0.set(self.0.get() + 1);
        }
    }
    impl Future for Bomb {
        type Output = ();
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            if !self.polled {
                self.polled = true;
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            let _held = self.guard.as_ref().map(|g| g.0.clone());
            panic!("a bug one request reached");
        }
    }

    #[test]
    fn a_panicking_task_ends_alone_and_releases_what_it_held() {
        let released = Rc::new(Cell::new(0));
        let finished = Rc::new(Cell::new(false));
        let before = PANICS.load(Relaxed);
        let mut rt = monoio::RuntimeBuilder::<monoio::LegacyDriver>::new()
            .enable_timer()
            .build()
            .expect("runtime");
        let (r, f) = (released.clone(), finished.clone());
        rt.block_on(async move {
            let bomb = Bomb {
                polled: false,
                guard: Some(Guard(r.clone())),
            };
            let h = monoio::spawn(contained(bomb, &PANICS, Some(7)));
            // A neighbour on the same core keeps running after the panic.
            let neighbour = monoio::spawn(async move {
                for _ in 0..3 {
                    monoio::time::sleep(std::time::Duration::from_millis(1)).await;
                }
                f.set(true);
            });
            h.await;
            neighbour.await;
        });
        assert_eq!(PANICS.load(Relaxed), before + 1, "counted once");
        assert_eq!(released.get(), 1, "the task's guard was dropped");
        assert!(finished.get(), "the core went on");
    }

    #[test]
    fn a_task_that_does_not_panic_is_untouched() {
        let mut rt = monoio::RuntimeBuilder::<monoio::LegacyDriver>::new()
            .build()
            .expect("runtime");
        // Its own counter: the panicking test above runs alongside and counts into `PANICS`.
        static CALM: AtomicU64 = AtomicU64::new(0);
        let before = CALM.load(Relaxed);
        let got = Rc::new(Cell::new(0));
        let g = got.clone();
        rt.block_on(contained(
            async move {
                monoio::spawn(async {}).await;
                g.set(42);
            },
            &CALM,
            None,
        ));
        assert_eq!(got.get(), 42);
        assert_eq!(CALM.load(Relaxed), before);
    }
}
