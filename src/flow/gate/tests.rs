use super::*;

#[test]
fn concurrency_cap() {
    let g = Gate::new(2, 0, 0, 0);
    assert_eq!(g.try_start(0), Ok(()));
    assert_eq!(g.try_start(0), Ok(()));
    assert_eq!(g.try_start(0), Err(Blocked::Full));
    g.release();
    assert_eq!(g.try_start(0), Ok(()));
    assert_eq!(g.running(), 2);
    g.release();
    g.release();
    g.release(); // never below zero
    assert_eq!(g.running(), 0);
    let open = Gate::new(0, 0, 0, 0);
    for _ in 0..1000 {
        assert_eq!(open.try_start(0), Ok(()));
    }
}

#[test]
fn spacing_between_starts() {
    let g = Gate::new(0, 350, 0, 0);
    assert_eq!(g.try_start(1_000), Ok(()));
    assert_eq!(g.try_start(1_100), Err(Blocked::Later(250)));
    assert_eq!(g.running(), 1, "a refused start gives its slot back");
    assert_eq!(g.try_start(1_350), Ok(()));
    assert_eq!(g.try_start(1_699), Err(Blocked::Later(1)));
}

#[test]
fn reservoir_drains_and_refreshes() {
    let g = Gate::new(0, 0, 2, 1_000);
    assert_eq!(g.try_start(5_000), Ok(())); // first use refreshes at 5 000
    assert_eq!(g.try_start(5_001), Ok(()));
    assert_eq!(g.try_start(5_002), Err(Blocked::Later(998)));
    assert_eq!(g.try_start(6_000), Ok(()));
}

#[test]
fn turns_go_to_the_most_urgent_core_then_rotate() {
    let g = Gate::new(1, 0, 0, 0);
    assert!(!g.has_queue());
    assert!(!g.my_turn(0), "no waiters, no turn");
    g.publish(0, Some(5));
    g.publish(1, Some(5));
    g.publish(2, Some(5));
    assert!(g.has_queue());
    // last served is core 0 (initial): core 1 is next, then 2, then 0.
    assert!(g.my_turn(1) && !g.my_turn(0) && !g.my_turn(2));
    g.served(1);
    assert!(g.my_turn(2));
    g.served(2);
    assert!(g.my_turn(0));
    // A more urgent waiter wins regardless of turn.
    g.publish(2, Some(0));
    assert!(g.my_turn(2) && !g.my_turn(0));
    g.publish(2, None);
    g.publish(1, None);
    assert!(g.my_turn(0));
    g.publish(0, None);
    assert!(!g.has_queue());
    g.try_enqueue(0);
    assert_eq!(g.queued(), 1);
    g.dequeue();
    g.dequeue();
    assert_eq!(g.queued(), 0);
}

#[test]
fn learns_spacing_from_headers() {
    let g = Gate::new(0, 100, 0, 0);
    g.learn(Some(1.0), Some(60.0), Some(20_000));
    assert_eq!(g.spacing_ms(), 10_000, "one left in 20 s: spread it");
    g.learn(Some(50.0), Some(60.0), Some(20_000));
    assert_eq!(
        g.spacing_ms(),
        100,
        "plenty left: back to the configured spacing"
    );
    g.learn(None, None, None);
    assert_eq!(g.spacing_ms(), 100);
    // Learned in a window that then resets: gone once it has, headers or not.
    g.learn(Some(0.0), Some(60.0), Some(20_000));
    let now = crate::clock::now_ms();
    assert_eq!(g.spacing_at(now), 20_000);
    assert_eq!(g.spacing_at(now + 20_001), 100, "the window reset");
    g.forget_learned();
    assert_eq!(g.spacing_ms(), 100);
}

#[test]
fn contended_across_threads_never_exceeds_the_cap() {
    let g = std::sync::Arc::new(Gate::new(3, 0, 0, 0));
    let peak = std::sync::Arc::new(AtomicU32::new(0));
    let hs: Vec<_> = (0..4)
        .map(|_| {
            let (g, peak) = (g.clone(), peak.clone());
            std::thread::spawn(move || {
                for _ in 0..20_000 {
                    if g.try_start(0).is_ok() {
                        peak.fetch_max(g.running(), Relaxed);
                        g.release();
                    }
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    assert!(peak.load(Relaxed) <= 3);
    assert_eq!(g.running(), 0);
}
