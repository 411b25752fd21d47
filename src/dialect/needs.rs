//! What a request needs from a target (tools, vision, structured output, context size, region,
//! policy tags), read by scanning the body bytes: no parse, no allocation beyond the result.

use crate::http::Head;

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
    /// From `x-ringside-region`.
    pub region: Option<String>,
    /// From `x-ringside-require-tags` (comma-separated).
    pub tags: Vec<String>,
}

fn find(h: &[u8], n: &[u8]) -> Option<usize> {
    h.windows(n.len()).position(|w| w == n)
}

/// After the key at `pos` (pointing at its opening quote), the first byte of its value.
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
fn non_empty_array(body: &[u8], key: &[u8]) -> bool {
    let mut from = 0;
    while let Some(p) = find(&body[from..], key) {
        let end = from + p + key.len();
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

fn number_after(body: &[u8], key: &[u8]) -> Option<u64> {
    let p = find(body, key)?;
    let v = value_start(body, p + key.len())?;
    let digits: Vec<u8> = body[v..]
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .copied()
        .collect();
    std::str::from_utf8(&digits).ok()?.parse().ok()
}

/// Scan the request. `full` false skips the body checks (no target restricts capabilities).
pub fn needs(body: &[u8], head: &Head, full: bool) -> Needs {
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
    if !full {
        return n;
    }
    n.tools = non_empty_array(body, b"\"tools\"") || non_empty_array(body, b"\"functions\"");
    n.structured_output =
        find(body, b"\"json_schema\"").is_some() || find(body, b"\"json_object\"").is_some();
    n.vision = find(body, b"\"image_url\"").is_some()
        || find(body, b"\"input_image\"").is_some()
        || find(body, b"\"type\":\"image\"").is_some()
        || find(body, b"\"type\": \"image\"").is_some();
    let output = number_after(body, b"\"max_tokens\"")
        .or_else(|| number_after(body, b"\"max_completion_tokens\""))
        .or_else(|| number_after(body, b"\"max_output_tokens\""))
        .unwrap_or(0);
    // About four bytes of JSON per token: a cheap, conservative-enough estimate.
    n.context_tokens = body.len() as u64 / 4 + output;
    n.output_tokens = output;
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
            true,
        );
        assert!(n.tools && n.vision && n.structured_output);
        assert_eq!(n.context_tokens, b.len() as u64 / 4 + 100);
        assert_eq!(n.region.as_deref(), Some("eu"));
        assert_eq!(n.tags, ["zdr", "hipaa"]);
        let n = needs(
            br#"{"model":"m","tools": [ ],"messages":[]}"#,
            &head(""),
            true,
        );
        assert!(!n.tools && !n.vision && !n.structured_output);
        assert_eq!(needs(b, &head(""), false), Needs::default());
    }
}
