//! An answer's header block read into the head the request path reads: its status, its
//! headers (those HTTP/2 forbids left out, names and values checked) and its framing.
//! Straight from HPACK into the head's fields (`http::head::ResponseBuilder`): no header map
//! in between, and no HTTP/1.1 bytes parsed back.

use crate::http::head::{Head, ResponseBuilder, check_field};
use crate::http::hpack::{Decoder, HpackError};

/// What a header block was, for the stream it came on.
pub enum Answer {
    /// A 1xx head: the final one follows.
    Informational,
    /// The final head; `chunked`: its body is framed as chunks for the reader (it has no
    /// length and does not end with the head). Its bytes are the HTTP/1.1 head it spells.
    Final { head: Head, chunked: bool },
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
    let mut head: Option<ResponseBuilder> = None;
    let mut has_length = false;
    let mut bad: Option<&'static str> = None;
    let decoded = decoder.decode(block, max_list, |name, value| {
        if bad.is_some() {
            return Ok(());
        }
        if let Some(pseudo) = name.strip_prefix(b":") {
            bad = match (pseudo, &head) {
                (b"status", None) => match parse_status(value) {
                    Some(code) => {
                        head = Some(ResponseBuilder::new(code, block.len() * 2 + 64));
                        None
                    }
                    None => Some("a bad :status"),
                },
                _ => Some("a pseudo-header out of place"),
            };
            return Ok(());
        }
        let Some(head) = head.as_mut() else {
            bad = Some("a header before :status");
            return Ok(());
        };
        if super::request::connection_specific(name) {
            // Checked all the same: a field HTTP does not allow is malformed wherever it is.
            if check_field(name, value).is_err() {
                bad = Some("a header name or value HTTP does not allow");
            }
            return Ok(());
        }
        has_length |= name == b"content-length";
        if head.field(name, value).is_err() {
            bad = Some("a header name or value HTTP does not allow, or too many");
        }
        Ok(())
    });
    match decoded {
        // Decoded whole for the table: only this answer is lost (RFC 9113 §10.5.1).
        Err(HpackError::TooLarge) => return Ok(Answer::Malformed("a header list over the limit")),
        other => other?,
    }
    if let Some(why) = bad {
        return Ok(Answer::Malformed(why));
    }
    let Some(head) = head else {
        return Ok(Answer::Malformed("no :status"));
    };
    if (100..200).contains(&head.status()) {
        if end_stream || head.status() == 101 {
            return Ok(Answer::Malformed(
                "an informational head that ends the stream",
            ));
        }
        return Ok(Answer::Informational);
    }
    let chunked = !end_stream && !has_length;
    Ok(match framed(head, chunked, end_stream && !has_length) {
        Some(head) => Answer::Final { head, chunked },
        None => Answer::Malformed("a bad content-length, or too many headers"),
    })
}

/// The final head with the fields its HTTP/1.1 bytes owe for the HTTP/2 answer's framing: a
/// chunked body, or an empty one that ended with the head. Nothing of an HTTP/2 stream is
/// pooled as an HTTP/1.1 connection: `connection: close`. `None`: its own length was bad, or
/// these fields went over the head's count.
fn framed(mut head: ResponseBuilder, chunked: bool, empty: bool) -> Option<Head> {
    if chunked {
        head.field(b"transfer-encoding", b"chunked").ok()?;
    } else if empty {
        head.field(b"content-length", b"0").ok()?;
    }
    head.field(b"connection", b"close").ok()?;
    head.finish().ok()
}

fn parse_status(v: &[u8]) -> Option<u16> {
    match v {
        [a @ b'1'..=b'9', b @ b'0'..=b'9', c @ b'0'..=b'9'] => {
            Some(u16::from(a - b'0') * 100 + u16::from(b - b'0') * 10 + u16::from(c - b'0'))
        }
        _ => None,
    }
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
            Answer::Final { head, chunked } => {
                (String::from_utf8_lossy(head.raw()).into(), chunked)
            }
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
    fn the_head_is_parsed_as_its_bytes_would_be() {
        use crate::http::head::{Framing, HeadLimits, parse_response};
        let mut d = Decoder::new(4096);
        let b = block(&[(":status", "429"), ("retry-after", "2"), ("x-a", "1")]);
        let Ok(Answer::Final { head, chunked }) = decode(&mut d, &b, 1 << 16, false) else {
            panic!("a final head");
        };
        assert!(chunked);
        let (parsed, _) = parse_response(head.raw(), HeadLimits::default(), false)
            .expect("parses")
            .expect("whole");
        assert_eq!((head.status, head.framing), (429, Framing::Chunked));
        assert_eq!((parsed.status, parsed.framing), (429, Framing::Chunked));
        assert!(
            !head.keep_alive && !parsed.keep_alive,
            "never pooled as HTTP/1.1"
        );
        for name in ["retry-after", "x-a", "transfer-encoding", "connection"] {
            assert!(head.get(name).is_some(), "{name}");
            assert_eq!(head.get(name), parsed.get(name), "{name}");
        }
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
        // Framing the parser would refuse is refused here too: the request path never parses it.
        is(
            go(&[(":status", "200"), ("content-length", "x")], false),
            "bad",
        );
        is(
            go(
                &[
                    (":status", "200"),
                    ("content-length", "1"),
                    ("content-length", "2"),
                ],
                true,
            ),
            "bad",
        );
        is(
            go(&[(":status", "200"), ("connection", "a\nb")], false),
            "bad",
        );
        is(go(&[(":status", "200"), ("x", "1")], false), "final");
    }
}
