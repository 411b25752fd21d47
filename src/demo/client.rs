//! A tiny blocking HTTP/1.1 client for the demo and the tests (one request per connection).

use crate::http::chunk::ChunkTracker;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The raw body bytes as they came on the wire (chunk framing included).
    pub raw_body: Vec<u8>,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_default()
    }
}

/// Send one request and read the whole answer (the connection is closed afterwards).
pub fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    timeout: Duration,
) -> io::Result<Reply> {
    let mut s = TcpStream::connect_timeout(&addr, timeout)?;
    s.set_read_timeout(Some(timeout))?;
    s.set_nodelay(true)?;
    let mut req = format!("{method} {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if method != "GET" || !body.is_empty() {
        req.push_str(&format!("content-length: {}\r\n", body.len()));
    }
    req.push_str("\r\n");
    let mut bytes = req.into_bytes();
    bytes.extend_from_slice(body);
    s.write_all(&bytes)?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    parse_reply(&raw)
}

/// Parse a complete response (head and body) from bytes.
pub fn parse_reply(raw: &[u8]) -> io::Result<Reply> {
    let mut hs = [httparse::EMPTY_HEADER; 128];
    let mut resp = httparse::Response::new(&mut hs);
    let used = match resp.parse(raw) {
        Ok(httparse::Status::Complete(n)) => n,
        _ => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "incomplete or bad response head",
            ));
        }
    };
    let status = resp.code.unwrap_or(0);
    let headers: Vec<(String, String)> = resp
        .headers
        .iter()
        .map(|h| {
            (
                h.name.to_string(),
                String::from_utf8_lossy(h.value).into_owned(),
            )
        })
        .collect();
    let rest = &raw[used..];
    let chunked = headers
        .iter()
        .any(|(n, v)| n.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    let body = if chunked {
        let mut t = ChunkTracker::new();
        let mut out = Vec::new();
        t.feed(rest, |p| out.extend_from_slice(p))
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
        out
    } else if let Some((_, v)) = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
    {
        let n: usize = v.trim().parse().unwrap_or(0);
        rest[..n.min(rest.len())].to_vec()
    } else {
        rest.to_vec()
    };
    Ok(Reply {
        status,
        headers,
        body,
        raw_body: rest.to_vec(),
    })
}

/// Count SSE events (blocks separated by a blank line) in a body.
pub fn count_events(body: &[u8]) -> usize {
    let text = String::from_utf8_lossy(body);
    text.split("\n\n")
        .filter(|b| b.lines().any(|l| l.starts_with("data:")))
        .count()
}
