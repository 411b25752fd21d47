//! The token counts of a JSON answer's `usage` object, read without building anything: the
//! object is found by its key, then each figure by its own key inside it. OpenAI's chat and
//! Responses APIs and Anthropic's Messages API name them differently; cached prompt tokens sit
//! in `prompt_tokens_details` / `input_tokens_details` (OpenAI) or beside them (Anthropic).

use memchr::memmem::Finder;
use std::sync::LazyLock;

/// Prompt, completion and cached prompt tokens (each when the answer says).
pub type Usage = [Option<u32>; 3];

struct Keys {
    usage: Finder<'static>,
    /// For each figure, the keys that carry it.
    figures: [Vec<Finder<'static>>; 3],
}

static KEYS: LazyLock<Keys> = LazyLock::new(|| Keys {
    usage: Finder::new(b"\"usage\""),
    figures: [
        vec![
            Finder::new(b"\"prompt_tokens\""),
            Finder::new(b"\"input_tokens\""),
        ],
        vec![
            Finder::new(b"\"completion_tokens\""),
            Finder::new(b"\"output_tokens\""),
        ],
        vec![
            Finder::new(b"\"cached_tokens\""),
            Finder::new(b"\"cache_read_input_tokens\""),
        ],
    ],
});

/// The figures of the `usage` object in `body` (`None` when there is none in it).
pub fn usage(body: &[u8]) -> Option<Usage> {
    let keys = &*KEYS;
    let at = keys.usage.find(body)?;
    let tail = &body[at + 7..];
    let mut out = [None; 3];
    for (slot, finders) in out.iter_mut().zip(&keys.figures) {
        *slot = finders.iter().find_map(|f| {
            f.find(tail)
                .and_then(|p| number(&tail[p + f.needle().len()..]))
        });
    }
    Some(out)
}

/// The number after `: ` (at most u32::MAX).
fn number(s: &[u8]) -> Option<u32> {
    let mut i = 0;
    while i < s.len() && matches!(s[i], b' ' | b'\t' | b'\r' | b'\n' | b':') {
        i += 1;
    }
    let start = i;
    let mut n: u64 = 0;
    while i < s.len() && s[i].is_ascii_digit() {
        n = (n * 10 + u64::from(s[i] - b'0')).min(u64::from(u32::MAX));
        i += 1;
    }
    (i > start).then_some(n as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_each_dialects_usage() {
        let chat = br#"{"id":"c","choices":[{"message":{"content":"prompt_tokens"}}],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10,"prompt_tokens_details":{"cached_tokens":2}}}"#;
        assert_eq!(usage(chat), Some([Some(7), Some(3), Some(2)]));
        let messages = br#"{"type":"message","usage":{"input_tokens": 25, "cache_read_input_tokens": 5, "output_tokens": 9}}"#;
        assert_eq!(usage(messages), Some([Some(25), Some(9), Some(5)]));
        let responses = br#"{"output":[],"usage":{"input_tokens":3,"input_tokens_details":{"cached_tokens":0},"output_tokens":4}}"#;
        assert_eq!(usage(responses), Some([Some(3), Some(4), Some(0)]));
        assert_eq!(usage(br#"{"choices":[]}"#), None);
        assert_eq!(
            usage(br#"{"usage":{"prompt_tokens":"x"}}"#),
            Some([None, None, None])
        );
        assert_eq!(
            usage(br#"{"usage":{"prompt_tokens":99999999999}}"#).map(|u| u[0]),
            Some(Some(u32::MAX))
        );
    }
}
