//! OAuth connections that stay signed in, end to end on io_uring and on epoll, against the
//! simulator's token endpoint: an expired access token is refreshed once for many concurrent
//! requests, which all go on to the same account; a restart keeps the refreshed token (sealed
//! in the store, never in clear); a refresh token refused for good expires the connection with
//! the reason; a token near its expiry is refreshed ahead, before any request meets a 401; a
//! refreshed token an upstream echoes is redacted like the configured key.

mod common;
use common::*;
use ringside::simulate::{SimOptions, parse_fault_arg};
use std::time::{Duration, Instant};

both_drivers!(
    an_expired_token_is_refreshed_once_for_50_concurrent_requests,
    a_restart_keeps_the_refreshed_token,
    a_refused_refresh_token_expires_the_connection,
    a_token_near_its_expiry_is_refreshed_ahead,
    a_refreshed_token_an_upstream_echoes_is_redacted,
);

const MESSAGE: &str =
    r#"{"model":"m","max_tokens":16,"messages":[{"role":"user","content":"hello"}]}"#;

fn sim_expired_a() -> ringside::simulate::Simulator {
    let mut opts = SimOptions::default();
    opts.faults
        .push(parse_fault_arg("key:sk-sim-a=expired-token").expect("fault"));
    start_sim(opts)
}

/// One Anthropic OAuth provider with account a (its refresh settings in `a`) and, when `b`,
/// account b after it.
fn oauth(sim: std::net::SocketAddr, a: &str, b: bool) -> String {
    let mut s = format!(
        "[[providers]]\nid = \"claude\"\ndialect = \"anthropic\"\nauth = \"oauth\"\nbase_url = \"http://{sim}/v1\"\n\
         [[providers.connections]]\nid = \"a\"\nkey_env = \"SIM_KEY_A\"\nmodels = [\"m\"]\npriority = 0\n\
         token_url = \"http://{sim}/v1/oauth/token\"\n{a}\n"
    );
    if b {
        s.push_str("[[providers.connections]]\nid = \"b\"\nkey_env = \"SIM_KEY_B\"\nmodels = [\"m\"]\npriority = 1\n");
    }
    s
}

fn token_endpoint(sim: &ringside::simulate::Simulator) -> serde_json::Value {
    ringside::demo::client::request(
        sim.addr,
        "GET",
        "/_sim/accounts",
        &[],
        b"",
        Duration::from_secs(5),
    )
    .expect("simulator")
    .json()["token_endpoint"]
        .clone()
}

fn conn_view(proxy: &Proxy, conn: &str) -> serde_json::Value {
    let (_, v) = proxy.admin("GET", "/admin/connections");
    v["connections"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["connection"] == conn)
        .cloned()
        .unwrap_or_default()
}

fn an_expired_token_is_refreshed_once_for_50_concurrent_requests(driver: &str) {
    let sim = sim_expired_a();
    let cfg = oauth(sim.addr, "refresh_token_env = \"SIM_REFRESH_A\"", false);
    let proxy = Proxy::start(driver, 2, "", &cfg);
    let mut ids = Vec::new();
    for r in post_concurrently(proxy.addr, "/v1/messages", MESSAGE, 50) {
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.header("x-ringside-connection"), Some("claude/a"));
        ids.push(r.header("x-request-id").unwrap_or_default().to_string());
    }
    let t = token_endpoint(&sim);
    assert_eq!(
        (t["calls"].as_u64(), t["granted"].as_u64()),
        (Some(1), Some(1)),
        "{t}"
    );
    // A request that met the 401 went to the same account with the new token.
    let refreshed = ids.iter().any(|id| {
        let d = proxy.decision(id);
        d["attempts"][0]["via"] == "token-refreshed" && d["attempts"][0]["status"] == 401
    });
    assert!(refreshed);
    let a = conn_view(&proxy, "a");
    assert_eq!(a["state"], "active", "{a}");
    assert_eq!(a["oauth"]["refreshes"], 1, "{a}");
    assert!(
        a["oauth"]["expires_in_s"].as_u64().unwrap_or(0) > 3_000,
        "{a}"
    );
    assert!(
        !a.to_string().contains("sk-ant-oat01-sim"),
        "never a token: {a}"
    );
}

fn a_restart_keeps_the_refreshed_token(driver: &str) {
    let sim = sim_expired_a();
    let store = "[store]\ntoken_key_env = \"RINGSIDE_TEST_TOKEN_KEY\"\n";
    let cfg = format!(
        "{store}{}",
        oauth(sim.addr, "refresh_token_env = \"SIM_REFRESH_A\"", false)
    );
    let mut proxy = Proxy::start(driver, 2, "", &cfg);
    let r = proxy.post("/v1/messages", &[], MESSAGE);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(attempts_for(&sim, "sk-sim-a"), 1, "the expired token, once");
    assert!(proxy.terminate().success());
    let dir = std::mem::replace(&mut proxy.dir, tempdir::new());
    drop(proxy);
    // The store holds the tokens sealed: not one in clear.
    for entry in std::fs::read_dir(dir.0.join("data"))
        .expect("data dir")
        .flatten()
    {
        let bytes = std::fs::read(entry.path()).unwrap_or_default();
        let text = String::from_utf8_lossy(&bytes);
        assert!(!text.contains("sk-ant-oat01-sim"), "{:?}", entry.path());
        assert!(!text.contains("sim-refresh-issued"), "{:?}", entry.path());
    }
    let proxy = Proxy::start_in(driver, 2, "", &cfg, dir);
    let r = proxy.post("/v1/messages", &[], MESSAGE);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(attempt_count(&r), 1);
    // No 401 again and no second refresh: the environment's refresh token was spent by the
    // first one (rotated), so only the kept token could serve.
    assert_eq!(attempts_for(&sim, "sk-sim-a"), 1);
    assert_eq!(token_endpoint(&sim)["calls"], 1);
}

fn a_refused_refresh_token_expires_the_connection(driver: &str) {
    let sim = sim_expired_a();
    // Not a refresh token the endpoint knows.
    let cfg = oauth(sim.addr, "refresh_token_env = \"SIM_KEY_C\"", true);
    let proxy = Proxy::start(driver, 2, "", &cfg);
    let r = proxy.post("/v1/messages", &[], MESSAGE);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("x-ringside-connection"), Some("claude/b"));
    let id = r.header("x-request-id").unwrap_or_default().to_string();
    let d = proxy.decision(&id);
    assert_eq!(d["attempts"][0]["reason"], "token_refresh_failed", "{d}");
    assert!(
        d["attempts"][0]["detail"]
            .as_str()
            .unwrap_or("")
            .contains("invalid_grant"),
        "{d}"
    );
    let a = conn_view(&proxy, "a");
    assert_eq!(a["state"], "expired", "{a}");
    assert!(
        a["oauth"]["refused"]
            .as_str()
            .unwrap_or("")
            .contains("invalid_grant"),
        "{a}"
    );
    // Expired for good: the next request does not try it.
    let r = proxy.post("/v1/messages", &[], MESSAGE);
    assert_eq!(attempt_count(&r), 1);
    assert_eq!(attempts_for(&sim, "sk-sim-a"), 1);
}

fn a_token_near_its_expiry_is_refreshed_ahead(driver: &str) {
    let sim = sim_expired_a();
    let a = "refresh_token_env = \"SIM_REFRESH_A\"\nexpires_at_env = \"SIM_EXPIRES_PAST\"";
    let proxy = Proxy::start(driver, 2, "", &oauth(sim.addr, a, false));
    let give_up = Instant::now() + Duration::from_secs(10);
    while conn_view(&proxy, "a")["oauth"]["refreshes"] != 1 && Instant::now() < give_up {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(conn_view(&proxy, "a")["oauth"]["refreshes"], 1);
    let r = proxy.post("/v1/messages", &[], MESSAGE);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(attempt_count(&r), 1);
    assert_eq!(
        attempts_for(&sim, "sk-sim-a"),
        0,
        "no request met the old token"
    );
}

fn a_refreshed_token_an_upstream_echoes_is_redacted(driver: &str) {
    let mut opts = SimOptions::default();
    opts.faults
        .push(parse_fault_arg("key:sk-sim-a=expired-token").expect("fault"));
    // The first token the endpoint grants, quoted back in a header and in the error's text.
    opts.faults
        .push(parse_fault_arg("key:sk-ant-oat01-sim-1=400;echo-key").expect("fault"));
    let sim = start_sim(opts);
    let cfg = oauth(sim.addr, "refresh_token_env = \"SIM_REFRESH_A\"", false);
    let proxy = Proxy::start(driver, 1, "# access log to file", &cfg);
    let r = proxy.post("/v1/messages", &[], MESSAGE);
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(
        token_endpoint(&sim)["granted"],
        1,
        "the token was refreshed"
    );
    assert_eq!(r.header("x-echo-key"), Some("Bearer [REDACTED]"));
    assert!(r.text().contains("[REDACTED]"), "{}", r.text());
    let id = r.header("x-request-id").unwrap_or_default().to_string();
    let record = proxy.decision(&id).to_string();
    assert!(record.contains("[REDACTED]"), "{record}");
    let mut log = String::new();
    let give_up = Instant::now() + Duration::from_secs(5);
    while !log.contains(&id) && Instant::now() < give_up {
        std::thread::sleep(Duration::from_millis(50));
        log = std::fs::read_to_string(proxy.dir.0.join("access.log")).unwrap_or_default();
    }
    assert!(log.contains(&id), "the access line was written");
    for (what, text) in [
        ("answer", r.text()),
        ("head", format!("{:?}", r.headers)),
        ("decision record", record),
        ("access log", log),
    ] {
        assert!(!text.contains("sk-ant-oat01-sim"), "{what}: {text}");
    }
}
