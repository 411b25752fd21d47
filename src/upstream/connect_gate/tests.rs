use super::*;
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

/// A connect ended with no news of the server's pace (the window stays).
fn end(g: &mut Gate) {
    g.done(Ended::Unknown, Instant::now(), TARGET);
}

#[test]
fn connects_past_the_cap_wait_and_take_turns_in_arrival_order() {
    let mut g = Gate::default();
    let (_, w) = counted();
    assert_eq!(g.arrive(2, &w), None);
    assert_eq!(g.arrive(2, &w), None);
    let (c3, w3) = counted();
    let (c4, w4) = counted();
    let id3 = g.arrive(2, &w3).expect("third waits");
    let id4 = g.arrive(2, &w4).expect("fourth waits");
    assert_eq!(g.counts(), (2, 2, 2));
    assert!(g.poll(id3, &w3).is_pending());

    end(&mut g);
    assert_eq!(
        (wakes(&c3), wakes(&c4)),
        (1, 0),
        "the first waiter is woken, only it"
    );
    assert!(g.poll(id4, &w4).is_pending(), "the second still waits");
    assert!(g.poll(id3, &w3).is_ready());
    assert_eq!(
        g.counts(),
        (1, 2, 2),
        "the turn passed on: still two under way"
    );

    end(&mut g);
    assert_eq!(wakes(&c4), 1);
    assert!(g.poll(id4, &w4).is_ready());
    end(&mut g);
    end(&mut g);
    assert!(g.idle());
}

#[test]
fn an_arrival_waits_behind_waiters_even_where_a_turn_is_free() {
    let mut g = Gate::default();
    let (_, w) = counted();
    assert_eq!(g.arrive(1, &w), None);
    let first = g.arrive(1, &w).expect("waits");
    end(&mut g);
    // The turn is the first waiter's until it takes it: a newcomer does not take it.
    let later = g.arrive(1, &w).expect("a newcomer queues behind");
    assert!(g.poll(later, &w).is_pending());
    assert!(g.poll(first, &w).is_ready());
    end(&mut g);
    assert!(g.poll(later, &w).is_ready());
    end(&mut g);
    assert!(g.idle());
}

#[test]
fn a_waiter_that_leaves_passes_on_the_turn_it_was_given() {
    let mut g = Gate::default();
    let (_, w) = counted();
    let (c3, w3) = counted();
    assert_eq!(g.arrive(1, &w), None);
    let gone_early = g.arrive(1, &w).expect("waits");
    let given = g.arrive(1, &w).expect("waits");
    let last = g.arrive(1, &w3).expect("waits");
    // Gone before its turn: nothing to pass on.
    g.leave(gone_early);
    assert_eq!(g.counts(), (2, 1, 1));
    end(&mut g);
    // `given` has the turn and leaves without taking it: `last` gets it.
    g.leave(given);
    assert_eq!(wakes(&c3), 1);
    assert!(g.poll(last, &w3).is_ready());
    end(&mut g);
    assert!(g.idle());
}

#[test]
fn no_cap_never_waits() {
    let mut g = Gate::default();
    let (_, w) = counted();
    for _ in 0..10_000 {
        assert_eq!(g.arrive(0, &w), None);
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
        assert_eq!(g.arrive(4, &w), None);
    }
    let (c, wq) = counted();
    let id = g.arrive(2, &wq).expect("over the new cap: waits");
    end(&mut g);
    end(&mut g);
    assert_eq!(
        wakes(&c),
        0,
        "four, then three under way: over the cap of two"
    );
    end(&mut g);
    assert_eq!(wakes(&c), 1, "two under way: the turn passes");
    assert!(g.poll(id, &wq).is_ready());
    assert_eq!(g.counts(), (0, 2, 2));
}

/// Polls `f` once with a counted waker.
fn poll_once<F: Future>(f: Pin<&mut F>, w: &Waker) -> Poll<F::Output> {
    f.poll(&mut Context::from_waker(w))
}

use std::pin::Pin;

#[test]
fn turns_are_given_back_when_dropped_and_a_wait_dropped_leaves_the_queue() {
    let gates = Gates::default();
    let (_, w) = counted();
    let mut first = std::pin::pin!(gates.turn("api.example", 443, 1, TARGET * 4));
    let Poll::Ready((turn, waited)) = poll_once(first.as_mut(), &w) else {
        panic!("the first connect goes at once");
    };
    assert!(!waited);
    // Another server has a gate of its own.
    let mut other = std::pin::pin!(gates.turn("api.example", 8443, 1, TARGET * 4));
    let Poll::Ready((other_turn, false)) = poll_once(other.as_mut(), &w) else {
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
    let Poll::Ready((turn3, waited)) = poll_once(third.as_mut(), &w3) else {
        panic!("the third's turn came");
    };
    assert!(waited);
    assert_eq!(gates.counts(), (0, 2), "the third's and the other server's");
    drop(turn3);
    drop(other_turn);
    assert_eq!(gates.counts(), (0, 0));
}

const MOST: u32 = 128;

#[test]
fn slow_connects_halve_the_window_once_per_spell_and_quick_ones_widen_it_back() {
    let mut g = Gate::default();
    let (_, w) = counted();
    let t0 = Instant::now();
    for _ in 0..MOST {
        assert_eq!(g.arrive(MOST, &w), None);
    }
    let mut queued: VecDeque<u64> = (0..300)
        .map(|_| g.arrive(MOST, &w).expect("waits"))
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
        queued.retain(|id| g.poll(*id, &w).is_pending());
    }
    assert!(g.counts().2 == MOST && queued.is_empty());
}

#[test]
fn the_window_stays_within_its_floor_and_the_configured_figure() {
    let mut g = Gate::default();
    let (_, w) = counted();
    let t0 = Instant::now();
    assert_eq!(g.arrive(MOST, &w), None);
    for i in 0..20 {
        g.done(Ended::Slow, t0 + TARGET * (i + 1), TARGET);
        assert_eq!(g.arrive(MOST, &w), None);
    }
    assert_eq!(g.counts().2, FLOOR, "never below the floor");
    // A reload lowers the figure under the floor: the operator's figure holds.
    g.arrive(1, &w).expect("one under way already: waits");
    assert_eq!(g.counts().2, 1);
}
