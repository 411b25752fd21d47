//! The request's one budget: its attempts and its deadline, as the route, the client's own
//! headers and the client's retry count allow.

use crate::proxy::decide;
use crate::proxy::exchange::Ctx;
use crate::resilience::budget::{Budget, parse_deadline_header};
use crate::route::Entry;

/// The request's budget: its attempts, and its deadline (the route's, or the client's own
/// within the rules of `decide::deadline_ms`); and, for the same request as one given up on
/// lately, its digest (0: none), forgotten once it is answered.
pub(super) fn budget_for(ctx: &mut Ctx<'_, '_>, entry: &Entry) -> (Budget, u64) {
    let s = &ctx.config().resilience;
    let asked = ctx
        .head
        .get_str("x-ringside-deadline-ms")
        .and_then(|v| parse_deadline_header(v, crate::clock::unix_ms()));
    let may_extend = ctx
        .admitted
        .client
        .as_ref()
        .is_some_and(|c| c.has(crate::clients::Scope::Overrides));
    let deadline_ms = decide::deadline_ms(
        entry.deadline_ms.unwrap_or(s.deadline_ms),
        asked,
        may_extend,
    );
    let mut max_attempts = ctx.config().upstream.max_attempts;
    // A client's own retry gets what is left of one budget, so that an SDK that retries
    // anyway (`x-should-retry: false` notwithstanding) cannot multiply upstream attempts: known
    // by its header, or by being the same request as one given up on a moment ago.
    let said = client_retry(ctx.head, &s.client_retry_header).unwrap_or(0);
    let (repeat, repeated) = repeat_spent(ctx, s.retry_window_ms).unwrap_or((0, 0));
    ctx.record.same_request_retry = repeated > 0;
    let less = said.max(repeated);
    if less > 0 {
        ctx.record.client_retry = Some(less);
        max_attempts = max_attempts.saturating_sub(less).max(1);
    }
    let budget = Budget::new(
        max_attempts,
        crate::clock::now_ms(),
        deadline_ms,
        s.max_wait_ms,
    );
    (budget, repeat)
}

/// The retry number a client's request says it is (0: a first try, not a retry).
fn client_retry(head: &crate::http::Head, header: &str) -> Option<u32> {
    if header.is_empty() {
        return None;
    }
    let n: u32 = head.get_str(header)?.trim().parse().ok()?;
    (n > 0).then_some(n.min(100))
}

/// The digest by which a request's repeat is known: who sent it (tenant and session) and what
/// it asked (endpoint and body).
pub(crate) fn repeat_digest(ctx: &Ctx<'_, '_>) -> u64 {
    let session = crate::store::pins::session_key(ctx.head).unwrap_or_default();
    ctx.core.shared.repeats.digest(
        ctx.tenant,
        session.as_bytes(),
        ctx.head.path().as_bytes(),
        &ctx.admitted.body,
    )
}

/// The same request's digest and the upstream attempts it cost within the window, if it was
/// given up on then. Nothing is hashed unless some request was given up on lately (one atomic
/// load).
fn repeat_spent(ctx: &Ctx<'_, '_>, window_ms: u64) -> Option<(u64, u32)> {
    let now = crate::clock::now_ms();
    let repeats = &ctx.core.shared.repeats;
    if window_ms == 0 || !repeats.any_within(now, window_ms) {
        return None;
    }
    let digest = repeat_digest(ctx);
    Some((digest, repeats.spent(digest, now, window_ms)?))
}
