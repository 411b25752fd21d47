//! Classification: one upstream outcome (status, headers, body text) becomes a [`Verdict`]:
//! why it failed, what it says about the connection/model/provider, and whether another target
//! may be tried. Operator rules come first, then the built-in table, then status defaults.

use super::hints::Hint;
use serde::Serialize;

/// Why an attempt failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
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
    ContextOverflow,
    BadRequest,
    Timeout,
    Transport,
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
            Reason::ContextOverflow => "context_overflow",
            Reason::BadRequest => "bad_request",
            Reason::Timeout => "timeout",
            Reason::Transport => "transport",
        }
    }

    pub fn parse(s: &str) -> Option<Reason> {
        const ALL: [Reason; 13] = [
            Reason::RateLimited,
            Reason::QuotaExhausted,
            Reason::Overloaded,
            Reason::ServerError,
            Reason::AuthFailure,
            Reason::Rejected,
            Reason::Banned,
            Reason::CreditsExhausted,
            Reason::ModelNotFound,
            Reason::ContextOverflow,
            Reason::BadRequest,
            Reason::Timeout,
            Reason::Transport,
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
}

/// What a failure says something about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Only this request (bad input): nothing is cooled.
    Request,
    /// This model on this connection.
    Model,
    /// This credential.
    Connection,
    /// Every connection of the provider.
    Provider,
}

impl Scope {
    pub fn parse(s: &str) -> Option<Scope> {
        Some(match s {
            "request" => Scope::Request,
            "model" => Scope::Model,
            "connection" => Scope::Connection,
            "provider" => Scope::Provider,
            _ => return None,
        })
    }
}

/// The judgement of one failed attempt.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Verdict {
    pub reason: Reason,
    pub scope: Scope,
    /// The status after restatement (0 for transport failures).
    pub status: u16,
    /// A cooldown fixed by a rule, replacing the backoff formula.
    pub cooldown_ms: Option<u64>,
    pub hint: Option<Hint>,
    /// Another target may be tried for this request.
    pub retryable: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
}

/// One classification rule: all given conditions must hold.
#[derive(Clone, Debug, PartialEq)]
pub struct Rule {
    pub id: String,
    /// Provider id this rule applies to; `None` for every provider.
    pub provider: Option<String>,
    /// Statuses it matches; empty for any.
    pub statuses: Vec<u16>,
    /// Case-insensitive substrings; any one must appear in the body (empty: no body condition).
    pub markers: Vec<String>,
    /// `(header name, lower-case substring of its value)`; any one must match (empty: none).
    pub header_markers: Vec<(String, String)>,
    /// Any of these in the body vetoes the rule.
    pub exclude: Vec<String>,
    pub reason: Reason,
    pub scope: Scope,
    pub cooldown_ms: Option<u64>,
}

impl Rule {
    fn matches(
        &self,
        provider: &str,
        status: u16,
        lower: &str,
        get: &dyn Fn(&str) -> Option<String>,
    ) -> bool {
        if self.provider.as_deref().is_some_and(|p| p != provider) {
            return false;
        }
        if !self.statuses.is_empty() && !self.statuses.contains(&status) {
            return false;
        }
        if !self.markers.is_empty() && !self.markers.iter().any(|m| lower.contains(m.as_str())) {
            return false;
        }
        if !self.header_markers.is_empty()
            && !self
                .header_markers
                .iter()
                .any(|(h, v)| get(h).is_some_and(|x| x.to_ascii_lowercase().contains(v.as_str())))
        {
            return false;
        }
        !self.exclude.iter().any(|m| lower.contains(m.as_str()))
    }
}

fn rule(id: &str, statuses: &[u16], markers: &[&str], reason: Reason, scope: Scope) -> Rule {
    Rule {
        id: id.into(),
        provider: None,
        statuses: statuses.to_vec(),
        markers: markers.iter().map(|m| m.to_lowercase()).collect(),
        header_markers: Vec::new(),
        exclude: Vec::new(),
        reason,
        scope,
        cooldown_ms: None,
    }
}

/// Text rules every provider gets (behaviour-spec §4.2–§4.3), first match wins.
pub fn builtin_rules() -> Vec<Rule> {
    use Reason::*;
    use Scope::*;
    let mut rules = vec![
        rule(
            "account_deactivated",
            &[],
            &[
                "account_deactivated",
                "account has been deactivated",
                "account has been disabled",
                "your account has been suspended",
                "this account is deactivated",
                "this service has been disabled in this account",
            ],
            Banned,
            Connection,
        ),
        rule(
            "credits_exhausted",
            &[],
            &[
                "insufficient_quota",
                "billing_hard_limit_reached",
                "exceeded your current quota",
                "exceeded your current usage quota",
                "credit_balance_too_low",
                "your credit balance is too low",
                "credits exhausted",
                "out of credits",
                "insufficient balance",
                "insufficient_balance",
                "insufficient account balance",
                "insufficient credit",
                "exhausted all your credits",
            ],
            CreditsExhausted,
            Connection,
        ),
        // A relay's quota message (restated to 429 first): the key is empty until its reset.
        rule(
            "relay_quota",
            &[],
            &["额度不足", "额度已用尽", "insufficient_user_quota"],
            QuotaExhausted,
            Connection,
        ),
        rule(
            "quota_text",
            &[400, 403, 429],
            &[
                "quota exceeded",
                "quota has been exceeded",
                "daily quota",
                "today's quota",
                "quota will reset",
                "usage limit reached",
                "exhausted your capacity",
                "monthly usage limit",
                "plan_limit_reached",
            ],
            QuotaExhausted,
            Connection,
        ),
        rule(
            "context_overflow",
            &[400, 413, 422],
            &[
                "context_length_exceeded",
                "context length",
                "context window",
                "maximum context",
                "prompt is too long",
                "input is too long",
                "too many tokens",
                "reduce the length",
            ],
            ContextOverflow,
            Request,
        ),
        rule(
            "model_not_found",
            &[400, 403, 404],
            &[
                "model_not_found",
                "deployment_not_found",
                "does not exist",
                "model not found",
                "no such model",
                "invalid model",
                "not_found_error",
                "无权访问模型",
            ],
            ModelNotFound,
            Model,
        ),
        rule(
            "overloaded",
            &[],
            &["overloaded", "at capacity", "high demand"],
            Overloaded,
            Connection,
        ),
        rule(
            "rate_limit_text",
            &[400, 403],
            &[
                "rate limit",
                "rate_limit",
                "too many requests",
                "频繁",
                "频率",
            ],
            RateLimited,
            Connection,
        ),
    ];
    // A 403 "no access" that is a real permission error, not quota.
    rules.push(rule(
        "relay_no_access",
        &[403],
        &["无权访问", "无效的令牌"],
        AuthFailure,
        Connection,
    ));
    rules
}

/// Classify a failed HTTP answer. `lower` is the (restated) body, lower-cased.
pub fn classify(
    operator: &[Rule],
    builtin: &[Rule],
    provider: &str,
    status: u16,
    lower: &str,
    get: &dyn Fn(&str) -> Option<String>,
    hint: Option<Hint>,
) -> Verdict {
    let mut v = Verdict {
        reason: by_status(status),
        scope: Scope::Connection,
        status,
        cooldown_ms: None,
        hint,
        retryable: true,
        rule: None,
    };
    if let Some(r) = operator
        .iter()
        .chain(builtin)
        .find(|r| r.matches(provider, status, lower, get))
    {
        v.reason = r.reason;
        v.scope = r.scope;
        v.cooldown_ms = r.cooldown_ms;
        v.rule = Some(r.id.clone());
    } else {
        v.scope = match v.reason {
            Reason::BadRequest | Reason::ContextOverflow => Scope::Request,
            Reason::ModelNotFound => Scope::Model,
            _ => Scope::Connection,
        };
    }
    v.retryable = !matches!(v.reason, Reason::BadRequest);
    v
}

/// The status default when no rule matched.
pub fn by_status(status: u16) -> Reason {
    match status {
        401 => Reason::AuthFailure,
        402 => Reason::CreditsExhausted,
        403 => Reason::Rejected,
        404 => Reason::ModelNotFound,
        408 => Reason::Timeout,
        413 => Reason::ContextOverflow,
        429 => Reason::RateLimited,
        503 | 529 => Reason::Overloaded,
        s if s >= 500 => Reason::ServerError,
        _ => Reason::BadRequest,
    }
}

/// A failure before any response head arrived.
pub fn transport(timeout: bool) -> Verdict {
    Verdict {
        reason: if timeout {
            Reason::Timeout
        } else {
            Reason::Transport
        },
        scope: Scope::Connection,
        status: 0,
        cooldown_ms: None,
        hint: None,
        retryable: true,
        rule: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judge(status: u16, body: &str) -> Verdict {
        let none = |_: &str| None;
        classify(
            &[],
            &builtin_rules(),
            "p",
            status,
            &body.to_lowercase(),
            &none,
            None,
        )
    }

    #[test]
    fn statuses_without_markers() {
        assert_eq!(judge(429, "slow down").reason, Reason::RateLimited);
        assert_eq!(judge(401, "nope").reason, Reason::AuthFailure);
        assert_eq!(judge(403, "forbidden").reason, Reason::Rejected);
        assert_eq!(judge(402, "").reason, Reason::CreditsExhausted);
        assert_eq!(judge(500, "").reason, Reason::ServerError);
        assert_eq!(judge(529, "").reason, Reason::Overloaded);
        let v = judge(400, "bad field");
        assert_eq!(
            (v.reason, v.scope, v.retryable),
            (Reason::BadRequest, Scope::Request, false)
        );
        let v = judge(404, "");
        assert_eq!((v.reason, v.scope), (Reason::ModelNotFound, Scope::Model));
    }

    #[test]
    fn body_markers_beat_status() {
        let v = judge(
            429,
            r#"{"error":{"code":"insufficient_quota","message":"You exceeded your current quota"}}"#,
        );
        assert_eq!(v.reason, Reason::CreditsExhausted);
        assert_eq!(
            judge(200, r#"{"type":"overloaded_error"}"#).reason,
            Reason::Overloaded
        );
        let v = judge(400, "This model's maximum context length is 8192 tokens");
        assert_eq!((v.reason, v.retryable), (Reason::ContextOverflow, true));
        assert_eq!(
            judge(403, "Your account has been suspended").reason,
            Reason::Banned
        );
        assert_eq!(
            judge(400, "too many requests, slow down").reason,
            Reason::RateLimited
        );
        assert_eq!(
            judge(429, "用户额度不足, 剩余额度: ¥-0.01").reason,
            Reason::QuotaExhausted
        );
        assert_eq!(judge(403, "无权访问该资源").reason, Reason::AuthFailure);
        assert_eq!(
            judge(404, "The model `x` does not exist").scope,
            Scope::Model
        );
    }

    #[test]
    fn operator_rules_come_first_and_filter_by_provider_and_header() {
        let op = Rule {
            id: "gw-daily".into(),
            provider: Some("gw".into()),
            statuses: vec![429],
            markers: vec![],
            header_markers: vec![("x-quota-kind".into(), "daily".into())],
            exclude: vec![],
            reason: Reason::QuotaExhausted,
            scope: Scope::Provider,
            cooldown_ms: Some(600_000),
        };
        let h = |n: &str| (n == "x-quota-kind").then(|| "Daily".to_string());
        let none = |_: &str| None;
        let b = builtin_rules();
        let v = classify(std::slice::from_ref(&op), &b, "gw", 429, "", &h, None);
        assert_eq!(
            (v.reason, v.scope, v.cooldown_ms, v.rule.as_deref()),
            (
                Reason::QuotaExhausted,
                Scope::Provider,
                Some(600_000),
                Some("gw-daily")
            )
        );
        let v = classify(std::slice::from_ref(&op), &b, "other", 429, "", &h, None);
        assert_eq!(v.reason, Reason::RateLimited);
        let v = classify(std::slice::from_ref(&op), &b, "gw", 429, "", &none, None);
        assert_eq!(v.reason, Reason::RateLimited);
    }
}
