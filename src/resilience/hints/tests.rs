use super::*;

const NOW: u64 = 1_755_779_000_000; // 2025-08-21T12:23:20Z

fn limits(list: &[(&str, &str)]) -> RateLimits {
    RateLimits::from_pairs(list.iter().copied(), NOW)
}

#[test]
fn retry_after_seconds_float_and_date() {
    assert_eq!(parse_retry_after("30", NOW), Some(30_000));
    assert_eq!(parse_retry_after(" 1.5 ", NOW), Some(1_500));
    let date = httpdate::fmt_http_date(
        std::time::UNIX_EPOCH + std::time::Duration::from_millis(NOW + 42_000),
    );
    assert_eq!(parse_retry_after(&date, NOW), Some(42_000));
    let past = httpdate::fmt_http_date(std::time::UNIX_EPOCH);
    assert_eq!(parse_retry_after(&past, NOW), Some(0));
    assert_eq!(parse_retry_after("-5", NOW), None);
    assert_eq!(parse_retry_after("soon", NOW), None);
    assert_eq!(parse_retry_after("NaN", NOW), None);
    // An ISO 8601 / RFC 3339 time where an HTTP-date belongs.
    assert_eq!(parse_retry_after("2025-08-21T12:24:00Z", NOW), Some(40_000));
}

#[test]
fn go_durations() {
    assert_eq!(parse_duration("6m0s"), Some(360_000));
    assert_eq!(parse_duration("547ms"), Some(547));
    assert_eq!(parse_duration("2m52.8s"), Some(172_800));
    assert_eq!(parse_duration("12ms"), Some(12));
    assert_eq!(parse_duration("33.023s"), Some(33_023));
    assert_eq!(parse_duration("1h2m"), Some(3_720_000));
    assert_eq!(parse_duration("64"), Some(64_000));
    assert_eq!(parse_duration("1y"), None);
    assert_eq!(parse_duration("m"), None);
    assert_eq!(parse_duration(""), None);
    assert_eq!(parse_duration("99999999999h"), Some(MAX_HINT_MS));
}

#[test]
fn rfc3339_timestamps() {
    assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(0));
    assert_eq!(
        parse_rfc3339("2025-08-21T12:40:59Z"),
        Some(1_755_780_059_000)
    );
    assert_eq!(
        parse_rfc3339("2025-08-21T14:40:59.250+02:00"),
        Some(1_755_780_059_250)
    );
    assert_eq!(parse_rfc3339("2025-13-21T12:40:59Z"), None);
    assert_eq!(parse_rfc3339("2025-08-21 12:40"), None);
    assert_eq!(parse_rfc3339("yesterday"), None);
}

#[test]
fn header_priority_and_formats() {
    let h = [("retry-after-ms", "250"), ("retry-after", "9")];
    assert_eq!(
        from_limits(&limits(&h)),
        Some(Hint {
            ms: 250,
            source: HintSource::RetryAfterMs
        })
    );
    let h = [("Retry-After", "9")];
    assert_eq!(from_limits(&limits(&h)).map(|h| h.ms), Some(9_000));
    // OpenAI reset counts only for an exhausted limit.
    let h = [
        ("x-ratelimit-remaining-requests", "59"),
        ("x-ratelimit-reset-requests", "1s"),
        ("x-ratelimit-remaining-tokens", "-27689"),
        ("x-ratelimit-reset-tokens", "6m0s"),
    ];
    assert_eq!(
        from_limits(&limits(&h)),
        Some(Hint {
            ms: 360_000,
            source: HintSource::OpenAiReset
        })
    );
    let h = [
        ("x-ratelimit-remaining-requests", "5"),
        ("x-ratelimit-reset-requests", "1s"),
    ];
    assert_eq!(from_limits(&limits(&h)), None);
    let h = [
        ("anthropic-ratelimit-tokens-remaining", "0"),
        ("anthropic-ratelimit-tokens-reset", "2025-08-21T12:40:59Z"),
    ];
    let got = from_limits(&limits(&h)).unwrap();
    assert_eq!(
        (got.ms, got.source),
        (1_059_000, HintSource::AnthropicReset)
    );
    let h = [
        ("anthropic-ratelimit-unified-status", "rejected"),
        ("anthropic-ratelimit-unified-reset", "1755779600"),
    ];
    assert_eq!(from_limits(&limits(&h)).map(|h| h.ms), Some(600_000));
    let h = [("x-ratelimit-reset", "20")];
    assert_eq!(from_limits(&limits(&h)).map(|h| h.ms), Some(20_000));
    let h = [("x-ratelimit-reset", "1755779030")];
    assert_eq!(from_limits(&limits(&h)).map(|h| h.ms), Some(30_000));
    let h = [("x-ratelimit-reset", "1755779030000")];
    assert_eq!(from_limits(&limits(&h)).map(|h| h.ms), Some(30_000));
}

#[test]
fn garbage_is_ignored_and_absurd_is_clamped() {
    for v in ["", "abc", "-1", "inf", "1e400", "\u{0}"] {
        let h = [
            ("retry-after", v),
            ("retry-after-ms", v),
            ("x-ratelimit-reset", v),
        ];
        assert_eq!(from_limits(&limits(&h)), None, "{v:?}");
    }
    let h = [("retry-after", "99999999999999")];
    assert_eq!(from_limits(&limits(&h)).map(|h| h.ms), Some(MAX_HINT_MS));
    let h = [("retry-after", "0")];
    assert_eq!(from_limits(&limits(&h)), None);
}

#[test]
fn body_phrases() {
    let ms = |t: &str| from_text(t, 0).map(|h| h.ms);
    assert_eq!(ms("Rate limit reached. Please retry in 1.5s."), Some(1_500));
    assert_eq!(ms("Please try again in 20 seconds"), Some(20_000));
    assert_eq!(ms("quota resets in 2h3m4s"), Some(7_384_000));
    assert_eq!(ms("Retry after 5 minutes"), Some(300_000));
    assert_eq!(ms("try again in 547ms"), Some(547));
    assert_eq!(ms("try again later"), None);
    assert_eq!(ms("Rate limited. Please try again in 1m30s."), Some(90_000));
    // Times to retry at, as a wait from now.
    let now = 1_796_083_200_000; // 2026-12-01T00:00:00Z
    let at = |t: &str| from_text(t, now).map(|h| h.ms);
    assert_eq!(
        at("Quota exceeded; retry after 2026-12-01T00:01:30Z."),
        Some(90_000)
    );
    assert_eq!(
        at("retry at 2026-12-01T01:00:00.000+01:00"),
        None,
        "in the past"
    );
    assert_eq!(
        at("Capacity available at Tue, 01 Dec 2026 00:00:45 GMT, try then"),
        Some(45_000)
    );
    assert_eq!(at("Try again after 2026-12-01T00:00:10Z"), Some(10_000));
    assert_eq!(at("retry after tomorrow"), None);
    assert_eq!(
        from_text("retry in 3s", 0).map(|h| h.source),
        Some(HintSource::Body)
    );
}

#[test]
fn a_per_day_quota_without_a_hint_cools_until_the_assumed_daily_reset() {
    const HOUR: u64 = 3_600_000;
    // 2026-12-01T06:00:00Z: Google's day (midnight Pacific, 08:00 UTC) ends in two hours,
    // the UTC day in eighteen.
    let six_utc = 1_796_083_200_000 + 6 * HOUR;
    assert_eq!(six_utc % (24 * HOUR), 6 * HOUR);
    let google = r#"{"error":{"status":"resource_exhausted","details":[{"quotaid":"generaterequestsperdayperprojectpermodel-freetier"}]}}"#;
    let h = daily_reset(google, six_utc).expect("a per-day quota");
    assert_eq!((h.ms, h.source), (2 * HOUR, HintSource::DailyReset));
    assert!(
        !h.source.is_header(),
        "an assumption, not the upstream's word"
    );
    let other = daily_reset("daily quota exceeded", six_utc).map(|h| h.ms);
    assert_eq!(other, Some(18 * HOUR));
    // A per-minute quota is not a daily one.
    let minute =
        r#"{"error":{"status":"resource_exhausted","quotaid":"generaterequestsperminute"}}"#;
    assert_eq!(daily_reset(minute, six_utc), None);
}

#[test]
fn the_hint_reads_only_what_judging_keeps_of_a_held_stream() {
    // A held stream keeps, of its response head, the names `judged` says (and the rules'
    // markers): every name the hint reads is one of them, and the windows' limits are not.
    let all: Vec<(&str, &str)> = HEADERS_READ.iter().map(|n| (*n, "0")).collect();
    let kept: Vec<(&str, &str)> = all
        .iter()
        .copied()
        .filter(|(n, _)| crate::dialect::ratelimit::judged(n))
        .collect();
    assert_eq!(kept.len(), HEADERS_READ.len() - 6);
    for answer in [all.clone(), kept.clone()] {
        assert_eq!(from_limits(&limits(&answer)), from_limits(&limits(&kept)));
    }
}
