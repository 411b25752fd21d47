//! One upstream attempt against one candidate: take a pooled connection or connect, send, await
//! the head (first-byte timeout; a pooled connection that dies before any byte is retried once
//! on a fresh one), judge it (held stream, whole error body), and commit only what deserves it.

use super::exchange::Buffered;
use super::exchange::{AttemptEnd, Ctx, Failed};
use super::judge::{self, Hold, Read, describe};
use super::send::{HeadFail, send_and_await_head};
use super::watch::{ClientWatch, Raced};
use crate::audit::AttemptOutcome;
use crate::config::{Connection, Provider};
use crate::dialect::ratelimit::RateLimits;
use crate::http::Head;
use crate::resilience::budget::Budget;
use crate::resilience::classify::{self, Reason, Verdict};
use crate::route::{Candidate, Entry};
use crate::timer;
use crate::upstream::{ConnectError, UpConn};
use std::time::{Duration, Instant};

fn now() -> u64 {
    crate::clock::now_ms()
}

fn failed(
    verdict: Verdict,
    kind: AttemptOutcome,
    detail: String,
    self_inflicted: bool,
) -> AttemptEnd {
    AttemptEnd::Failed(Failed::new(verdict, kind, detail, self_inflicted))
}

/// One upstream attempt against one candidate, judged before anything reaches the client:
/// `Ready` (a head worth delivering, for the loop to commit), `Failed` or `ClientGone`.
#[allow(clippy::manual_async_fn)] // an async block: see `crate::proxy`, *Arguments in place*
pub(super) fn attempt(
    ctx: &mut Ctx<'_, '_>,
    entry: &Entry,
    cand: Candidate,
    watch: &mut ClientWatch<'_>,
    budget: &Budget,
) -> impl std::future::Future<Output = AttemptEnd> {
    async move {
        let core = ctx.core;
        let cfg = ctx.config();
        let Some((provider, conn)) = cfg.connection(cand.connection) else {
            return failed(
                classify::transport(false),
                AttemptOutcome::ProtocolError,
                "unknown connection".into(),
                true,
            );
        };
        let model = &entry.targets[cand.target].model;
        let out = match super::upstream_request::request_for(ctx, provider, conn, model) {
            Ok(out) => out,
            Err(end) => return *end,
        };
        let aim = Aim {
            provider,
            conn,
            provider_index: cfg.provider_of(cand.connection).unwrap_or(0),
            cand,
            // (Read after the request is built: the send time.)
            time: Timing::new(ctx, budget, cfg.upstream.first_byte_timeout_ms),
        };
        // A pooled connection or a new one, the request sent and the response head read.
        // (An `if let`: its scrutinee ends before the `else`, so the empty pool's answer is not
        // kept across the connect, nor in every held stream's task.)
        let mut up = if let Some(c) = aim.pooled(core) {
            c
        } else {
            match connect(ctx, &aim, watch).await {
                Ok(c) => c,
                Err(end) => return end,
            }
        };
        let stream = ctx.admitted.stream;
        let head =
            match send_and_await_head(&mut up, &out, aim.time.first_byte, stream, watch).await {
                Ok(head) => head,
                Err(fail) => return aim.send_failed(core, &up, fail),
            };
        // What the head says about limits, read once: the load and pacing tables take it now;
        // an error answer's judge later (boxed: 8 bytes in every attempt's state, not 400).
        let (limits, wall) = super::learn::from_head(core, cand, &head, conn.usage_wall.any());
        if wall.is_some() || (head.status == 401 && conn.oauth.is_some()) {
            // A Claude subscription account's usage wall reads every answer's head: a success
            // counts as served on the lane (or shows the window rolled over), a wall answer may
            // send the request to the same account again (`attempts`); so may a 401 once the
            // OAuth token is refreshed.
            let deadline = aim.time.deadline;
            let to = (provider, conn);
            let learn = super::usage_wall::after_head(ctx, to, &head, wall, budget, deadline);
            Box::pin(learn).await;
        }
        if !(200..300).contains(&head.status) {
            return match judge::read_error_body(&mut up, &head, aim.time.deadline, watch).await {
                Read::ClientGone => AttemptEnd::ClientGone,
                Read::Failed { detail, timeout } => {
                    let end = aim.time.failed(timeout, AttemptOutcome::Reset, detail);
                    super::h2_failure::judged(&up, end)
                }
                Read::Ok(body) => {
                    let end = error_answer(ctx, &aim, up, (head, limits.as_deref()), body);
                    super::oauth::expire_if_refused(ctx, end)
                }
            };
        }
        // An event stream is held until its first useful event (when the stream guard holds
        // streams back), so that a stream failing at once is retried, not delivered.
        let st = &cfg.stream;
        if st.guard && st.holdback_ms > 0 && is_event_stream(&head) {
            let marked_end = aim.provider.dialect != crate::dialect::Dialect::Gemini;
            let until = (aim.time.deadline, marked_end);
            let held = judge::hold_stream(&mut up, &head, st, until, watch).await;
            if let Some(end) = judge_hold(ctx, &aim, &head, held, model) {
                return super::h2_failure::judged(&up, end);
            }
        }
        let translated = super::translated::is_translated(ctx);
        if (translated || super::idempotent::keeps_answer(ctx)) && !is_event_stream(&head) {
            // Read whole before the commit: a translated answer is written for the client (one
            // that does not read as the provider's API says is retried elsewhere); a key's
            // owner keeps its answer for duplicates. (Boxed: rare.)
            let read = Box::pin(whole_answer(ctx, &aim, &mut up, &head, watch)).await;
            if let Err(end) = read {
                return super::h2_failure::judged(&up, end);
            }
        }
        observe_latency(ctx, &aim);
        AttemptEnd::Ready {
            up,
            head,
            provider_index: aim.provider_index,
        }
    }
}

pub(super) fn is_event_stream(head: &Head) -> bool {
    head.get("content-type")
        .is_some_and(|v| v.starts_with(b"text/event-stream"))
}

/// Where one attempt goes, and its clock.
struct Aim<'a> {
    provider: &'a Provider,
    conn: &'a Connection,
    provider_index: usize,
    cand: Candidate,
    time: Timing,
}

impl Aim<'_> {
    /// An idle connection to this provider from the core's pool, if one is there.
    #[inline(always)]
    fn pooled(&self, core: &crate::state::core::Core) -> Option<UpConn> {
        core.pool
            .borrow_mut()
            .take(self.provider_index, self.time.sent_ms)
    }

    /// A send that failed before the head. A pooled connection that the upstream closed while
    /// it idled fails at once, before any byte of the answer: the request is sent again on
    /// another connection, as a new attempt of its own. Never after a timeout: the upstream
    /// may have started on the request, and it must not run twice.
    fn send_failed(
        &self,
        core: &crate::state::core::Core,
        up: &UpConn,
        fail: HeadFail,
    ) -> AttemptEnd {
        match fail {
            HeadFail::ClientGone => AttemptEnd::ClientGone,
            HeadFail::TlsRefused(detail) => failed(
                classify::refused_on_the_way(Reason::TlsRefused),
                AttemptOutcome::TlsError,
                detail,
                false,
            ),
            // Cut by the drain: nothing learned about the upstream.
            HeadFail::Failed {
                kind: AttemptOutcome::Shutdown,
                detail,
                ..
            } => failed(
                classify::transport(false),
                AttemptOutcome::Shutdown,
                detail,
                true,
            ),
            HeadFail::Failed {
                timeout,
                kind,
                detail,
                nothing_received,
            } => {
                let mut end = self.time.failed(timeout, kind, detail);
                if up.stream.h2().is_some() {
                    return super::h2_failure::judged(up, end);
                }
                // An idle close is believed once per burst: when a connection taken with this
                // one was already found closed, a reset on this one too is the upstream
                // failing (an outage, a fault that resets every request), counted as such,
                // not one more free attempt per request in flight.
                let stale = up.reused
                    && nothing_received
                    && !timeout
                    && !core
                        .pool
                        .borrow()
                        .forgotten_since_taken(self.provider_index, up);
                if let AttemptEnd::Failed(f) = &mut end
                    && stale
                {
                    f.stale_pooled = true;
                    f.self_inflicted = true;
                    // Its siblings idled as long beside it: an upstream that restarted or
                    // resets everything closed them too. Fresh connections say which.
                    core.pool.borrow_mut().forget(self.provider_index);
                    f.detail = format!("{} (a pooled connection closed while idle)", f.detail);
                }
                end
            }
        }
    }
}

/// The attempt's deadlines, read once when the request goes out, and which of them binds.
struct Timing {
    sent_at: Instant,
    sent_ms: u64,
    /// The budget's end or the execution deadline, whichever is sooner.
    deadline: Instant,
    first_byte: Duration,
    /// A timeout caused by the client's own deadline says nothing about the upstream.
    cut_by_deadline: bool,
    /// When the execution budget (flow control) is what cut a wait, not the request's
    /// deadline nor the upstream's own timeouts: for the body, and for the head.
    cut_by_execution: bool,
    head_cut_by_execution: bool,
}

impl Timing {
    #[inline]
    fn new(ctx: &Ctx<'_, '_>, budget: &Budget, first_byte_timeout_ms: u64) -> Timing {
        // One clock read for the budget, the deadlines, the send time and the pool.
        let sent_at = crate::clock::instant();
        let sent_ms = crate::clock::ms_at(sent_at);
        let budget_left = budget.time_left(sent_ms);
        let exec_left = ctx.exec_deadline.map_or(u64::MAX, |d| {
            d.saturating_duration_since(sent_at).as_millis() as u64
        });
        let left_ms = budget_left.min(exec_left);
        Timing {
            sent_at,
            sent_ms,
            deadline: sent_at + Duration::from_millis(left_ms),
            first_byte: Duration::from_millis(first_byte_timeout_ms.min(left_ms)),
            cut_by_deadline: left_ms < first_byte_timeout_ms,
            cut_by_execution: exec_left < budget_left,
            head_cut_by_execution: exec_left < budget_left.min(first_byte_timeout_ms),
        }
    }

    /// A timeout the execution budget caused is an execution timeout, whatever was waited for.
    fn kind(&self, timeout: bool, kind: AttemptOutcome) -> AttemptOutcome {
        let binding = if kind == AttemptOutcome::Timeout {
            self.head_cut_by_execution
        } else {
            self.cut_by_execution
        };
        if timeout && binding {
            AttemptOutcome::ExecutionTimeout
        } else {
            kind
        }
    }

    /// A transport failure (or timeout) while waiting on the upstream.
    fn failed(&self, timeout: bool, kind: AttemptOutcome, detail: String) -> AttemptEnd {
        failed(
            classify::transport(timeout),
            self.kind(timeout, kind),
            detail,
            timeout && self.cut_by_deadline,
        )
    }
}

/// A new upstream connection, within the attempt's deadline. A connect that finds this host
/// out of descriptors or ports closes the core's idle upstream connections (the only ones
/// Ringside can spare) and tries once more; failing again, it ends the attempt as Ringside's
/// own shortage, which blames no key (`LocalResources`).
async fn connect(
    ctx: &Ctx<'_, '_>,
    aim: &Aim<'_>,
    watch: &mut ClientWatch<'_>,
) -> Result<UpConn, AttemptEnd> {
    let mut shed = false;
    loop {
        // A new connection is the rare path (pooled ones are reused): its ~6 KB of connect and
        // TLS state is boxed, not carried in every request's future.
        let connector = &ctx.core.connector;
        let connect = Box::pin(connector.open(aim.provider_index, &aim.provider.endpoint));
        let connect = timer::timeout_at(aim.time.deadline, connect);
        let e = match watch.race(std::pin::pin!(connect)).await {
            Raced::ClientGone => return Err(AttemptEnd::ClientGone),
            Raced::Done(Err(_)) => {
                return Err(failed(
                    classify::transport(true),
                    aim.time.kind(true, AttemptOutcome::ConnectTimeout),
                    "deadline reached while connecting".into(),
                    true,
                ));
            }
            Raced::Done(Ok(Ok(c))) => return Ok(c),
            Raced::Done(Ok(Err(e))) => e,
        };
        let local = matches!(e, ConnectError::Local(_));
        if local && !shed {
            shed = true;
            ctx.core.pool.borrow_mut().clear();
            continue;
        }
        let verdict = match e {
            ConnectError::EgressRefused(_) => classify::refused_on_the_way(Reason::EgressRefused),
            ConnectError::TlsRefused(_) => classify::refused_on_the_way(Reason::TlsRefused),
            ConnectError::NoRoom => classify::no_room(),
            _ => classify::transport(matches!(e, ConnectError::Timeout)),
        };
        // Ringside's own shortage (descriptors, HTTP/2 connections) or pacing: blames no key.
        let own = local || matches!(e, ConnectError::OwnLimit | ConnectError::NoTurn);
        return Err(failed(verdict, e.outcome(), e.to_string(), own));
    }
}

/// What holding a 2xx event stream found: `None` to commit it, or the attempt's end.
fn judge_hold(
    ctx: &mut Ctx<'_, '_>,
    aim: &Aim<'_>,
    head: &Head,
    held: Read<Hold>,
    model: &str,
) -> Option<AttemptEnd> {
    match held {
        Read::ClientGone => Some(AttemptEnd::ClientGone),
        Read::Failed { detail, timeout } => Some(aim.time.failed(
            timeout,
            AttemptOutcome::StreamError,
            detail,
        )),
        Read::Ok(Hold::Stalled) => {
            // Nothing useful in time: retried elsewhere, and the key cools for a timeout as
            // the same stall after the first byte does (one rule for stalls: the next request
            // should not wait out the same silence). Unless the request's own deadline cut it.
            let ms = ctx.config().stream.readiness_timeout_ms;
            let detail = format!("no useful stream event within {ms} ms");
            Some(
                aim.time
                    .failed(true, AttemptOutcome::StreamReadinessTimeout, detail),
            )
        }
        Read::Ok(Hold::Error(text)) => Some(in_band_error(ctx, aim, head, &text)),
        Read::Ok(Hold::Cut(cut)) => {
            let (detail, produced) = *cut;
            // Retried elsewhere, and billed: the provider billed what it produced.
            super::bill::produced_before_commit(ctx, (aim.provider_index, model), produced);
            Some(aim.time.failed(false, AttemptOutcome::StreamError, detail))
        }
        Read::Ok(Hold::Commit) => None,
    }
}

/// A head worth delivering: the connection's latency is recorded. (Its success is recorded
/// when the body ends well: `attempts::Attempts::after`.)
fn observe_latency(ctx: &Ctx<'_, '_>, aim: &Aim<'_>) {
    let latency_ms = crate::clock::since(aim.time.sent_at).as_millis() as u64;
    ctx.core
        .loads
        .borrow_mut()
        .observe_latency(aim.cand.connection, latency_ms);
}

/// A held stream whose first event was an error: judged like an error answer.
fn in_band_error(ctx: &Ctx<'_, '_>, aim: &Aim<'_>, head: &Head, text: &str) -> AttemptEnd {
    let b = judge::in_band(ctx, aim.provider, aim.conn, head, text);
    AttemptEnd::Failed(Failed {
        restated_from: b.restated_from,
        ..Failed::new(b.verdict, AttemptOutcome::StreamError, b.detail, false)
    })
}

/// A non-2xx answer, its body read whole: judged, the upstream connection pooled when it can
/// serve again, and the answer kept for a pass-through.
fn error_answer(
    ctx: &Ctx<'_, '_>,
    aim: &Aim<'_>,
    mut up: UpConn,
    (head, limits): (Head, Option<&RateLimits>),
    error: judge::ErrorBody,
) -> AttemptEnd {
    let core = ctx.core;
    let judge::ErrorBody {
        body,
        complete,
        oversized,
    } = error;
    let none = RateLimits::default();
    let x = judge::Exchange {
        provider: &aim.provider.id,
        status: head.status,
        head: &head,
        limits: limits.unwrap_or(&none),
        body: &body,
        request: &ctx.admitted.body,
    };
    let s = &ctx.config().resilience;
    let (verdict, restated) = judge::judge(s, &x, crate::clock::unix_ms());
    if complete && head.keep_alive && !core.drain.is_draining() {
        let _ = up.buf.split();
        let generation = ctx.generation.number;
        core.pool
            .borrow_mut()
            .put(aim.provider_index, up, now(), generation);
    }
    let kind = match AttemptOutcome::of_status(head.status) {
        AttemptOutcome::Ok => AttemptOutcome::Http4xx,
        k => k,
    };
    let detail = if oversized {
        format!(
            "upstream {}: an error body over {} bytes (not relayed)",
            head.status,
            judge::MAX_ERROR_BODY
        )
    } else {
        let secrets = super::redact::Secrets::of(core, ctx.config(), aim.conn.index);
        let told = judge::meaning(&verdict).unwrap_or_default();
        format!(
            "upstream {}: {told}{}",
            head.status,
            describe(&body, &head, &secrets)
        )
    };
    AttemptEnd::Failed(Failed {
        kind,
        detail,
        restated_from: restated.as_ref().map(|r| r.from),
        // An oversized body, or one that is not the API's JSON (a load balancer's HTML page,
        // which may name internal hosts), is answered with Ringside's own error, never relayed.
        response: (!oversized && judge::api_shaped(&body)).then(|| {
            Box::new(Buffered {
                status: verdict.status,
                body: super::translated::error_for_client(
                    ctx,
                    (aim.provider, aim.conn),
                    verdict.status,
                    body,
                ),
                head,
            })
        }),
        verdict,
        self_inflicted: false,
        stale_pooled: false,
    })
}

/// A JSON answer read whole (within the attempt's deadline) before the commit: a translated
/// one written in the client's API (`translated::keep_answer`), a key owner's kept as it is.
async fn whole_answer(
    ctx: &mut Ctx<'_, '_>,
    aim: &Aim<'_>,
    up: &mut UpConn,
    head: &Head,
    watch: &mut ClientWatch<'_>,
) -> Result<(), AttemptEnd> {
    let max = super::translated::MAX_ANSWER;
    let body = match judge::read_whole_body(up, head, aim.time.deadline, watch, max).await {
        Read::ClientGone => return Err(AttemptEnd::ClientGone),
        Read::Failed { detail, timeout } => {
            return Err(aim.time.failed(timeout, AttemptOutcome::Reset, detail));
        }
        Read::Ok(b) => b,
    };
    if !super::translated::is_translated(ctx) && !body.oversized {
        super::idempotent::keep(ctx, body.body, body.complete);
        return Ok(());
    }
    super::translated::keep_answer(ctx, body).map_err(|detail| {
        failed(
            classify::transport(false),
            AttemptOutcome::ProtocolError,
            detail,
            false,
        )
    })
}
