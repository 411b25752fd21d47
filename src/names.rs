//! Names of what the config declares: the id rule every provider, connection, route and client
//! id follows, and `provider/connection` labels.

/// A name from the config or the request path: borrowed when static (no allocation per request).
pub type Name = std::borrow::Cow<'static, str>;

/// A name kept for the life of the process, once per distinct text: route and connection
/// names that decision records borrow. A reload builds them again; interning keeps repeated
/// reloads from growing the process.
pub fn intern(s: &str) -> &'static str {
    use std::collections::HashSet;
    use std::sync::{Mutex, OnceLock};
    static KEPT: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut kept = KEPT
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(&k) = kept.get(s) {
        return k;
    }
    let k: &'static str = Box::leak(s.to_string().into_boxed_str());
    kept.insert(k);
    k
}

/// 1-64 letters, digits, `_`, `-` or `.`: safe in a URL path, a header and a store key.
pub fn valid_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// The flat index of a connection named `provider/connection`.
pub fn conn_by_label(labels: &[(String, String)], label: &str) -> Option<usize> {
    let (p, c) = label.split_once('/')?;
    if p.is_empty() {
        return None; // `/…` names no connection (and an empty slot's label is empty)
    }
    labels.iter().position(|(lp, lc)| lp == p && lc == c)
}
