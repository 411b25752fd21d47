//! What the client is told when Ringside ends a request itself: one table from every
//! `Stop` to its answer (status, stable code, words, `Retry-After`, `x-should-retry`),
//! written in the client's dialect by `respond::finish_error`. Terminal answers carry
//! `x-should-retry: false`; answers worth retrying carry `Retry-After`. A lease refusal
//! (`Stop::Lease`) keeps the lease contract's own codes, from its one table
//! (`lease::Refusal`), with the words of the case.

use super::exchange::{Buffered, Request};
pub(crate) use super::stop::Stop;
use crate::dialect::ApiError;
use crate::flow::Refused;
use crate::flow::tenant::OverQuota;
use crate::ids::ConnId;
use crate::resilience::classify::{Reason, Verdict};
use crate::resilience::cooldown::Terminal;
use serde_json::json;

pub struct LastFailure {
    pub verdict: Verdict,
    pub detail: String,
    pub response: Option<Box<Buffered>>,
    /// `provider/connection`.
    pub label: &'static str,
    pub conn: ConnId,
    /// When the soonest of the candidates this request tried may serve again (ms from the
    /// give-up): Ringside's next chance, told as `Retry-After`.
    pub next_chance_ms: Option<u64>,
}

/// The answer for `stop`, as this client may see it (the names behind a give-up only for the
/// operator); `last` and `earliest` (the soonest a candidate recovers) word a give-up.
pub(crate) fn table(
    ctx: &Request<'_>,
    stop: &Stop,
    last: Option<&LastFailure>,
    earliest: Option<u64>,
) -> ApiError {
    match stop {
        Stop::Lease(err) => (**err).clone(),
        Stop::Refused(r) => refused(*r, ctx),
        Stop::Shutdown | Stop::LocalResources | Stop::ExecutionTimeout => ending(ctx, stop),
        Stop::DeadlineExceeded
        | Stop::LastWord
        | Stop::AllTerminal(_)
        | Stop::ModelCooldown { .. }
        | Stop::AllCooling { .. }
        | Stop::RefusedOnTheWay(_)
        | Stop::Saturated
        | Stop::RequestBudget
        | Stop::NoExecutableTargets => given_up(ctx, stop, last, earliest),
        Stop::MethodNotAllowed
        | Stop::UnknownEndpoint
        | Stop::CrossOriginForm
        | Stop::MisdirectedHost
        | Stop::Unauthenticated
        | Stop::InsufficientScope
        | Stop::ClientGone
        | Stop::BodyTimeout
        | Stop::BodyTooLarge { .. }
        | Stop::BadChunkedBody(_)
        | Stop::TruncatedBody
        | Stop::InvalidJson(_)
        | Stop::InvalidField(_)
        | Stop::InvalidHeader(_)
        | Stop::MissingModel
        | Stop::InvalidModel(_)
        | Stop::ModelNotFound(_)
        | Stop::NoTargetFor(_)
        | Stop::TenantQuota(_)
        | Stop::TenantBudget(_) => refused_on_intake(ctx, stop),
    }
}

/// The answer for a stop that needs nothing of the request but itself.
pub(crate) fn of(ctx: &Request<'_>, stop: &Stop) -> ApiError {
    table(ctx, stop, None, None)
}

/// A request refused before any upstream was tried: its head, its body, its route, its quota.
fn refused_on_intake(ctx: &Request<'_>, stop: &Stop) -> ApiError {
    let (method, path) = (ctx.head.method(), ctx.head.path());
    let (status, code, message): (u16, &'static str, String) = match stop {
        Stop::MethodNotAllowed => (405, "method_not_allowed", format!("{method} is not allowed on {path}")),
        Stop::UnknownEndpoint => (404, "unknown_endpoint", format!("no endpoint {method} {path}")),
        Stop::CrossOriginForm => (403, "cross_origin_refused", "a cross-origin request must send a JSON body (content-type: application/json)".into()),
        Stop::MisdirectedHost => (421, "misdirected_host", "the Host header names neither this server's address nor a local name: list the name in server.hosts to serve it without client keys".into()),
        Stop::Unauthenticated => (401, "invalid_api_key", "a valid Ringside client key is required (Authorization: Bearer or x-api-key)".into()),
        Stop::InsufficientScope => (403, "insufficient_scope", "this key may not make inference requests".into()),
        Stop::ClientGone => return ApiError::new(499, "client_disconnected", "client went away"),
        Stop::BodyTimeout => (408, "request_timeout", "the request body was not received in time".into()),
        Stop::BodyTooLarge { max } => (413, "request_too_large", format!("request body exceeds {max} bytes")),
        Stop::BadChunkedBody(e) => return ApiError::bad_request("bad_chunked_body", format!("bad chunked request body: {e}")),
        Stop::TruncatedBody => return ApiError::bad_request("truncated_body", "the request body ended early"),
        Stop::InvalidJson(m) => return ApiError::bad_request("invalid_json", format!("request body is not a JSON object: {m}")),
        Stop::InvalidField(f) => return ApiError::bad_request("invalid_field", format!("`{f}` has the wrong type")),
        Stop::InvalidHeader(h) => return ApiError::bad_request("invalid_header", format!("`{h}` must be a non-negative number")),
        Stop::MissingModel => return ApiError::bad_request("missing_model", "the request has no `model`"),
        Stop::InvalidModel(why) => return ApiError::bad_request("invalid_model", *why),
        Stop::ModelNotFound(model) => (404, "model_not_found", format!("no route or model named `{model}`")),
        Stop::NoTargetFor(why) => (404, "no_executable_targets", why.clone()),
        Stop::TenantQuota(over) => return tenant_quota(*over),
        Stop::TenantBudget(spent) => return tenant_budget(*spent),
        // `table` sends every other stop to its own row: this one has nothing to say.
        _ => return no_row(),
    };
    ApiError::new(status, code, message).should_retry(false)
}

fn tenant_quota(over: OverQuota) -> ApiError {
    let (why, retry_ms) = match over {
        OverQuota::Concurrent => ("requests at once", 1_000),
        OverQuota::RequestsPerMinute { retry_ms } => ("requests per minute", retry_ms),
        OverQuota::TokensPerMinute { retry_ms } => ("tokens per minute", retry_ms),
    };
    ApiError::new(
        429,
        "TENANT_QUOTA_EXCEEDED",
        format!("this client key is over its quota of {why}"),
    )
    .retry_after(retry_ms.div_ceil(1000))
    .should_retry(retry_ms <= 60_000)
}

/// A spent budget: the client should not retry (`x-should-retry: false`), and `Retry-After`
/// says when the budget's period starts again (hours away, for the operator and the caller).
fn tenant_budget(spent: crate::flow::spend::Exhausted) -> ApiError {
    let secs = spent.retry_ms.div_ceil(1000);
    ApiError::new(
        429,
        "tenant_budget_exhausted",
        format!(
            "this tenant has spent its {} budget; it starts again in {secs} s",
            spent.limit.as_str()
        ),
    )
    .should_retry(false)
    .reset_after(secs)
}

fn error_for_reason(v: &Verdict, detail: &str) -> ApiError {
    let (status, code) = match v.reason {
        Reason::Timeout => (504, "upstream_timeout"),
        Reason::Transport => (502, "upstream_unavailable"),
        r => (if v.status >= 400 { v.status } else { 502 }, r.as_str()),
    };
    ApiError::new(status, code, format!("upstream failed: {detail}"))
}

/// Out of candidates or time (a pass-through of the last answer is decided before).
fn given_up(
    ctx: &Request<'_>,
    stop: &Stop,
    last: Option<&LastFailure>,
    earliest: Option<u64>,
) -> ApiError {
    let n = ctx.record.attempts.len();
    match *stop {
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
                let e = error_for_reason(&l.verdict, &shown);
                match super::stop::retry_advice(earliest) {
                    Some(s) => e.retry_after(s).should_retry(true),
                    None => e.should_retry(false),
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
            .should_retry(s <= super::stop::SDK_RETRY_MAX_SECS)
        }
        Stop::AllCooling { secs: s } => ApiError::new(
            503,
            "all_targets_cooling_down",
            format!("every target is cooling down; the first recovers in {s}s"),
        )
        .retry_after(s)
        .should_retry(s <= super::stop::SDK_RETRY_MAX_SECS),
        Stop::RefusedOnTheWay(reason) => refused_on_the_way(reason),
        // Local overload: every usable key is at its concurrency cap (reject policy).
        Stop::Saturated => refused_error(Refused::Saturated, ctx),
        Stop::RequestBudget => ApiError::new(
            429,
            "request_budget_exhausted",
            format!(
                "no target's next attempt fits this request's own budget \
                 ({} / {}) after {n} attempt(s)",
                crate::flow::bill::MAX_TOKENS_HEADER,
                crate::flow::bill::MAX_COST_HEADER
            ),
        )
        .should_retry(false),
        Stop::NoExecutableTargets => ApiError::new(
            404,
            "no_executable_targets",
            "no target can serve this request",
        )
        .should_retry(false),
        // `table` sends every other stop to its own row: this one has nothing to say.
        _ => no_row(),
    }
}

/// Every way to a provider refused: not a moment's trouble, so the client should not retry
/// before the operator mends the settings (and no wait is promised).
fn refused_on_the_way(reason: Reason) -> ApiError {
    let words = match reason {
        Reason::TlsRefused => {
            "every target's provider refused Ringside's TLS client certificate; \
             an operator must mend the provider's TLS settings and reload"
        }
        _ => {
            "the egress proxy refused the way to every target's provider; \
             an operator must mend the provider's proxy settings and reload"
        }
    };
    ApiError::new(503, reason.as_str(), words).should_retry(false)
}

/// What a stop would get in a row that is not its own (`table` routes each to its row, so no
/// client hears this): nothing was tried.
fn no_row() -> ApiError {
    ApiError::new(503, "no_upstream_response", "no upstream was tried")
}

/// Local overload (never counted against the upstream): queue full or queue timeout.
fn refused(r: Refused, ctx: &Request<'_>) -> ApiError {
    refused_error(r, ctx).header("x-ringside-attempts", ctx.attempts_header(None))
}

/// A local overload: retry in about a second. `Retry-After` cannot spread clients that were
/// refused together at its one-second resolution, so `retry-after-ms` (which the OpenAI SDK
/// prefers) carries the jittered wait.
fn refused_error(r: Refused, ctx: &Request<'_>) -> ApiError {
    let e = match r {
        Refused::QueueFull => ApiError::new(
            429,
            "RATE_LIMIT_QUEUE_FULL",
            "the connection's queue is full; try again shortly",
        ),
        Refused::QueueTimeout { waited_ms } => ApiError::new(
            503,
            "RATE_LIMIT_QUEUE_TIMEOUT",
            format!("no slot became free within {waited_ms} ms of queueing"),
        ),
        Refused::Saturated => ApiError::new(
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

/// A failure that ends the request where it happened, whatever budget is left (worded after
/// the attempt is recorded, so that its attempts header counts it): the drain's grace ended
/// (another instance can serve the retry: the code a cut stream's error event carries); this
/// host is out of descriptors or ports, or a core holds its most HTTP/2 connections to the
/// provider, all full (Ringside's shortage, which passes as streams end); the
/// execution budget ran out before the answer began (the upstream was closed first).
fn ending(ctx: &Request<'_>, stop: &Stop) -> ApiError {
    let e = match stop {
        Stop::Shutdown => ApiError::new(
            503,
            "shutdown",
            "Ringside is shutting down and the upstream had not answered when its grace ended",
        )
        .should_retry(true),
        Stop::LocalResources => ApiError::new(
            503,
            "local_resources_exhausted",
            "Ringside ran short of its own means for an upstream connection (a file \
             descriptor, a local port, or room on the HTTP/2 connections it may hold)",
        )
        .should_retry(true),
        _ => ApiError::new(
            504,
            "RATE_LIMIT_EXECUTION_TIMEOUT",
            "the upstream did not answer within the execution budget",
        )
        .should_retry(false),
    };
    e.retry_after(1)
        .header("x-ringside-attempts", ctx.attempts_header(None))
}
