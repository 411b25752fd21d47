//! Names of what the config declares: the id rule every provider, connection, route and client
//! id follows, and `provider/connection` labels.

/// A name from the config or the request path: borrowed when static (no allocation per request).
pub type Name = std::borrow::Cow<'static, str>;

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
    labels.iter().position(|(lp, lc)| lp == p && lc == c)
}
