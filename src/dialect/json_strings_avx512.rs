//! The AVX-512 masks of a 64-byte block of string contents: the whole block in one register,
//! each comparison straight into a 64-bit mask (half the instructions of the AVX2 masks). The
//! byte classes use the AVX2 file's nibble tables. Inlined into `check_avx512`, as the AVX2
//! ones are into `check_avx2`.

use super::avx2::{ESCAPABLE, HEX, HIGH, LOW, U};
use super::{BlockMasks, Classes, Specials};
use std::arch::x86_64::*;

pub(in crate::dialect) struct Masks;

impl BlockMasks for Masks {
    #[inline(always)]
    unsafe fn specials(block: &[u8; 64]) -> Specials {
        // SAFETY: the caller's promise (AVX-512BW); an unaligned 64-byte load of the array.
        unsafe {
            let v = _mm512_loadu_si512(block.as_ptr().cast());
            Specials {
                quote: _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(b'"' as i8)),
                backslash: _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(b'\\' as i8)),
                control: _mm512_cmplt_epu8_mask(v, _mm512_set1_epi8(0x20)),
            }
        }
    }

    #[inline(always)]
    unsafe fn classes(block: &[u8; 64]) -> Classes {
        // SAFETY: the caller's promise (AVX-512BW); 16-byte loads of the tables, a 64-byte load of the array.
        unsafe {
            // The same 16-byte table in every lane (vpshufb looks up within a lane).
            let low = _mm512_broadcast_i32x4(_mm_loadu_si128(LOW.as_ptr().cast()));
            let high = _mm512_broadcast_i32x4(_mm_loadu_si128(HIGH.as_ptr().cast()));
            let nibble = _mm512_set1_epi8(0x0f);
            let v = _mm512_loadu_si512(block.as_ptr().cast());
            let lo = _mm512_shuffle_epi8(low, _mm512_and_si512(v, nibble));
            let hi = _mm512_shuffle_epi8(high, _mm512_and_si512(_mm512_srli_epi16(v, 4), nibble));
            let class = _mm512_and_si512(lo, hi);
            Classes {
                escapable: has(class, ESCAPABLE),
                u: has(class, U),
                hex: has(class, HEX),
            }
        }
    }
}

/// The bytes of `class` with any of `bits` (a plain function: a closure would not be inlined).
#[inline(always)]
unsafe fn has(class: __m512i, bits: u8) -> u64 {
    // SAFETY: the caller runs on AVX-512BW.
    unsafe { _mm512_test_epi8_mask(class, _mm512_set1_epi8(bits as i8)) }
}
