//! Client keys end to end (both drivers): open without keys; with keys, 401 without a valid
//! one in the client's dialect, 403 without the inference scope, allowed connections honoured,
//! and the key never shows up anywhere.

mod common;
use common::*;
use ringside::simulate::SimOptions;

both_drivers!(
    client_keys_guard_the_data_port,
    managed_keys_close_open_mode_and_revoke
);

fn managed_keys_close_open_mode_and_revoke(driver: &str) {
    let sim = start_sim(SimOptions::default());
    let proxy = Proxy::start(driver, 2, "", &priority_keys(sim.addr, &["a", "b"], ""));
    // Open (sidecar mode) until a key exists.
    assert_eq!(
        proxy
            .post("/v1/chat/completions", &[], &chat("m", false))
            .status,
        200
    );
    let r = proxy.admin_with(
        "POST",
        "/admin/clients",
        r#"{"id":"bot","allowed_connections":["sim/b"]}"#,
    );
    assert_eq!(r.status, 201, "{}", r.text());
    let key = r.json()["key"].as_str().unwrap_or_default().to_string();
    assert!(key.starts_with("rsk_") && key.len() == 4 + 43, "{key}");
    assert_eq!(
        proxy
            .post("/v1/chat/completions", &[], &chat("m", false))
            .status,
        401
    );
    let r = proxy.post(
        "/v1/chat/completions",
        &[("x-api-key", &key)],
        &chat("m", false),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    // A tenant's key is not told which connection served it; the decision record says.
    assert_eq!(r.header("x-ringside-connection"), None);
    let id = r.header("x-request-id").unwrap_or_default().to_string();
    assert_eq!(proxy.decision(&id)["connection"], "sim/b");
    let (_, list) = proxy.admin("GET", "/admin/clients");
    assert_eq!(list["clients"][0]["id"], "bot", "{list}");
    assert!(
        !list.to_string().contains(&key),
        "the key is shown once, never listed"
    );
    let dup = proxy.admin_with("POST", "/admin/clients", r#"{"id":"bot"}"#);
    assert_eq!(dup.status, 400);
    let bad = r#"{"id":"batch","coalesce_events":"yes"}"#;
    let bad = proxy.admin_with("POST", "/admin/clients", bad);
    assert_eq!(bad.status, 400, "{}", bad.text());
    assert!(bad.text().contains("coalesce_events"), "{}", bad.text());
    let auto = r#"{"id":"auto","coalesce_events":"auto"}"#;
    let auto = proxy.admin_with("POST", "/admin/clients", auto);
    assert_eq!(auto.status, 201, "{}", auto.text());
    assert_eq!(auto.json()["coalesce_events"], "auto", "{}", auto.text());
    let (s, _) = proxy.admin("DELETE", "/admin/clients/auto");
    assert_eq!(s, 200);
    let batch = r#"{"id":"batch","coalesce_events":true}"#;
    let batch = proxy.admin_with("POST", "/admin/clients", batch);
    assert_eq!(batch.status, 201, "{}", batch.text());
    assert_eq!(batch.json()["coalesce_events"], true, "{}", batch.text());
    let batch_key = batch.json()["key"].as_str().unwrap_or_default().to_string();
    let r = proxy.post(
        "/v1/chat/completions",
        &[("x-api-key", &batch_key)],
        &chat("m", true),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.text().ends_with("data: [DONE]\n\n"), "{}", r.text());
    let (s, _) = proxy.admin("DELETE", "/admin/clients/batch");
    assert_eq!(s, 200);
    let (s, _) = proxy.admin("DELETE", "/admin/clients/bot");
    assert_eq!(s, 200);
    // Revoked, and no key left: open again.
    assert_eq!(
        proxy
            .post(
                "/v1/chat/completions",
                &[("x-api-key", &key)],
                &chat("m", false)
            )
            .status,
        200
    );
    let (s, _) = proxy.admin("DELETE", "/admin/clients/bot");
    assert_eq!(s, 404);
}

fn client_keys_guard_the_data_port(driver: &str) {
    let sim = start_sim(SimOptions::default());
    let team = "sk-ringside-team-0123456789";
    let ops = "sk-ringside-ops-0123456789";
    let limited = "sk-ringside-limited-0123456789";
    let body = priority_keys(sim.addr, &["a", "b"], "")
        + &format!(
            "[[clients]]\nid = \"team\"\nkey_sha256 = \"{}\"\n\
             [[clients]]\nid = \"ops\"\nkey_sha256 = \"{}\"\nscopes = [\"admin\"]\n\
             [[clients]]\nid = \"limited\"\nkey_sha256 = \"{}\"\nallowed_connections = [\"sim/b\"]\n",
            key_sha256(team),
            key_sha256(ops),
            key_sha256(limited),
        );
    let proxy = Proxy::start(driver, 2, "", &body);
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
    assert_eq!(r.status, 401);
    assert_eq!(r.json()["error"]["code"], "invalid_api_key");
    assert_eq!(r.header("x-should-retry"), Some("false"));
    let msg = r#"{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}"#;
    let r = proxy.post("/v1/messages", &[("x-api-key", "sk-wrong")], msg);
    assert_eq!(r.status, 401);
    assert_eq!(
        r.json()["error"]["type"],
        "authentication_error",
        "Anthropic dialect"
    );
    let bearer = format!("Bearer {team}");
    let r = proxy.post(
        "/v1/chat/completions",
        &[("authorization", &bearer)],
        &chat("m", false),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let r = proxy.post(
        "/v1/chat/completions",
        &[("x-api-key", team)],
        &chat("m", false),
    );
    assert_eq!(r.status, 200);
    let id = r.header("x-request-id").unwrap_or_default().to_string();
    let r = proxy.post(
        "/v1/chat/completions",
        &[("x-api-key", ops)],
        &chat("m", false),
    );
    assert_eq!(r.status, 403);
    assert_eq!(r.json()["error"]["code"], "insufficient_scope");
    for _ in 0..3 {
        let r = proxy.post(
            "/v1/chat/completions",
            &[("x-api-key", limited)],
            &chat("m", false),
        );
        let id = r.header("x-request-id").unwrap_or_default().to_string();
        assert_eq!(
            proxy.decision(&id)["connection"],
            "sim/b",
            "only its allowed key"
        );
    }
    let d = proxy.decision(&id);
    assert_eq!(d["client"], "team", "{d}");
    let (_, all) = proxy.admin("GET", "/admin/decisions?limit=100");
    let text = all.to_string() + &proxy.metrics();
    for k in [team, ops, limited] {
        assert!(!text.contains(k), "a client key leaked");
    }
    // The client's key is never forwarded upstream.
    let seen = ringside::demo::client::request(sim.addr, "GET", "/_sim/requests", &[], b"", T)
        .unwrap()
        .text();
    assert!(!seen.contains(team) && !seen.contains(limited), "{seen}");
}
