//! Exclusive session leases end to end (both drivers): the lifecycle wire contract, fenced
//! inference (stale generations never reach the upstream), and lease and session headers never
//! reaching the simulator. Races, moves and queued releases: `lease_races.rs`.

mod common;
use common::leases::*;
use common::*;
use ringside::demo::client;
use ringside::simulate::SimOptions;

both_drivers!(
    lifecycle_follows_the_wire_contract,
    inference_is_fenced_to_the_lease,
);

fn lifecycle_follows_the_wire_contract(driver: &str) {
    let sim = start_sim(SimOptions::default());
    let proxy = Proxy::start(driver, 2, "", &config(sim.addr, &["a", "b"], ""));
    let pre = client::request(proxy.addr, "OPTIONS", "/v1/session-leases", &[], b"", T).unwrap();
    assert_eq!(pre.status, 204);
    let allow = pre
        .header("access-control-allow-headers")
        .unwrap_or_default();
    assert!(
        allow.contains("x-ringside-lease-owner") && allow.contains("x-ringside-lease-generation")
    );
    refusals_reach_no_upstream(&proxy, &sim);
    let a = one_owner_reuses_renews_and_is_fenced(&proxy);
    capacity_then_release(&proxy, &a);
}

const ACQUIRE: &str = r#"{"action":"acquire","model":"m"}"#;

/// Each malformed or unauthorised lifecycle call gets its lease error; none reaches the
/// upstream.
fn refusals_reach_no_upstream(proxy: &Proxy, sim: &ringside::simulate::Simulator) {
    let acquire = ACQUIRE;
    let r = proxy.post(
        "/v1/session-leases",
        &[("content-type", "application/json")],
        acquire,
    );
    assert_eq!(r.status, 401, "{}", r.text());
    assert_eq!(r.json()["error"]["type"], "lease_error");
    assert_eq!(
        code(&lease_call(proxy, PLAIN, None, acquire)),
        "LEASE_SCOPE_REQUIRED"
    );
    // `ringside check` refuses a configured lease key without connections; one made through
    // the admin API is told at its first call.
    let made = proxy.admin_with(
        "POST",
        "/admin/clients",
        r#"{"id":"nolist","scopes":["inference","lease:exclusive"]}"#,
    );
    assert_eq!(made.status, 201, "{}", made.text());
    let nolist = made.json()["key"].as_str().unwrap_or_default().to_string();
    let r = lease_call(proxy, &nolist, None, acquire);
    assert_eq!(
        (r.status, code(&r).as_str()),
        (403, "LEASE_KEY_CONFIGURATION_INVALID")
    );
    let r = proxy.post(
        "/v1/session-leases",
        &[("x-api-key", LEASE_A), ("content-type", "text/plain")],
        acquire,
    );
    assert_eq!(
        (r.status, code(&r).as_str()),
        (415, "LEASE_CONTENT_TYPE_REQUIRED")
    );
    let r = lease_call(proxy, LEASE_A, Some("vlo_short"), acquire);
    assert_eq!(
        (r.status, code(&r).as_str()),
        (400, "LEASE_CONTEXT_INVALID")
    );
    let r = lease_call(proxy, LEASE_A, None, r#"{"action":"renew","generation":1}"#);
    assert_eq!(
        (r.status, code(&r).as_str()),
        (400, "LEASE_CONTEXT_REQUIRED")
    );
    let r = lease_call(proxy, LEASE_A, None, r#"{"action":"steal"}"#);
    assert_eq!((r.status, code(&r).as_str()), (400, "LEASE_ACTION_INVALID"));
    assert_eq!(total_attempts(sim), 0, "nothing reaches the upstream");
}

/// Acquire without an owner: Ringside makes one and shows it this once; then reuse, renew,
/// a stale renew, and another key's attempts. Returns the owner.
fn one_owner_reuses_renews_and_is_fenced(proxy: &Proxy) -> String {
    let acquire = ACQUIRE;
    let r = lease_call(proxy, LEASE_A, None, acquire);
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(
        (v["state"].as_str(), v["generation"].as_u64()),
        (Some("ACTIVE"), Some(1))
    );
    let a = v["lease_owner"].as_str().unwrap_or_default().to_string();
    assert!(a.starts_with("vlo_") && a.len() == 47, "{v}");
    let text = r.text();
    assert!(
        !text.contains("sim/") && !text.contains("sk-") && !text.contains("connection"),
        "{text}"
    );
    // Reuse, renew, stale renew.
    let r = lease_call(proxy, LEASE_A, Some(&a), acquire);
    assert_eq!((r.status, r.json()["generation"].as_u64()), (200, Some(1)));
    assert!(r.json().get("lease_owner").is_none(), "never echoed");
    let r = lease_call(
        proxy,
        LEASE_A,
        Some(&a),
        r#"{"action":"renew","generation":1}"#,
    );
    assert_eq!(
        (r.status, r.json()["state"].as_str()),
        (200, Some("ACTIVE"))
    );
    let r = lease_call(
        proxy,
        LEASE_A,
        Some(&a),
        r#"{"action":"renew","generation":2}"#,
    );
    assert_eq!((r.status, code(&r).as_str()), (409, "LEASE_FENCE_STALE"));
    // Another key can neither renew nor take over this owner.
    let r = lease_call(
        proxy,
        LEASE_B,
        Some(&a),
        r#"{"action":"renew","generation":1}"#,
    );
    assert_eq!((r.status, code(&r).as_str()), (409, "LEASE_FENCE_STALE"));
    let r = lease_call(proxy, LEASE_B, Some(&a), acquire);
    assert_eq!(r.status, 409, "{}", r.text());
    a
}

/// A second owner takes the other connection; a third finds no capacity until the first
/// releases (idempotently). Owner values are never kept.
fn capacity_then_release(proxy: &Proxy, a: &str) {
    let (acquire, a) = (ACQUIRE, a.to_string());
    let b = owner(1);
    assert_eq!(lease_call(proxy, LEASE_A, Some(&b), acquire).status, 200);
    let r = lease_call(proxy, LEASE_B, Some(&owner(2)), acquire);
    assert_eq!(
        (r.status, code(&r).as_str()),
        (429, "LEASE_CAPACITY_UNAVAILABLE"),
        "{}",
        r.text()
    );
    let v = r.json();
    assert_eq!(v["state"], "WAITING_FOR_CAPACITY");
    assert_eq!(v["reason"], "NO_FREE_ELIGIBLE_CONNECTION");
    assert_eq!(
        (v["freeCount"].as_u64(), v["eligibleCount"].as_u64()),
        (Some(0), Some(2))
    );
    let retry: u64 = r
        .header("retry-after")
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    assert!((1..=120).contains(&retry), "{retry}");
    assert_eq!(v["retryAfter"].as_u64(), Some(retry));
    assert!(
        !r.text().contains("lease-a") && !r.text().contains(&b),
        "no disclosure"
    );
    // Release (idempotent), then the third owner gets in.
    let rel = r#"{"action":"release","generation":1,"reason":"CLIENT_CANCELLED"}"#;
    let r = lease_call(proxy, LEASE_A, Some(&a), rel);
    assert_eq!(
        (r.status, r.json()["state"].as_str()),
        (200, Some("RELEASED")),
        "{}",
        r.text()
    );
    assert_eq!(lease_call(proxy, LEASE_A, Some(&a), rel).status, 200);
    assert_eq!(
        lease_call(proxy, LEASE_B, Some(&owner(2)), acquire).status,
        200
    );
    let l = leases(proxy);
    assert_eq!(l["active"], 2, "{l}");
    let listed = l.to_string();
    assert!(
        !listed.contains(&a) && !listed.contains(&b),
        "owner values are never kept"
    );
}

fn inference_is_fenced_to_the_lease(driver: &str) {
    let sim = start_sim(SimOptions::default());
    let proxy = Proxy::start(driver, 2, "", &config(sim.addr, &["a", "b"], ""));
    let r = chat_as(&proxy, LEASE_A, None, None);
    assert_eq!(
        (r.status, code(&r).as_str()),
        (400, "LEASE_CONTEXT_REQUIRED")
    );
    let a = owner(0);
    let r = chat_as(&proxy, LEASE_A, Some(&a), None);
    assert_eq!(
        (r.status, code(&r).as_str()),
        (400, "LEASE_CONTEXT_INVALID")
    );
    let r = chat_as(&proxy, LEASE_A, Some(&a), Some("1"));
    assert_eq!((r.status, code(&r).as_str()), (409, "LEASE_REQUIRED"));
    let r = chat_as(&proxy, PLAIN, Some(&a), Some("1"));
    assert_eq!((r.status, code(&r).as_str()), (403, "LEASE_SCOPE_REQUIRED"));
    // The Anthropic endpoint is fenced the same way, in its own dialect.
    let msg = r#"{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}"#;
    let r = proxy.post("/v1/messages", &[("x-api-key", LEASE_A)], msg);
    assert_eq!((r.status, r.json()["type"].as_str()), (400, Some("error")));
    assert_eq!(code(&r), "LEASE_CONTEXT_REQUIRED");
    assert_eq!(total_attempts(&sim), 0);
    let leased = only_the_leased_connection_serves(&proxy, &a);
    fences_hold_and_revocation_frees(&proxy, &sim, &a, &leased);
}

/// Acquired, the lease's requests all go to one connection and other traffic keeps off it.
/// Returns the leased connection.
fn only_the_leased_connection_serves(proxy: &Proxy, a: &str) -> String {
    let a = a.to_string();
    let r = lease_call(
        proxy,
        LEASE_A,
        Some(&a),
        r#"{"action":"acquire","model":"m"}"#,
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let mut served = None;
    for stream in [false, true, false, true] {
        let h = [
            ("x-api-key", LEASE_A),
            ("x-ringside-lease-owner", a.as_str()),
            ("x-ringside-lease-generation", "1"),
        ];
        let r = proxy.post("/v1/chat/completions", &h, &chat("m", stream));
        assert_eq!(r.status, 200, "{}", r.text());
        let id = r.header("x-request-id").unwrap_or_default().to_string();
        let c = proxy.decision(&id)["connection"]
            .as_str()
            .map(str::to_string);
        assert!(
            served.is_none() || served == c,
            "only the leased connection serves"
        );
        served = c;
    }
    let leased = served.unwrap_or_default();
    let other = if leased == "sim/a" { "sim/b" } else { "sim/a" };
    // Other traffic keeps off the leased connection.
    for _ in 0..4 {
        let r = chat_as(proxy, PLAIN, None, None);
        assert_eq!(r.header("x-ringside-connection"), Some(other));
    }
    leased
}

/// Stale generations and replays never reach the upstream; capacity answers when all are
/// leased; lease headers stay home; revocation frees the connection at once.
fn fences_hold_and_revocation_frees(
    proxy: &Proxy,
    sim: &ringside::simulate::Simulator,
    a: &str,
    leased: &str,
) {
    let a = a.to_string();
    // A stale generation and a replay through another key never reach the upstream.
    let before = total_attempts(sim);
    let r = chat_as(proxy, LEASE_A, Some(&a), Some("2"));
    assert_eq!((r.status, code(&r).as_str()), (409, "LEASE_FENCE_STALE"));
    let r = chat_as(proxy, LEASE_B, Some(&a), Some("1"));
    assert_eq!((r.status, code(&r).as_str()), (409, "LEASE_FENCE_STALE"));
    assert_eq!(total_attempts(sim), before);
    // Both connections leased: plain traffic hears about lease capacity.
    let b = owner(1);
    assert_eq!(
        lease_call(proxy, LEASE_B, Some(&b), r#"{"action":"acquire"}"#).status,
        200
    );
    let r = chat_as(proxy, PLAIN, None, None);
    assert_eq!(
        (r.status, code(&r).as_str()),
        (429, "LEASE_CAPACITY_UNAVAILABLE"),
        "{}",
        r.text()
    );
    assert!(r.header("retry-after").is_some());
    // Lease and session headers never reach the simulator.
    let seen = client::request(sim.addr, "GET", "/_sim/requests", &[], b"", T)
        .unwrap()
        .text();
    assert!(
        !seen.contains("lease") && !seen.contains("sess-42") && !seen.contains(&a[4..]),
        "{seen}"
    );
    // The log record keeps the generation, never the owner.
    let (_, d) = proxy.admin("GET", "/admin/decisions?limit=100");
    assert!(d.to_string().contains("\"lease_generation\":1"), "{d}");
    assert!(!d.to_string().contains(&a[4..]));
    // Revoked by the operator: the next request is refused before dispatch.
    let hash = key_sha256(&a);
    let (s, _) = proxy.admin("DELETE", &format!("/admin/leases/{hash}"));
    assert_eq!(s, 200);
    let r = chat_as(proxy, LEASE_A, Some(&a), Some("1"));
    assert_eq!((r.status, code(&r).as_str()), (409, "LEASE_REQUIRED"));
    let r = chat_as(proxy, PLAIN, None, None);
    assert_eq!(
        r.header("x-ringside-connection"),
        Some(leased),
        "freed at once"
    );
}
