//! The request path's side of a Claude subscription account's usage wall (opt-in per
//! connection; state machines in `resilience::usage_wall`). Before a send: whether the request
//! goes in the low-priority lane. After the answer's head: the lane's word on it (claiming the
//! weekly limit reset first when the wall asks for it), or a refreshed OAuth token after a 401
//! (`proxy::oauth`), kept for the attempt loop, which sends the request to the same account
//! again when told so, without a cooldown. The per-request record of both is
//! [`LaneRequest`](super::exchange::LaneRequest).

use super::exchange::Ctx;
use crate::config::{Connection, Provider};
use crate::http::Head;
use crate::resilience::budget::Budget;
use crate::resilience::usage_wall::headers::Unified;
use crate::resilience::usage_wall::lane::{Answer, Decision, Via, wait_ceiling};
use crate::route::Candidate;
use std::time::Instant;

/// Sends to the same account on the lane's word, at most, in one request (the waits are
/// bounded by time; this bounds the rest).
const MAX_SENDS: u8 = 16;

/// Whether this attempt goes in the lane (noted for its answer).
#[inline(always)]
pub(super) fn slow(ctx: &mut Ctx<'_, '_>, conn: &Connection) -> bool {
    // A new attempt: the last answer's word is spent.
    if let Some(lane) = ctx.lane.as_mut() {
        lane.decision = None;
    }
    conn.usage_wall.any() && on_the_lane(ctx, conn)
}

/// [`slow`] for an account whose usage wall is opted in (out of line: rare).
#[inline(never)]
fn on_the_lane(ctx: &mut Ctx<'_, '_>, conn: &Connection) -> bool {
    let walls = &ctx.core.shared.usage_walls;
    let on = walls
        .get(conn.index)
        .is_some_and(|w| w.slow(crate::clock::unix_ms()));
    ctx.lane.get_or_insert_with(Default::default).sent_slow = on;
    on
}

/// What an answer's head tells about the account: the usage wall's word (opted-in accounts),
/// and for a 401 on an OAuth connection, a refreshed token (`proxy::oauth`).
pub(super) async fn after_head(
    ctx: &mut Ctx<'_, '_>,
    to: (&Provider, &Connection),
    head: &Head,
    wall: Option<Box<Unified>>,
    budget: &Budget,
    deadline: Instant,
) {
    if let Some(u) = wall {
        judge(ctx, to, (head.status, &u), budget, deadline).await;
    }
    if head.status == 401 && to.1.oauth.is_some() {
        super::oauth::after_refusal(ctx, to.1, deadline).await;
    }
}

/// The lane's word on an answer of an opted-in account: at a five-hour wall with the reset
/// opted in, the reset is claimed first (its calls made here, once per account at a time).
async fn judge(
    ctx: &mut Ctx<'_, '_>,
    to: (&Provider, &Connection),
    (status, u): (u16, &Unified),
    budget: &Budget,
    deadline: Instant,
) {
    let (provider, conn) = to;
    let Some(wall) = ctx.core.shared.usage_walls.get(conn.index) else {
        return;
    };
    let Some(lane) = ctx.lane.as_mut() else {
        return;
    };
    let a = Answer {
        status,
        unified: u,
        sent_slow: lane.sent_slow,
    };
    let ceiling = wait_ceiling(Some(budget.time_left(crate::clock::now_ms())));
    let now = crate::clock::unix_ms();
    let opt = conn.usage_wall;
    let mut d = wall.answer(opt, a, now, &mut lane.waits, ceiling, rand::random());
    if d == Decision::TryLimitReset {
        // Once per request: a reset granted a moment ago answers siblings at once, and a
        // request that meets the wall again after it must not go round.
        let first = !std::mem::replace(&mut lane.reset_tried, true);
        let granted = first && {
            let call = super::limit_reset::attempt(ctx.core, provider, conn, wall, deadline);
            Box::pin(call).await
        };
        d = wall.after_limit_reset(granted, opt, u, crate::clock::unix_ms());
    }
    if let Some(lane) = ctx.lane.as_mut() {
        lane.decision = Some(d);
    }
}

/// Send to the same account again at once: its access token was refreshed after a 401.
pub(super) fn token_refreshed(ctx: &mut Ctx<'_, '_>) {
    if let Some(lane) = ctx.lane.as_mut() {
        lane.decision = Some(Decision::Retry {
            delay_ms: 0,
            via: Via::TokenRefreshed,
        });
    }
}

/// The lane's word on the last failed answer, when it is to send the request to the same
/// account again: after how long, and why.
pub(super) fn retry(ctx: &mut Ctx<'_, '_>) -> Option<(u64, Via)> {
    let lane = ctx.lane.as_mut()?;
    match lane.decision.take()? {
        Decision::Retry { delay_ms, via } if lane.sends < MAX_SENDS => {
            lane.sends += 1;
            Some((delay_ms, via))
        }
        _ => None,
    }
}

/// Pick `cand` next, after `delay_ms`.
pub(super) fn send_again(ctx: &mut Ctx<'_, '_>, cand: Candidate, delay_ms: u64) {
    if let Some(lane) = ctx.lane.as_mut() {
        lane.same = Some((cand, delay_ms));
    }
}

/// The candidate the usage wall asked to send to again, if any (taken).
pub(super) fn take_same(ctx: &mut Ctx<'_, '_>) -> Option<(Candidate, u64)> {
    ctx.lane.as_mut()?.same.take()
}
