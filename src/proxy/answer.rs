//! What the client hears when Ringside stops trying: a non-retryable upstream answer passed
//! through, the last upstream answer when the budget is spent, or a precise answer of our own
//! (all targets cooling, model cooldown, every connection terminal, nothing executable,
//! deadline exceeded). Terminal answers carry `x-should-retry: false`; answers worth retrying
//! carry `Retry-After`.

use super::exchange::{Buffered, Ctx};
use super::forward::{Relay, relay_buffered};
use super::respond::finish_error;
use crate::dialect::ApiError;
use crate::resilience::Exclusion;
use crate::resilience::budget::Budget;
use crate::resilience::classify::{Reason, Verdict};
use crate::resilience::cooldown::Terminal;
use monoio::net::tcp::TcpOwnedWriteHalf;
use serde_json::json;

pub struct LastFailure {
    pub verdict: Verdict,
    pub detail: String,
    pub response: Option<Box<Buffered>>,
    /// `provider/connection`.
    pub label: &'static str,
    pub conn: usize,
}

fn secs(ms: u64) -> u64 {
    ms.div_ceil(1000).max(1)
}

/// Pass an upstream answer through (restated status, our headers).
async fn pass_through(
    ctx: &mut Ctx<'_>,
    wr: &mut TcpOwnedWriteHalf,
    last: &LastFailure,
    resp: &Buffered,
    should_retry: bool,
) -> bool {
    let secrets = super::redact::Secrets::of(ctx.core, ctx.config(), last.conn);
    let body = secrets.redact(&resp.body);
    let mut extra: Vec<(&str, String)> = vec![("x-should-retry", should_retry.to_string())];
    if let Some(ms) = last.verdict.hint.map(|h| h.ms).or(last.verdict.cooldown_ms) {
        extra.push(("retry-after", secs(ms).to_string()));
    }
    let attempts = ctx.attempts_header(None);
    let route = ctx.record.route.clone().unwrap_or_default();
    let r = Relay {
        secrets,
        dialect: ctx.dialect,
        request_id: &ctx.record.request_id,
        route: &route,
        connection_label: ctx.reveal.then_some(last.label),
        attempts: &attempts,
        client_keep_alive: ctx.keep_alive,
        client_http11: ctx.head.version_minor >= 1,
        coalesce: crate::sse::Coalesce::Never,
        idle_timeout_ms: 1_000,
        send_timeout_ms: super::forward::ms32(ctx.config().limits.client_send_timeout_ms),
        hard_deadline: None,
        stream: &crate::sse::StreamSettings::DEFAULT,
        client_fd: ctx.conn.fd,
        judging: &ctx.config().resilience,
    };
    ctx.record.status = resp.status;
    ctx.record.outcome = if last.verdict.retryable {
        crate::audit::Outcome::Failed
    } else {
        crate::audit::Outcome::PassedThrough
    };
    ctx.record.error_code = Some(last.verdict.reason.as_str());
    ctx.record.connection = Some(last.label);
    ctx.record.bytes_out = body.len() as u64;
    relay_buffered(wr, &resp.head, resp.status, &body, &r, &extra).await
}

fn error_for_reason(v: &Verdict, detail: &str) -> ApiError {
    let (status, code) = match v.reason {
        Reason::Timeout => (504, "upstream_timeout"),
        Reason::Transport => (502, "upstream_unavailable"),
        r => (if v.status >= 400 { v.status } else { 502 }, r.as_str()),
    };
    ApiError::new(status, code, format!("upstream failed: {detail}"))
}

/// Which row of the error table a request gets when Ringside stops trying (a pure function of
/// the budget, the last failure and what kept the other candidates out; `give_up` words it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Stop {
    /// 504 `deadline_exceeded`.
    DeadlineExceeded,
    /// Every candidate was tried or the attempt budget is spent: the last upstream answer is
    /// passed through, or its failure worded (502/504), or 503 `no_upstream_response`.
    LastWord,
    /// 401 `all_connections_unusable`: every candidate is in this terminal state (the first's).
    AllTerminal(Terminal),
    /// 429 `model_cooldown`: every candidate is locked out for the model.
    ModelCooldown { secs: u64 },
    /// 503 `all_targets_cooling_down`: the first recovers in `secs`.
    AllCooling { secs: u64 },
    /// 429 `RATE_LIMIT_QUEUE_FULL`: every usable key is at its cap (reject policy).
    Saturated,
    /// 404 `no_executable_targets`.
    NoExecutableTargets,
}

/// The row for a request that stops now (`timers`: why each candidate was passed over, the
/// ones merely tried already left out). A non-retryable answer was passed through before this.
pub(super) fn final_stop(budget: &Budget, timers: &[&Exclusion], now: u64) -> Stop {
    let earliest = timers.iter().filter_map(|e| e.remaining_ms()).min();
    if budget.expired(now) {
        Stop::DeadlineExceeded
    } else if timers.is_empty() || budget.attempts_left() == 0 {
        Stop::LastWord
    } else if let Exclusion::Terminal(first) = timers[0]
        && timers.iter().all(|e| matches!(e, Exclusion::Terminal(_)))
    {
        Stop::AllTerminal(*first)
    } else if let Some(ms) = earliest {
        let secs = secs(ms);
        if timers
            .iter()
            .all(|e| matches!(e, Exclusion::Lockout { .. }))
        {
            Stop::ModelCooldown { secs }
        } else {
            Stop::AllCooling { secs }
        }
    } else if timers.iter().any(|e| {
        matches!(
            e,
            Exclusion::Ineligible(crate::resilience::Ineligible::Saturated)
        )
    }) {
        Stop::Saturated
    } else {
        Stop::NoExecutableTargets
    }
}

/// Build and send the final answer. Returns whether the connection stays open.
pub(super) async fn give_up(
    ctx: &mut Ctx<'_>,
    wr: &mut TcpOwnedWriteHalf,
    budget: &Budget,
    last: Option<LastFailure>,
    excluded: &[(crate::route::Candidate, Exclusion)],
    diagnostics: Vec<crate::audit::Excluded>,
) -> bool {
    let now = crate::clock::now_ms();
    ctx.record.excluded = diagnostics;
    let timers: Vec<&Exclusion> = excluded
        .iter()
        .map(|(_, e)| e)
        .filter(|e| **e != Exclusion::Tried)
        .collect();
    // A non-retryable answer (bad request): the client's own problem, passed through as is.
    if let Some(l) = &last
        && !l.verdict.retryable
        && let Some(resp) = &l.response
    {
        return pass_through(ctx, wr, l, resp, false).await;
    }
    let stop = final_stop(budget, &timers, now);
    // The last failure has the last word: its own answer when there is one.
    if stop == Stop::LastWord
        && let Some(l) = &last
        && let Some(resp) = &l.response
    {
        return pass_through(ctx, wr, l, resp, false).await;
    }
    let earliest = timers.iter().filter_map(|e| e.remaining_ms()).min();
    let err = error_for(ctx, stop, last.as_ref(), earliest);
    let diag = diagnostics_for(ctx, last.as_ref());
    let attempts = ctx.attempts_header(None);
    let err = err
        .extra(json!({"diagnostics": diag}))
        .header("x-ringside-attempts", attempts);
    finish_error(ctx, wr, &err, true).await
}

/// Names and upstream text are for the operator; a tenant gets the count and its request id
/// (the decision record, `GET /admin/decisions/{id}`, has the rest).
fn diagnostics_for(ctx: &Ctx<'_>, last: Option<&LastFailure>) -> serde_json::Value {
    let n = ctx.record.attempts.len();
    if ctx.reveal {
        json!({
            "attempts": n,
            "excluded": ctx.record.excluded,
            "last_error": last.map(|l| l.detail.clone()),
        })
    } else {
        json!({"attempts": n})
    }
}

/// The error a stop is answered with (a pass-through of the last answer is decided before).
fn error_for(
    ctx: &Ctx<'_>,
    stop: Stop,
    last: Option<&LastFailure>,
    earliest: Option<u64>,
) -> ApiError {
    let n = ctx.record.attempts.len();
    match stop {
        Stop::DeadlineExceeded => ApiError::new(
            504,
            "deadline_exceeded",
            format!("the request deadline passed after {n} attempt(s)"),
        )
        .should_retry(false),
        Stop::LastWord => match last {
            Some(l) => {
                let shown = if ctx.reveal {
                    l.detail.clone()
                } else {
                    format!(
                        "see the decision record of request {}",
                        ctx.record.request_id
                    )
                };
                let e = error_for_reason(&l.verdict, &shown).should_retry(false);
                match earliest {
                    Some(ms) => e.retry_after(secs(ms)),
                    None => e,
                }
            }
            None => ApiError::new(503, "no_upstream_response", "no upstream was tried"),
        },
        Stop::AllTerminal(t) => {
            let kind = match t {
                Terminal::Banned => "banned by the upstream",
                Terminal::Expired => "expired (authentication failed)",
                Terminal::CreditsExhausted => "out of credits",
            };
            ApiError::new(
                401,
                "all_connections_unusable",
                format!(
                    "every connection for this model is {kind}; an operator must reset or replace them"
                ),
            )
            .should_retry(false)
        }
        // Long waits are not worth an SDK's automatic retry.
        Stop::ModelCooldown { secs: s } => {
            let model = ctx.record.model.clone().unwrap_or_default();
            ApiError::new(
                429,
                "model_cooldown",
                format!("all credentials for model {model} are cooling down"),
            )
            .extra(json!({"model": model, "reset_seconds": s}))
            .retry_after(s)
            .should_retry(s <= 60)
        }
        Stop::AllCooling { secs: s } => ApiError::new(
            503,
            "all_targets_cooling_down",
            format!("every target is cooling down; the first recovers in {s}s"),
        )
        .retry_after(s)
        .should_retry(s <= 60),
        // Local overload: every usable key is at its concurrency cap (reject policy).
        Stop::Saturated => refused_error(crate::flow::Refused::Saturated, ctx),
        Stop::NoExecutableTargets => ApiError::new(
            404,
            "no_executable_targets",
            "no target can serve this request",
        )
        .should_retry(false),
    }
}

/// Local overload (never counted against the upstream): queue full or queue timeout.
pub(crate) fn refused(r: crate::flow::Refused, ctx: &Ctx<'_>) -> ApiError {
    refused_error(r, ctx).header("x-ringside-attempts", ctx.attempts_header(None))
}

/// A local overload: retry in about a second. `Retry-After` cannot spread clients that were
/// refused together at its one-second resolution, so `retry-after-ms` (which the OpenAI SDK
/// prefers) carries the jittered wait.
fn refused_error(r: crate::flow::Refused, ctx: &Ctx<'_>) -> ApiError {
    let e = match r {
        crate::flow::Refused::QueueFull => ApiError::new(
            429,
            "RATE_LIMIT_QUEUE_FULL",
            "the connection's queue is full; try again shortly",
        ),
        crate::flow::Refused::QueueTimeout { waited_ms } => ApiError::new(
            503,
            "RATE_LIMIT_QUEUE_TIMEOUT",
            format!("no slot became free within {waited_ms} ms of queueing"),
        ),
        crate::flow::Refused::Saturated => ApiError::new(
            429,
            "RATE_LIMIT_QUEUE_FULL",
            "every connection is at its concurrency limit",
        ),
    };
    let pct = ctx.config().resilience.jitter_pct;
    let ms =
        crate::resilience::jitter::spread(1_000, pct, crate::clock::now_ms() ^ ctx.core.id as u64);
    e.retry_after(1)
        .header("retry-after-ms", ms.to_string())
        .should_retry(true)
}

/// The execution budget ran out before the answer began: the upstream was closed first.
/// The code of the answer a request waiting for its upstream gets when the drain's grace ends.
pub(crate) const SHUTDOWN: &str = "shutdown";

/// The drain's grace ended before the upstream answered: another instance can serve the
/// retry (the same code a cut stream's error event carries).
pub(crate) fn shutdown(ctx: &Ctx<'_>) -> ApiError {
    ApiError::new(
        503,
        SHUTDOWN,
        "Ringside is shutting down and the upstream had not answered when its grace ended",
    )
    .retry_after(1)
    .should_retry(true)
    .header("x-ringside-attempts", ctx.attempts_header(None))
}

/// The upstream connection could not be made for want of a descriptor or port on this host
/// (`fd_limit::is_exhaustion`): Ringside's shortage, which passes as streams end.
pub(crate) fn local_resources(ctx: &Ctx<'_>) -> ApiError {
    ApiError::new(
        503,
        "local_resources_exhausted",
        "Ringside has no free file descriptor or local port for an upstream connection",
    )
    .retry_after(1)
    .should_retry(true)
    .header("x-ringside-attempts", ctx.attempts_header(None))
}

pub(crate) fn execution_timeout(ctx: &Ctx<'_>) -> ApiError {
    ApiError::new(
        504,
        "RATE_LIMIT_EXECUTION_TIMEOUT",
        "the upstream did not answer within the execution budget",
    )
    .retry_after(1)
    .should_retry(false)
    .header("x-ringside-attempts", ctx.attempts_header(None))
}

#[cfg(test)]
mod tests {
    #[test]
    fn each_way_of_stopping_gets_its_row() {
        use super::{Budget, Stop, Terminal, final_stop};
        use crate::resilience::classify::Reason;
        use crate::resilience::{Exclusion, Ineligible};
        let budget = Budget::new(3, 0, 60_000, 30_000);
        let cooling = Exclusion::Cooling {
            reason: Some(Reason::RateLimited),
            ms: 2_500,
        };
        let locked = Exclusion::Lockout {
            reason: Reason::RateLimited,
            ms: 90_000,
        };
        let banned = Exclusion::Terminal(Terminal::Banned);
        let expired = Exclusion::Terminal(Terminal::Expired);
        let saturated = Exclusion::Ineligible(Ineligible::Saturated);
        let no_tools = Exclusion::Ineligible(Ineligible::NoToolSupport);
        // The deadline passed, whatever else.
        assert_eq!(
            final_stop(&budget, &[&cooling], 60_000),
            Stop::DeadlineExceeded
        );
        // Nothing excluded (every candidate tried), or no attempt left: the last word.
        assert_eq!(final_stop(&budget, &[], 10), Stop::LastWord);
        let mut spent = Budget::new(1, 0, 60_000, 0);
        assert!(spent.try_attempt(0));
        assert_eq!(final_stop(&spent, &[&cooling], 10), Stop::LastWord);
        // Every candidate terminal: the first's state is named.
        assert_eq!(
            final_stop(&budget, &[&expired, &banned], 10),
            Stop::AllTerminal(Terminal::Expired)
        );
        // Every candidate locked for the model, or cooling: seconds rounded up.
        assert_eq!(
            final_stop(&budget, &[&locked], 10),
            Stop::ModelCooldown { secs: 90 }
        );
        assert_eq!(
            final_stop(&budget, &[&locked, &cooling, &banned], 10),
            Stop::AllCooling { secs: 3 }
        );
        // Local overload, and nothing that can serve at all.
        assert_eq!(
            final_stop(&budget, &[&saturated, &no_tools], 10),
            Stop::Saturated
        );
        assert_eq!(
            final_stop(&budget, &[&no_tools], 10),
            Stop::NoExecutableTargets
        );
    }
}
