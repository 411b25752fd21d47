//! The JSON skim's fast path: 64 bytes at a time, with bit masks of quotes, backslashes,
//! whitespace, brackets, colons and line ends (`json_masks.rs`). String spans come from the
//! quote mask by prefix XOR, so only strings are visited (a key is classified once, a value
//! string of an output key adds its length); everything between strings is settled with a few
//! bit operations per block.
//!
//! It handles exactly what the byte-level scanner would, and hands over to it (with the state
//! it would have had) for anything else: a block with a backslash, a depth that would go below
//! zero, a usage key (whose number the byte-level scanner reads), a string still open at the
//! end of the read. The property tests hold both paths to the same counts for any split.

use super::envelope::AtValue;
use super::{Flag, JsonScan, St, ValueKind, class_of};
#[cfg(target_arch = "x86_64")]
use masks::Avx2;
use masks::{Base, Isa, below, few};

#[path = "json_masks.rs"]
mod masks;

/// A whole string, key or value, `bytes[s0..e]`; true when the byte-level scanner must take
/// over right after it (a usage key: its number is read there). `after_colon` is left to the
/// block's end, which sets it from the last solid byte, or to the caller when this returns
/// true. On a line (`bytes` from the data's first byte), the first output value may be kept as
/// the stream's envelope.
#[inline(always)]
fn close<const LINE: bool>(
    scan: &mut JsonScan,
    bytes: &[u8],
    (s0, e): (usize, usize),
    value: bool,
    depth: impl Fn() -> u32,
) -> bool {
    let s = &bytes[s0..e];
    if value {
        let class = scan.last;
        if LINE && scan.envelope.armed && class.value != ValueKind::Other {
            let state = AtValue {
                last: class,
                depth: depth(),
                sums: scan.sums,
                counts: scan.counts,
            };
            scan.envelope.capture(&bytes[..s0 - 1], state);
        }
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
    if crate::cpu::fast() {
        // SAFETY: the CPU has every feature `skim_avx2` is compiled for (checked just above).
        return unsafe { skim_avx2::<false>(scan, bytes, start) }.0;
    }
    skim_with::<Base, false>(scan, bytes, start).0
}

/// The same over an SSE line from `start`: the data up to the first CR or LF, found by the same
/// masks. Returns where the byte-level scanner takes over and, when a block held it, the line's
/// end (the bytes in between are still to be read; none when the skim got that far).
#[inline]
pub(super) fn skim_line(scan: &mut JsonScan, bytes: &[u8], start: usize) -> (usize, Option<usize>) {
    #[cfg(target_arch = "x86_64")]
    if crate::cpu::fast() {
        // SAFETY: as in `skim`.
        return unsafe { skim_avx2::<true>(scan, bytes, start) };
    }
    skim_with::<Base, true>(scan, bytes, start)
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
#[expect(
    clippy::too_many_lines,
    reason = "the per-block skim of every SSE event's JSON: one loop over mask words whose \
              carried state (string, escape, depth) would otherwise pass through every call"
)]
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
            if close::<LINE>(scan, bytes, (s0, i + k as usize), value, || depth_at(k)) {
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
            if close::<LINE>(scan, bytes, (s0, i + k as usize), value, || depth_at(k)) {
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
