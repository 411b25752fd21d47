//! The JSON skim's fast path: 64 bytes at a time, with bit masks of quotes, backslashes,
//! whitespace and brackets (SSE2 on x86_64, a plain loop elsewhere). String spans come from the
//! quote mask by prefix XOR, so only strings are visited (a key is classified once, a value
//! string of an output key adds its length); everything between strings is settled with a few
//! bit operations per block.
//!
//! It handles exactly what the byte-level scanner would, and hands over to it (with the state
//! it would have had) for anything else: a block with a backslash, a depth that would go below
//! zero, a usage key (whose number the byte-level scanner reads), a string still open at the
//! end of the read. The property tests hold both paths to the same counts for any split.

use super::{Flag, JsonScan, St, class_of};

#[derive(Debug, PartialEq, Eq)]
struct Masks {
    quote: u64,
    backslash: u64,
    space: u64,
    open: u64,
    close: u64,
    colon: u64,
    /// CR and LF: where an SSE line ends (they are whitespace too).
    newline: u64,
}

impl Masks {
    /// Drop the low `by` bits (bytes already read); the bits coming in at the top are past
    /// the end of the run and read as whitespace, like a padded block's.
    #[inline(always)]
    fn shifted(self, by: u32) -> Masks {
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
    fn cut(self, e: u32) -> Masks {
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
trait Isa {
    /// `count_ones` is one instruction.
    const POPCNT: bool;
    fn masks(b: &[u8; 64]) -> Masks;
    fn prefix_xor(x: u64) -> u64;
}

/// What every x86_64 has (SSE2), or plain code elsewhere.
struct Base;

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
struct Avx2;

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
fn fast_cpu() -> bool {
    use std::sync::atomic::{AtomicU8, Ordering};
    // 0: not checked yet, 1: no, 2: yes. One load per call after the first.
    static FAST: AtomicU8 = AtomicU8::new(0);
    match FAST.load(Ordering::Relaxed) {
        0 => {
            let yes = std::is_x86_feature_detected!("avx2")
                && std::is_x86_feature_detected!("bmi1")
                && std::is_x86_feature_detected!("bmi2")
                && std::is_x86_feature_detected!("popcnt")
                && std::is_x86_feature_detected!("pclmulqdq");
            FAST.store(1 + u8::from(yes), Ordering::Relaxed);
            yes
        }
        v => v == 2,
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
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
fn few<I: Isa>(mut x: u64) -> u32 {
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
fn below(k: u32) -> u64 {
    if k >= 64 { !0 } else { (1u64 << k) - 1 }
}

/// A whole string, key or value; true when the byte-level scanner must take over right after
/// it (a usage key: its number is read there). `after_colon` is left to the block's end, which
/// sets it from the last solid byte, or to the caller when this returns true.
#[inline(always)]
fn close(scan: &mut JsonScan, s: &[u8], value: bool, depth: impl Fn() -> u32) -> bool {
    if value {
        let class = scan.last;
        scan.add_value(class.value, s.len());
        if class.is_type && s == b"error" && depth() == 1 {
            scan.counts.error = true;
        }
        return false;
    }
    let class = class_of(s);
    scan.last = class;
    if class.flag != Flag::None {
        match class.flag {
            Flag::Error => scan.counts.error |= depth() == 1,
            Flag::Usage => scan.counts.usage = true,
            Flag::Choices => scan.counts.choices = true,
            Flag::None => {}
        }
    }
    if class.usage.is_some() {
        scan.depth = depth();
        scan.after_colon = false;
        return true;
    }
    false
}

const SHORT_TAIL: usize = 24;

/// Skim from `start` (the scanner is between tokens) in 64-byte blocks; returns where the
/// byte-level scanner takes over, with the scanner's state exactly what it would be there.
pub(super) fn skim(scan: &mut JsonScan, bytes: &[u8], start: usize) -> usize {
    #[cfg(target_arch = "x86_64")]
    if fast_cpu() {
        // SAFETY: the CPU has every feature `skim_avx2` is compiled for (checked just above).
        return unsafe { skim_avx2::<false>(scan, bytes, start) }.0;
    }
    skim_with::<Base, false>(scan, bytes, start).0
}

/// The same over an SSE line: the data up to the first CR or LF, found by the same masks.
/// Returns where the byte-level scanner takes over and, when a block held it, the line's end
/// (the bytes in between are still to be read; none when the skim got that far).
pub(super) fn skim_line(scan: &mut JsonScan, bytes: &[u8]) -> (usize, Option<usize>) {
    #[cfg(target_arch = "x86_64")]
    if fast_cpu() {
        // SAFETY: as in `skim`.
        return unsafe { skim_avx2::<true>(scan, bytes, 0) };
    }
    skim_with::<Base, true>(scan, bytes, 0)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,bmi1,bmi2,popcnt,pclmulqdq")]
fn skim_avx2<const LINE: bool>(
    scan: &mut JsonScan,
    bytes: &[u8],
    start: usize,
) -> (usize, Option<usize>) {
    skim_with::<Avx2, LINE>(scan, bytes, start)
}

#[inline(always)]
fn skim_with<I: Isa, const LINE: bool>(
    scan: &mut JsonScan,
    bytes: &[u8],
    start: usize,
) -> (usize, Option<usize>) {
    debug_assert!(scan.st == St::Outside);
    let mut i = start;
    // A string open across blocks: where its content starts and whether it is a value.
    let mut open: Option<(usize, bool)> = None;
    let mut line_end = None;
    while i < bytes.len() {
        let mut len = (bytes.len() - i).min(64);
        let mut m = if let Some(blk) = bytes[i..].first_chunk::<64>() {
            I::masks(blk)
        } else if let Some(last) = bytes.last_chunk::<64>() {
            // The tail of a longer run: the last 64 bytes, shifted so that bit 0 is byte `i`
            // (no copy), with the bits past the end set as whitespace.
            I::masks(last).shifted(64 - len as u32)
        } else if len >= SHORT_TAIL {
            let mut padded = [b' '; 64];
            padded[..len].copy_from_slice(&bytes[i..]);
            I::masks(&padded)
        } else {
            break; // a short run costs less byte by byte than padded into a block
        };
        if LINE && m.newline != 0 {
            // The line ends in this block: it is the last one.
            let e = m.newline.trailing_zeros();
            m = m.cut(e);
            len = e as usize;
            line_end = Some(i + len);
        }
        if m.backslash != 0 {
            break;
        }
        let inside = I::prefix_xor(m.quote) ^ if open.is_some() { !0 } else { 0 };
        let solid = !m.space & !inside; // non-whitespace outside strings (closing quotes too)
        let (opens, closes) = (m.open & !inside, m.close & !inside);
        let start_depth = scan.depth;
        let depth_at =
            |k: u32| start_depth + few::<I>(opens & below(k)) - few::<I>(closes & below(k));
        // The byte-level scanner stops the depth at zero: leave such a block to it. (Counting
        // bits is not one instruction on baseline x86_64: count only when it could happen.)
        let mut c = if closes != 0 && few::<I>(closes) > start_depth {
            closes
        } else {
            0
        };
        let mut underflow = false;
        while c != 0 {
            let k = c.trailing_zeros();
            c &= c - 1;
            if start_depth + few::<I>(opens & below(k)) < few::<I>(closes & below(k + 1)) {
                underflow = true;
            }
        }
        if underflow {
            break;
        }
        // Where the last solid byte before is a colon: from each colon (or from the block's
        // start when the last block ended on one) on through whitespace. A string opening there
        // is a value.
        let seed = u64::from(open.is_none() && scan.after_colon);
        let mut after = ((m.colon & !inside) << 1) | seed;
        loop {
            let more = after | ((after & m.space) << 1);
            if more == after {
                break;
            }
            after = more;
        }
        let mut q = m.quote;
        // A string carried over from the last block closes at the first quote.
        if let Some((s0, value)) = open
            && q != 0
        {
            let k = q.trailing_zeros();
            q &= q - 1;
            open = None;
            if close(scan, &bytes[s0..i + k as usize], value, || depth_at(k)) {
                return (i + k as usize + 1, line_end);
            }
        }
        // Then strings come in pairs of quotes (no backslash in the block).
        while q != 0 {
            let k = q.trailing_zeros();
            q &= q - 1;
            let value = (after >> k) & 1 != 0;
            let s0 = i + k as usize + 1;
            if q == 0 {
                open = Some((s0, value));
                break;
            }
            let k = q.trailing_zeros();
            q &= q - 1;
            if close(scan, &bytes[s0..i + k as usize], value, || depth_at(k)) {
                return (i + k as usize + 1, line_end);
            }
        }
        // The block is done: carry depth and the colon state to the next one.
        scan.depth = depth_at(64);
        // (The padding of a short last block is whitespace: never solid.)
        if solid != 0 && open.is_none() {
            scan.after_colon = bytes[i + 63 - solid.leading_zeros() as usize] == b':';
        }
        i += len;
        if line_end.is_some() {
            break;
        }
    }
    if let Some((s0, value)) = open {
        // The string goes on past what was skimmed: the byte-level scanner reads it from its start.
        scan.after_colon = value;
        scan.open_string();
        return (s0, line_end);
    }
    (i, line_end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_instruction_sets_give_the_same_masks() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let alphabet = b"\"\\{}[]: \t\r\n\x0cab09";
        for _ in 0..2000 {
            let mut b = [0u8; 64];
            for c in b.iter_mut() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
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
            if fast_cpu() {
                assert_eq!(Avx2::prefix_xor(q), prefix_xor(q));
            }
        }
    }
}
