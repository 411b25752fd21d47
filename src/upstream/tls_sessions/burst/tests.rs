use super::*;

fn noop() -> &'static Waker {
    Waker::noop()
}

/// A server seen to send two tickets after a full handshake and `after_resumption` after a
/// resumption (OpenSSL: one).
fn two_per_full(after_resumption: u32) -> Burst {
    Burst {
        per_full: Some(2),
        per_resumed: Some(after_resumption),
        ..Burst::default()
    }
}

/// A burst arriving at once, `n` connects, no ticket kept: how many go (in full) and the
/// waiters' ids.
fn arrive_all(b: &mut Burst, n: usize) -> (usize, Vec<u64>) {
    let mut full = 0;
    let mut waiting = Vec::new();
    for _ in 0..n {
        match b.arrive(0, noop()) {
            Arrival::Go => {
                b.start(false);
                full += 1;
            }
            Arrival::Wait(id) => waiting.push(id),
        }
    }
    (full, waiting)
}

/// Poll `ids` in order with no ticket kept, starting a full handshake for each that goes:
/// how many went.
fn look_again(b: &mut Burst, ids: &[u64]) -> usize {
    let mut full = 0;
    for &id in ids {
        if b.poll_wait(id, 0, noop()) == Poll::Ready(false) {
            b.start(false);
            full += 1;
        }
    }
    full
}

#[test]
fn a_cold_burst_waits_for_the_tickets_each_full_handshake_is_expected_to_bring() {
    // Nothing known of the server: two tickets per full handshake, one per resumption (each
    // waiter that resumes brings one more), so each full handshake serves a queue `ROUNDS`
    // deep: one in 1 + 2 x 4.
    let mut b = Burst::default();
    let (full, waiting) = arrive_all(&mut b, 18);
    assert_eq!((full, waiting.len()), (2, 16));
    assert_eq!(b.counts(), (4, 16));
    // A server seen to send sixteen (it honours the ticket request): one in 1 + 16 x 4.
    let mut b = Burst {
        per_full: Some(16),
        ..Burst::default()
    };
    let (full, waiting) = arrive_all(&mut b, 200);
    assert_eq!((full, waiting.len()), (4, 196));
    // One that sends none after a resumption: a ticket serves one waiter, one in three.
    let (full, waiting) = arrive_all(&mut two_per_full(0), 9);
    assert_eq!((full, waiting.len()), (3, 6));
}

#[test]
fn a_kept_ticket_is_taken_at_once_and_nobody_waits_when_none_is_coming() {
    let mut b = Burst::default();
    assert_eq!(b.arrive(1, noop()), Arrival::Go);
    assert_eq!(b.arrive(0, noop()), Arrival::Go, "nothing under way");
    assert_eq!(b.counts(), (0, 0));
}

#[test]
fn a_ticket_kept_wakes_the_first_waiter_which_resumes_with_it() {
    let mut b = two_per_full(1);
    let (_, waiting) = arrive_all(&mut b, 3);
    let mut wake = Vec::new();
    b.ticket_kept(1, &mut wake);
    assert_eq!(wake.len(), 1, "the first waiter only");
    b.arrived(1);
    assert_eq!(b.poll_wait(waiting[0], 1, noop()), Poll::Ready(true));
    b.start(true);
    // The second still has tickets coming for it.
    assert_eq!(b.poll_wait(waiting[1], 0, noop()), Poll::Pending);
    assert_eq!(b.counts(), (2, 1));
}

#[test]
fn tickets_that_come_together_wake_as_many_waiters() {
    let mut b = Burst {
        per_full: Some(4),
        per_resumed: Some(0),
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
    for (&id, kept) in waiting[..3].iter().zip([3, 2, 1]) {
        assert_eq!(b.poll_wait(id, kept, noop()), Poll::Ready(true));
    }
    assert_eq!(b.poll_wait(waiting[3], 0, noop()), Poll::Pending);
}

#[test]
fn tickets_that_do_not_come_send_their_waiters_to_handshake_in_full() {
    let mut b = two_per_full(1);
    let (_, waiting) = arrive_all(&mut b, 3);
    // The handshake ends and its first data comes with no ticket before it.
    let mut wake = Vec::new();
    let owed = b.handshake_done(2, false, 0, &mut wake);
    assert!(wake.is_empty());
    b.settle(owed, Some((false, 0)), 0, &mut wake);
    assert_eq!(wake.len(), 2, "both waiters are woken");
    assert_eq!(look_again(&mut b, &waiting), 2);
    assert_eq!(b.counts(), (0, 0));
    // The server is known to send none: nobody waits any more.
    let (full, waiting) = arrive_all(&mut b, 5);
    assert_eq!((full, waiting.len()), (5, 0));
}

#[test]
fn waiters_a_handshake_no_longer_covers_look_again_in_order_and_cover_each_other() {
    // A server that sent sixteen and now sends two after a full handshake (and none after a
    // resumption): eleven connects, one handshakes in full, ten wait.
    let mut b = Burst {
        per_full: Some(16),
        per_resumed: Some(0),
        ..Burst::default()
    };
    let (_, waiting) = arrive_all(&mut b, 11);
    assert_eq!(waiting.len(), 10);
    let mut wake = Vec::new();
    let owed = b.handshake_done(16, false, 0, &mut wake);
    b.arrived(2);
    b.settle(owed - 2, Some((false, 2)), 2, &mut wake);
    assert_eq!(wake.len(), 8, "those beyond the two tickets kept");
    // Two take the tickets; of the rest, in the order woken, the first handshakes in full
    // (and brings two more), the next two wait for them, and so on.
    for (&id, kept) in waiting[..2].iter().zip([2, 1]) {
        assert_eq!(b.poll_wait(id, kept, noop()), Poll::Ready(true));
        b.start(true);
    }
    assert_eq!(b.poll_wait(waiting[2], 0, noop()), Poll::Ready(false));
    b.start(false);
    assert_eq!(b.poll_wait(waiting[3], 0, noop()), Poll::Pending);
    assert_eq!(look_again(&mut b, &waiting[4..]), 2);
    assert_eq!(b.counts(), (6, 5));
}

#[test]
fn the_waiters_the_tickets_still_serve_stay() {
    // The same, from a server that sends tickets after a resumption too: the two tickets
    // kept serve the queue four deep, and the waiters that take them bring more.
    let mut b = Burst {
        per_full: Some(16),
        ..Burst::default()
    };
    let (_, waiting) = arrive_all(&mut b, 11);
    let mut wake = Vec::new();
    let owed = b.handshake_done(16, false, 0, &mut wake);
    b.arrived(2);
    b.settle(owed - 2, Some((false, 2)), 2, &mut wake);
    assert_eq!(wake.len(), 2, "those beyond 2 x 4");
    // The first two waiters are owed the tickets, and resume with them, each expected to
    // bring one more: the queue behind them fits again.
    for (&id, kept) in waiting[..2].iter().zip([2, 1]) {
        assert_eq!(b.poll_wait(id, kept, noop()), Poll::Ready(true));
        b.start(true);
    }
    assert_eq!(
        look_again(&mut b, &waiting[2..]),
        0,
        "none handshakes in full"
    );
    assert_eq!(b.counts(), (2, 8));
}

#[test]
fn a_ticket_is_owed_to_the_first_waiter_and_passes_on_when_it_leaves() {
    let mut b = two_per_full(1);
    let (full, waiting) = arrive_all(&mut b, 4);
    assert_eq!((full, waiting.len()), (1, 3));
    let mut wake = Vec::new();
    b.ticket_kept(1, &mut wake);
    b.arrived(1);
    assert_eq!(wake.len(), 1, "the first waiter is woken");
    // A connect arriving now, or a waiter behind, finds the ticket owed to the first.
    assert!(matches!(b.arrive(1, noop()), Arrival::Wait(_)));
    assert_eq!(b.poll_wait(waiting[1], 1, noop()), Poll::Pending);
    // The first leaves before it looks: the second is owed the ticket, and woken.
    wake.clear();
    b.leave(waiting[0], 1, &mut wake);
    assert_eq!(wake.len(), 1);
    assert_eq!(b.poll_wait(waiting[1], 1, noop()), Poll::Ready(true));
    // A ticket nobody is owed is taken at once.
    let mut b = two_per_full(1);
    assert_eq!(b.arrive(1, noop()), Arrival::Go);
}

#[test]
fn what_a_server_sends_is_learned_for_each_kind_of_handshake() {
    let mut b = Burst::default();
    let mut wake = Vec::new();
    let owed = b.start(false);
    assert_eq!(owed, GUESS_FULL);
    b.arrived(owed);
    b.settle(0, Some((false, 16)), 16, &mut wake);
    let owed = b.start(true);
    assert_eq!((owed, GUESS_RESUMED), (1, 1));
    b.arrived(owed);
    b.settle(0, Some((true, 1)), 17, &mut wake);
    assert_eq!(b.counts(), (0, 0));
    assert_eq!(b.start(false), 16);
    assert_eq!(b.start(true), 1);
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
    let owed = b.handshake_done(owed, false, 0, &mut wake);
    assert_eq!((owed, b.counts().0), (4, 4));
}

#[test]
fn a_waiter_that_leaves_moves_the_others_up() {
    let mut b = two_per_full(1);
    let (_, waiting) = arrive_all(&mut b, 3);
    b.leave(waiting[0], 0, &mut Vec::new());
    assert_eq!(b.counts(), (2, 1));
    // One ticket of two comes and is taken by another handshake (rustls resumes any that
    // starts while one is kept, even one sent in full); the remaining
    // waiter is first now, with one still coming for it.
    b.arrived(1);
    assert_eq!(b.poll_wait(waiting[1], 0, noop()), Poll::Pending);
    // A waiter that already left is answered by whether a ticket is kept.
    assert_eq!(b.poll_wait(waiting[0], 1, noop()), Poll::Ready(true));
}

#[test]
fn a_tls12_session_kept_wakes_every_waiter_to_resume_with_it() {
    let mut b = Burst::default();
    let (full, waiting) = arrive_all(&mut b, 6);
    assert_eq!((full, waiting.len()), (1, 5));
    let mut wake = Vec::new();
    b.session_kept(&mut wake);
    assert_eq!(wake.len(), 5, "a session is reused, not used up");
    // Each looks again with it kept (counted without bound) and resumes.
    for &id in &waiting {
        assert_eq!(b.poll_wait(id, usize::MAX, noop()), Poll::Ready(true));
    }
    assert_eq!(b.arrive(usize::MAX, noop()), Arrival::Go);
    assert_eq!(b.counts().1, 0);
}
