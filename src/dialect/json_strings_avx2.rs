//! The AVX2 masks of a 64-byte block of string contents, two 32-byte halves.
//!
//! Not `#[target_feature]` functions themselves, so that they are always inlined into the AVX2
//! copy of the body check (`check_avx2`) that calls them (a call per block cost a fifth of it);
//! helpers are plain functions, not closures, for the same reason.

use std::arch::x86_64::*;

pub(super) struct Specials {
    pub quote: u64,
    pub backslash: u64,
    /// Bytes below 0x20, which a string may not hold raw.
    pub control: u64,
}

pub(super) struct Classes {
    /// May follow a backslash: `" \ / b f n r t u`.
    pub escapable: u64,
    pub u: u64,
    pub hex: u64,
}

/// The quotes, backslashes and control bytes of a block.
///
/// # Safety
/// The CPU has AVX2.
#[inline(always)]
pub(super) unsafe fn specials(block: &[u8; 64]) -> Specials {
    let mut m = [0u64; 3];
    for k in 0..2 {
        // SAFETY: the caller runs on AVX2; an unaligned 32-byte load within the 64-byte array.
        unsafe {
            let v = _mm256_loadu_si256(block.as_ptr().add(32 * k).cast::<__m256i>());
            m[0] |= bits(_mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'"' as i8)), k);
            m[1] |= bits(_mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'\\' as i8)), k);
            // `min(v, 0x1f) == v` exactly for the bytes up to 0x1f.
            let low = _mm256_min_epu8(v, _mm256_set1_epi8(0x1f));
            m[2] |= bits(_mm256_cmpeq_epi8(low, v), k);
        }
    }
    Specials {
        quote: m[0],
        backslash: m[1],
        control: m[2],
    }
}

// A byte's classes are `LOW[low nibble] & HIGH[high nibble]`: each bit below stands for the
// bytes whose low nibble is in one set and high nibble in another.
const DIGIT: u8 = 0x01; // 0x30-0x39
const HEX_LETTER: u8 = 0x02; // 0x41-0x46, 0x61-0x66
const ESC_2X: u8 = 0x04; // `"` 0x22, `/` 0x2f
const ESC_5X: u8 = 0x08; // `\` 0x5c
const ESC_6X: u8 = 0x10; // `b` 0x62, `f` 0x66, `n` 0x6e
const ESC_7X: u8 = 0x20; // `r` 0x72, `t` 0x74, `u` 0x75
const U: u8 = 0x40; // `u` 0x75
const HEX: u8 = DIGIT | HEX_LETTER;
const ESCAPABLE: u8 = ESC_2X | ESC_5X | ESC_6X | ESC_7X;

const LOW: [u8; 16] = {
    let mut t = [0u8; 16];
    let mut n = 0;
    while n < 16 {
        if n <= 9 {
            t[n] |= DIGIT;
        }
        if n >= 1 && n <= 6 {
            t[n] |= HEX_LETTER;
        }
        if n == 0x2 || n == 0xf {
            t[n] |= ESC_2X;
        }
        if n == 0xc {
            t[n] |= ESC_5X;
        }
        if n == 0x2 || n == 0x6 || n == 0xe {
            t[n] |= ESC_6X;
        }
        if n == 0x2 || n == 0x4 || n == 0x5 {
            t[n] |= ESC_7X;
        }
        if n == 0x5 {
            t[n] |= U;
        }
        n += 1;
    }
    t
};

const HIGH: [u8; 16] = {
    let mut t = [0u8; 16];
    t[0x2] = ESC_2X;
    t[0x3] = DIGIT;
    t[0x4] = HEX_LETTER;
    t[0x5] = ESC_5X;
    t[0x6] = HEX_LETTER | ESC_6X;
    t[0x7] = ESC_7X | U;
    t
};

/// Each byte's classes: may follow a backslash, is `u`, is a hex digit.
///
/// # Safety
/// The CPU has AVX2.
#[inline(always)]
pub(super) unsafe fn classes(block: &[u8; 64]) -> Classes {
    let mut m = [0u64; 3];
    // SAFETY: the caller runs on AVX2; 16-byte loads of the tables, 32-byte loads within the
    // 64-byte array.
    unsafe {
        // The same 16-byte table in both lanes (vpshufb looks up within a lane).
        let low = _mm256_broadcastsi128_si256(_mm_loadu_si128(LOW.as_ptr().cast::<__m128i>()));
        let high = _mm256_broadcastsi128_si256(_mm_loadu_si128(HIGH.as_ptr().cast::<__m128i>()));
        let nibble = _mm256_set1_epi8(0x0f);
        for k in 0..2 {
            let v = _mm256_loadu_si256(block.as_ptr().add(32 * k).cast::<__m256i>());
            let lo = _mm256_shuffle_epi8(low, _mm256_and_si256(v, nibble));
            let hi = _mm256_shuffle_epi8(high, _mm256_and_si256(_mm256_srli_epi16(v, 4), nibble));
            let class = _mm256_and_si256(lo, hi);
            // Set where `class` has none of the bits; the masks are inverted below.
            m[0] |= bits(none(class, ESCAPABLE), k);
            m[1] |= bits(none(class, U), k);
            m[2] |= bits(none(class, HEX), k);
        }
    }
    Classes {
        escapable: !m[0],
        u: !m[1],
        hex: !m[2],
    }
}

// Plain functions, not closures: a closure here would not be inlined into the AVX2 caller.
#[inline(always)]
unsafe fn bits(x: __m256i, half: usize) -> u64 {
    // SAFETY: the caller runs on AVX2.
    u64::from(unsafe { _mm256_movemask_epi8(x) } as u32) << (32 * half)
}

/// 0xff in the bytes of `class` that have none of `bits`.
#[inline(always)]
unsafe fn none(class: __m256i, bits: u8) -> __m256i {
    // SAFETY: the caller runs on AVX2.
    unsafe {
        let x = _mm256_and_si256(class, _mm256_set1_epi8(bits as i8));
        _mm256_cmpeq_epi8(x, _mm256_setzero_si256())
    }
}

/// The classes byte by byte, what the tables must give.
#[cfg(test)]
pub(super) fn class_plain(c: u8) -> (bool, bool, bool) {
    (
        matches!(
            c,
            b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' | b'u'
        ),
        c == b'u',
        c.is_ascii_hexdigit(),
    )
}
