//! Concurrency caps, spacing and reservoirs across the fleet, against a real `redis-server`:
//! 300 concurrent requests over three instances against a key with `max_concurrent = 8` never
//! put more than 8 at once on the upstream; an account allowing 3 at once never has more than 3
//! there; 100 ms spacing holds for three instances together and a reservoir of 10 lets 10
//! through in all; with Redis away each instance falls back to a share and comes back.

mod common;
use common::redis::{Redis, burst, served_by, with_fleet};
use common::*;
use ringside::simulate::SimOptions;
use std::time::{Duration, Instant};

#[test]
fn a_concurrency_cap_holds_across_the_fleet() {
    let redis = Redis::start();
    // Each answer takes 100 ms: 300 requests against a cap of 8 keep every instance waiting.
    let sim = start_sim(SimOptions {
        latency_ms: 100,
        ..Default::default()
    });
    let fleet = |name: &str| common::redis::fleet_section(&redis.url(), name);
    let body = priority_keys(sim.addr, &["a"], "")
        .replace("  priority = 0\n", "  priority = 0\n  max_concurrent = 8\n");
    let instances: Vec<Proxy> = [("uring", "a"), ("epoll", "b"), ("uring", "c")]
        .iter()
        .map(|(driver, name)| Proxy::start(driver, 2, "", &(body.clone() + &fleet(name))))
        .collect();
    let addrs: Vec<std::net::SocketAddr> = instances.iter().map(|p| p.addr).collect();
    let clients: Vec<_> = (0..300)
        .map(|i| {
            let addr = addrs[i % addrs.len()];
            std::thread::spawn(move || {
                let body = chat("m", false);
                ringside::demo::client::request(
                    addr,
                    "POST",
                    "/v1/chat/completions",
                    &[],
                    body.as_bytes(),
                    Duration::from_secs(60),
                )
                .map(|r| r.status)
                .unwrap_or(0)
            })
        })
        .collect();
    let statuses: Vec<u16> = clients
        .into_iter()
        .map(|t| t.join().expect("client"))
        .collect();
    let ok = statuses.iter().filter(|&&s| s == 200).count();
    assert_eq!(ok, 300, "every request was served in turn: {statuses:?}");
    let peak = sim_stats(&sim)["keys"]["sk-sim-a"]["peak_concurrency"]
        .as_u64()
        .unwrap_or(0);
    eprintln!("peak concurrency at the upstream: {peak} (cap 8, three instances)");
    assert!(peak <= 8, "the cap held across the fleet: peak {peak}");
    assert!(
        peak >= 4,
        "the instances shared the cap rather than one slot each: {peak}"
    );
}

#[test]
fn an_account_cap_holds_across_the_fleet() {
    let redis = Redis::start();
    let sim = start_sim(SimOptions {
        latency_ms: 100,
        ..Default::default()
    });
    // The key has no cap of its own: only its account's 3 at once limits it.
    let body = priority_keys(sim.addr, &["a"], "").replace(
        "  priority = 0\n",
        "  priority = 0\n  account = \"org-1\"\n",
    ) + "  [[providers.accounts]]\n  id = \"org-1\"\n  max_concurrent = 3\n";
    let instances: Vec<Proxy> = [("uring", "a"), ("epoll", "b"), ("uring", "c")]
        .iter()
        .map(|(d, n)| Proxy::start(d, 1, "", &(body.clone() + &with_fleet(&redis, n))))
        .collect();
    let addrs: Vec<std::net::SocketAddr> = instances.iter().map(|p| p.addr).collect();
    let statuses = burst(&addrs, 60, "someone");
    assert!(statuses.iter().all(|&s| s == 200), "{statuses:?}");
    let peak = sim_stats(&sim)["keys"]["sk-sim-a"]["peak_concurrency"]
        .as_u64()
        .unwrap_or(0);
    assert!(
        peak <= 3,
        "the account's cap held across the fleet: peak {peak}"
    );
}

#[test]
fn spacing_and_a_reservoir_hold_across_the_fleet() {
    let redis = Redis::start();
    let sim = start_sim(SimOptions::default());
    let start = |extra: &str, name: &str| {
        let body = priority_keys(sim.addr, &["a"], "")
            .replace("  priority = 0\n", &format!("  priority = 0\n{extra}"));
        Proxy::start("uring", 1, "", &(body + &with_fleet(&redis, name)))
    };
    // 100 ms between starts, fleet-wide: 30 requests over three instances take about 3 s (one
    // instance alone would start its 10 in 1 s).
    let spaced: Vec<Proxy> = ["a", "b", "c"]
        .iter()
        .map(|n| start("  min_time_ms = 100\n", n))
        .collect();
    let addrs: Vec<std::net::SocketAddr> = spaced.iter().map(|p| p.addr).collect();
    let t0 = Instant::now();
    let statuses = burst(&addrs, 30, "someone");
    let took = t0.elapsed();
    assert!(statuses.iter().all(|&s| s == 200), "{statuses:?}");
    assert!(
        took >= Duration::from_millis(2_500),
        "the spacing held fleet-wide: {took:?}"
    );
    drop(spaced);
    // A reservoir of 10 a minute, fleet-wide: of 30 requests 10 pass, the rest time out waiting.
    let extra = "  reservoir = 10\n  reservoir_refresh_ms = 60000\n  max_wait_ms = 1000\n";
    let limited: Vec<Proxy> = ["d", "e", "f"].iter().map(|n| start(extra, n)).collect();
    let addrs: Vec<std::net::SocketAddr> = limited.iter().map(|p| p.addr).collect();
    let statuses = burst(&addrs, 30, "someone-else");
    let ok = statuses.iter().filter(|&&s| s == 200).count();
    assert_eq!(ok, 10, "the reservoir held fleet-wide: {statuses:?}");
}

fn fleet_share(proxy: &Proxy) -> Option<u64> {
    proxy.admin("GET", "/admin/queues").1["queues"][0]["fleet_share"].as_u64()
}

fn until_share(proxy: &Proxy, want: u64) {
    let t0 = Instant::now();
    while fleet_share(proxy) != Some(want) {
        assert!(
            t0.elapsed() < Duration::from_secs(15),
            "share {:?}, not {want}",
            fleet_share(proxy)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Two instances (uring and epoll) sharing a key capped at `cap` through Redis on a port of its
/// own, each having seen the other; then Redis goes away and each falls back to half the cap.
/// Returns Redis's port (to start it again), the simulator and the two instances.
fn two_instances_then_redis_away(
    sim: SimOptions,
    cap: u64,
) -> (u16, ringside::simulate::Simulator, Proxy, Proxy) {
    let redis_port = port();
    let redis = Redis::start_on(redis_port);
    let sim = start_sim(sim);
    let body = priority_keys(sim.addr, &["a"], "").replace(
        "  priority = 0\n",
        &format!("  priority = 0\n  max_concurrent = {cap}\n"),
    );
    let a = Proxy::start("uring", 1, "", &(body.clone() + &with_fleet(&redis, "a")));
    let b = Proxy::start("epoll", 1, "", &(body + &with_fleet(&redis, "b")));
    // Idle: one slot at hand each.
    until_share(&a, 1);
    until_share(&b, 1);
    // One refresh (each second) after both hold slots, so each has seen the other.
    std::thread::sleep(Duration::from_millis(2_500));
    // Redis away: the cap divided by the two instances last seen.
    drop(redis);
    until_share(&a, cap / 2);
    until_share(&b, cap / 2);
    (redis_port, sim, a, b)
}

#[test]
fn caps_fall_back_to_a_local_share_while_redis_is_away_and_come_back() {
    let (redis_port, _sim, a, b) = two_instances_then_redis_away(SimOptions::default(), 6);
    assert_eq!(served_by(&a), "sim/a", "still serving");
    // Back: shares follow demand again.
    let _redis = Redis::start_on(redis_port);
    until_share(&a, 1);
    until_share(&b, 1);
    assert_eq!(served_by(&b), "sim/a");
}

/// Redis comes back empty while both instances have more waiting than their fallback share:
/// neither takes the whole cap before the other holds slots again, so the shares the two
/// gates admit by never add up to more than the cap (each instance's link comes back on its own
/// backoff; the first back used to take it all while the other still admitted its fallback).
#[test]
fn back_from_a_redis_outage_the_shares_never_add_up_past_the_cap() {
    let slow = SimOptions {
        latency_ms: 400,
        ..Default::default()
    };
    let (redis_port, sim, a, b) = two_instances_then_redis_away(slow, 4);
    // Steady demand of 4 on each instance, more than its fallback share of 2.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load: Vec<_> = [a.addr, b.addr]
        .into_iter()
        .flat_map(|addr| std::iter::repeat_n(addr, 4))
        .map(|addr| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let body = chat("m", false);
                    let _ = ringside::demo::client::request(
                        addr,
                        "POST",
                        "/v1/chat/completions",
                        &[],
                        body.as_bytes(),
                        Duration::from_secs(30),
                    );
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let _redis = Redis::start_on(redis_port);
    let t0 = Instant::now();
    let mut worst = 0;
    while t0.elapsed() < Duration::from_secs(10) {
        let sum = fleet_share(&a).unwrap_or(0) + fleet_share(&b).unwrap_or(0);
        worst = worst.max(sum);
        std::thread::sleep(Duration::from_millis(20));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for t in load {
        let _ = t.join();
    }
    eprintln!("the most the two shares added up to after Redis came back: {worst} (cap 4)");
    assert!(worst <= 4, "over-admitted: shares added up to {worst}");
    let peak = sim_stats(&sim)["keys"]["sk-sim-a"]["peak_concurrency"]
        .as_u64()
        .unwrap_or(0);
    assert!(peak <= 4, "the cap held at the upstream: peak {peak}");
}
