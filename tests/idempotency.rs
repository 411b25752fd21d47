//! One bill per request (`Idempotency-Key`), on io_uring and on epoll: two concurrent requests
//! with one key reach the upstream once and get the same answer; the same key with another body
//! is a 422; a duplicate stream while the first runs is a 409; a completed answer is replayed
//! within the window, across a kill and a restart; a first request that failed leaves the key
//! to its duplicate.

mod common;
use common::*;
use ringside::demo::client::Reply;
use std::time::Duration;

both_drivers!(
    concurrent_duplicates_reach_the_upstream_once,
    a_duplicate_stream_in_flight_is_refused,
    a_failed_first_leaves_the_key_to_its_duplicate,
    a_replay_survives_a_kill,
);

const BODY: &str = r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;

fn post(proxy: &Proxy, key: &str, body: &str, latency_ms: u64) -> Reply {
    let latency = latency_ms.to_string();
    proxy.post(
        "/v1/chat/completions",
        &[
            ("idempotency-key", key),
            ("x-sim-latency-ms", latency.as_str()),
        ],
        body,
    )
}

fn upstream_attempts(sim: &ringside::simulate::Simulator) -> u64 {
    attempts_for(sim, "sk-sim-a") + attempts_for(sim, "sk-sim-b")
}

fn concurrent_duplicates_reach_the_upstream_once(driver: &str) {
    let sim = start_sim(Default::default());
    let proxy = Proxy::start(driver, 2, "", &priority_keys(sim.addr, &["a", "b"], ""));
    let replies: Vec<Reply> = std::thread::scope(|s| {
        let first = s.spawn(|| post(&proxy, "order-1", BODY, 800));
        std::thread::sleep(Duration::from_millis(200));
        let second = s.spawn(|| post(&proxy, "order-1", BODY, 800));
        vec![first.join().expect("first"), second.join().expect("second")]
    });
    assert_eq!(replies[0].status, 200, "{}", replies[0].text());
    assert_eq!(replies[1].status, 200, "{}", replies[1].text());
    assert_eq!(replies[0].text(), replies[1].text(), "the same answer");
    assert_eq!(upstream_attempts(&sim), 1, "one upstream request for two");
    assert_eq!(replies[0].header("idempotent-replayed"), None);
    assert_eq!(replies[1].header("idempotent-replayed"), Some("true"));
    // Another body under the same key.
    let other = BODY.replace("hi", "hello");
    let r = post(&proxy, "order-1", &other, 0);
    assert_eq!(r.status, 422, "{}", r.text());
    assert!(r.text().contains("idempotency_key_reused"), "{}", r.text());
    // Later duplicates within the window: replayed, the upstream untouched.
    let r = post(&proxy, "order-1", BODY, 0);
    assert_eq!((r.status, r.text()), (200, replies[0].text()));
    assert_eq!(upstream_attempts(&sim), 1);
    // Another key is another request; a key that does not read is refused.
    assert_eq!(post(&proxy, "order-2", BODY, 0).status, 200);
    assert_eq!(upstream_attempts(&sim), 2);
    let r = post(&proxy, "", BODY, 0);
    assert_eq!(r.status, 400, "{}", r.text());
    let d = proxy.admin("GET", "/admin/decisions?limit=20").1;
    assert!(d.to_string().contains("\"replayed\""), "{d}");
}

fn a_duplicate_stream_in_flight_is_refused(driver: &str) {
    let sim = start_sim(Default::default());
    let proxy = Proxy::start(driver, 1, "", &priority_keys(sim.addr, &["a"], ""));
    let stream = chat("m", true);
    let (first, second) = std::thread::scope(|s| {
        let first = s.spawn(|| post(&proxy, "s-1", &stream, 1_000));
        std::thread::sleep(Duration::from_millis(300));
        let second = post(&proxy, "s-1", &stream, 0);
        (first.join().expect("first"), second)
    });
    assert_eq!(first.status, 200);
    assert!(first.text().contains("[DONE]"), "{}", first.text());
    assert_eq!(second.status, 409, "{}", second.text());
    assert!(
        second.text().contains("duplicate_in_flight"),
        "{}",
        second.text()
    );
    assert_eq!(upstream_attempts(&sim), 1);
    // A stream is not replayed: once the first ended, the key is free again.
    let again = post(&proxy, "s-1", &stream, 0);
    assert_eq!(again.status, 200);
    assert_eq!(upstream_attempts(&sim), 2);
}

fn a_failed_first_leaves_the_key_to_its_duplicate(driver: &str) {
    let mut opts = ringside::simulate::SimOptions::default();
    opts.faults
        .push(ringside::simulate::parse_fault_arg("key:sk-sim-a=400").expect("fault"));
    let sim = start_sim(opts);
    let proxy = Proxy::start(driver, 1, "", &priority_keys(sim.addr, &["a"], ""));
    let r = post(&proxy, "f-1", BODY, 0);
    assert_eq!(r.status, 400, "{}", r.text());
    // The 400 is not kept: the same request goes upstream again (and fails again).
    let r = post(&proxy, "f-1", BODY, 0);
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(r.header("idempotent-replayed"), None);
    assert_eq!(upstream_attempts(&sim), 2);
}

fn a_replay_survives_a_kill(driver: &str) {
    let sim = start_sim(Default::default());
    let body = priority_keys(sim.addr, &["a"], "");
    let mut proxy = Proxy::start(driver, 1, "", &body);
    let first = post(&proxy, "k-1", BODY, 0);
    assert_eq!(first.status, 200);
    // The answer is committed by the store's writer right after the request ends.
    std::thread::sleep(Duration::from_millis(500));
    let _ = proxy.child.kill();
    let _ = proxy.child.wait();
    let dir = std::mem::replace(&mut proxy.dir, tempdir::new());
    drop(proxy);
    let proxy = Proxy::start_in(driver, 1, "", &body, dir);
    let r = post(&proxy, "k-1", BODY, 0);
    assert_eq!((r.status, r.text()), (200, first.text()));
    assert_eq!(r.header("idempotent-replayed"), Some("true"));
    assert_eq!(upstream_attempts(&sim), 1);
}
