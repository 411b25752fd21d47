use super::*;

use crate::test_rng::XorShift;

/// The byte-by-byte reading every block path must equal.
fn reference(b: &[u8], i: usize) -> Result<usize, Invalid> {
    rest(b, i)
}

fn all_paths(b: &[u8], i: usize) -> Vec<Result<usize, Invalid>> {
    #[allow(unused_mut)]
    // SAFETY: each copy is run only where the CPU has its instructions.
    let mut got = vec![unsafe { Base::end(b, i) }];
    #[cfg(target_arch = "x86_64")]
    if crate::cpu::fast() {
        // SAFETY: the CPU has AVX2 (`cpu::fast`).
        got.push(unsafe { Avx2::end(b, i) });
    }

    got
}

#[cfg(target_arch = "x86_64")]
#[test]
fn escaped_bytes_are_those_right_after_an_escaping_backslash() {
    let mut r = XorShift(0x2545_f491_4f6c_dd1d);
    for _ in 0..20_000 {
        // Long and short runs: a byte is a backslash with probability 1/2, 3/4 or 1/8.
        let (a, b) = (r.next_u64(), r.next_u64());
        let backslash = match r.next_u64() % 3 {
            0 => a,
            1 => a | b,
            _ => a & b & r.next_u64(),
        };
        let carry_in = r.next_u64() & 1;
        let (mut want, mut next_escaped) = (0u64, carry_in == 1);
        for k in 0..64 {
            if next_escaped {
                want |= 1 << k;
                next_escaped = false;
            } else if backslash >> k & 1 == 1 {
                next_escaped = true;
            }
        }
        let mut carry = carry_in;
        assert_eq!(
            escaped(backslash, &mut carry),
            want,
            "{backslash:#066b} {carry_in}"
        );
        assert_eq!(
            carry,
            u64::from(next_escaped),
            "{backslash:#066b} {carry_in}"
        );
    }
}

#[cfg(target_arch = "x86_64")]
#[test]
fn byte_classes_match_their_definition() {
    if !crate::cpu::fast() {
        return;
    }
    for start in [0u8, 64, 128, 192] {
        let block: [u8; 64] = std::array::from_fn(|k| start + k as u8);
        // SAFETY: the CPU was checked above.
        let (c, s) = unsafe { (avx2::classes(&block), avx2::specials(&block)) };
        for (k, &byte) in block.iter().enumerate() {
            let bit = |m: u64| m >> k & 1 == 1;
            let (escapable, u, hex) = avx2::class_plain(byte);
            assert_eq!(bit(c.escapable), escapable, "{byte:#x}");
            assert_eq!(bit(c.u), u, "{byte:#x}");
            assert_eq!(bit(c.hex), hex, "{byte:#x}");
            assert_eq!(bit(s.quote), byte == b'"', "{byte:#x}");
            assert_eq!(bit(s.backslash), byte == b'\\', "{byte:#x}");
            assert_eq!(bit(s.control), byte < 0x20, "{byte:#x}");
        }
    }
}

/// A string's contents from tokens: plain runs and valid escapes, with now and then a broken
/// one (a bad escape letter, a `\u` cut after k digits, a raw control byte, a lone backslash),
/// so that faults fall anywhere, deep inside blocks too.
fn contents(r: &mut XorShift, tokens: usize, broken_one_in: u64) -> Vec<u8> {
    const HEX: &[u8] = b"0123456789abcdefABCDEF";
    let mut s = Vec::new();
    for _ in 0..tokens {
        let x = r.next_u64();
        if x.is_multiple_of(broken_one_in) {
            match (x >> 8) % 5 {
                0 => s.extend_from_slice(b"\\x"),
                1 => {
                    s.extend_from_slice(b"\\u");
                    for _ in 0..(x >> 16) % 4 {
                        s.push(HEX[(r.next_u64() % 22) as usize]);
                    }
                    s.push(b"zG\\\"\x01"[(x >> 24) as usize % 5]);
                }
                2 => s.push((x >> 16) as u8 % 0x20),
                3 => s.extend_from_slice(b"\\\xc3"),
                _ => s.push(b'\\'),
            }
            continue;
        }
        match (x >> 8) % 8 {
            0..=2 => s.extend(std::iter::repeat_n(
                b'a' + (x >> 16) as u8 % 26,
                (x >> 24) as usize % 12,
            )),
            3 => s.extend_from_slice(&[b'\\', b"\"\\/bfnrt"[(x >> 16) as usize % 8]]),
            4 => {
                s.extend_from_slice(b"\\u");
                for k in 0..4 {
                    s.push(HEX[(x >> (16 + 5 * k)) as usize % 22]);
                }
            }
            // Runs of escaped backslashes, even and odd, and an escaped quote after them.
            5 => {
                for _ in 0..(x >> 16) % 4 {
                    s.extend_from_slice(b"\\\\");
                }
                if x >> 20 & 1 == 1 {
                    s.extend_from_slice(b"\\\"");
                }
            }
            6 => s.extend_from_slice("naïve ✓ ".as_bytes()),
            _ => s.push(b' '),
        }
    }
    s
}

#[test]
fn every_path_gives_the_byte_by_byte_answer() {
    let mut r = XorShift(0x9e37_79b9_7f4a_7c15);
    let mut faults = 0;
    for case in 0..60_000 {
        let tokens = (r.next_u64() % 120) as usize;
        let broken_one_in = [3, 40, 400, u64::MAX][(r.next_u64() % 4) as usize];
        let mut s = vec![b'"'];
        s.extend(contents(&mut r, tokens, broken_one_in));
        if !r.next_u64().is_multiple_of(8) {
            s.push(b'"');
        }
        s.extend_from_slice(&b",\"model\":\"m\"}"[..(r.next_u64() % 14) as usize]);
        let want = reference(&s, 1);
        faults += usize::from(want.as_ref().is_err_and(|e| e.at > 64));
        for got in all_paths(&s, 1) {
            assert_eq!(got, want, "case {case}: {:?}", String::from_utf8_lossy(&s));
        }
    }
    // Faults deep inside blocks were tried, not only in the first bytes.
    assert!(faults > 5_000, "{faults}");
}

#[test]
fn valid_escapes_across_every_block_edge() {
    // Each escape, and runs of backslashes, at every offset across two block edges.
    let escapes: &[&[u8]] = &[
        b"\\n",
        b"\\\"",
        b"\\\\",
        b"\\\\\\\"",
        b"\\u00e9",
        b"\\uD83D",
        b"\\/",
        b"\\\\\\\\",
    ];
    let broken: &[&[u8]] = &[
        b"\\u00g9", b"\\u12\"", b"\\u00e", b"\\x", b"\\\x01", b"\\", b"\\u", b"\\\\\\",
    ];
    for at in 0..140 {
        for (e, ok) in escapes
            .iter()
            .map(|e| (e, true))
            .chain(broken.iter().map(|e| (e, false)))
        {
            let mut s = vec![b'"'];
            s.extend(std::iter::repeat_n(b'a', at));
            s.extend_from_slice(e);
            // Not a hex digit nor a letter that may be escaped: a cut escape stays broken.
            s.extend(std::iter::repeat_n(b'z', 80));
            s.push(b'"');
            s.extend_from_slice(b",\"model\":\"m\"}");
            let want = reference(&s, 1);
            assert_eq!(want.is_ok(), ok, "{at} {:?}", String::from_utf8_lossy(e));
            for got in all_paths(&s, 1) {
                assert_eq!(got, want, "{at}: {:?}", String::from_utf8_lossy(&s));
            }
        }
    }
}
