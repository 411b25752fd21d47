//! Two cores' queue pumps sharing one gate, driven by hand (no runtime, no sleeping).

use super::queue::Waiter;
use super::*;
use futures_channel::oneshot::Receiver;

/// Leaked like the real one (it lives as long as the process).
fn leak(f: FlowShared) -> &'static FlowShared {
    Box::leak(Box::new(f))
}

fn shared(max: u32, min_time: u64) -> &'static FlowShared {
    let conn = ConnFlow {
        max_concurrent: max,
        min_time_ms: min_time,
        ..Default::default()
    };
    leak(FlowShared::new(
        vec![conn],
        Budgets::from_env(&|_| None),
        Vec::new(),
    ))
}

fn enqueue(
    flow: &'static FlowShared,
    fc: &FlowCore,
    tenant: u64,
    priority: u8,
) -> Receiver<Permit> {
    let gate = &flow.gates[0];
    let (tx, rx) = futures_channel::oneshot::channel();
    let mut queues = fc.queues.borrow_mut();
    gate.try_enqueue(0);
    queues[0].push(Waiter {
        tenant,
        priority,
        enqueued_at: 0,
        grant: tx,
    });
    gate.publish(fc.id, queues[0].best_priority());
    rx
}

fn granted(rx: &mut Receiver<Permit>) -> Option<Permit> {
    rx.try_recv().ok().flatten()
}

#[test]
fn a_slot_freed_on_one_core_goes_to_the_oldest_waiter_on_any_core() {
    let flow = shared(1, 0);
    let (c0, c1) = (FlowCore::new(0, 1), FlowCore::new(1, 1));
    let held = Permit {
        flow,
        conn: ConnId::new(0),
        counted: flow.gates[0].try_start(0).is_ok(),
    };
    let mut first = enqueue(flow, &c1, 1, 5); // core 1 asked first
    let mut second = enqueue(flow, &c0, 1, 5);
    c0.pump(flow, 1);
    c1.pump(flow, 1);
    assert!(
        granted(&mut first).is_none() && granted(&mut second).is_none(),
        "still full"
    );
    drop(held);
    c0.pump(flow, 2); // core 0 must not jump the global queue
    assert!(granted(&mut second).is_none());
    c1.pump(flow, 2);
    let p = granted(&mut first).expect("the oldest ticket wins");
    assert_eq!(flow.gates[0].running(), 1);
    drop(p);
    c0.pump(flow, 3);
    assert!(granted(&mut second).is_some());
    assert_eq!(
        flow.gates[0].waiting_cores.load(Acquire),
        0,
        "no core holds tickets now"
    );
}

#[test]
fn a_waiter_that_left_gives_up_its_turn_and_frees_nothing_twice() {
    let flow = shared(1, 0);
    let (c0, c1) = (FlowCore::new(0, 1), FlowCore::new(1, 1));
    let held = flow.gates[0].try_start(0);
    assert!(held.is_ok());
    let gone = enqueue(flow, &c1, 1, 5);
    let mut next = enqueue(flow, &c0, 2, 5);
    drop(gone); // the client disconnected while queued (core 1 held the turn)
    flow.gates[0].dequeue();
    flow.gates[0].release();
    c1.pump(flow, 1); // drops the dead waiter, stops claiming the turn
    c0.pump(flow, 1);
    let p = granted(&mut next).expect("granted");
    assert_eq!(flow.gates[0].running(), 1);
    drop(p);
    assert_eq!(flow.gates[0].running(), 0);
    assert!(!flow.gates[0].has_queue());
}

#[test]
fn spacing_tells_the_pump_when_to_come_back() {
    let flow = shared(0, 100);
    let c0 = FlowCore::new(0, 1);
    assert!(flow.gates[0].try_start(1_000).is_ok());
    let mut rx = enqueue(flow, &c0, 1, 5);
    assert_eq!(c0.pump(flow, 1_040), Some(60));
    assert!(granted(&mut rx).is_none());
    assert_eq!(c0.pump(flow, 1_100), None);
    assert!(granted(&mut rx).is_some());
}

#[test]
fn priorities_and_tenants_within_a_core() {
    let flow = shared(1, 0);
    let c0 = FlowCore::new(0, 1);
    let held = Permit {
        flow,
        conn: ConnId::new(0),
        counted: flow.gates[0].try_start(0).is_ok(),
    };
    let mut low = enqueue(flow, &c0, 1, 9);
    let mut burst: Vec<_> = (0..3).map(|_| enqueue(flow, &c0, 1, 5)).collect();
    let mut trickle = enqueue(flow, &c0, 2, 5);
    let mut order = Vec::new();
    drop(held);
    for step in 0..5 {
        c0.pump(flow, step);
        let mut got = None;
        for (i, rx) in burst.iter_mut().enumerate() {
            if let Some(p) = granted(rx) {
                got = Some((format!("burst{i}"), p));
            }
        }
        if let Some(p) = granted(&mut trickle) {
            got = Some(("trickle".into(), p));
        }
        if let Some(p) = granted(&mut low) {
            got = Some(("low".into(), p));
        }
        let (name, p) = got.expect("one grant per step");
        order.push(name);
        drop(p);
    }
    assert_eq!(order, ["burst0", "trickle", "burst1", "burst2", "low"]);
}

#[test]
fn fail_open_and_reject_policies() {
    let flow = leak(FlowShared::new(
        vec![
            ConnFlow {
                max_concurrent: 1,
                on_saturation: Saturation::Reject,
                ..Default::default()
            },
            ConnFlow {
                max_concurrent: 1,
                on_saturation: Saturation::FailOpen,
                ..Default::default()
            },
        ],
        Budgets::from_env(&|_| None),
        Vec::new(),
    ));
    let fc = FlowCore::new(0, 2);
    let mut rt = monoio::RuntimeBuilder::<monoio::LegacyDriver>::new()
        .enable_timer()
        .build()
        .unwrap();
    rt.block_on(async {
        let ask = |conn| Ask {
            conn,
            tenant: 1,
            priority: 5,
            time_left_ms: 1_000,
        };
        let never = |_rx, _ms| async { None };
        let a = acquire(flow, &fc, ask(ConnId::new(0)), 0, never)
            .await
            .unwrap();
        assert_eq!(
            acquire(flow, &fc, ask(ConnId::new(0)), 0, never)
                .await
                .unwrap_err(),
            Some(Refused::Saturated)
        );
        drop(a);
        let b = acquire(flow, &fc, ask(ConnId::new(1)), 0, never)
            .await
            .unwrap();
        let c = acquire(flow, &fc, ask(ConnId::new(1)), 0, never)
            .await
            .unwrap();
        assert_eq!(
            flow.gates[1].running(),
            1,
            "fail-open goes over the cap without counting"
        );
        drop((b, c));
        assert_eq!(flow.gates[1].running(), 0);
    });
}

#[test]
fn queue_depth_and_timeout() {
    let flow = leak(FlowShared::new(
        vec![ConnFlow {
            max_concurrent: 1,
            max_queue_depth: Some(1),
            max_wait_ms: Some(20),
            ..Default::default()
        }],
        Budgets::from_env(&|_| None),
        Vec::new(),
    ));
    let fc = FlowCore::new(0, 1);
    let mut rt = monoio::RuntimeBuilder::<monoio::LegacyDriver>::new()
        .enable_timer()
        .build()
        .unwrap();
    rt.block_on(async {
        let ask = Ask {
            conn: ConnId::new(0),
            tenant: 1,
            priority: 5,
            time_left_ms: 1_000,
        };
        let _held = acquire(flow, &fc, ask, 0, |_rx, _| async { None })
            .await
            .unwrap();
        // One waiter fills the queue (depth 1); a second is refused at once.
        let gate = &flow.gates[0];
        gate.try_enqueue(0);
        gate.publish(1, Some(5));
        let ask = Ask {
            conn: ConnId::new(0),
            tenant: 1,
            priority: 5,
            time_left_ms: 1_000,
        };
        let r = acquire(flow, &fc, ask, 0, |_rx, _| async { None }).await;
        assert_eq!(r.unwrap_err(), Some(Refused::QueueFull));
        gate.dequeue();
        gate.publish(1, None);
        // A waiter whose wait expires is told so, with its budget as the bound.
        let ask = Ask {
            conn: ConnId::new(0),
            tenant: 1,
            priority: 5,
            time_left_ms: 1_000,
        };
        let seen = std::cell::Cell::new(0);
        let r = acquire(flow, &fc, ask, 0, |_rx, ms| {
            seen.set(ms);
            async { Some(None) }
        })
        .await;
        assert!(matches!(r, Err(Some(Refused::QueueTimeout { .. }))));
        assert_eq!(
            flow.tenants.snapshot(0)[0]["queued"],
            0,
            "the tenant's wait is over"
        );
        assert_eq!(seen.get(), 20, "max_wait_ms from the connection");
        assert_eq!(gate.queued(), 0);
    });
}

#[test]
fn the_depth_limit_is_taken_in_one_step_by_concurrent_cores() {
    let g = std::sync::Arc::new(crate::flow::gate::Gate::new(1, 0, 0, 0));
    let taken = std::sync::atomic::AtomicU32::new(0);
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                for _ in 0..1000 {
                    if g.try_enqueue(3) {
                        taken.fetch_add(1, Relaxed);
                        assert!(g.queued() <= 3, "past the depth");
                        g.dequeue();
                    }
                }
            });
        }
    });
    assert!(taken.load(Relaxed) > 0);
    assert_eq!(g.queued(), 0);
    assert!(g.try_enqueue(0) && g.try_enqueue(0), "0 is unbounded");
}
