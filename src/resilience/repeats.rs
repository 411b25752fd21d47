//! Client retries recognised by what they send: a request Ringside gave up on is remembered
//! (a digest of who sent it and what it said, with the upstream attempts it cost) for
//! `resilience.retry_window_ms`; the same request again from the same client or session within
//! that window is the client's retry, whatever its headers say (Claude Code always sends
//! `x-stainless-retry-count: 0`, Codex sends none), and gets only what is left of the first
//! one's attempt budget. Client retries then add at most one upstream attempt each instead of
//! multiplying the whole budget.
//!
//! Shared by every core through atomics: a fixed table of slots, the digest's low bits picking
//! the slot, so memory is bounded and a lost race forgets one entry at worst. The request path
//! pays one atomic load while nothing failed lately; only then is a request's body hashed.

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

const SLOTS: usize = 4096;

struct Slot {
    /// The digest (0: empty).
    tag: AtomicU64,
    /// When it failed (monotonic ms) << 16 | the upstream attempts it has cost.
    info: AtomicU64,
}

/// The requests given up on lately, across cores.
pub struct Repeats {
    slots: Box<[Slot]>,
    /// Nothing in the table is younger than this minus the window (0: never anything): the
    /// request path's one check.
    newest: AtomicU64,
    /// Keyed per process: a client cannot aim a digest at another client's entry.
    keys: std::hash::RandomState,
}

impl Default for Repeats {
    fn default() -> Self {
        Repeats {
            slots: (0..SLOTS)
                .map(|_| Slot {
                    tag: AtomicU64::new(0),
                    info: AtomicU64::new(0),
                })
                .collect(),
            newest: AtomicU64::new(0),
            keys: std::hash::RandomState::new(),
        }
    }
}

impl std::fmt::Debug for Repeats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Repeats")
    }
}

impl Repeats {
    /// Whether any request was given up on within `window_ms` of `now` (one atomic load).
    pub fn any_within(&self, now: u64, window_ms: u64) -> bool {
        let newest = self.newest.load(Relaxed);
        newest != 0 && now < newest.saturating_add(window_ms)
    }

    /// The digest of one request: its sender (tenant and session) and what it asked. A JSON
    /// body counts by its meaning, not its bytes: an agent that writes a map in another order
    /// on each try (Codex's `client_metadata`) still sends the same request. (Parsed only on
    /// this path: while nothing failed lately no request is digested.)
    pub fn digest(&self, tenant: u64, session: &[u8], path: &[u8], body: &[u8]) -> u64 {
        let mut h = self.keys.build_hasher();
        h.write_u64(tenant);
        for part in [session, path] {
            h.write_usize(part.len());
            h.write(part);
        }
        match serde_json::from_slice::<serde_json::Value>(body) {
            Ok(v) => canonical(&v, &mut h),
            Err(_) => {
                h.write_usize(body.len());
                h.write(body);
            }
        }
        h.finish().max(1)
    }

    /// A request with this digest was given up on at `now` after `spent` upstream attempts
    /// (added to what the same request cost before within the window).
    pub fn note(&self, digest: u64, spent: u32, now: u64, window_ms: u64) {
        let slot = &self.slots[digest as usize % SLOTS];
        let before = self.spent(digest, now, window_ms).unwrap_or(0);
        let total = u64::from(before.saturating_add(spent).min(0xffff));
        slot.tag.store(digest, Relaxed);
        slot.info.store(now << 16 | total, Relaxed);
        self.newest.fetch_max(now, Relaxed);
    }

    /// A request with this digest was answered: the client's retries of it are over, and the
    /// same request again is a new one with its whole budget. (Clients that send identical
    /// requests, a load tool or a shared prompt behind a gateway, would otherwise share one
    /// give-up's smaller budget for the whole window.)
    pub fn forget(&self, digest: u64) {
        let slot = &self.slots[digest as usize % SLOTS];
        // A lost race with another request's `note` forgets that one at worst.
        let _ = slot.tag.compare_exchange(digest, 0, Relaxed, Relaxed);
    }

    /// The attempts the same request already cost within the window, if it was given up on.
    pub fn spent(&self, digest: u64, now: u64, window_ms: u64) -> Option<u32> {
        let slot = &self.slots[digest as usize % SLOTS];
        if slot.tag.load(Relaxed) != digest {
            return None;
        }
        let info = slot.info.load(Relaxed);
        let at = info >> 16;
        (now < at.saturating_add(window_ms)).then_some((info & 0xffff) as u32)
    }
}

/// Hash `v` as its meaning: an object's members in the order of their names.
fn canonical(v: &serde_json::Value, h: &mut impl Hasher) {
    use serde_json::Value;
    match v {
        Value::Null => h.write_u8(0),
        Value::Bool(b) => h.write_u8(1 + u8::from(*b)),
        Value::Number(n) => {
            h.write_u8(3);
            h.write(n.to_string().as_bytes());
        }
        Value::String(s) => {
            h.write_u8(4);
            h.write_usize(s.len());
            h.write(s.as_bytes());
        }
        Value::Array(items) => {
            h.write_u8(5);
            h.write_usize(items.len());
            items.iter().for_each(|i| canonical(i, h));
        }
        Value::Object(map) => {
            h.write_u8(6);
            h.write_usize(map.len());
            let mut members: Vec<_> = map.iter().collect();
            members.sort_unstable_by(|a, b| a.0.cmp(b.0));
            for (name, value) in members {
                h.write_usize(name.len());
                h.write(name.as_bytes());
                canonical(value, h);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_request_from_the_same_sender_within_the_window_is_a_retry() {
        let r = Repeats::default();
        let d = r.digest(7, b"s1", b"/v1/messages", b"{\"model\":\"m\"}");
        assert!(
            !r.any_within(1_000, 60_000),
            "nothing failed yet: no hashing"
        );
        assert_eq!(r.spent(d, 1_000, 60_000), None);
        r.note(d, 3, 1_000, 60_000);
        assert!(r.any_within(1_000, 60_000));
        assert_eq!(r.spent(d, 2_000, 60_000), Some(3));
        // Its retry failed too, after one more attempt: the count adds up.
        r.note(d, 1, 2_000, 60_000);
        assert_eq!(r.spent(d, 3_000, 60_000), Some(4));
        // Past the window: a new request.
        assert_eq!(r.spent(d, 62_001, 60_000), None);
        assert!(!r.any_within(62_001, 60_000));
        // Answered: the retries are over, and another digest's entry is left alone.
        let other = r.digest(9, b"s9", b"/v1/messages", b"{\"model\":\"m\"}");
        r.note(d, 3, 70_000, 60_000);
        r.note(other, 2, 70_000, 60_000);
        r.forget(d);
        assert_eq!(r.spent(d, 71_000, 60_000), None);
        assert_eq!(r.spent(other, 71_000, 60_000), Some(2));
        // The same JSON written in another order is the same request; other values are not.
        let reordered = r.digest(7, b"s1", b"/v1/messages", b"{ \"model\" : \"m\" }");
        assert_eq!(reordered, d);
        let meta = |body: &[u8]| r.digest(7, b"s1", b"/v1/responses", body);
        assert_eq!(
            meta(br#"{"input":[1,2],"client_metadata":{"turn":"t","thread":"x"}}"#),
            meta(br#"{"client_metadata":{"thread":"x","turn":"t"},"input":[1,2]}"#)
        );
        assert_ne!(
            meta(br#"{"input":[1,2]}"#),
            meta(br#"{"input":[2,1]}"#),
            "an array's order is its meaning"
        );
        assert_ne!(meta(b"not json"), meta(b"not json!"));
        assert_eq!(meta(b"not json"), meta(b"not json"));
        // Another sender, session, endpoint or body is another request.
        for other in [
            r.digest(8, b"s1", b"/v1/messages", b"{\"model\":\"m\"}"),
            r.digest(7, b"s2", b"/v1/messages", b"{\"model\":\"m\"}"),
            r.digest(7, b"s1", b"/v1/chat/completions", b"{\"model\":\"m\"}"),
            r.digest(7, b"s1", b"/v1/messages", b"{\"model\":\"n\"}"),
        ] {
            assert_ne!(other, d);
            assert_eq!(r.spent(other, 2_000, 60_000), None);
        }
    }
}
