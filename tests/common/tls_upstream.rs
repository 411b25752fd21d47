//! A TLS upstream for tests: a blocking rustls server, a thread per connection, with a CA and
//! a `localhost` certificate made fresh for each run (rcgen). It answers a chat request with
//! a fixed JSON body, or with fixed events `interval` apart (each flushed as its own TLS
//! record), and records what it saw of each request.

use super::tempdir;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the upstream saw of one request.
#[derive(Clone, Debug)]
pub struct Seen {
    pub sni: Option<String>,
    pub alpn: Option<Vec<u8>>,
    pub authorization: Option<String>,
    pub host: Option<String>,
    pub body_len: usize,
    /// The client presented a certificate (mTLS).
    pub client_certificate: bool,
}

/// How the upstream answers.
#[derive(Clone)]
pub struct Answers {
    pub json: String,
    pub events: Vec<String>,
    /// Between two events of a stream.
    pub interval: Duration,
    /// Close the TCP connection after this many events of a stream, with no TLS close_notify
    /// and no end of the chunked body (a truncated stream).
    pub cut_after: Option<usize>,
    /// Speak TLS 1.2 only (the default: 1.3 and 1.2, 1.3 chosen).
    pub tls12_only: bool,
    /// Send as many TLS 1.3 tickets as a client asks for (RFC 9149), up to 16, and keep the
    /// sessions of a burst of them; otherwise rustls's defaults: two per handshake, 256 kept.
    pub tickets_on_request: bool,
    /// Wait this long before each handshake (a server slow to answer a burst): the connects
    /// of a burst then all arrive while the first handshake is under way.
    pub handshake_delay: Duration,
}

pub struct TlsUpstream {
    pub addr: SocketAddr,
    pub ca_file: std::path::PathBuf,
    pub accepted: Arc<AtomicUsize>,
    pub seen: Arc<Mutex<Vec<Seen>>>,
    /// Handshakes completed: full, resumed.
    pub handshakes: Arc<[AtomicUsize; 2]>,
    /// With [`Self::start_mtls`]: a client certificate and key (PEM files) its CA signed.
    pub client_cert: Option<(std::path::PathBuf, std::path::PathBuf)>,
    _dir: tempdir::Dir,
}

impl TlsUpstream {
    pub fn start(answers: Answers) -> TlsUpstream {
        Self::start_with(answers, false)
    }

    /// [`Self::start`], asking every client for a certificate its CA signed (mTLS).
    pub fn start_mtls(answers: Answers) -> TlsUpstream {
        Self::start_with(answers, true)
    }

    fn start_with(answers: Answers, mtls: bool) -> TlsUpstream {
        let (mut config, ca_pem, client) = server_config(answers.tls12_only, mtls);
        if answers.tickets_on_request {
            let c = Arc::make_mut(&mut config);
            c.max_tls13_tickets = 16;
            c.session_storage = rustls::server::ServerSessionMemoryCache::new(4096);
        }
        let dir = tempdir::new();
        let ca_file = dir.0.join("ca.pem");
        std::fs::write(&ca_file, ca_pem).expect("write CA file");
        let client_cert = client.map(|(cert, key)| {
            let (c, k) = (dir.0.join("client.pem"), dir.0.join("client.key"));
            std::fs::write(&c, cert).expect("write client certificate");
            std::fs::write(&k, key).expect("write client key");
            (c, k)
        });
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let accepted = Arc::new(AtomicUsize::new(0));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (acc, log) = (accepted.clone(), seen.clone());
        let handshakes: Arc<[AtomicUsize; 2]> = Arc::default();
        let kinds = handshakes.clone();
        let answers = Arc::new(answers);
        std::thread::spawn(move || {
            for tcp in listener.incoming().flatten() {
                acc.fetch_add(1, Ordering::SeqCst);
                let (config, log, answers) = (config.clone(), log.clone(), answers.clone());
                let kinds = kinds.clone();
                std::thread::spawn(move || serve(config, tcp, &log, &answers, &kinds));
            }
        });
        TlsUpstream {
            addr,
            ca_file,
            accepted,
            seen,
            handshakes,
            client_cert,
            _dir: dir,
        }
    }

    /// A provider `tls` with connection `t` (key `SIM_KEY_A`) serving `model`, reached at
    /// `https://localhost:PORT/v1`, with `upstream_section` as the `[upstream]` table.
    pub fn provider(&self, upstream_section: &str, model: &str) -> String {
        format!(
            "[upstream]\n{upstream_section}\n\
             [[providers]]\nid = \"tls\"\ndialect = \"openai\"\nbase_url = \"https://localhost:{}/v1\"\n  [[providers.connections]]\n  id = \"t\"\n  key_env = \"SIM_KEY_A\"\n  models = [\"{model}\"]\n",
            self.addr.port()
        )
    }

    /// [`Self::provider`] trusting this upstream's CA.
    pub fn trusted_provider(&self, model: &str) -> String {
        self.provider(&format!("ca_file = \"{}\"", self.ca_file.display()), model)
    }
}

/// What [`server_config`] makes: the config, the CA's PEM, and with mTLS a client certificate
/// and key (PEM) the CA signed.
type Made = (Arc<rustls::ServerConfig>, String, Option<(String, String)>);

/// A server config for `localhost` and the PEM of the CA that signed it; `mtls`: clients must
/// present a certificate the CA signed.
fn server_config(tls12_only: bool, mtls: bool) -> Made {
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
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der()));
    let chain: Vec<CertificateDer<'static>> = vec![leaf.der().clone()];
    let versions: &[&rustls::SupportedProtocolVersion] = if tls12_only {
        &[&rustls::version::TLS12]
    } else {
        rustls::DEFAULT_VERSIONS
    };
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(versions)
        .expect("TLS versions");
    let (builder, client) = if mtls {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(ca_cert.der().clone()).expect("CA root");
        let verifier =
            rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .expect("client verifier");
        let client_key = KeyPair::generate().expect("client key");
        let client_cert = CertificateParams::new(vec!["ringside-client".to_string()])
            .expect("client params")
            .signed_by(&client_key, &issuer)
            .expect("client certificate");
        let made = (client_cert.pem(), client_key.serialize_pem());
        (builder.with_client_cert_verifier(verifier), Some(made))
    } else {
        (builder.with_no_client_auth(), None)
    };
    let mut config = builder.with_single_cert(chain, key).expect("server config");
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    if mtls {
        // A client that offers only HTTP/2 gets it chosen, so that a refused certificate ends
        // an HTTP/2 connection (its requests are answered over HTTP/1.1 alone).
        config.alpn_protocols.push(b"h2".to_vec());
    }
    (Arc::new(config), ca_cert.pem(), client)
}

/// Answer requests on one TLS connection until the client closes it.
fn serve(
    config: Arc<rustls::ServerConfig>,
    tcp: TcpStream,
    log: &Mutex<Vec<Seen>>,
    a: &Answers,
    handshakes: &[AtomicUsize; 2],
) {
    std::thread::sleep(a.handshake_delay);
    let Ok(conn) = rustls::ServerConnection::new(config) else {
        return;
    };
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    let mut buf = Vec::new();
    let mut first = true;
    loop {
        let Some((head, body_len)) = read_request(&mut tls, &mut buf) else {
            return;
        };
        if std::mem::take(&mut first) {
            // The handshake is done by the first request: counted once per connection.
            let resumed = tls.conn.handshake_kind() == Some(rustls::HandshakeKind::Resumed);
            handshakes[usize::from(resumed)].fetch_add(1, Ordering::SeqCst);
        }
        let stream = String::from_utf8_lossy(&buf[..body_len]).contains("\"stream\":true");
        buf.drain(..body_len);
        log.lock().expect("log").push(Seen {
            sni: tls.conn.server_name().map(str::to_string),
            alpn: tls.conn.alpn_protocol().map(<[u8]>::to_vec),
            authorization: header(&head, "authorization"),
            host: header(&head, "host"),
            body_len,
            client_certificate: tls.conn.peer_certificates().is_some(),
        });
        let sent = if stream {
            send_events(&mut tls, a)
        } else {
            let out = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{}",
                a.json.len(),
                a.json
            );
            tls.write_all(out.as_bytes()).and_then(|()| tls.flush())
        };
        if sent.is_err() {
            return;
        }
    }
}

/// A header's value in a request head (case-insensitive name).
fn header(head: &str, name: &str) -> Option<String> {
    head.lines().find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
    })
}

type Tls = rustls::StreamOwned<rustls::ServerConnection, TcpStream>;

/// The next request's head, leaving its Content-Length body at the front of `buf`.
fn read_request(tls: &mut Tls, buf: &mut Vec<u8>) -> Option<(String, usize)> {
    let mut chunk = [0u8; 16 * 1024];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        match tls.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    buf.drain(..head_end);
    let length: usize = header(&head, "content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    while buf.len() < length {
        match tls.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    Some((head, length))
}

/// A chunked event stream: each event its own chunk and TLS record, `interval` apart.
fn send_events(tls: &mut Tls, a: &Answers) -> std::io::Result<()> {
    tls.write_all(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n",
    )?;
    tls.flush()?;
    for (i, ev) in a.events.iter().enumerate() {
        if a.cut_after == Some(i) {
            tls.sock.shutdown(std::net::Shutdown::Both)?;
            return Err(std::io::ErrorKind::ConnectionAborted.into());
        }
        if i > 0 && !a.interval.is_zero() {
            std::thread::sleep(a.interval);
        }
        tls.write_all(format!("{:x}\r\n{ev}\r\n", ev.len()).as_bytes())?;
        tls.flush()?;
    }
    tls.write_all(b"0\r\n\r\n")?;
    tls.flush()
}
