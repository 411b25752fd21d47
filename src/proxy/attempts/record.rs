//! What the attempt loop carries from attempt to attempt: the candidates it tried, the last
//! failure, a refusal; each attempt as a line of the decision record; and the answer when no
//! attempt served.

use crate::audit::{AttemptOutcome, AttemptRecord, Decision, Excluded};
use crate::ids::{ConnId, ConnNames};
use crate::proxy::answer::{self, LastFailure, Stop};
use crate::proxy::decide;
use crate::proxy::exchange::{Ctx, Failed};
use crate::proxy::respond::finish_error;
use crate::resilience::Exclusion;
use crate::resilience::budget::Budget;
use crate::resilience::classify::Verdict;
use crate::route::{Candidate, Entry};
use monoio::net::tcp::TcpOwnedWriteHalf;
use std::time::Instant;

/// What the attempt loop carries from one attempt to the next.
#[derive(Default)]
pub(super) struct LoopState {
    /// Failed once already in this request (and not on a timer that excludes them anyway).
    pub(super) tried: Vec<Candidate>,
    /// Refused us (saturated with `on_saturation = "reject"`) in this request.
    pub(super) saturated: Vec<Candidate>,
    /// Why each candidate was passed over in the last selection.
    pub(super) excluded: Vec<(Candidate, Exclusion)>,
    // Boxed, like the two answers below: only a failure fills them, and this state lives in
    // every held stream's task.
    pub(super) last: Option<Box<LastFailure>>,
    /// A local overload or a lease refusal, or a failure that ends the request where it
    /// happened (queue full or timed out, execution timeout, the drain, local resources).
    pub(super) refusal: Option<Box<Stop>>,
    /// Every eligible connection turned out to be leased by other sessions.
    pub(super) lease_capacity: Option<Box<Stop>>,
    /// The connection whose answer reached the client whole (for the session pin).
    pub(super) served: Option<ConnId>,
    /// This request repeats one given up on lately: that one's digest (0: none), forgotten
    /// once this one is answered (`resilience::repeats`).
    pub(super) repeat: u64,
}

impl LoopState {
    /// The account's usage wall sends the request to it again (`proxy::usage_wall`): the
    /// attempt is recorded, and nothing is learned from it (no cooldown, no breaker failure).
    /// It is not counted against the attempt budget: the lane's waits are bounded by the
    /// request's deadline and their own cap, its other sends by `usage_wall::MAX_SENDS`.
    pub(super) fn on_same_account(
        &mut self,
        ctx: &mut Ctx<'_, '_>,
        at: &Tried<'_>,
        budget: &mut Budget,
        f: Failed,
        (delay_ms, via): (u64, crate::resilience::usage_wall::lane::Via),
    ) {
        budget.refund_attempt();
        let a = push_failed(ctx, at, &f, Decision::SameAccount, budget);
        a.via = Some(via.as_str());
        a.retry_after_ms = Some(delay_ms);
        crate::proxy::usage_wall::send_again(ctx, at.cand, delay_ms);
        // Answered as it is should the deadline come during the wait.
        self.keep_last(ctx, at.cand, f);
    }

    /// The failure the client is answered with if no later attempt serves.
    fn keep_last(&mut self, ctx: &Ctx<'_, '_>, cand: Candidate, f: Failed) {
        self.last = Some(Box::new(LastFailure {
            verdict: f.verdict,
            detail: f.detail,
            response: f.response,
            label: label(ctx, cand),
            conn: cand.connection,
            next_chance_ms: None,
        }));
    }

    /// Record a failed attempt and learn from it; true when the loop ends here (an execution
    /// timeout, or an answer to pass through).
    pub(super) fn on_failed(
        &mut self,
        ctx: &mut Ctx<'_, '_>,
        at: &Tried<'_>,
        site: crate::resilience::Site<'_>,
        budget: &Budget,
        f: Failed,
    ) -> bool {
        let core = ctx.core;
        let cand = at.cand;
        if let Some(answer) = ending_answer(f.kind) {
            if f.kind == AttemptOutcome::ExecutionTimeout {
                core.shared.flow.gates[cand.connection]
                    .stats
                    .execution_timeouts
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            push(
                ctx,
                at,
                f.kind,
                None,
                Decision::Fail,
                budget,
                Some(f.detail),
            );
            self.refusal = Some(Box::new(answer));
            return true;
        }
        if !f.self_inflicted {
            core.record_failure(site, &f.verdict);
        }
        let decision = decide::after_failure(&f.verdict, budget, larger_context(at));
        push_failed(ctx, at, &f, decision, budget).restated_from = f.restated_from;
        // Try this candidate again only if the failure put it on a timer (then it is excluded
        // by that timer, and a short one may be waited out), or if only a stale pooled
        // connection failed (the key itself is not tried out).
        let s = &ctx.config().resilience;
        if !f.stale_pooled
            && core
                .tables
                .borrow_mut()
                .blocked(s, site, crate::clock::now_ms())
                .is_none()
        {
            self.tried.push(cand);
        }
        self.keep_last(ctx, cand, f);
        decision == Decision::PassThrough
    }
}

/// The answer of a failure that ends the request where it happened, whatever budget is left
/// (made after the attempt is recorded, so that its attempts header counts it): the drain's
/// grace ended; this host is out of descriptors or ports, or of room on the HTTP/2
/// connections a core may hold to the provider (another candidate would need the same, or
/// wait on the same connections, and nothing was learned about this one); the execution
/// budget ran out.
pub(super) fn ending_answer(kind: AttemptOutcome) -> Option<Stop> {
    match kind {
        AttemptOutcome::Shutdown => Some(Stop::Shutdown),
        AttemptOutcome::LocalResources => Some(Stop::LocalResources),
        AttemptOutcome::ExecutionTimeout => Some(Stop::ExecutionTimeout),
        _ => None,
    }
}

/// No attempt answered the client: a refusal is told as it is; otherwise the answer comes from
/// the last failure and what was passed over (`answer::give_up`).
pub(super) async fn conclude(
    ctx: &mut Ctx<'_, '_>,
    wr: &mut TcpOwnedWriteHalf,
    entry: &Entry,
    budget: &Budget,
    st: LoopState,
) -> bool {
    if let Some(stop) = st.refusal.or(st.lease_capacity) {
        let err = answer::of(ctx, &stop);
        let keep = finish_error(ctx, wr, &err, true).await;
        if stop.cut_by_drain() {
            // Cut by the grace's end like a stream: counted in the exit status.
            ctx.record.outcome = crate::audit::Outcome::Shutdown;
            ctx.core.shared.lifecycle.count_cut(1);
        }
        return keep;
    }
    let excl: Vec<Excluded> = st
        .excluded
        .iter()
        .filter(|(_, e)| *e != Exclusion::Tried)
        .map(|(c, e)| excluded(ctx, entry, *c, e))
        .collect();
    let endpoint = ctx.admitted.endpoint;
    remember_given_up(ctx, st.last.as_ref().map(|l| l.verdict.retryable));
    let mut last = st.last;
    if let Some(l) = last.as_mut() {
        l.next_chance_ms = next_chance(ctx, entry, &st.excluded);
    }
    super::super::give_up::give_up(
        ctx,
        endpoint,
        wr,
        budget,
        last.map(|l| *l),
        &st.excluded,
        excl,
    )
    .await
}

/// How an exclusion reads in the decision record.
fn excluded(ctx: &Ctx<'_, '_>, entry: &Entry, c: Candidate, e: &Exclusion) -> Excluded {
    Excluded {
        target: entry.targets[c.target].label.to_string(),
        connection: names(ctx, c.connection).connection.to_string(),
        reason: e.label(),
        remaining_s: e.remaining_ms().map(|ms| ms.div_ceil(1000)),
    }
}

/// The exclusion a wait for a usable key follows: the timer that ends first (as
/// `decide::when_nothing_usable` timed the wait).
pub(super) fn waited_for(
    ctx: &Ctx<'_, '_>,
    entry: &Entry,
    excluded_now: &[(Candidate, Exclusion)],
) -> Option<Box<Excluded>> {
    let (c, e) = excluded_now
        .iter()
        .filter_map(|(c, e)| e.remaining_ms().map(|ms| (ms, c, e)))
        .min_by_key(|(ms, _, _)| *ms)
        .map(|(_, c, e)| (*c, e))?;
    Some(Box::new(excluded(ctx, entry, c, e)))
}

/// A connection's names, without copying (empty for a slot the generation does not name).
pub(super) fn names(ctx: &Ctx<'_, '_>, conn: ConnId) -> ConnNames {
    ctx.generation
        .conn_names
        .get(conn.index())
        .copied()
        .unwrap_or_default()
}

fn label(ctx: &Ctx<'_, '_>, c: Candidate) -> &'static str {
    names(ctx, c.connection).label
}

/// One attempt, as the decision record names it: the route, the candidate, when it began.
pub(super) struct Tried<'e> {
    pub(super) entry: &'e Entry,
    pub(super) cand: Candidate,
    pub(super) t0: Instant,
}

/// Record one attempt: the metric, and a line of the decision record.
pub(super) fn push(
    ctx: &mut Ctx<'_, '_>,
    at: &Tried<'_>,
    outcome: AttemptOutcome,
    v: Option<&Verdict>,
    decision: Decision,
    budget: &Budget,
    detail: Option<String>,
) {
    let (entry, c, t0) = (at.entry, at.cand, at.t0);
    let ConnNames {
        provider,
        connection,
        ..
    } = names(ctx, c.connection);
    ctx.core.metrics.attempt(c.connection, outcome);
    let ended_us = crate::clock::since(ctx.started).as_micros() as u64;
    ctx.record.attempts.push(AttemptRecord {
        provider,
        connection,
        model: entry.targets[c.target].model.clone(),
        outcome,
        status: v.map(|v| v.status).filter(|&s| s != 0),
        reason: v.map(|v| v.reason.as_str()),
        scope: v.map(|v| v.scope.as_str()),
        rule: v.map(Verdict::rule_id),
        hint_source: v.and_then(Verdict::wait_source),
        restated_from: None,
        retry_after_ms: v.and_then(|v| v.hint.map(|h| h.ms).or(v.cooldown_ms)),
        decision,
        via: None,
        attempts_left: budget.attempts_left(),
        ms_left: budget.time_left(crate::clock::now_ms()),
        detail,
        ms: crate::clock::since(t0).as_millis() as u64,
        ended_us,
    });
}

/// Record a failed attempt with its verdict and detail; its line of the record, to add to.
fn push_failed<'r>(
    ctx: &'r mut Ctx<'_, '_>,
    at: &Tried<'_>,
    f: &Failed,
    decision: Decision,
    budget: &Budget,
) -> &'r mut AttemptRecord {
    let detail = Some(f.detail.clone());
    push(ctx, at, f.kind, Some(&f.verdict), decision, budget, detail);
    let last = ctx.record.attempts.len() - 1;
    &mut ctx.record.attempts[last]
}

/// Whether another target of the route declares a larger context window than the one tried
/// (a target that declares none is not known to be larger).
fn larger_context(at: &Tried<'_>) -> bool {
    let tried = at.entry.targets[at.cand.target].caps.context_window;
    at.entry
        .targets
        .iter()
        .any(|t| match (t.caps.context_window, tried) {
            (Some(w), Some(here)) => w > here,
            (Some(_), None) => true,
            (None, _) => false,
        })
}

/// A request given up on is remembered for a while, so that the client's retry of it is known
/// (`resilience::repeats`); one the client must change first (a bad request) is not.
fn remember_given_up(ctx: &Ctx<'_, '_>, retryable: Option<bool>) {
    let window_ms = ctx.config().resilience.retry_window_ms;
    let spent = ctx.record.attempts.len() as u32;
    if window_ms == 0 || spent == 0 || retryable == Some(false) {
        return;
    }
    let digest = super::budget::repeat_digest(ctx);
    let now = crate::clock::now_ms();
    ctx.core.shared.repeats.note(digest, spent, now, window_ms);
}

/// When the soonest of the route's candidates may serve again, as the tables say now (fresher
/// than what each exclusion said when it was made: a key's later failure may have shown the
/// whole provider down, which a probe may end sooner): a cooldown's end or the next probe that
/// may lift it; at once for one this request never reached (its budget ran out first). One
/// that just failed here and is not cooling (its failure cools nothing) is no chance.
fn next_chance(
    ctx: &Ctx<'_, '_>,
    entry: &Entry,
    excluded: &[(Candidate, Exclusion)],
) -> Option<u64> {
    let s = &ctx.config().resilience;
    let now = crate::clock::now_ms();
    let mut tables = ctx.core.tables.borrow_mut();
    let reach = crate::route::Reach::of(ctx.admitted.endpoint);
    let mut soonest: Option<u64> = None;
    for c in ctx.generation.routes.all_candidates(entry, reach) {
        let why = excluded.iter().find(|(x, _)| *x == c).map(|(_, e)| e);
        if matches!(why, Some(Exclusion::Ineligible(_) | Exclusion::Terminal(_))) {
            continue;
        }
        let site = crate::proxy::select::site(ctx, entry, c, now);
        let ms = match tables.blocked(s, site, now) {
            // A refusal's end is no chance: one more try at the same refusal.
            Some(e) if e.refused_on_the_way() => None,
            Some(e) => e.remaining_ms(),
            None if why.is_none() => Some(0),
            None => None,
        };
        soonest = crate::proxy::stop::soonest(soonest, ms);
    }
    soonest
}
