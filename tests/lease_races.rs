//! Exclusive session leases end to end (both drivers): exactly one winner for the last
//! connection, a lease moving off a cooling connection, a lease released while its request
//! queued refused after the wait.

mod common;
use common::leases::*;
use common::*;
use ringside::demo::client::{self, Reply};
use ringside::simulate::SimOptions;
use serde_json::Value;

both_drivers!(
    two_clients_race_for_the_last_connection,
    a_lease_moves_off_a_cooling_connection,
    a_lease_released_while_queued_is_refused_after_the_wait
);

fn two_clients_race_for_the_last_connection(driver: &str) {
    let sim = start_sim(SimOptions::default());
    let proxy = Proxy::start(driver, 2, "", &config(sim.addr, &["a"], ""));
    for round in 0..4u8 {
        let winners: Vec<(String, Reply)> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..6u8)
                .map(|i| {
                    let proxy = &proxy;
                    s.spawn(move || {
                        let o = owner(round * 6 + i);
                        let key = if i % 2 == 0 { LEASE_A } else { LEASE_B };
                        let r = lease_call(proxy, key, Some(&o), r#"{"action":"acquire"}"#);
                        (o, r)
                    })
                })
                .collect();
            hs.into_iter().filter_map(|h| h.join().ok()).collect()
        });
        let ok: Vec<&(String, Reply)> = winners.iter().filter(|(_, r)| r.status == 200).collect();
        assert_eq!(ok.len(), 1, "exactly one winner in round {round}");
        assert!(
            winners
                .iter()
                .all(|(_, r)| r.status == 200 || r.status == 429)
        );
        let (o, _) = ok[0];
        let key = if leases(&proxy)["leases"][0]["client"] == "lease-a" {
            LEASE_A
        } else {
            LEASE_B
        };
        let r = lease_call(
            &proxy,
            key,
            Some(o),
            r#"{"action":"release","generation":1}"#,
        );
        assert_eq!(r.status, 200, "{}", r.text());
    }
}

fn a_lease_moves_off_a_cooling_connection(driver: &str) {
    let sim = start_sim(SimOptions::default());
    let proxy = Proxy::start(driver, 2, "", &config(sim.addr, &["a", "b", "c"], ""));
    let a = owner(0);
    let r = lease_call(
        &proxy,
        LEASE_A,
        Some(&a),
        r#"{"action":"acquire","model":"m"}"#,
    );
    assert_eq!(r.status, 200);
    let first = leases(&proxy)["leases"][0]["connection"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let key = format!("sk-sim-{}", first.trim_start_matches("sim/"));
    // The leased key starts answering 429 with a long Retry-After: it cools for a minute.
    let spec = format!(r#"{{"key":"{key}","spec":"429;retry-after=60"}}"#);
    let r = client::request(sim.addr, "POST", "/_sim/faults", &[], spec.as_bytes(), T).unwrap();
    assert_eq!(r.status, 200);
    let r = chat_as(&proxy, LEASE_A, Some(&a), Some("1"));
    assert_eq!(r.status, 200, "{}", r.text());
    let moved = r
        .header("x-ringside-connection")
        .unwrap_or_default()
        .to_string();
    assert_ne!(moved, first, "served elsewhere");
    let l = leases(&proxy);
    let live: Vec<&Value> = l["leases"]
        .as_array()
        .map(|v| v.iter().filter(|x| x["state"] == "ACTIVE").collect())
        .unwrap_or_default();
    assert_eq!(live.len(), 1, "{l}");
    assert_eq!(
        (
            live[0]["connection"].as_str(),
            live[0]["generation"].as_u64()
        ),
        (Some(moved.as_str()), Some(1))
    );
    // The same generation keeps working, on the new connection.
    let r = chat_as(&proxy, LEASE_A, Some(&a), Some("1"));
    assert_eq!(
        (r.status, r.header("x-ringside-connection")),
        (200, Some(moved.as_str()))
    );
}

fn a_lease_released_while_queued_is_refused_after_the_wait(driver: &str) {
    let sim = start_sim(SimOptions::default());
    let proxy = Proxy::start(
        driver,
        2,
        "",
        &config(sim.addr, &["a"], "  max_concurrent = 1\n"),
    );
    let a = owner(0);
    assert_eq!(
        lease_call(&proxy, LEASE_A, Some(&a), r#"{"action":"acquire"}"#).status,
        200
    );
    let send = |latency: &'static str| {
        let (addr, a) = (proxy.addr, a.clone());
        std::thread::spawn(move || {
            let h = [
                ("x-api-key", LEASE_A),
                ("x-ringside-lease-owner", a.as_str()),
                ("x-ringside-lease-generation", "1"),
                ("x-sim-latency-ms", latency),
            ];
            client::request(
                addr,
                "POST",
                "/v1/chat/completions",
                &h,
                chat("m", false).as_bytes(),
                T,
            )
        })
    };
    // The first request holds the connection's only slot; the second waits in its queue.
    let holder = send("1500");
    std::thread::sleep(std::time::Duration::from_millis(200));
    let queued = send("0");
    std::thread::sleep(std::time::Duration::from_millis(500));
    let rel = lease_call(
        &proxy,
        LEASE_A,
        Some(&a),
        r#"{"action":"release","generation":1}"#,
    );
    assert_eq!(rel.status, 200);
    let q = queued.join().expect("thread").expect("reply");
    assert_eq!(
        (q.status, code(&q).as_str()),
        (409, "LEASE_REQUIRED"),
        "{}",
        q.text()
    );
    assert_eq!(holder.join().expect("thread").expect("reply").status, 200);
    assert_eq!(
        total_attempts(&sim),
        1,
        "the refused request never reached the upstream"
    );
}
