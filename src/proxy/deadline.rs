//! A wait's deadline on a timer that is kept and moved, not made anew: a stream's reads (and,
//! on a second one, its writes) then share one wheel entry instead of registering one and
//! cancelling it for every wait.

use crate::timer::{Sleep, sleep_until};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A kept timer: none until the first wait.
pub type Timer<'a> = &'a mut Option<Sleep>;

/// Set the timer to fire at `at` (made on first use).
pub fn set_timer(timer: Timer<'_>, at: std::time::Instant) {
    match timer {
        Some(t) => t.reset(at),
        None => *timer = Some(sleep_until(at)),
    }
}

pin_project_lite::pin_project! {
    /// `f`, unless `timer` fires first (`Err`). A struct, not an `async fn`, so the work is held
    /// once (an async fn holds its argument and then its pinned copy).
    pub struct Before<'t, F> {
        #[pin]
        f: F,
        timer: Timer<'t>,
    }
}

/// `f`, unless `timer` fires first (`Err`). A timer never set never fires.
pub fn before<F: Future>(f: F, timer: Timer<'_>) -> Before<'_, F> {
    Before { f, timer }
}

impl<F: Future> Future for Before<'_, F> {
    type Output = Result<F::Output, ()>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Poll::Ready(v) = this.f.poll(cx) {
            return Poll::Ready(Ok(v));
        }
        match this.timer.as_mut() {
            Some(t) => Pin::new(t).poll(cx).map(|()| Err(())),
            None => Poll::Pending,
        }
    }
}
