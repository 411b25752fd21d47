//! The value formats of retry and rate-limit headers, as providers send them: delay seconds
//! (a float tolerated), HTTP dates, Go-style durations (`6m0s`), RFC 3339 times, Unix epochs in
//! seconds or milliseconds. Garbage is absent, a time in the past is zero, an absurd value is
//! clamped to [`MAX_HINT_MS`].

use super::MAX_HINT_MS;

/// A finite, non-negative float, or nothing.
pub(crate) fn number(v: &str) -> Option<f64> {
    let f: f64 = v.trim().parse().ok()?;
    (f.is_finite() && f >= 0.0).then_some(f)
}

fn ms_from_secs(f: f64) -> u64 {
    (f * 1000.0).min(MAX_HINT_MS as f64).ceil() as u64
}

/// `Retry-After`: delay-seconds (a float is tolerated) or an HTTP-date (an RFC 3339 time,
/// which some gateways send there, is read too).
pub fn parse_retry_after(v: &str, now_unix_ms: u64) -> Option<u64> {
    let v = v.trim();
    if let Some(f) = number(v) {
        return Some(ms_from_secs(f));
    }
    if let Some(at) = parse_rfc3339(v) {
        return Some(at.saturating_sub(now_unix_ms));
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
