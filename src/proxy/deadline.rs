//! A wait's deadline on a timer that is kept and moved, not made anew: a stream's reads (and,
//! on a second one, its writes) then share one timer instead of registering one in the timer
//! wheel and cancelling it for every wait. Moving a deadline later is the cheap case, so each
//! timer should serve deadlines that only move later.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

/// A kept timer: none until the first wait.
pub type Timer<'a> = Pin<&'a mut Option<monoio::time::Sleep>>;

/// Set the timer to fire at `at` (made on first use).
pub fn set_timer(mut timer: Timer<'_>, at: std::time::Instant) {
    match timer.as_mut().as_pin_mut() {
        Some(t) => t.reset(at.into()),
        None => timer.set(Some(monoio::time::sleep_until(at.into()))),
    }
}

/// `f`, unless `timer` fires first (`Err`). A timer never set never fires.
pub async fn before<F: Future>(f: F, mut timer: Timer<'_>) -> Result<F::Output, ()> {
    let mut f = std::pin::pin!(f);
    std::future::poll_fn(|cx| {
        if let Poll::Ready(v) = f.as_mut().poll(cx) {
            return Poll::Ready(Ok(v));
        }
        match timer.as_mut().as_pin_mut() {
            Some(t) => t.poll(cx).map(|()| Err(())),
            None => Poll::Pending,
        }
    })
    .await
}
