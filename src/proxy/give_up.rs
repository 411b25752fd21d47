//! Giving up: when no attempt answered the client, a non-retryable upstream answer passed
//! through, the last upstream answer when the budget is spent, or Ringside's own answer for the
//! stop (`answer::table`), with the diagnostics this client may see.

use super::answer::LastFailure;
use super::exchange::{Buffered, Request};
use super::forward::{Relay, relay_buffered};
use super::respond::finish_error;
use super::stop::{Stop, final_stop, retry_advice, soonest};
use crate::resilience::Exclusion;
use crate::resilience::budget::Budget;
use monoio::net::tcp::TcpOwnedWriteHalf;
use serde_json::json;

/// Pass an upstream answer through (restated status, our headers). `wait_ms`: Ringside's next
/// chance of success, which replaces the upstream's own retry advice (`stop::retry_advice`).
async fn pass_through(
    ctx: &mut Request<'_>,
    endpoint: crate::dialect::Endpoint,
    wr: &mut TcpOwnedWriteHalf,
    last: &LastFailure,
    resp: &Buffered,
    wait_ms: Option<u64>,
) -> bool {
    let secrets = super::redact::Secrets::of(ctx.core, ctx.config(), last.conn);
    let body = secrets.redact(&resp.body);
    if ctx.early_head.is_some() {
        // A waiting stream's head went out: the answer's error is the stream's error event.
        let message = crate::translate::answer::error_message(&body);
        let code = crate::translate::session::error_code(resp.status);
        let err = crate::dialect::ApiError::new(resp.status, code, message);
        let keep = finish_error(ctx, wr, &err, true).await;
        record_passed(ctx, last, resp.status, body.len());
        return keep;
    }
    let advice = retry_advice(wait_ms);
    // (An empty value drops the upstream's own: it spoke for one key.)
    let ms = wait_ms.filter(|_| advice.is_some()).map(|ms| ms.max(1));
    let extra: [(&str, String); 3] = [
        ("x-should-retry", advice.is_some().to_string()),
        (
            "retry-after",
            advice.map(|s| s.to_string()).unwrap_or_default(),
        ),
        (
            "retry-after-ms",
            ms.map(|ms| ms.to_string()).unwrap_or_default(),
        ),
    ];
    record_passed(ctx, last, resp.status, body.len());
    let attempts = ctx.attempts_header(None);
    let route = ctx.record.route.clone().unwrap_or_default();
    let r = Relay {
        secrets,
        endpoint,
        request_id: &ctx.record.request_id,
        route: &route,
        connection_label: ctx.reveal.then_some(last.label),
        attempts: &attempts,
        client_keep_alive: ctx.keep_alive,
        client_http11: ctx.head.version_minor >= 1,
        head_sent: false,
        budget_warning: ctx.budget_warning,
        coalesce: crate::sse::Coalesce::Never,
        idle_timeout_ms: 1_000,
        send_timeout_ms: super::forward::ms32(ctx.config().limits.client_send_timeout_ms),
        hard_deadline: None,
        stream: &crate::sse::StreamSettings::DEFAULT,
        client_fd: ctx.conn.fd,
        judging: &ctx.config().resilience,
    };
    relay_buffered(wr, &resp.head, resp.status, &body, &r, &extra).await
}

/// The decision record of an upstream answer passed on.
fn record_passed(ctx: &mut Request<'_>, last: &LastFailure, status: u16, bytes: usize) {
    ctx.record.status = status;
    ctx.record.outcome = if last.verdict.retryable {
        crate::audit::Outcome::Failed
    } else {
        crate::audit::Outcome::PassedThrough
    };
    ctx.record.error_code = Some(last.verdict.reason.as_str());
    ctx.record.connection = Some(last.label);
    ctx.record.bytes_out = bytes as u64;
}

/// Build and send the final answer. Returns whether the connection stays open.
pub(super) async fn give_up(
    ctx: &mut Request<'_>,
    endpoint: crate::dialect::Endpoint,
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
        return pass_through(ctx, endpoint, wr, l, resp, None).await;
    }
    let stop = final_stop(budget, &timers, now);
    // The soonest a candidate may serve: as each exclusion said, or as the tables say now.
    let earliest = super::stop::chances(&timers).min();
    let earliest = soonest(earliest, last.as_ref().and_then(|l| l.next_chance_ms));
    // The last failure has the last word: its own answer when there is one.
    if stop == Stop::LastWord
        && let Some(l) = &last
        && let Some(resp) = &l.response
    {
        let own = l.verdict.hint.map(|h| h.ms).or(l.verdict.cooldown_ms);
        let wait = earliest.or(own.filter(|ms| *ms > 0));
        return pass_through(ctx, endpoint, wr, l, resp, wait).await;
    }
    let err = super::answer::table(ctx, &stop, last.as_ref(), earliest);
    let err = overloaded_for_anthropic(err, endpoint, &timers, last.as_ref());
    let err = precise_wait(err, earliest);
    let diag = diagnostics_for(ctx, last.as_ref());
    let attempts = ctx.attempts_header(None);
    let err = err
        .extra(json!({"diagnostics": diag}))
        .header("x-ringside-attempts", attempts);
    finish_error(ctx, wr, &err, true).await
}

/// An answer that says when to come back says it to the millisecond too (`retry-after-ms`,
/// which the OpenAI SDK prefers): `Retry-After`'s whole seconds overstate a wait by up to one.
/// `wait_ms`: the freshest known wait, which may also lower the seconds.
fn precise_wait(
    mut err: crate::dialect::ApiError,
    wait_ms: Option<u64>,
) -> crate::dialect::ApiError {
    if let (Some(secs), Some(ms)) = (err.retry_after, wait_ms)
        && err.should_retry != Some(false)
        && ms <= secs.saturating_mul(1_000)
    {
        err.retry_after = Some(super::stop::secs(ms));
        err = err.header("retry-after-ms", ms.max(1).to_string());
    }
    err
}

/// Every target overloaded, said as Anthropic says it to an Anthropic client: a 529
/// `overloaded_error` (Claude Code's `--fallback-model` and the SDKs' overload handling start
/// on it), not Ringside's 503. Overloaded: each candidate cools for an overload or sits behind
/// an open breaker, and at least one overload was seen.
fn overloaded_for_anthropic(
    mut err: crate::dialect::ApiError,
    endpoint: crate::dialect::Endpoint,
    timers: &[&Exclusion],
    last: Option<&LastFailure>,
) -> crate::dialect::ApiError {
    use crate::resilience::classify::Reason::Overloaded;
    let overload = |e: &&&Exclusion| {
        matches!(
            e,
            Exclusion::Cooling {
                reason: Some(Overloaded),
                ..
            } | Exclusion::Lockout {
                reason: Overloaded,
                ..
            }
        )
    };
    let seen =
        timers.iter().any(|e| overload(&e)) || last.is_some_and(|l| l.verdict.reason == Overloaded);
    let all = timers
        .iter()
        .all(|e| overload(&e) || matches!(e, Exclusion::BreakerOpen { .. }));
    if endpoint.dialect() == crate::dialect::Dialect::Anthropic && err.status == 503 && seen && all
    {
        err.status = 529;
        err.code = "overloaded";
        err.message = format!("every target is overloaded; {}", err.message);
    }
    err
}

/// Names and upstream text are for the operator; a tenant gets the count and its request id
/// (the decision record, `GET /admin/decisions/{id}`, has the rest).
fn diagnostics_for(ctx: &Request<'_>, last: Option<&LastFailure>) -> serde_json::Value {
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

#[cfg(test)]
mod tests {
    #[test]
    fn each_way_of_stopping_gets_its_row() {
        use super::{Budget, Stop, final_stop};
        use crate::resilience::classify::Reason;
        use crate::resilience::cooldown::Terminal;
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
        // The request's own cap passed a candidate over: said before any timer.
        let over_cap = Exclusion::Ineligible(Ineligible::OverRequestBudget);
        assert_eq!(
            final_stop(&budget, &[&cooling, &over_cap], 10),
            Stop::RequestBudget
        );
        assert_eq!(final_stop(&spent, &[&over_cap], 10), Stop::LastWord);
        // Every candidate refused on the way (a terminal one aside): no wait helps, so none is
        // told. Beside a timer that does lift, that timer is the next chance.
        let refused = Exclusion::Cooling {
            reason: Some(Reason::EgressRefused),
            ms: 1_000,
        };
        assert_eq!(
            final_stop(&budget, &[&refused, &banned], 10),
            Stop::RefusedOnTheWay(Reason::EgressRefused)
        );
        assert_eq!(
            final_stop(&budget, &[&refused, &cooling], 10),
            Stop::AllCooling { secs: 3 }
        );
    }
}
