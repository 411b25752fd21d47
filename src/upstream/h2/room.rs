//! Requests waiting for room on a provider's HTTP/2 connections, when none has room and no
//! other may be opened (its servers take no streams now, or the core holds
//! [`super::MAX_CONNECTIONS`] to it): woken when a stream on one ends, a server says a new
//! limit, or a connection goes, each then looking at the pool again. The same list holds
//! those waiting for a connection being opened (`super::Opening`), told when it ends.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

#[derive(Default)]
pub struct Room {
    /// Each waiting request's waker, by the number its wait took when it began (so in order).
    waiting: RefCell<Vec<(u64, Waker)>>,
    next: Cell<u64>,
}

impl Room {
    /// A server said a new limit or a connection went: every request waiting looks again.
    pub fn tell_all(&self) {
        // Taken first: a woken task may wait again at once, on this same list.
        let woken = std::mem::take(&mut *self.waiting.borrow_mut());
        for (_, w) in woken {
            w.wake();
        }
    }

    /// A stream ended: room for one more, told to the request that has waited longest (not
    /// to all: a thousand waiting would each look for the one place).
    pub fn tell_one(&self) {
        let mut waiting = self.waiting.borrow_mut();
        if waiting.is_empty() {
            return;
        }
        let (_, w) = waiting.remove(0);
        drop(waiting);
        w.wake();
    }

    /// Until this request is told (or woken for something else: the caller looks at the pool
    /// again either way). A wait given up (its request's time ran out) leaves nothing behind,
    /// and passes on a place it was told of but did not take.
    pub fn changed(&self) -> Changed<'_> {
        self.changed_in_place(None)
    }

    /// The same, for a request that waited before (`place`, [`Changed::place`]): it keeps its
    /// place in line, so a place it was told of and another request took first costs it the
    /// next one, not a turn at the back.
    pub fn changed_in_place(&self, place: Option<u64>) -> Changed<'_> {
        Changed {
            room: self,
            id: None,
            kept: place,
            done: false,
        }
    }

    /// On the list in order, at `kept` where that place is free, else at the back.
    fn join(&self, kept: Option<u64>, waker: &Waker) -> u64 {
        let next = self.next.get();
        let id = match kept {
            Some(p) if self.at(p).is_err() => p,
            _ => next,
        };
        // (A place kept from before may be past the count: later ones come after it.)
        self.next.set(next.max(id) + 1);
        let i = self.at(id).unwrap_or_else(|i| i);
        self.waiting.borrow_mut().insert(i, (id, waker.clone()));
        id
    }

    fn at(&self, id: u64) -> Result<usize, usize> {
        self.waiting.borrow().binary_search_by_key(&id, |(x, _)| *x)
    }

    /// Requests waiting (for the tests).
    #[cfg(test)]
    pub fn waiting(&self) -> usize {
        self.waiting.borrow().len()
    }
}

/// One request's wait ([`Room::changed`]).
pub struct Changed<'r> {
    room: &'r Room,
    /// Its place on the list, once it waits; off the list, it was told.
    id: Option<u64>,
    /// The place it had in an earlier wait.
    kept: Option<u64>,
    /// It saw that it was told.
    done: bool,
}

impl Changed<'_> {
    /// Its place in line, once it waited (for the request's next wait).
    pub fn place(&self) -> Option<u64> {
        self.id.or(self.kept)
    }
}

impl Future for Changed<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let room = self.room;
        let Some(id) = self.id else {
            self.id = Some(room.join(self.kept, cx.waker()));
            return Poll::Pending;
        };
        match room.at(id) {
            Ok(i) => {
                room.waiting.borrow_mut()[i].1.clone_from(cx.waker());
                Poll::Pending
            }
            Err(_) => {
                self.done = true;
                Poll::Ready(())
            }
        }
    }
}

impl Drop for Changed<'_> {
    fn drop(&mut self) {
        let Some(id) = self.id else { return };
        if self.done {
            return;
        }
        match self.room.at(id) {
            Ok(i) => {
                self.room.waiting.borrow_mut().remove(i);
            }
            // Told of a place and gone without looking: the next one in line is.
            Err(_) => self.room.tell_one(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Room;
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    #[test]
    fn a_wait_ends_when_told_and_one_given_up_leaves_nothing() {
        let room = Room::default();
        let mut cx = Context::from_waker(Waker::noop());
        let mut told = pin!(room.changed());
        assert_eq!(told.as_mut().poll(&mut cx), Poll::Pending);
        assert_eq!(told.as_mut().poll(&mut cx), Poll::Pending, "not told yet");
        {
            let mut given_up = pin!(room.changed());
            assert_eq!(given_up.as_mut().poll(&mut cx), Poll::Pending);
            assert_eq!(room.waiting(), 2);
        }
        assert_eq!(room.waiting(), 1, "the wait given up is off the list");
        room.tell_all();
        assert_eq!(room.waiting(), 0);
        assert_eq!(told.as_mut().poll(&mut cx), Poll::Ready(()));
    }

    #[test]
    fn a_place_goes_to_the_longest_waiting_and_is_passed_on_if_not_taken() {
        let room = Room::default();
        let mut cx = Context::from_waker(Waker::noop());
        let mut first = Box::pin(room.changed());
        let mut second = pin!(room.changed());
        let mut third = pin!(room.changed());
        assert_eq!(first.as_mut().poll(&mut cx), Poll::Pending);
        assert_eq!(second.as_mut().poll(&mut cx), Poll::Pending);
        assert_eq!(third.as_mut().poll(&mut cx), Poll::Pending);
        room.tell_one();
        assert_eq!(room.waiting(), 2);
        assert_eq!(second.as_mut().poll(&mut cx), Poll::Pending, "not its turn");
        drop(first);
        assert_eq!(
            room.waiting(),
            1,
            "the place the first left is the second's"
        );
        assert_eq!(second.as_mut().poll(&mut cx), Poll::Ready(()));
        assert_eq!(third.as_mut().poll(&mut cx), Poll::Pending);
    }

    #[test]
    fn one_told_of_a_place_another_took_keeps_its_place_in_line() {
        let room = Room::default();
        let mut cx = Context::from_waker(Waker::noop());
        let mut first = Box::pin(room.changed());
        let mut second = pin!(room.changed());
        assert_eq!(first.as_mut().poll(&mut cx), Poll::Pending);
        assert_eq!(second.as_mut().poll(&mut cx), Poll::Pending);
        room.tell_one();
        assert_eq!(first.as_mut().poll(&mut cx), Poll::Ready(()));
        // A newcomer took the place: the first waits again, ahead of the second.
        let place = first.place();
        drop(first);
        let mut again = pin!(room.changed_in_place(place));
        assert_eq!(again.as_mut().poll(&mut cx), Poll::Pending);
        let mut newcomer = pin!(room.changed());
        assert_eq!(newcomer.as_mut().poll(&mut cx), Poll::Pending);
        room.tell_one();
        assert_eq!(
            again.as_mut().poll(&mut cx),
            Poll::Ready(()),
            "its turn again"
        );
        assert_eq!(second.as_mut().poll(&mut cx), Poll::Pending);
        room.tell_one();
        assert_eq!(second.as_mut().poll(&mut cx), Poll::Ready(()));
        assert_eq!(
            newcomer.as_mut().poll(&mut cx),
            Poll::Pending,
            "the last to come"
        );
    }
}
