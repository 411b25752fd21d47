//! The request as HTTP/2 sends it: the HTTP/1.1 head the request path built (its own bytes,
//! already checked: client headers were parsed and filtered into it, ours are written by
//! `proxy::outbound`) encoded straight into an HPACK header block, with the `Host` header as
//! `:authority` and the headers HTTP/2 forbids left out (RFC 9113 §8.2.2).
//!
//! The head is split by its lines, not parsed again: every byte of it was checked on its way
//! in, and a second full parse cost about 1,300 instructions a request (a third of what HTTP/2
//! costs over HTTP/1.1 with TLS). What is checked here is the shape we write (a request line,
//! `name: value` lines, an empty line) and what HTTP/2 needs on its own (the path, a host).

use crate::http::head::{NAME_BYTE, NameByte};
use crate::http::hpack::encode::{self, Indexing};
use std::io;

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

/// A header line: its name, whether the name has upper-case letters, and its value.
type Field<'a> = (&'a [u8], bool, &'a [u8]);

/// The head's lines, one at a time.
#[derive(Clone, Copy)]
struct Lines<'a> {
    head: &'a [u8],
    at: usize,
}

impl<'a> Lines<'a> {
    /// The request line, without its CRLF.
    fn first(&mut self) -> io::Result<&'a [u8]> {
        let (line, len) = to_crlf(self.head).ok_or_else(|| invalid("an incomplete head"))?;
        self.at = len;
        Ok(line)
    }

    /// The next header line, `None` at the empty line that ends the head. The name is read
    /// and checked in one pass (a line has a few dozen bytes: a search's set-up would cost
    /// more than it saves), the value found by its CR.
    fn field(&mut self) -> io::Result<Option<Field<'a>>> {
        let rest = &self.head[self.at..];
        if rest.starts_with(b"\r\n") {
            self.at += 2;
            return Ok(None);
        }
        let mut upper = false;
        let mut i = 0;
        loop {
            let Some(&b) = rest.get(i) else {
                return Err(invalid("an incomplete head"));
            };
            match NAME_BYTE[usize::from(b)] {
                NameByte::Token => {}
                NameByte::Upper => upper = true,
                _ if b == b':' && i > 0 => break,
                _ => return Err(invalid("a header name")),
            }
            i += 1;
        }
        let (value, len) = to_crlf(&rest[i + 1..]).ok_or_else(|| invalid("an incomplete head"))?;
        self.at += i + 1 + len;
        Ok(Some((&rest[..i], upper, value.trim_ascii())))
    }
}

/// The bytes before the first CRLF of `bytes`, and their length with it; `None` without one,
/// or where a CR stands alone.
fn to_crlf(bytes: &[u8]) -> Option<(&[u8], usize)> {
    let cr = memchr::memchr(b'\r', bytes)?;
    (bytes.get(cr + 1) == Some(&b'\n')).then(|| (&bytes[..cr], cr + 2))
}

/// The request line's method and path (`METHOD SP path SP HTTP/1.1`).
fn request_line(line: &[u8]) -> io::Result<(&[u8], &[u8])> {
    let (Some(sp1), Some(rest)) = (memchr::memchr(b' ', line), line.strip_suffix(b" HTTP/1.1"))
    else {
        return Err(invalid("the request line"));
    };
    let (method, path) = (&line[..sp1], rest.get(sp1 + 1..).unwrap_or_default());
    if method.is_empty() || !method.iter().all(u8::is_ascii_uppercase) {
        return Err(invalid("the method"));
    }
    if !(path.starts_with(b"/") || path == b"*") || !path.iter().all(u8::is_ascii_graphic) {
        return Err(invalid("the path"));
    }
    Ok((method, path))
}

/// The `host` header's value: the first header line in every head of ours, else found by a
/// scan of the rest.
fn host<'a>(lines: &mut Lines<'a>) -> io::Result<&'a [u8]> {
    let mut ahead = *lines;
    let mut first = true;
    while let Some((name, _, value)) = ahead.field()? {
        if name.eq_ignore_ascii_case(b"host") {
            if value.is_empty() || !value.iter().all(u8::is_ascii_graphic) {
                return Err(invalid("the host"));
            }
            if first {
                // The encoding goes on after it (elsewhere, it is left out as a host line).
                *lines = ahead;
            }
            return Ok(value);
        }
        first = false;
    }
    Err(invalid("no host"))
}

/// `head` (an HTTP/1.1 request head of ours, perhaps with the body's first bytes behind it)
/// as an HPACK header block in `out`, for `https` or plain `http`. Returns the head's length.
pub fn encode(head: &[u8], https: bool, out: &mut Vec<u8>) -> io::Result<usize> {
    let mut lines = Lines { head, at: 0 };
    let (method, path) = request_line(lines.first()?)?;
    let host = host(&mut lines)?;
    encode::method(out, method);
    encode::scheme(out, https);
    encode::path(out, path);
    encode::authority(out, host);
    let mut short = [0; 64];
    let mut long = Vec::new();
    while let Some((name, upper, value)) = lines.field()? {
        let name = if upper {
            encode::lower_into(name, &mut short, &mut long)
        } else {
            name
        };
        if connection_specific(name) {
            continue;
        }
        let indexing = if never_indexed(name) {
            Indexing::Never
        } else {
            Indexing::Without
        };
        encode::lower_field(out, name, value, indexing);
    }
    Ok(lines.at)
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
        assert!(refused(b"GET / HTTP/1.1\nhost: a\r\n\r\n"), "a bare LF");
        assert!(
            refused(b"GET / HTTP/1.1\r\nhost: a\r\nx y\r\n\r\n"),
            "no colon"
        );
        assert!(
            refused(b"GET / HTTP/1.1\r\nhost: a\r\n: y\r\n\r\n"),
            "no name"
        );
        assert!(
            refused(b"GET / HTTP/1.0\r\nhost: a\r\n\r\n"),
            "not our version"
        );
        assert!(refused(b"get / HTTP/1.1\r\nhost: a\r\n\r\n"), "the method");
        assert!(refused(b"GET x HTTP/1.1\r\nhost: a\r\n\r\n"), "the path");
        assert!(refused(b"GET HTTP/1.1\r\nhost: a\r\n\r\n"), "no path");
        assert!(refused(b"GET /a b HTTP/1.1\r\nhost: a\r\n\r\n"), "a space");
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
