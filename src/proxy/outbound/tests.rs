use super::*;
use crate::config::{Endpoint as Ep, Secret};
use crate::http::HeadLimits;
use crate::ids::ConnId;

fn marks() -> Marks<'static> {
    Marks {
        model: "m",
        request_id: "rid",
        trace: &TRACE,
        attempt: 0,
        slow: false,
        credential: None,
    }
}

fn provider(dialect: Dialect) -> (Provider, Connection) {
    let conn = Connection {
        id: "a".into(),
        secret: Secret::new("sk-up"),
        models: vec![],
        weight: 1,
        priority: 0,
        index: ConnId::new(0),
        flow: Default::default(),
        usage_wall: Default::default(),
        organization: None,
        oauth: None,
    };
    let p = Provider {
        azure_api_version: None,
        id: "p".into(),
        dialect,
        auth: AuthKind::ApiKey,
        endpoint: Ep {
            tls: false,
            host: "127.0.0.1".into(),
            port: 9000,
            base_path: "/v1".into(),
            via: None,
            own_tls: None,
            http2: Default::default(),
        },
        anthropic_version: "2023-06-01".into(),
        oauth_beta: String::new(),
        connections: vec![conn.clone()],
        region: None,
        tags: vec![],
        slot: 0,
        forward_headers: vec![],
    };
    (p, conn)
}

#[test]
fn dropped_names_in_any_case() {
    for n in [
        "Host",
        "cookie",
        "EXPECT",
        "api-key",
        "X-Api-Key",
        "x-request-id",
        "X-Session-Id",
        "Authorization",
        "content-length",
        "Accept-Encoding",
        "x-codex-session-id",
        "X-Ringside-Priority",
        "x-ringside-",
        "Connection",
        "transfer-encoding",
    ] {
        assert!(is_dropped(n), "{n}");
    }
    for n in [
        "content-type",
        "accept",
        "anthropic-version",
        "tracestate",
        "x-ringside",
        "hosts",
        "openai-organization",
        "",
    ] {
        assert!(!is_dropped(n), "{n}");
    }
}

const TRACE: crate::audit::trace::Trace = crate::audit::trace::Trace {
    id: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 42],
    flags: 1,
};

#[test]
fn strips_client_secrets_and_internal_headers() {
    let raw = "POST /v1/messages?beta=true HTTP/1.1\r\nHost: me\r\nAuthorization: Bearer client-key\r\nX-Api-Key: client-key\r\nX-Ringside-Session: s1\r\nx-session-id: s2\r\nConnection: keep-alive\r\nTraceparent: 00-abc-def-01\r\nContent-Length: 2\r\nAccept-Encoding: gzip\r\n\r\n";
    let head = head_of(raw);
    let (p, c) = provider(Dialect::Anthropic);
    let out = build(
        &head,
        Endpoint::Messages,
        &p,
        &c,
        &Bytes::from_static(b"{}"),
        marks(),
    );
    let s = String::from_utf8(out.head.to_vec()).unwrap();
    assert!(
        s.starts_with("POST /v1/messages?beta=true HTTP/1.1\r\nhost: 127.0.0.1:9000\r\n"),
        "{s}"
    );
    assert!(!s.contains("client-key"));
    assert!(!s.to_ascii_lowercase().contains("x-ringside"));
    assert!(!s.contains("x-session-id"));
    assert!(s.contains("x-api-key: sk-up\r\n"));
    assert!(s.contains("anthropic-version: 2023-06-01\r\n"));
    // The client's traceparent (malformed here) gave way to Ringside's hop.
    assert!(!s.contains("Traceparent: 00-abc-def-01\r\n"));
    assert!(
        s.contains("traceparent: 00-0000000000000000000000000000002a-"),
        "{s}"
    );
    assert!(s.contains("accept-encoding: identity\r\n") && !s.contains("gzip"));
    assert!(s.ends_with("content-length: 2\r\n\r\n{}"));
}

#[test]
fn openai_gets_bearer() {
    let raw = "POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 2\r\n\r\n";
    let head = head_of(raw);
    let (p, c) = provider(Dialect::OpenAi);
    let out = build(
        &head,
        Endpoint::ChatCompletions,
        &p,
        &c,
        &Bytes::from_static(b"{}"),
        marks(),
    );
    let s = String::from_utf8(out.head.to_vec()).unwrap();
    assert!(s.contains("authorization: Bearer sk-up\r\n"));
    assert!(!s.contains("anthropic-version"));
}

/// A client's request head, parsed.
fn head_of(raw: &str) -> crate::http::Head {
    let parsed = crate::http::head::parse_request(raw.as_bytes(), HeadLimits::default());
    parsed.expect("parse").expect("complete").0
}

fn built(raw: &str, p: &Provider, c: &Connection) -> String {
    let head = head_of(raw);
    let out = build(
        &head,
        Endpoint::ChatCompletions,
        p,
        c,
        &Bytes::from_static(b"{}"),
        marks(),
    );
    String::from_utf8(out.head.to_vec()).unwrap()
}

#[test]
fn credential_params_billing_headers_and_connection_options_stay_behind() {
    let (mut p, c) = provider(Dialect::OpenAi);
    let raw = "POST /v1/chat/completions?api-version=2024-06-01&key=AIzaSECRET&beta=true&API_KEY=x&token HTTP/1.1\r\n\
               Connection: keep-alive, X-Hop\r\nX-Hop: secret-hop\r\nOpenAI-Organization: org-1\r\n\
               OpenAI-Project: proj-1\r\nx-goog-api-key: g\r\nOcp-Apim-Subscription-Key: az\r\n\
               X-Forwarded-For: 10.1.2.3\r\nForwarded: for=10.1.2.3\r\nX-Real-IP: 10.1.2.4\r\n\
               X-Forwarded-Host: intranet.corp\r\nTrue-Client-IP: 10.1.2.5\r\n\
               X-Kept: yes\r\nContent-Length: 2\r\n\r\n";
    let s = built(raw, &p, &c);
    assert!(
        s.starts_with("POST /v1/chat/completions?api-version=2024-06-01&beta=true HTTP/1.1\r\n"),
        "{s}"
    );
    for gone in [
        "AIzaSECRET",
        "X-Hop",
        "secret-hop",
        "org-1",
        "proj-1",
        "x-goog",
        "Ocp-Apim",
        "10.1.2.",
        "intranet.corp",
    ] {
        assert!(!s.contains(gone), "{gone}: {s}");
    }
    assert!(s.contains("X-Kept: yes\r\n"));
    // A provider that asks for the client's address gets it.
    p.forward_headers = vec!["x-forwarded-for".into()];
    let s = built(raw, &p, &c);
    assert!(s.contains("X-Forwarded-For: 10.1.2.3\r\n"), "{s}");
    assert!(!s.contains("10.1.2.4"), "{s}");
    // A provider may take the organization header (it bills the operator's own org).
    p.forward_headers = vec!["openai-organization".into()];
    let s = built(raw, &p, &c);
    assert!(s.contains("OpenAI-Organization: org-1\r\n"), "{s}");
    assert!(!s.contains("proj-1"));
    // Only credentials in the query: no `?` at all.
    let s = built(
        "POST /v1/chat/completions?key=a&api_key=b HTTP/1.1\r\nContent-Length: 2\r\n\r\n",
        &p,
        &c,
    );
    assert!(
        s.starts_with("POST /v1/chat/completions HTTP/1.1\r\n"),
        "{s}"
    );
    // Spelled any way an upstream would read the same name: dropped too.
    let s = built(
        "POST /v1/chat/completions?%6bey=a&x_api_key=b&access-token=c&API-KEY=d&Subscription_Key=e&k%65y=f&api-version=2024-10-21&beta=true HTTP/1.1\r\nContent-Length: 2\r\n\r\n",
        &p,
        &c,
    );
    assert!(
        s.starts_with("POST /v1/chat/completions?api-version=2024-10-21&beta=true HTTP/1.1\r\n"),
        "{s}"
    );
}

#[test]
fn credential_parameter_names_are_read_as_an_upstream_reads_them() {
    for name in [
        "key",
        "KEY",
        "%6bey",
        "%4b%45%59",
        "api_key",
        "api-key",
        "apikey",
        "x-api-key",
        "x_api_key",
        "access_token",
        "access-token",
        "id_token",
        "refresh_token",
        "token",
        "client_secret",
        "password",
        "subscription-key",
        "auth",
        "Authorization",
        "sig",
        "_key_",
    ] {
        assert!(super::is_credential_param(name), "{name}");
    }
    for name in [
        "api-version",
        "beta",
        "model",
        "stream",
        "alt",
        "max_tokens",
        "%zz",
        "k",
    ] {
        assert!(!super::is_credential_param(name), "{name}");
    }
}

#[test]
fn an_anthropic_oauth_provider_sends_its_beta_merged_with_the_clients() {
    let (mut p, c) = provider(Dialect::Anthropic);
    p.auth = AuthKind::OAuth;
    p.oauth_beta = "oauth-2025-04-20".into();
    let raw = "POST /v1/messages HTTP/1.1\r\nhost: x\r\nAnthropic-Beta: prompt-caching-2024-07-31, OAUTH-2025-04-20\r\nanthropic-beta: tools-2024-04-04,prompt-caching-2024-07-31\r\ncontent-length: 2\r\n\r\n";
    let head = head_of(raw);
    let out = build(
        &head,
        Endpoint::Messages,
        &p,
        &c,
        &Bytes::from_static(b"{}"),
        marks(),
    );
    let text = String::from_utf8_lossy(&out.head).to_string();
    assert_eq!(
        text.matches("anthropic-beta").count() + text.matches("Anthropic-Beta").count(),
        1,
        "{text}"
    );
    assert!(
        text.contains(
            "anthropic-beta: oauth-2025-04-20,prompt-caching-2024-07-31,tools-2024-04-04\r\n"
        ),
        "{text}"
    );
    assert!(text.contains("authorization: Bearer sk-up\r\n"), "{text}");
    // An API-key provider forwards the client's header as it came.
    let (p, c) = provider(Dialect::Anthropic);
    let out = build(
        &head,
        Endpoint::Messages,
        &p,
        &c,
        &Bytes::from_static(b"{}"),
        marks(),
    );
    let text = String::from_utf8_lossy(&out.head).to_string();
    assert!(
        text.contains("Anthropic-Beta: prompt-caching-2024-07-31, OAUTH-2025-04-20\r\n"),
        "{text}"
    );
    assert!(text.contains("x-api-key: sk-up"), "{text}");
}

#[test]
fn the_lane_header_is_ringsides_own_on_an_oauth_provider() {
    let (mut p, c) = provider(Dialect::Anthropic);
    p.auth = AuthKind::OAuth;
    p.oauth_beta = "oauth-2025-04-20".into();
    let raw = "POST /v1/messages HTTP/1.1\r\nhost: x\r\nAnthropic-Usage-Limit: slow\r\ncontent-length: 2\r\n\r\n";
    let head = head_of(raw);
    let body = Bytes::from_static(b"{}");
    let text = |slow: bool| {
        let m = Marks { slow, ..marks() };
        let out = build(&head, Endpoint::Messages, &p, &c, &body, m);
        String::from_utf8_lossy(&out.head).to_ascii_lowercase()
    };
    // The client's own header is dropped: the lane state follows what Ringside sent.
    assert!(!text(false).contains("anthropic-usage-limit"));
    assert_eq!(
        text(true)
            .matches("anthropic-usage-limit: slow\r\n")
            .count(),
        1
    );
}
