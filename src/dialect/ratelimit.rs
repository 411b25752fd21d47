//! What an answer's head says about the caller's limits and when to come back, read once per
//! answer and without allocating, into numbers the tables take: the retry headers
//! (`retry-after-ms`, `retry-after`), OpenAI's and Anthropic's rate-limit windows (remaining,
//! limit, reset), Anthropic's unified (subscription) status and reset, and the generic
//! `x-ratelimit-reset`; with `read_with`, the whole set of usage-wall headers (`unified`) in
//! the same pass. The parsers below read every format providers use
//! (reliability-semantics §6); garbage is absent (never a panic), a date in the past is zero,
//! an absurd value is clamped.

mod parse;
pub mod unified;
pub(crate) use parse::number;
pub use parse::{parse_duration, parse_reset, parse_retry_after, parse_rfc3339};

use crate::http::{Head, names_mask};
use unified::Unified;

/// The longest wait believed: quota windows really can be weeks, beyond that it is garbage.
pub const MAX_HINT_MS: u64 = 30 * 24 * 3600 * 1000;

/// A rate-limit window a provider reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    OpenAiRequests,
    OpenAiTokens,
    AnthropicRequests,
    AnthropicTokens,
    AnthropicInputTokens,
    AnthropicOutputTokens,
}

impl Family {
    const ALL: [Family; 6] = [
        Family::OpenAiRequests,
        Family::OpenAiTokens,
        Family::AnthropicRequests,
        Family::AnthropicTokens,
        Family::AnthropicInputTokens,
        Family::AnthropicOutputTokens,
    ];

    fn anthropic(self) -> bool {
        !matches!(self, Family::OpenAiRequests | Family::OpenAiTokens)
    }
}

/// One window's figures, each absent when not sent or not a number.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Window {
    /// May be negative: OpenAI reports tokens spent past the limit that way.
    pub remaining: Option<f64>,
    pub limit: Option<f64>,
    /// Until the window is full again, in ms from now.
    pub reset_ms: Option<u64>,
}

/// Everything an answer's head says about limits and waiting.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RateLimits {
    /// `retry-after-ms`.
    pub retry_after_ms: Option<u64>,
    /// `retry-after` (seconds or an HTTP date), in ms from now.
    pub retry_after: Option<u64>,
    windows: [Window; 6],
    /// `anthropic-ratelimit-unified-status: rejected` (a subscription's usage wall).
    pub unified_rejected: bool,
    pub unified_reset_ms: Option<u64>,
    /// `x-ratelimit-reset`, in ms from now.
    pub reset_ms: Option<u64>,
}

/// What one header is.
#[derive(Clone, Copy)]
enum Field {
    RetryAfterMs,
    RetryAfter,
    Remaining(Family),
    Limit(Family),
    Reset(Family),
    UnifiedStatus,
    UnifiedReset,
    GenericReset,
}

/// Every name [`RateLimits`] reads, with what it is. A held stream keeps no more of its
/// response head than these and the rules' header markers: they are all that judging an error
/// event in the stream can use.
pub const HEADERS_READ: [&str; 23] = [
    "retry-after-ms",
    "retry-after",
    "x-ratelimit-remaining-requests",
    "x-ratelimit-limit-requests",
    "x-ratelimit-reset-requests",
    "x-ratelimit-remaining-tokens",
    "x-ratelimit-limit-tokens",
    "x-ratelimit-reset-tokens",
    "anthropic-ratelimit-requests-remaining",
    "anthropic-ratelimit-requests-limit",
    "anthropic-ratelimit-requests-reset",
    "anthropic-ratelimit-tokens-remaining",
    "anthropic-ratelimit-tokens-limit",
    "anthropic-ratelimit-tokens-reset",
    "anthropic-ratelimit-input-tokens-remaining",
    "anthropic-ratelimit-input-tokens-limit",
    "anthropic-ratelimit-input-tokens-reset",
    "anthropic-ratelimit-output-tokens-remaining",
    "anthropic-ratelimit-output-tokens-limit",
    "anthropic-ratelimit-output-tokens-reset",
    "anthropic-ratelimit-unified-status",
    "anthropic-ratelimit-unified-reset",
    "x-ratelimit-reset",
];

/// The bits of [`HEADERS_READ`] in a head's names mask: most answers (and every answer of the
/// simulator without faults) share none, and are read no further.
const MASK: u64 = names_mask(&HEADERS_READ);

/// The bits of the usage wall's names (`unified::HEADERS`), read only when asked for.
const UNIFIED_MASK: u64 = names_mask(&unified::HEADERS);

/// A window's `remaining`, `limit` or `reset` (in any case).
fn window_field(what: &str, f: Family) -> Option<Field> {
    if what.eq_ignore_ascii_case("remaining") {
        Some(Field::Remaining(f))
    } else if what.eq_ignore_ascii_case("limit") {
        Some(Field::Limit(f))
    } else if what.eq_ignore_ascii_case("reset") {
        Some(Field::Reset(f))
    } else {
        None
    }
}

/// What `name` is, if it is one of [`HEADERS_READ`] (in any case).
fn field(name: &str) -> Option<Field> {
    let lower = |s: &str, p: &str| {
        s.len() >= p.len() && s.as_bytes()[..p.len()].eq_ignore_ascii_case(p.as_bytes())
    };
    let rest = |p: &str| lower(name, p).then(|| &name[p.len()..]);
    let is = |a: &str, b: &str| a.eq_ignore_ascii_case(b);
    if let Some(r) = rest("x-ratelimit-") {
        let family = |k: &str| {
            if is(k, "requests") {
                Some(Family::OpenAiRequests)
            } else if is(k, "tokens") {
                Some(Family::OpenAiTokens)
            } else {
                None
            }
        };
        if is(r, "reset") {
            return Some(Field::GenericReset);
        }
        let (what, kind) = r.split_once('-')?;
        return window_field(what, family(kind)?);
    }
    if let Some(r) = rest("anthropic-ratelimit-") {
        if is(r, "unified-status") {
            return Some(Field::UnifiedStatus);
        }
        if is(r, "unified-reset") {
            return Some(Field::UnifiedReset);
        }
        let (kind, what) = r.rsplit_once('-')?;
        let f = if is(kind, "requests") {
            Family::AnthropicRequests
        } else if is(kind, "tokens") {
            Family::AnthropicTokens
        } else if is(kind, "input-tokens") {
            Family::AnthropicInputTokens
        } else if is(kind, "output-tokens") {
            Family::AnthropicOutputTokens
        } else {
            return None;
        };
        return window_field(what, f);
    }
    if is(name, "retry-after-ms") {
        Some(Field::RetryAfterMs)
    } else if is(name, "retry-after") {
        Some(Field::RetryAfter)
    } else {
        None
    }
}

/// Whether judging an error (its retry hint, `resilience::hints::from_limits`) reads the
/// header `name`: every name read but the windows' limits, which only the load tables use.
pub fn judged(name: &str) -> bool {
    field(name).is_some_and(|f| !matches!(f, Field::Limit(_)))
}

impl RateLimits {
    /// Read `head` once (nothing at all when it carries none of the names).
    pub fn read(head: &Head, now_unix_ms: u64) -> RateLimits {
        RateLimits::read_with(head, now_unix_ms, None)
    }

    /// Read `head` once, and with `unified` a subscription account's usage-wall headers in
    /// the same pass over its lines.
    pub fn read_with(
        head: &Head,
        now_unix_ms: u64,
        mut unified: Option<&mut Unified>,
    ) -> RateLimits {
        let mask = MASK | if unified.is_some() { UNIFIED_MASK } else { 0 };
        if !head.may_have_any(mask) {
            return RateLimits::default();
        }
        let pairs = head
            .iter_in(mask)
            .filter_map(|(n, v)| Some((n, std::str::from_utf8(v).ok()?)))
            .inspect(|&(n, v)| {
                if let Some(u) = unified.as_deref_mut() {
                    u.take(n, v);
                }
            });
        RateLimits::from_pairs(pairs, now_unix_ms)
    }

    /// Read `(name, value)` pairs (a head's, or a test's list). The first of a name counts.
    pub fn from_pairs<'a>(
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
        now_unix_ms: u64,
    ) -> RateLimits {
        let mut r = RateLimits::default();
        let mut seen = 0u32;
        for (name, v) in pairs {
            let Some(f) = field(name) else { continue };
            let bit = 1 << f.index();
            if seen & bit != 0 {
                continue;
            }
            seen |= bit;
            r.take(f, v, now_unix_ms);
        }
        r
    }

    fn take(&mut self, f: Field, v: &str, now: u64) {
        let signed = || v.trim().parse::<f64>().ok();
        match f {
            Field::RetryAfterMs => self.retry_after_ms = number(v).map(|ms| ms.ceil() as u64),
            Field::RetryAfter => self.retry_after = parse_retry_after(v, now),
            Field::Remaining(fam) => self.windows[fam as usize].remaining = signed(),
            Field::Limit(fam) => self.windows[fam as usize].limit = signed(),
            Field::Reset(fam) if fam.anthropic() => {
                self.windows[fam as usize].reset_ms = parse_reset(v, now);
            }
            Field::Reset(fam) => {
                let reset = parse_duration(v).or_else(|| parse_reset(v, now));
                self.windows[fam as usize].reset_ms = reset;
            }
            Field::UnifiedStatus => self.unified_rejected = v.trim() == "rejected",
            Field::UnifiedReset => self.unified_reset_ms = parse_reset(v, now),
            Field::GenericReset => self.reset_ms = parse_reset(v, now),
        }
    }

    /// One window's figures.
    pub fn window(&self, f: Family) -> &Window {
        &self.windows[f as usize]
    }

    /// Whether anything was read.
    pub fn any(&self) -> bool {
        *self != RateLimits::default()
    }

    /// The windows, each with its family.
    pub fn windows(&self) -> impl Iterator<Item = (Family, &Window)> {
        Family::ALL.iter().map(|&f| (f, &self.windows[f as usize]))
    }
}

impl Field {
    /// A distinct bit per header (for "first of a name counts").
    fn index(self) -> u32 {
        match self {
            Field::RetryAfterMs => 0,
            Field::RetryAfter => 1,
            Field::Remaining(f) => 2 + f as u32,
            Field::Limit(f) => 8 + f as u32,
            Field::Reset(f) => 14 + f as u32,
            Field::UnifiedStatus => 20,
            Field::UnifiedReset => 21,
            Field::GenericReset => 22,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_755_779_000_000;

    #[test]
    fn every_name_read_is_listed_and_every_listed_name_is_read() {
        for name in HEADERS_READ {
            assert!(field(name).is_some(), "{name}");
            assert!(field(&name.to_ascii_uppercase()).is_some(), "{name}");
        }
        let mut bits: Vec<u32> = HEADERS_READ
            .iter()
            .filter_map(|n| field(n))
            .map(Field::index)
            .collect();
        bits.sort_unstable();
        bits.dedup();
        assert_eq!(bits.len(), HEADERS_READ.len(), "one bit per name");
        for other in [
            "x-ratelimit-",
            "x-ratelimit-limit",
            "anthropic-ratelimit-requests",
            "retry",
            "x-request-id",
        ] {
            assert!(field(other).is_none(), "{other}");
        }
    }

    #[test]
    fn a_provider_head_is_read_into_numbers() {
        let openai = [
            ("x-ratelimit-limit-requests", "500"),
            ("x-ratelimit-remaining-requests", "499"),
            ("x-ratelimit-reset-requests", "120ms"),
            ("X-RateLimit-Remaining-Tokens", "-27689"),
            ("x-ratelimit-reset-tokens", "6m0s"),
            ("retry-after", "2"),
            ("retry-after", "99"),
        ];
        let r = RateLimits::from_pairs(openai, NOW);
        let w = r.window(Family::OpenAiRequests);
        assert_eq!(
            (w.remaining, w.limit, w.reset_ms),
            (Some(499.0), Some(500.0), Some(120))
        );
        let t = r.window(Family::OpenAiTokens);
        assert_eq!((t.remaining, t.reset_ms), (Some(-27_689.0), Some(360_000)));
        assert_eq!(r.retry_after, Some(2_000), "the first of a name counts");
        let anthropic = [
            ("anthropic-ratelimit-requests-remaining", "0"),
            ("anthropic-ratelimit-requests-reset", "2025-08-21T12:40:59Z"),
            ("anthropic-ratelimit-unified-status", "rejected"),
            ("anthropic-ratelimit-unified-reset", "1755780059"),
            ("retry-after-ms", "250.2"),
        ];
        let r = RateLimits::from_pairs(anthropic, NOW);
        assert_eq!(
            r.window(Family::AnthropicRequests).reset_ms,
            Some(1_059_000)
        );
        assert!(r.unified_rejected);
        assert_eq!(r.unified_reset_ms, Some(1_059_000));
        assert_eq!(r.retry_after_ms, Some(251));
        assert!(!RateLimits::from_pairs([("x-request-id", "1")], NOW).any());
    }
}
