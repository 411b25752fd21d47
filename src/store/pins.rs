//! Session affinity (soft pins): a session key pins the session to the connection it used, for
//! `affinity_ttl_ms`. Each core keeps the pins it knows (replicated by events, see
//! `Core::pin`); the store keeps them across restarts. A pin is rewritten only when it changes or
//! is past half its life, not on every request.

use super::Store;

/// The session key a request carries (never forwarded upstream), as a stable store key.
pub fn session_key(head: &crate::http::Head) -> Option<String> {
    let v = ["x-ringside-session", "x-session-id", "x-codex-session-id"]
        .iter()
        .find_map(|h| head.get(h))
        .filter(|v| !v.is_empty() && v.len() <= 512)?;
    let d = crate::secret::digest(v);
    let mut key = String::with_capacity(4 + 32);
    key.push_str("pin/");
    key.push_str(&crate::secret::hex(&d[..16]));
    Some(key)
}

/// Delete the pins whose time has passed (the admin thread does this once a minute, so the
/// store does not keep every session ever seen). Returns how many went.
pub fn purge_expired(store: &Store, now_unix: u64) -> usize {
    let dead: Vec<String> = store
        .scan("pin/")
        .into_iter()
        .filter(|(_, v)| v["until"].as_u64().is_none_or(|u| u <= now_unix))
        .map(|(k, _)| k)
        .collect();
    let n = dead.len();
    for k in dead {
        store.delete(k);
    }
    if n > 0 {
        store.flush();
    }
    n
}

/// The pinned connection label (`provider/connection`) if the pin is alive.
pub fn pinned(store: &Store, key: &str, now_unix: u64) -> Option<(String, u64)> {
    let v = store.get(key)?;
    let until = v["until"].as_u64()?;
    (until > now_unix).then(|| (v["conn"].as_str().unwrap_or_default().to_string(), until))
}
