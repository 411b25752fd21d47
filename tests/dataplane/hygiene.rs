//! HTTP hygiene at the trust boundary: HEAD answers without a body, HTTP/1.0 clients get no
//! transfer codings or interim answers, hop-by-hop and credential headers and parameters stay
//! behind, a client may only shorten its deadline, tenants do not see provider names, and an
//! upstream's HTML page is summarised rather than copied.

use crate::both_drivers;
use crate::common::*;
use crate::sim_proxy;
use crate::trust::replies;
use ringside::demo::client;
use ringside::simulate::SimOptions;
use std::io::Write;

both_drivers!(
    head_requests_and_http10_clients,
    hop_by_hop_credential_billing_and_address_headers_stay_behind,
    a_client_may_shorten_its_deadline_but_not_lengthen_it,
    tenants_see_request_ids_not_provider_names,
    an_html_error_page_is_summarised,
    an_answers_connection_options_stay_behind,
);

fn send(addr: std::net::SocketAddr, raw: &[u8]) -> Vec<u8> {
    let mut s = raw_client(addr);
    s.write_all(raw).expect("write");
    read_all(s)
}

fn head_requests_and_http10_clients(driver: &str) {
    let (_sim, proxy) = sim_proxy(driver, SimOptions::default());
    // HEAD: the head an equivalent GET would get, no body.
    let raw = send(
        proxy.addr,
        b"HEAD /v1/chat/completions HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
    );
    let text = String::from_utf8_lossy(&raw);
    assert!(text.starts_with("HTTP/1.1 405"), "{text}");
    assert!(
        text.ends_with("\r\n\r\n"),
        "no body after the head: {text:?}"
    );
    // HTTP/1.0 with a transfer coding: faulty framing, 400 and closed.
    let raw = send(
        proxy.addr,
        b"POST /v1/chat/completions HTTP/1.0\r\nconnection: keep-alive\r\ntransfer-encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
    );
    let got = replies(&raw);
    assert_eq!(got.len(), 1, "{}", String::from_utf8_lossy(&raw));
    assert_eq!(got[0].status, 400);
    // HTTP/1.0 asking for 100-continue: no interim answer, just the final one.
    let body = chat("smart", false);
    let raw = send(
        proxy.addr,
        format!(
            "POST /v1/chat/completions HTTP/1.0\r\nexpect: 100-continue\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    );
    let text = String::from_utf8_lossy(&raw);
    assert!(!text.contains("100 Continue"), "{text}");
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    // An HTTP/1.0 client's event stream: unframed, ended by closing the connection.
    let body = chat("smart", true);
    let raw = send(
        proxy.addr,
        format!(
            "POST /v1/chat/completions HTTP/1.0\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    );
    let text = String::from_utf8_lossy(&raw);
    let (head, rest) = text.split_once("\r\n\r\n").expect("a head");
    assert!(head.starts_with("HTTP/1.1 200"), "{text}");
    assert!(
        !head.to_ascii_lowercase().contains("transfer-encoding"),
        "{head}"
    );
    assert!(
        head.to_ascii_lowercase().contains("connection: close"),
        "{head}"
    );
    assert!(rest.starts_with("data: "), "no chunk framing: {rest:?}");
    assert!(rest.trim_end().ends_with("data: [DONE]"), "{rest:?}");
    // A chunk-size line with junk after the size is refused.
    let raw = send(
        proxy.addr,
        b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n2 99\r\n{}\r\n0\r\n\r\n",
    );
    let text = String::from_utf8_lossy(&raw);
    assert!(text.starts_with("HTTP/1.1 400"), "{text}");
}

fn hop_by_hop_credential_billing_and_address_headers_stay_behind(driver: &str) {
    let (sim, proxy) = sim_proxy(driver, SimOptions::default());
    let body = chat("smart", false);
    let raw = format!(
        "POST /v1/chat/completions?api_key=sk-in-query&api-version=2024-06-01 HTTP/1.1\r\nhost: x\r\n\
         connection: close, x-hop\r\nx-hop: hop-value\r\nopenai-organization: org-someone-else\r\n\
         openai-project: proj-x\r\nx-goog-api-key: AIzaGoog\r\nocp-apim-subscription-key: azkey\r\n\
         x-forwarded-for: 10.20.30.40\r\nforwarded: for=10.20.30.41\r\nx-real-ip: 10.20.30.42\r\n\
         x-kept: kept-value\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let r = client::parse_reply(&send(proxy.addr, raw.as_bytes())).expect("answer");
    assert_eq!(r.status, 200, "{}", r.text());
    let seen = client::request(sim.addr, "GET", "/_sim/requests", &[], b"", T)
        .expect("sim log")
        .text();
    for gone in [
        "sk-in-query",
        "hop-value",
        "org-someone-else",
        "proj-x",
        "AIzaGoog",
        "azkey",
        // The client's internal addresses.
        "10.20.30.",
    ] {
        assert!(!seen.contains(gone), "{gone} reached the provider: {seen}");
    }
    assert!(
        seen.contains("kept-value") && seen.contains("api-version=2024-06-01"),
        "{seen}"
    );
}

fn a_client_may_shorten_its_deadline_but_not_lengthen_it(driver: &str) {
    let sim = start_sim(SimOptions::default());
    let body = priority_keys(sim.addr, &["a"], "")
        + "[[routes]]\nname = \"quick\"\nstrategy = \"priority\"\ndeadline_ms = 300\ntargets = [{ provider = \"sim\", model = \"m\" }]\n";
    let proxy = Proxy::start(driver, 1, "", &body);
    // The upstream takes 2 s; the route allows 300 ms; the client asks for a minute.
    let r = proxy.post(
        "/v1/chat/completions",
        &[
            ("x-ringside-deadline-ms", "60000"),
            ("x-sim-latency-ms", "2000"),
        ],
        &chat("quick", false),
    );
    assert_eq!(r.status, 504, "the route's deadline holds: {}", r.text());
    // Shortening is fine.
    let r = proxy.post(
        "/v1/chat/completions",
        &[
            ("x-ringside-deadline-ms", "100"),
            ("x-sim-latency-ms", "1500"),
        ],
        &chat("m", false),
    );
    assert_eq!(r.status, 504, "{}", r.text());
}

fn tenants_see_request_ids_not_provider_names(driver: &str) {
    let mut opts = SimOptions::default();
    opts.faults.push(
        ringside::simulate::parse_fault_arg(
            "key:sk-sim-a=sse-error;message=internal db-7.corp.example down",
        )
        .expect("spec"),
    );
    let sim = start_sim(opts);
    let (tenant, ops) = ("sk-tenant-0123456789", "sk-ops-0123456789");
    let body = priority_keys(sim.addr, &["a"], "")
        + "[resilience]\nmax_wait_ms = 0\n"
        + &format!(
            "[[clients]]\nid = \"tenant\"\nkey_sha256 = \"{}\"\n[[clients]]\nid = \"ops\"\nkey_sha256 = \"{}\"\nscopes = [\"inference\", \"admin\"]\n",
            key_sha256(tenant),
            key_sha256(ops)
        );
    let proxy = Proxy::start(driver, 1, "", &body);
    // A failing stream is judged before commit (an in-band error): Ringside answers itself.
    let ask = |key: &str, fault: bool| {
        let auth = format!("Bearer {key}");
        let mut h = vec![("authorization", auth.as_str())];
        if !fault {
            h.push(("x-sim-fault", "none"));
        }
        proxy.post("/v1/chat/completions", &h, &chat("m", fault))
    };
    // A success: the tenant sees the count of attempts, not where they went.
    let r = ask(tenant, false);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("x-ringside-connection"), None);
    assert_eq!(r.header("x-ringside-attempts"), Some("1"));
    let r = ask(ops, false);
    assert_eq!(r.header("x-ringside-connection"), Some("sim/a"));
    assert!(
        r.header("x-ringside-attempts")
            .unwrap_or("")
            .contains("sim/a")
    );
    // A failure: no provider name or upstream text for the tenant, its request id instead.
    let r = ask(tenant, true);
    assert!(r.status >= 500, "{}", r.text());
    let all = format!("{:?}{}", r.headers, r.text());
    assert!(
        !all.contains("sim/a") && !all.contains("corp.example"),
        "{all}"
    );
    let id = r.header("x-request-id").unwrap_or_default().to_string();
    assert!(r.text().contains(&id), "{}", r.text());
    // The decision record keeps everything.
    let d = proxy.decision(&id).to_string();
    assert!(d.contains("corp.example") && d.contains("\"a\""), "{d}");
    // The operator's key sees the same failure explained.
    let (status, _) = proxy.admin("POST", "/admin/connections/sim/a/reset");
    assert_eq!(status, 200);
    let r = ask(ops, true);
    assert!(r.text().contains("corp.example"), "{}", r.text());
}

fn an_html_error_page_is_summarised(driver: &str) {
    let page = "<html><head><title>502 Bad Gateway</title></head><body>upstream lb-3.internal.example:8443 refused</body></html>";
    let response = format!(
        "HTTP/1.1 502 Bad Gateway\r\ncontent-type: text/html\r\ncontent-length: {}\r\n\r\n{page}",
        page.len()
    );
    let up = raw_upstream(response.into_bytes(), false);
    let proxy = crate::raw_proxy(driver, &up, 1);
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
    let text = r.text();
    assert!(!text.contains("internal.example"), "{text}");
    let id = r.header("x-request-id").unwrap_or_default().to_string();
    let d = proxy.decision(&id).to_string();
    assert!(!d.contains("internal.example"), "{d}");
    assert!(d.contains("text/html"), "{d}");
}

fn an_answers_connection_options_stay_behind(driver: &str) {
    let body = r#"{"id":"x","object":"chat.completion","choices":[]}"#;
    let response = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: keep-alive, x-up-hop\r\nx-up-hop: internal\r\nx-kept: yes\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let up = raw_upstream(response.into_bytes(), false);
    let proxy = crate::raw_proxy(driver, &up, 1);
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
    assert_eq!(r.status, 200);
    assert_eq!(r.header("x-up-hop"), None, "{:?}", r.headers);
    assert_eq!(r.header("x-kept"), Some("yes"));
}
