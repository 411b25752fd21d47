//! An answer's header block read into the HTTP/1.1 head the request path reads: its status,
//! its headers (those HTTP/2 forbids left out, names and values checked) and its framing.
//! Straight from HPACK into the head's bytes: no header map in between.

use crate::http::hpack::{Decoder, HpackError};
use bytes::{BufMut, Bytes, BytesMut};

/// What a header block was, for the stream it came on.
pub enum Answer {
    /// A 1xx head: the final one follows.
    Informational,
    /// The final head as HTTP/1.1 bytes; `chunked`: its body is framed as chunks (it has no
    /// length and does not end with the head).
    Final { head: Bytes, chunked: bool },
    /// Not a valid answer (RFC 9113 §8.1.1): the stream is reset.
    Malformed(&'static str),
}

/// Decode `block` (the whole header block) into an [`Answer`]. An error is the connection's:
/// its HPACK table is out of step.
pub fn decode(
    decoder: &mut Decoder,
    block: &[u8],
    max_list: usize,
    end_stream: bool,
) -> Result<Answer, HpackError> {
    let mut head = BytesMut::with_capacity(block.len() * 2 + 64);
    let mut status: Option<u16> = None;
    let mut has_length = false;
    let mut bad: Option<&'static str> = None;
    decoder.decode(block, max_list, |name, value| {
        if bad.is_some() {
            return Ok(());
        }
        if let Some(pseudo) = name.strip_prefix(b":") {
            bad = match (pseudo, status) {
                (b"status", None) if head.is_empty() => match parse_status(value) {
                    Some(code) => {
                        status = Some(code);
                        head.put_slice(b"HTTP/1.1 ");
                        head.put_slice(value);
                        head.put_slice(b" \r\n");
                        None
                    }
                    None => Some("a bad :status"),
                },
                _ => Some("a pseudo-header out of place"),
            };
            return Ok(());
        }
        if status.is_none() {
            bad = Some("a header before :status");
        } else if !valid_name(name) || !valid_value(value) {
            bad = Some("a header name or value HTTP does not allow");
        } else if !super::request::connection_specific(name) {
            has_length |= name == b"content-length";
            head.put_slice(name);
            head.put_slice(b": ");
            head.put_slice(value);
            head.put_slice(b"\r\n");
        }
        Ok(())
    })?;
    if let Some(why) = bad {
        return Ok(Answer::Malformed(why));
    }
    let Some(code) = status else {
        return Ok(Answer::Malformed("no :status"));
    };
    if (100..200).contains(&code) {
        if end_stream || code == 101 {
            return Ok(Answer::Malformed(
                "an informational head that ends the stream",
            ));
        }
        return Ok(Answer::Informational);
    }
    let chunked = !end_stream && !has_length;
    if chunked {
        head.put_slice(b"transfer-encoding: chunked\r\n");
    } else if end_stream && !has_length {
        head.put_slice(b"content-length: 0\r\n");
    }
    // Nothing of an HTTP/2 stream is pooled as an HTTP/1.1 connection.
    head.put_slice(b"connection: close\r\n\r\n");
    Ok(Answer::Final {
        head: head.freeze(),
        chunked,
    })
}

fn parse_status(v: &[u8]) -> Option<u16> {
    match v {
        [a @ b'1'..=b'9', b @ b'0'..=b'9', c @ b'0'..=b'9'] => {
            Some(u16::from(a - b'0') * 100 + u16::from(b - b'0') * 10 + u16::from(c - b'0'))
        }
        _ => None,
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

fn valid_name(n: &[u8]) -> bool {
    !n.is_empty() && n.iter().all(|&b| NAME_BYTE[usize::from(b)])
}

/// No NUL, CR or LF (RFC 9113 §8.2.1), which would end the HTTP/1.1 line it is written on:
/// one comparison per byte for the common case (every byte above CR).
fn valid_value(v: &[u8]) -> bool {
    v.iter()
        .all(|&b| b > b'\r' || (b != 0 && b != b'\n' && b != b'\r'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(fields: &[(&str, &str)]) -> Vec<u8> {
        let mut out = Vec::new();
        for (n, v) in fields {
            // Pseudo-headers as literals with literal names: the decoder takes any form.
            out.push(0);
            crate::http::hpack::write_int(&mut out, 0, 7, n.len());
            out.extend_from_slice(n.as_bytes());
            crate::http::hpack::write_int(&mut out, 0, 7, v.len());
            out.extend_from_slice(v.as_bytes());
        }
        out
    }

    fn final_head(a: Answer) -> (String, bool) {
        match a {
            Answer::Final { head, chunked } => (String::from_utf8_lossy(&head).into(), chunked),
            Answer::Informational => panic!("informational"),
            Answer::Malformed(w) => panic!("malformed: {w}"),
        }
    }

    #[test]
    fn an_answer_becomes_an_http1_head() {
        let mut d = Decoder::new(4096);
        let b = block(&[
            (":status", "429"),
            ("content-type", "application/json"),
            ("retry-after", "2"),
            ("connection", "x"),
        ]);
        let (head, chunked) = final_head(decode(&mut d, &b, 1 << 16, false).expect("decodes"));
        assert!(chunked, "no length, not ended: chunked");
        assert_eq!(
            head,
            "HTTP/1.1 429 \r\ncontent-type: application/json\r\nretry-after: 2\r\n\
             transfer-encoding: chunked\r\nconnection: close\r\n\r\n"
        );
        let b = block(&[(":status", "200"), ("content-length", "5")]);
        let (head, chunked) = final_head(decode(&mut d, &b, 1 << 16, false).expect("decodes"));
        assert!(!chunked);
        assert!(head.contains("content-length: 5\r\n"));
        let b = block(&[(":status", "204")]);
        let (head, _) = final_head(decode(&mut d, &b, 1 << 16, true).expect("decodes"));
        assert!(head.contains("content-length: 0\r\n"), "{head}");
    }

    #[test]
    fn informational_and_malformed_heads_are_told_apart() {
        let mut d = Decoder::new(4096);
        let is = |a: Answer, want: &str| match a {
            Answer::Informational => assert_eq!(want, "1xx"),
            Answer::Malformed(w) => assert_eq!(want, "bad", "{w}"),
            Answer::Final { .. } => assert_eq!(want, "final"),
        };
        let mut go = |f: &[(&str, &str)], end: bool| {
            decode(&mut d, &block(f), 1 << 16, end).expect("decodes")
        };
        is(go(&[(":status", "100")], false), "1xx");
        is(go(&[(":status", "103"), ("link", "</a>")], false), "1xx");
        is(go(&[(":status", "100")], true), "bad");
        is(go(&[("x", "1"), (":status", "200")], false), "bad");
        is(go(&[(":status", "200"), (":status", "200")], false), "bad");
        is(go(&[(":status", "20")], false), "bad");
        is(go(&[(":status", "200"), ("X-Upper", "1")], false), "bad");
        is(go(&[(":status", "200"), ("x", "a\r\nb")], false), "bad");
        is(go(&[("x", "1")], false), "bad");
        is(go(&[(":status", "200"), ("x", "1")], false), "final");
    }
}
