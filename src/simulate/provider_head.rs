//! The head a provider sends with a success (fault parameter `provider-head`): its request
//! ids, cookies, rate-limit state and its edge's own headers, about 1.5 KB, as OpenAI and
//! Anthropic send them. Ringside passes them on to the client; a held stream keeps only the
//! few that judging its end may read (`Head::keep_only`). The simulator's plain head is a
//! tenth of that, so without this its streams cost less than real ones.

use super::body::Api;
use super::fault::Fault;
use std::time::{Duration, SystemTime};

/// A plain JSON success's own headers: the provider's head with `provider-head`, else only
/// the request id in the provider's name for it.
pub fn of_success(api: Api, seq: u64, fault: &Fault) -> Vec<(&'static str, String)> {
    if fault.provider_head {
        return headers(api, seq);
    }
    let id_header = match api {
        Api::Messages | Api::CountTokens => "request-id",
        _ => "x-request-id",
    };
    vec![(id_header, format!("req_sim{seq}"))]
}

/// A stream's own headers: with `ratelimit-headers` a spent token limit (a stream served as
/// the limit ran out: what judging an error in it may go by), with `provider-head` the
/// provider's head.
pub fn of_stream(api: Api, seq: u64, fault: &Fault) -> Vec<(&'static str, String)> {
    let mut h = Vec::new();
    if fault.ratelimit_headers {
        let reset = humantime::format_rfc3339_seconds(SystemTime::now() + Duration::from_secs(20));
        h.extend([
            ("x-ratelimit-remaining-tokens", "0".to_string()),
            ("x-ratelimit-reset-tokens", "20s".into()),
            ("anthropic-ratelimit-tokens-remaining", "0".into()),
            ("anthropic-ratelimit-tokens-reset", reset.to_string()),
        ]);
    }
    if fault.provider_head {
        h.extend(headers(api, seq));
    }
    h
}

/// The provider's headers: its own, then its edge's (Cloudflare).
fn headers(api: Api, seq: u64) -> Vec<(&'static str, String)> {
    let anthropic = matches!(api, Api::Messages | Api::CountTokens);
    let (id, fixed, domain) = match anthropic {
        true => (
            ("request-id", format!("req_011CUsim{seq:0>16}AbCdEfGhJk")),
            ANTHROPIC,
            "api.anthropic.com",
        ),
        false => (
            ("x-request-id", format!("req_{seq:0>32x}")),
            OPENAI,
            "api.openai.com",
        ),
    };
    let cookies = [
        format!(
            "__cf_bm={CF_BM}; path=/; expires=Thu, 03-Dec-26 12:30:00 GMT; domain=.{domain}; HttpOnly; Secure; SameSite=None"
        ),
        format!("_cfuvid={CFUVID}; path=/; domain=.{domain}; HttpOnly; Secure; SameSite=None"),
    ];
    let ray = format!("{:0>16x}-AMS", seq.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let mut h = vec![id];
    h.extend(fixed.iter().chain(EDGE).map(|&(n, v)| (n, v.to_string())));
    h.extend(cookies.map(|c| ("set-cookie", c)));
    h.push(("cf-ray", ray));
    h
}

const ANTHROPIC: &[(&str, &str)] = &[
    (
        "anthropic-organization-id",
        "3f2b8c1e-5d4a-4e7b-9c6d-1a2b3c4d5e6f",
    ),
    ("anthropic-ratelimit-requests-limit", "4000"),
    ("anthropic-ratelimit-requests-remaining", "3999"),
    ("anthropic-ratelimit-requests-reset", "2026-12-03T12:00:01Z"),
    ("anthropic-ratelimit-input-tokens-limit", "2000000"),
    ("anthropic-ratelimit-input-tokens-remaining", "1999000"),
    (
        "anthropic-ratelimit-input-tokens-reset",
        "2026-12-03T12:00:01Z",
    ),
    ("anthropic-ratelimit-output-tokens-limit", "400000"),
    ("anthropic-ratelimit-output-tokens-remaining", "400000"),
    (
        "anthropic-ratelimit-output-tokens-reset",
        "2026-12-03T12:00:00Z",
    ),
    ("anthropic-ratelimit-tokens-limit", "2400000"),
    ("anthropic-ratelimit-tokens-remaining", "2399000"),
    ("anthropic-ratelimit-tokens-reset", "2026-12-03T12:00:01Z"),
    ("via", "1.1 google"),
];

const OPENAI: &[(&str, &str)] = &[
    ("access-control-expose-headers", "X-Request-ID"),
    ("openai-organization", "user-a1b2c3d4e5f6g7h8i9j0k1l2"),
    ("openai-processing-ms", "287"),
    ("openai-project", "proj_A1b2C3d4E5f6G7h8I9j0K1l2"),
    ("openai-version", "2020-10-01"),
    ("x-envoy-upstream-service-time", "291"),
    ("x-ratelimit-limit-requests", "10000"),
    ("x-ratelimit-limit-tokens", "30000000"),
    ("x-ratelimit-remaining-requests", "9999"),
    ("x-ratelimit-remaining-tokens", "29999985"),
    ("x-ratelimit-reset-requests", "6ms"),
    ("x-ratelimit-reset-tokens", "0s"),
];

/// What the provider's edge (Cloudflare) adds besides its two cookies and the ray id.
const EDGE: &[(&str, &str)] = &[
    (
        "strict-transport-security",
        "max-age=31536000; includeSubDomains; preload",
    ),
    ("cf-cache-status", "DYNAMIC"),
    ("x-content-type-options", "nosniff"),
    ("server", "cloudflare"),
    ("alt-svc", "h3=\":443\"; ma=86400"),
];

const CF_BM: &str = "Zq3x8VbN2mK5pL7rT1wY4uI6oP9aS0dF3gH5jK8lZ2x-1764763200-1.0.1.1-\
    Qw8eR2tY5uI7oP1aS3dF6gH9jK2lZ4xC7vB0nM3qW5eR8tY1uI4oP6aS9dF2gH5jK7lZ0xC3vB6nM8qW1eR4t";
const CFUVID: &str = "Ab3De6Gh9Jk2Mn5Pq8St1Vw4Yz7Bc0Ef3Hi6Kl9No2-1764763200000-0.0.1.1-604800000";
