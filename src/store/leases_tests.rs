use super::*;
use crate::ids::ConnId;

fn acquire(owner: &str, client: &str, cands: &[&str]) -> Op {
    Op::Acquire {
        owner: owner.into(),
        client: client.into(),
        candidates: cands.iter().map(|s| s.to_string()).collect(),
        ttl_ms: DEFAULT_TTL_MS,
    }
}

fn renew(owner: &str, generation: u64, client: &str) -> Op {
    Op::Renew {
        owner: owner.into(),
        generation,
        client: client.into(),
        ttl_ms: DEFAULT_TTL_MS,
    }
}

fn release(owner: &str, generation: u64, client: &str) -> Op {
    Op::Release {
        owner: owner.into(),
        generation,
        client: client.into(),
        reason: "OWNER_EXIT".into(),
    }
}

fn lease(o: Outcome) -> Lease {
    match o {
        Outcome::Acquired(l)
        | Outcome::Reused(l)
        | Outcome::Renewed(l)
        | Outcome::Released(l)
        | Outcome::Transitioned(l) => l,
        other => panic!("expected a lease, got {other:?}"),
    }
}

#[test]
fn acquire_reuse_renew_stale_release_idempotent() {
    let mut b = Book::default();
    let t = 1_000_000;
    let (o, changed) = b.apply(acquire("A", "k1", &["p/a", "p/b"]), t);
    let l = lease(o);
    assert_eq!((l.generation, l.connection.as_str()), (1, "p/a"));
    assert_eq!(changed.len(), 1, "the new row is persisted");
    // Acquiring again with the same key reuses it: same generation, new expiry.
    let (o, _) = b.apply(acquire("A", "k1", &["p/a", "p/b"]), t + 10);
    assert!(
        matches!(&o, Outcome::Reused(l) if l.generation == 1 && l.expires_at == t + 10 + DEFAULT_TTL_MS)
    );
    let l = lease(b.apply(renew("A", 1, "k1"), t + 20).0);
    assert_eq!(l.expires_at, t + 20 + DEFAULT_TTL_MS);
    assert_eq!(b.apply(renew("A", 2, "k1"), t + 30).0, Outcome::Stale);
    assert_eq!(
        b.apply(renew("A", 1, "k2"), t + 30).0,
        Outcome::Stale,
        "another key"
    );
    assert_eq!(b.apply(release("A", 1, "k2"), t + 30).0, Outcome::Stale);
    let l = lease(b.apply(release("A", 1, "k1"), t + 40).0);
    assert_eq!(l.state, State::Released);
    assert_eq!(l.end_reason.as_deref(), Some("OWNER_EXIT"));
    assert!(matches!(
        b.apply(release("A", 1, "k1"), t + 50).0,
        Outcome::Released(_)
    ));
    assert_eq!(
        b.apply(renew("A", 1, "k1"), t + 60).0,
        Outcome::Stale,
        "released is over"
    );
    // The next acquire by the same owner gets the next generation.
    assert_eq!(
        lease(b.apply(acquire("A", "k1", &["p/a"]), t + 70).0).generation,
        2
    );
}

#[test]
fn one_owner_per_connection_and_busy_reports_the_earliest_expiry() {
    let mut b = Book::default();
    let t = 5_000;
    let a = lease(b.apply(acquire("A", "k", &["p/a", "p/b"]), t).0);
    let bb = lease(b.apply(acquire("B", "k", &["p/a", "p/b"]), t + 1_000).0);
    assert_eq!(
        (a.connection.as_str(), bb.connection.as_str()),
        ("p/a", "p/b")
    );
    assert_eq!(
        b.apply(acquire("C", "k", &["p/a", "p/b"]), t + 2_000).0,
        Outcome::Busy {
            retry_at: Some(t + DEFAULT_TTL_MS)
        }
    );
    assert_eq!(b.until("p/a", t + 2_000), t + DEFAULT_TTL_MS);
    assert_eq!(b.until("p/c", t), 0);
}

#[test]
fn same_owner_through_a_second_key_is_refused_and_the_binding_stays() {
    let mut b = Book::default();
    let l = lease(b.apply(acquire("A", "k1", &["p/a", "p/b"]), 0).0);
    assert_eq!(
        b.apply(acquire("A", "k2", &["p/b"]), 10).0,
        Outcome::OwnerAlreadyActive
    );
    assert_eq!(
        b.get("A").map(|x| (&x.client, &x.connection)),
        Some((&l.client, &l.connection))
    );
}

#[test]
fn ttl_expiry_frees_the_connection_lazily() {
    let mut b = Book::default();
    lease(b.apply(acquire("A", "k", &["p/a"]), 0).0);
    assert!(matches!(
        b.apply(acquire("B", "k", &["p/a"]), DEFAULT_TTL_MS - 1).0,
        Outcome::Busy { .. }
    ));
    // At the expiry instant the lease is over: B takes the connection, A's row is expired.
    let (o, changed) = b.apply(acquire("B", "k", &["p/a"]), DEFAULT_TTL_MS);
    assert_eq!(lease(o).connection, "p/a");
    let a = changed.iter().find(|l| l.owner == "A").expect("A expired");
    assert_eq!(
        (a.state, a.end_reason.as_deref()),
        (State::Expired, Some("TTL_EXPIRED"))
    );
    assert_eq!(
        b.apply(renew("A", 1, "k"), DEFAULT_TTL_MS + 1).0,
        Outcome::Stale
    );
}

#[test]
fn renew_keeps_a_lease_alive_past_its_first_expiry() {
    let mut b = Book::default();
    lease(b.apply(acquire("A", "k", &["p/a"]), 0).0);
    lease(b.apply(renew("A", 1, "k"), 100_000).0);
    assert!(matches!(
        b.apply(acquire("B", "k", &["p/a"]), 150_000).0,
        Outcome::Busy { .. }
    ));
    assert_eq!(
        fence(b.get("A"), 1, "k", 219_999),
        Fence::Valid("p/a".into())
    );
    assert_eq!(fence(b.get("A"), 1, "k", 220_000), Fence::Required);
}

#[test]
fn generation_fencing() {
    let mut b = Book::default();
    lease(b.apply(acquire("A", "k", &["p/a"]), 0).0);
    assert_eq!(fence(b.get("A"), 1, "k", 1), Fence::Valid("p/a".into()));
    assert_eq!(fence(b.get("A"), 2, "k", 1), Fence::Stale);
    assert_eq!(
        fence(b.get("A"), 1, "other", 1),
        Fence::Stale,
        "cross-key replay"
    );
    assert_eq!(fence(b.get("nobody"), 1, "k", 1), Fence::Required);
    lease(b.apply(release("A", 1, "k"), 2).0);
    assert_eq!(fence(b.get("A"), 1, "k", 3), Fence::Required);
    lease(b.apply(acquire("A", "k", &["p/a"]), 4).0);
    assert_eq!(
        fence(b.get("A"), 1, "k", 5),
        Fence::Stale,
        "the old generation is fenced"
    );
    assert_eq!(fence(b.get("A"), 2, "k", 5), Fence::Valid("p/a".into()));
}

#[test]
fn transition_keeps_the_generation_and_frees_the_old_connection() {
    let mut b = Book::default();
    lease(b.apply(acquire("A", "k", &["p/a", "p/b"]), 0).0);
    lease(b.apply(acquire("B", "k", &["p/b", "p/c"]), 0).0);
    let t = |cands: &[&str]| Op::Transition {
        owner: "A".into(),
        generation: 1,
        client: "k".into(),
        candidates: cands.iter().map(|s| s.to_string()).collect(),
        reason: "HEALTH_OR_COOLDOWN".into(),
    };
    // B holds p/b: A's only alternative is busy.
    assert!(matches!(
        b.apply(t(&["p/b"]), 10).0,
        Outcome::Busy { retry_at: Some(_) }
    ));
    let (o, changed) = b.apply(t(&["p/b", "p/c"]), 20);
    let l = lease(o);
    assert_eq!((l.connection.as_str(), l.generation), ("p/c", 1));
    assert!(
        changed
            .iter()
            .any(|x| x.connection == "p/a" && x.state == State::Invalidated)
    );
    assert_eq!(b.until("p/a", 30), 0, "the old connection is free again");
    assert_eq!(fence(b.get("A"), 1, "k", 30), Fence::Valid("p/c".into()));
    let stale = Op::Transition {
        owner: "A".into(),
        generation: 9,
        client: "k".into(),
        candidates: vec!["p/a".into()],
        reason: "x".into(),
    };
    assert_eq!(b.apply(stale, 40).0, Outcome::Stale);
}

#[test]
fn revocation_by_owner_and_by_client_key() {
    let mut b = Book::default();
    lease(b.apply(acquire("A", "k1", &["p/a"]), 0).0);
    lease(b.apply(acquire("B", "k2", &["p/b"]), 0).0);
    lease(b.apply(acquire("C", "k2", &["p/c"]), 0).0);
    let revoke = Op::Revoke {
        owner: "A".into(),
        reason: "AUTHORIZATION_CHANGED".into(),
    };
    assert_eq!(b.apply(revoke.clone(), 1).0, Outcome::Revoked(1));
    assert_eq!(b.apply(revoke, 2).0, Outcome::Revoked(0));
    let by_key = Op::RevokeClient {
        client: "k2".into(),
        reason: "MANAGED_KEY_REVOKED".into(),
    };
    assert_eq!(b.apply(by_key, 3).0, Outcome::Revoked(2));
    assert_eq!(b.until("p/b", 4), 0);
    assert_eq!(fence(b.get("C"), 1, "k2", 4), Fence::Required);
}

#[test]
fn a_connection_removed_by_a_reload_ends_its_lease_with_a_reason() {
    let mut b = Book::default();
    lease(b.apply(acquire("A", "k", &["p/a"]), 0).0);
    lease(b.apply(acquire("B", "k", &["p/b"]), 0).0);
    let removed = Op::RevokeConnection {
        connection: "p/a".into(),
        reason: "CONNECTION_REMOVED".into(),
    };
    let (out, changed) = b.apply(removed, 1);
    assert_eq!(out, Outcome::Revoked(1));
    assert_eq!(changed[0].end_reason.as_deref(), Some("CONNECTION_REMOVED"));
    assert_eq!(b.until("p/a", 2), 0);
    assert_eq!(fence(b.get("A"), 1, "k", 2), Fence::Required);
    assert!(b.until("p/b", 2) > 0, "other connections keep their leases");
}

#[test]
fn a_reloaded_book_keeps_owners_generations_and_holders() {
    let mut b = Book::default();
    lease(b.apply(acquire("A", "k", &["p/a"]), 0).0);
    lease(b.apply(release("A", 1, "k"), 1).0);
    lease(b.apply(acquire("A", "k", &["p/a"]), 2).0);
    let rows: Vec<Lease> = b.all().cloned().collect();
    let mut again = Book::load(rows);
    assert!(matches!(
        again.apply(acquire("B", "k", &["p/a"]), 3).0,
        Outcome::Busy { .. }
    ));
    assert_eq!(fence(again.get("A"), 2, "k", 3), Fence::Valid("p/a".into()));
}

#[test]
fn prune_drops_only_rows_that_ended_long_ago() {
    let mut b = Book::default();
    lease(b.apply(acquire("A", "k", &["p/a"]), 0).0);
    lease(b.apply(acquire("B", "k", &["p/b"]), 0).0);
    lease(b.apply(release("A", 1, "k"), 10).0);
    assert!(b.prune(ENDED_RETENTION_MS).is_empty());
    lease(b.apply(renew("B", 1, "k"), 1).0);
    let now = ENDED_RETENTION_MS + 11;
    // B expired at 1 + TTL, which is not yet a retention ago.
    assert_eq!(b.prune(now), vec!["A".to_string()]);
    assert!(b.get("A").is_none() && b.get("B").is_some());
}

#[test]
fn the_view_tracks_live_leases_by_connection_index() {
    let labels = vec![
        ("p".to_string(), "a".to_string()),
        ("p".to_string(), "b".to_string()),
    ];
    let v = LeaseView::new(&labels, 4);
    v.set("p/b", 500);
    v.set("q/zz", 900); // unknown connections are ignored
    assert_eq!(v.leased_until(ConnId::new(1), 100), Some(500));
    assert_eq!(v.leased_until(ConnId::new(1), 500), None);
    assert_eq!(v.leased_until(ConnId::new(0), 100), None);
    assert!(!v.none());
    v.set("p/b", 0);
    assert!(v.none());
}

#[test]
fn a_reload_renames_the_view_and_frees_removed_slots() {
    let labels = vec![
        ("p".to_string(), "a".to_string()),
        ("p".to_string(), "b".to_string()),
    ];
    let v = LeaseView::new(&labels, 4);
    v.set("p/b", 500);
    // b removed, c added in slot 2.
    v.rename(&[
        ("p".to_string(), "a".to_string()),
        (String::new(), String::new()),
        ("p".to_string(), "c".to_string()),
    ]);
    assert_eq!(
        v.leased_until(ConnId::new(1), 100),
        None,
        "the removed slot is free"
    );
    assert!(v.none());
    v.set("p/b", 900);
    assert_eq!(
        v.leased_until(ConnId::new(1), 100),
        None,
        "the old name no longer counts"
    );
    v.set("p/c", 900);
    assert_eq!(v.leased_until(ConnId::new(2), 100), Some(900));
}
