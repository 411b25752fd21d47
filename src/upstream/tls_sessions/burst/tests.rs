use super::*;

fn noop() -> &'static Waker {
    Waker::noop()
}

/// A server seen to send two tickets after a full handshake, one after a resumption.
fn two_per_full() -> Burst {
    Burst {
        per_full: Some(2),
        per_resumed: Some(1),
        ..Burst::default()
    }
}

/// A burst arriving at once, `n` connects: how many go (in full) and the waiters' ids.
fn arrive_all(b: &mut Burst, n: usize) -> (usize, Vec<u64>) {
    let mut full = 0;
    let mut waiting = Vec::new();
    for _ in 0..n {
        match b.arrive(false, noop()) {
            Arrival::Go => {
                b.start(false);
                full += 1;
            }
            Arrival::Wait(id) => waiting.push(id),
        }
    }
    (full, waiting)
}

#[test]
fn a_cold_burst_waits_for_the_tickets_each_full_handshake_is_expected_to_bring() {
    let mut b = Burst::default();
    // Nothing known of the server: as many tickets per full handshake as asked for, so one
    // connect in seventeen handshakes in full and sixteen wait for its tickets.
    let (full, waiting) = arrive_all(&mut b, 34);
    assert_eq!((full, waiting.len()), (2, 32));
    assert_eq!(b.counts(), (32, 32));
    let mut b = two_per_full();
    // A server seen to send two: one connect in three.
    let (full, waiting) = arrive_all(&mut b, 9);
    assert_eq!((full, waiting.len()), (3, 6));
}

#[test]
fn waiters_a_handshake_no_longer_covers_look_again_in_order_and_cover_each_other() {
    let mut b = Burst::default();
    let (_, waiting) = arrive_all(&mut b, 11);
    assert_eq!(waiting.len(), 10);
    // The server sends two, not sixteen: found when the handshake's data comes.
    let mut wake = Vec::new();
    let owed = b.handshake_done(GUESS_FULL, false, &mut wake);
    b.arrived(2);
    b.settle(owed - 2, Some((false, 2)), &mut wake);
    assert_eq!(wake.len(), 10, "all: no ticket is coming now, two are kept");
    // Two take the tickets; of the rest, polled in the order woken, the first handshakes in
    // full (and brings two more), the next two wait for them, and so on.
    let mut verdicts = Vec::new();
    for &id in &waiting[..2] {
        assert_eq!(b.poll_wait(id, true, noop()), Poll::Ready(true));
    }
    for &id in &waiting[2..] {
        let v = b.poll_wait(id, false, noop());
        if v == Poll::Ready(false) {
            b.start(false);
        }
        verdicts.push(v);
    }
    let full = verdicts.iter().filter(|v| **v == Poll::Ready(false)).count();
    assert_eq!((full, verdicts.len() - full), (3, 5));
    assert_eq!(verdicts[0], Poll::Ready(false));
    assert_eq!(verdicts[1], Poll::Pending);
}

#[test]
fn a_kept_ticket_is_taken_at_once_and_nobody_waits_when_none_is_coming() {
    let mut b = Burst::default();
    assert_eq!(b.arrive(true, noop()), Arrival::Go);
    assert_eq!(b.arrive(false, noop()), Arrival::Go, "nothing under way");
    assert_eq!(b.counts(), (0, 0));
}

#[test]
fn a_ticket_kept_wakes_the_first_waiter_which_resumes_with_it() {
    let mut b = two_per_full();
    let (_, waiting) = arrive_all(&mut b, 3);
    let mut wake = Vec::new();
    b.ticket_kept(1, &mut wake);
    assert_eq!(wake.len(), 1, "the first waiter only");
    b.arrived(1);
    assert_eq!(b.poll_wait(waiting[0], true, noop()), Poll::Ready(true));
    // The second still has a ticket coming for it.
    assert_eq!(b.poll_wait(waiting[1], false, noop()), Poll::Pending);
    assert_eq!(b.counts(), (1, 1));
}

#[test]
fn tickets_that_come_together_wake_as_many_waiters() {
    let mut b = Burst {
        per_full: Some(4),
        ..Burst::default()
    };
    let (full, waiting) = arrive_all(&mut b, 5);
    assert_eq!((full, waiting.len()), (1, 4));
    let mut wake = Vec::new();
    for kept in 1..=3 {
        b.ticket_kept(kept, &mut wake);
    }
    b.arrived(3);
    assert_eq!(wake.len(), 3, "one waiter for each ticket");
    for &id in &waiting[..3] {
        assert_eq!(b.poll_wait(id, true, noop()), Poll::Ready(true));
    }
    assert_eq!(b.poll_wait(waiting[3], false, noop()), Poll::Pending);
}

#[test]
fn tickets_that_do_not_come_send_their_waiters_to_handshake_in_full() {
    let mut b = two_per_full();
    let (_, waiting) = arrive_all(&mut b, 3);
    // The handshake ends and its first data comes with no ticket before it.
    let mut wake = Vec::new();
    let owed = b.handshake_done(2, false, &mut wake);
    assert!(wake.is_empty());
    b.settle(owed, Some((false, 0)), &mut wake);
    assert_eq!(wake.len(), 2, "both waiters are woken");
    assert_eq!(b.poll_wait(waiting[0], false, noop()), Poll::Ready(false));
    assert_eq!(b.poll_wait(waiting[1], false, noop()), Poll::Ready(false));
    assert_eq!(b.counts(), (0, 0));
    // The server is known to send none: nobody waits any more.
    let (full, waiting) = arrive_all(&mut b, 5);
    assert_eq!((full, waiting.len()), (5, 0));
}

#[test]
fn what_a_server_sends_is_learned_for_each_kind_of_handshake() {
    let mut b = Burst::default();
    let mut wake = Vec::new();
    let owed = b.start(false);
    b.arrived(owed);
    b.settle(0, Some((false, 16)), &mut wake);
    let owed = b.start(true);
    assert_eq!(owed, GUESS_RESUMED);
    assert_eq!(GUESS_RESUMED, 2);
    b.arrived(owed);
    b.settle(0, Some((true, 2)), &mut wake);
    assert_eq!(b.counts(), (0, 0));
    assert_eq!(b.start(false), 16);
    assert_eq!(b.start(true), 2);
    // With sixteen coming from a full handshake, sixteen connects wait for them.
    let mut b = Burst {
        per_full: Some(16),
        ..Burst::default()
    };
    let (full, waiting) = arrive_all(&mut b, 34);
    assert_eq!((full, waiting.len()), (2, 32));
}

#[test]
fn a_ticket_turned_down_makes_the_handshake_full_and_its_expectation_a_full_ones() {
    let mut b = Burst {
        per_full: Some(4),
        per_resumed: Some(1),
        ..Burst::default()
    };
    let owed = b.start(true);
    assert_eq!((owed, b.counts().0), (1, 1));
    let mut wake = Vec::new();
    let owed = b.handshake_done(owed, false, &mut wake);
    assert_eq!((owed, b.counts().0), (4, 4));
}

#[test]
fn a_waiter_that_leaves_moves_the_others_up() {
    let mut b = two_per_full();
    let (_, waiting) = arrive_all(&mut b, 3);
    b.leave(waiting[0]);
    assert_eq!(b.counts(), (2, 1));
    // One ticket of two comes and is taken by a connect that just arrived; the remaining
    // waiter is first now, with one still coming for it.
    b.arrived(1);
    assert_eq!(b.poll_wait(waiting[1], false, noop()), Poll::Pending);
    // A waiter that already left is answered by whether a ticket is kept.
    assert_eq!(b.poll_wait(waiting[0], true, noop()), Poll::Ready(true));
}
