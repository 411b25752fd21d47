//! Egress the way enterprises run it, end to end against a TLS upstream: through an HTTP
//! `CONNECT` proxy with credentials, and with a provider's own TLS settings (its CA, its
//! server name, a client certificate); and what a refusal on the way (the proxy's, or the
//! provider's TLS refusing the certificate) does: named, and held for every key of the provider.

use super::tls::{EVENTS, JSON, answers};
use crate::both_drivers;
use crate::common::tls_upstream::{Answers, TlsUpstream};
use crate::common::*;

both_drivers!(
    a_provider_is_reached_through_an_egress_proxy,
    a_providers_own_tls_settings_hold_for_it_alone,
);

/// A provider behind an enterprise's egress proxy: the connection tunnels through it
/// (`CONNECT localhost:PORT` with the proxy's credentials from `proxy_auth_env`), TLS and the
/// request go through the tunnel as on a direct connection; a proxy that refuses the
/// credentials is an upstream failure the client hears of, its credentials nowhere in it.
fn a_provider_is_reached_through_an_egress_proxy(driver: &str) {
    use crate::common::connect_proxy::ConnectProxy;
    use base64::Engine;
    let up = TlsUpstream::start(answers());
    // `SIM_KEY_C` (sk-sim-c) stands for the proxy's `user:password`.
    let want = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode("sk-sim-c")
    );
    let egress = ConnectProxy::start(Some(want));
    let through = |auth_env: &str| {
        up.trusted_provider("m").replace(
            "\n  [[providers.connections]]",
            &format!(
                "\nproxy = \"http://127.0.0.1:{}\"\nproxy_auth_env = \"{auth_env}\"\n  [[providers.connections]]",
                egress.addr.port()
            ),
        )
    };
    let proxy = Proxy::start(driver, 1, "", &through("SIM_KEY_C"));
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.text(), JSON);
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", true));
    assert_eq!(r.text(), EVENTS.concat());
    let heads = egress.heads.lock().expect("heads").clone();
    assert_eq!(heads.len(), 1, "one tunnel, pooled: {heads:?}");
    let port = up.addr.port();
    assert!(
        heads[0].starts_with(&format!("CONNECT localhost:{port} HTTP/1.1\r\n")),
        "{heads:?}"
    );
    let seen = up.seen.lock().expect("log").clone();
    assert_eq!(seen.len(), 2);
    assert_eq!(
        seen[0].sni.as_deref(),
        Some("localhost"),
        "SNI is the provider's"
    );

    // Other credentials: the proxy answers 407, the provider's one key cools for it, and the
    // client hears of it at once (not after waits for that cooldown: the proxy's answer would
    // not change).
    let refused = Proxy::start(driver, 1, "", &through("SIM_KEY_D"));
    // The refusal is named, whatever page came with it.
    let (text, d) = refused_naming(&refused, "the egress proxy refused its credentials (407)");
    assert!(!text.contains("sk-sim-d"), "{text}");
    assert_eq!(d["attempts"].as_array().map(Vec::len), Some(1), "{d}");
    assert_eq!(d["attempts"][0]["outcome"], "egress_refused", "{d}");
    assert_eq!(
        up.seen.lock().expect("log").len(),
        2,
        "nothing reached the provider"
    );
    // The operator mends the credentials and reloads: the provider serves at once, not after
    // the cooldown the refusal started (nor was its proxy asked again meanwhile by probes).
    let path = refused.dir.0.join("ringside.toml");
    let text = std::fs::read_to_string(&path).expect("config");
    std::fs::write(&path, text.replace("SIM_KEY_D", "SIM_KEY_C")).expect("config");
    let r = refused.admin_with("POST", "/admin/reload", "");
    assert_eq!(r.status, 200, "{}", r.text());
    let r = refused.post("/v1/chat/completions", &[], &chat("m", false));
    assert_eq!(r.status, 200, "{}", r.text());
    a_refusing_proxy_sends_requests_elsewhere_at_once(driver, &up, &through("SIM_KEY_D"), &egress);
    // A proxy that cannot reach the provider (its 502) is a failed connect, as a direct one
    // is: the provider's trouble, or a moment's, not the egress's settings.
    let port = up.addr.port();
    let unreachable = through("SIM_KEY_C")
        .replace(&format!("localhost:{port}"), "localhost:1")
        .replacen("[upstream]\n", "[upstream]\nmax_attempts = 1\n", 1);
    let proxy = Proxy::start(driver, 1, "", &unreachable);
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
    let d = proxy.decision(r.header("x-request-id").unwrap_or_default());
    assert_eq!(d["attempts"][0]["outcome"], "connect_error", "{d}");
    assert_eq!(d["attempts"][0]["reason"], "transport", "{d}");
    let detail = d["attempts"][0]["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("could not reach the provider (502)"), "{d}");
}

/// A proxy's refusal holds for every key behind it: one `CONNECT` refused cools the provider's
/// keys, and the request (and the next) goes to another provider at once, not to the next
/// key's certain refusal nor after waits for the first key's cooldown.
fn a_refusing_proxy_sends_requests_elsewhere_at_once(
    driver: &str,
    up: &TlsUpstream,
    through: &str,
    egress: &crate::common::connect_proxy::ConnectProxy,
) {
    let second_key = "  [[providers.connections]]\n  id = \"u\"\n  key_env = \"SIM_KEY_B\"\n  models = [\"m\"]\n";
    let direct = format!(
        "[[providers]]\nid = \"direct\"\ndialect = \"openai\"\nbase_url = \"https://localhost:{}/v1\"\nproxy = \"none\"\n  [[providers.connections]]\n  id = \"d\"\n  key_env = \"SIM_KEY_A\"\n  models = [\"m\"]\n",
        up.addr.port()
    );
    let route = "[[routes]]\nname = \"r\"\ntargets = [{ provider = \"tls\", model = \"m\" }, { provider = \"direct\", model = \"m\" }]\n";
    let proxy = Proxy::start(
        driver,
        1,
        "",
        &format!("{through}{second_key}{direct}{route}"),
    );
    let before = egress.heads.lock().expect("heads").len();
    let r = proxy.post("/v1/chat/completions", &[], &chat("r", false));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("x-ringside-connection"), Some("direct/d"));
    let d = proxy.decision(r.header("x-request-id").unwrap_or_default());
    assert_eq!(d["attempts"].as_array().map(Vec::len), Some(2), "{d}");
    assert_eq!(d["attempts"][0]["reason"], "egress_refused", "{d}");
    let r = proxy.post("/v1/chat/completions", &[], &chat("r", true));
    assert_eq!(r.text(), EVENTS.concat());
    let d = proxy.decision(r.header("x-request-id").unwrap_or_default());
    assert_eq!(d["attempts"].as_array().map(Vec::len), Some(1), "{d}");
    // (The prober may ask the proxy again meanwhile: whether the provider is back is its job.)
    assert!(egress.heads.lock().expect("heads").len() > before);
}

/// A private endpoint reached by address, with TLS settings of its own: its CA trusted for it
/// alone (not `[upstream] ca_file`), the name its certificate carries sent in SNI and checked,
/// and a client certificate presented to a provider that asks for one (mTLS).
fn a_providers_own_tls_settings_hold_for_it_alone(driver: &str) {
    // Over TLS 1.2 a refused certificate ends the handshake itself.
    for tls12_only in [false, true] {
        own_tls_settings(
            driver,
            TlsUpstream::start_mtls(Answers {
                tls12_only,
                ..answers()
            }),
        );
    }
}

fn own_tls_settings(driver: &str, up: TlsUpstream) {
    let (cert, key) = up.client_cert.clone().expect("client certificate");
    let provider = |client_cert: bool| {
        let mut own = format!(
            "ca_file = \"{}\"\ntls_server_name = \"localhost\"\n",
            up.ca_file.display()
        );
        if client_cert {
            own += &format!(
                "client_cert_file = \"{}\"\nclient_key_file = \"{}\"\n",
                cert.display(),
                key.display()
            );
        }
        format!(
            "[[providers]]\nid = \"private\"\ndialect = \"openai\"\nbase_url = \"https://127.0.0.1:{}/v1\"\n{own}  [[providers.connections]]\n  id = \"t\"\n  key_env = \"SIM_KEY_A\"\n  models = [\"m\"]\n",
            up.addr.port()
        )
    };
    let proxy = Proxy::start(driver, 1, "", &provider(true));
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.text(), JSON);
    let seen = up.seen.lock().expect("log").clone();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0].sni.as_deref(),
        Some("localhost"),
        "the configured name in SNI"
    );
    let port = up.addr.port();
    assert_eq!(
        seen[0].host,
        Some(format!("localhost:{port}")),
        "and in Host, for a front that routes by name"
    );
    assert!(
        seen[0].client_certificate,
        "the client certificate was presented"
    );
    // Without its certificate the provider refuses the handshake (TLS 1.3: with an alert the
    // client reads after its own handshake ended): nothing reaches it, the refusal is named,
    // and it holds for the provider's every key, so no attempt waits for another try of it.
    // Over HTTP/1.1 and HTTP/2, where the alert ends a connection under streams.
    for http2 in ["never", "always"] {
        let cfg = provider(false).replace(
            "tls_server_name",
            &format!("http2 = \"{http2}\"\ntls_server_name"),
        );
        let without = Proxy::start(driver, 1, "", &cfg);
        let (_, d) = refused_naming(&without, "the provider requires a TLS client certificate");
        // The refusal ends the request's tries, on the first: a server that closes at once
        // may meet Ringside's handshake or request with a reset, and the alert it sent before
        // its close is read then (`TlsStream::alert_left`, `said_why`).
        let attempts = d["attempts"].as_array().cloned().unwrap_or_default();
        assert_eq!(attempts.len(), 1, "{d}");
        let last = &attempts[attempts.len() - 1];
        assert_eq!(last["outcome"], "tls_error", "{d}");
        assert_eq!(last["reason"], "tls_refused", "{d}");
        assert_eq!(last["scope"], "provider", "{d}");
    }
    assert_eq!(up.seen.lock().expect("log").len(), 1);
}

/// One request through `proxy`, answered 503 with `named` in its error: the error's text and
/// the request's decision record.
fn refused_naming(proxy: &Proxy, named: &str) -> (String, serde_json::Value) {
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
    assert_eq!(r.status, 503, "{}", r.text());
    assert!(r.text().contains(named), "{}", r.text());
    // Only an operator can mend it: the SDKs are told not to retry, and no wait is promised.
    assert_eq!(r.header("x-should-retry"), Some("false"), "{r:?}");
    assert_eq!(r.header("retry-after"), None, "{r:?}");
    assert!(r.text().contains("an operator must mend"), "{}", r.text());
    let d = proxy.decision(r.header("x-request-id").unwrap_or_default());
    (r.text(), d)
}
