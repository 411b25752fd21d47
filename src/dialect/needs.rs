//! What a request needs from a target (tools, vision, structured output, context size, region,
//! policy tags), read by scanning the body bytes: no parse, no allocation beyond the result.

use crate::http::Head;
use memchr::memmem::Finder;
use std::sync::LazyLock;

/// What one request needs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Needs {
    pub tools: bool,
    pub vision: bool,
    pub structured_output: bool,
    /// Estimated prompt plus requested output tokens.
    pub context_tokens: u64,
    /// The output the request asks for (`max_tokens` and its kin; 0: none said).
    pub output_tokens: u64,
    /// The body's size, the prompt's estimate before a provider's ratio (`flow::estimate`).
    pub prompt_bytes: u64,
    /// From `x-ringside-region`.
    pub region: Option<String>,
    /// From `x-ringside-require-tags` (comma-separated).
    pub tags: Vec<String>,
}

/// The keys a request is scanned for, each found by SIMD (`memmem`) with its searcher built
/// once: built per call, or compared window by window, they cost more than the rest of the
/// request's intake.
struct Keys {
    tools: [Finder<'static>; 2],
    structured: [Finder<'static>; 2],
    vision: [Finder<'static>; 4],
    output: [Finder<'static>; 3],
}

static KEYS: LazyLock<Keys> = LazyLock::new(|| Keys {
    tools: [Finder::new(b"\"tools\""), Finder::new(b"\"functions\"")],
    structured: [
        Finder::new(b"\"json_schema\""),
        Finder::new(b"\"json_object\""),
    ],
    vision: [
        Finder::new(b"\"image_url\""),
        Finder::new(b"\"input_image\""),
        Finder::new(b"\"type\":\"image\""),
        Finder::new(b"\"type\": \"image\""),
    ],
    output: [
        Finder::new(b"\"max_tokens\""),
        Finder::new(b"\"max_completion_tokens\""),
        Finder::new(b"\"max_output_tokens\""),
    ],
});

/// How much of the body a request's route needs read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scan {
    /// Headers only: nothing restricts capabilities, nothing counts tokens.
    Headers,
    /// The token estimate too: a quota, budget or cap counts tokens.
    Tokens,
    /// Capabilities too: a target of the route serves only some.
    Full,
}

/// After the key ending at `key_end`, the first byte of its value.
fn value_start(body: &[u8], key_end: usize) -> Option<usize> {
    let mut i = key_end;
    while body.get(i)?.is_ascii_whitespace() {
        i += 1;
    }
    if body[i] != b':' {
        return None;
    }
    i += 1;
    while body.get(i)?.is_ascii_whitespace() {
        i += 1;
    }
    Some(i)
}

/// A key whose value is a non-empty array (`"tools": [ {...} ]`).
fn non_empty_array(body: &[u8], key: &Finder<'_>) -> bool {
    let mut from = 0;
    while let Some(p) = key.find(&body[from..]) {
        let end = from + p + key.needle().len();
        if let Some(v) = value_start(body, end)
            && body[v] == b'['
        {
            let mut j = v + 1;
            while body.get(j).is_some_and(u8::is_ascii_whitespace) {
                j += 1;
            }
            if body.get(j).is_some_and(|&b| b != b']') {
                return true;
            }
        }
        from = end;
    }
    false
}

/// The whole number after the key, at most `u32::MAX`: a huge `max_tokens` is a huge need, not
/// none, and stays small enough to price.
fn number_after(body: &[u8], key: &Finder<'_>) -> Option<u64> {
    let p = key.find(body)?;
    let v = value_start(body, p + key.needle().len())?;
    let digits = body[v..].iter().take_while(|b| b.is_ascii_digit());
    let mut n: u64 = 0;
    let mut any = false;
    for d in digits {
        n = n
            .saturating_mul(10)
            .saturating_add(u64::from(d - b'0'))
            .min(u64::from(u32::MAX));
        any = true;
    }
    any.then_some(n)
}

/// Scan the request as deep as `scan` says.
pub fn needs(body: &[u8], head: &Head, scan: Scan) -> Needs {
    let mut n = Needs {
        region: head
            .get_str("x-ringside-region")
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_string),
        tags: head
            .get_str("x-ringside-require-tags")
            .map(|v| {
                v.split(',')
                    .map(str::trim)
                    .filter(|t| !t.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default(),
        ..Default::default()
    };
    if scan == Scan::Headers {
        return n;
    }
    let keys = &*KEYS;
    if scan == Scan::Full {
        let found = |f: &Finder<'_>| f.find(body).is_some();
        n.tools = keys.tools.iter().any(|k| non_empty_array(body, k));
        n.structured_output = keys.structured.iter().any(found);
        n.vision = keys.vision.iter().any(found);
    }
    let output = keys
        .output
        .iter()
        .find_map(|k| number_after(body, k))
        .unwrap_or(0);
    // About four bytes of JSON per token: a cheap, conservative-enough estimate.
    n.context_tokens = (body.len() as u64 / 4).saturating_add(output);
    n.output_tokens = output;
    n.prompt_bytes = body.len() as u64;
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::HeadLimits;

    fn head(extra: &str) -> Head {
        let raw = format!("POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n{extra}\r\n");
        let limits = HeadLimits {
            max_head_bytes: 8192,
            max_headers: 64,
        };
        crate::http::head::parse_request(raw.as_bytes(), limits)
            .unwrap()
            .unwrap()
            .0
    }

    #[test]
    fn reads_needs() {
        let b = br#"{"model":"m","tools":[{"type":"function"}],"max_tokens":100,"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}],"response_format":{"type":"json_schema"}}"#;
        let n = needs(
            b,
            &head("x-ringside-region: eu\r\nx-ringside-require-tags: zdr, hipaa\r\n"),
            Scan::Full,
        );
        assert!(n.tools && n.vision && n.structured_output);
        assert_eq!(n.context_tokens, b.len() as u64 / 4 + 100);
        assert_eq!(n.region.as_deref(), Some("eu"));
        assert_eq!(n.tags, ["zdr", "hipaa"]);
        let n = needs(
            br#"{"model":"m","tools": [ ],"messages":[]}"#,
            &head(""),
            Scan::Full,
        );
        assert!(!n.tools && !n.vision && !n.structured_output);
        assert_eq!(needs(b, &head(""), Scan::Headers), Needs::default());
        // Counting tokens reads the output asked for, not the capabilities.
        let n = needs(b, &head(""), Scan::Tokens);
        assert!(!n.tools && !n.vision && !n.structured_output);
        assert_eq!(
            (n.output_tokens, n.context_tokens),
            (100, b.len() as u64 / 4 + 100)
        );
        let huge = br#"{"max_tokens": 99999999999999999999999}"#;
        assert_eq!(
            needs(huge, &head(""), Scan::Tokens).output_tokens,
            u64::from(u32::MAX)
        );
        // The first key that carries a number counts.
        let n = needs(
            br#"{"max_tokens":"x","max_output_tokens":7}"#,
            &head(""),
            Scan::Tokens,
        );
        assert_eq!(n.output_tokens, 7);
    }
}
