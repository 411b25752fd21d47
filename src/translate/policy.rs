//! What happens to a parameter the target's API has no place for. Either the target is refused
//! (the answer would not be what the client asked for: several choices, log probabilities, audio,
//! state kept at another provider) and the next candidate is tried, or the parameter is dropped
//! and named in `x-ringside-dropped` (it tunes the answer but does not change its shape: a seed,
//! penalties, `top_k`, a service tier). Never silently. The table is in docs/dialects.md.

use super::Cannot;
use serde_json::Value;

/// What to do with a parameter the target cannot carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    Refuse,
    Drop,
}

/// Parameters whose absence changes the answer's shape or meaning.
const REFUSE: [&str; 9] = [
    "n",
    "logprobs",
    "top_logprobs",
    "modalities",
    "audio",
    "previous_response_id",
    "conversation",
    "background",
    "prompt",
];

pub fn policy(param: &str) -> Policy {
    if REFUSE.contains(&param) {
        Policy::Refuse
    } else {
        Policy::Drop
    }
}

/// Whether a value asks for anything (`n: 1`, `logprobs: false`, `null` and text-only
/// `modalities` are the defaults: nothing is lost without them).
fn asks(param: &str, v: &Value) -> bool {
    match (param, v) {
        (_, Value::Null) => false,
        ("n", v) => v.as_u64() != Some(1),
        ("logprobs", Value::Bool(b)) => *b,
        ("top_logprobs", v) => v.as_u64() != Some(0),
        ("modalities", Value::Array(a)) => a.iter().any(|m| m.as_str() != Some("text")),
        _ => true,
    }
}

/// A writer's record of what it left out.
#[derive(Debug, Default)]
pub struct Out {
    pub dropped: Vec<String>,
}

impl Out {
    /// The target's API has no place for `param`: refuse the target or drop it by policy.
    pub fn no_place(&mut self, param: &str, v: &Value) -> Result<(), Cannot> {
        if !asks(param, v) {
            return Ok(());
        }
        match policy(param) {
            Policy::Refuse => Err(Cannot {
                what: param.to_string(),
                why: "the provider's API has no equivalent and the answer would differ",
            }),
            Policy::Drop => {
                self.drop(param);
                Ok(())
            }
        }
    }

    /// A parameter left out (or changed to fit: a temperature clamped to Anthropic's range).
    pub fn drop(&mut self, param: &str) {
        if !self.dropped.iter().any(|d| d == param) {
            self.dropped.push(param.to_string());
        }
    }

    /// Every parameter the writer did not take.
    pub fn rest(&mut self, params: &[(String, Value)], takes: &[&str]) -> Result<(), Cannot> {
        for (name, v) in params {
            if !takes.contains(&name.as_str()) {
                self.no_place(name, v)?;
            }
        }
        Ok(())
    }
}

/// `x-ringside-dropped`'s value: the names, comma separated (names are a JSON object's keys the
/// client sent, so only the printable ASCII ones are named; others count as `other`).
pub fn dropped_header(dropped: &[String]) -> String {
    let mut s = String::new();
    for d in dropped {
        if !s.is_empty() {
            s.push_str(", ");
        }
        if !d.is_empty() && d.bytes().all(|b| b.is_ascii_graphic() && b != b',') {
            s.push_str(d);
        } else {
            s.push_str("other");
        }
    }
    s
}

/// What a target of `api` refuses when a request of another API asks for it (for `check`).
pub fn refused_by(api: super::Api) -> Vec<&'static str> {
    use super::Api;
    // What each writer takes as it is (`chat/write.rs`, `responses/request.rs`).
    let takes: &[&str] = match api {
        Api::Chat => &["n", "logprobs", "top_logprobs"],
        Api::Responses => &["top_logprobs"],
        Api::Messages | Api::Gemini => &[],
    };
    let mut v: Vec<&'static str> = REFUSE
        .iter()
        .copied()
        .filter(|p| !takes.contains(p))
        .collect();
    match api {
        Api::Responses => v.push("stop"),
        Api::Chat => v.push("stop (more than 4)"),
        _ => {}
    }
    v
}
