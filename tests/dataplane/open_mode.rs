//! Trust boundaries of an open data port (no client keys, as a sidecar runs): a per-tenant quota
//! follows the client's address, not a credential header it can change on every request; a
//! page on an attacker's name rebound to this host gets 421; credential query parameters are
//! dropped however they are spelled, and characters a URL may not carry are refused. (One
//! address holding every connection: `caps.rs`.)

use crate::both_drivers;
use crate::common::*;
use ringside::demo::client;
use ringside::simulate::SimOptions;
use std::io::Write;

both_drivers!(
    a_tenant_quota_follows_the_address_not_the_credential_header,
    a_rebound_name_gets_421_without_client_keys,
    credential_parameters_never_reach_the_provider_however_spelled,
);

fn a_tenant_quota_follows_the_address_not_the_credential_header(driver: &str) {
    let sim = start_sim(SimOptions::default());
    let body = priority_keys(sim.addr, &["a"], "") + "[flow]\ntenant_requests_per_minute = 3\n";
    let proxy = Proxy::start(driver, 1, "", &body);
    let statuses: Vec<u16> = (0..5)
        .map(|i| {
            let auth = format!("Bearer made-up-{i}");
            let r = proxy.post(
                "/v1/chat/completions",
                &[("authorization", &auth)],
                &chat("m", false),
            );
            if r.status == 429 {
                assert!(r.text().contains("TENANT_QUOTA_EXCEEDED"), "{}", r.text());
            }
            r.status
        })
        .collect();
    assert_eq!(statuses, [200, 200, 200, 429, 429]);
}

pub fn chat_request(host: &str) -> String {
    let body = chat("m", false);
    format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
}

fn a_rebound_name_gets_421_without_client_keys(driver: &str) {
    let sim = start_sim(SimOptions::default());
    let proxy = Proxy::start(
        driver,
        1,
        "hosts = [\"llm.corp.example\"]",
        &priority_keys(sim.addr, &["a"], ""),
    );
    let ask = |host: &str| {
        let mut s = raw_client(proxy.addr);
        s.write_all(chat_request(host).as_bytes()).expect("write");
        client::parse_reply(&read_all(s)).expect("an answer")
    };
    let rebound = ask("rebind.attacker.example:8080");
    assert_eq!(rebound.status, 421, "{}", rebound.text());
    assert_eq!(rebound.json()["error"]["code"], "misdirected_host");
    for host in [
        "127.0.0.1",
        "localhost:8080",
        "ringside:8080",
        "ringside.default.svc.cluster.local",
        "llm.corp.example",
    ] {
        assert_eq!(ask(host).status, 200, "{host}");
    }
    assert_eq!(
        attempts_for(&sim, "sk-sim-a"),
        5,
        "the refused one never went upstream"
    );
}

fn credential_parameters_never_reach_the_provider_however_spelled(driver: &str) {
    let sim = start_sim(SimOptions::default());
    let proxy = Proxy::start(driver, 1, "", &priority_keys(sim.addr, &["a"], ""));
    let body = chat("m", false);
    let raw = format!(
        "POST /v1/chat/completions?%6bey=s3cr3t-1&x_api_key=s3cr3t-2&access-token=s3cr3t-3&Subscription_Key=s3cr3t-4&api-version=2024-06-01 HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut s = raw_client(proxy.addr);
    s.write_all(raw.as_bytes()).expect("write");
    let r = client::parse_reply(&read_all(s)).expect("answer");
    assert_eq!(r.status, 200, "{}", r.text());
    let seen = client::request(sim.addr, "GET", "/_sim/requests", &[], b"", T)
        .expect("sim log")
        .text();
    assert!(!seen.contains("s3cr3t"), "{seen}");
    assert!(seen.contains("api-version=2024-06-01"), "{seen}");
    // Characters a URL may not carry: refused, not passed on.
    for bad in ["%3C", "<", "{", "|", "`"] {
        let raw = format!(
            "POST /v1/chat/completions?q=a{bad}b HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        let mut s = raw_client(proxy.addr);
        s.write_all(raw.as_bytes()).expect("write");
        let r = client::parse_reply(&read_all(s)).expect("answer");
        let want = if bad == "%3C" { 200 } else { 400 };
        assert_eq!(r.status, want, "{bad}: {}", r.text());
    }
}
