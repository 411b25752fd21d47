use super::*;
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::Wake;
use std::time::{Duration, Instant};

/// A waker that counts its wakes.
struct Counted(AtomicUsize);

impl Wake for Counted {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

fn counted() -> (Arc<Counted>, Waker) {
    let c = Arc::new(Counted(AtomicUsize::new(0)));
    (c.clone(), Waker::from(c))
}

fn wakes(c: &Arc<Counted>) -> usize {
    c.0.load(Ordering::Relaxed)
}

const TARGET: Duration = Duration::from_millis(1250);

/// A patience that does not end within a test.
fn far() -> Instant {
    Instant::now() + Duration::from_secs(3600)
}

/// A connect ended with no news of the server's pace (the window stays).
fn end(g: &mut Gate) {
    g.done(Ended::Unknown, Instant::now(), TARGET);
}

#[test]
fn connects_past_the_cap_wait_and_take_turns_in_arrival_order() {
    let mut g = Gate::default();
    let (_, w) = counted();
    assert_eq!(g.arrive(2, &w, far()), None);
    assert_eq!(g.arrive(2, &w, far()), None);
    let (c3, w3) = counted();
    let (c4, w4) = counted();
    let id3 = g.arrive(2, &w3, far()).expect("third waits");
    let id4 = g.arrive(2, &w4, far()).expect("fourth waits");
    assert_eq!(g.counts(), (2, 2, 2));
    assert!(g.poll(id3, &w3, Instant::now()) == Look::Wait);

    end(&mut g);
    assert_eq!(
        (wakes(&c3), wakes(&c4)),
        (1, 0),
        "the first waiter is woken, only it"
    );
    assert!(
        g.poll(id4, &w4, Instant::now()) == Look::Wait,
        "the second still waits"
    );
    assert!(g.poll(id3, &w3, Instant::now()) == Look::Turn);
    assert_eq!(
        g.counts(),
        (1, 2, 2),
        "the turn passed on: still two under way"
    );

    end(&mut g);
    assert_eq!(wakes(&c4), 1);
    assert!(g.poll(id4, &w4, Instant::now()) == Look::Turn);
    end(&mut g);
    end(&mut g);
    assert!(g.idle());
}

#[test]
fn an_arrival_waits_behind_waiters_even_where_a_turn_is_free() {
    let mut g = Gate::default();
    let (_, w) = counted();
    assert_eq!(g.arrive(1, &w, far()), None);
    let first = g.arrive(1, &w, far()).expect("waits");
    end(&mut g);
    // The turn is the first waiter's until it takes it: a newcomer does not take it.
    let later = g.arrive(1, &w, far()).expect("a newcomer queues behind");
    assert!(g.poll(later, &w, Instant::now()) == Look::Wait);
    assert!(g.poll(first, &w, Instant::now()) == Look::Turn);
    end(&mut g);
    assert!(g.poll(later, &w, Instant::now()) == Look::Turn);
    end(&mut g);
    assert!(g.idle());
}

#[test]
fn a_waiter_that_leaves_passes_on_the_turn_it_was_given() {
    let mut g = Gate::default();
    let (_, w) = counted();
    let (c3, w3) = counted();
    assert_eq!(g.arrive(1, &w, far()), None);
    let gone_early = g.arrive(1, &w, far()).expect("waits");
    let given = g.arrive(1, &w, far()).expect("waits");
    let last = g.arrive(1, &w3, far()).expect("waits");
    // Gone before its turn: nothing to pass on.
    g.leave(gone_early);
    assert_eq!(g.counts(), (2, 1, 1));
    end(&mut g);
    // `given` has the turn and leaves without taking it: `last` gets it.
    g.leave(given);
    assert_eq!(wakes(&c3), 1);
    assert!(g.poll(last, &w3, Instant::now()) == Look::Turn);
    end(&mut g);
    assert!(g.idle());
}

#[test]
fn no_cap_never_waits() {
    let mut g = Gate::default();
    let (_, w) = counted();
    for _ in 0..10_000 {
        assert_eq!(g.arrive(0, &w, far()), None);
    }
    for _ in 0..10_000 {
        end(&mut g);
    }
    assert!(g.idle());
}

#[test]
fn a_lowered_cap_lets_the_connects_above_it_end_without_passing_their_turns() {
    let mut g = Gate::default();
    let (_, w) = counted();
    for _ in 0..4 {
        assert_eq!(g.arrive(4, &w, far()), None);
    }
    let (c, wq) = counted();
    let id = g.arrive(2, &wq, far()).expect("over the new cap: waits");
    end(&mut g);
    end(&mut g);
    assert_eq!(
        wakes(&c),
        0,
        "four, then three under way: over the cap of two"
    );
    end(&mut g);
    assert_eq!(wakes(&c), 1, "two under way: the turn passes");
    assert!(g.poll(id, &wq, Instant::now()) == Look::Turn);
    assert_eq!(g.counts(), (0, 2, 2));
}

/// Polls `f` once with a counted waker.
fn poll_once<F: Future>(f: Pin<&mut F>, w: &Waker) -> Poll<F::Output> {
    f.poll(&mut Context::from_waker(w))
}

use std::pin::Pin;

#[test]
fn turns_are_given_back_when_dropped_and_a_wait_dropped_leaves_the_queue() {
    // The wait's patience is a timer on the core's wheel: a runtime of its own.
    crate::test_driver::on_driver(false, async {
        let gates = Gates::default();
        let (_, w) = counted();
        let mut first = std::pin::pin!(gates.turn("api.example", 443, 1, TARGET * 4));
        let Poll::Ready(Ok((turn, waited))) = poll_once(first.as_mut(), &w) else {
            panic!("the first connect goes at once");
        };
        assert!(!waited);
        // Another server has a gate of its own.
        let mut other = std::pin::pin!(gates.turn("api.example", 8443, 1, TARGET * 4));
        let Poll::Ready(Ok((other_turn, false))) = poll_once(other.as_mut(), &w) else {
            panic!("another server's connect goes at once");
        };

        let (c2, w2) = counted();
        let mut second = Box::pin(gates.turn("api.example", 443, 1, TARGET * 4));
        assert!(poll_once(second.as_mut(), &w2).is_pending());
        let (c3, w3) = counted();
        let mut third = std::pin::pin!(gates.turn("api.example", 443, 1, TARGET * 4));
        assert!(poll_once(third.as_mut(), &w3).is_pending());
        assert_eq!(gates.counts().0, 2);

        drop(turn);
        assert_eq!((wakes(&c2), wakes(&c3)), (1, 0));
        // The second's attempt ends before it looks: its turn goes to the third.
        drop(second);
        assert_eq!(wakes(&c3), 1);
        let Poll::Ready(Ok((turn3, waited))) = poll_once(third.as_mut(), &w3) else {
            panic!("the third's turn came");
        };
        assert!(waited);
        assert_eq!(gates.counts(), (0, 2), "the third's and the other server's");
        drop(turn3);
        drop(other_turn);
        assert_eq!(gates.counts(), (0, 0));
    });
}

const MOST: u32 = 128;

#[test]
fn slow_connects_halve_the_window_once_per_spell_and_quick_ones_widen_it_back() {
    let mut g = Gate::default();
    let (_, w) = counted();
    let t0 = Instant::now();
    for _ in 0..MOST {
        assert_eq!(g.arrive(MOST, &w, far()), None);
    }
    let mut queued: VecDeque<u64> = (0..300)
        .map(|_| g.arrive(MOST, &w, far()).expect("waits"))
        .collect();
    assert_eq!(g.counts(), (300, MOST, MOST));

    // A quick connect frees its turn; the window is at its most already: one waiter goes.
    g.done(Ended::Quick, t0, TARGET);
    assert_eq!(g.counts(), (299, MOST, MOST));

    // Slow connects: the first halves the window; the rest of that spell do not.
    g.done(Ended::Slow, t0, TARGET);
    g.done(Ended::Slow, t0 + TARGET / 2, TARGET);
    assert_eq!(
        g.counts(),
        (299, MOST - 2, MOST / 2),
        "no turn given over the window"
    );
    // A spell later, slow again: halved again. News of nothing changes nothing.
    g.done(Ended::Slow, t0 + TARGET * 2, TARGET);
    g.done(Ended::Unknown, t0 + TARGET * 3, TARGET);
    assert_eq!(g.counts(), (299, MOST - 4, MOST / 4));

    // Drain to the window, then quick connects widen it one each, two turns given for each.
    for _ in 0..(MOST - 4 - MOST / 4) {
        g.done(Ended::Unknown, t0, TARGET);
    }
    assert_eq!(g.counts(), (299, MOST / 4, MOST / 4));
    g.done(Ended::Quick, t0, TARGET);
    assert_eq!(g.counts(), (297, MOST / 4 + 1, MOST / 4 + 1));
    // Back at the configured figure after enough quick ones, and no further.
    for _ in 0..1000 {
        if g.counts().1 == 0 {
            break;
        }
        g.done(Ended::Quick, t0, TARGET);
        queued.retain(|id| g.poll(*id, &w, Instant::now()) == Look::Wait);
    }
    assert!(g.counts().2 == MOST && queued.is_empty());
}

#[test]
fn the_window_stays_within_its_floor_and_the_configured_figure() {
    let mut g = Gate::default();
    let (_, w) = counted();
    let t0 = Instant::now();
    assert_eq!(g.arrive(MOST, &w, far()), None);
    for i in 0..20 {
        g.done(Ended::Slow, t0 + TARGET * (i + 1), TARGET);
        assert_eq!(g.arrive(MOST, &w, far()), None);
    }
    assert_eq!(g.counts().2, FLOOR, "never below the floor");
    // A reload lowers the figure under the floor: the operator's figure holds.
    g.arrive(1, &w, far())
        .expect("one under way already: waits");
    assert_eq!(g.counts().2, 1);
}

#[test]
fn waiters_give_up_once_they_waited_a_connect_timeout_and_connects_time_out() {
    let mut g = Gate::default();
    let (_, w) = counted();
    let t0 = Instant::now();
    let timeout = TARGET * 4;
    assert_eq!(g.arrive(1, &w, t0 + timeout), None);
    let (c_old, w_old) = counted();
    let old = g.arrive(1, &w_old, t0 + timeout).expect("waits");
    let (c_new, w_new) = counted();
    let new = g.arrive(1, &w_new, t0 + timeout * 2).expect("waits");

    // Past its patience, but no connect timed out: a slow server still serving; it waits on.
    assert_eq!(g.poll(old, &w_old, t0 + timeout * 3 / 2), Look::Wait);

    // The connect under way times out: the waiter past its patience is woken, and the freed
    // turn is its too; the one that has not waited so long is not woken.
    g.done(Ended::TimedOut, t0 + timeout * 3 / 2, TARGET);
    assert!(wakes(&c_old) >= 1 && wakes(&c_new) == 0, "{g:?}");
    assert_eq!(
        g.poll(old, &w_old, t0 + timeout * 3 / 2),
        Look::Turn,
        "a turn wins"
    );
    assert_eq!(g.poll(new, &w_new, t0 + timeout * 3 / 2), Look::Wait);
    g.leave(new);
    g.done(Ended::Unknown, t0 + timeout * 3 / 2, TARGET);
    assert!(g.idle());
}

#[test]
fn a_timeout_before_a_waiters_patience_ends_ends_its_wait_when_it_does() {
    let mut g = Gate::default();
    let (_, w) = counted();
    let t0 = Instant::now();
    let patience = t0 + TARGET * 4;
    assert_eq!(g.arrive(1, &w, patience), None);
    let second = g.arrive(1, &w, patience).expect("waits");
    let third = g.arrive(1, &w, patience).expect("waits");
    // The connect under way times out before the waiters have waited long: the turn goes to
    // the second; the third, behind it, waits on until its own patience ends (the wait's
    // timer looks then), and gives up, a timeout having come since it arrived.
    g.done(Ended::TimedOut, t0 + TARGET, TARGET);
    assert_eq!(g.poll(second, &w, t0 + TARGET), Look::Turn);
    assert_eq!(
        g.poll(third, &w, t0 + TARGET * 2),
        Look::Wait,
        "patience left"
    );
    assert_eq!(g.poll(third, &w, patience), Look::GiveUp);
    assert_eq!(g.counts(), (0, 1, 1), "off the queue; the second under way");
}
