//! Why an attempt failed ([`Reason`]): the name the decision record, the metrics and the
//! operator's rules use, and what each reason means for waiting and for the breaker.

use serde::{Deserialize, Deserializer, Serialize};

/// Why an attempt failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    RateLimited,
    QuotaExhausted,
    Overloaded,
    ServerError,
    AuthFailure,
    /// 403-style refusal of a valid key (three in a row ban the connection).
    Rejected,
    Banned,
    CreditsExhausted,
    ModelNotFound,
    /// A 404 with no evidence of what is missing (no model-not-found words or code): often a
    /// wrong path or base URL. The key cools briefly and the request moves on; no model is
    /// locked on so little.
    NotFound,
    ContextOverflow,
    BadRequest,
    Timeout,
    Transport,
    /// An OAuth connection's refresh token was refused for good: the connection is expired.
    TokenRefreshFailed,
    /// The provider's egress proxy refused the tunnel (its credentials, its policy, or the
    /// provider out of its reach): every key of the provider goes through it alike.
    EgressRefused,
    /// The provider's TLS refused Ringside's client certificate: every key of the provider
    /// presents the same one.
    TlsRefused,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::RateLimited => "rate_limited",
            Reason::QuotaExhausted => "quota_exhausted",
            Reason::Overloaded => "overloaded",
            Reason::ServerError => "server_error",
            Reason::AuthFailure => "auth_failure",
            Reason::Rejected => "rejected",
            Reason::Banned => "banned",
            Reason::CreditsExhausted => "credits_exhausted",
            Reason::ModelNotFound => "model_not_found",
            Reason::NotFound => "not_found",
            Reason::ContextOverflow => "context_overflow",
            Reason::BadRequest => "bad_request",
            Reason::Timeout => "timeout",
            Reason::Transport => "transport",
            Reason::TokenRefreshFailed => "token_refresh_failed",
            Reason::EgressRefused => "egress_refused",
            Reason::TlsRefused => "tls_refused",
        }
    }

    pub fn parse(s: &str) -> Option<Reason> {
        const ALL: [Reason; 17] = [
            Reason::RateLimited,
            Reason::QuotaExhausted,
            Reason::Overloaded,
            Reason::ServerError,
            Reason::AuthFailure,
            Reason::Rejected,
            Reason::Banned,
            Reason::CreditsExhausted,
            Reason::ModelNotFound,
            Reason::NotFound,
            Reason::ContextOverflow,
            Reason::BadRequest,
            Reason::Timeout,
            Reason::Transport,
            Reason::TokenRefreshFailed,
            Reason::EgressRefused,
            Reason::TlsRefused,
        ];
        ALL.into_iter().find(|r| r.as_str() == s)
    }

    /// Whether a cooldown with this reason is short and worth waiting out inside a request.
    pub fn waitable(self) -> bool {
        matches!(
            self,
            Reason::RateLimited
                | Reason::Overloaded
                | Reason::ServerError
                | Reason::Timeout
                | Reason::Transport
        )
    }

    /// Failures the provider breaker counts: the service itself is unwell.
    pub fn trips_breaker(self) -> bool {
        matches!(
            self,
            Reason::ServerError | Reason::Overloaded | Reason::Timeout | Reason::Transport
        )
    }

    /// A refusal on the way to the provider, which only the operator can change
    /// (`resilience::refusals`).
    pub fn refused_on_the_way(self) -> bool {
        matches!(self, Reason::EgressRefused | Reason::TlsRefused)
    }
}

/// A reason as another build wrote it, where one this build does not know is none (serde's
/// `deserialize_with`): a newer member's state keeps its times here, without its name.
pub fn known_or_none<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Reason>, D::Error> {
    Ok(Option::<String>::deserialize(d)?.and_then(|s| Reason::parse(&s)))
}
