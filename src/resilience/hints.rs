//! Retry hints: how long an upstream asks us to wait, from every header format providers use
//! (reliability-semantics §6) and from the common phrases in error bodies. Garbage is ignored
//! (never a panic), dates in the past give nothing, absurd values are clamped.

use serde::Serialize;

/// The longest hint we believe: quota windows really can be weeks, beyond that it is garbage.
pub const MAX_HINT_MS: u64 = 30 * 24 * 3600 * 1000;

/// Where a hint came from (kept in the decision record).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HintSource {
    RetryAfterMs,
    RetryAfter,
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

/// A finite, non-negative float, or nothing.
fn number(v: &str) -> Option<f64> {
    let f: f64 = v.trim().parse().ok()?;
    (f.is_finite() && f >= 0.0).then_some(f)
}

fn ms_from_secs(f: f64) -> u64 {
    (f * 1000.0).min(MAX_HINT_MS as f64).ceil() as u64
}

/// `Retry-After`: delay-seconds (a float is tolerated) or an HTTP-date.
pub fn parse_retry_after(v: &str, now_unix_ms: u64) -> Option<u64> {
    let v = v.trim();
    if let Some(f) = number(v) {
        return Some(ms_from_secs(f));
    }
    let t = httpdate::parse_http_date(v).ok()?;
    let at = t.duration_since(std::time::UNIX_EPOCH).ok()?.as_millis() as u64;
    Some(at.saturating_sub(now_unix_ms))
}

/// Go-style durations as OpenAI sends them (`6m0s`, `547ms`, `2m52.8s`, `1h2m`), or bare seconds.
pub fn parse_duration(v: &str) -> Option<u64> {
    let v = v.trim();
    if v.is_empty() {
        return None;
    }
    if let Some(f) = number(v) {
        return Some(ms_from_secs(f));
    }
    let b = v.as_bytes();
    let mut i = 0;
    let mut total = 0f64;
    while i < b.len() {
        let start = i;
        while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'.') {
            i += 1;
        }
        let n: f64 = v[start..i].parse().ok()?;
        let ustart = i;
        while i < b.len() && b[i].is_ascii_alphabetic() {
            i += 1;
        }
        let unit_ms = match &v[ustart..i] {
            "ms" => 1.0,
            "s" => 1000.0,
            "m" => 60_000.0,
            "h" => 3_600_000.0,
            "d" => 86_400_000.0,
            _ => return None,
        };
        total += n * unit_ms;
    }
    (total.is_finite() && total >= 0.0).then(|| total.min(MAX_HINT_MS as f64).ceil() as u64)
}

/// Days since 1970-01-01 of a civil date (proleptic Gregorian).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (i64::from(m) + 9) % 12;
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// RFC 3339 (`2025-08-21T12:40:59Z`, fractions and offsets allowed) to Unix milliseconds.
pub fn parse_rfc3339(v: &str) -> Option<u64> {
    let b = v.trim().as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<u32> {
        let s = std::str::from_utf8(b.get(r)?).ok()?;
        s.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| s.parse().ok())?
    };
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, s) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s > 60 {
        return None;
    }
    let mut i = 19;
    let mut frac_ms = 0u64;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        let digits = &v.trim()[start..i];
        let first3: String = digits.chars().chain("000".chars()).take(3).collect();
        frac_ms = first3.parse().ok()?;
    }
    let offset_s: i64 = match b.get(i)? {
        b'Z' | b'z' if i + 1 == b.len() => 0,
        c @ (b'+' | b'-') if i + 6 == b.len() && b[i + 3] == b':' => {
            let oh = i64::from(num(i + 1..i + 3)?);
            let om = i64::from(num(i + 4..i + 6)?);
            let o = oh * 3600 + om * 60;
            if *c == b'+' { o } else { -o }
        }
        _ => return None,
    };
    let days = days_from_civil(i64::from(y), mo, d);
    let secs = days * 86_400 + i64::from(h) * 3600 + i64::from(mi) * 60 + i64::from(s) - offset_s;
    u64::try_from(secs).ok().map(|s| s * 1000 + frac_ms)
}

/// `x-ratelimit-reset` and unified resets: seconds from now, or a Unix epoch (s or ms), or RFC 3339.
pub fn parse_reset(v: &str, now_unix_ms: u64) -> Option<u64> {
    if let Some(f) = number(v) {
        return Some(if f > 10_000_000_000.0 {
            (f as u64).saturating_sub(now_unix_ms) // epoch milliseconds
        } else if f > 1_000_000_000.0 {
            ((f * 1000.0) as u64).saturating_sub(now_unix_ms) // epoch seconds
        } else {
            ms_from_secs(f)
        });
    }
    parse_rfc3339(v).map(|at| at.saturating_sub(now_unix_ms))
}

fn remaining_is_zero(get: &dyn Fn(&str) -> Option<String>, name: &str) -> Option<bool> {
    let v = get(name)?;
    let f: f64 = v.trim().parse().ok()?;
    Some(f <= 0.0)
}

/// Every header [`from_headers`] may read (`tests::from_headers_reads_only_the_listed_names`
/// checks it). A held stream keeps no more of its response head than these and the rules'
/// header markers: they are all that judging an error event in the stream can use.
pub const HEADERS_READ: [&str; 17] = [
    "retry-after-ms",
    "retry-after",
    "x-ratelimit-remaining-requests",
    "x-ratelimit-reset-requests",
    "x-ratelimit-remaining-tokens",
    "x-ratelimit-reset-tokens",
    "anthropic-ratelimit-requests-remaining",
    "anthropic-ratelimit-requests-reset",
    "anthropic-ratelimit-tokens-remaining",
    "anthropic-ratelimit-tokens-reset",
    "anthropic-ratelimit-input-tokens-remaining",
    "anthropic-ratelimit-input-tokens-reset",
    "anthropic-ratelimit-output-tokens-remaining",
    "anthropic-ratelimit-output-tokens-reset",
    "anthropic-ratelimit-unified-status",
    "anthropic-ratelimit-unified-reset",
    "x-ratelimit-reset",
];

/// The upstream's retry hint from response headers, in the order of trust:
/// `retry-after-ms`, `retry-after`, then provider reset headers for an exhausted limit.
pub fn from_headers(get: &dyn Fn(&str) -> Option<String>, now_unix_ms: u64) -> Option<Hint> {
    if let Some(ms) = get("retry-after-ms").as_deref().and_then(number) {
        return hint(ms.ceil() as u64, HintSource::RetryAfterMs);
    }
    if let Some(ms) = get("retry-after").and_then(|v| parse_retry_after(&v, now_unix_ms)) {
        return hint(ms, HintSource::RetryAfter);
    }
    // OpenAI: the reset of whichever limit is exhausted (the reset is time to full refill).
    let mut best: Option<u64> = None;
    for kind in ["requests", "tokens"] {
        if remaining_is_zero(get, &format!("x-ratelimit-remaining-{kind}")) == Some(true)
            && let Some(ms) = get(&format!("x-ratelimit-reset-{kind}"))
                .as_deref()
                .and_then(parse_duration)
        {
            best = Some(best.map_or(ms, |b: u64| b.max(ms)));
        }
    }
    if let Some(ms) = best {
        return hint(ms, HintSource::OpenAiReset);
    }
    // Anthropic: RFC 3339 resets for each exhausted bucket; the unified (subscription) reset
    // only when the status says rejected.
    for kind in ["requests", "tokens", "input-tokens", "output-tokens"] {
        if remaining_is_zero(get, &format!("anthropic-ratelimit-{kind}-remaining")) == Some(true)
            && let Some(ms) = get(&format!("anthropic-ratelimit-{kind}-reset"))
                .and_then(|v| parse_reset(&v, now_unix_ms))
        {
            best = Some(best.map_or(ms, |b: u64| b.max(ms)));
        }
    }
    if best.is_none()
        && get("anthropic-ratelimit-unified-status").as_deref() == Some("rejected")
        && let Some(v) = get("anthropic-ratelimit-unified-reset")
    {
        best = parse_reset(&v, now_unix_ms);
    }
    if let Some(ms) = best {
        return hint(ms, HintSource::AnthropicReset);
    }
    let ms = get("x-ratelimit-reset").and_then(|v| parse_reset(&v, now_unix_ms))?;
    hint(ms, HintSource::RateLimitReset)
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

/// Phrases such as "please retry in 1.5s", "try again in 20 seconds", "resets in 2h3m".
pub fn from_text(text: &str) -> Option<Hint> {
    let lower = text.to_ascii_lowercase();
    // Google's RetryInfo detail: `"retryDelay": "37s"`.
    if let Some(pos) = lower.find("\"retrydelay\"") {
        let rest = lower[pos + "\"retrydelay\"".len()..].trim_start_matches([' ', ':', '"']);
        if let Some(ms) = duration_phrase(rest) {
            return hint(ms, HintSource::Body);
        }
    }
    for phrase in [
        "retry in ",
        "try again in ",
        "retry after ",
        "resets in ",
        "reset after ",
        "resets after ",
    ] {
        let Some(pos) = lower.find(phrase) else {
            continue;
        };
        let rest = &lower[pos + phrase.len()..];
        if let Some(ms) = duration_phrase(rest) {
            return hint(ms, HintSource::Body);
        }
    }
    None
}

/// `1.5s`, `20 seconds`, `2h3m4s`, `5 minutes` at the start of `s`.
fn duration_phrase(s: &str) -> Option<u64> {
    let token: String = s
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '.' || *c == ' ')
        .collect();
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
