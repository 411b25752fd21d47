//! Headers that belong to one hop and are never forwarded either way: the hop-by-hop set
//! (RFC 9110 7.6.1), those a `Connection` field names, and Ringside's own `x-ringside-*`.

/// Ringside's own headers (`x-ringside-*`): never forwarded in either direction.
pub fn is_ringside_header(name: &str) -> bool {
    name.as_bytes()
        .get(..11)
        .is_some_and(|p| p.eq_ignore_ascii_case(b"x-ringside-"))
}

/// Whether `name` is listed in a `Connection` value (see
/// [`Head::connection_options`](super::head::Head::connection_options)).
pub fn listed_in(options: Option<&[u8]>, name: &str) -> bool {
    options.is_some_and(|v| {
        v.split(|b| *b == b',')
            .any(|t| t.trim_ascii().eq_ignore_ascii_case(name.as_bytes()))
    })
}

/// Hop-by-hop headers (RFC 9110 §7.6.1) that a proxy never forwards.
pub fn is_hop_by_hop(name: &str) -> bool {
    is_hop_by_hop_name(name.as_bytes())
}

/// [`is_hop_by_hop`] for a name not yet known to be text (an HTTP/2 answer's).
pub fn is_hop_by_hop_name(name: &[u8]) -> bool {
    // By length first: every header of every request and response passes through here, and
    // most names have no hop-by-hop name of their length to compare with.
    let candidates: &[&str] = match name.len() {
        2 => &["te"],
        7 => &["trailer", "upgrade"],
        10 => &["connection", "keep-alive"],
        16 => &["proxy-connection"],
        17 => &["transfer-encoding"],
        18 => &["proxy-authenticate"],
        19 => &["proxy-authorization"],
        _ => return false,
    };
    candidates
        .iter()
        .any(|h| h.as_bytes().eq_ignore_ascii_case(name))
}
