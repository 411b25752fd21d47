//! The audit trail of admin changes: each change on the admin port is an entry naming its
//! actor (the admin token, or the admin-scoped client key by id), what it changed and the
//! state before and after; a minted key's secret never reaches it; it outlives a restart.

use crate::both_drivers;
use crate::common::*;
use ringside::simulate::SimOptions;

both_drivers!(every_admin_change_is_in_the_trail_with_its_actor);

fn entries(proxy: &Proxy) -> Vec<serde_json::Value> {
    let (status, v) = proxy.admin("GET", "/admin/audit");
    assert_eq!(status, 200, "{v}");
    v["entries"].as_array().cloned().unwrap_or_default()
}

fn every_admin_change_is_in_the_trail_with_its_actor(driver: &str) {
    let sim = start_sim(SimOptions::default());
    let body = priority_keys(sim.addr, &["a"], "");
    let mut proxy = Proxy::start(driver, 1, "", &body);
    assert!(entries(&proxy).is_empty());
    // Mint a key with the token: the entry names the token, and the key's secret is not kept.
    let minted = proxy.admin_with(
        "POST",
        "/admin/clients",
        r#"{"id":"bot","scopes":["admin"]}"#,
    );
    assert_eq!(minted.status, 201, "{}", minted.text());
    let secret = minted.json()["key"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(secret.len() > 20, "{}", minted.text());
    // Change a setting with the new key: the entry names the key by id, before and after.
    let r = ringside::demo::client::request(
        proxy.admin,
        "PATCH",
        "/admin/settings",
        &[
            ("authorization", &format!("Bearer {secret}")),
            ("content-type", "application/json"),
        ],
        br#"{"flow":{"max_wait_ms":1234}}"#,
        T,
    )
    .expect("patch");
    assert_eq!(r.status, 200, "{}", r.text());
    // A read is not a change.
    let _ = proxy.admin("GET", "/admin/connections");
    let r = proxy.admin_with("POST", "/admin/connections/sim/a/reset", "");
    assert_eq!(r.status, 200, "{}", r.text());
    let all = entries(&proxy);
    let text = serde_json::to_string(&all).unwrap_or_default();
    assert_eq!(all.len(), 3, "{text}");
    assert!(
        !text.contains(&secret),
        "the minted key reached the trail: {text}"
    );
    // Newest first.
    let (reset, patch, mint) = (&all[0], &all[1], &all[2]);
    assert_eq!(mint["action"], "client_key.mint");
    assert_eq!(mint["actor"]["token"], "admin_token");
    assert_eq!(mint["after"]["id"], "bot");
    assert_eq!(patch["action"], "settings.patch");
    assert_eq!(patch["actor"]["client_key"], "bot");
    assert_ne!(patch["before"], patch["after"], "{patch}");
    assert!(patch["after"].to_string().contains("1234"), "{patch}");
    assert_eq!(reset["action"], "reset");
    assert_eq!(reset["target"], "/admin/connections/sim/a/reset");
    assert!(reset["ts_ms"].as_u64().unwrap_or(0) >= mint["ts_ms"].as_u64().unwrap_or(u64::MAX));
    // The trail outlives a restart (SIGKILL included: each entry is committed as it is made).
    std::thread::sleep(std::time::Duration::from_millis(200));
    let _ = proxy.child.kill();
    let _ = proxy.child.wait();
    let dir = std::mem::replace(&mut proxy.dir, tempdir::new());
    drop(proxy);
    let proxy = Proxy::start_in(driver, 1, "", &body, dir);
    assert_eq!(entries(&proxy).len(), 3);
}
