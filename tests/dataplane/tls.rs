//! A TLS upstream end to end: a private CA trusted through `upstream.ca_file`, SNI and ALPN on the
//! handshake, byte-exact JSON and SSE through rustls, one pooled TLS connection for several
//! requests; and the same upstream refused when its CA is not trusted.
//!
//! The upstream is a small blocking rustls server in test threads, with a CA and a `localhost`
//! certificate made fresh for each run (rcgen).

use crate::both_drivers;
use crate::common::*;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

both_drivers!(
    tls_upstream_with_a_private_ca,
    tls_upstream_with_an_untrusted_ca_is_refused,
);

const JSON: &str = r#"{"id":"chatcmpl-tls","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"over tls"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}"#;

const EVENTS: [&str; 3] = [
    "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"over \"},\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"tls\"},\"finish_reason\":\"stop\"}]}\n\n",
    "data: [DONE]\n\n",
];

/// What the upstream saw of one request.
#[derive(Clone, Debug)]
struct Seen {
    sni: Option<String>,
    alpn: Option<Vec<u8>>,
    authorization: Option<String>,
}

struct TlsUpstream {
    addr: SocketAddr,
    ca_file: std::path::PathBuf,
    accepted: Arc<AtomicUsize>,
    seen: Arc<Mutex<Vec<Seen>>>,
    _dir: tempdir::Dir,
}

fn start_tls_upstream() -> TlsUpstream {
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "ringside test CA");
    let ca_cert = ca.self_signed(&ca_key).expect("CA certificate");
    let issuer = Issuer::new(ca, ca_key);
    let leaf_key = KeyPair::generate().expect("server key");
    let leaf = CertificateParams::new(vec!["localhost".to_string()])
        .expect("server params")
        .signed_by(&leaf_key, &issuer)
        .expect("server certificate");
    let dir = tempdir::new();
    let ca_file = dir.0.join("ca.pem");
    std::fs::write(&ca_file, ca_cert.pem()).expect("write CA file");

    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der()));
    let chain: Vec<CertificateDer<'static>> = vec![leaf.der().clone()];
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .expect("server config");
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let config = Arc::new(config);

    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let accepted = Arc::new(AtomicUsize::new(0));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (acc, log) = (accepted.clone(), seen.clone());
    std::thread::spawn(move || {
        for tcp in listener.incoming().flatten() {
            acc.fetch_add(1, Ordering::SeqCst);
            let (config, log) = (config.clone(), log.clone());
            std::thread::spawn(move || serve_tls(config, tcp, log));
        }
    });
    TlsUpstream {
        addr,
        ca_file,
        accepted,
        seen,
        _dir: dir,
    }
}

/// Answer requests on one TLS connection until the client closes it.
fn serve_tls(config: Arc<rustls::ServerConfig>, tcp: TcpStream, log: Arc<Mutex<Vec<Seen>>>) {
    let Ok(conn) = rustls::ServerConnection::new(config) else {
        return;
    };
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    let mut buf = Vec::new();
    loop {
        // The head, then a Content-Length body.
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let mut chunk = [0u8; 4096];
            match tls.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
        let header = |name: &str| {
            head.lines().find_map(|l| {
                let (n, v) = l.split_once(':')?;
                n.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
            })
        };
        let length: usize = header("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        while buf.len() < head_end + length {
            let mut chunk = [0u8; 4096];
            match tls.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let body = String::from_utf8_lossy(&buf[head_end..head_end + length]).into_owned();
        buf.drain(..head_end + length);
        log.lock().expect("log").push(Seen {
            sni: tls.conn.server_name().map(str::to_string),
            alpn: tls.conn.alpn_protocol().map(<[u8]>::to_vec),
            authorization: header("authorization"),
        });
        let mut out = Vec::new();
        if body.contains("\"stream\":true") {
            out.extend_from_slice(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n",
            );
            for ev in EVENTS {
                out.extend_from_slice(format!("{:x}\r\n{ev}\r\n", ev.len()).as_bytes());
            }
            out.extend_from_slice(b"0\r\n\r\n");
        } else {
            out.extend_from_slice(
                format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{JSON}",
                    JSON.len()
                )
                .as_bytes(),
            );
        }
        if tls.write_all(&out).and_then(|()| tls.flush()).is_err() {
            return;
        }
    }
}

fn tls_provider(up: &TlsUpstream, upstream_section: &str) -> String {
    format!(
        "[upstream]\n{upstream_section}\n\
         [[providers]]\nid = \"tls\"\ndialect = \"openai\"\nbase_url = \"https://localhost:{}/v1\"\n  [[providers.connections]]\n  id = \"t\"\n  key_env = \"SIM_KEY_A\"\n  models = [\"m\"]\n",
        up.addr.port()
    )
}

fn tls_upstream_with_a_private_ca(driver: &str) {
    let up = start_tls_upstream();
    let section = format!("ca_file = \"{}\"", up.ca_file.display());
    let proxy = Proxy::start(driver, 1, "", &tls_provider(&up, &section));

    let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.text(), JSON, "the JSON body byte for byte");
    assert_eq!(r.header("x-ringside-connection"), Some("tls/t"));

    let r = proxy.post("/v1/chat/completions", &[], &chat("m", true));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.text(), EVENTS.concat(), "the events byte for byte");

    let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
    assert_eq!(r.status, 200, "{}", r.text());

    let seen = up.seen.lock().expect("log").clone();
    assert_eq!(seen.len(), 3, "{seen:?}");
    for s in &seen {
        assert_eq!(s.sni.as_deref(), Some("localhost"), "SNI: {s:?}");
        assert_eq!(s.alpn.as_deref(), Some(&b"http/1.1"[..]), "ALPN: {s:?}");
        assert_eq!(s.authorization.as_deref(), Some("Bearer sk-sim-a"), "{s:?}");
    }
    assert_eq!(
        up.accepted.load(Ordering::SeqCst),
        1,
        "three requests, one pooled TLS connection"
    );
}

fn tls_upstream_with_an_untrusted_ca_is_refused(driver: &str) {
    // The same upstream, its CA not given: the certificate does not verify, nothing is sent.
    let up = start_tls_upstream();
    let proxy = Proxy::start(driver, 1, "", &tls_provider(&up, "tls_roots = \"webpki\""));
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
    assert!(r.status >= 500, "{} {}", r.status, r.text());
    assert!(r.json()["error"]["code"].is_string(), "{}", r.text());
    assert!(
        up.seen.lock().expect("log").is_empty(),
        "no request reached it"
    );
    assert!(
        proxy
            .metrics()
            .contains("connection=\"t\",outcome=\"tls_error\"}"),
        "{}",
        proxy.metrics()
    );
}
