//! Writing response heads and small whole responses.

/// Standard reason phrases for the statuses we produce or commonly relay.
pub fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        201 => "Created",
        204 => "No Content",
        400 => "Bad Request",
        401 => "Unauthorized",
        402 => "Payment Required",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        411 => "Length Required",
        413 => "Payload Too Large",
        415 => "Unsupported Media Type",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        499 => "Client Closed Request",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        529 => "Overloaded",
        _ => "Unknown",
    }
}

/// Builds a response head into one buffer.
pub struct HeadWriter {
    buf: Vec<u8>,
}

impl HeadWriter {
    pub fn new(status: u16) -> Self {
        Self::with_capacity(status, 256)
    }

    pub fn with_capacity(status: u16, cap: usize) -> Self {
        let mut buf = Vec::with_capacity(cap);
        if status == 200 {
            buf.extend_from_slice(b"HTTP/1.1 200 OK\r\n");
            return HeadWriter { buf };
        }
        buf.extend_from_slice(b"HTTP/1.1 ");
        push_u64(&mut buf, u64::from(status));
        buf.push(b' ');
        buf.extend_from_slice(reason(status).as_bytes());
        buf.extend_from_slice(b"\r\n");
        HeadWriter { buf }
    }

    /// Append one header line. Every header Ringside writes goes through here, whatever the
    /// source of its value (a client's string, an upstream's header, a config name): a name or
    /// value with a control byte (CR, LF, NUL, DEL, ...; HTAB is allowed in values) would let
    /// its source write lines of its own into the head (response splitting), so such a header is
    /// left out, never written.
    pub fn header(&mut self, name: &str, value: impl AsRef<[u8]>) -> &mut Self {
        let value = value.as_ref();
        if !safe_header(name.as_bytes(), value) {
            return self;
        }
        // One capacity check for the line instead of four.
        self.buf.reserve(name.len() + value.len() + 4);
        self.buf.extend_from_slice(name.as_bytes());
        self.buf.extend_from_slice(b": ");
        self.buf.extend_from_slice(value);
        self.buf.extend_from_slice(b"\r\n");
        self
    }

    pub fn header_u64(&mut self, name: &str, value: u64) -> &mut Self {
        self.buf.extend_from_slice(name.as_bytes());
        self.buf.extend_from_slice(b": ");
        push_u64(&mut self.buf, value);
        self.buf.extend_from_slice(b"\r\n");
        self
    }

    /// End the head; `body` is appended after the blank line.
    pub fn finish(mut self, body: &[u8]) -> Vec<u8> {
        self.buf.extend_from_slice(b"\r\n");
        self.buf.extend_from_slice(body);
        self.buf
    }
}

/// Whether a header line `name: value` is safe to write: a non-empty token name and a value
/// without control bytes other than HTAB (RFC 9110 5.5: field-vchar, SP, HTAB, obs-text).
pub fn safe_header(name: &[u8], value: &[u8]) -> bool {
    // Names are Ringside's own literals or tokens httparse already checked; values can come
    // from anywhere (a client's string, an upstream's header) and are always checked.
    debug_assert!(
        !name.is_empty() && name.iter().all(|&b| b.is_ascii_graphic() && b != b':'),
        "header name {name:?}"
    );
    value_is_clean(value)
}

/// No control byte but HTAB in `value`. Every header of every answer passes here, so it reads
/// eight bytes at a time (the last word overlapping the one before it) and reads a word again
/// byte by byte only when it is flagged (a tab, or a borrow's false alarm).
fn value_is_clean(value: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let byte_ok = |b: u8| (b >= 0x20 && b != 0x7f) || b == b'\t';
    if value.len() < 8 {
        return value.iter().all(|&b| byte_ok(b));
    }
    // A lane below 0x20 borrows (x - 0x20), a lane equal to 0x7f is zero after the xor and
    // borrows too; lanes with their own high bit set (obs-text) never flag.
    let flagged = |w: &[u8; 8]| {
        let x = u64::from_le_bytes(*w);
        let y = x ^ (ONES * 0x7f);
        (x.wrapping_sub(ONES * 0x20) | y.wrapping_sub(ONES)) & !x & HIGH != 0
    };
    let (words, _) = value.as_chunks::<8>();
    let last = value.last_chunk::<8>();
    let any = words.iter().chain(last).any(flagged);
    !any || value.iter().all(|&b| byte_ok(b))
}

/// `v` in decimal: no `fmt` machinery on the request path (itoa writes two digits per step
/// from a table).
pub fn push_u64(buf: &mut Vec<u8>, v: u64) {
    buf.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
}

/// `v` in lower-case hex, zero-padded to at least `min_digits` (at most 16), written into `tmp`.
pub fn hex(v: u64, min_digits: usize, tmp: &mut [u8; 16]) -> &str {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut i = tmp.len();
    let mut n = v;
    while i > 0 && (n != 0 || tmp.len() - i < min_digits.max(1)) {
        i -= 1;
        tmp[i] = DIGITS[(n & 15) as usize];
        n >>= 4;
    }
    ascii(&tmp[i..])
}

/// Digits `hex` wrote as text, without validating them again (~60 instructions a call).
fn ascii(digits: &[u8]) -> &str {
    debug_assert!(digits.is_ascii());
    // SAFETY: `hex` writes only ASCII digits and letters into `digits`.
    unsafe { std::str::from_utf8_unchecked(digits) }
}

/// `response` without its body, for an answer to `HEAD` (RFC 9110 9.3.2: the same head, with
/// the Content-Length the body would have had, and no body).
pub fn head_only(mut response: Vec<u8>) -> Vec<u8> {
    if let Some(end) = memchr::memmem::find(&response, b"\r\n\r\n") {
        response.truncate(end + 4);
    }
    response
}

/// A complete small response with a body and Content-Length.
pub fn whole(
    status: u16,
    content_type: &str,
    extra: &[(&str, &str)],
    body: &[u8],
    keep_alive: bool,
) -> Vec<u8> {
    let mut w = HeadWriter::with_capacity(status, 256 + body.len());
    // 1xx and 204 have no body and carry no Content-Length (RFC 9110 8.6).
    let bodiless = status == 204 || status < 200;
    let body = if bodiless { &[][..] } else { body };
    if !bodiless {
        w.header("content-type", content_type);
        w.header_u64("content-length", body.len() as u64);
    }
    for (k, v) in extra {
        w.header(k, v);
    }
    if !keep_alive {
        w.header("connection", "close");
    }
    w.finish(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_matches_the_format_macro() {
        for (v, w) in [
            (0u64, 8usize),
            (0, 1),
            (0, 0),
            (0xab, 1),
            (0xdead_beef, 8),
            (7, 8),
        ] {
            assert_eq!(hex(v, w, &mut [0u8; 16]), format!("{v:0w$x}"));
        }
        assert_eq!(hex(u64::MAX, 1, &mut [0u8; 16]), "ffffffffffffffff");
        assert_eq!(hex(1, 20, &mut [0u8; 16]), "0000000000000001");
    }

    #[test]
    fn decimal_matches_to_string() {
        for v in [0u64, 7, 10, 12_345, u64::MAX] {
            let mut out = Vec::new();
            push_u64(&mut out, v);
            assert_eq!(out, v.to_string().as_bytes());
        }
    }

    #[test]
    fn the_word_check_agrees_with_the_byte_check_everywhere() {
        let byte_ok = |b: u8| (b >= 0x20 && b != 0x7f) || b == b'\t';
        for bad in 0..=255u8 {
            for at in 0..19 {
                let mut v = vec![b'a'; 19];
                v[at] = bad;
                assert_eq!(value_is_clean(&v), byte_ok(bad), "byte {bad:#x} at {at}");
                // Neighbours with the high bit set (obs-text) change nothing.
                let mut w = vec![0xe6u8; 19];
                w[at] = bad;
                assert_eq!(
                    value_is_clean(&w),
                    byte_ok(bad),
                    "byte {bad:#x} at {at} in obs-text"
                );
            }
        }
    }

    #[test]
    fn a_header_with_a_control_byte_is_left_out() {
        let mut w = HeadWriter::new(200);
        w.header("x-ok", "a\tb");
        w.header("x-route", "m\r\nSet-Cookie: a=b");
        w.header("x-nul", b"a\0b");
        w.header("x-del", b"a\x7fb");
        w.header("x-utf8", "模型");
        let s = String::from_utf8(w.finish(b"")).unwrap();
        assert_eq!(s, "HTTP/1.1 200 OK\r\nx-ok: a\tb\r\nx-utf8: 模型\r\n\r\n");
    }

    #[test]
    fn an_answer_to_head_keeps_its_length_and_drops_its_body() {
        let r = head_only(whole(405, "application/json", &[], b"{\"e\":1}", true));
        let s = String::from_utf8(r).unwrap();
        assert!(s.ends_with("content-length: 7\r\n\r\n"), "{s}");
    }

    #[test]
    fn a_204_has_no_length_or_body() {
        let s = String::from_utf8(whole(
            204,
            "application/json",
            &[("allow", "POST")],
            b"x",
            true,
        ))
        .unwrap();
        assert_eq!(s, "HTTP/1.1 204 No Content\r\nallow: POST\r\n\r\n");
    }

    #[test]
    fn writes_a_whole_response() {
        let r = whole(
            404,
            "application/json",
            &[("x-request-id", "r1")],
            b"{}",
            false,
        );
        let s = String::from_utf8(r).unwrap();
        assert_eq!(
            s,
            "HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: 2\r\nx-request-id: r1\r\nconnection: close\r\n\r\n{}"
        );
    }
}
