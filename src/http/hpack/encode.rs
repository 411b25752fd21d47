//! The encoder for the requests Ringside sends: stateless (nothing is added to the peer's
//! table, so nothing needs to be remembered or evicted), every field a literal whose name is
//! a static-table index where it can be, strings raw.

use super::table::STATIC;
use super::write_int;

/// How the peer may keep a literal field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Indexing {
    /// It may not index it; an intermediary may (RFC 7541 §6.2.2).
    Without,
    /// Never, nor any intermediary after it: credentials and values unique to one request
    /// (RFC 7541 §6.2.3, §7.1.3).
    Never,
}

/// `:method`.
pub fn method(out: &mut Vec<u8>, method: &[u8]) {
    match method {
        b"GET" => out.push(0x82),
        b"POST" => out.push(0x83),
        m => literal_indexed_name(out, 2, m, Indexing::Without),
    }
}

/// `:scheme`.
pub fn scheme(out: &mut Vec<u8>, https: bool) {
    out.push(if https { 0x87 } else { 0x86 });
}

/// `:path`.
pub fn path(out: &mut Vec<u8>, path: &[u8]) {
    if path == b"/" {
        out.push(0x84);
    } else {
        literal_indexed_name(out, 4, path, Indexing::Without);
    }
}

/// `:authority`.
pub fn authority(out: &mut Vec<u8>, authority: &[u8]) {
    literal_indexed_name(out, 1, authority, Indexing::Without);
}

/// A regular header field. `name` is written lower-case, as HTTP/2 requires (RFC 9113
/// §8.2.1); the caller has left out the fields HTTP/2 forbids.
pub fn field(out: &mut Vec<u8>, name: &[u8], value: &[u8], indexing: Indexing) {
    let mut short = [0; 64];
    let mut long = Vec::new();
    lower_field(out, lowered(name, &mut short, &mut long), value, indexing);
}

/// [`field`] for a name already lower-case ([`lowered`]): compared and copied as it is.
pub fn lower_field(out: &mut Vec<u8>, name: &[u8], value: &[u8], indexing: Indexing) {
    debug_assert!(
        !name.iter().any(u8::is_ascii_uppercase),
        "a lower-case name"
    );
    if let Some(i) = static_name(name) {
        literal_indexed_name(out, i, value, indexing);
        return;
    }
    out.push(flags(indexing));
    write_int(out, 0, 7, name.len());
    out.extend_from_slice(name);
    string(out, value);
}

/// `name` lower-case: itself when it is (ours are, and most clients'), else lowered into
/// `short` (or `long`, past 64 bytes). Lowered once, a name is then compared with plain
/// equality: comparing each byte case-folded, against the tables and in every check, and
/// lowering it a byte at a time cost about 2,000 instructions a request (callgrind).
pub fn lowered<'a>(name: &'a [u8], short: &'a mut [u8; 64], long: &'a mut Vec<u8>) -> &'a [u8] {
    if !name.iter().any(u8::is_ascii_uppercase) {
        return name;
    }
    let to = match short.get_mut(..name.len()) {
        Some(to) => to,
        None => {
            long.clear();
            long.resize(name.len(), 0);
            &mut long[..]
        }
    };
    to.copy_from_slice(name);
    to.make_ascii_lowercase();
    to
}

fn flags(indexing: Indexing) -> u8 {
    match indexing {
        Indexing::Without => 0x00,
        Indexing::Never => 0x10,
    }
}

fn literal_indexed_name(out: &mut Vec<u8>, index: usize, value: &[u8], indexing: Indexing) {
    write_int(out, flags(indexing), 4, index);
    string(out, value);
}

fn string(out: &mut Vec<u8>, s: &[u8]) {
    write_int(out, 0, 7, s.len());
    out.extend_from_slice(s);
}

/// The static table's index for a regular header's name (lower-case), if it has one: only the
/// names of its length are compared (at most six), as every header of every request asks.
fn static_name(name: &[u8]) -> Option<usize> {
    let bucket = BY_LENGTH.get(name.len())?;
    bucket
        .iter()
        .take_while(|&&i| i != 0)
        .map(|&i| usize::from(i))
        // The first bytes first: most candidates differ there, and a comparison of whole
        // names is a call to memcmp.
        .find(|&i| {
            let s = STATIC[i - 1].0.as_bytes();
            s.first() == name.first() && s == name
        })
}

/// The longest regular name in the static table (`access-control-allow-origin`).
const LONGEST: usize = 27;

/// The static table's regular names (index 15 on) by length: indices, 0 ending a bucket.
const BY_LENGTH: [[u8; 8]; LONGEST + 1] = {
    let mut t = [[0u8; 8]; LONGEST + 1];
    let mut i = 15;
    while i <= STATIC.len() {
        let len = STATIC[i - 1].0.len();
        let mut k = 0;
        while t[len][k] != 0 {
            k += 1;
        }
        t[len][k] = i as u8;
        i += 1;
    }
    t
};

#[cfg(test)]
mod tests {
    use super::super::Decoder;
    use super::*;

    #[test]
    fn every_regular_name_of_the_static_table_is_found_by_its_length() {
        for (i, (name, _)) in STATIC.iter().enumerate().skip(14) {
            assert_eq!(static_name(name.as_bytes()), Some(i + 1), "{name}");
            let mut short = [0; 64];
            let mut long = Vec::new();
            let upper = name.to_ascii_uppercase();
            let lower = lowered(upper.as_bytes(), &mut short, &mut long);
            assert_eq!(static_name(lower), Some(i + 1), "{upper}");
        }
        for name in [
            ":path",
            ":status",
            "x-api-key",
            "",
            "access-control-allow-originx",
        ] {
            assert_eq!(static_name(name.as_bytes()), None, "{name}");
        }
    }

    #[test]
    fn a_request_reads_back_through_the_decoder() {
        let mut out = Vec::new();
        method(&mut out, b"POST");
        scheme(&mut out, true);
        path(&mut out, b"/v1/chat/completions");
        authority(&mut out, b"api.example.com");
        field(
            &mut out,
            b"Content-Type",
            b"application/json",
            Indexing::Without,
        );
        field(&mut out, b"Authorization", b"Bearer sk-x", Indexing::Never);
        field(&mut out, b"X-Request-Id", b"abc", Indexing::Never);
        field(
            &mut out,
            b"anthropic-version",
            &[b'v'; 200],
            Indexing::Without,
        );
        // Longer than the stack's room for a lowered name.
        field(&mut out, &[b'Y'; 70], b"y", Indexing::Without);
        let mut got = Vec::new();
        Decoder::new(4096)
            .decode(&out, 1 << 20, |n, v| {
                got.push((n.to_vec(), v.to_vec()));
                Ok(())
            })
            .expect("decodes");
        let want: Vec<(Vec<u8>, Vec<u8>)> = [
            (&b":method"[..], &b"POST"[..]),
            (b":scheme", b"https"),
            (b":path", b"/v1/chat/completions"),
            (b":authority", b"api.example.com"),
            (b"content-type", b"application/json"),
            (b"authorization", b"Bearer sk-x"),
            (b"x-request-id", b"abc"),
            (b"anthropic-version", &[b'v'; 200]),
            (&[b'y'; 70], b"y"),
        ]
        .iter()
        .map(|(n, v)| (n.to_vec(), v.to_vec()))
        .collect();
        assert_eq!(got, want);
        // Credentials are marked never-indexed: 0001 then the static name index 23.
        let at = out
            .windows(2)
            .position(|w| w == [0x1f, 0x08])
            .expect("authorization as a never-indexed literal");
        assert_eq!(out[at + 2], 11, "its raw length");
    }

    #[test]
    fn the_common_forms_are_one_byte() {
        let mut out = Vec::new();
        method(&mut out, b"GET");
        scheme(&mut out, false);
        path(&mut out, b"/");
        assert_eq!(out, [0x82, 0x86, 0x84]);
    }
}
