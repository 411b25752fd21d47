//! Session affinity (soft pins): a session key pins the session to the connection it used, for
//! `affinity_ttl_ms`. Each core keeps the pins it knows (replicated by events, see
//! `Core::pin`); the store keeps them across restarts. A pin is rewritten only when it changes or
//! is past half its life, not on every request.

use super::Store;

/// Where a session's id is found: Ringside's own header and the common ones (never forwarded
/// upstream), then the coding agents' own, which go on to the provider as the agent sent them:
/// Claude Code's and Codex's (`session-id` or `session_id`, and its `thread-id`).
const SESSION_HEADERS: [&str; 7] = [
    "x-ringside-session",
    "x-session-id",
    "x-codex-session-id",
    "x-claude-code-session-id",
    "session-id",
    "session_id",
    "thread-id",
];

/// The session key a request carries, as a stable store key.
pub fn session_key(head: &crate::http::Head) -> Option<String> {
    let v = SESSION_HEADERS
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

#[cfg(test)]
mod tests {
    use super::session_key;
    use crate::http::head::{HeadLimits, parse_request};

    fn key(headers: &str) -> Option<String> {
        let raw = format!("POST /v1/messages HTTP/1.1\r\nHost: x\r\n{headers}\r\n");
        let (head, _) = parse_request(raw.as_bytes(), HeadLimits::default()).ok()??;
        session_key(&head)
    }

    #[test]
    fn the_agents_session_ids_pin_their_sessions() {
        let claude = key("X-Claude-Code-Session-Id: 1623\r\n");
        let codex = key("session-id: 01a2\r\nthread-id: 01a2\r\n");
        assert!(claude.is_some() && codex.is_some() && claude != codex);
        // Ringside's own header wins over an agent's.
        let both = key("X-Claude-Code-Session-Id: 1623\r\nx-ringside-session: mine\r\n");
        assert_eq!(both, key("x-ringside-session: mine\r\n"));
        assert_eq!(key("x-other: 1\r\n"), None);
    }
}
