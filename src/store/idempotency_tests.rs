//! The idempotency book: claims, replays, mismatches, bounds and rows.
use super::*;

fn claim(b: &mut Book, key: &str, digest: u64, now: u64) -> Outcome {
    let op = Op::Claim {
        key: key.into(),
        digest,
        until: now + 1_000,
        max: 3,
    };
    b.apply(op, now, &mut Vec::new())
        .expect("a claim is answered")
}

fn finish(b: &mut Book, key: &str, digest: u64, body: Option<&str>, until: u64) -> usize {
    let answer = body.map(|b| Answer {
        status: 200,
        body: b.into(),
    });
    let mut changes = Vec::new();
    let op = Op::Finish {
        key: key.into(),
        digest,
        answer,
        until,
    };
    b.apply(op, 0, &mut changes);
    changes.len()
}

#[test]
fn a_key_is_claimed_once_replayed_within_its_window_and_refused_with_another_body() {
    let mut b = Book::default();
    assert_eq!(claim(&mut b, "k", 7, 0), Outcome::Claimed);
    assert_eq!(claim(&mut b, "k", 7, 10), Outcome::InFlight);
    assert_eq!(claim(&mut b, "k", 8, 10), Outcome::Mismatch);
    // Another request's finish does not end this claim.
    assert_eq!(finish(&mut b, "k", 8, Some("{}"), 5_000), 0);
    assert_eq!(claim(&mut b, "k", 7, 20), Outcome::InFlight);
    assert_eq!(finish(&mut b, "k", 7, Some("{\"a\":1}"), 5_000), 1);
    let replay = Answer {
        status: 200,
        body: "{\"a\":1}".into(),
    };
    assert_eq!(claim(&mut b, "k", 7, 30), Outcome::Replay(replay));
    assert_eq!(claim(&mut b, "k", 8, 30), Outcome::Mismatch);
    // After the window the key is new again.
    assert_eq!(claim(&mut b, "k", 8, 5_000), Outcome::Claimed);
}

#[test]
fn a_failed_owner_releases_its_key_and_a_stale_claim_expires() {
    let mut b = Book::default();
    assert_eq!(claim(&mut b, "k", 7, 0), Outcome::Claimed);
    assert_eq!(finish(&mut b, "k", 7, None, 5_000), 0);
    assert_eq!(claim(&mut b, "k", 7, 1), Outcome::Claimed);
    // The owner never finished (its claim lasts to its deadline): then the key is free.
    assert_eq!(claim(&mut b, "k", 7, 1_001), Outcome::Claimed);
}

#[test]
fn the_book_is_bounded_and_keeps_claims_in_flight() {
    let mut b = Book::default();
    for (i, k) in ["a", "b", "c"].iter().enumerate() {
        assert_eq!(claim(&mut b, k, 1, i as u64), Outcome::Claimed);
    }
    finish(&mut b, "a", 1, Some("{}"), 900);
    finish(&mut b, "b", 1, Some("{}"), 800);
    // Full: the answer nearest its end (b) makes way.
    assert_eq!(claim(&mut b, "d", 1, 10), Outcome::Claimed);
    assert_eq!(b.len(), 3);
    assert_eq!(claim(&mut b, "b", 1, 11), Outcome::Claimed);
    assert!(matches!(claim(&mut b, "a", 1, 12), Outcome::Claimed));
}

#[test]
fn answers_come_back_from_their_rows() {
    let mut b = Book::default();
    claim(&mut b, "k", 7, 0);
    let mut changes = Vec::new();
    let answer = Answer {
        status: 200,
        body: "{}".into(),
    };
    let op = Op::Finish {
        key: "k".into(),
        digest: 7,
        answer: Some(answer.clone()),
        until: 5_000,
    };
    b.apply(op, 0, &mut changes);
    let rows = changes.into_iter().filter_map(|c| match c {
        Change::Put(k, v) => Some((k, v)),
        Change::Delete(_) => None,
    });
    let mut back = Book::load(rows, 10);
    assert_eq!(claim(&mut back, "k", 7, 20), Outcome::Replay(answer));
    assert!(Book::load(std::iter::empty(), 0).is_empty());
}
