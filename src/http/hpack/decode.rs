//! The decoder: one per connection (its dynamic table follows the peer's encoder, block by
//! block, so blocks must be decoded in the order they came, each whole).

use super::table::{Dynamic, STATIC};
use super::{HpackError, huffman, read_int};

/// What each field counts toward a header list's size besides its bytes (RFC 9113 §6.5.2).
const FIELD_OVERHEAD: usize = 32;

#[derive(Debug)]
pub struct Decoder {
    table: Dynamic,
    /// The largest table the peer may ask for: our `SETTINGS_HEADER_TABLE_SIZE`.
    allowed: usize,
    /// A literal's name and value, decoded (kept: a warm decoder allocates nothing per field).
    scratch: Vec<u8>,
}

impl Decoder {
    /// A decoder whose table may grow to `allowed` bytes (4,096 unless our SETTINGS said
    /// otherwise).
    pub fn new(allowed: usize) -> Decoder {
        Decoder {
            table: Dynamic::new(allowed),
            allowed,
            scratch: Vec::new(),
        }
    }

    /// Decode one whole header block, giving each field to `field` as (name, value), in
    /// order. `max_list`: the most the fields may add up to (names, values and 32 bytes each);
    /// past it the block is still decoded to its end, for the table, its fields not given, and
    /// the result is [`HpackError::TooLarge`]. After any other error the table is out of step
    /// with the peer: the connection must end.
    pub fn decode(
        &mut self,
        mut block: &[u8],
        max_list: usize,
        mut field: impl FnMut(&[u8], &[u8]) -> Result<(), HpackError>,
    ) -> Result<(), HpackError> {
        let mut list = 0usize;
        let mut first = true;
        let mut over = false;
        while let Some(&b) = block.first() {
            let used = if b & 0x80 != 0 {
                let (i, used) = read_int(block, 7)?;
                let (name, value) = entry(&self.table, i)?;
                list += name.len() + value.len() + FIELD_OVERHEAD;
                over |= list > max_list;
                if !over {
                    field(name, value)?;
                }
                used
            } else if b & 0xe0 == 0x20 {
                // A size update: only before the block's first field (RFC 7541 §4.2).
                let (size, used) = read_int(block, 5)?;
                if !first || size > self.allowed {
                    return Err(HpackError::SizeUpdate);
                }
                self.table.resize(size);
                block = &block[used..];
                continue;
            } else {
                let (prefix, index) = if b & 0xc0 == 0x40 {
                    (6, true)
                } else {
                    // 0001: never indexed, 0000: without indexing; to us they read the same.
                    (4, false)
                };
                let (used, name_len) = self.literal(block, prefix)?;
                let (name, value) = self.scratch.split_at(name_len);
                list += name.len() + value.len() + FIELD_OVERHEAD;
                over |= list > max_list;
                if !over {
                    field(name, value)?;
                }
                if index {
                    self.table.insert(name, value);
                }
                used
            };
            first = false;
            block = &block[used..];
        }
        if over {
            return Err(HpackError::TooLarge);
        }
        Ok(())
    }

    /// A literal field into `scratch` (its name, then its value): the bytes it took and the
    /// name's length.
    fn literal(&mut self, block: &[u8], prefix: u32) -> Result<(usize, usize), HpackError> {
        let (i, mut used) = read_int(block, prefix)?;
        self.scratch.clear();
        if i == 0 {
            used += self.string(&block[used..])?;
        } else {
            let (name, _) = entry(&self.table, i)?;
            self.scratch.extend_from_slice(name);
        }
        let name_len = self.scratch.len();
        used += self.string(&block[used..])?;
        Ok((used, name_len))
    }

    /// A string literal (RFC 7541 §5.2) appended to `scratch`: the bytes it took.
    fn string(&mut self, src: &[u8]) -> Result<usize, HpackError> {
        let huffman = src.first().ok_or(HpackError::Truncated)? & 0x80 != 0;
        let (len, used) = read_int(src, 7)?;
        let bytes = src.get(used..used + len).ok_or(HpackError::Truncated)?;
        if huffman {
            huffman::decode(bytes, &mut self.scratch)?;
        } else {
            self.scratch.extend_from_slice(bytes);
        }
        Ok(used + len)
    }
}

/// Entry `i` of the static table then the dynamic one (RFC 7541 §2.3.3).
fn entry(table: &Dynamic, i: usize) -> Result<(&[u8], &[u8]), HpackError> {
    match i {
        0 => Err(HpackError::Index),
        1..=61 => {
            let (n, v) = STATIC[i - 1];
            Ok((n.as_bytes(), v.as_bytes()))
        }
        _ => table.get(i - 62).ok_or(HpackError::Index),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::hpack::hex;

    fn fields(d: &mut Decoder, block: &str) -> Result<Vec<(String, String)>, HpackError> {
        let mut out = Vec::new();
        d.decode(&hex(block), 1 << 20, |n, v| {
            out.push((
                String::from_utf8_lossy(n).into_owned(),
                String::from_utf8_lossy(v).into_owned(),
            ));
            Ok(())
        })?;
        Ok(out)
    }

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_rfcs_requests_decode_with_their_table() {
        // RFC 7541 C.4: three requests with Huffman coding on one connection.
        let mut d = Decoder::new(4096);
        let first = fields(&mut d, "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff").expect("C.4.1");
        assert_eq!(
            first,
            pairs(&[
                (":method", "GET"),
                (":scheme", "http"),
                (":path", "/"),
                (":authority", "www.example.com")
            ])
        );
        assert_eq!(d.table.size(), 57);
        let second = fields(&mut d, "8286 84be 5886 a8eb 1064 9cbf").expect("C.4.2");
        assert_eq!(second[3], (":authority".into(), "www.example.com".into()));
        assert_eq!(second[4], ("cache-control".into(), "no-cache".into()));
        let third = fields(
            &mut d,
            "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
        )
        .expect("C.4.3");
        assert_eq!(third[1], (":scheme".into(), "https".into()));
        assert_eq!(third[2], (":path".into(), "/index.html".into()));
        assert_eq!(third[4], ("custom-key".into(), "custom-value".into()));
        assert_eq!((d.table.len(), d.table.size()), (3, 164));
    }

    #[test]
    fn the_rfcs_responses_evict_from_a_small_table() {
        // RFC 7541 C.6: responses with Huffman coding, a 256-byte table, entries evicted.
        let mut d = Decoder::new(256);
        let first = fields(
            &mut d,
            "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6
             2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
        )
        .expect("C.6.1");
        assert_eq!(
            first,
            pairs(&[
                (":status", "302"),
                ("cache-control", "private"),
                ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
                ("location", "https://www.example.com")
            ])
        );
        assert_eq!(d.table.size(), 222);
        let second = fields(&mut d, "4883 640e ff c1 c0 bf").expect("C.6.2");
        assert_eq!(second[0], (":status".into(), "307".into()));
        assert_eq!(
            second[3],
            ("location".into(), "https://www.example.com".into())
        );
        assert_eq!(d.table.size(), 222);
        let third = fields(
            &mut d,
            "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab
             77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f
             9587 3160 65c0 03ed 4ee5 b106 3d50 07",
        )
        .expect("C.6.3");
        assert_eq!(third[0], (":status".into(), "200".into()));
        assert_eq!(
            third[2],
            ("date".into(), "Mon, 21 Oct 2013 20:13:22 GMT".into())
        );
        assert_eq!(third[4], ("content-encoding".into(), "gzip".into()));
        assert_eq!(
            third[5],
            (
                "set-cookie".into(),
                "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1".into()
            )
        );
        assert_eq!((d.table.len(), d.table.size()), (3, 215));
    }

    #[test]
    fn size_updates_hold_to_their_place_and_limit() {
        let mut d = Decoder::new(4096);
        // A size update to 0 then an indexed field: allowed, and the table is emptied.
        assert!(fields(&mut d, "20 88").is_ok());
        // Above what we allowed, or after a field: the connection's error.
        assert_eq!(fields(&mut d, "3fe2 1f"), Err(HpackError::SizeUpdate));
        assert_eq!(fields(&mut d, "88 20"), Err(HpackError::SizeUpdate));
    }

    #[test]
    fn bad_blocks_are_errors_not_panics() {
        let mut d = Decoder::new(4096);
        assert_eq!(fields(&mut d, "80"), Err(HpackError::Index), "index 0");
        assert_eq!(
            fields(&mut d, "be"),
            Err(HpackError::Index),
            "no dynamic entry"
        );
        assert_eq!(fields(&mut d, "0f"), Err(HpackError::Truncated));
        assert_eq!(fields(&mut d, "40 05 6162"), Err(HpackError::Truncated));
        assert_eq!(fields(&mut d, "40 81 18 00"), Err(HpackError::Huffman));
        let mut n = 0;
        let r = d.decode(&hex("88 88 88"), 90, |_, _| {
            n += 1;
            Ok(())
        });
        assert_eq!((r, n), (Err(HpackError::TooLarge), 2), "the list limit");
        // Past the limit the block is still decoded, for the table: what it added is there for
        // the next block.
        let mut d = Decoder::new(4096);
        let mut got = Vec::new();
        let r = d.decode(&hex("88 40 01 78 01 79"), 50, |n, v| {
            got.push((n.to_vec(), v.to_vec()));
            Ok(())
        });
        assert_eq!(r, Err(HpackError::TooLarge));
        assert_eq!(got, [(b":status".to_vec(), b"200".to_vec())]);
        assert_eq!(fields(&mut d, "be"), Ok(vec![("x".into(), "y".into())]));
        // Random blocks (a fixed xorshift, the same on every run): errors, never a panic.
        let mut rng = crate::test_rng::XorShift(0x2545_f491_4f6c_dd1d);
        for _ in 0..5_000 {
            let mut block = Vec::new();
            for _ in 0..(rng.0 % 40) {
                block.push(rng.next_u64() as u8);
            }
            let _ = Decoder::new(256).decode(&block, 1 << 20, |_, _| Ok(()));
        }
        // Every prefix of a real block is an error or a shorter list, never a panic.
        let block = hex("4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005");
        for cut in 0..block.len() {
            let _ = Decoder::new(256).decode(&block[..cut], 1 << 20, |_, _| Ok(()));
        }
    }
}
