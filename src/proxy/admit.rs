//! Admit: a chosen candidate gets a flow slot of its connection (global across cores, or a place
//! in its queue within the request's time), and a leased request is fenced again after any
//! wait, since its lease may have been released, renewed or moved meanwhile.

use super::answer;
use super::exchange::Ctx;
use super::watch::{ClientWatch, Raced};
use crate::dialect::ApiError;
use crate::flow::{self, Ask, Permit, Refused};
use crate::resilience::budget::Budget;
use crate::route::Candidate;
use crate::timer;
use std::time::Duration;

/// How admission went.
pub(super) enum Admission {
    /// Go: the slot is held until the permit drops.
    Go(Permit),
    /// The connection is at its cap and refuses to queue (`on_saturation = "reject"`).
    Saturated,
    /// The lease moved to another connection while this request waited: select again.
    LeaseMoved,
    ClientGone,
    /// A local refusal (queue full or timed out) or a lease that can no longer be used.
    Refused(ApiError),
}

pub(super) async fn admit(
    ctx: &mut Ctx<'_>,
    cand: Candidate,
    budget: &Budget,
    t: u64,
    watch: &mut ClientWatch<'_>,
) -> Admission {
    let core = ctx.core;
    let ask = Ask {
        conn: cand.connection,
        tenant: ctx.tenant,
        priority: ctx.priority,
        time_left_ms: budget.time_left(t),
    };
    let admitted = flow::acquire(core.shared.flow, &core.flow, ask, t, |rx, ms| async move {
        let wait = timer::timeout(Duration::from_millis(ms), rx);
        match watch.race(wait).await {
            Raced::ClientGone => None,
            Raced::Done(Ok(Ok(permit))) => Some(Some(permit)),
            Raced::Done(_) => Some(None),
        }
    })
    .await;
    let permit = match admitted {
        Ok(p) => p,
        Err(None) => return Admission::ClientGone,
        Err(Some(Refused::Saturated)) => return Admission::Saturated,
        Err(Some(r)) => return Admission::Refused(answer::refused(r, ctx)),
    };
    if let Some(b) = ctx.lease.clone() {
        match super::lease::refence(ctx, &b).await {
            Ok(c) if c == cand.connection => {}
            Ok(c) => {
                if let Some(lb) = ctx.lease.as_mut() {
                    lb.conn = c;
                }
                return Admission::LeaseMoved;
            }
            Err(e) => return Admission::Refused(e),
        }
    }
    Admission::Go(permit)
}
