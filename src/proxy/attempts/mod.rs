//! The attempt loop under one budget: candidates (dropping cooling / locked / breaker-open /
//! ineligible ones, each with its reason) -> select -> connect -> send -> await head -> judge
//! -> stream | retry the same target after a short cooldown | next target | wait | fail.

mod budget;
mod pin;
mod record;

use super::admit::{self, Admission};
use super::attempt::attempt;
use super::decide::{self, Idle};
use super::deliver;
use super::exchange::{AttemptEnd, Ctx, Delivered};
use super::lease::{LeaseMove, capacity_answer};
use super::select::{self, site};
use super::stop::Stop;
use super::watch::{ClientWatch, Raced};
use crate::audit::{AttemptOutcome, Decision};
use crate::dialect::needs::Needs;
use crate::flow::settings::Knob;
use crate::ids::ConnId;
use crate::resilience::breaker::{Admit, ProbeGuard};
use crate::resilience::budget::Budget;
use crate::route::load::InFlight;
use crate::route::{Candidate, Entry};
use crate::timer;
use budget::budget_for;
use monoio::net::tcp::{TcpOwnedReadHalf, TcpOwnedWriteHalf};
use pin::Pin;
use record::{LoopState, Tried, conclude, push};
use std::time::Duration;

/// Sends a provider refused unprocessed (HTTP/2 `REFUSED_STREAM`, `GOAWAY`) that do not count
/// against the request's attempts: beyond these, a provider that keeps refusing spends them.
const MAX_REFUSED: usize = 3;

/// The request's sends refused so far (its decision record says: no state in every task).
fn refused_so_far(ctx: &Ctx<'_, '_>) -> usize {
    let a = &ctx.record.attempts;
    a.iter()
        .filter(|a| a.outcome == AttemptOutcome::Refused)
        .count()
}

fn now() -> u64 {
    crate::clock::now_ms()
}

/// The attempt loop. Returns whether the client connection stays open.
///
/// Every wait of the request path is awaited here, in this one future, or in a phase it awaits
/// directly (admit, attempt, commit): each level of nested futures costs a copy of the inner
/// future when it starts and a dispatch on every wake of a long stream. The decisions around
/// the waits are plain functions.
#[allow(clippy::manual_async_fn)] // an async block: see `crate::proxy`, *Arguments in place*
pub(super) fn run(
    ctx: &mut Ctx<'_, '_>,
    entry: &Entry,
    needs: &Needs,
    rd: &mut TcpOwnedReadHalf,
    wr: &mut TcpOwnedWriteHalf,
    buf: &mut bytes::BytesMut,
) -> impl std::future::Future<Output = bool> {
    async move {
        let pin = Pin::find(ctx);
        if ctx.admitted.stream && buf.is_empty() {
            // A stream request holds its connection for seconds: the read buffer goes back to
            // the core now, and the next request is waited for with none (`serve_client`).
            crate::http::buffers::give_back(std::mem::take(buf));
        }
        let mut watch = super::keepalive::watch(ctx, entry, rd, std::mem::take(buf));
        let mut run = Attempts::new(ctx, entry);
        let answered = loop {
            // (The pinned connection is read from `pin` each time: kept in a local of its own it
            // took 16 bytes of every held stream's task.)
            let (cand, admit, t) = match run.select(ctx, needs, pin.had.map(|(c, _)| c)) {
                Pick::Candidate(cand, admit, t) => (cand, admit, t),
                Pick::SameAccount(cand, delay_ms) => {
                    match run.wait_for_same(ctx, &mut watch, delay_ms).await {
                        Ok(t) => (cand, crate::resilience::breaker::Admit::Yes, t),
                        Err(Step::Again) => continue,
                        Err(Step::End(answered)) => break answered,
                    }
                }
                Pick::Stop => break End::Conclude,
                Pick::NothingUsable(t, unix_now) => {
                    match run.nothing_usable(ctx, &mut watch, t, unix_now).await {
                        Step::Again => continue,
                        Step::End(answered) => break answered,
                    }
                }
            };
            // The probe (if this attempt is one) is released when the attempt ends, however.
            let provider = ctx.config().provider_of(cand.connection).unwrap_or(0);
            let probe = ProbeGuard::new(admit, &ctx.core.shared.probes.0[provider]);
            if run.budget.attempts_left() == 0 {
                break End::Conclude;
            }
            // Admission: a slot of the connection (global across cores), or a place in its queue,
            // and the lease fenced again after any wait.
            let admission = admit::admit(ctx, cand, &run.budget, t, &mut watch).await;
            // (In milliseconds from the pick: an instant kept across the wait would widen every
            // connection's task.)
            let waited = crate::clock::now_ms()
                .saturating_sub(t)
                .min(u64::from(u32::MAX) / 1_000);
            ctx.record.waits_us = ctx.record.waits_us.saturating_add(waited as u32 * 1_000);
            let permit = match run.admitted(ctx, cand, admission) {
                Ok(permit) => permit,
                Err(Step::Again) => continue,
                Err(Step::End(answered)) => break answered,
            };
            // (Made after the wait for admission, so that it is not kept across it.)
            let site = site(ctx, entry, cand, t);
            let Some(mut held) = run.start(ctx, cand, site, permit, probe) else {
                break End::Conclude;
            };
            let attempted = attempt(ctx, entry, cand, &mut watch, &run.budget).await;
            // (A `match` on the attempt's end around the commit would keep the end in this future's
            // state for the whole relay: taken apart in a statement of its own, it is not.)
            let mut ready = match deliver::Upstream::from_end(attempted, cand) {
                deliver::Attempted::Ready(ready) => ready,
                deliver::Attempted::Ended(end) => {
                    if let Step::End(answered) = run.after(ctx, held, end) {
                        break answered;
                    }
                    continue;
                }
            };
            // The commit: the answer goes to the client, nothing is retried after it.
            commit_probe(ctx, &mut held);
            let head_us = crate::audit::micros32(crate::clock::since(held.t0));
            ctx.record.head_us = head_us;
            ctx.core
                .metrics
                .upstream_head(cand.connection, u64::from(head_us));
            let (end, reusable) = deliver::commit(ctx, entry, &mut ready, wr, &mut watch).await;
            if reusable {
                ready.pool(ctx.core, ctx.generation.number);
            }
            if let Step::End(answered) = run.after(ctx, held, end) {
                break answered;
            }
        };
        let wait = super::keepalive::settle(ctx, watch, buf);
        ctx.conn.next_wait.set(wait);
        pin.remember(ctx, run.st.served);
        match answered {
            End::Answered { keep_alive } => keep_alive,
            End::Conclude => conclude(ctx, wr, entry, &run.budget, run.st).await,
        }
    }
}

/// How a step of the loop ends, when it may end the loop.
enum Step {
    /// Select again: a lease moved, a wait was waited out, a candidate refused or failed.
    Again,
    /// The loop ends.
    End(End),
}

/// How the loop ends.
#[derive(Clone, Copy)]
enum End {
    /// The client has its answer (or is gone): whether the connection stays open.
    Answered { keep_alive: bool },
    /// The answer is still to be chosen: a refusal kept in the loop's state, or giving up.
    Conclude,
}

/// What selection found.
enum Pick {
    /// A candidate, its breaker admission, and when it was picked.
    Candidate(Candidate, Admit, u64),
    /// Nothing usable at `t` (`unix_now`: the wall clock, when leases needed it).
    NothingUsable(u64, u64),
    /// The candidate its usage wall sends the request to again, after this many ms.
    SameAccount(Candidate, u64),
    /// The budget ran out.
    Stop,
}

/// What one attempt holds from its admission to its end. The guards are released in field
/// order, the in-flight count before the slot; the half-open probe last, after the attempt's
/// outcome was recorded (see `Attempts::after`).
struct Held<'a> {
    cand: Candidate,
    t0: std::time::Instant,
    site: crate::resilience::Site<'a>,
    in_flight: InFlight<'a>,
    permit: crate::flow::Permit,
    probe: ProbeGuard<'a>,
    /// A half-open probe's success was counted when its answer was committed (see `commit`).
    success_counted: bool,
}

/// What one request's attempt loop carries from attempt to attempt.
struct Attempts<'a> {
    entry: &'a Entry,
    budget: Budget,
    st: LoopState,
}

impl<'a> Attempts<'a> {
    /// A request's loop before its first attempt: its budget, and the request it repeats.
    fn new(ctx: &mut Ctx<'_, '_>, entry: &'a Entry) -> Self {
        let (budget, repeat) = budget_for(ctx, entry);
        Attempts {
            entry,
            budget,
            st: LoopState {
                repeat,
                ..LoopState::default()
            },
        }
    }

    /// Select a candidate (dropping cooling, locked, breaker-open and ineligible ones, each
    /// with its reason in `st.excluded`).
    fn select(&mut self, ctx: &mut Ctx<'_, '_>, needs: &Needs, pinned: Option<ConnId>) -> Pick {
        let core = ctx.core;
        core.sync();
        let t = now();
        if self.budget.expired(t) {
            return Pick::Stop;
        }
        if let Some((cand, delay_ms)) = crate::proxy::usage_wall::take_same(ctx) {
            return Pick::SameAccount(cand, delay_ms);
        }
        let bound = ctx.admitted.lease.as_ref().map(|b| b.conn);
        // Without any lease anywhere, no connection is held (and no clock read is needed).
        let unix_now = if bound.is_some() || !core.shared.leases.none() {
            crate::clock::unix_ms()
        } else {
            0
        };
        self.st.excluded.clear();
        let seen = select::Seen {
            tried: &self.st.tried,
            saturated: &self.st.saturated,
            bound,
            pinned,
        };
        let excluded = &mut self.st.excluded;
        match select::select(ctx, self.entry, needs, &seen, (t, unix_now), excluded) {
            Some((cand, admit)) => Pick::Candidate(cand, admit, t),
            None => Pick::NothingUsable(t, unix_now),
        }
    }

    /// No candidate is usable now: move the lease, wait for the earliest short recovery if the
    /// budget allows, or stop.
    async fn nothing_usable(
        &mut self,
        ctx: &mut Ctx<'_, '_>,
        watch: &mut ClientWatch<'_>,
        t: u64,
        unix_now: u64,
    ) -> Step {
        // A lease whose connection cannot serve moves to a free eligible one (same
        // generation), as health, cooldown, quota and model rules have the final say.
        match super::lease::move_off(ctx, &self.st.excluded).await {
            LeaseMove::Moved => return Step::Again,
            LeaseMove::Refused(e) => {
                self.st.refusal = Some(Box::new(Stop::Lease(Box::new(e))));
                return Step::End(End::Conclude);
            }
            LeaseMove::Stayed => {}
        }
        let excluded = self.st.excluded.iter().map(|(_, e)| e);
        let seed = crate::resilience::jitter::seed_of(ctx.record.request_id.as_bytes());
        match decide::when_nothing_usable(excluded, &self.budget, t, seed) {
            Idle::Wait(ms) => {
                self.budget.waited(ms);
                ctx.record.waited_for = record::waited_for(ctx, self.entry, &self.st.excluded);
                wait(ctx, watch, ms).await
            }
            Idle::GiveUp => {
                self.st.lease_capacity = capacity_answer(ctx, &self.st.excluded, unix_now)
                    .map(|e| Box::new(Stop::Lease(Box::new(e))));
                Step::End(End::Conclude)
            }
        }
    }

    /// Wait as the usage wall said before sending to the same account again (within the
    /// deadline: the lane's waits stop short of it); the time to pick it at.
    async fn wait_for_same(
        &mut self,
        ctx: &mut Ctx<'_, '_>,
        watch: &mut ClientWatch<'_>,
        delay_ms: u64,
    ) -> Result<u64, Step> {
        let ms = delay_ms.min(self.budget.time_left(now()));
        if ms > 0
            && let Step::End(answered) = wait(ctx, watch, ms).await
        {
            return Err(Step::End(answered));
        }
        let t = now();
        if self.budget.expired(t) {
            return Err(Step::End(End::Conclude));
        }
        Ok(t)
    }

    /// What admission said: a slot, or how the loop goes on.
    fn admitted(
        &mut self,
        ctx: &mut Ctx<'_, '_>,
        cand: Candidate,
        admission: Admission,
    ) -> Result<crate::flow::Permit, Step> {
        match admission {
            Admission::Go(p) => Ok(p),
            Admission::Saturated => {
                self.st.saturated.push(cand);
                Err(Step::Again)
            }
            Admission::LeaseMoved => Err(Step::Again),
            Admission::ClientGone => Err(client_gone(ctx)),
            Admission::Refused(stop) => {
                self.st.refusal = Some(Box::new(stop));
                Err(Step::End(End::Conclude))
            }
        }
    }

    /// Start an attempt: it takes one from the budget (`None`: none left in time) and runs
    /// under the execution deadline.
    fn start<'c: 'h, 'h>(
        &mut self,
        ctx: &mut Ctx<'_, 'c>,
        cand: Candidate,
        site: crate::resilience::Site<'h>,
        permit: crate::flow::Permit,
        probe: ProbeGuard<'h>,
    ) -> Option<Held<'h>> {
        let core: &'c crate::state::core::Core = ctx.core;
        // One clock read for the budget, the execution deadline and the attempt's timing:
        // fresh, not the poll's kept reading, so that the time from the request's head to
        // here (Ringside's own work, `ringside_overhead_seconds`) is seen.
        let t0 = std::time::Instant::now();
        if !self.budget.try_attempt(crate::clock::ms_at(t0)) {
            return None;
        }
        let exec_ms = core
            .shared
            .flow
            .effective(cand.connection, Knob::ExecutionMaxWaitMs)
            .value
            .max(ctx.config().upstream.first_byte_timeout_ms);
        ctx.exec_deadline = Some(t0 + Duration::from_millis(exec_ms));
        Some(Held {
            cand,
            t0,
            // Sent now, after any wait for admission since the pick.
            site: crate::resilience::Site {
                sent: crate::clock::ms_at(t0),
                probe: probe.is_claimed(),
                ..site
            },
            in_flight: InFlight::enter(&core.shared.in_flight[cand.connection]),
            permit,
            probe,
            success_counted: false,
        })
    }

    /// What an attempt's end means for the loop. The attempt has closed or pooled its upstream
    /// connection: only now is its slot freed.
    fn after(&mut self, ctx: &mut Ctx<'_, '_>, held: Held<'_>, end: AttemptEnd) -> Step {
        let Held {
            cand,
            t0,
            site,
            in_flight,
            permit,
            probe,
            success_counted,
        } = held;
        drop(in_flight);
        drop(permit);
        ctx.exec_deadline = None;
        let took = crate::audit::micros32(crate::clock::since(t0));
        ctx.record.upstream_us = ctx.record.upstream_us.saturating_add(took);
        ctx.core
            .metrics
            .attempt_time(cand.connection, u64::from(took));
        let at = Tried {
            entry: self.entry,
            cand,
            t0,
        };
        let step = match end {
            // (`Ready` became `Done` or `Failed` in the commit.)
            AttemptEnd::Ready { .. } => Step::End(End::Answered { keep_alive: false }),
            AttemptEnd::Done {
                keep_alive,
                delivered,
            } => {
                // A session is pinned to a connection that served an answer whole.
                if matches!(delivered, Delivered::Clean) {
                    self.st.served = Some(cand.connection);
                    // A client's retry answered: its retries are over (`resilience::repeats`).
                    if self.st.repeat != 0 {
                        ctx.core.shared.repeats.forget(self.st.repeat);
                    }
                }
                match delivered {
                    Delivered::Clean if !success_counted => ctx.core.record_success(site),
                    // A stream cut after its answer began is news of the provider now, however
                    // long ago it was sent.
                    Delivered::Failed(v) => {
                        let now = crate::clock::now_ms();
                        let site = crate::resilience::Site { sent: now, ..site };
                        ctx.core.record_failure(site, &v)
                    }
                    Delivered::Clean | Delivered::Unjudged => {}
                }
                Step::End(End::Answered { keep_alive })
            }
            AttemptEnd::ClientGone => {
                let outcome = AttemptOutcome::ClientGone;
                push(ctx, &at, outcome, None, Decision::Fail, &self.budget, None);
                client_gone(ctx)
            }
            AttemptEnd::Failed(f) => {
                if f.kind == AttemptOutcome::Refused && refused_so_far(ctx) < MAX_REFUSED {
                    // Never reached the model: not an attempt of the budget's (bounded).
                    self.budget.refund_attempt();
                }
                let lane = crate::proxy::usage_wall::retry(ctx);
                let ends_here = record::ending_answer(f.kind).is_some();
                if let (Some(retry), false) = (lane, ends_here) {
                    self.st
                        .on_same_account(ctx, &at, &mut self.budget, f, retry);
                    Step::Again
                } else if self.st.on_failed(ctx, &at, site, &self.budget, f) {
                    Step::End(End::Conclude)
                } else {
                    Step::Again
                }
            }
        };
        drop(probe);
        step
    }
}

/// The attempt's verdict is final when its body ends (`Attempts::after`). A half-open probe
/// is the exception: its success counts at the commit and its claim is released, so that the
/// breaker closes without waiting for a whole long stream; if the stream then fails, that
/// failure is counted (once: the breaker counts from closed again).
fn commit_probe(ctx: &Ctx<'_, '_>, held: &mut Held<'_>) {
    if held.probe.is_claimed() {
        ctx.core.record_success(held.site);
        held.probe.release();
        held.success_counted = true;
    }
}

/// Wait `ms`, racing the client: `Again` when waited out. The record keeps what was waited,
/// not what was planned: a client that hangs up ends it early.
async fn wait(ctx: &mut Ctx<'_, '_>, watch: &mut ClientWatch<'_>, ms: u64) -> Step {
    let started = crate::clock::instant();
    let sleep = timer::sleep_until(started + Duration::from_millis(ms));
    let gone = matches!(watch.race(sleep).await, Raced::ClientGone);
    let us = crate::clock::since(started).as_micros();
    let us = us.min(u128::from(u32::MAX)) as u32;
    ctx.record.waited_ms = ctx.record.waited_ms.saturating_add(us / 1_000);
    ctx.record.waits_us = ctx.record.waits_us.saturating_add(us);
    if gone {
        return client_gone(ctx);
    }
    Step::Again
}

/// The client went away: recorded as 499, and the connection is not kept.
fn client_gone(ctx: &mut Ctx<'_, '_>) -> Step {
    ctx.record.status = 499;
    ctx.record.outcome = crate::audit::Outcome::ClientGone;
    Step::End(End::Answered { keep_alive: false })
}
