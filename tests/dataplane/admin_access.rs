//! Who may use the admin port: read-only without a token, changes only with the token or an
//! admin-scoped client key, no DNS rebinding or cross-origin change, failures logged, counted
//! and slowed, and a network-facing admin port without a token refused at start.

use crate::both_drivers;
use crate::common::*;
use ringside::demo::client::{self, Reply};
use ringside::simulate::SimOptions;
use std::time::{Duration, Instant};

both_drivers!(
    without_a_token_the_admin_port_is_read_only,
    with_a_token_changes_need_it_and_failures_are_slowed,
    browsers_cannot_be_used_against_the_admin_port,
    wrong_tokens_from_many_addresses_wait_in_one_line,
);

fn call(proxy: &Proxy, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Reply {
    client::request(proxy.admin, method, path, headers, body.as_bytes(), T).expect("admin answer")
}

const JSON: (&str, &str) = ("content-type", "application/json");

fn without_a_token_the_admin_port_is_read_only(driver: &str) {
    let sim = start_sim(SimOptions::default());
    let ops = "sk-ringside-ops-0123456789";
    let body = priority_keys(sim.addr, &["a", "b"], "")
        + &format!(
            "[[clients]]\nid = \"ops\"\nkey_sha256 = \"{}\"\nscopes = [\"admin\", \"inference\"]\n",
            key_sha256(ops)
        );
    let proxy = Proxy::start(driver, 1, "# no admin token", &body);
    for path in [
        "/healthz",
        "/readyz",
        "/metrics",
        "/admin/connections",
        "/admin/clients",
    ] {
        assert_eq!(call(&proxy, "GET", path, &[], "").status, 200, "{path}");
        // HEAD: the same status, no body (`option httpchk HEAD /readyz`).
        let r = call(&proxy, "HEAD", path, &[], "");
        assert_eq!(r.status, 200, "HEAD {path}");
        assert!(r.body.is_empty(), "HEAD {path}: {}", r.text());
    }
    let changes = [
        (
            "POST",
            "/admin/clients",
            r#"{"id":"evil","scopes":["admin"]}"#,
        ),
        ("POST", "/admin/connections/sim/a/reset", ""),
        ("POST", "/admin/breakers/sim/reset", ""),
        ("PATCH", "/admin/settings", r#"{"flow":{"max_wait_ms":1}}"#),
        ("DELETE", &format!("/admin/leases/{}", "a".repeat(64)), ""),
        ("DELETE", "/admin/clients/ops", ""),
    ];
    for (m, p, b) in &changes {
        let r = call(&proxy, m, p, &[JSON], b);
        assert_eq!(r.status, 403, "{m} {p}: {}", r.text());
        assert_eq!(r.json()["error"]["code"], "admin_read_only");
        assert!(r.text().contains("server.admin_token_env"), "{}", r.text());
    }
    // Nothing was minted: the data port is still keyed by the configured key alone.
    let (_, list) = proxy.admin("GET", "/admin/clients");
    assert!(!list.to_string().contains("evil"), "{list}");
    // An admin-scoped client key may make changes.
    let auth = format!("Bearer {ops}");
    let r = call(
        &proxy,
        "POST",
        "/admin/clients",
        &[("authorization", &auth), JSON],
        r#"{"id":"bot"}"#,
    );
    assert_eq!(r.status, 201, "{}", r.text());
    // A wrong key is a counted failure.
    let r = call(
        &proxy,
        "POST",
        "/admin/clients",
        &[("authorization", "Bearer nope"), JSON],
        r#"{"id":"bot2"}"#,
    );
    assert_eq!(r.status, 401, "{}", r.text());
    let m = proxy.metrics();
    let failures: u64 = m
        .lines()
        .find_map(|l| l.strip_prefix("ringside_admin_auth_failures_total "))
        .and_then(|v| v.trim().parse().ok())
        .expect("the failure counter");
    // Only the wrong key guessed: the six changes asked for with no credential were refused,
    // not counted (a tab at a login form must not look like an attack).
    assert_eq!(failures, 1, "{failures}");
    // Ids that could not be revoked are refused at creation.
    for bad in [
        r#"{"id":"evil?x"}"#,
        r#"{"id":"a b"}"#,
        r#"{"id":"a\nb"}"#,
        r#"{"id":""}"#,
    ] {
        let r = call(
            &proxy,
            "POST",
            "/admin/clients",
            &[("authorization", &auth), JSON],
            bad,
        );
        assert_eq!(r.status, 400, "{bad}: {}", r.text());
    }
}

fn with_a_token_changes_need_it_and_failures_are_slowed(driver: &str) {
    let sim = start_sim(SimOptions::default());
    let proxy = Proxy::start(driver, 1, "", &priority_keys(sim.addr, &["a"], ""));
    // Health stays open, to HEAD too; state needs the token.
    assert_eq!(call(&proxy, "GET", "/readyz", &[], "").status, 200);
    assert_eq!(call(&proxy, "HEAD", "/readyz", &[], "").status, 200);
    assert_eq!(call(&proxy, "HEAD", "/healthz", &[], "").status, 200);
    assert_eq!(
        call(&proxy, "HEAD", "/admin/connections", &[], "").status,
        401
    );
    assert_eq!(
        call(&proxy, "GET", "/admin/connections", &[], "").status,
        401
    );
    let r = call(&proxy, "POST", "/admin/clients", &[JSON], r#"{"id":"x"}"#);
    assert_eq!(r.status, 401);
    // Repeated wrong tokens from one address wait longer each time (100, 200, 400 ms, ...).
    let t0 = Instant::now();
    for _ in 0..4 {
        let r = call(
            &proxy,
            "GET",
            "/admin/connections",
            &[("authorization", "Bearer wrong-token")],
            "",
        );
        assert_eq!(r.status, 401);
    }
    assert!(
        t0.elapsed() >= Duration::from_millis(1_000),
        "the fourth failure in a row waits at least 800 ms: {:?}",
        t0.elapsed()
    );
    let r = proxy.admin_with("POST", "/admin/clients", r#"{"id":"x"}"#);
    assert_eq!(r.status, 201, "{}", r.text());
}

fn wrong_tokens_from_many_addresses_wait_in_one_line(driver: &str) {
    let sim = start_sim(SimOptions::default());
    let proxy = Proxy::start(driver, 1, "", &priority_keys(sim.addr, &["a"], ""));
    // Six guesses at once, each from its own loopback address: one host, one line.
    let t0 = Instant::now();
    let guesses: Vec<_> = (1..=6u8)
        .map(|i| {
            let admin = proxy.admin;
            std::thread::spawn(move || {
                let mut s = connect_from([127, 0, 0, 10 + i], admin);
                let req = format!(
                    "GET /admin/connections HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer guess-{i}\r\nconnection: close\r\n\r\n"
                );
                std::io::Write::write_all(&mut s, req.as_bytes()).expect("write");
                let r = client::parse_reply(&read_all(s)).expect("answer");
                (r.status, t0.elapsed())
            })
        })
        .collect();
    let mut answered: Vec<(u16, Duration)> = guesses
        .into_iter()
        .map(|g| g.join().expect("guess"))
        .collect();
    answered.sort_by_key(|a| a.1);
    assert!(answered.iter().all(|a| a.0 == 401), "{answered:?}");
    // 100, 300, 700, 1,500, 3,100, 6,300 ms: the last waits for the five before it.
    assert!(
        answered[5].1 >= Duration::from_millis(5_000),
        "answered together: {answered:?}"
    );
}

fn browsers_cannot_be_used_against_the_admin_port(driver: &str) {
    let sim = start_sim(SimOptions::default());
    let proxy = Proxy::start(driver, 1, "", &priority_keys(sim.addr, &["a"], ""));
    // DNS rebinding: a page on evil.example resolves its name to 127.0.0.1.
    use std::io::Write;
    let mut s = raw_client(proxy.admin);
    s.write_all(
        format!(
            "GET /admin/connections HTTP/1.1\r\nhost: evil.example:8081\r\nauthorization: Bearer {ADMIN_TOKEN}\r\nconnection: close\r\n\r\n"
        )
        .as_bytes(),
    )
    .expect("write");
    let r = client::parse_reply(&read_all(s)).expect("answer");
    assert_eq!(r.status, 421, "{}", r.text());
    assert_eq!(r.json()["error"]["code"], "misdirected_host");
    // A form post from another origin, even with the token (a browser could hold it).
    let r = call(
        &proxy,
        "POST",
        "/admin/connections/sim/a/reset",
        &[ADMIN_AUTH, ("origin", "http://evil.example")],
        "",
    );
    assert_eq!(r.status, 403);
    assert_eq!(r.json()["error"]["code"], "cross_origin_refused");
    let r = call(
        &proxy,
        "POST",
        "/admin/clients",
        &[ADMIN_AUTH, ("content-type", "text/plain")],
        r#"{"id":"x"}"#,
    );
    assert_eq!(r.status, 415);
    // The same from the admin page's own origin is fine.
    let own = format!("http://{}", proxy.admin);
    let r = call(
        &proxy,
        "POST",
        "/admin/connections/sim/a/reset",
        &[ADMIN_AUTH, ("origin", &own)],
        "",
    );
    assert_eq!(r.status, 200, "{}", r.text());
    // The data port refuses a cross-origin form post (it needs no CORS preflight).
    let r = client::request(
        proxy.addr,
        "POST",
        "/v1/chat/completions",
        &[
            ("origin", "http://evil.example"),
            ("content-type", "text/plain"),
        ],
        chat("m", false).as_bytes(),
        T,
    )
    .expect("answer");
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(r.json()["error"]["code"], "cross_origin_refused");
    assert_eq!(
        attempts_for(&sim, "sk-sim-a"),
        0,
        "nothing reached the provider"
    );
}

fn run_check(dir: &std::path::Path, server: &str) -> (bool, String) {
    let path = dir.join("check.toml");
    std::fs::write(
        &path,
        format!(
            "[server]\n{server}\n[[providers]]\nid = \"p\"\ndialect = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\n  [[providers.connections]]\n  id = \"a\"\n  key_env = \"SIM_KEY_A\"\n"
        ),
    )
    .expect("write");
    let out = std::process::Command::new(binary())
        .args(["check", "--config", path.to_str().unwrap_or_default()])
        .env("SIM_KEY_A", "sk")
        .env("ADMIN_T", "an-admin-token-of-32-characters")
        .env("SHORT_T", "t0ken")
        .output()
        .expect("run check");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

#[test]
fn a_short_admin_token_and_a_pasted_key_are_refused_without_being_shown() {
    let dir = tempdir::new();
    let (ok, out) = run_check(&dir.0, "admin_token_env = \"SHORT_T\"");
    assert!(!ok, "{out}");
    assert!(out.contains("at least 24"), "{out}");
    assert!(!out.contains("t0ken"), "{out}");
    let (ok, out) = run_check(
        &dir.0,
        "admin_token_env = \"sk-proj-pasted0123456789abcdef\"",
    );
    assert!(!ok, "{out}");
    assert!(!out.contains("pasted0123"), "{out}");
    assert!(out.contains("not shown"), "{out}");
}

#[test]
fn a_network_admin_port_without_a_token_is_refused() {
    let dir = tempdir::new();
    let (ok, out) = run_check(&dir.0, "admin_listen = \"0.0.0.0:18081\"");
    assert!(!ok, "{out}");
    assert!(out.contains("server.admin_listen"), "{out}");
    let (ok, out) = run_check(
        &dir.0,
        "admin_listen = \"0.0.0.0:18081\"\nadmin_unauthenticated_ok = true",
    );
    assert!(ok, "{out}");
    let (ok, out) = run_check(
        &dir.0,
        "admin_listen = \"0.0.0.0:18081\"\nadmin_token_env = \"ADMIN_T\"",
    );
    assert!(ok, "{out}");
    // And at start: `serve` refuses the same file.
    let path = dir.0.join("check.toml");
    std::fs::write(
        &path,
        "[server]\nlisten = \"127.0.0.1:0\"\nadmin_listen = \"0.0.0.0:0\"\n",
    )
    .expect("write");
    let out = std::process::Command::new(binary())
        .args(["serve", "--config", path.to_str().unwrap_or_default()])
        .output()
        .expect("run serve");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("server.admin_listen"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
