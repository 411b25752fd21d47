//! Retry hints: how long an upstream asks us to wait, from every header format providers use
//! (reliability-semantics §6) and from the common phrases in error bodies. Garbage is ignored
//! (never a panic), dates in the past give nothing, absurd values are clamped.

use serde::Serialize;

#[cfg(test)]
use crate::dialect::ratelimit::HEADERS_READ;
use crate::dialect::ratelimit::{Family, RateLimits, number};
pub use crate::dialect::ratelimit::{
    MAX_HINT_MS, parse_duration, parse_reset, parse_retry_after, parse_rfc3339,
};

/// Where a hint came from (kept in the decision record).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HintSource {
    RetryAfterMs,
    RetryAfter,
    #[serde(rename = "openai_reset")]
    OpenAiReset,
    AnthropicReset,
    RateLimitReset,
    Body,
    /// A restatement rule's default (the upstream gave none).
    Restated,
    /// A per-day quota with no hint: the assumed daily reset (capped like a backoff).
    DailyReset,
}

impl HintSource {
    pub fn as_str(self) -> &'static str {
        match self {
            HintSource::RetryAfterMs => "retry_after_ms",
            HintSource::RetryAfter => "retry_after",
            HintSource::OpenAiReset => "openai_reset",
            HintSource::AnthropicReset => "anthropic_reset",
            HintSource::RateLimitReset => "rate_limit_reset",
            HintSource::Body => "body",
            HintSource::Restated => "restated",
            HintSource::DailyReset => "daily_reset",
        }
    }

    /// Header hints are the upstream's own word; body prose is a guess.
    pub fn is_header(self) -> bool {
        !matches!(
            self,
            HintSource::Body | HintSource::Restated | HintSource::DailyReset
        )
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Hint {
    pub ms: u64,
    pub source: HintSource,
}

fn hint(ms: u64, source: HintSource) -> Option<Hint> {
    (ms > 0).then_some(Hint {
        ms: ms.min(MAX_HINT_MS),
        source,
    })
}

/// The upstream's retry hint from what its answer's head said (`RateLimits`), in the order of
/// trust: `retry-after-ms`, `retry-after`, then the reset of each exhausted limit (the longest),
/// OpenAI's before Anthropic's, Anthropic's unified reset only at a rejected status, and last
/// the generic `x-ratelimit-reset`.
pub fn from_limits(l: &RateLimits) -> Option<Hint> {
    if let Some(ms) = l.retry_after_ms {
        return hint(ms, HintSource::RetryAfterMs);
    }
    if let Some(ms) = l.retry_after {
        return hint(ms, HintSource::RetryAfter);
    }
    let exhausted = |fams: &[Family]| {
        fams.iter()
            .map(|f| l.window(*f))
            .filter(|w| w.remaining.is_some_and(|r| r <= 0.0))
            .filter_map(|w| w.reset_ms)
            .max()
    };
    // OpenAI: the reset of whichever limit is exhausted (the reset is time to full refill).
    if let Some(ms) = exhausted(&[Family::OpenAiRequests, Family::OpenAiTokens]) {
        return hint(ms, HintSource::OpenAiReset);
    }
    let anthropic = exhausted(&[
        Family::AnthropicRequests,
        Family::AnthropicTokens,
        Family::AnthropicInputTokens,
        Family::AnthropicOutputTokens,
    ])
    .or(l.unified_reset_ms.filter(|_| l.unified_rejected));
    if let Some(ms) = anthropic {
        return hint(ms, HintSource::AnthropicReset);
    }
    hint(l.reset_ms?, HintSource::RateLimitReset)
}

const DAY_MS: u64 = 24 * 3600 * 1000;

/// A per-day quota named in an error body (`lower`, lower-cased) that gave no retry hint: the
/// time until the assumed daily reset. Google resets its per-day quotas at midnight Pacific
/// time (taken as 08:00 UTC, standard time); any other provider's day is taken to end at
/// midnight UTC. The cooldown caps it (`max_cooldown_ms`), so a wrong guess costs one probe.
pub fn daily_reset(lower: &str, now_unix_ms: u64) -> Option<Hint> {
    let per_day = ["perday", "per day", "per_day", "daily quota", "daily limit"]
        .iter()
        .any(|m| lower.contains(m));
    if !per_day {
        return None;
    }
    let google = lower.contains("resource_exhausted") || lower.contains("googleapis");
    let offset = if google { 8 * 3600 * 1000 } else { 0 };
    let into_day = (now_unix_ms + DAY_MS - offset) % DAY_MS;
    hint(DAY_MS - into_day, HintSource::DailyReset)
}

/// Phrases such as "please retry in 1.5s", "try again in 20 seconds", "resets in 2h3m",
/// "try again in 1m30s", and times to retry at: "retry after 2026-12-05T07:00:00Z", "available
/// at Sat, 05 Dec 2026 07:00:00 GMT" (RFC 3339 or an HTTP-date; `now_unix_ms` makes it a wait).
pub fn from_text(text: &str, now_unix_ms: u64) -> Option<Hint> {
    let lower = text.to_ascii_lowercase();
    // Google's RetryInfo detail: `"retryDelay": "37s"`.
    if let Some(pos) = lower.find("\"retrydelay\"") {
        let rest = lower[pos + "\"retrydelay\"".len()..].trim_start_matches([' ', ':', '"']);
        if let Some(ms) = duration_phrase(rest) {
            return hint(ms, HintSource::Body);
        }
    }
    let waits = [
        "retry in ",
        "try again in ",
        "retry after ",
        "resets in ",
        "reset after ",
        "resets after ",
    ];
    for at in after(&lower, &waits) {
        if let Some(ms) = duration_phrase(&lower[at..]) {
            return hint(ms, HintSource::Body);
        }
    }
    let times = [
        "retry after ",
        "retry at ",
        "try again at ",
        "try again after ",
        "available at ",
        "available after ",
        "resets at ",
        "reset at ",
    ];
    for at in after(&lower, &times) {
        // (ASCII lower-casing kept every byte where it was: the original's case parses.)
        let rest = text.get(at..).unwrap_or("");
        if let Some(at) = time_phrase(rest) {
            return hint(at.saturating_sub(now_unix_ms), HintSource::Body);
        }
    }
    None
}

/// Where the words after each of `phrases` found in `lower` begin, in the phrases' order.
fn after<'a>(lower: &'a str, phrases: &'a [&str]) -> impl Iterator<Item = usize> + 'a {
    phrases
        .iter()
        .filter_map(move |p| lower.find(p).map(|pos| pos + p.len()))
}

/// An RFC 3339 time or an HTTP-date at the start of `s`, as Unix milliseconds.
fn time_phrase(s: &str) -> Option<u64> {
    let token = s
        .split_whitespace()
        .next()?
        .trim_end_matches(['.', ',', ';', ')', '"', '\'']);
    if let Some(at) = parse_rfc3339(token) {
        return Some(at);
    }
    // An HTTP-date is 29 characters: `Sat, 05 Dec 2026 07:00:00 GMT`.
    let date = s.get(..29)?;
    let t = httpdate::parse_http_date(date).ok()?;
    Some(t.duration_since(std::time::UNIX_EPOCH).ok()?.as_millis() as u64)
}

/// `1.5s`, `20 seconds`, `2h3m4s`, `5 minutes` at the start of `s`.
fn duration_phrase(s: &str) -> Option<u64> {
    let token: String = s
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '.' || *c == ' ')
        .collect();
    // A date or a time of day (`2026-12-05T…`, `07:00`) is a time to retry at, not a wait.
    if s[token.len()..].starts_with(['-', ':', '/']) {
        return None;
    }
    let mut words = token.split_whitespace();
    let first = words.next()?.trim_end_matches('.');
    if let Some(ms) = parse_duration(first)
        && first.bytes().any(|c| c.is_ascii_alphabetic())
    {
        return Some(ms);
    }
    let n = number(first)?;
    let unit = words.next().unwrap_or("s");
    let unit_ms = match unit.trim_end_matches(['.', 's']) {
        "m" | "min" | "minute" => 60_000.0,
        "h" | "hr" | "hour" => 3_600_000.0,
        "d" | "day" => 86_400_000.0,
        "ms" | "millisecond" => 1.0,
        _ => 1000.0,
    };
    Some((n * unit_ms).min(MAX_HINT_MS as f64).ceil() as u64)
}

#[cfg(test)]
mod tests;
