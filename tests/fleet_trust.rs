//! The fleet trusts only its members (docs/security.md, *The fleet*). A real `redis-server`,
//! written to the way someone with Redis access but not the fleet secret would: entries and
//! messages in the fleet's own shapes, unsigned; entries moved from another place; messages
//! captured and sent again; and entries signed with the secret that break the rules local
//! input follows. Two instances (io_uring and epoll) and one that joins afterwards ignore all
//! of it, count it and go on serving.

mod common;
use common::redis::{Redis, instance, served_by, sim, state_of, subscribe};
use common::*;
use ringside::fleet::signed::FleetKey;
use ringside::fleet::wire::{Fact, Message, fingerprint};
use ringside::resilience::cooldown::{ConnState, Terminal};
use std::time::{Duration, Instant};

/// `ringside_fleet_refused_total{reason}` on `proxy`.
fn refused(proxy: &Proxy, reason: &str) -> u64 {
    let line = format!("ringside_fleet_refused_total{{reason=\"{reason}\"}} ");
    proxy
        .metrics()
        .lines()
        .find_map(|l| l.strip_prefix(line.as_str()))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// Wait until `proxy` has refused at least `n` things for `reason`. A binary without the
/// counter (an older one, under `RINGSIDE_BIN`) gets 2 s for the writes to arrive, so that
/// the test fails on what it let through rather than on the counter.
fn until_refused(proxy: &Proxy, reason: &str, n: u64) {
    if !proxy.metrics().contains("ringside_fleet_refused_total") {
        std::thread::sleep(Duration::from_secs(2));
        return;
    }
    let t0 = Instant::now();
    while refused(proxy, reason) < n {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "{reason}: {} refused, {n} expected",
            refused(proxy, reason)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

const FORGED_KEY: &str = "rsk_forged-by-someone-with-redis-access";

/// A managed client entry as the admin API writes it.
fn client_entry(id: &str, scopes: &str) -> String {
    format!(r#"{{"id":"{id}","scopes":{scopes},"authenticated":true}}"#)
}

#[test]
fn a_redis_writer_cannot_mint_a_client_key() {
    let redis = Redis::start();
    let sim = sim();
    let a = instance("uring", "a", &redis.url(), &sim);
    let b = instance("epoll", "b", &redis.url(), &sim);
    let digest = ringside::secret::hex(&ringside::secret::digest(FORGED_KEY.as_bytes()));
    let entry = client_entry("intruder", r#"["admin","inference"]"#);
    // Kept, as a joining instance reads them, and told, as running ones hear them.
    let key = format!("{{ringside}}:kv:clientkey/{digest}");
    redis.cmd(&["SET", &key, &entry]);
    let pointer = format!(r#"{{"digest":"{digest}"}}"#);
    redis.cmd(&["SET", "{ringside}:kv:client/intruder", &pointer]);
    let news = format!(r#"{{"from":"x","key":"clientkey/{digest}","value":{entry}}}"#);
    redis.cmd(&["PUBLISH", "{ringside}:kv", &news]);
    // An id the admin API refuses (a line break, markup), shown as `source: admin` if taken.
    let d2 = ringside::secret::hex(&ringside::secret::digest(b"rsk_bad-id"));
    let bad = client_entry("evil\\r\\n<b>x</b>", r#"["inference"]"#);
    redis.cmd(&["SET", &format!("{{ringside}}:kv:clientkey/{d2}"), &bad]);
    let news = format!(r#"{{"from":"x","key":"clientkey/{d2}","value":{bad}}}"#);
    redis.cmd(&["PUBLISH", "{ringside}:kv", &news]);
    // A member's genuine entry moved to the forged key's place is no better.
    let fleet = FleetKey::new(FLEET_SECRET);
    let elsewhere = fleet.sign("{ringside}:kv:clientkey/other", now(), &entry);
    redis.cmd(&["SET", &format!("{key}-moved"), &elsewhere]);
    until_refused(&a, "unsigned", 1);
    until_refused(&b, "unsigned", 1);
    let c = instance("uring", "c", &redis.url(), &sim);
    for p in [&a, &b, &c] {
        let forged = [("authorization", format!("Bearer {FORGED_KEY}"))];
        let forged: Vec<(&str, &str)> = forged.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let mint = ringside::demo::client::request(
            p.admin,
            "POST",
            "/admin/clients",
            &[forged[0], ("content-type", "application/json")],
            br#"{"id":"minted-by-intruder","scopes":["admin"]}"#,
            T,
        )
        .expect("admin");
        assert_eq!(
            mint.status,
            401,
            "the forged key is no admin: {}",
            mint.text()
        );
        // Open mode stays open: a forged key does not close it.
        assert_eq!(served_by(p), "sim/b");
        let (_, clients) = p.admin("GET", "/admin/clients");
        assert!(!clients.to_string().contains("intruder"), "{clients}");
        assert!(!clients.to_string().contains("evil"), "{clients}");
    }
    assert!(refused(&c, "unsigned") >= 2, "c read the forged entries");
}

#[test]
fn an_entry_signed_by_a_member_is_still_held_to_the_rules_of_local_input() {
    let redis = Redis::start();
    let sim = sim();
    let a = instance("epoll", "a", &redis.url(), &sim);
    let fleet = FleetKey::new(FLEET_SECRET);
    // An id with a line break and markup, which the admin API refuses.
    let digest = ringside::secret::hex(&ringside::secret::digest(b"rsk_bad-id"));
    let entry = client_entry("evil\\r\\n<b>x</b>", r#"["inference"]"#);
    let key = format!("{{ringside}}:kv:clientkey/{digest}");
    redis.cmd(&["SET", &key, &fleet.sign(&key, now(), &entry)]);
    let news = format!(r#"{{"from":"x","key":"clientkey/{digest}","value":{entry}}}"#);
    redis.cmd(&[
        "PUBLISH",
        "{ringside}:kv",
        &fleet.sign("{ringside}:kv", now(), &news),
    ]);
    // A model name that would display as another, in a lockout.
    let lock = Message {
        from: "x".into(),
        fact: Fact::LockClear {
            conn: "sim/a".into(),
            key: fingerprint("sk-sim-a"),
            model: Some("gpt-4o\u{202e}".into()),
        },
    };
    let text = serde_json::to_string(&lock).expect("json");
    redis.cmd(&[
        "PUBLISH",
        "{ringside}:health",
        &fleet.sign("{ringside}:health", now(), &text),
    ]);
    until_refused(&a, "invalid", 2);
    let b = instance("uring", "b", &redis.url(), &sim);
    until_refused(&b, "invalid", 1);
    for p in [&a, &b] {
        let (_, clients) = p.admin("GET", "/admin/clients");
        assert!(!clients.to_string().contains("evil"), "{clients}");
        assert_eq!(served_by(p), "sim/b", "open mode stays open");
    }
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A connection state that bans `sim/<conn>`, as a member would tell it.
fn banned(conn: &str, secret: &str) -> String {
    let state = ConnState {
        terminal: Some(Terminal::Banned),
        ..Default::default()
    };
    let m = Message {
        from: "intruder".into(),
        fact: Fact::Conn {
            conn: format!("sim/{conn}"),
            key: fingerprint(secret),
            state,
        },
    };
    serde_json::to_string(&m).expect("json")
}

#[test]
fn forged_health_and_lease_news_ban_nothing_and_replays_are_refused() {
    let redis = Redis::start();
    let sim = sim();
    let a = instance("uring", "a", &redis.url(), &sim);
    let b = instance("epoll", "b", &redis.url(), &sim);
    let heard = subscribe(&redis, "{ringside}:health");
    // A genuine fact to capture: a's key `a` answers 429 and cools.
    assert_eq!(served_by(&a), "sim/b");
    let genuine = heard
        .recv_timeout(Duration::from_secs(10))
        .expect("a told the fleet of its cooldown");
    // Unsigned: a ban told and kept.
    let ban = banned("b", "sk-sim-b");
    redis.cmd(&["PUBLISH", "{ringside}:health", &ban]);
    redis.cmd(&["HSET", "{ringside}:health:conn:intruder", "sim/b#x", &ban]);
    // A lease taking `sim/b` off every instance for a day.
    let day = now() + 86_400_000;
    let lease = format!(r#"{{"conn":"sim/b","until":{day}}}"#);
    redis.cmd(&["PUBLISH", "{ringside}:leases", &lease]);
    // The genuine fact, sent three times more.
    for _ in 0..3 {
        redis.cmd(&["PUBLISH", "{ringside}:health", &genuine]);
    }
    until_refused(&b, "unsigned", 2);
    until_refused(&b, "replayed", 3);
    let c = instance("epoll", "c", &redis.url(), &sim);
    for p in [&a, &b, &c] {
        assert_ne!(state_of(p, "b"), "banned");
        assert_eq!(served_by(p), "sim/b", "b is neither banned nor leased");
    }
    assert!(refused(&c, "unsigned") >= 1, "c read the forged state");
    assert!(
        ringside::demo::client::request(b.admin, "GET", "/admin/fleet", &[ADMIN_AUTH], b"", T)
            .expect("fleet view")
            .json()["refused"]["replayed"]
            .as_u64()
            >= Some(3)
    );
}
