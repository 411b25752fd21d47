//! What a request's head says about its client: the request id it chose, the tenant its
//! credential stands for (a hash, never the credential), and the priority it asked for.

use crate::http::Head;

/// A client-supplied request id is kept if it is short and printable.
pub(super) fn client_request_id(head: &Head) -> Option<String> {
    let v = head.get_str("x-request-id")?;
    (!v.is_empty() && v.len() <= 128 && v.bytes().all(|b| b.is_ascii_graphic()))
        .then(|| v.to_string())
}

/// A stable tenant id for the client's credential (never stored or logged as such).
pub(super) fn tenant_of(head: &Head) -> u64 {
    use std::hash::{Hash, Hasher};
    let key = head
        .get("authorization")
        .or_else(|| head.get("x-api-key"))
        .or_else(|| head.get("api-key"));
    match key {
        None => 0,
        Some(k) => {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            k.hash(&mut h);
            h.finish() | 1
        }
    }
}

/// `x-ringside-priority`: 0 (first) to 9; the default when absent or unreadable.
pub(super) fn priority_of(head: &Head) -> u8 {
    head.get_str("x-ringside-priority")
        .and_then(|v| v.trim().parse::<u8>().ok())
        .map_or(crate::flow::queue::DEFAULT_PRIORITY, |p| p.min(9))
}
