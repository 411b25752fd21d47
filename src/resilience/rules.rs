//! The built-in classification table (behaviour-spec §4.2–§4.3): words and codes providers and
//! relays use for each kind of failure. First match wins; operator rules come before it.

use super::classify::{Reason, Rule, Scope};

fn rule(id: &str, statuses: &[u16], markers: &[&str], reason: Reason, scope: Scope) -> Rule {
    // Identifier-like markers (`insufficient_quota`) are the providers' codes: they match the
    // error's structured fields exactly. Every marker also matches as words of the message.
    let codes = markers
        .iter()
        .filter(|m| m.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'))
        .map(|m| (*m).to_string())
        .collect();
    Rule {
        id: id.into(),
        provider: None,
        statuses: statuses.to_vec(),
        markers: markers.iter().map(|m| m.to_lowercase()).collect(),
        codes,
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
