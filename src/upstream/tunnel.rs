//! A tunnel through an enterprise's egress proxy: `CONNECT host:port` on a new connection to
//! the proxy, its `2xx`, and then the provider's TLS (or plain HTTP) over it as on a direct
//! connection. The proxy's credentials go in `Proxy-Authorization`, never in a log or an error.

use super::ConnectError;
use crate::config::{Egress, Endpoint};
use monoio::io::{AsyncReadRent, AsyncWriteRentExt};
use monoio::net::TcpStream;
use std::io;

/// The most a proxy's answer head may take.
const MAX_HEAD: usize = 8 * 1024;

/// Ask `via` for a tunnel to `ep` on `tcp` (a connection to the proxy). `Err`: the proxy
/// refused (`EgressRefused`, its status in the message: its credentials or its policy), could
/// not reach the provider, or broke the exchange (`Connect`).
pub(super) async fn open(
    tcp: &mut TcpStream,
    ep: &Endpoint,
    via: &Egress,
) -> Result<(), ConnectError> {
    // Always with its port: a CONNECT target names one.
    let mut authority = Vec::with_capacity(ep.host.len() + 8);
    ep.write_host(&mut authority);
    authority.push(b':');
    crate::http::response::push_u64(&mut authority, u64::from(ep.port));
    let mut head = Vec::with_capacity(160);
    head.extend_from_slice(b"CONNECT ");
    head.extend_from_slice(&authority);
    head.extend_from_slice(b" HTTP/1.1\r\nhost: ");
    head.extend_from_slice(&authority);
    head.extend_from_slice(b"\r\n");
    if let Some(auth) = &via.authorization {
        head.extend_from_slice(b"proxy-authorization: ");
        head.extend_from_slice(auth.expose().as_bytes());
        head.extend_from_slice(b"\r\n");
    }
    head.extend_from_slice(b"\r\n");
    let (sent, _) = tcp.write_all(head).await;
    sent.map_err(ConnectError::Connect)?;
    let (answer, more) = read_head(tcp).await.map_err(ConnectError::Connect)?;
    let sent_credentials = via.authorization.is_some();
    let refused = |text: String| Err(ConnectError::EgressRefused(text));
    match status(&answer) {
        // Nothing follows a tunnel's answer before the provider is spoken to (the provider
        // answers only what is sent through it): more is a proxy that is not tunnelling.
        Some(s) if (200..300).contains(&s) && more => Err(ConnectError::Connect(io::Error::new(
            io::ErrorKind::InvalidData,
            "the egress proxy sent bytes after its answer",
        ))),
        Some(s) if (200..300).contains(&s) => Ok(()),
        // A refusal comes with a body (an HTML page) that may share the head's read: the
        // status is the news, the body is not read.
        Some(s @ (401 | 407)) if sent_credentials => refused(format!(
            "the egress proxy refused its credentials ({s}): check the provider's proxy_auth_env"
        )),
        Some(s @ (401 | 407)) => refused(format!(
            "the egress proxy wants credentials ({s}): set the provider's proxy_auth_env"
        )),
        // The proxy could not reach the provider (squid's 503, tinyproxy's 500, a 502 or 504):
        // the provider's trouble or a moment's, a failed connect like a direct one.
        Some(s) if s >= 500 => Err(ConnectError::Connect(io::Error::other(format!(
            "the egress proxy could not reach the provider ({s})"
        )))),
        // Its policy (403): refused for every key alike.
        Some(s) => refused(format!("the egress proxy refused the tunnel ({s})")),
        None => Err(ConnectError::Connect(io::Error::new(
            io::ErrorKind::InvalidData,
            "the egress proxy's answer is not HTTP",
        ))),
    }
}

/// The proxy's answer head, up to its blank line, and whether more bytes came with it.
async fn read_head(tcp: &mut TcpStream) -> io::Result<(Vec<u8>, bool)> {
    let mut head = Vec::with_capacity(256);
    let mut chunk = Vec::with_capacity(1024);
    loop {
        let (read, c) = tcp.read(chunk).await;
        chunk = c;
        let n = read?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the egress proxy closed the connection",
            ));
        }
        head.extend_from_slice(&chunk[..n]);
        chunk.clear();
        if let Some(end) = memchr::memmem::find(&head, b"\r\n\r\n") {
            let more = end + 4 != head.len();
            head.truncate(end + 4);
            return Ok((head, more));
        }
        if head.len() > MAX_HEAD {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "the egress proxy's answer head is too long",
            ));
        }
    }
}

/// The status of an `HTTP/1.x NNN …` status line.
fn status(head: &[u8]) -> Option<u16> {
    let line = head.split(|&b| b == b'\r').next()?;
    let rest = line.strip_prefix(b"HTTP/1.")?;
    let code = rest.get(2..5)?;
    std::str::from_utf8(code).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::status;

    #[test]
    fn a_status_line_reads_as_its_code() {
        assert_eq!(
            status(b"HTTP/1.1 200 Connection established\r\n\r\n"),
            Some(200)
        );
        assert_eq!(
            status(b"HTTP/1.0 407 Proxy Authentication Required\r\n"),
            Some(407)
        );
        assert_eq!(status(b"SSH-2.0-OpenSSH\r\n"), None);
        assert_eq!(status(b"HTTP/1.1 2"), None);
    }
}
