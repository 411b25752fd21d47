//! Why a candidate was passed over for one request: a timer that will lift (a cooldown, an open
//! breaker, a lockout, another session's lease) or a reason that will not (a terminal state, an
//! ineligible target). What may be waited out, and the labels the decision record shows.

use super::classify::Reason;
use super::cooldown::Terminal;

/// Why a candidate cannot serve this request at all (no timer will change it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ineligible {
    NoToolSupport,
    NoVisionSupport,
    NoStructuredOutput,
    ContextWindowTooSmall,
    RegionMismatch,
    PolicyTagsMissing,
    /// At its concurrency cap, with `on_saturation = "reject"`.
    Saturated,
    /// The client key may not use this connection.
    NotAllowedForKey,
    /// Not the connection the request's exclusive lease holds.
    NotThisLease,
    /// The request asks for more output than the model gives in one answer.
    OutputTooLarge,
    /// Speaks another API than the client's, and the request cannot be translated for it (a
    /// parameter with no equivalent, content it cannot take, or a body that does not read as
    /// its API says).
    Untranslatable,
    /// An attempt on it could cost more than the request's own cap allows.
    OverRequestBudget,
}

impl Ineligible {
    pub fn as_str(self) -> &'static str {
        match self {
            Ineligible::NoToolSupport => "no_tool_support",
            Ineligible::NoVisionSupport => "no_vision_support",
            Ineligible::NoStructuredOutput => "no_structured_output",
            Ineligible::ContextWindowTooSmall => "context_window_too_small",
            Ineligible::RegionMismatch => "region_mismatch",
            Ineligible::PolicyTagsMissing => "policy_tags_missing",
            Ineligible::Saturated => "saturated",
            Ineligible::NotAllowedForKey => "not_allowed_for_key",
            Ineligible::NotThisLease => "not_this_lease",
            Ineligible::Untranslatable => "untranslatable",
            Ineligible::OutputTooLarge => "output_too_large",
            Ineligible::OverRequestBudget => "over_request_budget",
        }
    }
}

/// Why a candidate was not used, with the time left where a timer is involved.
#[derive(Clone, Debug, PartialEq)]
pub enum Exclusion {
    Cooling {
        reason: Option<Reason>,
        ms: u64,
    },
    Terminal(Terminal),
    BreakerOpen {
        ms: u64,
    },
    ProviderGate {
        ms: u64,
    },
    Lockout {
        reason: Reason,
        ms: u64,
    },
    Ineligible(Ineligible),
    /// Held by another session's exclusive lease for `ms` more.
    Leased {
        ms: u64,
    },
    /// Already failed once in this request.
    Tried,
}

impl Exclusion {
    pub fn label(&self) -> &'static str {
        match self {
            Exclusion::Cooling { .. } => "connection_cooldown",
            Exclusion::Terminal(Terminal::Banned) => "banned",
            Exclusion::Terminal(Terminal::Expired) => "expired",
            Exclusion::Terminal(Terminal::CreditsExhausted) => "credits_exhausted",
            Exclusion::BreakerOpen { .. } => "circuit_open",
            Exclusion::ProviderGate { .. } => "provider_cooldown",
            Exclusion::Lockout { .. } => "model_lockout",
            Exclusion::Ineligible(why) => why.as_str(),
            Exclusion::Leased { .. } => "leased_by_other",
            Exclusion::Tried => "already_tried",
        }
    }

    /// Time until this exclusion lifts, if it is a timer.
    pub fn remaining_ms(&self) -> Option<u64> {
        match *self {
            Exclusion::Cooling { ms, .. }
            | Exclusion::BreakerOpen { ms }
            | Exclusion::ProviderGate { ms }
            | Exclusion::Lockout { ms, .. }
            | Exclusion::Leased { ms } => Some(ms),
            _ => None,
        }
    }

    /// A cooldown for a refusal on the way to the provider (its egress proxy's, its TLS's):
    /// not a chance of success until an operator mends the settings (`Reason::refused_on_the_way`).
    pub fn refused_on_the_way(&self) -> bool {
        self.refusal().is_some()
    }

    /// The refusal on the way this cooldown is for, if it is one.
    pub fn refusal(&self) -> Option<Reason> {
        match *self {
            Exclusion::Cooling {
                reason: Some(r), ..
            } if r.refused_on_the_way() => Some(r),
            _ => None,
        }
    }

    /// Whether a request may wait for this to lift (never for quota, auth or not-found).
    pub fn waitable(&self) -> bool {
        match self {
            Exclusion::Cooling { reason, .. } => reason.is_none_or(Reason::waitable),
            // A breaker or gate exists to fail fast while a provider is unwell.
            Exclusion::BreakerOpen { .. } | Exclusion::ProviderGate { .. } => false,
            Exclusion::Lockout { reason, .. } => reason.waitable(),
            _ => false,
        }
    }
}
