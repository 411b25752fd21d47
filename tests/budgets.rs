//! Tenant budgets end to end (`[[tenants]]`, `[[prices]]`), on io_uring and on epoll: a tenant
//! over its day's tokens or dollars is refused in its client's dialect while another is served,
//! across keys and cores; a stream's usage is billed; the spend shows in the admin API, the
//! metrics and the decision record; a trusted gateway names the tenant.
//!
//! The simulator bills 9 prompt and 8 completion tokens for a one-word chat request.

mod common;
use common::*;

both_drivers!(
    a_tenant_over_its_days_tokens_is_refused_while_another_is_served,
    a_streams_usage_is_billed_at_the_models_price,
    a_trusted_gateway_names_the_tenant,
    spend_survives_a_kill,
    a_request_cap_stops_a_fallback,
    a_stream_is_asked_for_its_usage_and_its_client_sees_none,
    a_stream_cut_after_its_first_words_is_billed,
);

/// Keys a and b on the simulator, client keys `alpha` and `beta` (each its own tenant), and
/// `tenants` (the `[[tenants]]` tables).
fn config(sim: std::net::SocketAddr, tenants: &str) -> String {
    let mut c = priority_keys(sim, &["a", "b"], "");
    for t in ["alpha", "beta"] {
        c += &format!(
            "[[clients]]\nid = \"{t}\"\nkey_sha256 = \"{}\"\n",
            key_sha256(&format!("sk-{t}"))
        );
    }
    c + tenants
}

fn ask(proxy: &Proxy, who: &str, body: &str) -> ringside::demo::client::Reply {
    let auth = format!("Bearer sk-{who}");
    let id = format!("budget-{who}-{}", rand_suffix());
    proxy.post(
        "/v1/chat/completions",
        &[
            ("authorization", auth.as_str()),
            ("x-request-id", id.as_str()),
        ],
        body,
    )
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

fn a_tenant_over_its_days_tokens_is_refused_while_another_is_served(driver: &str) {
    let sim = start_sim(Default::default());
    let body = config(
        sim.addr,
        "[[tenants]]\nid = \"alpha\"\ntokens_per_day = 80\n",
    );
    let proxy = Proxy::start(driver, 2, "", &body);
    // 17 tokens a request: the 5th reaches 85, the 6th is refused; from 80 % spent the
    // answers say so.
    let replies: Vec<_> = (0..6)
        .map(|_| ask(&proxy, "alpha", &chat("m", false)))
        .collect();
    let statuses: Vec<u16> = replies.iter().map(|r| r.status).collect();
    assert_eq!(statuses, [200, 200, 200, 200, 200, 429], "{statuses:?}");
    assert!(replies[0].header("x-ringside-budget-warning").is_none());
    let warned = replies[4].header("x-ringside-budget-warning").unwrap_or("");
    assert!(warned.ends_with("% of tokens_per_day"), "{warned}");
    let r = ask(&proxy, "alpha", &chat("m", false));
    assert_eq!(r.status, 429);
    let e = r.json();
    assert_eq!(e["error"]["code"], "tenant_budget_exhausted", "{e}");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("tokens_per_day")
    );
    assert_eq!(r.header("x-should-retry"), Some("false"));
    let wait: u64 = r
        .header("retry-after")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    assert!((1..=86_400).contains(&wait), "until the day's end: {wait}");
    // The refused requests reached no upstream; another tenant is served.
    let sent = attempts_for(&sim, "sk-sim-a") + attempts_for(&sim, "sk-sim-b");
    assert_eq!(sent, 5);
    assert_eq!(ask(&proxy, "beta", &chat("m", false)).status, 200);
    let (_, spend) = proxy.admin("GET", "/admin/spend");
    let alpha = &spend["tenants"][0];
    assert_eq!(alpha["tenant"], "alpha", "{spend}");
    assert_eq!(alpha["day"]["tokens"], 85, "{spend}");
    assert_eq!(alpha["month"]["tokens"], 85, "{spend}");
    // The operator starts the tenant's day over.
    let reset = proxy.admin_with("POST", "/admin/spend/alpha/reset", "");
    assert_eq!(reset.status, 200, "{}", reset.text());
    assert_eq!(ask(&proxy, "alpha", &chat("m", false)).status, 200);
}

fn a_streams_usage_is_billed_at_the_models_price(driver: &str) {
    let sim = start_sim(Default::default());
    // $1 per million in, $2 out: 9 + 16 = 25 micro-dollars a request; $0.0001 a day is four.
    let tenants = "[[prices]]\nmodel = \"m\"\ninput = 1.0\noutput = 2.0\n\
                   [[tenants]]\nid = \"alpha\"\nusd_per_day = 0.0001\n";
    let proxy = Proxy::start(driver, 1, "", &config(sim.addr, tenants));
    let stream = r#"{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}"#;
    let mut statuses = Vec::new();
    for _ in 0..5 {
        let r = ask(&proxy, "alpha", stream);
        statuses.push(r.status);
        if r.status == 200 {
            assert!(r.text().contains("[DONE]"), "{}", r.text());
        }
    }
    assert_eq!(statuses, [200, 200, 200, 200, 429], "{statuses:?}");
    let (_, spend) = proxy.admin("GET", "/admin/spend");
    let usd = spend["tenants"][0]["day"]["usd"].as_f64().unwrap_or(0.0);
    assert!((usd - 0.0001).abs() < 1e-9, "{spend}");
    let metrics = proxy.metrics();
    assert!(
        metrics.contains("ringside_tenant_spend_usd_total{tenant=\"alpha\"} 0.0001"),
        "{metrics}"
    );
    // The decision record says what the request cost.
    let r = ask(&proxy, "beta", &chat("m", false));
    assert_eq!(r.status, 200);
    let decisions = proxy.admin("GET", "/admin/decisions?limit=50").1;
    let costs: Vec<f64> = decisions["decisions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|d| d["cost_usd"].as_f64())
        .collect();
    assert_eq!(costs.len(), 4, "{decisions}");
    assert!(
        costs.iter().all(|c| (c - 0.000025).abs() < 1e-9),
        "{costs:?}"
    );
}

fn a_trusted_gateway_names_the_tenant(driver: &str) {
    let sim = start_sim(Default::default());
    let body = priority_keys(sim.addr, &["a"], "")
        + "[[tenants]]\nid = \"team-red\"\ntokens_per_day = 30\n";
    let server = "trusted_proxies = [\"127.0.0.1/32\"]\n";
    let proxy = Proxy::start(driver, 1, server, &body);
    let red = [("x-ringside-tenant", "team-red")];
    let statuses: Vec<u16> = (0..3)
        .map(|_| {
            proxy
                .post("/v1/chat/completions", &red, &chat("m", false))
                .status
        })
        .collect();
    assert_eq!(statuses, [200, 200, 429]);
    // Another tenant the gateway names, and the gateway itself, are served.
    let blue = [("x-ringside-tenant", "team-blue")];
    assert_eq!(
        proxy
            .post("/v1/chat/completions", &blue, &chat("m", false))
            .status,
        200
    );
    assert_eq!(
        proxy
            .post("/v1/chat/completions", &[], &chat("m", false))
            .status,
        200
    );
}

fn spend_survives_a_kill(driver: &str) {
    let sim = start_sim(Default::default());
    let body = config(
        sim.addr,
        "[[tenants]]\nid = \"alpha\"\ntokens_per_day = 80\n",
    );
    let mut proxy = Proxy::start(driver, 1, "", &body);
    for _ in 0..3 {
        assert_eq!(ask(&proxy, "alpha", &chat("m", false)).status, 200);
    }
    // Written once a second off the request path.
    std::thread::sleep(std::time::Duration::from_millis(2_500));
    let _ = proxy.child.kill();
    let _ = proxy.child.wait();
    let dir = std::mem::replace(&mut proxy.dir, tempdir::new());
    drop(proxy);
    let proxy = Proxy::start_in(driver, 1, "", &body, dir);
    let (_, spend) = proxy.admin("GET", "/admin/spend");
    assert_eq!(spend["tenants"][0]["day"]["tokens"], 51, "{spend}");
    let statuses: Vec<u16> = (0..3)
        .map(|_| ask(&proxy, "alpha", &chat("m", false)).status)
        .collect();
    assert_eq!(statuses, [200, 200, 429], "the budget went on where it was");
}

/// A route over a cheap model (limited for 30 s) and a dear one: a request whose own cost cap
/// the dear one's attempt could exceed gets the cheap one's attempt and then
/// `request_budget_exhausted`, never the dear one; a token cap below the request's estimate is
/// refused before any attempt; without a cap the dear one serves.
fn a_request_cap_stops_a_fallback(driver: &str) {
    let mut opts = ringside::simulate::SimOptions::default();
    opts.faults.push(
        ringside::simulate::parse_fault_arg("model:cheap=429;retry-after=30").expect("fault"),
    );
    let sim = start_sim(opts);
    let config = format!(
        "[[providers]]\nid = \"sim\"\ndialect = \"openai\"\nbase_url = \"http://{}/v1\"\n\
         [[providers.connections]]\nid = \"a\"\nkey_env = \"SIM_KEY_A\"\nmodels = [\"cheap\"]\n\
         [[providers.connections]]\nid = \"b\"\nkey_env = \"SIM_KEY_B\"\nmodels = [\"dear\"]\n\
         [[routes]]\nname = \"r\"\n\
         [[routes.targets]]\nprovider = \"sim\"\nmodel = \"cheap\"\n\
         [[routes.targets]]\nprovider = \"sim\"\nmodel = \"dear\"\n\
         [[prices]]\nmodel = \"cheap\"\ninput = 1.0\noutput = 1.0\n\
         [[prices]]\nmodel = \"dear\"\ninput = 1000.0\noutput = 1000.0\n",
        sim.addr
    );
    let proxy = Proxy::start(driver, 1, "", &config);
    // About 120 tokens: $0.00012 on the cheap model, $0.12 on the dear one.
    let body = r#"{"model":"r","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}"#;
    let capped = |name: &str, value: &str, id: &str| {
        proxy.post(
            "/v1/chat/completions",
            &[(name, value), ("x-request-id", id)],
            body,
        )
    };
    let r = capped("x-ringside-max-cost-usd", "0.01", "cap-cost");
    assert_eq!(r.status, 429, "{}", r.text());
    assert!(
        r.text().contains("request_budget_exhausted"),
        "{}",
        r.text()
    );
    assert_eq!(r.header("x-should-retry"), Some("false"));
    assert_eq!(attempts_for(&sim, "sk-sim-a"), 1);
    assert_eq!(
        attempts_for(&sim, "sk-sim-b"),
        0,
        "the cap let the dear fallback through"
    );
    let d = proxy.decision("cap-cost");
    assert!(
        d.to_string().contains("over_request_budget"),
        "the record says why the fallback was passed over: {d}"
    );
    // A token cap below the request's own estimate: refused before any attempt.
    let r = capped("x-ringside-max-tokens-budget", "50", "cap-tokens");
    assert_eq!(r.status, 429, "{}", r.text());
    assert!(
        r.text().contains("request_budget_exhausted"),
        "{}",
        r.text()
    );
    assert_eq!(attempts_for(&sim, "sk-sim-a"), 1);
    // A cap that does not read is the client's error.
    let r = capped("x-ringside-max-cost-usd", "a lot", "cap-bad");
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("invalid_header"), "{}", r.text());
    // Without a cap the dear fallback serves; with a cap that covers it, too.
    let r = capped("x-ringside-max-cost-usd", "1", "cap-enough");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(attempts_for(&sim, "sk-sim-b"), 1);
    let d = proxy.decision("cap-enough");
    assert!(d["cost_usd"].as_f64().is_some_and(|c| c > 0.0), "{d}");
}

/// A tenant with a budget streams without asking for usage: Ringside asks the provider for it,
/// bills exactly what it reported, and the client's stream has no usage chunk; a tenant without
/// a budget gets its stream as the provider sent it.
fn a_stream_is_asked_for_its_usage_and_its_client_sees_none(driver: &str) {
    let sim = start_sim(Default::default());
    let tenants = "[[tenants]]\nid = \"alpha\"\ntokens_per_day = 1000\n";
    let proxy = Proxy::start(driver, 1, "", &config(sim.addr, tenants));
    let r = ask(&proxy, "alpha", &chat("m", true));
    assert_eq!(r.status, 200, "{}", r.text());
    let text = r.text();
    assert!(text.contains("[DONE]"), "{text}");
    assert!(text.contains("Hello"), "{text}");
    assert!(
        !text.contains("prompt_tokens"),
        "the client did not ask for usage: {text}"
    );
    let (_, spend) = proxy.admin("GET", "/admin/spend");
    // The provider's own count (9 + 8), not the estimate of the text.
    assert_eq!(spend["tenants"][0]["day"]["tokens"], 17, "{spend}");
    // A client that asks for usage sees it.
    let asked = r#"{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}"#;
    let r = ask(&proxy, "alpha", asked);
    assert!(r.text().contains("prompt_tokens"), "{}", r.text());
    // Without a budget nothing is asked: the stream is the provider's.
    let r = ask(&proxy, "beta", &chat("m", true));
    assert!(r.text().contains("[DONE]") && !r.text().contains("prompt_tokens"));
}

/// A stream the provider cuts after its first events failed for the client, but the provider
/// produced (and bills) what it sent: the tenant is billed the prompt's estimate and the text.
fn a_stream_cut_after_its_first_words_is_billed(driver: &str) {
    let mut opts = ringside::simulate::SimOptions::default();
    opts.faults.push(
        ringside::simulate::parse_fault_arg("key:sk-sim-a=reset-mid-stream;after=3")
            .expect("fault"),
    );
    let sim = start_sim(opts);
    let tenants = "[[tenants]]\nid = \"alpha\"\ntokens_per_day = 1000\n";
    let mut c = priority_keys(sim.addr, &["a"], "");
    c += &format!(
        "[[clients]]\nid = \"alpha\"\nkey_sha256 = \"{}\"\n{tenants}",
        key_sha256("sk-alpha")
    );
    let proxy = Proxy::start(driver, 1, "", &c);
    let r = ask(&proxy, "alpha", &chat("m", true));
    assert_eq!(r.status, 200);
    assert!(
        !r.text().contains("[DONE]"),
        "the stream was cut: {}",
        r.text()
    );
    let (_, spend) = proxy.admin("GET", "/admin/spend");
    let tokens = spend["tenants"][0]["day"]["tokens"].as_u64().unwrap_or(0);
    // The prompt's estimate (a quarter of its bytes) and the words that came.
    assert!((10..100).contains(&tokens), "{spend}");
    let d = proxy.admin("GET", "/admin/decisions?limit=5").1;
    assert!(d.to_string().contains("failed_after_commit"), "{d}");
}
