//! Names of what the config declares: the id rule every provider, connection, route and client
//! id follows, and `provider/connection` labels.

use crate::ids::ConnId;

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

/// Characters that show nothing, or turn the text around them, where a name is displayed:
/// bidirectional controls, zero-width and joining characters, fillers, tags. A name holding
/// one can look like another on the status page, in decision records and in logs.
pub fn is_invisible(c: char) -> bool {
    matches!(c as u32,
        0x00AD | 0x034F | 0x061C | 0x115F | 0x1160 | 0x17B4 | 0x17B5 | 0x180B..=0x180F
        | 0x200B..=0x200F | 0x202A..=0x202E | 0x2060..=0x206F | 0x3164 | 0xFE00..=0xFE0F
        | 0xFEFF | 0xFFA0 | 0xFFF0..=0xFFFB | 0x1D173..=0x1D17A | 0xE0000..=0xE0FFF)
}

/// The flat index of a connection named `provider/connection`.
pub fn conn_by_label(labels: &[(String, String)], label: &str) -> Option<ConnId> {
    let (p, c) = label.split_once('/')?;
    if p.is_empty() {
        return None; // `/…` names no connection (and an empty slot's label is empty)
    }
    labels
        .iter()
        .position(|(lp, lc)| lp == p && lc == c)
        .map(ConnId::new)
}
