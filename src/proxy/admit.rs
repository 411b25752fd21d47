//! Admit: a chosen candidate gets a flow slot of its connection (global across cores, or a place
//! in its queue within the request's time), and a leased request is fenced again after any
//! wait, since its lease may have been released, renewed or moved meanwhile.

use super::exchange::Ctx;
use super::stop::Stop;
use super::watch::{ClientWatch, Raced};
use crate::flow::{self, Ask, Permit, Refused};
use crate::ids::ConnId;
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
    Refused(Stop),
}

/// Wait for this start's turn across the fleet (its spacing, its reservoir), within `left` ms.
async fn fleet_pace(
    flow: &'static flow::FlowShared,
    conn: ConnId,
    left: u64,
    watch: &mut ClientWatch<'_>,
) -> Result<(), Option<Refused>> {
    let started = crate::clock::instant();
    loop {
        let waited = crate::clock::since(started).as_millis() as u64;
        // Ok: a start reserved `ms` from now; Err: the fleet's reservoir refills in `ms`.
        let (ms, reserved) = match flow.fleet_pace(conn).await {
            Ok(0) => return Ok(()),
            Ok(ms) => (ms, true),
            Err(ms) => (ms.max(1), false),
        };
        if waited + ms > left {
            return Err(Some(Refused::QueueTimeout { waited_ms: waited }));
        }
        let until = crate::clock::instant() + Duration::from_millis(ms);
        if let Raced::ClientGone = watch.race(timer::sleep_until(until)).await {
            return Err(None);
        }
        if reserved {
            return Ok(());
        }
    }
}

pub(super) async fn admit(
    ctx: &mut Ctx<'_, '_>,
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
    let queue_watch = &mut *watch;
    let admitted = flow::acquire(core.shared.flow, &core.flow, ask, t, |rx, ms| async move {
        let wait = timer::timeout(Duration::from_millis(ms), rx);
        match queue_watch.race(wait).await {
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
        Err(Some(r)) => return Admission::Refused(Stop::Refused(r)),
    };
    // Fleet mode: spacing and reservoirs hold across the fleet (boxed: only paced
    // connections of a fleet pay for the wait in their task).
    if core.shared.flow.paced_elsewhere(cand.connection) {
        // As long as a queue wait may last: the request's time, and the connection's max wait.
        let max_wait = core
            .shared
            .flow
            .effective(cand.connection, crate::flow::settings::Knob::MaxWaitMs)
            .value;
        let left = budget.time_left(crate::clock::now_ms()).min(max_wait);
        match Box::pin(fleet_pace(core.shared.flow, cand.connection, left, watch)).await {
            Ok(()) => {}
            Err(None) => return Admission::ClientGone,
            Err(Some(r)) => return Admission::Refused(Stop::Refused(r)),
        }
    }
    if let Some(b) = ctx.admitted.lease.clone() {
        match super::lease::refence(ctx, &b).await {
            Ok(c) if c == cand.connection => {}
            Ok(c) => {
                if let Some(lb) = ctx.admitted.lease.as_mut() {
                    lb.conn = c;
                }
                return Admission::LeaseMoved;
            }
            Err(e) => return Admission::Refused(Stop::Lease(Box::new(e))),
        }
    }
    Admission::Go(permit)
}
