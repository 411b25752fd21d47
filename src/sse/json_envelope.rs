//! The envelope memo. The events of one stream repeat their JSON up to the output value:
//! `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"` or an OpenAI
//! chunk's id, model and fingerprint up to `"delta":{"content":"`. The scanner is a
//! deterministic state machine, so the same bytes from the same (fresh) state always leave it
//! in the same state. The memo keeps those bytes once, with the state they lead to; a later
//! event whose data starts with the same bytes takes the state in one compare and is skimmed
//! from its output value on. Results are the same as a full skim (the property tests split
//! streams anywhere and compare against the byte-level scanner).
//!
//! Numbers change from event to event in some envelopes (a Responses event's
//! `sequence_number`, a block's `index`). Digits changed for digits, at the same length, leave
//! the state the same unless a number is a usage figure (the only number the scanner keeps), so
//! such an envelope matches too when no usage figure came before the value.
//!
//! It is captured by the block skim at the first output value of an event's first data line
//! (only there are the line's bytes from its start at hand). A usage figure before the value
//! hands the line to the byte-level scanner, so no capture holds one today; the digits rule
//! still checks for it, so that it stays sound if that changes. A stream whose envelopes keep
//! changing (a sequence number before the output) stops paying for compares and captures after
//! a few misses and tries again now and then.

use super::keys::{KeyClass, PLAIN_KEY};
use super::{Counts, ValueKind};

/// The longest envelope kept (an OpenAI chunk as recorded is about 230 bytes up to `content`).
pub(super) const ENVELOPE_MAX: usize = 320;

/// Misses in a row after which the memo pauses (then one event in `RETRY_EVERY` tries it).
const MISSES_BEFORE_PAUSE: u8 = 4;
const RETRY_EVERY: u8 = 32;

/// The scanner's state at an output value's opening quote: between tokens, right after a
/// colon, nothing open (so these fields are all of it).
#[derive(Clone, Copy, Debug)]
pub(super) struct AtValue {
    pub last: KeyClass,
    pub depth: u32,
    pub sums: [u32; 4],
    pub counts: Counts,
}

#[derive(Clone, Debug)]
pub(super) struct Envelope {
    bytes: [u8; ENVELOPE_MAX],
    /// 0: nothing kept.
    len: usize,
    state: AtValue,
    /// Digits may differ (no usage figure in the envelope).
    digits_may_differ: bool,
    /// The current line may capture (set for an event's first data line, cleared once used).
    pub armed: bool,
    misses: u8,
}

impl Default for Envelope {
    fn default() -> Self {
        Envelope {
            bytes: [0; ENVELOPE_MAX],
            len: 0,
            state: AtValue {
                last: PLAIN_KEY,
                depth: 0,
                sums: [0; 4],
                counts: Counts::default(),
            },
            digits_may_differ: false,
            armed: false,
            misses: 0,
        }
    }
}

impl Envelope {
    /// The kept state when `line` (an event's data from its first byte) starts with the kept
    /// envelope and goes on past it; then the skim resumes at the returned offset (the value's
    /// opening quote). On a miss, arms a capture for this line (unless paused).
    #[inline]
    pub fn lookup(&mut self, line: &[u8]) -> Option<(usize, AtValue)> {
        // Paused: not even a compare (the count goes on so that a try comes now and then).
        let misses = self.misses.wrapping_add(1);
        if misses > MISSES_BEFORE_PAUSE && !misses.is_multiple_of(RETRY_EVERY) {
            self.misses = misses;
            return None;
        }
        let n = self.len;
        if n != 0
            && line.len() > n
            && (line[..n] == self.bytes[..n]
                || self.digits_may_differ && same_but_digits(&line[..n], &self.bytes[..n]))
        {
            self.misses = 0;
            return Some((n, self.state));
        }
        self.misses = misses;
        self.armed = true;
        None
    }

    /// Keep `prefix` (the data up to an output value's opening quote) and the state there.
    #[cold]
    pub fn capture(&mut self, prefix: &[u8], state: AtValue) {
        self.armed = false;
        debug_assert!(state.last.value != ValueKind::Other && state.last.usage.is_none());
        if prefix.is_empty() || prefix.len() > ENVELOPE_MAX {
            return;
        }
        self.bytes[..prefix.len()].copy_from_slice(prefix);
        self.len = prefix.len();
        self.digits_may_differ =
            state.counts.input_tokens.is_none() && state.counts.output_tokens.is_none();
        self.state = state;
    }
}

const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// The high bit of each byte of `x` that is an ASCII digit (eight bytes at a time; each
/// addition stays within its byte, so nothing carries).
fn digit_bytes(x: u64) -> u64 {
    let low = x & LOW7;
    let at_least_0 = low.wrapping_add(0x5050_5050_5050_5050); // 0x30 + 0x50 = 0x80
    let above_9 = low.wrapping_add(0x4646_4646_4646_4646); // 0x3a + 0x46 = 0x80
    at_least_0 & !above_9 & !x & HIGH
}

/// The high bit of each byte of `x` that is not zero.
fn nonzero_bytes(x: u64) -> u64 {
    ((x & LOW7).wrapping_add(LOW7) | x) & HIGH
}

/// `a` and `b` (of equal length) differ only where both hold a digit. Eight bytes a step: an
/// equal step costs two loads, a compare and a branch.
fn same_but_digits(a: &[u8], b: &[u8]) -> bool {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let (wa, ta) = a.as_chunks::<8>();
    let (wb, tb) = b.as_chunks::<8>();
    for (x, y) in wa.iter().zip(wb) {
        let (x, y) = (u64::from_le_bytes(*x), u64::from_le_bytes(*y));
        if x != y && nonzero_bytes(x ^ y) & !(digit_bytes(x) & digit_bytes(y)) != 0 {
            return false;
        }
    }
    let digit = |c: &u8| c.is_ascii_digit();
    ta.iter()
        .zip(tb)
        .all(|(x, y)| x == y || digit(x) && digit(y))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits_for_digits_only() {
        let base = b"{\"type\":\"x\",\"sequence_number\":17,\"item_id\":\"msg_1a\",\"delta\":";
        assert!(same_but_digits(base, base));
        let mut other = *base;
        for (i, &c) in base.iter().enumerate() {
            for d in [b'0', b'9', b'a', b'/', b':', b' ', 0x80 | b'5', 0xb0, 0xb9] {
                other[i] = d;
                let expect = c == d || c.is_ascii_digit() && d.is_ascii_digit();
                assert_eq!(same_but_digits(base, &other), expect, "{i}: {c} vs {d}");
                assert_eq!(same_but_digits(&other, base), expect, "{i}: {d} vs {c}");
            }
            other[i] = c;
        }
    }
}
