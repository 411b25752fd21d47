//! What a request's head says about its client: the request id it chose, the address a
//! trusted proxy forwarded for, the tenant of a request without a client key (its address,
//! hashed), and the priority it asked for.

use crate::http::Head;
use std::net::IpAddr;

/// A client-supplied request id is kept if it is short and printable.
pub(super) fn client_request_id(head: &Head) -> Option<String> {
    let v = head.get_str("x-request-id")?;
    (!v.is_empty() && v.len() <= 128 && v.bytes().all(|b| b.is_ascii_graphic()))
        .then(|| v.to_string())
}

/// The address a trusted proxy in front of Ringside forwarded for (`server.trusted_proxies`):
/// the first hop of its `X-Forwarded-For`, when the peer is one of them.
pub(super) fn forwarded_for(
    head: &Head,
    peer: Option<IpAddr>,
    trusted: &[ipnet::IpNet],
) -> Option<IpAddr> {
    if trusted.is_empty() {
        return None;
    }
    peer.filter(|ip| trusted.iter().any(|net| net.contains(ip)))
        .and_then(|_| head.get_str(super::exchange::FORWARDED_FOR))
        .and_then(|v| v.split(',').next())
        .and_then(|hop| hop.trim().parse().ok())
}

/// The tenant of a request without a client key (open mode): its client's address, as the
/// socket gives it or a trusted proxy forwarded it. Not its credential header: a client could
/// change that on every request and never meet a per-tenant quota. A client key's tenant
/// replaces it once the key is known.
pub(super) fn tenant_of(client: Option<IpAddr>) -> u64 {
    use std::hash::{Hash, Hasher};
    match client {
        None => 0,
        Some(ip) => {
            // Not keyed: an address is not a secret, and this runs for every request.
            let mut h = rustc_hash::FxHasher::default();
            ip.hash(&mut h);
            h.finish() | 1
        }
    }
}

/// The tenant a trusted fronting gateway names (`x-ringside-tenant`, only from
/// `server.trusted_proxies`): short and printable, else ignored.
pub(super) fn gateway_tenant(ctx: &super::exchange::Request<'_>) -> Option<u64> {
    let trusted = &ctx.config().server.trusted_proxies;
    let peer = ctx.conn.ticket.peer?;
    if !trusted.iter().any(|net| net.contains(&peer)) {
        return None;
    }
    let v = ctx.head.get_str("x-ringside-tenant")?.trim();
    let ok = !v.is_empty() && v.len() <= 128 && v.bytes().all(|b| b.is_ascii_graphic());
    ok.then(|| ctx.config().tenants.id_of(v))
}

/// `x-ringside-priority`: 0 (first) to 9; the default when absent or unreadable.
pub(super) fn priority_of(head: &Head) -> u8 {
    head.get_str("x-ringside-priority")
        .and_then(|v| v.trim().parse::<u8>().ok())
        .map_or(crate::flow::queue::DEFAULT_PRIORITY, |p| p.min(9))
}
