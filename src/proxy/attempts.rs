//! The attempt loop under one budget: candidates (dropping cooling / locked / breaker-open /
//! ineligible ones, each with its reason) -> select -> connect -> send -> await head -> judge
//! -> stream | retry the same target after a short cooldown | next target | wait | fail.

use super::admit::{self, Admission};
use super::answer::{self, LastFailure};
use super::attempt::attempt;
use super::decide::{self, Idle};
use super::deliver;
use super::exchange::{AttemptEnd, Ctx, Failed};
use super::lease::{LeaseMove, capacity_answer};
use super::respond::finish_error;
use super::select::{self, site};
use super::watch::{ClientWatch, Raced};
use crate::audit::{AttemptOutcome, AttemptRecord, Decision, Excluded};
use crate::dialect::ApiError;
use crate::dialect::needs::Needs;
use crate::flow::settings::Knob;
use crate::resilience::Exclusion;
use crate::resilience::breaker::ProbeGuard;
use crate::resilience::budget::{Budget, parse_deadline_header};
use crate::resilience::classify::Verdict;
use crate::route::load::InFlight;
use crate::route::{Candidate, Entry};
use crate::timer;
use monoio::net::tcp::{TcpOwnedReadHalf, TcpOwnedWriteHalf};
use std::time::{Duration, Instant};

fn now() -> u64 {
    crate::clock::now_ms()
}

/// What the attempt loop carries from one attempt to the next.
#[derive(Default)]
struct LoopState {
    /// Failed once already in this request (and not on a timer that excludes them anyway).
    tried: Vec<Candidate>,
    /// Refused us (saturated with `on_saturation = "reject"`) in this request.
    saturated: Vec<Candidate>,
    /// Why each candidate was passed over in the last selection.
    excluded: Vec<(Candidate, Exclusion)>,
    last: Option<LastFailure>,
    /// A local-overload or lease answer (queue full or timed out, execution timeout).
    refusal: Option<ApiError>,
    /// Every eligible connection turned out to be leased by other sessions.
    lease_capacity: Option<ApiError>,
    /// The connection that answered (for the session pin).
    served: Option<usize>,
}

impl LoopState {
    /// Record a failed attempt and learn from it; true when the loop ends here (an execution
    /// timeout, or an answer to pass through).
    fn on_failed(
        &mut self,
        ctx: &mut Ctx<'_>,
        at: &Tried<'_>,
        site: crate::resilience::Site<'_>,
        budget: &Budget,
        f: Failed,
    ) -> bool {
        let core = ctx.core;
        let cand = at.cand;
        if f.kind == AttemptOutcome::ExecutionTimeout {
            core.shared.flow.gates[cand.connection]
                .stats
                .execution_timeouts
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            push(
                ctx,
                at,
                f.kind,
                None,
                Decision::Fail,
                budget,
                Some(f.detail),
            );
            self.refusal = Some(answer::execution_timeout(ctx));
            return true;
        }
        if !f.self_inflicted {
            core.record_failure(site, &f.verdict);
        }
        let decision = decide::after_failure(&f.verdict, budget);
        push(
            ctx,
            at,
            f.kind,
            Some(&f.verdict),
            decision,
            budget,
            Some(f.detail.clone()),
        );
        if let Some(a) = ctx.record.attempts.last_mut() {
            a.restated_from = f.restated_from;
        }
        // Try this candidate again only if the failure put it on a timer (then it is excluded
        // by that timer, and a short one may be waited out).
        let s = &core.shared.config.resilience;
        if core.tables.borrow_mut().blocked(s, site, now()).is_none() {
            self.tried.push(cand);
        }
        self.last = Some(LastFailure {
            verdict: f.verdict,
            detail: f.detail,
            response: f.response,
            label: label(ctx, cand),
            conn: cand.connection,
        });
        decision == Decision::PassThrough
    }
}

/// The attempt loop. Returns whether the client connection stays open.
pub(super) async fn run(
    ctx: &mut Ctx<'_>,
    entry: &Entry,
    needs: &Needs,
    rd: &mut TcpOwnedReadHalf,
    wr: &mut TcpOwnedWriteHalf,
    buf: &mut bytes::BytesMut,
) -> bool {
    let core = ctx.core;
    let s = &core.shared.config.resilience;
    let asked = ctx
        .head
        .get_str("x-ringside-deadline-ms")
        .and_then(|v| parse_deadline_header(v, crate::clock::unix_ms()));
    let may_extend = ctx
        .client
        .as_ref()
        .is_some_and(|c| c.has(crate::clients::Scope::Overrides));
    let deadline_ms = decide::deadline_ms(
        entry.deadline_ms.unwrap_or(s.deadline_ms),
        asked,
        may_extend,
    );
    let max_attempts = core.config().upstream.max_attempts;
    let mut budget = Budget::new(max_attempts, now(), deadline_ms, s.max_wait_ms);
    let mut watch = ClientWatch::start(rd, std::mem::take(buf));
    let mut st = LoopState::default();
    // Session affinity: the pinned connection goes first while it is usable.
    let ttl = core.config().affinity_ttl_ms;
    let pin_key = if ttl > 0 {
        crate::store::pins::session_key(ctx.head)
    } else {
        None
    };
    // A leased request is served only by its lease's connection: no soft pin.
    let pin_key = pin_key.filter(|_| ctx.lease.is_none());
    let had_pin = pin_key
        .as_deref()
        .and_then(|k| core.pinned(k, crate::clock::unix_ms()));
    let pinned_conn = had_pin.map(|(c, _)| c);
    let result = loop {
        core.sync();
        let t = now();
        if budget.expired(t) {
            break None;
        }
        let bound = ctx.lease.as_ref().map(|b| b.conn);
        // Without any lease anywhere, no connection is held (and no clock read is needed).
        let unix_now = if bound.is_some() || !core.shared.leases.none() {
            crate::clock::unix_ms()
        } else {
            0
        };
        st.excluded.clear();
        let seen = select::Seen {
            tried: &st.tried,
            saturated: &st.saturated,
            bound,
            pinned: pinned_conn,
        };
        let pick = select::select(ctx, entry, needs, &seen, (t, unix_now), &mut st.excluded);
        let Some((cand, admit)) = pick else {
            // A lease whose connection cannot serve moves to a free eligible one (same
            // generation), as health, cooldown, quota and model rules have the final say.
            match super::lease::move_off(ctx, &st.excluded).await {
                LeaseMove::Moved => continue,
                LeaseMove::Refused(e) => {
                    st.refusal = Some(e);
                    break None;
                }
                LeaseMove::Stayed => {}
            }
            // Nothing usable now: wait for the earliest short recovery if the budget allows.
            match decide::when_nothing_usable(st.excluded.iter().map(|(_, e)| e), &budget, t) {
                Idle::Wait(ms) => {
                    ctx.record.waited_ms += ms;
                    budget.waited(ms);
                    let sleep =
                        timer::sleep_until(crate::clock::instant() + Duration::from_millis(ms));
                    if let Raced::ClientGone = watch.race(sleep).await {
                        ctx.record.status = 499;
                        ctx.record.outcome = crate::audit::Outcome::ClientGone;
                        break Some(false);
                    }
                    continue;
                }
                Idle::GiveUp => {
                    st.lease_capacity = capacity_answer(ctx, &st.excluded, unix_now);
                    break None;
                }
            }
        };
        let site = site(ctx, entry, cand);
        // The probe (if this attempt is one) is released when this iteration ends, however.
        let _probe = ProbeGuard::new(admit, &core.shared.probes.0[site.provider]);
        if budget.attempts_left() == 0 {
            break None;
        }
        // Admission: a slot of the connection (global across cores), or a place in its queue,
        // and the lease fenced again after any wait.
        let permit = match admit::admit(ctx, cand, &budget, t, &mut watch).await {
            Admission::Go(p) => p,
            Admission::Saturated => {
                st.saturated.push(cand);
                continue;
            }
            Admission::LeaseMoved => continue,
            Admission::ClientGone => {
                ctx.record.status = 499;
                ctx.record.outcome = crate::audit::Outcome::ClientGone;
                break Some(false);
            }
            Admission::Refused(e) => {
                st.refusal = Some(e);
                break None;
            }
        };
        // One clock read for the budget, the execution deadline and the attempt's timing.
        let t0 = crate::clock::instant();
        if !budget.try_attempt(crate::clock::ms_at(t0)) {
            break None;
        }
        let exec_ms = core
            .shared
            .flow
            .effective(cand.connection, Knob::ExecutionMaxWaitMs)
            .value
            .max(core.config().upstream.first_byte_timeout_ms);
        ctx.exec_deadline = Some(t0 + Duration::from_millis(exec_ms));
        let end = {
            let _in_flight = InFlight::enter(&core.shared.in_flight[cand.connection]);
            match attempt(ctx, entry, cand, &mut watch, &budget).await {
                // The commit: the answer goes to the client, nothing is retried after it.
                AttemptEnd::Ready {
                    up,
                    head,
                    provider_index,
                } => {
                    let up_to = deliver::Upstream {
                        cand,
                        provider_index,
                        up,
                        head,
                    };
                    deliver::commit(ctx, entry, up_to, wr, &mut watch).await
                }
                end => end,
            }
        };
        // The attempt has closed or pooled its upstream connection: only now free the slot.
        drop(permit);
        ctx.exec_deadline = None;
        match end {
            // (`Ready` became `Done` or `Failed` in the commit just above.)
            AttemptEnd::Ready { .. } => break Some(false),
            AttemptEnd::Done { keep_alive } => {
                st.served = Some(cand.connection);
                break Some(keep_alive);
            }
            AttemptEnd::ClientGone => {
                let at = Tried { entry, cand, t0 };
                push(
                    ctx,
                    &at,
                    AttemptOutcome::ClientGone,
                    None,
                    Decision::Fail,
                    &budget,
                    None,
                );
                ctx.record.status = 499;
                ctx.record.outcome = crate::audit::Outcome::ClientGone;
                break Some(false);
            }
            AttemptEnd::Failed(f) => {
                let at = Tried { entry, cand, t0 };
                if st.on_failed(ctx, &at, site, &budget, f) {
                    break None;
                }
            }
        }
    };
    *buf = watch.finish().await;
    if let (Some(key), Some(conn)) = (&pin_key, st.served)
        && (200..300).contains(&ctx.record.status)
    {
        core.pin(key, conn, ttl, had_pin, crate::clock::unix_ms());
    }
    if let Some(keep) = result {
        return keep;
    }
    if let Some(err) = st.refusal.or(st.lease_capacity) {
        return finish_error(ctx, wr, &err, true).await;
    }
    let excl: Vec<Excluded> = st
        .excluded
        .iter()
        .filter(|(_, e)| *e != Exclusion::Tried)
        .map(|(c, e)| {
            let t = &entry.targets[c.target];
            let (_, conn, _) = names(ctx, c.connection);
            Excluded {
                target: t.label.to_string(),
                connection: conn.to_string(),
                reason: e.label(),
                remaining_s: e.remaining_ms().map(|ms| ms.div_ceil(1000)),
            }
        })
        .collect();
    answer::give_up(ctx, wr, &budget, st.last, &st.excluded, excl).await
}

/// (provider, connection, `provider/connection`) of a connection, without copying.
fn names(ctx: &Ctx<'_>, conn: usize) -> (&'static str, &'static str, &'static str) {
    ctx.core
        .shared
        .conn_names
        .get(conn)
        .copied()
        .unwrap_or(("", "", ""))
}

fn label(ctx: &Ctx<'_>, c: Candidate) -> &'static str {
    names(ctx, c.connection).2
}

/// One attempt, as the decision record names it: the route, the candidate, when it began.
struct Tried<'e> {
    entry: &'e Entry,
    cand: Candidate,
    t0: Instant,
}

/// Record one attempt: the metric, and a line of the decision record.
fn push(
    ctx: &mut Ctx<'_>,
    at: &Tried<'_>,
    outcome: AttemptOutcome,
    v: Option<&Verdict>,
    decision: Decision,
    budget: &Budget,
    detail: Option<String>,
) {
    let (entry, c, t0) = (at.entry, at.cand, at.t0);
    let (provider, connection, _) = names(ctx, c.connection);
    ctx.core.metrics.attempt(c.connection, outcome);
    ctx.record.attempts.push(AttemptRecord {
        provider,
        connection,
        model: entry.targets[c.target].model.clone(),
        outcome,
        status: v.map(|v| v.status).filter(|&s| s != 0),
        reason: v.map(|v| v.reason.as_str()),
        restated_from: None,
        retry_after_ms: v.and_then(|v| v.hint.map(|h| h.ms).or(v.cooldown_ms)),
        decision,
        attempts_left: budget.attempts_left(),
        ms_left: budget.time_left(now()),
        detail,
        ms: crate::clock::since(t0).as_millis() as u64,
    });
}
