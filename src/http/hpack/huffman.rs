//! HPACK's Huffman code (RFC 7541 Appendix B). The code is canonical: codes of one length
//! are consecutive in symbol order, and each length's first code follows the last of the
//! length before. So the 257 code lengths are the whole table, and the codes, the encoder's
//! table and the decoder's are computed from them at compile time.

use super::HpackError;

/// Each symbol's code length in bits: the bytes 0..=255, then end-of-string (256).
#[rustfmt::skip]
const LENGTHS: [u8; 257] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28,
    28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28,
    6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6,
    5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10,
    13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
    7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6,
    15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5,
    6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28,
    20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23,
    24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24,
    22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23,
    21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23,
    26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25,
    19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27,
    20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23,
    26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26,
    30,
];

const EOS: u16 = 256;
/// The longest code.
const MAX_LEN: usize = 30;

/// Each symbol's code, right-aligned, with its length.
const CODES: [(u32, u8); 257] = codes();

/// Per code length: the first code of that length, and the index in [`SORTED`] of its symbol.
struct Canonical {
    first: [u32; MAX_LEN + 1],
    count: [u16; MAX_LEN + 1],
    at: [u16; MAX_LEN + 1],
    /// Symbols by (length, symbol).
    sorted: [u16; 257],
}

const CANONICAL: Canonical = canonical();

/// Codes of at most 8 bits, found by the next 8 bits of input: (symbol, length), length 0
/// where the next 8 bits start a longer code.
const FAST: [(u8, u8); 256] = fast();

const fn canonical() -> Canonical {
    let mut c = Canonical {
        first: [0; MAX_LEN + 1],
        count: [0; MAX_LEN + 1],
        at: [0; MAX_LEN + 1],
        sorted: [0; 257],
    };
    let mut n = 0;
    let mut code: u32 = 0;
    let mut len = 1;
    while len <= MAX_LEN {
        c.first[len] = code;
        c.at[len] = n as u16;
        let mut sym = 0;
        while sym < 257 {
            if LENGTHS[sym] as usize == len {
                c.sorted[n] = sym as u16;
                n += 1;
                c.count[len] += 1;
                code += 1;
            }
            sym += 1;
        }
        code <<= 1;
        len += 1;
    }
    c
}

const fn codes() -> [(u32, u8); 257] {
    let c = canonical();
    let mut out = [(0u32, 0u8); 257];
    let mut len = 1;
    while len <= MAX_LEN {
        let mut i = 0;
        while i < c.count[len] as usize {
            let sym = c.sorted[c.at[len] as usize + i] as usize;
            out[sym] = (c.first[len] + i as u32, len as u8);
            i += 1;
        }
        len += 1;
    }
    out
}

const fn fast() -> [(u8, u8); 256] {
    let codes = codes();
    let mut t = [(0u8, 0u8); 256];
    let mut sym = 0;
    while sym < 256 {
        let (code, len) = codes[sym];
        if len <= 8 {
            let shift = 8 - len as u32;
            let mut low = 0;
            while low < (1u32 << shift) {
                t[((code << shift) | low) as usize] = (sym as u8, len);
                low += 1;
            }
        }
        sym += 1;
    }
    t
}

/// The length in bytes of `s` Huffman-coded.
pub fn encoded_len(s: &[u8]) -> usize {
    let bits: usize = s
        .iter()
        .map(|&b| usize::from(CODES[usize::from(b)].1))
        .sum();
    bits.div_ceil(8)
}

/// Append `s` Huffman-coded to `out`, padded with ones to a whole byte.
pub fn encode(s: &[u8], out: &mut Vec<u8>) {
    let mut acc: u64 = 0;
    let mut bits: u32 = 0;
    for &b in s {
        let (code, len) = CODES[usize::from(b)];
        acc = (acc << len) | u64::from(code);
        bits += u32::from(len);
        while bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    if bits > 0 {
        let pad = 8 - bits;
        out.push(((acc << pad) | ((1 << pad) - 1)) as u8);
    }
}

/// Append the Huffman-coded `src`, decoded, to `out`. Fails on end-of-string inside the
/// string, padding longer than 7 bits, or padding that is not the code's ones (RFC 7541
/// §5.2).
pub fn decode(src: &[u8], out: &mut Vec<u8>) -> Result<(), HpackError> {
    // The next bits, most significant first, aligned to bit 63.
    let mut acc: u64 = 0;
    let mut bits: u32 = 0;
    let mut rest = src;
    loop {
        while bits <= 56
            && let Some((&b, tail)) = rest.split_first()
        {
            acc |= u64::from(b) << (56 - bits);
            bits += 8;
            rest = tail;
        }
        if bits == 0 {
            return Ok(());
        }
        let (sym, len) = FAST[(acc >> 56) as usize];
        if len != 0 && u32::from(len) <= bits {
            out.push(sym);
            acc <<= len;
            bits -= u32::from(len);
            continue;
        }
        match long_code(acc, bits) {
            Some((EOS, _)) => return Err(HpackError::Huffman),
            Some((sym, len)) => {
                out.push(sym as u8);
                acc <<= len;
                bits -= len;
            }
            // What is left is no whole code: it must be padding (RFC 7541 §5.2).
            None if bits < 8 && acc >> (64 - bits) == (1 << bits) - 1 => return Ok(()),
            None => return Err(HpackError::Huffman),
        }
    }
}

/// The code at the top of `acc` (of `bits` valid bits), by canonical lengths: a code of
/// length `len` is `first[len] + i` for the `i`th symbol of that length.
fn long_code(acc: u64, bits: u32) -> Option<(u16, u32)> {
    let c = &CANONICAL;
    for len in 5..=MAX_LEN.min(bits as usize) {
        let code = (acc >> (64 - len)) as u32;
        let i = code.wrapping_sub(c.first[len]);
        if code >= c.first[len] && i < u32::from(c.count[len]) {
            return Some((c.sorted[usize::from(c.at[len]) + i as usize], len as u32));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::hpack::hex;

    #[test]
    fn the_codes_are_the_rfcs() {
        // Spot checks against RFC 7541 Appendix B.
        assert_eq!(CODES[0], (0x1ff8, 13));
        assert_eq!(CODES[b'0' as usize], (0x0, 5));
        assert_eq!(CODES[b' ' as usize], (0x14, 6));
        assert_eq!(CODES[b'a' as usize], (0x3, 5));
        assert_eq!(CODES[255], (0x3ffffee, 26));
        assert_eq!(CODES[256], (0x3fffffff, 30));
        // Every code fits its length, and the 30 bits are all used (a complete code).
        let kraft: u64 = CODES.iter().map(|&(_, l)| 1u64 << (30 - l)).sum();
        assert_eq!(kraft, 1 << 30);
    }

    #[test]
    fn the_rfcs_examples_encode_and_decode() {
        // RFC 7541 C.4 and C.6.
        for (text, coded) in [
            ("www.example.com", "f1e3 c2e5 f23a 6ba0 ab90 f4ff"),
            ("no-cache", "a8eb 1064 9cbf"),
            ("custom-key", "25a8 49e9 5ba9 7d7f"),
            ("custom-value", "25a8 49e9 5bb8 e8b4 bf"),
            ("302", "6402"),
            ("private", "aec3 771a 4b"),
            (
                "Mon, 21 Oct 2013 20:13:21 GMT",
                "d07a be94 1054 d444 a820 0595 040b 8166 e082 a62d 1bff",
            ),
            (
                "https://www.example.com",
                "9d29 ad17 1863 c78f 0b97 c8e9 ae82 ae43 d3",
            ),
        ] {
            let mut out = Vec::new();
            encode(text.as_bytes(), &mut out);
            assert_eq!(out, hex(coded), "{text}");
            assert_eq!(encoded_len(text.as_bytes()), out.len());
            let mut back = Vec::new();
            decode(&out, &mut back).expect("decodes");
            assert_eq!(back, text.as_bytes());
        }
    }

    #[test]
    fn every_byte_round_trips() {
        let all: Vec<u8> = (0..=255u8).chain((0..=255u8).rev()).collect();
        for len in [0, 1, 2, 7, 100, all.len()] {
            let mut out = Vec::new();
            encode(&all[..len], &mut out);
            let mut back = Vec::new();
            decode(&out, &mut back).expect("decodes");
            assert_eq!(back, &all[..len]);
        }
    }

    #[test]
    fn bad_padding_and_end_of_string_are_refused() {
        let mut out = Vec::new();
        // "a" is 00011: padded with 111 it is 0x1f; with zeros, refused.
        assert!(decode(&[0x1f], &mut out).is_ok());
        assert!(decode(&[0x18], &mut out).is_err(), "padding of zeros");
        // A whole byte of ones after a code: padding longer than 7 bits.
        assert!(decode(&[0x1f, 0xff], &mut out).is_err());
        // End-of-string (30 ones) inside the string.
        assert!(decode(&[0xff, 0xff, 0xff, 0xfc], &mut out).is_err());
    }
}
