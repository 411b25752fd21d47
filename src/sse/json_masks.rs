//! The bit masks of a 64-byte block that the JSON skim works from: quotes, backslashes,
//! whitespace, brackets, colons and line ends, one bit per byte; and the instruction sets the
//! skim is compiled for (AVX2 with BMI, POPCNT and carry-less multiply where the CPU has them,
//! SSE2 on every x86_64, a plain loop elsewhere, which the vector code must equal).

#[derive(Debug, PartialEq, Eq)]
pub(super) struct Masks {
    pub quote: u64,
    pub backslash: u64,
    pub space: u64,
    pub open: u64,
    pub close: u64,
    pub colon: u64,
    /// CR and LF: where an SSE line ends (they are whitespace too).
    pub newline: u64,
}

impl Masks {
    /// Drop the low `by` bits (bytes already read); the bits coming in at the top are past
    /// the end of the run and read as whitespace, like a padded block's.
    #[inline(always)]
    pub fn shifted(self, by: u32) -> Masks {
        Masks {
            quote: self.quote >> by,
            backslash: self.backslash >> by,
            space: (self.space >> by) | !(!0u64 >> by),
            open: self.open >> by,
            close: self.close >> by,
            colon: self.colon >> by,
            newline: self.newline >> by,
        }
    }

    /// Keep the bytes below `e` (the end of the line); the rest reads as whitespace.
    #[inline(always)]
    pub fn cut(self, e: u32) -> Masks {
        let keep = below(e);
        Masks {
            quote: self.quote & keep,
            backslash: self.backslash & keep,
            space: self.space | !keep,
            open: self.open & keep,
            close: self.close & keep,
            colon: self.colon & keep,
            newline: 0,
        }
    }

    /// From the per-byte-class masks in the order the vector code builds them.
    fn from_bits(m: [u64; 7]) -> Masks {
        Masks {
            quote: m[0],
            backslash: m[1],
            space: m[2],
            open: m[3],
            close: m[4],
            colon: m[5],
            newline: m[6],
        }
    }
}

/// The instructions one skim is compiled for: the masks of a block and the prefix XOR.
pub(super) trait Isa {
    /// `count_ones` is one instruction.
    const POPCNT: bool;
    fn masks(b: &[u8; 64]) -> Masks;
    fn prefix_xor(x: u64) -> u64;
}

/// What every x86_64 has (SSE2), or plain code elsewhere.
pub(super) struct Base;

impl Isa for Base {
    const POPCNT: bool = cfg!(target_feature = "popcnt");
    #[inline(always)]
    fn masks(b: &[u8; 64]) -> Masks {
        #[cfg(target_arch = "x86_64")]
        return masks_sse2(b);
        #[cfg(not(target_arch = "x86_64"))]
        return masks_plain(b);
    }
    #[inline(always)]
    fn prefix_xor(x: u64) -> u64 {
        prefix_xor(x)
    }
}

/// AVX2 with BMI, POPCNT and carry-less multiply: the skim is compiled a second time with
/// these enabled, so that bit counts, trailing zeros and the prefix XOR are one instruction
/// each and the mask code is inlined.
#[cfg(target_arch = "x86_64")]
pub(super) struct Avx2;

#[cfg(target_arch = "x86_64")]
impl Isa for Avx2 {
    const POPCNT: bool = true;
    #[inline(always)]
    fn masks(b: &[u8; 64]) -> Masks {
        // SAFETY: only reached from `skim_avx2`, which runs after the CPU check.
        unsafe { masks_avx2(b) }
    }
    #[inline(always)]
    fn prefix_xor(x: u64) -> u64 {
        use std::arch::x86_64::*;
        // SAFETY: as above. Carry-less multiplying by all ones XORs every lower bit into each bit.
        unsafe {
            let p = _mm_clmulepi64_si128(_mm_set_epi64x(0, x as i64), _mm_set1_epi8(-1), 0);
            _mm_cvtsi128_si64(p) as u64
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
fn masks_avx2(b: &[u8; 64]) -> Masks {
    use std::arch::x86_64::*;
    let mut m = [0u64; 7];
    for k in 0..2 {
        // SAFETY: unaligned 32-byte loads within the 64-byte array.
        let v = unsafe { _mm256_loadu_si256(b.as_ptr().add(32 * k) as *const __m256i) };
        let eq = |c: u8| _mm256_cmpeq_epi8(v, _mm256_set1_epi8(c as i8));
        let bits = |x: __m256i| u64::from(_mm256_movemask_epi8(x) as u32) << (32 * k);
        let folded = _mm256_or_si256(v, _mm256_set1_epi8(0x20));
        let fold_eq = |c: u8| _mm256_cmpeq_epi8(folded, _mm256_set1_epi8(c as i8));
        m[0] |= bits(eq(b'"'));
        m[1] |= bits(eq(b'\\'));
        // Whitespace is any byte up to the space (see `masks_plain`).
        let ws = _mm256_cmpeq_epi8(_mm256_min_epu8(v, _mm256_set1_epi8(b' ' as i8)), v);
        m[2] |= bits(ws);
        m[3] |= bits(fold_eq(b'{'));
        m[4] |= bits(fold_eq(b'}'));
        m[5] |= bits(eq(b':'));
        m[6] |= bits(_mm256_or_si256(eq(b'\r'), eq(b'\n')));
    }
    Masks::from_bits(m)
}

#[cfg(target_arch = "x86_64")]
#[inline]
fn masks_sse2(b: &[u8; 64]) -> Masks {
    use std::arch::x86_64::*;
    // SAFETY: SSE2 is part of the x86_64 baseline; loads are unaligned and within the array.
    unsafe {
        let mut m = [0u64; 7];
        for k in 0..4 {
            let v = _mm_loadu_si128(b.as_ptr().add(16 * k) as *const __m128i);
            let eq = |c: u8| _mm_cmpeq_epi8(v, _mm_set1_epi8(c as i8));
            let bits = |x: __m128i| u64::from(_mm_movemask_epi8(x) as u16) << (16 * k);
            let folded = _mm_or_si128(v, _mm_set1_epi8(0x20));
            let fold_eq = |c: u8| _mm_cmpeq_epi8(folded, _mm_set1_epi8(c as i8));
            m[0] |= bits(eq(b'"'));
            m[1] |= bits(eq(b'\\'));
            let ws = _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(b' ' as i8)), v);
            m[2] |= bits(ws);
            // `{` and `[` differ only in bit 5, as do `}` and `]`.
            m[3] |= bits(fold_eq(b'{'));
            m[4] |= bits(fold_eq(b'}'));
            m[5] |= bits(eq(b':'));
            m[6] |= bits(_mm_or_si128(eq(b'\r'), eq(b'\n')));
        }
        Masks::from_bits(m)
    }
}

/// The masks byte by byte: other targets use it, and it is what the vector code must equal.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn masks_plain(b: &[u8; 64]) -> Masks {
    let mut m = [0u64; 7];
    for (k, &c) in b.iter().enumerate() {
        if c == b'\r' || c == b'\n' {
            m[6] |= 1u64 << k;
        }
        let class = match c {
            b'"' => 0,
            b'\\' => 1,
            // Control bytes are not JSON outside strings: both paths read them as whitespace.
            c if c <= b' ' => 2,
            b'{' | b'[' => 3,
            b'}' | b']' => 4,
            b':' => 5,
            _ => continue,
        };
        m[class] |= 1u64 << k;
    }
    Masks::from_bits(m)
}

/// Bit k set when an odd number of quotes is at or below k: from an opening quote (included)
/// to its closing quote (excluded).
#[inline]
fn prefix_xor(mut x: u64) -> u64 {
    x ^= x << 1;
    x ^= x << 2;
    x ^= x << 4;
    x ^= x << 8;
    x ^= x << 16;
    x ^= x << 32;
    x
}

/// Set bits of a mask that has few (brackets in a block). With POPCNT it is one instruction;
/// baseline x86_64 has none, and a loop over a few bits beats the SWAR fallback.
#[inline(always)]
pub(super) fn few<I: Isa>(mut x: u64) -> u32 {
    if I::POPCNT {
        return x.count_ones();
    }
    let mut n = 0;
    while x != 0 {
        x &= x - 1;
        n += 1;
    }
    n
}

/// Bits below k (all of them for k = 64).
#[inline(always)]
pub(super) fn below(k: u32) -> u64 {
    if k >= 64 { !0 } else { (1u64 << k) - 1 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_instruction_sets_give_the_same_masks() {
        let mut rng = crate::test_rng::XorShift(0x9e37_79b9_7f4a_7c15);
        let alphabet = b"\"\\{}[]: \t\r\n\x0cab09";
        for _ in 0..2000 {
            let mut b = [0u8; 64];
            for c in b.iter_mut() {
                let x = rng.next_u64();
                *c = if x.is_multiple_of(3) {
                    x as u8
                } else {
                    alphabet[(x >> 8) as usize % alphabet.len()]
                };
            }
            let want = masks_plain(&b);
            #[cfg(target_arch = "x86_64")]
            {
                assert_eq!(masks_sse2(&b), want);
                if std::is_x86_feature_detected!("avx2") {
                    // SAFETY: checked just above.
                    assert_eq!(unsafe { masks_avx2(&b) }, want);
                }
            }
            assert_eq!(Base::masks(&b), want);
            let q = want.quote | want.colon << 7;
            assert_eq!(Base::prefix_xor(q), prefix_xor(q));
            #[cfg(target_arch = "x86_64")]
            if crate::cpu::fast() {
                assert_eq!(Avx2::prefix_xor(q), prefix_xor(q));
            }
        }
    }
}
