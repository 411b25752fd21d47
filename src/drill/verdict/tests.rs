use super::*;

fn done(at_ms: u64, status: u16) -> Done {
    Done {
        started: Duration::from_millis(at_ms),
        took: Duration::from_millis(10),
        status,
        sends: 1,
        first_ok: (200..300).contains(&status),
        stream: false,
        route: 0,
        cancelled: None,
        told_retry_after: Vec::new(),
    }
}

#[test]
fn figures_and_checks_follow_the_requests() {
    // 0–2 s fine, 2–4 s failing, fine again from 4.5 s.
    let mut all = Vec::new();
    for i in 0..60 {
        let at = i * 100;
        let ok = !(2_000..4_500).contains(&at);
        all.push(done(at, if ok { 200 } else { 429 }));
    }
    let up = Upstream {
        attempts: 90,
        over_cap: vec![],
        contract: vec![Violation {
            target: "p/small".into(),
            need: "tools".into(),
            requests: 2,
        }],
    };
    let f = figures(
        &all,
        (Duration::ZERO, Duration::from_secs(6)),
        Duration::from_secs(4),
        Duration::from_secs(30),
        up,
    );
    assert_eq!(f.requests, 60);
    assert_eq!(f.succeeded, 35);
    assert!((f.amplification - 1.5).abs() < 1e-9);
    assert_eq!(f.recovery_s.map(|s| (s * 10.0).round() / 10.0), Some(0.5));
    let scenario = super::super::plan::builtin(1.0).remove(0);
    let v = judge(scenario, f);
    assert!(!v.held, "success 58% is under 95%");
    assert!(v.checks.iter().any(|c| c.figure == "success" && !c.held));
    assert!(v.checks.iter().any(|c| c.figure == "contract violations"
        && !c.held
        && c.value == "2 (tools at p/small)"));
    assert!(
        v.checks
            .iter()
            .any(|c| c.figure == "amplification" && c.held)
    );
}

#[test]
fn recovery_counts_from_what_the_clients_asked() {
    let at = |start_ms: u64, took_ms: u64, ok: bool| Done {
        started: Duration::from_millis(start_ms),
        took: Duration::from_millis(took_ms),
        status: if ok { 200 } else { 503 },
        sends: 1,
        first_ok: ok,
        stream: false,
        route: 0,
        cancelled: None,
        told_retry_after: vec![],
    };
    let end = Duration::from_secs(3);
    // Failing fast until 3.4 s, then served: back 0.5 s after the fault (the first window
    // without a failure starts at 3.5).
    let failing: Vec<Done> = (0..50).map(|i| at(3_000 + i * 100, 5, i >= 5)).collect();
    let refs: Vec<&Done> = failing.iter().collect();
    assert_eq!(
        recovery(&refs, end).map(|s| (s * 10.0).round() / 10.0),
        Some(0.5)
    );
    // Nothing asked until 6 s (every client held by a slow answer from the fault), then
    // served at once: back when first asked.
    let held: Vec<Done> = (0..30).map(|i| at(6_000 + i * 100, 5, true)).collect();
    let refs: Vec<&Done> = held.iter().collect();
    assert_eq!(recovery(&refs, end), Some(0.0));
    // The same silence, then failures: counted from the fault's end.
    let late: Vec<Done> = (0..40).map(|i| at(6_000 + i * 100, 5, i >= 5)).collect();
    let refs: Vec<&Done> = late.iter().collect();
    assert_eq!(
        recovery(&refs, end).map(|s| (s * 10.0).round() / 10.0),
        Some(3.5)
    );
}
