//! Every way a request ends before an upstream's answer reaches its client, as data: refused
//! on its head or its body, routed nowhere, over a quota, refused by flow control, cut by the
//! drain, short of local resources, out of time or out of candidates. `answer::table` turns
//! each into what the client is told (status, code, words, `Retry-After`, `x-should-retry`), in
//! the client's dialect when it is written; nothing else words an answer of Ringside's own.

use crate::flow::Refused;
use crate::flow::tenant::OverQuota;
use crate::resilience::Exclusion;
use crate::resilience::budget::Budget;
use crate::resilience::cooldown::Terminal;

/// Why a request ended early.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Stop {
    // On the head, before any byte of the body.
    /// The endpoint takes another method.
    MethodNotAllowed,
    /// No endpoint at this path.
    UnknownEndpoint,
    /// A browser form or text post from another origin.
    CrossOriginForm,
    /// Without client keys, a `Host` naming a public name not in `server.hosts`.
    MisdirectedHost,
    /// Client keys are configured and the request presents no valid one.
    Unauthenticated,
    /// The key may not make inference requests.
    InsufficientScope,
    // The body.
    /// The client went away while its body was awaited.
    ClientGone,
    BodyTimeout,
    BodyTooLarge {
        max: usize,
    },
    BadChunkedBody(String),
    TruncatedBody,
    InvalidJson(String),
    InvalidField(&'static str),
    /// A Ringside request header whose value does not read (its name).
    InvalidHeader(&'static str),
    MissingModel,
    InvalidModel(&'static str),
    // Routing and quotas.
    /// No route or model of that name.
    ModelNotFound(String),
    /// The route exists and nothing in it can serve this request: why.
    NoTargetFor(String),
    /// The tenant is over a quota.
    TenantQuota(OverQuota),
    /// The tenant's token or money budget for the day or the month is spent.
    TenantBudget(crate::flow::spend::Exhausted),
    /// No target's attempt fits the request's own cap (`x-ringside-max-…`).
    RequestBudget,
    // Flow control, Ringside's own overload (never counted against an upstream).
    Refused(Refused),
    // The attempt loop: each ends the request where it happened, whatever budget is left.
    /// The drain's grace ended before the upstream answered.
    Shutdown,
    /// No descriptor or local port for the upstream connection (`fd_limit`).
    LocalResources,
    /// The execution budget ended before the answer began.
    ExecutionTimeout,
    // Out of candidates or time (`final_stop`).
    /// 504: the request deadline passed.
    DeadlineExceeded,
    /// The last upstream failure has the last word: its answer passed through, or worded.
    LastWord,
    /// 401: every candidate is in this terminal state.
    AllTerminal(Terminal),
    /// 429: every candidate is locked out for the model.
    ModelCooldown {
        secs: u64,
    },
    /// 503: every candidate is cooling; the first recovers in `secs`.
    AllCooling {
        secs: u64,
    },
    /// 503: every candidate cools for a refusal on the way to its provider (its egress
    /// proxy's, its TLS's; terminal ones aside): no wait helps until an operator mends the
    /// settings and reloads.
    RefusedOnTheWay(crate::resilience::classify::Reason),
    /// 429: every usable key is at its cap (reject policy).
    Saturated,
    /// 404: no target can serve the request.
    NoExecutableTargets,
    /// A lease that cannot be used for this request, worded by the lease endpoints' own
    /// contract (`proxy::lease`, `docs/reference/leases.md`).
    Lease(Box<crate::dialect::ApiError>),
}

impl Stop {
    /// Whether the drain cut this request (counted in the exit status like a cut stream).
    pub(crate) fn cut_by_drain(&self) -> bool {
        matches!(self, Stop::Shutdown)
    }
}

/// The longest wait an SDK's automatic retry honours (the OpenAI and Anthropic SDKs ignore a
/// longer `Retry-After`): beyond it the client is told not to retry by itself.
pub(crate) const SDK_RETRY_MAX_SECS: u64 = 60;

/// What a give-up tells the client about retrying, from Ringside's next chance of success
/// (`wait_ms`: when the first candidate recovers): `Retry-After` with `x-should-retry: true`
/// when that is soon enough for an SDK's retry, else `x-should-retry: false` and no
/// `Retry-After`. The two never contradict each other.
pub(crate) fn retry_advice(wait_ms: Option<u64>) -> Option<u64> {
    wait_ms.map(secs).filter(|s| *s <= SDK_RETRY_MAX_SECS)
}

/// When each timer lifts, a refusal on the way aside: its end is no chance of success, only
/// one more try at a refusal until an operator mends the settings.
pub(crate) fn chances<'a>(timers: &'a [&'a Exclusion]) -> impl Iterator<Item = u64> + 'a {
    timers
        .iter()
        .filter(|e| !e.refused_on_the_way())
        .filter_map(|e| e.remaining_ms())
}

/// The sooner of two known waits (either may be unknown).
pub(crate) fn soonest(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Whole seconds to wait, at least one.
pub(crate) fn secs(ms: u64) -> u64 {
    ms.div_ceil(1000).max(1)
}

/// The stop for a request that runs out of candidates now (`timers`: why each candidate was
/// passed over, the ones merely tried already left out): a pure function of the budget and the
/// exclusions. A non-retryable answer was passed through before this.
pub(crate) fn final_stop(budget: &Budget, timers: &[&Exclusion], now: u64) -> Stop {
    let earliest = chances(timers).min();
    let refusal = timers.iter().find_map(|e| e.refusal());
    if budget.expired(now) {
        Stop::DeadlineExceeded
    } else if timers.is_empty() || budget.attempts_left() == 0 {
        Stop::LastWord
    } else if timers.iter().any(|e| {
        matches!(
            e,
            Exclusion::Ineligible(crate::resilience::Ineligible::OverRequestBudget)
        )
    }) {
        // The client's own cap is why the request goes no further: said before any timer.
        Stop::RequestBudget
    } else if let Exclusion::Terminal(first) = timers[0]
        && timers.iter().all(|e| matches!(e, Exclusion::Terminal(_)))
    {
        Stop::AllTerminal(*first)
    } else if let Some(reason) = refusal
        && timers
            .iter()
            .all(|e| e.refused_on_the_way() || matches!(e, Exclusion::Terminal(_)))
    {
        Stop::RefusedOnTheWay(reason)
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
