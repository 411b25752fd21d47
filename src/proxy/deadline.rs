//! A wait's deadline on a timer that is kept and moved, not made anew: a stream's reads (and,
//! on a second one, its writes) then share one wheel entry instead of registering one and
//! cancelling it for every wait.

use crate::runtime::timer::{Sleep, sleep_until};
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

/// A kept timer: none until the first wait.
pub type Timer<'a> = &'a mut Option<Sleep>;

/// Set the timer to fire at `at` (made on first use).
pub fn set_timer(timer: Timer<'_>, at: std::time::Instant) {
    match timer {
        Some(t) => t.reset(at),
        None => *timer = Some(sleep_until(at)),
    }
}

/// `f`, unless `timer` fires first (`Err`). A timer never set never fires.
pub async fn before<F: Future>(f: F, timer: Timer<'_>) -> Result<F::Output, ()> {
    let mut f = std::pin::pin!(f);
    std::future::poll_fn(|cx| {
        if let Poll::Ready(v) = f.as_mut().poll(cx) {
            return Poll::Ready(Ok(v));
        }
        match timer.as_mut() {
            Some(t) => Pin::new(t).poll(cx).map(|()| Err(())),
            None => Poll::Pending,
        }
    })
    .await
}
