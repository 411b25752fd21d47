//! One small JSON call to a provider's side endpoints (the OAuth token refresh, the usage
//! status, the limit reset claim and the prober's model list), on a connection of its own that
//! is closed after it: the request path's pooled connections carry only model traffic. (A
//! provider reached over HTTP/2 only is the exception: a call to it is one more stream on its
//! connections, `Call::provider`.)

use super::Connector;
use super::h2::shared::Failure;
use crate::config::Endpoint;
use crate::http::head::parse_response;
use crate::http::io::{read_body, read_more};
use crate::http::{Head, HeadLimits};
use crate::timer;
use std::time::{Duration, Instant};

/// An answer larger than this is not one of these calls' answers.
const MAX_ANSWER: usize = 256 * 1024;

/// One call: where it goes, and what it sends besides the host.
pub struct Call<'a> {
    pub endpoint: &'a Endpoint,
    pub method: &'a str,
    /// The path and query.
    pub path: &'a str,
    /// Header lines, each ending in `\r\n` (credentials included: never logged).
    pub headers: &'a [u8],
    /// A JSON body (empty: none).
    pub body: &'a [u8],
    /// The provider's slot, for a call to the provider's own endpoint: the call goes as its
    /// requests do, a stream on its HTTP/2 connections where it speaks HTTP/2 (a server that
    /// speaks nothing else refuses an HTTP/1.1 handshake). `None`, or any other provider: an
    /// HTTP/1.1 connection of the call's own.
    pub provider: Option<usize>,
}

/// The call's status and JSON body (`Null` when the body is not JSON), or `None` when it
/// failed or did not end by `end`.
pub async fn call(
    connector: &Connector,
    c: &Call<'_>,
    end: Instant,
) -> Option<(u16, serde_json::Value)> {
    let exchange = Box::pin(exchange(connector, c, end));
    timer::timeout_at(end, exchange).await.ok().flatten()
}

async fn exchange(
    connector: &Connector,
    c: &Call<'_>,
    end: Instant,
) -> Option<(u16, serde_json::Value)> {
    let (mut up, head) = send(connector, c).await?;
    let left = end.saturating_duration_since(crate::clock::instant());
    let body = read_body(&mut up.stream, &mut up.buf, head.framing, MAX_ANSWER, left)
        .await
        .ok()?;
    let json = serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
    Some((head.status, json))
}

/// One call's status alone (its body is not read: a provider's model list may be long), or
/// `None` when it failed or did not answer by `end`.
pub async fn status(connector: &Connector, c: &Call<'_>, end: Instant) -> Option<u16> {
    let exchange = Box::pin(async { Some(send(connector, c).await?.1.status) });
    timer::timeout_at(end, exchange).await.ok().flatten()
}

/// Connect, send the call, and read the answer's head. A stream the provider refused or never
/// processed (`REFUSED_STREAM`, above a GOAWAY's last stream) goes once more, as a request's
/// would: it says nothing of the provider's health, and a probe lost to it would keep a
/// breaker open for another interval.
async fn send(connector: &Connector, c: &Call<'_>) -> Option<(super::UpConn, Head)> {
    let head = head_of(c);
    for _ in 0..2 {
        match send_once(connector, c, &head).await {
            Sent::Answered(up, head) => return Some((*up, head)),
            Sent::Refused => continue,
            Sent::Failed => return None,
        }
    }
    None
}

/// How one try of a call ended.
enum Sent {
    Answered(Box<super::UpConn>, Head),
    /// Its HTTP/2 stream was refused before the provider processed it.
    Refused,
    Failed,
}

async fn send_once(connector: &Connector, c: &Call<'_>, h: &bytes::Bytes) -> Sent {
    // A provider's call goes as its requests do (`Connector::open`, by its `http2`): a stream
    // on its HTTP/2 connections where it speaks HTTP/2, so a server that speaks nothing else
    // is reached and no TLS handshake of its own is paid.
    let up = match c.provider {
        Some(key) => connector.open(key, c.endpoint).await,
        None => connector.connect(c.endpoint).await,
    };
    let Ok(mut up) = up else {
        return Sent::Failed;
    };
    let sent = if let Some(stream) = up.stream.h2_mut() {
        // An HTTP/2 stream takes the head (and the body behind it) whole, as the request
        // path's; its `connection: close` is left out like every hop-by-hop header.
        stream.send(h, &bytes::Bytes::new()).await.is_ok()
    } else {
        let (r, _) = monoio::io::AsyncWriteRentExt::write_all(&mut up.stream, h.clone()).await;
        r.is_ok()
    };
    let head = if sent { read_head(&mut up).await } else { None };
    match head {
        Some(head) => Sent::Answered(Box::new(up), head),
        None if up.stream.h2_mut().and_then(|s| s.failure()) == Some(Failure::Refused) => {
            Sent::Refused
        }
        None => Sent::Failed,
    }
}

/// The call as an HTTP/1.1 request (an HTTP/2 stream encodes it from there).
fn head_of(c: &Call<'_>) -> bytes::Bytes {
    let mut h = Vec::with_capacity(512 + c.headers.len());
    for part in [c.method, " ", c.path, " HTTP/1.1\r\nhost: "] {
        h.extend_from_slice(part.as_bytes());
    }
    c.endpoint.write_authority(&mut h);
    h.extend_from_slice(b"\r\n");
    h.extend_from_slice(c.headers);
    h.extend_from_slice(b"user-agent: ringside/");
    h.extend_from_slice(env!("CARGO_PKG_VERSION").as_bytes());
    h.extend_from_slice(b"\r\naccept: application/json\r\nconnection: close\r\n");
    if !c.body.is_empty() {
        h.extend_from_slice(b"content-type: application/json\r\ncontent-length: ");
        crate::http::response::push_u64(&mut h, c.body.len() as u64);
        h.extend_from_slice(b"\r\n");
    }
    h.extend_from_slice(b"\r\n");
    h.extend_from_slice(c.body);
    h.into()
}

async fn read_head(up: &mut super::UpConn) -> Option<Head> {
    let limits = HeadLimits {
        max_head_bytes: 64 * 1024,
        max_headers: crate::http::head::MAX_HEADERS_HARD,
    };
    loop {
        if let Some((head, used)) = parse_response(&up.buf, limits, false).ok()? {
            let _ = up.buf.split_to(used);
            return Some(head);
        }
        if read_more(&mut up.stream, &mut up.buf).await.ok()? == 0 {
            return None;
        }
    }
}

/// `Duration` from now to `ms` from now, as an instant no later than `deadline`.
pub fn end_within(deadline: Instant, ms: u64) -> Instant {
    deadline.min(crate::clock::instant() + Duration::from_millis(ms))
}
