//! What a request is billed beyond its answer's usage, end to end on io_uring and on epoll: the
//! estimate admission reserves (learned per provider from its reported usage), and attempts
//! that failed before the commit after their provider produced output (`docs/budgets.md`).
//!
//! The simulator bills 9 prompt tokens for a one-word chat request.

mod common;
use common::*;

both_drivers!(
    the_estimate_learns_the_providers_bytes_per_token,
    an_attempt_cut_before_the_commit_is_billed_too,
);

/// Keys a and b on the simulator, the client key `alpha` (its own tenant), and `tenants`.
fn config(sim: std::net::SocketAddr, tenants: &str) -> String {
    priority_keys(sim, &["a", "b"], "")
        + &format!(
            "[[clients]]\nid = \"alpha\"\nkey_sha256 = \"{}\"\n{tenants}",
            key_sha256("sk-alpha")
        )
}

/// What a slow request of `body` reserves while it runs: the tenant's day tokens during it, less
/// those before it.
fn reservation(proxy: &Proxy, body: &str) -> u64 {
    let day = || {
        let (status, view) = proxy.admin("GET", "/admin/spend");
        assert_eq!(status, 200, "{view}");
        view["tenants"][0]["day"]["tokens"]
            .as_u64()
            .expect("day tokens")
    };
    let before = day();
    let during = std::thread::scope(|s| {
        let slow = s.spawn(|| {
            proxy.post(
                "/v1/chat/completions",
                &[
                    ("authorization", "Bearer sk-alpha"),
                    ("x-sim-latency-ms", "3000"),
                ],
                body,
            )
        });
        // Until the reservation shows (a loaded machine may take a while to admit it).
        let mut during = day();
        for _ in 0..40 {
            if during > before {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
            during = day();
        }
        assert_eq!(slow.join().expect("slow request").status, 200);
        during
    });
    during - before
}

/// Admission reserves a prompt at four bytes a token until the provider has reported: then at
/// the bytes per token its usage showed (the simulator counts 9 prompt tokens for a body of
/// about 60 bytes: 6 to 7 bytes a token).
fn the_estimate_learns_the_providers_bytes_per_token(driver: &str) {
    let sim = start_sim(Default::default());
    let tenants = "[[tenants]]\nid = \"alpha\"\ntokens_per_day = 1000000\n";
    let proxy = Proxy::start(driver, 1, "", &config(sim.addr, tenants));
    let body = chat("m", false);
    let first = reservation(&proxy, &body);
    assert_eq!(
        first,
        (body.len() as u64).div_ceil(4),
        "four bytes a token at first"
    );
    for _ in 0..30 {
        let r = proxy.post(
            "/v1/chat/completions",
            &[("authorization", "Bearer sk-alpha")],
            &body,
        );
        assert_eq!(r.status, 200);
    }
    let learned = reservation(&proxy, &body);
    eprintln!(
        "{} bytes: {first} tokens reserved at first, {learned} once learned",
        body.len()
    );
    assert!((9..first).contains(&learned), "{learned} against {first}");
}

/// A stream cut before the commit (after Anthropic's `message_start`, which reports the prompt's
/// tokens) is retried on another key; its provider billed what it produced all the same, and so
/// does the tenant's budget: the request costs the served stream and the cut one's tokens.
fn an_attempt_cut_before_the_commit_is_billed_too(driver: &str) {
    let mut opts = ringside::simulate::SimOptions::default();
    opts.faults.push(
        ringside::simulate::parse_fault_arg("key:sk-sim-a=reset-mid-stream;after=1")
            .expect("fault"),
    );
    let sim = start_sim(opts);
    let body = r#"{"model":"m","max_tokens":50,"stream":true,"messages":[{"role":"user","content":"hi"}]}"#;
    let spent = |keys: &[&str]| {
        let c = priority_keys(sim.addr, keys, "")
            .replace("dialect = \"openai\"", "dialect = \"anthropic\"")
            + &format!(
                "[[clients]]\nid = \"alpha\"\nkey_sha256 = \"{}\"\n\
                 [[tenants]]\nid = \"alpha\"\ntokens_per_day = 100000\n",
                key_sha256("sk-alpha")
            );
        let proxy = Proxy::start(driver, 1, "", &c);
        let headers = [
            ("x-api-key", "sk-alpha"),
            ("anthropic-version", "2023-06-01"),
        ];
        let r = proxy.post("/v1/messages", &headers, body);
        assert_eq!(r.status, 200, "{}", r.text());
        assert!(
            r.text().contains("message_stop"),
            "served whole: {}",
            r.text()
        );
        let (_, spend) = proxy.admin("GET", "/admin/spend");
        spend["tenants"][0]["day"]["tokens"].as_u64().unwrap_or(0)
    };
    let whole = spent(&["b"]);
    let with_cut = spent(&["a", "b"]);
    // message_start reports 9 prompt tokens and 1 output token.
    assert_eq!(
        with_cut,
        whole + 10,
        "the cut attempt is billed beside the served one"
    );
}
