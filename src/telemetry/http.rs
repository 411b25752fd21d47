//! The OTLP exporter's HTTP client: one blocking request per export on the exporter's own
//! thread (plain HTTP to a local collector, or HTTPS with the webpki roots), a connection
//! per export. The SDK's built-in clients bring an async runtime of their own (tokio); this
//! thread needs none.

use bytes::Bytes;
use http::{Request, Response};
use opentelemetry_http::{HttpClient, HttpError};
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

/// An export that takes longer than this fails (and is counted).
const TIMEOUT: Duration = Duration::from_secs(10);
/// The most of a collector's answer read (its body is a small protobuf or JSON status).
const MAX_ANSWER: u64 = 1 << 20;

#[derive(Debug)]
pub struct Client {
    tls: Arc<rustls::ClientConfig>,
}

impl Client {
    pub fn new() -> Client {
        let roots = rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map(|b| b.with_root_certificates(roots).with_no_client_auth())
            .unwrap_or_else(|_| {
                rustls::ClientConfig::builder()
                    .with_root_certificates(rustls::RootCertStore::empty())
                    .with_no_client_auth()
            });
        Client { tls: Arc::new(tls) }
    }
}

#[async_trait::async_trait]
impl HttpClient for Client {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let uri = request.uri().clone();
        let host = uri
            .host()
            .ok_or("the collector's URL has no host")?
            .to_string();
        let https = uri.scheme_str() == Some("https");
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        let addr = (host.as_str(), port)
            .to_socket_addrs()?
            .next()
            .ok_or("the collector's host has no address")?;
        let tcp = TcpStream::connect_timeout(&addr, TIMEOUT)?;
        tcp.set_read_timeout(Some(TIMEOUT))?;
        tcp.set_write_timeout(Some(TIMEOUT))?;
        let head = head_of(&request, &host, port);
        let raw = if https {
            let name = rustls_pki_types::ServerName::try_from(host.clone())?;
            let conn = rustls::ClientConnection::new(self.tls.clone(), name)?;
            exchange(rustls::StreamOwned::new(conn, tcp), &head, request.body())?
        } else {
            exchange(tcp, &head, request.body())?
        };
        parse(&raw)
    }
}

/// The request head: the SDK's method, path and headers, with a length and no keep-alive.
fn head_of(request: &Request<Bytes>, host: &str, port: u16) -> Vec<u8> {
    let path = request.uri().path_and_query().map_or("/", |p| p.as_str());
    let mut h = format!(
        "{} {path} HTTP/1.1\r\nhost: {host}:{port}\r\n",
        request.method()
    );
    for (k, v) in request.headers() {
        if let Ok(v) = v.to_str() {
            h.push_str(&format!("{k}: {v}\r\n"));
        }
    }
    h.push_str(&format!(
        "content-length: {}\r\nconnection: close\r\n\r\n",
        request.body().len()
    ));
    h.into_bytes()
}

fn exchange(mut s: impl Read + Write, head: &[u8], body: &[u8]) -> std::io::Result<Vec<u8>> {
    s.write_all(head)?;
    s.write_all(body)?;
    s.flush()?;
    let mut raw = Vec::new();
    // A server that closes without close_notify ends the read with an error after the bytes.
    let _ = s.take(MAX_ANSWER).read_to_end(&mut raw);
    Ok(raw)
}

/// The collector's answer: its status and body (a status line the SDK judges).
fn parse(raw: &[u8]) -> Result<Response<Bytes>, HttpError> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut r = httparse::Response::new(&mut headers);
    let n = match r.parse(raw)? {
        httparse::Status::Complete(n) => n,
        httparse::Status::Partial => return Err("the collector's answer ended early".into()),
    };
    let status = r.code.ok_or("the collector's answer has no status")?;
    Ok(Response::builder()
        .status(status)
        .body(Bytes::copy_from_slice(&raw[n..]))?)
}
