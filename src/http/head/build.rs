//! A response head built field by field, for an answer that arrived already split into fields
//! (an HTTP/2 header block): the same [`Head`] the parser makes, its bytes the HTTP/1.1 head
//! those fields spell, without writing them out and parsing them back (httparse and a copy,
//! about 1,500 instructions a request).
//!
//! Every name is checked here as a lower-case token and every value as one HTTP/1.1 line may
//! carry, so the head keeps the parser's promise that its names are valid text.

use super::{Head, HeadError, HeaderRef, RESPONSE_HEADERS, Span};
use super::{body_framing, keep_alive, name_slot};
use bytes::{BufMut, BytesMut};

/// Why a field was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldError {
    /// Not a lower-case token (RFC 9110 §5.1, RFC 9113 §8.2.1).
    BadName,
    /// A NUL, CR or LF (RFC 9113 §8.2.1): it would end the line it is written on.
    BadValue,
    /// More fields than a response head may have.
    TooMany,
}

/// A response head being built: `HTTP/1.1 <status> ` then one `name: value` line per field.
pub struct ResponseBuilder {
    raw: BytesMut,
    headers: Vec<HeaderRef>,
    names: u64,
    status: u16,
}

impl ResponseBuilder {
    /// A head with `status` (100 to 599, the caller's check), room for `capacity` bytes.
    pub fn new(status: u16, capacity: usize) -> ResponseBuilder {
        let mut raw = BytesMut::with_capacity(capacity.max(64));
        raw.put_slice(b"HTTP/1.1 ");
        let digits = [
            b'0' + (status / 100 % 10) as u8,
            b'0' + (status / 10 % 10) as u8,
            b'0' + (status % 10) as u8,
        ];
        raw.put_slice(&digits);
        raw.put_slice(b" \r\n");
        ResponseBuilder {
            raw,
            headers: Vec::with_capacity(16),
            names: 0,
            status,
        }
    }

    /// Add a field, checked (see [`FieldError`]).
    pub fn field(&mut self, name: &[u8], value: &[u8]) -> Result<(), FieldError> {
        check_field(name, value)?;
        if self.headers.len() >= RESPONSE_HEADERS {
            return Err(FieldError::TooMany);
        }
        let name_at = self.at();
        self.raw.put_slice(name);
        self.raw.put_slice(b": ");
        let value_at = self.at();
        self.raw.put_slice(value);
        let end = self.at();
        self.raw.put_slice(b"\r\n");
        let slot = name_slot(name);
        self.names |= 1 << slot;
        self.headers.push(HeaderRef {
            name: Span {
                start: name_at,
                end: value_at - 2,
            },
            value: Span {
                start: value_at,
                end,
            },
            slot,
        });
        Ok(())
    }

    /// Its status.
    pub fn status(&self) -> u16 {
        self.status
    }

    /// The head: its framing read from its fields by the parser's rules (an HTTP/2 answer
    /// with a bad or conflicting length is refused as an HTTP/1.1 one would be).
    pub fn finish(mut self) -> Result<Head, HeadError> {
        self.raw.put_slice(b"\r\n");
        if self.raw.len() > u32::MAX as usize {
            return Err(HeadError::TooLarge);
        }
        let mut head = Head {
            raw: self.raw.freeze(),
            headers: self.headers,
            names: self.names,
            version_minor: 1,
            framing: super::Framing::Empty,
            keep_alive: false,
            method: Span::EMPTY,
            target: Span::EMPTY,
            status: self.status,
        };
        head.framing = if matches!(head.status, 100..=199 | 204 | 304) {
            super::Framing::Empty
        } else {
            body_framing(&head)?.unwrap_or(super::Framing::Close)
        };
        head.keep_alive = keep_alive(&head) && head.framing != super::Framing::Close;
        Ok(head)
    }

    /// Where the next byte goes. A head is far below 4 GiB: the field lists it is built from
    /// are bounded (64 KiB for an HTTP/2 answer), and `finish` refuses one that is not.
    fn at(&self) -> u32 {
        u32::try_from(self.raw.len()).unwrap_or(u32::MAX)
    }
}

/// The bytes of a lower-case token (RFC 9110 §5.1; HTTP/2 names are lower-case, RFC 9113
/// §8.2.1): one lookup per byte of every answer's every name.
const NAME_BYTE: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = c.is_ascii_lowercase() || c.is_ascii_digit();
        b += 1;
    }
    let extra = b"!#$%&'*+-.^_`|~";
    let mut i = 0;
    while i < extra.len() {
        t[extra[i] as usize] = true;
        i += 1;
    }
    t
};

/// Whether a field is one a head may carry: a lower-case token for its name, no NUL, CR or LF
/// in its value.
pub fn check_field(name: &[u8], value: &[u8]) -> Result<(), FieldError> {
    if !valid_name(name) {
        return Err(FieldError::BadName);
    }
    if !valid_value(value) {
        return Err(FieldError::BadValue);
    }
    Ok(())
}

fn valid_name(n: &[u8]) -> bool {
    !n.is_empty() && n.iter().all(|&b| NAME_BYTE[usize::from(b)])
}

/// No NUL, CR or LF: one comparison per byte for the common case (every byte above CR).
fn valid_value(v: &[u8]) -> bool {
    v.iter()
        .all(|&b| b > b'\r' || (b != 0 && b != b'\n' && b != b'\r'))
}

#[cfg(test)]
mod tests {
    use super::super::{Framing, HeadLimits, parse_response};
    use super::*;

    fn built(status: u16, fields: &[(&str, &str)]) -> Result<Head, HeadError> {
        let mut b = ResponseBuilder::new(status, 128);
        for (n, v) in fields {
            b.field(n.as_bytes(), v.as_bytes()).expect("a valid field");
        }
        b.finish()
    }

    /// The built head is the one the parser makes of the same bytes, field for field.
    #[test]
    fn a_built_head_is_the_parsed_head_of_its_bytes() {
        let cases: &[(u16, &[(&str, &str)])] = &[
            (
                200,
                &[
                    ("content-type", "text/event-stream"),
                    ("x-a", "1"),
                    ("x-a", ""),
                ],
            ),
            (429, &[("retry-after", "2"), ("content-length", "17")]),
            (
                200,
                &[("transfer-encoding", "chunked"), ("connection", "close")],
            ),
            (204, &[]),
            (503, &[("connection", "close")]),
        ];
        for (status, fields) in cases {
            let head = built(*status, fields).expect("a head");
            let (parsed, used) = parse_response(head.raw(), HeadLimits::default(), false)
                .expect("parses")
                .expect("whole");
            assert_eq!(used, head.raw().len());
            assert_eq!(head.status, parsed.status);
            assert_eq!(head.framing, parsed.framing, "{status} {fields:?}");
            assert_eq!(head.keep_alive, parsed.keep_alive);
            let all = |h: &Head| -> Vec<(String, Vec<u8>)> {
                h.iter().map(|(n, v)| (n.to_string(), v.to_vec())).collect()
            };
            assert_eq!(all(&head), all(&parsed));
            for (n, v) in fields.iter() {
                assert!(head.get(n).is_some(), "{n}");
                assert_eq!(head.get(n), parsed.get(n), "{n}={v}");
            }
            assert_eq!(head.get("absent"), None);
        }
        let head = built(200, &[("content-length", "5")]).expect("a head");
        assert_eq!(head.framing, Framing::Length(5));
        assert_eq!(
            head.raw().as_ref(),
            b"HTTP/1.1 200 \r\ncontent-length: 5\r\n\r\n"
        );
    }

    #[test]
    fn bad_fields_and_framing_are_refused() {
        let mut b = ResponseBuilder::new(200, 0);
        assert_eq!(b.field(b"X-Upper", b"1"), Err(FieldError::BadName));
        assert_eq!(b.field(b"", b"1"), Err(FieldError::BadName));
        assert_eq!(b.field(b"a b", b"1"), Err(FieldError::BadName));
        assert_eq!(b.field(b"x", b"a\r\nb: c"), Err(FieldError::BadValue));
        assert_eq!(b.field(b"x", b"a\0"), Err(FieldError::BadValue));
        assert_eq!(b.field(b"x", b"caf\xc3\xa9 \t"), Ok(()));
        for _ in 1..RESPONSE_HEADERS {
            assert_eq!(b.field(b"y", b"1"), Ok(()));
        }
        assert_eq!(b.field(b"z", b"1"), Err(FieldError::TooMany));
        assert!(b.finish().is_ok(), "refused fields left no trace");
        assert!(matches!(
            built(200, &[("content-length", "5"), ("content-length", "6")]),
            Err(HeadError::AmbiguousFraming(_))
        ));
        assert!(built(200, &[("content-length", "x")]).is_err());
        assert!(matches!(
            built(200, &[("transfer-encoding", "gzip")]),
            Err(HeadError::UnsupportedTransferCoding)
        ));
    }
}
