//! Session affinity in the attempt loop: the connection a session was pinned to goes first while
//! it is usable, and an answer delivered whole pins the session to the connection that served
//! it.

use crate::ids::ConnId;
use crate::proxy::exchange::Ctx;

/// Session affinity: the connection this session was pinned to goes first while usable, and
/// an answer delivered whole pins the session to the connection that served it.
pub(super) struct Pin {
    key: Option<String>,
    ttl: u64,
    pub(super) had: Option<(ConnId, u64)>,
}

impl Pin {
    pub(super) fn find(ctx: &Ctx<'_, '_>) -> Pin {
        let core = ctx.core;
        let ttl = ctx.config().affinity_ttl_ms;
        // A leased request is served only by its lease's connection: no soft pin.
        let key = (ttl > 0 && ctx.admitted.lease.is_none())
            .then(|| crate::store::pins::session_key(ctx.head))
            .flatten();
        let had = key
            .as_deref()
            .and_then(|k| core.pinned(k, crate::clock::unix_ms()));
        Pin { key, ttl, had }
    }

    /// `served`: the connection whose 2xx answer reached the client whole, if one did.
    pub(super) fn remember(&self, ctx: &Ctx<'_, '_>, served: Option<ConnId>) {
        if let (Some(key), Some(conn)) = (&self.key, served) {
            let unix_now = crate::clock::unix_ms();
            ctx.core.pin(key, conn, self.ttl, self.had, unix_now);
        }
    }
}
