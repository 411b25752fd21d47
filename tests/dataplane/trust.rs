//! Trust boundaries on the data port: no client byte reaches a response header unchecked, and
//! client strings that are kept (model names) are bounded.

use crate::both_drivers;
use crate::common::*;
use ringside::demo::client::{self, Reply};
use ringside::simulate::SimOptions;
use std::io::Write;

both_drivers!(
    a_model_name_cannot_split_the_response,
    oversized_and_control_model_names_are_refused,
    client_words_quoted_by_the_provider_leave_the_key_active,
    huge_model_names_are_not_kept,
    keyless_callers_are_refused_before_their_body_is_read,
    rejected_uploads_give_their_memory_back,
    provider_keys_never_reach_the_client,
    one_tenant_cannot_open_a_breaker_for_all,
);

/// Every complete response in `raw`, in order (Content-Length framed, as Ringside's answers to
/// these requests are).
pub fn replies(mut raw: &[u8]) -> Vec<Reply> {
    let mut out = Vec::new();
    while !raw.is_empty() {
        let Ok(r) = client::parse_reply(raw) else {
            break;
        };
        let Some(head_end) = find(raw, b"\r\n\r\n") else {
            break;
        };
        let len: usize = r
            .header("content-length")
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(raw.len() - head_end - 4);
        raw = &raw[(head_end + 4 + len).min(raw.len())..];
        out.push(r);
    }
    out
}

/// A provider whose connection has no `models` list: it serves any `relay/<model>`, so the
/// client's string becomes the route name written into `x-ringside-route`.
fn relay_proxy(driver: &str) -> (ringside::simulate::Simulator, Proxy) {
    let sim = start_sim(SimOptions::default());
    let body = format!(
        "[[providers]]\nid = \"relay\"\ndialect = \"openai\"\nbase_url = \"http://{}/v1\"\n  [[providers.connections]]\n  id = \"k\"\n  key_env = \"SIM_KEY_A\"\n",
        sim.addr
    );
    let proxy = Proxy::start(driver, 1, "", &body);
    (sim, proxy)
}

fn post_chat(model_json: &str, close: bool) -> String {
    let body = format!(r#"{{"model":{model_json},"messages":[{{"role":"user","content":"hi"}}]}}"#);
    let conn = if close { "connection: close\r\n" } else { "" };
    format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n{conn}content-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
}

fn a_model_name_cannot_split_the_response(driver: &str) {
    let (_sim, proxy) = relay_proxy(driver);
    // The forged answer a split would have produced: a 200 with a cookie, then a body.
    let evil = r#""relay/gpt\r\ncontent-length: 0\r\n\r\nHTTP/1.1 200 OK\r\nSet-Cookie: owned=1\r\ncontent-length: 2\r\n\r\n{}""#;
    let mut s = raw_client(proxy.addr);
    let mut bytes = post_chat(evil, false).into_bytes();
    bytes.extend_from_slice(post_chat(r#""relay/gpt-4o-mini""#, true).as_bytes());
    s.write_all(&bytes).unwrap();
    let raw = read_all(s);
    let got = replies(&raw);
    assert_eq!(
        got.len(),
        2,
        "exactly two answers: {}",
        String::from_utf8_lossy(&raw)
    );
    assert_eq!(got[0].status, 400, "{}", got[0].text());
    assert_eq!(got[0].json()["error"]["code"], "invalid_model");
    assert_eq!(got[1].status, 200, "{}", got[1].text());
    assert!(
        !String::from_utf8_lossy(&raw)
            .to_ascii_lowercase()
            .contains("set-cookie"),
        "no forged header: {}",
        String::from_utf8_lossy(&raw)
    );
    // The clean request's route header is the client's (checked) string.
    assert_eq!(got[1].header("x-ringside-route"), Some("relay/gpt-4o-mini"));
}

fn oversized_and_control_model_names_are_refused(driver: &str) {
    let (_sim, proxy) = relay_proxy(driver);
    for model in [
        format!("\"relay/{}\"", "m".repeat(300)),
        r#""relay/a\u0000b""#.to_string(),
        r#""relay/a\u007fb""#.to_string(),
        r#""""#.to_string(),
        // Names that would show as another: a bidi override, a zero-width space (escaped and
        // raw UTF-8).
        r#""relay/gpt-4o\u202e""#.to_string(),
        "\"relay/gpt\u{200b}-4o\"".to_string(),
    ] {
        let mut s = raw_client(proxy.addr);
        s.write_all(post_chat(&model, true).as_bytes()).unwrap();
        let r = client::parse_reply(&read_all(s)).expect("an answer");
        assert_eq!(r.status, 400, "{model}: {}", r.text());
        assert_eq!(r.json()["error"]["code"], "invalid_model");
        assert!(
            !r.text().contains("mmmmmmmmmm"),
            "the refused name is not echoed back"
        );
    }
    // Anthropic's dialect gets its own envelope.
    let body = r#"{"model":"relay/a\r\nb","max_tokens":5,"messages":[]}"#;
    let r = client::request(
        proxy.addr,
        "POST",
        "/v1/messages",
        &[("content-type", "application/json")],
        body.as_bytes(),
        T,
    )
    .expect("answer");
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["type"], "error", "{}", r.text());
}

fn client_words_quoted_by_the_provider_leave_the_key_active(driver: &str) {
    let mut opts = SimOptions::default();
    opts.faults
        .push(ringside::simulate::parse_fault_arg("key:sk-sim-a=quote").expect("spec"));
    let sim = start_sim(opts);
    let body = priority_keys(sim.addr, &["a", "b"], "");
    let proxy = Proxy::start(driver, 1, "", &body);
    for role in [
        "insufficient_quota",
        "account has been deactivated",
        "Your credit balance is too low",
        "billing_hard_limit_reached",
    ] {
        let req = format!(r#"{{"model":"m","messages":[{{"role":"{role}","content":"hi"}}]}}"#);
        let r = proxy.post("/v1/chat/completions", &[], &req);
        assert_eq!(
            r.status,
            400,
            "the client's own mistake, passed through: {}",
            r.text()
        );
        assert_eq!(attempt_count(&r), 1, "not retried on another key");
    }
    let (_, conns) = proxy.admin("GET", "/admin/connections");
    for c in conns["connections"].as_array().expect("list") {
        assert_eq!(c["state"], "active", "{c}");
    }
    // Key a is still the first choice.
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
    assert_eq!(r.status, 400, "key a still first in line");
    assert_eq!(r.header("x-ringside-connection"), Some("sim/a"));
}

/// The proxy's resident memory, in KiB.
pub fn rss_kib(proxy: &Proxy) -> u64 {
    let status =
        std::fs::read_to_string(format!("/proc/{}/status", proxy.child.id())).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn huge_model_names_are_not_kept(driver: &str) {
    let (_sim, proxy) = relay_proxy(driver);
    // Warm up: the first requests allocate what every request reuses.
    for _ in 0..3 {
        assert_eq!(
            proxy
                .post("/v1/chat/completions", &[], &chat("relay/m", false))
                .status,
            200
        );
    }
    let before = rss_kib(&proxy);
    let name = "m".repeat(2 * 1024 * 1024);
    for _ in 0..40 {
        let body = format!(r#"{{"model":"relay/{name}","messages":[]}}"#);
        let r = proxy.post("/v1/chat/completions", &[], &body);
        assert_eq!(r.status, 400, "{}", &r.text()[..r.text().len().min(200)]);
        assert!(r.body.len() < 1024, "the name is not echoed");
    }
    let (_, d) = proxy.admin("GET", "/admin/decisions?limit=10000");
    let listed = d.to_string().len();
    assert!(listed < 1_000_000, "decisions answer of {listed} bytes");
    let grown = rss_kib(&proxy).saturating_sub(before);
    // 40 × 2 MB kept would be 80 MiB; a couple of request buffers being reused is fine.
    assert!(grown < 24 * 1024, "RSS grew by {grown} KiB");
}

fn keyless_callers_are_refused_before_their_body_is_read(driver: &str) {
    let sim = start_sim(SimOptions::default());
    let body = priority_keys(sim.addr, &["a"], "")
        + "[[clients]]\nid = \"team\"\nkey_sha256 = \"0000000000000000000000000000000000000000000000000000000000000000\"\n";
    let proxy = Proxy::start(
        driver,
        1,
        "",
        &format!("[limits]\nmax_body_bytes = 20000000\n{body}"),
    );
    // A 15 MB body announced but not sent: the answer comes from the head alone.
    for expect in ["", "expect: 100-continue\r\n"] {
        let mut s = raw_client(proxy.addr);
        s.write_all(
            format!(
                "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n{expect}content-length: 15000000\r\n\r\n"
            )
            .as_bytes(),
        )
        .expect("write head");
        let raw = read_all(s);
        let text = String::from_utf8_lossy(&raw);
        assert!(text.starts_with("HTTP/1.1 401"), "{expect:?}: {text}");
        assert!(
            !text.contains("100 Continue"),
            "never invited to send: {text}"
        );
        assert!(
            text.to_ascii_lowercase().contains("connection: close"),
            "{text}"
        );
    }
    // A small keyless request keeps its connection (its body is read and dropped).
    let mut s = raw_client(proxy.addr);
    let req = raw_chat("m", false);
    s.write_all(format!("{req}{req}").as_bytes())
        .expect("write");
    s.shutdown(std::net::Shutdown::Write).expect("shutdown");
    let got = replies(&read_all(s));
    assert_eq!(got.len(), 2, "both answered on one connection");
    assert!(got.iter().all(|r| r.status == 401));
    assert_eq!(attempts_for(&sim, "sk-sim-a"), 0);
}

fn rejected_uploads_give_their_memory_back(driver: &str) {
    let sim = start_sim(SimOptions::default());
    let proxy = Proxy::start(
        driver,
        1,
        "",
        &format!(
            "[limits]\nmax_body_bytes = 8388608\n{}",
            priority_keys(sim.addr, &["a"], "")
        ),
    );
    let upload = |_: usize| {
        let mut s = raw_client(proxy.addr);
        let _ = s.write_all(
            b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n",
        );
        let chunk = vec![b' '; 256 * 1024];
        let mut framed = format!("{:x}\r\n", chunk.len()).into_bytes();
        framed.extend_from_slice(&chunk);
        framed.extend_from_slice(b"\r\n");
        // 12 MiB, past the 8 MiB limit; the proxy stops reading once it answers.
        for _ in 0..48 {
            if s.write_all(&framed).is_err() {
                break;
            }
        }
        let _ = s.shutdown(std::net::Shutdown::Write);
        let raw = read_all(s);
        assert!(
            String::from_utf8_lossy(&raw).starts_with("HTTP/1.1 413"),
            "{}",
            String::from_utf8_lossy(&raw[..raw.len().min(200)])
        );
    };
    upload(0);
    let before = rss_kib(&proxy);
    (1..=6).for_each(upload);
    let in_a_row = rss_kib(&proxy).saturating_sub(before);
    assert!(
        in_a_row < 8 * 1024,
        "RSS grew by {in_a_row} KiB after 6 rejected uploads in a row"
    );
    // Six at once.
    std::thread::scope(|sc| {
        for i in 0..6 {
            let u = &upload;
            sc.spawn(move || u(i));
        }
    });
    let grown = rss_kib(&proxy).saturating_sub(before);
    // Each upload holds at most the 8 MiB limit while it is read; none is kept afterwards.
    assert!(
        grown < 8 * 1024,
        "RSS grew by {grown} KiB after 12 rejected uploads"
    );
}

/// An answer that writes the key a request came with (`sk-sim-a`) where `place` says.
fn echo_key(place: &'static str) -> impl Fn(&mut std::net::TcpStream) -> bool {
    move |s: &mut std::net::TcpStream| {
        let key = "sk-sim-a";
        let out = match place {
            // In a header of a successful answer.
            "header" => {
                let body = r#"{"id":"x","object":"chat.completion","choices":[]}"#;
                format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nx-echo: Bearer {key}\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                )
                .into_bytes()
            }
            // In an in-band stream error whose first line is cut at 300 characters, the key
            // across the cut.
            "straddle" => {
                let msg = format!("{}{key} was refused", "x".repeat(260));
                let ev = format!(
                    "data: {{\"error\":{{\"message\":\"{msg}\",\"type\":\"server_error\"}}}}\n\n"
                );
                format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\r\n{ev}",
                    ev.len()
                )
                .into_bytes()
            }
            // In a 5 MB error body, near its end.
            _ => {
                let body = format!(
                    r#"{{"error":{{"message":"{} bad key {key}","type":"invalid_request_error"}}}}"#,
                    "y".repeat(5_000_000)
                );
                format!(
                    "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                )
                .into_bytes()
            }
        };
        s.write_all(&out).is_ok()
    }
}

fn provider_keys_never_reach_the_client(driver: &str) {
    for place in ["header", "straddle", "large"] {
        let up = scripted_upstream(echo_key(place));
        let proxy = crate::raw_proxy(driver, &up, 1);
        let r = proxy.post("/v1/chat/completions", &[], &chat("m", place == "straddle"));
        let all = format!("{:?}{}", r.headers, String::from_utf8_lossy(&r.raw_body));
        assert!(
            !all.contains("sk-sim-a"),
            "{place}: the key reached the client: {}",
            &all[..all.len().min(600)]
        );
        // Nor a recognisable part of it.
        assert!(
            !all.contains("sk-sim-"),
            "{place}: part of the key reached the client"
        );
        match place {
            "header" => {
                assert_eq!(r.status, 200);
                assert_eq!(r.header("x-echo"), Some("Bearer [REDACTED]"));
            }
            "large" => {
                assert_eq!(r.status, 400, "{}", &r.text()[..r.text().len().min(300)]);
                assert!(
                    r.body.len() < 4096,
                    "Ringside's own answer, not the 5 MB body"
                );
                assert!(r.json()["error"]["code"].is_string(), "{}", r.text());
            }
            _ => {}
        }
        let id = r.header("x-request-id").unwrap_or_default().to_string();
        let d = proxy.decision(&id).to_string();
        assert!(
            !d.contains("sk-sim-"),
            "{place}: the key in the decision record: {d}"
        );
    }
}

fn one_tenant_cannot_open_a_breaker_for_all(driver: &str) {
    let sim = start_sim(SimOptions::default());
    let (noisy, quiet) = ("sk-tenant-noisy-0123456789", "sk-tenant-quiet-0123456789");
    // Fourteen keys, so that the failures it takes to open the breaker need no wait for a
    // cooling key (with `breaker_min_tenants = 1` this test fails: the breaker opens).
    let mut body = format!(
        "[[providers]]\nid = \"sim\"\ndialect = \"openai\"\nbase_url = \"http://{}/v1\"\n",
        sim.addr
    );
    for i in 0..14 {
        body.push_str(&format!(
            "  [[providers.connections]]\n  id = \"k{i}\"\n  key_env = \"SIM_KEY_A\"\n  models = [\"m\"]\n  priority = {i}\n"
        ));
    }
    let body = body
        + &format!(
            "[[clients]]\nid = \"noisy\"\nkey_sha256 = \"{}\"\n[[clients]]\nid = \"quiet\"\nkey_sha256 = \"{}\"\n",
            key_sha256(noisy),
            key_sha256(quiet)
        );
    let proxy = Proxy::start(driver, 1, "", &body);
    let breaker = |p: &Proxy| {
        let (_, b) = p.admin("GET", "/admin/breakers");
        b["breakers"][0]["state"].as_str().unwrap_or("").to_string()
    };
    // One tenant's requests fail upstream, again and again (its own poison requests).
    let noisy_auth = format!("Bearer {noisy}");
    for i in 0..4 {
        // (Four requests of its own: the same one again would be a retry, with one attempt.)
        let body = chat("m", false).replace("\"hi\"", &format!("\"q{i}\""));
        let r = proxy.post(
            "/v1/chat/completions",
            &[("authorization", &noisy_auth), ("x-sim-fault", "500")],
            &body,
        );
        assert_eq!(r.status, 500, "{}", r.text());
        assert_eq!(attempt_count(&r), 3);
    }
    assert_ne!(breaker(&proxy), "open", "one tenant alone never opens it");
    // The other tenant is still served.
    let quiet_auth = format!("Bearer {quiet}");
    let r = proxy.post(
        "/v1/chat/completions",
        &[("authorization", &quiet_auth)],
        &chat("m", false),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    // When a second tenant fails too, the provider is unwell for everyone: it opens.
    proxy.post(
        "/v1/chat/completions",
        &[("authorization", &quiet_auth), ("x-sim-fault", "500")],
        &chat("m", false),
    );
    // Counted, not sampled: its first open time is short, and a loaded machine may look only
    // once it has turned half-open.
    let opened = |m: &str| {
        let line = "ringside_breaker_transitions_total{provider=\"sim\",to=\"open\"} ";
        (m.lines().find_map(|l| l.strip_prefix(line))).is_some_and(|n| n != "0")
    };
    let mut m = String::new();
    for _ in 0..50 {
        m = proxy.metrics();
        if opened(&m) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(opened(&m), "{m}");
}
