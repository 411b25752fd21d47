//! Where a JSON string of a request body ends, checked on the way: no raw control byte, every
//! escape one of `\" \\ \/ \b \f \n \r \t \uXXXX`. Nearly all of an agent's request is string
//! contents (code, tool output, `\u`-escaped non-ASCII), so this is most of the body check.
//!
//! Short strings are read 8 bytes at a time. Long ones 64 at a time, compiled twice:
//! - `Base` (SSE2, every x86_64): a mask of the quotes, backslashes and control bytes of a
//!   block, whose bits are taken in turn; each escape is checked on its own.
//! - `Avx2`: a block's escapes are settled by bit arithmetic, without a branch per escape.
//!   The bytes a backslash escapes come from one carry-propagating add, as in simdjson; each
//!   byte's class (may follow a backslash, is a hex digit, is `u`) from two nibble-table
//!   lookups; every `\u` needs hex digits in the four bytes after it. An agent's body has an
//!   escape every ten bytes or so, and a branch per escape mispredicts on such contents.
//!
//! Both give exactly the answers of the byte-by-byte reading (`read_words` from the string's
//! start): where a block finds anything wrong, the string is read again that way, which names
//! the same first fault at the same place (the tests hold every path to it).

use super::json_check::Invalid;

/// How strings are read: picked once per body by the CPU's instruction sets.
pub(super) trait Strings {
    /// `i` is just past an opening quote; returns the index just past the closing one.
    ///
    /// # Safety
    /// The CPU has the instructions the implementation uses: none beyond the x86_64 baseline
    /// for `Base`, AVX2 for `Avx2` (`crate::cpu::fast()`).
    unsafe fn end(b: &[u8], i: usize) -> Result<usize, Invalid>;
}

/// SSE2 blocks (every x86_64), or 8-byte words elsewhere.
pub(super) struct Base;

impl Strings for Base {
    #[inline(always)]
    unsafe fn end(b: &[u8], mut i: usize) -> Result<usize, Invalid> {
        if let Some(end) = first_words(b, &mut i)? {
            return Ok(end);
        }
        'blocks: while let Some(mut m) = specials64(b, i) {
            let base = i;
            while m != 0 {
                let at = base + m.trailing_zeros() as usize;
                match b[at] {
                    b'"' => return Ok(at + 1),
                    b'\\' => {
                        let next = escape_end(b, at)?;
                        if next >= base + 64 {
                            i = next;
                            continue 'blocks;
                        }
                        m &= !0u64 << (next - base);
                    }
                    _ => return Err(control(at)),
                }
            }
            i = base + 64;
        }
        rest(b, i)
    }
}

/// AVX2 blocks with the escapes settled by masks (`avx2::specials`, `avx2::classes`).
#[cfg(target_arch = "x86_64")]
pub(super) struct Avx2;

#[cfg(target_arch = "x86_64")]
impl Strings for Avx2 {
    #[inline(always)]
    unsafe fn end(b: &[u8], start: usize) -> Result<usize, Invalid> {
        let mut i = start;
        if let Some(end) = first_words(b, &mut i)? {
            return Ok(end);
        }
        // Blocks follow each other 64 bytes apart, whatever they hold, so that the next one is
        // loaded while this one is settled; an escape across two hands over `Carry`.
        let mut carry = Carry::default();
        while let Some(block) = b.get(i..).and_then(|r| r.first_chunk::<64>()) {
            // SAFETY: the caller's promise (`Strings::end`).
            match unsafe { settle(block, &mut carry) } {
                Step::Ends(at) => return Ok(i + at as usize + 1),
                // Rare (a broken body): read again byte by byte, which names the first fault.
                Step::Fault => return rest(b, start),
                Step::On => i += 64,
            }
        }
        // The last bytes padded with NULs: control bytes, a fault unless the string ends first.
        let tail = b.get(i..).unwrap_or_default();
        let mut padded = [0u8; 64];
        padded[..tail.len()].copy_from_slice(tail);
        // SAFETY: as above.
        match unsafe { settle(&padded, &mut carry) } {
            Step::Ends(at) if (at as usize) < tail.len() => Ok(i + at as usize + 1),
            _ => rest(b, start),
        }
    }
}

/// What a block leaves to the next: whether its last run of backslashes escapes the next
/// one's first byte (bit 0), and the next bytes that must be a `\u`'s hex digits (bits 0-3).
#[cfg(target_arch = "x86_64")]
#[derive(Default)]
struct Carry {
    escaped: u64,
    hex: u64,
}

#[cfg(target_arch = "x86_64")]
enum Step {
    /// The closing quote is at this bit.
    Ends(u32),
    Fault,
    On,
}

/// # Safety
/// The CPU has AVX2.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn settle(block: &[u8; 64], carry: &mut Carry) -> Step {
    // SAFETY: the caller's promise.
    let m = unsafe { avx2::specials(block) };
    if m.backslash | carry.escaped | carry.hex == 0 {
        let stop = m.quote | m.control;
        return match stop.trailing_zeros() {
            64 => Step::On,
            at if m.quote >> at & 1 == 1 => Step::Ends(at),
            _ => Step::Fault,
        };
    }
    let escaped = escaped(m.backslash, &mut carry.escaped);
    let quote = m.quote & !escaped;
    // The bytes before the closing quote (all of them without one).
    let inside = quote.wrapping_sub(1) & !quote;
    // SAFETY: as above.
    let c = unsafe { avx2::classes(block) };
    let escaped = escaped & inside;
    let u = escaped & c.u;
    let hex = four_after(u) | carry.hex;
    carry.hex = four_after(u >> 60) >> 4;
    if (escaped & !c.escapable) | (hex & !c.hex) | (m.control & inside) != 0 {
        Step::Fault
    } else if quote != 0 {
        Step::Ends(quote.trailing_zeros())
    } else {
        Step::On
    }
}

/// The four bits above each set bit of `u` (where a `\u`'s hex digits are).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn four_after(u: u64) -> u64 {
    let two = u << 1 | u << 2;
    two | two << 2
}

/// Most keys and many values are short: their first 32 bytes 8 at a time, before any block.
#[inline(always)]
fn first_words(b: &[u8], i: &mut usize) -> Result<Option<usize>, Invalid> {
    let first = b.len().min(*i + 32);
    read_words(b, i, first)
}

/// The rest of a string from `i` (outside any escape), 8 bytes at a time.
#[inline(always)]
fn rest(b: &[u8], mut i: usize) -> Result<usize, Invalid> {
    read_words(b, &mut i, b.len())?.ok_or(Invalid {
        what: "a string that never ends",
        at: i,
    })
}

/// Read a string from `*i` up to `end`, 8 bytes at a time: `Some` index just past its closing
/// quote if it ends there, or `None` with `*i` at or past `end`.
#[inline(always)]
fn read_words(b: &[u8], i: &mut usize, end: usize) -> Result<Option<usize>, Invalid> {
    loop {
        *i = skip_plain(b, *i, end);
        if *i >= end {
            return Ok(None);
        }
        match b[*i] {
            b'"' => return Ok(Some(*i + 1)),
            b'\\' => *i = escape_end(b, *i)?,
            _ => return Err(control(*i)),
        }
    }
}

/// From `i`, the first index before `end` holding a quote, a backslash or a byte below 0x20;
/// `end` if none. Eight bytes at a time (bit tricks on a u64), then one at a time.
#[inline(always)]
fn skip_plain(b: &[u8], mut i: usize, end: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = ONES * 0x80;
    let zero_byte = |x: u64| x.wrapping_sub(ONES) & !x;
    while i + 8 <= end {
        let Some(word) = b.get(i..i + 8).and_then(|w| <[u8; 8]>::try_from(w).ok()) else {
            break;
        };
        let x = u64::from_le_bytes(word);
        // The lowest flagged byte is exact (a borrow only runs upward from a true one).
        let m = (zero_byte(x ^ (ONES * b'"' as u64))
            | zero_byte(x ^ (ONES * b'\\' as u64))
            | (x.wrapping_sub(ONES * 0x20) & !x))
            & HIGH;
        if m != 0 {
            return i + (m.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < end && !matches!(b[i], b'"' | b'\\' | 0..0x20) {
        i += 1;
    }
    i
}

fn control(at: usize) -> Invalid {
    Invalid {
        what: "a control character in a string",
        at,
    }
}

/// `b[at]` is a backslash in a string; returns the index just past its escape.
#[inline(always)]
fn escape_end(b: &[u8], at: usize) -> Result<usize, Invalid> {
    // One table lookup per byte: what may follow a backslash, and which bytes are hex digits.
    const ESCAPE: u8 = 1;
    const HEX: u8 = 2;
    const CLASS: [u8; 256] = {
        let mut t = [0u8; 256];
        let mut c = 0;
        while c < 256 {
            let b = c as u8;
            if matches!(
                b,
                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' | b'u'
            ) {
                t[c] |= ESCAPE;
            }
            if b.is_ascii_hexdigit() {
                t[c] |= HEX;
            }
            c += 1;
        }
        t
    };
    let class = |i: usize| b.get(i).map_or(0, |&c| CLASS[c as usize]);
    match b.get(at + 1) {
        Some(b'u') => {
            if class(at + 2) & class(at + 3) & class(at + 4) & class(at + 5) & HEX != 0 {
                Ok(at + 6)
            } else {
                Err(Invalid {
                    what: "an invalid \\u escape",
                    at,
                })
            }
        }
        _ if class(at + 1) & ESCAPE != 0 => Ok(at + 2),
        _ => Err(Invalid {
            what: "an invalid escape",
            at,
        }),
    }
}

/// The bytes of a block that a backslash escapes (escaped backslashes too), as simdjson finds
/// them: `carry` says whether the previous block's last run escapes this one's first byte, and
/// is set for the next. Adding the odd-placed run starts to the runs carries each such run one
/// past its end, which flips which parity of byte its escapes fall on.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn escaped(backslash: u64, carry: &mut u64) -> u64 {
    const EVEN: u64 = 0x5555_5555_5555_5555;
    // A first byte escaped from the previous block starts no run, even as a backslash.
    let backslash = backslash & !*carry;
    let follows = backslash << 1 | *carry;
    let odd_starts = backslash & !EVEN & !follows;
    let (even_started, overflow) = odd_starts.overflowing_add(backslash);
    *carry = u64::from(overflow);
    (EVEN ^ (even_started << 1)) & follows
}

/// Bit k set where `b[i + k]` is a quote, a backslash or a byte below 0x20 (which a JSON string
/// may not hold raw), for the 64 bytes from `i`; `None` when fewer than 64 are left (or on
/// targets without SSE2, where strings are read byte by byte).
#[inline(always)]
fn specials64(b: &[u8], i: usize) -> Option<u64> {
    let block = b.get(i..i + 64)?;
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    {
        use std::arch::x86_64::{
            __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_min_epu8, _mm_movemask_epi8,
            _mm_or_si128, _mm_set1_epi8,
        };
        // SAFETY: SSE2 is enabled for this build (the cfg above), and each 16-byte unaligned
        // load reads inside `block`, which is 64 bytes long.
        unsafe {
            let quote = _mm_set1_epi8(b'"' as i8);
            let backslash = _mm_set1_epi8(b'\\' as i8);
            let below = _mm_set1_epi8(0x1f);
            let mut m = 0u64;
            for k in 0..4 {
                let v = _mm_loadu_si128(block.as_ptr().add(16 * k).cast::<__m128i>());
                let q = _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash));
                // `min(v, 0x1f) == v` exactly for the bytes up to 0x1f.
                let c = _mm_cmpeq_epi8(_mm_min_epu8(v, below), v);
                m |= (_mm_movemask_epi8(_mm_or_si128(q, c)) as u16 as u64) << (16 * k);
            }
            Some(m)
        }
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    {
        let _ = block;
        None
    }
}

#[cfg(target_arch = "x86_64")]
#[path = "json_strings_avx2.rs"]
mod avx2;

#[cfg(test)]
#[path = "json_strings_tests.rs"]
mod tests;
