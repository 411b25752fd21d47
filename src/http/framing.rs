//! Where a message's body ends: the Content-Length / Transfer-Encoding rules (RFC 9112 6),
//! strict about every shape that could be read two ways, and whether the connection stays open.

use super::head::{Framing, Head, HeadError};
use super::names::same_name;

pub(super) fn request_framing(head: &Head) -> Result<Framing, HeadError> {
    // HTTP/1.0 has no transfer codings: a 1.0 request that names one is faulty framing and is
    // answered with 400 and a closed connection (RFC 9112 6.1).
    if head.version_minor == 0 && head.get("transfer-encoding").is_some() {
        return Err(HeadError::AmbiguousFraming(
            "Transfer-Encoding in an HTTP/1.0 request",
        ));
    }
    Ok(match body_framing(head)? {
        Some(Framing::Length(0)) | None => Framing::Empty,
        Some(f) => f,
    })
}

/// Content-Length / Transfer-Encoding rules shared by requests and responses.
pub(super) fn body_framing(head: &Head) -> Result<Option<Framing>, HeadError> {
    let mut te: Option<&[u8]> = None;
    let mut te_count = 0;
    let mut cl: Option<u64> = None;
    for (name, value) in head.raw_iter() {
        // Lengths first: every head passes through here, and most names are neither.
        if name.len() == 17 && same_name(name, b"transfer-encoding") {
            te_count += 1;
            te = Some(value);
        } else if name.len() == 14 && same_name(name, b"content-length") {
            let v = parse_content_length(value)?;
            if cl.is_some_and(|old| old != v) {
                return Err(HeadError::AmbiguousFraming(
                    "conflicting Content-Length values",
                ));
            }
            cl = Some(v);
        }
    }
    if let Some(te) = te {
        if cl.is_some() {
            return Err(HeadError::AmbiguousFraming(
                "both Content-Length and Transfer-Encoding",
            ));
        }
        if te_count > 1 || !te.trim_ascii().eq_ignore_ascii_case(b"chunked") {
            return Err(HeadError::UnsupportedTransferCoding);
        }
        return Ok(Some(Framing::Chunked));
    }
    Ok(cl.map(Framing::Length))
}

fn parse_content_length(v: &[u8]) -> Result<u64, HeadError> {
    // A list of identical values ("5, 5") is tolerated; anything but digits is not.
    // The usual case, one plain number, without the list walk.
    if !v.is_empty() && v.len() <= 18 && v.iter().all(u8::is_ascii_digit) {
        return Ok(v.iter().fold(0u64, |acc, d| acc * 10 + u64::from(d - b'0')));
    }
    let mut out: Option<u64> = None;
    for part in v.split(|b| *b == b',') {
        let p = part.trim_ascii();
        if p.is_empty() || p.len() > 18 || !p.iter().all(u8::is_ascii_digit) {
            return Err(HeadError::AmbiguousFraming("invalid Content-Length"));
        }
        let n: u64 = p.iter().fold(0u64, |acc, d| acc * 10 + u64::from(d - b'0'));
        if out.is_some_and(|o| o != n) {
            return Err(HeadError::AmbiguousFraming(
                "conflicting Content-Length values",
            ));
        }
        out = Some(n);
    }
    out.ok_or(HeadError::AmbiguousFraming("invalid Content-Length"))
}

pub(super) fn keep_alive(head: &Head) -> bool {
    if head.has_token("connection", "close") {
        return false;
    }
    head.version_minor >= 1 || head.has_token("connection", "keep-alive")
}
