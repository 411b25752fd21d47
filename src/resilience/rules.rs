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

/// One built-in rule: which statuses (any, when empty) and words mark a reason, and at what
/// scope it cools.
struct Row {
    id: &'static str,
    statuses: &'static [u16],
    markers: &'static [&'static str],
    reason: Reason,
    scope: Scope,
}

/// The table (behaviour-spec §4.2–§4.3), first match wins.
const BUILTIN: &[Row] = &[
    Row {
        id: "account_deactivated",
        statuses: &[],
        markers: &[
            "account_deactivated",
            "account has been deactivated",
            "account has been disabled",
            "your account has been suspended",
            "this account is deactivated",
            "this service has been disabled in this account",
        ],
        reason: Reason::Banned,
        scope: Scope::Connection,
    },
    // Google's OpenAI-compatible quota wall (`"status": "RESOURCE_EXHAUSTED"`, "You exceeded
    // your current quota"): a per-minute or per-day quota, not an account out of credits.
    Row {
        id: "resource_exhausted",
        statuses: &[429],
        markers: &["resource_exhausted"],
        reason: Reason::QuotaExhausted,
        scope: Scope::Connection,
    },
    Row {
        id: "credits_exhausted",
        statuses: &[],
        markers: &[
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
        reason: Reason::CreditsExhausted,
        scope: Scope::Connection,
    },
    // A relay's quota message (restated to 429 first): the key is empty until its reset.
    Row {
        id: "relay_quota",
        statuses: &[],
        markers: &["额度不足", "额度已用尽", "insufficient_user_quota"],
        reason: Reason::QuotaExhausted,
        scope: Scope::Connection,
    },
    Row {
        id: "quota_text",
        statuses: &[400, 403, 429],
        markers: &[
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
        reason: Reason::QuotaExhausted,
        scope: Scope::Connection,
    },
    Row {
        id: "context_overflow",
        statuses: &[400, 413, 422],
        markers: &[
            "context_length_exceeded",
            "context length",
            "context window",
            "maximum context",
            "prompt is too long",
            "input is too long",
            "too many tokens",
            "reduce the length",
        ],
        reason: Reason::ContextOverflow,
        scope: Scope::Request,
    },
    // A stored object (a response, file or batch id) that does not exist: a property of the
    // request, never a model lockout.
    Row {
        id: "stored_object_not_found",
        statuses: &[404],
        markers: &[
            "response with id",
            "previous response",
            "no such file",
            "file not found",
            "no batch found",
            "batch not found",
            "no such vector store",
        ],
        reason: Reason::BadRequest,
        scope: Scope::Request,
    },
    Row {
        id: "model_not_found",
        statuses: &[400, 403, 404],
        markers: &[
            "model_not_found",
            "deployment_not_found",
            "does not exist",
            "model not found",
            "no such model",
            "invalid model",
            "not_found_error",
            "无权访问模型",
        ],
        reason: Reason::ModelNotFound,
        scope: Scope::Model,
    },
    Row {
        id: "overloaded",
        statuses: &[],
        markers: &["overloaded", "at capacity", "high demand"],
        reason: Reason::Overloaded,
        scope: Scope::Connection,
    },
    Row {
        id: "rate_limit_text",
        statuses: &[400, 403],
        markers: &[
            "rate limit",
            "rate_limit",
            "too many requests",
            "频繁",
            "频率",
        ],
        reason: Reason::RateLimited,
        scope: Scope::Connection,
    },
    // An edge in front of a private endpoint that answers a missing or refused client
    // certificate with a page rather than a TLS alert (nginx's 400 "No required SSL
    // certificate was sent", "The SSL certificate error"): the provider's certificate setting,
    // the same for every key.
    Row {
        id: "client_certificate_refused",
        statuses: &[400, 403, 495, 496],
        markers: &[
            "no required ssl certificate was sent",
            "the ssl certificate error",
        ],
        reason: Reason::TlsRefused,
        scope: Scope::Provider,
    },
    // A 403 "no access" that is a real permission error, not quota.
    Row {
        id: "relay_no_access",
        statuses: &[403],
        markers: &["无权访问", "无效的令牌"],
        reason: Reason::AuthFailure,
        scope: Scope::Connection,
    },
];

/// Text rules every provider gets (behaviour-spec §4.2–§4.3), first match wins; then the
/// usage wall's header rule.
pub fn builtin_rules() -> Vec<Rule> {
    let mut rules: Vec<Rule> = BUILTIN
        .iter()
        .map(|r| rule(r.id, r.statuses, r.markers, r.reason, r.scope))
        .collect();
    // A Claude subscription's five-hour usage wall says in its headers that the account, not
    // one model, is out: the key cools (with its account's other keys), rather than the model
    // alone as for a plain 429 (`rate_limit_scope`).
    let mut wall = rule(
        "usage_wall",
        &[429],
        &[],
        Reason::RateLimited,
        Scope::Connection,
    );
    wall.header_markers = vec![(
        "anthropic-ratelimit-unified-status".into(),
        "rejected".into(),
    )];
    rules.push(wall);
    rules
}
