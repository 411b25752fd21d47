//! The request as HTTP/2 sends it: the HTTP/1.1 head the request path built (its own bytes,
//! already checked: client headers were filtered into it) read back into `http::Request`, with
//! the `Host` header as `:authority` and the headers HTTP/2 forbids left out (RFC 9113 §8.2.2).

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue};
use http::uri::{Authority, PathAndQuery, Scheme};
use std::io;

/// Most headers one of our heads carries (the client's, filtered, and ours).
const MAX_HEADERS: usize = 256;

fn invalid(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("HTTP/2 request: {what}"),
    )
}

/// Headers that do not cross between HTTP/1.1 and HTTP/2: the hop-by-hop ones (meaningless on
/// a multiplexed connection, and a protocol error there; `te` is allowed as `trailers` only,
/// which our heads never send) and `host` (HTTP/2's `:authority`).
pub fn connection_specific(name: &str) -> bool {
    name.eq_ignore_ascii_case("host") || crate::http::head::is_hop_by_hop(name)
}

/// `head` (an HTTP/1.1 request head of ours, perhaps with the body's first bytes behind it)
/// as an HTTP/2 request to `scheme`, and the length of the head. The URI's parts and every
/// header value are slices of `head` (its allocation shared, nothing copied).
pub fn from_head(head: &Bytes, scheme: Scheme) -> io::Result<(http::Request<()>, usize)> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let used = match req.parse(head) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Err(invalid("an incomplete head")),
        Err(e) => return Err(invalid(&e.to_string())),
    };
    let (Some(method), Some(path)) = (req.method, req.path) else {
        return Err(invalid("no method or path"));
    };
    let host = req
        .headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case("host"))
        .map(|h| h.value)
        .ok_or_else(|| invalid("no host"))?;
    let mut uri = http::uri::Parts::default();
    uri.scheme = Some(scheme);
    uri.authority =
        Some(Authority::from_maybe_shared(head.slice_ref(host)).map_err(|_| invalid("the host"))?);
    uri.path_and_query = Some(
        PathAndQuery::from_maybe_shared(head.slice_ref(path.as_bytes()))
            .map_err(|_| invalid("the path"))?,
    );
    let mut request = http::Request::new(());
    *request.method_mut() =
        http::Method::from_bytes(method.as_bytes()).map_err(|_| invalid("the method"))?;
    *request.uri_mut() = http::Uri::from_parts(uri).map_err(|e| invalid(&e.to_string()))?;
    // Sized once: growing the map rehashed it about twice a request.
    let mut map = http::HeaderMap::with_capacity(req.headers.len());
    for h in req.headers.iter() {
        if connection_specific(h.name) {
            continue;
        }
        let name = HeaderName::from_bytes(h.name.as_bytes()).map_err(|_| invalid(h.name))?;
        let mut value =
            HeaderValue::from_maybe_shared(head.slice_ref(h.value)).map_err(|_| invalid(h.name))?;
        value.set_sensitive(never_indexed(h.name));
        map.append(name, value);
    }
    *request.headers_mut() = map;
    Ok((request, used))
}

/// Headers HPACK must never put in the connection's table (RFC 7541 §7.1.3): credentials, so
/// that no compression oracle can guess them from frame sizes, and values new on every request
/// (ids, trace context), which would only push out the entries worth keeping.
fn never_indexed(name: &str) -> bool {
    const NAMES: [&str; 8] = [
        "authorization",
        "x-api-key",
        "x-goog-api-key",
        "api-key",
        "cookie",
        "x-request-id",
        "traceparent",
        "tracestate",
    ];
    NAMES.iter().any(|n| name.eq_ignore_ascii_case(n))
}

/// The HTTP/1.1 head the request path reads for an HTTP/2 answer: its status and headers, and
/// `connection: close` (nothing of it is pooled). A body without a length is framed chunked
/// (`stream::H2Stream` writes its DATA as chunks and its END_STREAM as the last chunk), so the
/// relay reads its end as it reads an HTTP/1.1 provider's; `ended`: the stream has no body.
/// Returns whether the body is chunked. Header values came through `http`'s checks: no CR, LF
/// or NUL.
pub fn write_response_head(
    resp: &http::response::Parts,
    ended: bool,
    out: &mut bytes::BytesMut,
) -> bool {
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(resp.status.as_str().as_bytes());
    out.extend_from_slice(b" \r\n");
    for (name, value) in &resp.headers {
        if connection_specific(name.as_str()) {
            continue;
        }
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    let chunked = !ended && !resp.headers.contains_key(http::header::CONTENT_LENGTH);
    if chunked {
        out.extend_from_slice(b"transfer-encoding: chunked\r\n");
    } else if ended && !resp.headers.contains_key(http::header::CONTENT_LENGTH) {
        out.extend_from_slice(b"content-length: 0\r\n");
    }
    out.extend_from_slice(b"connection: close\r\n\r\n");
    chunked
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_head_becomes_a_request_without_its_connection_headers() {
        let head = Bytes::from_static(
            b"POST /v1/chat/completions?x=1 HTTP/1.1\r\nhost: api.example.com:8443\r\n\
            Connection: keep-alive\r\nAuthorization: Bearer k\r\ncontent-length: 2\r\n\
            x-a: 1\r\nx-a: 2\r\n\r\n{}",
        );
        let (r, used) = from_head(&head, Scheme::HTTPS).expect("a request");
        assert_eq!(&head[used..], b"{}", "the body's bytes behind the head");
        assert_eq!(r.method(), "POST");
        assert_eq!(
            r.uri().to_string(),
            "https://api.example.com:8443/v1/chat/completions?x=1"
        );
        assert!(r.headers().get("host").is_none());
        assert!(r.headers().get("connection").is_none());
        assert_eq!(r.headers()["authorization"], "Bearer k");
        assert!(r.headers()["authorization"].is_sensitive(), "never indexed");
        assert!(!r.headers()["x-a"].is_sensitive());
        assert_eq!(r.headers().get_all("x-a").iter().count(), 2);
    }

    #[test]
    fn a_head_without_host_or_whole_is_refused() {
        let refused = |h: &'static [u8]| from_head(&Bytes::from_static(h), Scheme::HTTPS).is_err();
        assert!(refused(b"GET / HTTP/1.1\r\nx: y\r\n\r\n"));
        assert!(refused(b"GET / HTTP/1.1\r\nhost: a\r\n"));
        assert!(
            refused(b"GET / HTTP/1.1\r\nhost: a b\r\n\r\n"),
            "not an authority"
        );
    }

    #[test]
    fn an_answer_reads_back_as_an_http1_head() {
        let resp = http::Response::builder()
            .status(429)
            .header("content-type", "application/json")
            .header("retry-after", "2")
            .body(())
            .expect("response");
        let (parts, ()) = resp.into_parts();
        let mut out = bytes::BytesMut::new();
        assert!(
            write_response_head(&parts, false, &mut out),
            "no length: chunked"
        );
        let limits = crate::http::HeadLimits {
            max_head_bytes: 4096,
            max_headers: 16,
        };
        let (head, used) = crate::http::head::parse_response(&out, limits, false)
            .expect("parses")
            .expect("whole");
        assert_eq!(used, out.len());
        assert_eq!(head.status, 429);
        assert_eq!(head.get_str("retry-after"), Some("2"));
        assert!(!head.keep_alive);
        assert_eq!(head.framing, crate::http::head::Framing::Chunked);
        let mut out = bytes::BytesMut::new();
        assert!(!write_response_head(&parts, true, &mut out), "no body");
        let (head, _) = crate::http::head::parse_response(&out, limits, false)
            .expect("parses")
            .expect("whole");
        assert_eq!(head.framing, crate::http::head::Framing::Length(0));
    }
}
