//! The data port's connection caps (both drivers): keyless connections per address until a
//! valid key, and one address's share of all connections, so that one host never locks the
//! others out; refusals are counted by the setting that refused them and said in the log.

use crate::both_drivers;
use crate::common::*;
use ringside::demo::client;
use ringside::simulate::SimOptions;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

both_drivers!(
    connection_caps_hold,
    one_address_cannot_hold_every_connection
);

/// Whether the server closed `s` without a word.
fn closed(mut s: TcpStream) -> bool {
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let mut b = [0u8; 16];
    matches!(s.read(&mut b), Ok(0) | Err(_))
}

fn connection_caps_hold(driver: &str) {
    let sim = start_sim(SimOptions::default());
    let team = "sk-team-0123456789";
    let body = priority_keys(sim.addr, &["a"], "")
        + &format!(
            "[[clients]]\nid = \"team\"\nkey_sha256 = \"{}\"\n",
            key_sha256(team)
        );
    let proxy = Proxy::start(
        driver,
        2,
        "max_unauthenticated_per_address = 3\nmax_connections = 6",
        &body,
    );
    // Three idle connections without a key fill this address's share.
    let idle: Vec<_> = (0..3).map(|_| raw_client(proxy.addr)).collect();
    std::thread::sleep(std::time::Duration::from_millis(200));
    let mut fourth = raw_client(proxy.addr);
    let _ = fourth.set_read_timeout(Some(std::time::Duration::from_secs(5)));
    let mut b = [0u8; 16];
    let n = std::io::Read::read(&mut fourth, &mut b);
    assert!(
        matches!(n, Ok(0) | Err(_)),
        "the fourth keyless connection is closed: {n:?}"
    );
    // One of them presents a valid key: it no longer counts, and a new connection is served.
    let mut first = idle.into_iter().next().expect("one");
    let auth = format!("Bearer {team}");
    let req = chat("m", false);
    first
        .write_all(
            format!(
                "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: {auth}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{req}",
                req.len()
            )
            .as_bytes(),
        )
        .expect("write");
    let mut got = [0u8; 12];
    std::io::Read::read_exact(&mut first, &mut got).expect("an answer");
    assert_eq!(&got, b"HTTP/1.1 200");
    let r = proxy.post("/v1/chat/completions", &[("authorization", &auth)], &req);
    assert_eq!(r.status, 200, "a slot came free: {}", r.text());
    let refused = proxy
        .metrics()
        .lines()
        .find_map(|l| {
            l.strip_prefix(
                "ringside_connections_refused_total{reason=\"max_unauthenticated_per_address\"} ",
            )
        })
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(0);
    assert!(refused >= 1, "{refused}");
}

fn one_address_cannot_hold_every_connection(driver: &str) {
    let sim = start_sim(SimOptions::default());
    // 16 in all: one address may hold 15 (all but a sixteenth).
    let proxy = Proxy::start(
        driver,
        2,
        "max_connections = 16",
        &priority_keys(sim.addr, &["a"], ""),
    );
    let held: Vec<TcpStream> = (0..15)
        .map(|_| connect_from([127, 0, 0, 1], proxy.addr))
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        closed(connect_from([127, 0, 0, 1], proxy.addr)),
        "the sixteenth from one address is closed"
    );
    let mut other = connect_from([127, 0, 0, 2], proxy.addr);
    other
        .write_all(super::open_mode::chat_request("127.0.0.1").as_bytes())
        .expect("write");
    let r = client::parse_reply(&read_all(other)).expect("an answer");
    assert_eq!(r.status, 200, "another address still gets in: {}", r.text());
    drop(held);
    let m = proxy.metrics();
    assert!(
        m.contains("ringside_connections_refused_total{reason=\"max_connections_per_address\"} 1"),
        "{m}"
    );
    // Said in the log, with the setting and the address.
    let give_up = Instant::now() + Duration::from_secs(5);
    loop {
        let log = std::fs::read_to_string(proxy.dir.0.join("stderr.0.log")).unwrap_or_default();
        // Whole lines only: the last may be mid-write.
        let whole = &log[..log.rfind('\n').map_or(0, |i| i + 1)];
        if let Some(line) = whole
            .lines()
            .find(|l| l.contains("client connections refused at accept"))
        {
            assert!(line.contains("max_connections_per_address"), "{line}");
            assert!(line.contains("127.0.0.1"), "{line}");
            break;
        }
        assert!(Instant::now() < give_up, "no warn line: {log}");
        std::thread::sleep(Duration::from_millis(50));
    }
}
