//! Exclusive session leases in fleet mode, against a real `redis-server`: 100 owners racing for
//! the last connection through three instances get exactly one winner, a stale generation is
//! refused through another instance, the lease outlives the instance that acquired it
//! (SIGKILL) and a Redis restart on its append-only file, and Redis away fails lease
//! operations and fences closed.

mod common;
use common::redis::Redis;
use common::*;
use ringside::simulate::SimOptions;
use std::time::{Duration, Instant};

const LEASE_KEY: &str = "sk-ringside-lease-a-0123456789";

fn lease_instance(
    driver: &str,
    name: &str,
    redis: &str,
    sim: &ringside::simulate::Simulator,
) -> Proxy {
    let fleet = common::redis::fleet_section(redis, name);
    let client = format!(
        "[[clients]]\nid = \"lease-a\"\nkey_sha256 = \"{}\"\nscopes = [\"inference\", \"lease:exclusive\"]\nallowed_connections = [\"sim/a\"]\n",
        key_sha256(LEASE_KEY)
    );
    Proxy::start(
        driver,
        1,
        "",
        &(priority_keys(sim.addr, &["a"], "") + &client + &fleet),
    )
}

fn owner(n: usize) -> String {
    let tail: String = format!("{n:043}")
        .chars()
        .map(|c| (b'A' + (c as u8 - b'0')) as char)
        .collect();
    format!("vlo_{tail}")
}

fn lease_call(proxy: &Proxy, owner: &str, body: &str) -> ringside::demo::client::Reply {
    proxy.post(
        "/v1/session-leases",
        &[
            ("x-api-key", LEASE_KEY),
            ("content-type", "application/json"),
            ("x-ringside-lease-owner", owner),
        ],
        body,
    )
}

fn fenced_chat(proxy: &Proxy, owner: &str, generation: u64) -> ringside::demo::client::Reply {
    let g = generation.to_string();
    proxy.post(
        "/v1/chat/completions",
        &[
            ("x-api-key", LEASE_KEY),
            ("x-ringside-lease-owner", owner),
            ("x-ringside-lease-generation", &g),
        ],
        &chat("m", false),
    )
}

/// 100 owners acquire the one connection at once, spread over `addrs`; the winners.
fn race_for_the_last_connection(addrs: &[std::net::SocketAddr]) -> Vec<usize> {
    let racers: Vec<_> = (0..100)
        .map(|i| {
            let addr = addrs[i % addrs.len()];
            std::thread::spawn(move || {
                let o = owner(i);
                let r = ringside::demo::client::request(
                    addr,
                    "POST",
                    "/v1/session-leases",
                    &[
                        ("x-api-key", LEASE_KEY),
                        ("content-type", "application/json"),
                        ("x-ringside-lease-owner", &o),
                    ],
                    br#"{"action":"acquire","model":"m"}"#,
                    Duration::from_secs(30),
                );
                (i, r.map(|r| r.status).unwrap_or(0))
            })
        })
        .collect();
    let results: Vec<(usize, u16)> = racers
        .into_iter()
        .map(|t| t.join().expect("racer"))
        .collect();
    let winners: Vec<usize> = results
        .iter()
        .filter(|(_, s)| *s == 200)
        .map(|(i, _)| *i)
        .collect();
    assert_eq!(winners.len(), 1, "exactly one winner: {results:?}");
    assert!(
        results.iter().all(|(_, s)| matches!(s, 200 | 429)),
        "the others were told the connection is taken: {results:?}"
    );
    winners
}

#[test]
fn a_lease_is_exclusive_across_the_fleet_and_outlives_its_instance() {
    let redis_dir = tempdir::new();
    let redis_port = port();
    let redis = Redis::start_in(redis_port, &redis_dir.0, true);
    let sim = start_sim(SimOptions::default());
    let mut instances: Vec<Proxy> = [("uring", "a"), ("epoll", "b"), ("uring", "c")]
        .iter()
        .map(|(d, n)| lease_instance(d, n, &redis.url(), &sim))
        .collect();
    // 100 owners race for the one connection through all three instances: one winner.
    let addrs: Vec<std::net::SocketAddr> = instances.iter().map(|p| p.addr).collect();
    let winners = race_for_the_last_connection(&addrs);
    let winner = owner(winners[0]);
    let acquired_through = winners[0] % 3;
    let other = (acquired_through + 1) % 3;
    // Fenced through another instance: the right generation serves, a stale one is refused.
    assert_eq!(fenced_chat(&instances[other], &winner, 1).status, 200);
    let stale = fenced_chat(&instances[other], &winner, 2);
    assert_eq!(stale.status, 409, "{}", stale.text());
    assert_eq!(stale.json()["error"]["code"], "LEASE_FENCE_STALE");
    // The instance that acquired it dies: nothing acknowledged is lost.
    let dead = &mut instances[acquired_through];
    let _ = dead.child.kill();
    let _ = dead.child.wait();
    assert_eq!(fenced_chat(&instances[other], &winner, 1).status, 200);
    let r = lease_call(
        &instances[other],
        &owner(500),
        r#"{"action":"acquire","model":"m"}"#,
    );
    assert_eq!(r.status, 429, "still held: {}", r.text());
    // Redis itself dies and comes back on its append-only file: the lease is still there.
    drop(redis);
    let r = fenced_chat(&instances[other], &winner, 1);
    assert_eq!(
        r.status,
        503,
        "Redis away: the fence fails closed: {}",
        r.text()
    );
    assert_eq!(r.json()["error"]["code"], "LEASE_SERVICE_UNAVAILABLE");
    let r = lease_call(
        &instances[other],
        &owner(501),
        r#"{"action":"acquire","model":"m"}"#,
    );
    assert_eq!(r.status, 503, "lease operations fail closed: {}", r.text());
    let _redis = Redis::start_in(redis_port, &redis_dir.0, true);
    let t0 = Instant::now();
    loop {
        let r = fenced_chat(&instances[other], &winner, 1);
        if r.status == 200 {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(15), "{}", r.text());
        std::thread::sleep(Duration::from_millis(100));
    }
}
