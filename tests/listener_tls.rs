//! TLS on the data port (`[server] tls_cert_file`, `tls_key_file`), both drivers: a rustls
//! client and the real OpenAI and Anthropic Python SDKs over https get JSON answers and whole
//! streams; a
//! plaintext client on the TLS port is refused without harm; a renewed certificate applies to
//! new connections after a reload.

mod common;
use common::*;
use ringside::simulate::SimOptions;
use std::io::{Read, Write};
use std::sync::Arc;
use std::time::Duration;

both_drivers!(clients_reach_the_data_port_over_tls);

/// One request over TLS (checked against `ca`), answered whole (`connection: close`).
fn over_tls(addr: std::net::SocketAddr, ca: &std::path::Path, body: &str) -> String {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(ca).expect("CA").flatten() {
        roots.add(c).expect("root");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = rustls_pki_types::ServerName::try_from("localhost").expect("name");
    let conn = rustls::ClientConnection::new(Arc::new(cfg), name).expect("client");
    let tcp = std::net::TcpStream::connect(addr).expect("connect");
    tcp.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    let req = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n\
         connection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    if tls.write_all(req.as_bytes()).is_err() {
        return String::new();
    }
    let mut out = Vec::new();
    let _ = tls.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

fn clients_reach_the_data_port_over_tls(driver: &str) {
    let dir = tempdir::new();
    let (ca, cert, key) = common::sim_tls::certificates(&dir.0);
    let sim = start_sim(SimOptions {
        events: 5,
        ..SimOptions::default()
    });
    let server = format!("tls_cert_file = \"{cert}\"\ntls_key_file = \"{key}\"");
    let proxy = Proxy::start(driver, 2, &server, &priority_keys(sim.addr, &["a"], ""));
    let json = over_tls(proxy.addr, &ca, &chat("m", false));
    assert!(json.starts_with("HTTP/1.1 200"), "{json}");
    assert!(json.contains("chat.completion"), "{json}");
    let stream = over_tls(proxy.addr, &ca, &chat("m", true));
    assert!(stream.starts_with("HTTP/1.1 200"), "{stream}");
    assert!(stream.contains("data: [DONE]"), "{stream}");
    // Plaintext on the TLS port: refused, counted, and the port still serves.
    let mut plain = std::net::TcpStream::connect(proxy.addr).expect("connect");
    let _ = plain.write_all(b"GET /v1/models HTTP/1.1\r\nhost: x\r\n\r\n");
    plain
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    let mut got = Vec::new();
    let _ = plain.read_to_end(&mut got);
    assert!(!String::from_utf8_lossy(&got).contains("200 OK"));
    // (Counted just after the socket closes: looked for a while.)
    let failed = "ringside_client_tls_handshakes_total{result=\"failed\"} 1";
    let until = std::time::Instant::now() + Duration::from_secs(10);
    while !proxy.metrics().contains(failed) && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(proxy.metrics().contains(failed), "{}", proxy.metrics());
    assert!(over_tls(proxy.addr, &ca, &chat("m", false)).starts_with("HTTP/1.1 200"));
    sdk_over_https(&proxy, &ca);
    // A renewed certificate (from another CA) in the same files: a reload applies it to new
    // connections.
    let renewed = tempdir::new();
    let (new_ca, new_cert, new_key) = common::sim_tls::certificates(&renewed.0);
    std::fs::copy(&new_cert, &cert).expect("copy certificate");
    std::fs::copy(&new_key, &key).expect("copy key");
    let r = proxy.admin_with("POST", "/admin/reload", "");
    assert_eq!(r.status, 200, "{}", r.text());
    let until = std::time::Instant::now() + Duration::from_secs(10);
    let mut answer = String::new();
    while std::time::Instant::now() < until {
        answer = over_tls(proxy.addr, &new_ca, &chat("m", false));
        if answer.starts_with("HTTP/1.1 200") {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

/// The OpenAI and Anthropic Python SDKs (httpx) over https, trusting the test's CA (the
/// Anthropic request is translated for the OpenAI-dialect simulator).
fn sdk_over_https(proxy: &Proxy, ca: &std::path::Path) {
    if std::env::var_os("RINGSIDE_SKIP_SDK_TESTS").is_some_and(|v| v != "0") {
        return;
    }
    let python = common::venv::python("sdk-venv", "tests/sdk/requirements.txt")
        .unwrap_or_else(|e| panic!("{e}"));
    let script = r#"
import sys
from openai import OpenAI
c = OpenAI(base_url=sys.argv[1], api_key="unused", max_retries=0)
r = c.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
assert r.choices[0].message.content, r
text = "".join(ch.choices[0].delta.content or "" for ch in c.chat.completions.create(
    model="m", messages=[{"role": "user", "content": "hi"}], stream=True) if ch.choices)
assert text, "empty stream"
from anthropic import Anthropic
a = Anthropic(base_url=sys.argv[1][:-len("/v1")], api_key="unused", max_retries=0)
m = a.messages.create(model="m", max_tokens=64, messages=[{"role": "user", "content": "hi"}])
assert m.content and m.content[0].text, m
print("sdk over https ok")
"#;
    let out = std::process::Command::new(python)
        .args([
            "-c",
            script,
            &format!("https://localhost:{}/v1", proxy.addr.port()),
        ])
        .env("SSL_CERT_FILE", ca)
        .output()
        .expect("run python");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said.contains("sdk over https ok"), "{said}");
}
