//! HTTP/1.1 message heads on httparse: parsing with limits, and the framing rules that keep
//! request smuggling out (CL+TE refused, one transfer coding only, strict Content-Length).

use super::framing::{body_framing, keep_alive, request_framing};
pub use super::hop::{is_hop_by_hop, is_hop_by_hop_name, is_ringside_header, listed_in};
use super::names::{name_bit, name_slot, same_name};
use bytes::Bytes;
use std::ops::Range;

/// Upper bound on header slots we ever hand to httparse, whatever the config says.
pub const MAX_HEADERS_HARD: usize = 256;
/// Header slots for upstream response heads.
const RESPONSE_HEADERS: usize = 128;

/// How a message body is delimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// No body at all.
    Empty,
    /// Exactly this many bytes.
    Length(u64),
    /// Transfer-Encoding: chunked.
    Chunked,
    /// Until the peer closes (responses only).
    Close,
}

/// Why a head was refused. Each maps to one status and one stable code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HeadError {
    /// Head larger than the limit (431).
    TooLarge,
    /// More header fields than the limit (431).
    TooManyHeaders,
    /// Not HTTP/1.x, broken syntax (400).
    Malformed(&'static str),
    /// Both Content-Length and Transfer-Encoding, or conflicting lengths (400).
    AmbiguousFraming(&'static str),
    /// A transfer coding other than `chunked` (501).
    UnsupportedTransferCoding,
}

impl HeadError {
    pub fn status(&self) -> u16 {
        match self {
            HeadError::TooLarge | HeadError::TooManyHeaders => 431,
            HeadError::Malformed(_) | HeadError::AmbiguousFraming(_) => 400,
            HeadError::UnsupportedTransferCoding => 501,
        }
    }
    pub fn code(&self) -> &'static str {
        match self {
            HeadError::TooLarge => "request_header_too_large",
            HeadError::TooManyHeaders => "too_many_headers",
            HeadError::Malformed(_) => "malformed_request",
            HeadError::AmbiguousFraming(_) => "ambiguous_framing",
            HeadError::UnsupportedTransferCoding => "unsupported_transfer_encoding",
        }
    }
    /// What was wrong, without saying whose head it was (for an upstream's response head).
    pub fn reason(&self) -> String {
        match self {
            HeadError::TooLarge => "head exceeds the configured limit".into(),
            HeadError::Malformed(why) => (*why).into(),
            other => other.message(),
        }
    }

    pub fn message(&self) -> String {
        match self {
            HeadError::TooLarge => "request head exceeds the configured limit".into(),
            HeadError::TooManyHeaders => "too many header fields".into(),
            HeadError::Malformed(why) => format!("malformed HTTP request: {why}"),
            HeadError::AmbiguousFraming(why) => format!("refused ambiguous body framing: {why}"),
            HeadError::UnsupportedTransferCoding => {
                "only the chunked transfer coding is supported".into()
            }
        }
    }
}

/// A header as two spans of the head's bytes: no per-header allocation. 32-bit offsets (a
/// head is far below 4 GiB; the parsers look at no more than that): 20 bytes a header instead
/// of 40, and a held stream keeps two heads for its whole life (an SDK's request carries a
/// dozen headers or more).
#[derive(Clone, Debug)]
struct HeaderRef {
    name: Span,
    value: Span,
    /// The name's slot in `Head::names`: a lookup compares names only where slots match.
    slot: u8,
}

/// `start..end` into a head's bytes.
#[derive(Clone, Copy, Debug)]
struct Span {
    start: u32,
    end: u32,
}

impl Span {
    const EMPTY: Span = Span { start: 0, end: 0 };

    fn range(self) -> Range<usize> {
        self.start as usize..self.end as usize
    }
}

/// The least a head must shed for [`Head::keep_only`] to rebuild it: a rebuild costs two
/// allocations and a copy (about a thousand instructions, once per stream), worth it for a
/// provider's head of a kilobyte or more, not for the simulator's of 150 bytes.
pub const SHED_AT_LEAST: usize = 256;

/// A parsed head (request or response) that owns its raw bytes.
///
/// `raw` and `headers` are private: only the parsers below build a `Head`, so every name,
/// method and target range is one httparse returned as `&str` (valid UTF-8 by construction).
#[derive(Clone, Debug)]
pub struct Head {
    raw: Bytes,
    headers: Vec<HeaderRef>,
    /// One bit per header name present (`name_bit`): most lookups are for headers a message
    /// does not carry, and this answers them without a scan.
    names: u64,
    pub version_minor: u8,
    pub framing: Framing,
    /// Whether the peer asked to keep the connection (version default + Connection header).
    pub keep_alive: bool,
    // Request line parts (empty for responses): private, as `raw` (see `text`), and 32-bit
    // (a held stream keeps two heads).
    method: Span,
    target: Span,
    // Response status (0 for requests).
    pub status: u16,
}

impl Head {
    /// The head's bytes as received.
    pub fn raw(&self) -> &Bytes {
        &self.raw
    }

    /// A range that the parser took from an httparse `&str`. Validating it again cost ~1,000
    /// instructions per proxied request (callgrind), spent on names httparse already checked.
    fn text(&self, r: Span) -> &str {
        match self.raw.get(r.range()) {
            // SAFETY: `raw` and the ranges are private and set only by `parse_request` and
            // `parse_response` from `&str` slices of the same bytes (see the struct's comment).
            Some(b) => unsafe { std::str::from_utf8_unchecked(b) },
            None => "",
        }
    }
    pub fn method(&self) -> &str {
        self.text(self.method)
    }
    pub fn target(&self) -> &str {
        self.text(self.target)
    }
    /// The path without the query string.
    pub fn path(&self) -> &str {
        let t = self.target();
        match memchr::memchr(b'?', t.as_bytes()) {
            Some(i) => &t[..i],
            None => t,
        }
    }
    pub fn query(&self) -> Option<&str> {
        let t = self.target();
        memchr::memchr(b'?', t.as_bytes()).map(|i| &t[i + 1..])
    }
    pub fn iter(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.headers
            .iter()
            .map(|h| (self.text(h.name), &self.raw[h.value.range()]))
    }
    /// Whether the head may carry one of the names in `mask` (`http::names_mask`): false means
    /// it surely carries none, so a reader of those headers has nothing to do.
    pub fn may_have_any(&self, mask: u64) -> bool {
        self.names & mask != 0
    }

    /// The headers whose names may be among those of `mask` (`http::names_mask`): every one
    /// that is, and the few others that share their slots.
    pub fn iter_in(&self, mask: u64) -> impl Iterator<Item = (&str, &[u8])> {
        let any = self.names & mask != 0;
        self.headers
            .iter()
            .filter(move |h| any && mask & (1 << h.slot) != 0)
            .map(|h| (self.text(h.name), &self.raw[h.value.range()]))
    }

    /// First value of a header (case-insensitive name). A plain loop that compares lengths
    /// first: most lookups are for headers a request does not carry.
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        let want = name.as_bytes();
        let slot = name_slot(want);
        if self.names & (1 << slot) == 0 {
            return None;
        }
        for h in &self.headers {
            if h.slot == slot && same_name(&self.raw[h.name.range()], want) {
                return Some(&self.raw[h.value.range()]);
            }
        }
        None
    }

    /// (name, value) as raw bytes: httparse already checked that names are tokens.
    pub(super) fn raw_iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.headers
            .iter()
            .map(|h| (&self.raw[h.name.range()], &self.raw[h.value.range()]))
    }
    pub fn get_str(&self, name: &str) -> Option<&str> {
        // Optional whitespace around a value is ASCII (RFC 9110 5.6.3): trimmed as bytes.
        self.get(name)
            .and_then(|v| std::str::from_utf8(v.trim_ascii()).ok())
    }
    pub fn has_token(&self, name: &str, token: &str) -> bool {
        if self.names & name_bit(name.as_bytes()) == 0 {
            return false;
        }
        self.raw_iter()
            .filter(|(n, _)| n.len() == name.len() && same_name(n, name.as_bytes()))
            .any(|(_, v)| {
                v.split(|b| *b == b',')
                    .any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
            })
    }
    /// The header names this message's `Connection` field lists besides `close` and
    /// `keep-alive` (RFC 9110 7.6.1: they are hop-by-hop and never forwarded), as one
    /// comma-separated value; `None` in the usual case of none.
    pub fn connection_options(&self) -> Option<&[u8]> {
        let v = self.get("connection")?;
        v.split(|b| *b == b',')
            .map(<[u8]>::trim_ascii)
            .any(|t| {
                !t.is_empty()
                    && !t.eq_ignore_ascii_case(b"close")
                    && !t.eq_ignore_ascii_case(b"keep-alive")
            })
            .then_some(v)
    }

    /// Whether the body is declared as JSON (`application/json`, parameters allowed).
    pub fn content_type_is_json(&self) -> bool {
        self.get_str("content-type").is_some_and(|ct| {
            let mime = ct.split(';').next().unwrap_or("").trim();
            mime.eq_ignore_ascii_case("application/json")
        })
    }

    /// Keep only the header lines whose name `keep` accepts; the first line and what was read
    /// from the head (status, framing, keep-alive) stay. For a response head kept while its
    /// body is relayed: a provider's head is a kilobyte or more (rate limits, cookies, ids),
    /// kept for the whole of a held stream, and after the client has its copy only the few
    /// headers that judging the stream's end can read still matter. A head that would shed
    /// less than [`SHED_AT_LEAST`] bytes is left as it is.
    pub fn keep_only(&mut self, keep: impl Fn(&[u8]) -> bool) {
        // One bit a line: a response head has at most `RESPONSE_HEADERS` (128) of them.
        if self.headers.len() > 128 || self.raw.len() <= SHED_AT_LEAST {
            return;
        }
        let mut kept = 0u128;
        // (The first line ends at its LF: httparse also takes a bare one.)
        let mut len = memchr::memchr(b'\n', &self.raw).map_or(0, |i| i + 1);
        let first_line = len;
        for (i, h) in self.headers.iter().enumerate() {
            if keep(&self.raw[h.name.range()]) {
                kept |= 1 << i;
                len += h.name.range().len() + 2 + h.value.range().len() + 2;
            }
        }
        if self.raw.len().saturating_sub(len + 2) < SHED_AT_LEAST {
            return;
        }
        let mut raw = Vec::with_capacity(len + 2);
        raw.extend_from_slice(&self.raw[..first_line]);
        let mut headers = Vec::with_capacity(kept.count_ones() as usize);
        let mut names = 0;
        let put = |raw: &mut Vec<u8>, bytes: &[u8]| {
            let start = raw.len() as u32;
            raw.extend_from_slice(bytes);
            Span {
                start,
                end: raw.len() as u32,
            }
        };
        for (i, h) in self.headers.iter().enumerate() {
            if kept & (1 << i) == 0 {
                continue;
            }
            let name = put(&mut raw, &self.raw[h.name.range()]);
            raw.extend_from_slice(b": ");
            let value = put(&mut raw, &self.raw[h.value.range()]);
            raw.extend_from_slice(b"\r\n");
            names |= 1 << h.slot;
            headers.push(HeaderRef {
                name,
                value,
                slot: h.slot,
            });
        }
        raw.extend_from_slice(b"\r\n");
        self.raw = Bytes::from(raw);
        self.headers = headers;
        self.names = names;
    }

    pub fn expects_continue(&self) -> bool {
        self.get("expect")
            .is_some_and(|v| v.trim_ascii().eq_ignore_ascii_case(b"100-continue"))
    }
}

mod parse;
pub use parse::{HeadLimits, parse_request, parse_response};
mod build;
pub use build::{FieldError, ResponseBuilder, check_field};

#[cfg(test)]
#[path = "head_tests.rs"]
mod tests;
