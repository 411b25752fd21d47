//! The attempt loop under one budget: candidates (dropping cooling / locked / breaker-open /
//! ineligible ones, each with its reason) -> select -> connect -> send -> await head -> judge
//! -> stream | retry the same target after a short cooldown | next target | wait | fail.

mod record;

use super::admit::{self, Admission};
use super::attempt::attempt;
use super::decide::{self, Idle};
use super::deliver;
use super::exchange::{AttemptEnd, Ctx};
use super::lease::{LeaseMove, capacity_answer};
use super::select::{self, site};
use super::watch::{ClientWatch, Raced};
use crate::audit::{AttemptOutcome, Decision};
use crate::dialect::needs::Needs;
use crate::flow::settings::Knob;
use crate::resilience::breaker::{Admit, ProbeGuard};
use crate::resilience::budget::{Budget, parse_deadline_header};
use crate::route::load::InFlight;
use crate::route::{Candidate, Entry};
use crate::timer;
use monoio::net::tcp::{TcpOwnedReadHalf, TcpOwnedWriteHalf};
use record::{LoopState, Tried, conclude, push};
use std::time::Duration;

fn now() -> u64 {
    crate::clock::now_ms()
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
    let pin = Pin::find(ctx);
    let mut run = Attempts {
        entry,
        needs,
        wr,
        watch: ClientWatch::start(rd, std::mem::take(buf)),
        budget: budget_for(ctx, entry),
        st: LoopState::default(),
        pinned: pin.had.map(|(c, _)| c),
    };
    let answered = loop {
        if let Step::Stop(answered) = run.pass(ctx).await {
            break answered;
        }
    };
    let Attempts {
        wr,
        watch,
        budget,
        st,
        ..
    } = run;
    *buf = watch.finish().await;
    pin.remember(ctx, st.served);
    match answered {
        Some(keep_alive) => keep_alive,
        None => conclude(ctx, wr, entry, &budget, st).await,
    }
}

/// The request's budget: its attempts, and its deadline (the route's, or the client's own
/// within the rules of `decide::deadline_ms`).
fn budget_for(ctx: &Ctx<'_>, entry: &Entry) -> Budget {
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
    Budget::new(max_attempts, now(), deadline_ms, s.max_wait_ms)
}

/// Session affinity: the connection this session was pinned to goes first while usable, and
/// a 2xx answer pins the session to the connection that served it.
struct Pin {
    key: Option<String>,
    ttl: u64,
    had: Option<(usize, u64)>,
}

impl Pin {
    fn find(ctx: &Ctx<'_>) -> Pin {
        let core = ctx.core;
        let ttl = core.config().affinity_ttl_ms;
        // A leased request is served only by its lease's connection: no soft pin.
        let key = (ttl > 0 && ctx.lease.is_none())
            .then(|| crate::store::pins::session_key(ctx.head))
            .flatten();
        let had = key
            .as_deref()
            .and_then(|k| core.pinned(k, crate::clock::unix_ms()));
        Pin { key, ttl, had }
    }

    fn remember(&self, ctx: &Ctx<'_>, served: Option<usize>) {
        if let (Some(key), Some(conn)) = (&self.key, served)
            && (200..300).contains(&ctx.record.status)
        {
            let unix_now = crate::clock::unix_ms();
            ctx.core.pin(key, conn, self.ttl, self.had, unix_now);
        }
    }
}

/// How one pass of the loop ends.
enum Step {
    /// Select again: a lease moved, a wait was waited out, a candidate refused or failed.
    Again,
    /// The loop ends. `Some(keep_alive)`: the client has its answer (or is gone). `None`: the
    /// answer is still to be chosen (a refusal, or giving up).
    Stop(Option<bool>),
}

/// What one request's attempt loop holds from pass to pass.
struct Attempts<'a, 'r> {
    entry: &'a Entry,
    needs: &'a Needs,
    wr: &'a mut TcpOwnedWriteHalf,
    watch: ClientWatch<'r>,
    budget: Budget,
    st: LoopState,
    /// The session's pinned connection, tried first while it is usable.
    pinned: Option<usize>,
}

impl Attempts<'_, '_> {
    /// One pass: select a candidate and try it, or deal with having none.
    async fn pass(&mut self, ctx: &mut Ctx<'_>) -> Step {
        let core = ctx.core;
        core.sync();
        let t = now();
        if self.budget.expired(t) {
            return Step::Stop(None);
        }
        let bound = ctx.lease.as_ref().map(|b| b.conn);
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
            pinned: self.pinned,
        };
        let excluded = &mut self.st.excluded;
        match select::select(ctx, self.entry, self.needs, &seen, (t, unix_now), excluded) {
            Some((cand, admit)) => self.try_candidate(ctx, cand, admit, t).await,
            None => self.nothing_usable(ctx, t, unix_now).await,
        }
    }

    /// No candidate is usable now: move the lease, wait for the earliest short recovery if the
    /// budget allows, or stop.
    async fn nothing_usable(&mut self, ctx: &mut Ctx<'_>, t: u64, unix_now: u64) -> Step {
        // A lease whose connection cannot serve moves to a free eligible one (same
        // generation), as health, cooldown, quota and model rules have the final say.
        match super::lease::move_off(ctx, &self.st.excluded).await {
            LeaseMove::Moved => return Step::Again,
            LeaseMove::Refused(e) => {
                self.st.refusal = Some(e);
                return Step::Stop(None);
            }
            LeaseMove::Stayed => {}
        }
        let excluded = self.st.excluded.iter().map(|(_, e)| e);
        match decide::when_nothing_usable(excluded, &self.budget, t) {
            Idle::Wait(ms) => {
                ctx.record.waited_ms += ms;
                self.budget.waited(ms);
                let sleep = timer::sleep_until(crate::clock::instant() + Duration::from_millis(ms));
                if let Raced::ClientGone = self.watch.race(sleep).await {
                    return client_gone(ctx);
                }
                Step::Again
            }
            Idle::GiveUp => {
                self.st.lease_capacity = capacity_answer(ctx, &self.st.excluded, unix_now);
                Step::Stop(None)
            }
        }
    }

    /// Admit the chosen candidate and make one attempt on it.
    async fn try_candidate(
        &mut self,
        ctx: &mut Ctx<'_>,
        cand: Candidate,
        admit: Admit,
        t: u64,
    ) -> Step {
        let core = ctx.core;
        let site = site(ctx, self.entry, cand);
        // The probe (if this attempt is one) is released when this pass ends, however.
        let _probe = ProbeGuard::new(admit, &core.shared.probes.0[site.provider]);
        if self.budget.attempts_left() == 0 {
            return Step::Stop(None);
        }
        // Admission: a slot of the connection (global across cores), or a place in its queue,
        // and the lease fenced again after any wait.
        let permit = match admit::admit(ctx, cand, &self.budget, t, &mut self.watch).await {
            Admission::Go(p) => p,
            Admission::Saturated => {
                self.st.saturated.push(cand);
                return Step::Again;
            }
            Admission::LeaseMoved => return Step::Again,
            Admission::ClientGone => return client_gone(ctx),
            Admission::Refused(e) => {
                self.st.refusal = Some(e);
                return Step::Stop(None);
            }
        };
        // One clock read for the budget, the execution deadline and the attempt's timing.
        let t0 = crate::clock::instant();
        if !self.budget.try_attempt(crate::clock::ms_at(t0)) {
            return Step::Stop(None);
        }
        let exec_ms = core
            .shared
            .flow
            .effective(cand.connection, Knob::ExecutionMaxWaitMs)
            .value
            .max(core.config().upstream.first_byte_timeout_ms);
        ctx.exec_deadline = Some(t0 + Duration::from_millis(exec_ms));
        let end = self.attempt_and_commit(ctx, cand).await;
        // The attempt has closed or pooled its upstream connection: only now free the slot.
        drop(permit);
        ctx.exec_deadline = None;
        let at = Tried {
            entry: self.entry,
            cand,
            t0,
        };
        self.after(ctx, &at, site, end)
    }

    /// Connect, send and await the head; a usable head is committed to the client at once.
    async fn attempt_and_commit(&mut self, ctx: &mut Ctx<'_>, cand: Candidate) -> AttemptEnd {
        let _in_flight = InFlight::enter(&ctx.core.shared.in_flight[cand.connection]);
        match attempt(ctx, self.entry, cand, &mut self.watch, &self.budget).await {
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
                deliver::commit(ctx, self.entry, up_to, self.wr, &mut self.watch).await
            }
            end => end,
        }
    }

    /// What an attempt's end means for the loop.
    fn after(
        &mut self,
        ctx: &mut Ctx<'_>,
        at: &Tried<'_>,
        site: crate::resilience::Site<'_>,
        end: AttemptEnd,
    ) -> Step {
        match end {
            // (`Ready` became `Done` or `Failed` in the commit.)
            AttemptEnd::Ready { .. } => Step::Stop(Some(false)),
            AttemptEnd::Done { keep_alive } => {
                self.st.served = Some(at.cand.connection);
                Step::Stop(Some(keep_alive))
            }
            AttemptEnd::ClientGone => {
                let outcome = AttemptOutcome::ClientGone;
                push(ctx, at, outcome, None, Decision::Fail, &self.budget, None);
                client_gone(ctx)
            }
            AttemptEnd::Failed(f) => {
                if self.st.on_failed(ctx, at, site, &self.budget, f) {
                    Step::Stop(None)
                } else {
                    Step::Again
                }
            }
        }
    }
}

/// The client went away: recorded as 499, and the connection is not kept.
fn client_gone(ctx: &mut Ctx<'_>) -> Step {
    ctx.record.status = 499;
    ctx.record.outcome = crate::audit::Outcome::ClientGone;
    Step::Stop(Some(false))
}
