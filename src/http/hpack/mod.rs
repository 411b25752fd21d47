//! HPACK (RFC 7541), the header compression of HTTP/2: a decoder for the header blocks a
//! provider answers with (every representation, Huffman strings, the dynamic table and its size
//! updates), and an encoder for the requests Ringside sends.
//!
//! The encoder never adds to the peer's table: every field is a literal (credentials and
//! per-request values "never indexed", RFC 7541 §7.1.3), names by their static index where
//! the static table has them, strings raw. A request's header block is a few hundred bytes
//! beside its body, and raw literals cost a copy where Huffman coding costs a table walk per
//! byte.

pub mod decode;
pub mod encode;
pub mod huffman;
pub mod table;

pub use decode::Decoder;

/// Why a header block could not be decoded: each is a connection error of type
/// `COMPRESSION_ERROR` in HTTP/2 (RFC 9113 §4.3), the connection's table being out of step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HpackError {
    /// The block ends inside a representation.
    Truncated,
    /// An integer beyond what a header block can mean.
    Overflow,
    /// An index that names no entry.
    Index,
    /// A Huffman string with end-of-string inside it or bad padding.
    Huffman,
    /// A table size update above what was allowed, or after the block's first field.
    SizeUpdate,
    /// The fields add up to more than the limit. The only error after which the table is
    /// still in step with the peer's: the block was decoded whole, the fields past the limit
    /// not given to the caller, so one answer too large need not end its connection.
    TooLarge,
    /// The caller refused a field (a name or value HTTP does not allow).
    Field,
}

impl std::fmt::Display for HpackError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            HpackError::Truncated => "a header block cut short",
            HpackError::Overflow => "an integer too large in a header block",
            HpackError::Index => "a header table index out of range",
            HpackError::Huffman => "a malformed Huffman string",
            HpackError::SizeUpdate => "a header table size update not allowed",
            HpackError::TooLarge => "a header list over the limit",
            HpackError::Field => "a header field refused",
        })
    }
}

impl std::error::Error for HpackError {}

/// An integer with an `n`-bit prefix (RFC 7541 §5.1) from `src`: its value and the bytes it
/// took. Values past 2^28 are refused: no header block holds one.
pub fn read_int(src: &[u8], n: u32) -> Result<(usize, usize), HpackError> {
    let mask = (1usize << n) - 1;
    let first = *src.first().ok_or(HpackError::Truncated)?;
    let mut value = usize::from(first) & mask;
    if value < mask {
        return Ok((value, 1));
    }
    let mut shift = 0;
    for (i, &b) in src.iter().enumerate().skip(1) {
        value += usize::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok((value, i + 1));
        }
        shift += 7;
        if shift > 21 {
            return Err(HpackError::Overflow);
        }
    }
    Err(HpackError::Truncated)
}

/// Append `value` with an `n`-bit prefix, the prefix's other bits `flags`. (Inlined: two per
/// field of every request, most of them one byte.)
#[inline]
pub fn write_int(out: &mut Vec<u8>, flags: u8, n: u32, mut value: usize) {
    let mask = (1usize << n) - 1;
    if value < mask {
        out.push(flags | value as u8);
        return;
    }
    out.push(flags | mask as u8);
    value -= mask;
    while value >= 0x80 {
        out.push((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Bytes from hex digits, spaces ignored: the RFC's examples as written (tests).
#[cfg(test)]
pub(crate) fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_follow_the_rfcs_examples() {
        // RFC 7541 C.1: 10 in a 5-bit prefix, 1337 in a 5-bit prefix, 42 in 8 bits.
        for (value, n, bytes) in [
            (10, 5, vec![0x0a]),
            (1337, 5, vec![0x1f, 0x9a, 0x0a]),
            (42, 8, vec![0x2a]),
            (31, 5, vec![0x1f, 0x00]),
        ] {
            let mut out = Vec::new();
            write_int(&mut out, 0, n, value);
            assert_eq!(out, bytes);
            assert_eq!(read_int(&bytes, n), Ok((value, bytes.len())));
        }
        assert_eq!(read_int(&[0x1f, 0x9a], 5), Err(HpackError::Truncated));
        assert_eq!(read_int(&[], 5), Err(HpackError::Truncated));
        assert_eq!(
            read_int(&[0x1f, 0xff, 0xff, 0xff, 0xff, 0x0f], 5),
            Err(HpackError::Overflow)
        );
    }
}
