//! Every secret Ringside holds for a connection, replaced by `[REDACTED]` wherever an upstream
//! echoes it: the configured key, and an OAuth connection's access token refreshed at run
//! time (what is actually sent once a refresh happened). Applied to the response headers a
//! client gets, to error bodies relayed to it, and to the error text kept for the access log,
//! the decision record and the client's diagnostics; always before the text is shortened, so
//! that a secret cut at a length limit cannot survive in part.

use crate::ids::ConnId;
use bytes::Bytes;
use std::sync::Arc;

/// Secrets shorter than this are not searched for (they would match ordinary text).
const SHORTEST: usize = 8;

/// One connection's secrets.
#[derive(Clone, Default)]
pub struct Secrets<'a> {
    pub key: &'a [u8],
    /// The refreshed access token this core holds for the connection, if any.
    pub token: Option<Arc<str>>,
}

impl<'a> Secrets<'a> {
    /// The secrets of connection slot `conn` as this core knows them.
    pub fn of(
        core: &crate::state::core::Core,
        config: &'a crate::config::Config,
        conn: ConnId,
    ) -> Self {
        Secrets {
            key: config.secret_of(conn),
            token: core
                .tokens
                .borrow()
                .get(conn.index())
                .and_then(|t| t.1.clone()),
        }
    }

    fn each(&self) -> impl Iterator<Item = &[u8]> {
        std::iter::once(self.key)
            .chain(self.token.as_deref().map(str::as_bytes))
            .filter(|s| s.len() >= SHORTEST)
    }

    /// Whether any of them occurs in `value` (a header value: short, searched only where one
    /// could fit).
    pub fn found_in(&self, value: &[u8]) -> bool {
        let found = |s: &[u8]| s.len() >= SHORTEST && value.len() >= s.len() && contains(value, s);
        // The key alone unless a token was refreshed: this runs for every relayed header.
        found(self.key) || self.token.as_deref().is_some_and(|t| found(t.as_bytes()))
    }

    /// `text` with every one of them replaced.
    pub fn redact(&self, text: &[u8]) -> Bytes {
        let mut out = Bytes::copy_from_slice(text);
        for s in self.each() {
            if memchr::memmem::find(&out, s).is_some() {
                out = replace(&out, s);
            }
        }
        out
    }

    /// The same for text, lossily (error text for records and logs).
    pub fn redact_str(&self, text: &str) -> String {
        String::from_utf8_lossy(&self.redact(text.as_bytes())).into_owned()
    }
}

/// `text` with each occurrence of `secret` replaced.
fn replace(text: &[u8], secret: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(text.len());
    let mut from = 0;
    for at in memchr::memmem::find_iter(text, secret) {
        if at < from {
            continue;
        }
        out.extend_from_slice(&text[from..at]);
        out.extend_from_slice(b"[REDACTED]");
        from = at + secret.len();
    }
    out.extend_from_slice(&text[from..]);
    Bytes::from(out)
}

/// Whether `needle` (non-empty) occurs in `hay`: candidates by its first byte, then compared.
/// Header values are short; building a substring searcher for each would cost more.
fn contains(hay: &[u8], needle: &[u8]) -> bool {
    let Some((&first, _)) = needle.split_first() else {
        return false;
    };
    if hay.len() < needle.len() {
        return false;
    }
    memchr::memchr_iter(first, &hay[..=hay.len() - needle.len()])
        .any(|i| hay[i..].starts_with(needle))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(k: &'static str) -> Secrets<'static> {
        Secrets {
            key: k.as_bytes(),
            token: None,
        }
    }

    #[test]
    fn secrets_are_redacted() {
        let s = key("sk-live-123456789");
        let out = s.redact(b"Incorrect API key provided: sk-live-123456789. x");
        assert_eq!(&out[..], b"Incorrect API key provided: [REDACTED]. x");
        assert_eq!(&s.redact(b"abc")[..], b"abc");
        assert_eq!(
            &key("sk-aaaaaaaa").redact(b"sk-aaaaaaaasksk-aaaaaaaa")[..],
            b"[REDACTED]sk[REDACTED]"
        );
        assert_eq!(
            &key("aaaaaaaa").redact(b"aaaaaaaaaaaaaaaaaaa")[..],
            b"[REDACTED][REDACTED]aaa"
        );
        // Too short to search for.
        assert_eq!(&key("abc").redact(b"abcabc")[..], b"abcabc");
    }

    #[test]
    fn a_refreshed_token_is_redacted_like_the_key() {
        let s = Secrets {
            key: b"sk-ant-oat01-from-the-environment",
            token: Some(Arc::from("sk-ant-oat01-refreshed-at-run-time")),
        };
        let echoed =
            b"bad token sk-ant-oat01-refreshed-at-run-time (was sk-ant-oat01-from-the-environment)";
        assert_eq!(
            s.redact_str(std::str::from_utf8(echoed).unwrap_or("")),
            "bad token [REDACTED] (was [REDACTED])"
        );
        assert!(s.found_in(b"Bearer sk-ant-oat01-refreshed-at-run-time"));
        assert!(!s.found_in(b"Bearer sk-ant-oat01-refreshed"));
    }

    #[test]
    fn contains_finds_a_key_anywhere_and_nothing_else() {
        assert!(contains(b"Bearer sk-live-1234", b"sk-live-1234"));
        assert!(contains(b"sk-live-1234", b"sk-live-1234"));
        assert!(contains(b"ssk-live-1234x", b"sk-live-1234"));
        assert!(!contains(b"sk-live-123", b"sk-live-1234"));
        assert!(!contains(b"", b"sk"));
        assert!(!contains(b"abc", b""));
    }
}
