//! The TLS stream against a blocking rustls server on loopback, on both drivers: records cut
//! at every size across receives, a reader with less room than a record, a key update in the
//! middle, the two ways a stream ends (close_notify, or the TCP connection cut), the
//! handshakes that take more than one flight (a hello retry, TLS 1.2), and a server's refusal
//! of the client certificate read when a write meets its close.

use super::*;
use crate::test_driver::on_driver;
use monoio::io::{AsyncReadRent, AsyncWriteRent};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};

/// The server's TLS.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Server {
    /// TLS 1.3 in one round trip.
    Tls13,
    /// TLS 1.3 that takes only P-384: the client's first key share (X25519) is refused and
    /// it says hello again.
    HelloRetry,
    /// TLS 1.2 only.
    Tls12,
}

/// A server and a client config that trusts it: a self-signed `localhost` certificate.
fn configs(kind: Server) -> (Arc<rustls::ServerConfig>, Arc<rustls::ClientConfig>) {
    let key = rcgen::KeyPair::generate().expect("key");
    let cert = rcgen::CertificateParams::new(vec!["localhost".to_string()])
        .expect("params")
        .self_signed(&key)
        .expect("certificate");
    let mut server_provider = rustls::crypto::ring::default_provider();
    if kind == Server::HelloRetry {
        server_provider.kx_groups = vec![rustls::crypto::ring::kx_group::SECP384R1];
    }
    let versions: &[&rustls::SupportedProtocolVersion] = match kind {
        Server::Tls12 => &[&rustls::version::TLS12],
        _ => rustls::DEFAULT_VERSIONS,
    };
    let der = rustls_pki_types::PrivatePkcs8KeyDer::from(key.serialize_der());
    let server = rustls::ServerConfig::builder_with_provider(Arc::new(server_provider))
        .with_protocol_versions(versions)
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(vec![cert.der().clone()], der.into())
        .expect("server config");
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert.der().clone()).expect("root");
    let client = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_root_certificates(roots)
    .with_no_client_auth();
    (Arc::new(server), Arc::new(client))
}

/// What the server sends after the request: 50 KB in records of every size, a key update
/// part-way, then how it ends.
fn answer() -> Vec<u8> {
    (0..50_000u32).map(|i| (i % 251) as u8).collect()
}

/// Serve one connection: read the 5-byte request, send [`answer`] with a key update after the
/// first 20,000 bytes, end with close_notify (`cut`: cut the TCP connection instead), and put
/// it all on the wire in pieces of 1 to 3,000 bytes, so records arrive cut anywhere.
fn serve_one(config: Arc<rustls::ServerConfig>, cut: bool) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        let (mut tcp, _) = listener.accept().expect("accept");
        tcp.set_nodelay(true).expect("nodelay");
        let mut conn = rustls::ServerConnection::new(config).expect("server connection");
        let mut request = Vec::new();
        while request.len() < 5 {
            conn.complete_io(&mut tcp).expect("handshake and request");
            let mut chunk = [0u8; 64];
            match conn.reader().read(&mut chunk) {
                Ok(n) => request.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => panic!("server read: {e}"),
            }
        }
        assert_eq!(&request, b"ping\n");
        let body = answer();
        conn.writer().write_all(&body[..20_000]).expect("write");
        if conn.protocol_version() == Some(rustls::ProtocolVersion::TLSv1_3) {
            conn.refresh_traffic_keys().expect("key update");
        }
        conn.writer().write_all(&body[20_000..]).expect("write");
        if !cut {
            conn.send_close_notify();
        }
        let mut wire = Vec::new();
        while conn.wants_write() {
            conn.write_tls(&mut wire).expect("encode");
        }
        let sizes = [1, 2, 5, 3000, 7, 400, 1500, 13];
        let (mut at, mut i) = (0, 0);
        while at < wire.len() {
            let n = sizes[i % sizes.len()].min(wire.len() - at);
            tcp.write_all(&wire[at..at + n]).expect("send");
            at += n;
            i += 1;
            if i % 4 == 0 {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
        if cut {
            return; // dropped: the TCP connection ends with no close_notify
        }
        // Take the client's key update answer and close_notify, until it closes.
        let mut sink = [0u8; 4096];
        while matches!(tcp.read(&mut sink), Ok(n) if n > 0) {}
    });
    addr
}

/// Connect to the test server as `localhost` and send it the request.
async fn connect_and_ping(addr: SocketAddr, config: Arc<rustls::ClientConfig>) -> TlsStream {
    let tcp = TcpStream::connect(addr).await.expect("connect");
    let name = rustls_pki_types::ServerName::try_from("localhost").expect("name");
    let mut tls = TlsStream::connect(tcp, config, name, None)
        .await
        .expect("handshake");
    let (sent, _) = tls.write(b"ping\n".to_vec()).await;
    assert_eq!(sent.expect("write"), 5);
    tls
}

/// Connect, send the request, and read everything with a 7-byte buffer: the bytes, and how
/// the stream ended.
async fn fetch(
    addr: SocketAddr,
    config: Arc<rustls::ClientConfig>,
) -> (Vec<u8>, io::Result<()>, TlsStream) {
    let mut tls = connect_and_ping(addr, config).await;
    let mut got = Vec::new();
    let end = loop {
        let (n, buf) = tls.read(Vec::with_capacity(7)).await;
        match n {
            Ok(0) => break Ok(()),
            Ok(_) => got.extend_from_slice(&buf),
            Err(e) => break Err(e),
        }
    };
    (got, end, tls)
}

#[test]
fn records_cut_anywhere_arrive_whole_through_a_small_reader() {
    for uring in [false, true] {
        let (server, client) = configs(Server::Tls13);
        let addr = serve_one(server, false);
        let (got, end, mut tls) = on_driver(uring, async move {
            let (got, end, mut tls) = fetch(addr, client).await;
            tls.shutdown().await.expect("close_notify");
            (got, end, tls)
        });
        end.expect("ends with close_notify");
        assert!(
            got == answer(),
            "uring {uring}: {} bytes, not the answer",
            got.len()
        );
        // Nothing is held once the stream has been read.
        assert_eq!(
            tls.partial.capacity() + tls.plain.capacity() + tls.unsent.capacity(),
            0
        );
        assert!(tls.read_now(&mut []).expect("after the end").is_some());
    }
}

#[test]
fn a_connection_cut_without_close_notify_is_an_error_after_the_data() {
    for uring in [false, true] {
        let (server, client) = configs(Server::Tls13);
        let addr = serve_one(server, true);
        let (got, end, _) = on_driver(uring, fetch(addr, client));
        let e = end.expect_err("a cut stream is not a clean end");
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof, "uring {uring}");
        assert!(
            got == answer(),
            "uring {uring}: {} bytes, not the answer",
            got.len()
        );
    }
}

#[test]
fn a_hello_retry_and_a_tls12_server_complete_the_handshake() {
    for kind in [Server::HelloRetry, Server::Tls12] {
        for uring in [false, true] {
            let (server, client) = configs(kind);
            let addr = serve_one(server, false);
            let (got, end, tls) = on_driver(uring, fetch(addr, client));
            end.expect("ends with close_notify");
            assert!(
                got == answer(),
                "{kind:?}, uring {uring}: {} bytes",
                got.len()
            );
            let (version, handshake) = (tls.conn.protocol_version(), tls.conn.handshake_kind());
            match kind {
                Server::HelloRetry => assert_eq!(
                    handshake,
                    Some(rustls::HandshakeKind::FullWithHelloRetryRequest),
                    "uring {uring}"
                ),
                _ => assert_eq!(
                    version,
                    Some(rustls::ProtocolVersion::TLSv1_2),
                    "uring {uring}"
                ),
            }
        }
    }
}

/// A read before the commit (`UpStream::read_when_ready`) waits parked but arms no standing
/// poll: nothing would release it, as its socket may be pooled or closed without a relay. An
/// event stream's read (`TlsBody`, which releases it) arms one once its stream has earned it.
#[test]
fn only_an_event_stream_s_read_arms_a_standing_poll() {
    use crate::http::standing::{held, release, start_of_runtime, until_none_held};
    let (server, client) = configs(Server::Tls13);
    let addr = serve_one(server, false);
    start_of_runtime();
    on_driver(true, async move {
        let mut tls = connect_and_ping(addr, client).await;
        let mut buf = BytesMut::new();
        let mut got = 0;
        while got < 20_000 {
            got += tls.read_into(&mut buf, true, false).await.expect("read");
            buf.clear();
            assert_eq!(held(), 0, "a read before the commit armed a standing poll");
        }
        // The rest comes in small pieces a millisecond apart: some read waits, and arms (the
        // stream is taken as one that has waited long enough to earn a poll).
        crate::http::standing::patience::waited_long(tls.raw_fd());
        while held() == 0 {
            let n = tls.read_into(&mut buf, true, true).await.expect("read");
            buf.clear();
            assert!(n > 0, "the answer ended before any wait");
        }
        assert_eq!(held(), 1);
        release(tls.raw_fd());
        assert_eq!(until_none_held().await, 0);
    });
}

/// A TLS 1.3 server that requires a client certificate: the client (with none) ends its
/// handshake first, then the server sends `certificate_required` and closes. Returns when
/// that is on the wire and the socket closed.
fn refuse_the_certificate() -> (
    SocketAddr,
    std::sync::mpsc::Receiver<()>,
    Arc<rustls::ClientConfig>,
) {
    let key = rcgen::KeyPair::generate().expect("key");
    let cert = rcgen::CertificateParams::new(vec!["localhost".to_string()])
        .expect("params")
        .self_signed(&key)
        .expect("certificate");
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert.der().clone()).expect("root");
    let roots = Arc::new(roots);
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        roots.clone(),
        provider.clone(),
    )
    .build()
    .expect("verifier");
    let der = rustls_pki_types::PrivatePkcs8KeyDer::from(key.serialize_der());
    let config = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("versions")
        .with_client_cert_verifier(verifier)
        .with_single_cert(vec![cert.der().clone()], der.into())
        .expect("server config");
    let client = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (done, closed) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let (mut tcp, _) = listener.accept().expect("accept");
        let mut conn = rustls::ServerConnection::new(Arc::new(config)).expect("server");
        while conn.complete_io(&mut tcp).is_ok() {}
        // The alert the failed handshake queued, then the close.
        while conn.wants_write() && conn.write_tls(&mut tcp).is_ok() {}
        drop(tcp);
        let _ = done.send(());
    });
    (addr, closed, Arc::new(client))
}

#[test]
fn a_request_written_after_a_refusal_and_close_names_the_refusal() {
    for uring in [true, false] {
        on_driver(uring, async {
            let (addr, closed, client) = refuse_the_certificate();
            let tcp = TcpStream::connect(addr).await.expect("connect");
            let name = rustls_pki_types::ServerName::try_from("localhost").expect("name");
            let mut tls = TlsStream::connect(tcp, client, name, None)
                .await
                .expect("the client's side of the handshake ends first");
            closed.recv().expect("the server refused and closed");
            // The first write goes (the server's side answers it with a reset); a later one
            // fails on that reset, and says what the server said before closing.
            let mut failed = None;
            for _ in 0..100 {
                let (r, _) = tls.write(b"POST / HTTP/1.1\r\n\r\n".to_vec()).await;
                if let Err(e) = r {
                    failed = Some(e);
                    break;
                }
                monoio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
            let e = failed.expect("a write fails once the reset came");
            let refusal = crate::upstream::tls::refusal(&e);
            assert!(
                refusal
                    .as_deref()
                    .is_some_and(|r| r.contains("certificate_required")),
                "{e}: {refusal:?}"
            );
        });
    }
}
