//! The request as HTTP/2 sends it: the HTTP/1.1 head the request path built (its own bytes,
//! already checked: client headers were filtered into it) encoded straight into an HPACK
//! header block, with the `Host` header as `:authority` and the headers HTTP/2 forbids left
//! out (RFC 9113 §8.2.2).

use crate::http::hpack::encode::{self, Indexing};
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
/// which our heads never send) and `host` (HTTP/2's `:authority`). `name` in any case.
pub fn connection_specific(name: &[u8]) -> bool {
    name.eq_ignore_ascii_case(b"host") || crate::http::head::is_hop_by_hop_name(name)
}

/// `head` (an HTTP/1.1 request head of ours, perhaps with the body's first bytes behind it)
/// as an HPACK header block in `out`, for `https` or plain `http`. Returns the head's length.
pub fn encode(head: &[u8], https: bool, out: &mut Vec<u8>) -> io::Result<usize> {
    // Uninitialised slots: zeroing all of them would cost more than the parse.
    let mut slots = [const { std::mem::MaybeUninit::<httparse::Header>::uninit() }; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut []);
    let used = match req.parse_with_uninit_headers(head, &mut slots) {
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
    if host.is_empty() || !host.iter().all(|b| b.is_ascii_graphic()) {
        return Err(invalid("the host"));
    }
    if !path.starts_with('/') && path != "*" {
        return Err(invalid("the path"));
    }
    encode::method(out, method.as_bytes());
    encode::scheme(out, https);
    encode::path(out, path.as_bytes());
    encode::authority(out, host);
    let mut short = [0; 64];
    let mut long = Vec::new();
    for h in req.headers.iter() {
        let name = encode::lowered(h.name.as_bytes(), &mut short, &mut long);
        if connection_specific(name) {
            continue;
        }
        let indexing = if never_indexed(name) {
            Indexing::Never
        } else {
            Indexing::Without
        };
        encode::lower_field(out, name, h.value, indexing);
    }
    Ok(used)
}

/// Headers HPACK must never put in the connection's table (RFC 7541 §7.1.3): credentials, so
/// that no compression oracle can guess them from frame sizes, and values new on every request
/// (ids, trace context), which would only push out the entries worth keeping. `name`
/// lower-case.
fn never_indexed(name: &[u8]) -> bool {
    // By length first, as `is_hop_by_hop`: most names have none of these lengths.
    let candidates: &[&[u8]] = match name.len() {
        6 => &[b"cookie"],
        7 => &[b"api-key"],
        9 => &[b"x-api-key"],
        10 => &[b"tracestate"],
        11 => &[b"traceparent"],
        12 => &[b"x-request-id"],
        13 => &[b"authorization"],
        14 => &[b"x-goog-api-key"],
        _ => return false,
    };
    // Lower-case names ([`encode::lowered`]): plain equality.
    candidates.contains(&name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::hpack::Decoder;

    fn fields(block: &[u8]) -> Vec<(String, String)> {
        let mut out = Vec::new();
        Decoder::new(4096)
            .decode(block, 1 << 20, |n, v| {
                out.push((
                    String::from_utf8_lossy(n).into_owned(),
                    String::from_utf8_lossy(v).into_owned(),
                ));
                Ok(())
            })
            .expect("decodes");
        out
    }

    #[test]
    fn a_head_becomes_a_header_block_without_its_connection_headers() {
        let head = b"POST /v1/chat/completions?x=1 HTTP/1.1\r\nhost: api.example.com:8443\r\n\
            Connection: keep-alive\r\nAuthorization: Bearer k\r\ncontent-length: 2\r\n\
            X-A: 1\r\nx-a: 2\r\n\r\n{}";
        let mut out = Vec::new();
        let used = encode(head, true, &mut out).expect("a request");
        assert_eq!(&head[used..], b"{}", "the body's bytes behind the head");
        let f = fields(&out);
        let want = [
            (":method", "POST"),
            (":scheme", "https"),
            (":path", "/v1/chat/completions?x=1"),
            (":authority", "api.example.com:8443"),
            ("authorization", "Bearer k"),
            ("content-length", "2"),
            ("x-a", "1"),
            ("x-a", "2"),
        ];
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        assert_eq!(f, want, "lower-case names, no host or connection");
        // Credentials never indexed (0001xxxx), plain headers without indexing (0000xxxx).
        assert!(out.windows(2).any(|w| w == [0x1f, 0x08]));
    }

    #[test]
    fn a_head_without_host_or_whole_is_refused() {
        let refused = |h: &[u8]| encode(h, true, &mut Vec::new()).is_err();
        assert!(refused(b"GET / HTTP/1.1\r\nx: y\r\n\r\n"));
        assert!(refused(b"GET / HTTP/1.1\r\nhost: a\r\n"));
        assert!(
            refused(b"GET / HTTP/1.1\r\nhost: a b\r\n\r\n"),
            "not an authority"
        );
        assert!(!refused(b"GET / HTTP/1.1\r\nhost: a\r\n\r\n"));
        assert!(refused(b"GET x HTTP/1.1\r\nhost: a\r\n\r\n"), "the path");
    }

    #[test]
    fn a_host_after_other_headers_is_found_and_sent_once() {
        let head = b"GET * HTTP/1.1\r\nX-A:  1 \r\nHost: h\r\nx-b:2\r\n\r\n";
        let mut out = Vec::new();
        assert_eq!(
            encode(head, false, &mut out).expect("a request"),
            head.len()
        );
        let f = fields(&out);
        let got: Vec<(&str, &str)> = f.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
        let want = [
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "*"),
            (":authority", "h"),
            ("x-a", "1"),
            ("x-b", "2"),
        ];
        assert_eq!(got, want, "values trimmed, host as the authority only");
    }
}
