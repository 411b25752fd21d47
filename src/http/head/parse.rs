//! Parsing a head: httparse's headers kept as ranges into the head's own bytes, the request
//! target's characters checked, the framing read, the limits applied.

use super::{Framing, Head, HeadError, HeaderRef, MAX_HEADERS_HARD, RESPONSE_HEADERS, Span};
use super::{body_framing, keep_alive, name_slot, request_framing};
use bytes::Bytes;
use std::ops::Range;

/// The headers httparse found, as ranges into `buf`, and their names' bits.
fn header_refs(buf: &[u8], found: &[httparse::Header<'_>]) -> (Vec<HeaderRef>, u64) {
    let mut names = 0;
    let refs = found
        .iter()
        .map(|h| {
            let slot = name_slot(h.name.as_bytes());
            names |= 1 << slot;
            HeaderRef {
                name: span(buf, h.name.as_bytes()),
                value: span(buf, h.value),
                slot,
            }
        })
        .collect();
    (refs, names)
}

fn offset(base: &[u8], part: &[u8]) -> Range<usize> {
    let start = part.as_ptr() as usize - base.as_ptr() as usize;
    start..start + part.len()
}

/// [`offset`] as a [`Span`]: `base` is at most `u32::MAX` bytes long (`within_span`).
fn span(base: &[u8], part: &[u8]) -> Span {
    let r = offset(base, part);
    Span {
        start: r.start as u32,
        end: r.end as u32,
    }
}

/// The bytes a parser looks at: no more than a [`Span`] can address. A head that has not
/// ended within them is "more bytes needed" until the head limit refuses it.
fn within_span(buf: &[u8]) -> &[u8] {
    &buf[..buf.len().min(u32::MAX as usize)]
}

/// Limits applied while parsing a head.
#[derive(Clone, Copy, Debug)]
pub struct HeadLimits {
    pub max_head_bytes: usize,
    pub max_headers: usize,
}

impl Default for HeadLimits {
    fn default() -> Self {
        HeadLimits {
            max_head_bytes: 32 * 1024,
            max_headers: 100,
        }
    }
}

/// Parse a request head from the start of `buf`. `Ok(None)`: need more bytes.
/// On success returns the head and how many bytes of `buf` it used.
pub fn parse_request(buf: &[u8], limits: HeadLimits) -> Result<Option<(Head, usize)>, HeadError> {
    let buf = within_span(buf);
    let n_slots = limits.max_headers.clamp(1, MAX_HEADERS_HARD);
    // Uninitialised slots: zeroing 256 headers per request showed up in profiles.
    let mut slots =
        [const { std::mem::MaybeUninit::<httparse::Header>::uninit() }; MAX_HEADERS_HARD];
    let mut req = httparse::Request::new(&mut []);
    let status = req.parse_with_uninit_headers(buf, &mut slots[..n_slots]);
    let Some(len) = head_length(status, buf.len(), limits)? else {
        return Ok(None);
    };
    if len > limits.max_head_bytes {
        return Err(HeadError::TooLarge);
    }
    if req.path.is_some_and(|p| !valid_target(p.as_bytes())) {
        return Err(HeadError::Malformed(
            "the request target holds a character a URL may not carry (such as < > \" { } | \\ ^ `): percent-encode it",
        ));
    }
    let version_minor = req.version.unwrap_or(1);
    let method = req.method.map_or(Span::EMPTY, |m| span(buf, m.as_bytes()));
    let target = req.path.map_or(Span::EMPTY, |p| span(buf, p.as_bytes()));
    let (headers, names) = header_refs(buf, req.headers);
    let raw = Bytes::copy_from_slice(&buf[..len]);
    let mut head = Head {
        raw,
        headers,
        names,
        version_minor,
        framing: Framing::Empty,
        keep_alive: false,
        method,
        target,
        status: 0,
    };
    head.framing = request_framing(&head)?;
    head.keep_alive = keep_alive(&head);
    Ok(Some((head, len)))
}

/// The head's length once httparse has read it all; `None` while it is still arriving and
/// within the limit (a head that keeps growing past it is refused before it completes).
#[inline]
fn head_length(
    status: httparse::Result<usize>,
    buffered: usize,
    limits: HeadLimits,
) -> Result<Option<usize>, HeadError> {
    match status {
        Ok(httparse::Status::Complete(len)) => Ok(Some(len)),
        Ok(httparse::Status::Partial) if buffered > limits.max_head_bytes => {
            Err(HeadError::TooLarge)
        }
        Ok(httparse::Status::Partial) => Ok(None),
        Err(httparse::Error::TooManyHeaders) => Err(HeadError::TooManyHeaders),
        Err(e) => Err(HeadError::Malformed(httparse_reason(e))),
    }
}

/// Parse a response head. `request_was_head` marks HEAD requests (no body ever follows).
pub fn parse_response(
    buf: &[u8],
    limits: HeadLimits,
    request_was_head: bool,
) -> Result<Option<(Head, usize)>, HeadError> {
    let buf = within_span(buf);
    if buf.is_empty() {
        return Ok(None);
    }
    // Uninitialised slots, as for requests: zeroing 128 headers cost ~600 instructions a call.
    let mut slots =
        [const { std::mem::MaybeUninit::<httparse::Header>::uninit() }; RESPONSE_HEADERS];
    let mut res = httparse::Response::new(&mut []);
    let status = httparse::ParserConfig::default()
        .parse_response_with_uninit_headers(&mut res, buf, &mut slots);
    let Some(len) = head_length(status, buf.len(), limits)? else {
        return Ok(None);
    };
    let code = res.code.unwrap_or(0);
    // Three digits are not enough: only 1xx to 5xx mean anything (RFC 9110 15). A `099` or a
    // `600` passed on would be an answer no client can read (`HTTP/1.1 99`, a status with no
    // class): a broken upstream, like any other malformed head.
    if !(100..=599).contains(&code) {
        return Err(HeadError::Malformed("status code outside 100-599"));
    }
    let version_minor = res.version.unwrap_or(1);
    let (headers, names) = header_refs(buf, res.headers);
    let mut head = Head {
        raw: Bytes::copy_from_slice(&buf[..len]),
        headers,
        names,
        version_minor,
        framing: Framing::Empty,
        keep_alive: false,
        method: Span::EMPTY,
        target: Span::EMPTY,
        status: code,
    };
    head.framing = if request_was_head || code == 204 || code == 304 || (100..200).contains(&code) {
        Framing::Empty
    } else {
        match body_framing(&head)? {
            Some(f) => f,
            None => Framing::Close,
        }
    };
    head.keep_alive = keep_alive(&head) && head.framing != Framing::Close;
    Ok(Some((head, len)))
}

/// Whether every byte of a request target is one a URI may carry (RFC 3986: unreserved,
/// sub-delims, `:`, `@`, `/`, `?`, `%`; and `[ ]`, which clients send in queries). httparse lets `< > " { } | \\ ^` and backtick
/// through; passed upstream raw, they reach a provider's URL parser and logs as the client
/// wrote them.
fn valid_target(target: &[u8]) -> bool {
    target.iter().all(|&b| URI_BYTE[usize::from(b)])
}

/// The bytes a request target may carry, one table lookup each (this runs for every request).
const URI_BYTE: [bool; 256] = {
    let mut t = [false; 256];
    let allowed: &[u8] = b"-._~!$&'()*+,;=:@/?%[]";
    let mut b = 0;
    while b < 256 {
        t[b] = (b as u8).is_ascii_alphanumeric();
        b += 1;
    }
    let mut i = 0;
    while i < allowed.len() {
        t[allowed[i] as usize] = true;
        i += 1;
    }
    t
};

fn httparse_reason(e: httparse::Error) -> &'static str {
    match e {
        httparse::Error::HeaderName => "invalid header name",
        httparse::Error::HeaderValue => "invalid header value",
        httparse::Error::NewLine => "invalid line ending",
        httparse::Error::Status => "invalid status",
        httparse::Error::Token => "invalid token",
        httparse::Error::Version => "unsupported HTTP version",
        httparse::Error::TooManyHeaders => "too many headers",
    }
}
