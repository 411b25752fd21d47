//! Classification: one upstream outcome (status, headers, body text) becomes a [`Verdict`]:
//! why it failed, what it says about the connection/model/provider, and whether another target
//! may be tried. Operator rules come first, then the built-in table, then status defaults.

use super::hints::Hint;
pub use super::rules::builtin_rules;
use serde::Serialize;

pub use super::reason::Reason;

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
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Request => "request",
            Scope::Model => "model",
            Scope::Connection => "connection",
            Scope::Provider => "provider",
        }
    }
}

impl Verdict {
    /// The rule that decided, as the decision record names it.
    pub fn rule_id(&self) -> String {
        self.rule.clone().unwrap_or_else(|| "status_default".into())
    }

    /// Where the wait came from: the rule's fixed cooldown, else the hint's source.
    pub fn wait_source(&self) -> Option<&'static str> {
        if self.cooldown_ms.is_some() {
            Some("rule")
        } else {
            self.hint.map(|h| h.source.as_str())
        }
    }
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
    /// Whether the evidence may set a lasting state (terminal, or a quota wall until its
    /// reset). False when only words of the message named the reason: they can quote the
    /// client's input, so they earn a short cooldown at most.
    #[serde(skip)]
    pub lasting: bool,
    /// The failure came after the first byte went to the client (a cut stream, an error event):
    /// it says something about this stream, little about whether the provider answers, so a
    /// probe's answer does not end its cooldown (`cooldown::ConnState::probe_may_lift`).
    #[serde(skip)]
    pub mid_stream: bool,
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
    /// Lower-case values of the error's structured fields (`error.type`, `error.code`,
    /// `error.status`, top-level `type` / `code`); any one equal to a field matches. Built-in
    /// rules only: they are what lets a built-in rule set a lasting state.
    pub codes: Vec<String>,
    /// `(header name, lower-case substring of its value)`; any one must match (empty: none).
    pub header_markers: Vec<(String, String)>,
    /// Any of these in the body vetoes the rule.
    pub exclude: Vec<String>,
    pub reason: Reason,
    pub scope: Scope,
    pub cooldown_ms: Option<u64>,
}

/// How a rule matched: by what the provider states in its structure (status, headers, error
/// type and code) or only by words in its message, which may quote the client's own input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Matched {
    Structure,
    Text,
}

impl Rule {
    fn matches(&self, a: &Answer, fields: &[String]) -> Option<Matched> {
        if self.provider.as_deref().is_some_and(|p| p != a.provider) {
            return None;
        }
        if !self.statuses.is_empty() && !self.statuses.contains(&a.status) {
            return None;
        }
        if !self.header_markers.is_empty()
            && !self.header_markers.iter().any(|(h, v)| {
                (a.get)(h).is_some_and(|x| x.to_ascii_lowercase().contains(v.as_str()))
            })
        {
            return None;
        }
        if self.exclude.iter().any(|m| a.lower.contains(m.as_str())) {
            return None;
        }
        if self.markers.is_empty() && self.codes.is_empty() {
            return Some(Matched::Structure);
        }
        if self.codes.iter().any(|c| fields.contains(c)) {
            return Some(Matched::Structure);
        }
        // A phrase the client itself sent is the provider quoting it back (an invalid enum value,
        // a model name): it says nothing about the key.
        self.markers
            .iter()
            .any(|m| a.lower.contains(m.as_str()) && !echoed(a.request, m))
            .then_some(Matched::Text)
    }
}

/// Whether `marker` (lower-case) appears in the client's request, ignoring ASCII case.
fn echoed(request: &[u8], marker: &str) -> bool {
    let m = marker.as_bytes();
    !m.is_empty()
        && request.len() >= m.len()
        && request.windows(m.len()).any(|w| w.eq_ignore_ascii_case(m))
}

/// The structured fields of a JSON error body (OpenAI `{"error":{"type","code"}}`, Anthropic
/// `{"type":"error","error":{"type"}}`, Google `{"error":{"status"}}`), lower-case.
fn structured_fields(lower: &str) -> Vec<String> {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(lower.trim()) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut take = |x: &serde_json::Value| match x {
        serde_json::Value::String(s) if !s.is_empty() && s.len() <= 128 => out.push(s.clone()),
        _ => {}
    };
    for key in ["type", "code", "status"] {
        take(&v["error"][key]);
        take(&v[key]);
    }
    out
}

/// One failed answer as the classifier sees it.
pub struct Answer<'a> {
    pub provider: &'a str,
    /// The status after restatement.
    pub status: u16,
    /// The body, lower-cased.
    pub lower: &'a str,
    pub get: &'a dyn Fn(&str) -> Option<String>,
    pub hint: Option<Hint>,
    /// The client's request body: words of it quoted back are not evidence.
    pub request: &'a [u8],
}

/// Reasons that set a state lasting beyond a short cooldown (terminal, or until a quota
/// reset): only the provider's structure or an operator rule may set them.
fn lasting(reason: Reason) -> bool {
    matches!(
        reason,
        Reason::Banned | Reason::CreditsExhausted | Reason::QuotaExhausted
    )
}

/// Classify a failed HTTP answer: operator rules first, then the built-in table, then the
/// status default. A built-in rule that matched only words of the message may name the reason
/// but not make it last: the verdict is marked `lasting: false`, so the connection gets a short
/// cooldown and no terminal state (see `cooldown::ConnState::on_failure`).
pub fn classify(operator: &[Rule], builtin: &[Rule], a: &Answer) -> Verdict {
    let mut v = Verdict {
        reason: by_status(a.status),
        scope: Scope::Connection,
        status: a.status,
        cooldown_ms: None,
        hint: a.hint,
        retryable: true,
        rule: None,
        lasting: true,
        mid_stream: false,
    };
    let fields = structured_fields(a.lower);
    let found = operator
        .iter()
        .map(|r| (r, r.matches(a, &fields).map(|_| Matched::Structure)))
        .chain(builtin.iter().map(|r| (r, r.matches(a, &fields))))
        .find_map(|(r, m)| m.map(|m| (r, m)));
    if let Some((r, how)) = found {
        v.reason = r.reason;
        v.scope = r.scope;
        v.cooldown_ms = r.cooldown_ms;
        v.rule = Some(r.id.clone());
        v.lasting = how == Matched::Structure || !lasting(r.reason);
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

/// The upstream's own status inside an aggregator's error (OpenRouter: `{"error": {"code":
/// 529, "metadata": {"provider_name", "raw"}}}`), which says more than the status the
/// aggregator answered with. `lower`: the body, lower-cased.
pub fn aggregated_status(lower: &str) -> Option<u16> {
    if !lower.contains("\"metadata\"") {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(lower.trim()).ok()?;
    let e = &v["error"];
    if !e["metadata"].is_object() {
        return None;
    }
    let code = u16::try_from(e["code"].as_u64()?).ok()?;
    (400..=599).contains(&code).then_some(code)
}

/// The status an in-band stream error stands for, from the type or code it states (`lower`: the
/// event's data, lower-cased): Anthropic's error types are its statuses' names
/// (`rate_limit_error` is its 429, `overloaded_error` its 529, `api_error` its 500) and OpenAI's
/// streamed errors carry the code of the answer they replace (`rate_limit_exceeded`,
/// `server_error`). An error that states none of these is judged as a 502, the neutral
/// stand-in: an upstream that failed inside an answer it had begun.
pub fn in_band_status(lower: &str) -> u16 {
    let fields = structured_fields(lower);
    let named = |names: &[&str]| fields.iter().any(|f| names.contains(&f.as_str()));
    if named(&["rate_limit_error", "rate_limit_exceeded", "rate_limited"]) {
        429
    } else if named(&["overloaded_error", "overloaded"]) {
        529
    } else if named(&["api_error", "server_error", "internal_error"]) {
        500
    } else {
        502
    }
}

/// The status default when no rule matched.
pub fn by_status(status: u16) -> Reason {
    match status {
        401 => Reason::AuthFailure,
        402 => Reason::CreditsExhausted,
        403 => Reason::Rejected,
        404 => Reason::NotFound,
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
        lasting: true,
        mid_stream: false,
    }
}

/// No HTTP/2 connection to the provider had room for a stream within the connect timeout (its
/// servers took no more): every key shares those connections, so every one cools, with the
/// backoff of a timeout, and the request moves to another provider at once rather than wait
/// again on each key.
pub fn no_room() -> Verdict {
    Verdict {
        scope: Scope::Provider,
        ..transport(true)
    }
}

/// The way to the provider refused what its settings say (`reason`: the egress proxy refused
/// the tunnel, `EgressRefused`, or the provider's TLS the client certificate, `TlsRefused`):
/// no request reached the provider, and any of its keys would meet the same refusal, so every
/// one of them cools (with the backoff of a failed connect) and the request moves to another
/// provider at once. Not waited out inside a request: a proxy's 407 or a TLS alert about the
/// certificate is a configuration's answer, not a moment's trouble (`refusals`: not probed,
/// not counted for the breaker, ended by a reload).
pub fn refused_on_the_way(reason: Reason) -> Verdict {
    Verdict {
        reason,
        scope: Scope::Provider,
        ..transport(false)
    }
}

#[cfg(test)]
mod tests;
