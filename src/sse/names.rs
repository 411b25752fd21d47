//! What an event's name says, decided once per distinct name: a stream repeats the same few
//! names (`content_block_delta`, `response.output_text.delta`), so the scanner keeps the last
//! name it classified and compares against it before classifying again.

use super::{Kind, NAME_MAX};

/// What the `event:` name alone decides, and what it adds to the data's classification.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct NameClass {
    /// The name settles the kind (errors, pings, terminal markers, lifecycle events).
    pub fixed: Option<Kind>,
    /// A `*.delta` of tool arguments or reasoning (Responses API): protected progress.
    pub protected_delta: bool,
    /// No name (OpenAI chat, or a bare `data:` event).
    pub empty: bool,
}

pub(super) fn name_class(name: &[u8]) -> NameClass {
    let fixed = match name {
        b"error" | b"response.failed" | b"response.error" => Some(Kind::Error),
        b"ping" => Some(Kind::Heartbeat),
        b"message_stop" | b"response.completed" | b"response.done" => Some(Kind::Terminal),
        b"message_start"
        | b"content_block_start"
        | b"content_block_stop"
        | b"response.created"
        | b"response.in_progress"
        | b"response.output_item.added"
        | b"response.output_item.done"
        | b"response.content_part.added"
        | b"response.content_part.done"
        | b"response.output_text.done" => Some(Kind::Lifecycle),
        _ => None,
    };
    let has = |word: &[u8]| name.windows(word.len()).any(|w| w == word);
    NameClass {
        fixed,
        protected_delta: name.ends_with(b".delta") && (has(b"arguments") || has(b"reasoning")),
        empty: name.is_empty(),
    }
}

/// The last name classified, and its class.
#[derive(Clone, Debug)]
pub(super) struct Names {
    last: [u8; NAME_MAX],
    len: usize,
    class: NameClass,
}

impl Default for Names {
    fn default() -> Self {
        Names {
            last: [0; NAME_MAX],
            len: 0,
            class: name_class(b""),
        }
    }
}

impl Names {
    /// The class of `name` (at most `NAME_MAX` bytes).
    #[inline]
    pub fn class(&mut self, name: &[u8]) -> NameClass {
        let n = name.len().min(NAME_MAX);
        let name = &name[..n];
        if n != self.len || !same(&self.last[..n], name) {
            self.last[..n].copy_from_slice(name);
            self.len = n;
            self.class = name_class(name);
        }
        self.class
    }
}

/// The first CR or LF among the first `limit` bytes of `s` (the end of an `event:` line, whose
/// name is short: 16 bytes per step without the setup of a general search).
#[inline]
pub(super) fn line_end_within(s: &[u8], limit: usize) -> Option<usize> {
    let n = s.len().min(limit);
    #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
    let mut at = 0;
    #[cfg(target_arch = "x86_64")]
    while at < n
        && let Some(chunk) = s[at..].first_chunk::<16>()
    {
        use std::arch::x86_64::*;
        // SAFETY: SSE2 is part of the x86_64 baseline; the load reads the 16 bytes of `chunk`.
        let mask = unsafe {
            let v = _mm_loadu_si128(chunk.as_ptr() as *const __m128i);
            let nl = _mm_or_si128(
                _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\r' as i8)),
                _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\n' as i8)),
            );
            _mm_movemask_epi8(nl) as u32
        };
        if mask != 0 {
            let k = at + mask.trailing_zeros() as usize;
            return (k < n).then_some(k);
        }
        at += 16;
    }
    let tail = s.get(at..n)?;
    tail.iter()
        .position(|&c| c == b'\r' || c == b'\n')
        .map(|k| at + k)
}

/// Equal slices of the same length, compared eight bytes at a time (names are short: this
/// beats a call to `memcmp`).
#[inline(always)]
fn same(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    if n < 8 {
        return a.iter().zip(b).all(|(x, y)| x == y);
    }
    let word = |s: &[u8], at: usize| s[at..].first_chunk::<8>().map(|w| u64::from_le_bytes(*w));
    let mut at = 0;
    while at + 8 < n {
        if word(a, at) != word(b, at) {
            return false;
        }
        at += 8;
    }
    // The last eight bytes (overlapping what was compared).
    word(a, n - 8) == word(b, n - 8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_answers_as_the_classifier_does() {
        let mut names = Names::default();
        let seq: [&[u8]; 7] = [
            b"",
            b"response.output_text.delta",
            b"response.output_text.delta",
            b"response.function_call_arguments.delta",
            b"ping",
            b"",
            b"message_stop",
        ];
        for name in seq {
            assert_eq!(names.class(name), name_class(name));
        }
        assert!(name_class(b"response.reasoning_summary_text.delta").protected_delta);
        assert!(!name_class(b"response.output_text.delta").protected_delta);
        assert_eq!(name_class(b"message_stop").fixed, Some(Kind::Terminal));
    }

    #[test]
    fn same_compares_every_byte() {
        let a = b"response.output_text.delta-and-some-more";
        for n in 0..a.len() {
            assert!(same(&a[..n], &a[..n]));
            for k in 0..n {
                let mut b = a[..n].to_vec();
                b[k] ^= 0x40;
                assert!(!same(&a[..n], &b), "n {n} k {k}");
            }
        }
        assert!(!same(b"ping", b"pin"));
    }

    #[test]
    fn line_ends_within_a_limit() {
        let plain =
            |s: &[u8], limit: usize| s.iter().take(limit).position(|&c| c == b'\r' || c == b'\n');
        let mut s = [b'a'; 70];
        for len in 0..70 {
            for at in 0..len {
                for nl in [b'\r', b'\n'] {
                    s[..len].fill(b'a');
                    s[at] = nl;
                    for limit in [0, 1, 15, 16, 17, 49, 100] {
                        assert_eq!(
                            line_end_within(&s[..len], limit),
                            plain(&s[..len], limit),
                            "len {len} at {at} limit {limit}"
                        );
                    }
                }
            }
            s[..len].fill(b'a');
            assert_eq!(line_end_within(&s[..len], 49), None);
        }
    }
}
