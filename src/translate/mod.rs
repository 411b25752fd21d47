//! Translation between the APIs' dialects, for a fallback to a provider of another API: the
//! client's request read into one neutral form (`ir`) and written in the provider's API, the
//! provider's answer read back and written in the client's. Four readers and four writers instead
//! of twelve pairs. A same-dialect request never comes here: it is forwarded byte for byte.
//!
//! What a target's API has no place for is decided by `policy`: the target is refused (another
//! candidate is tried) or the parameter is dropped and named in `x-ringside-dropped`.

pub mod answer;
mod chat;
mod gemini;
pub mod ir;
mod json;
mod messages;
pub mod policy;
mod responses;
pub mod session;
pub mod stream;
mod wire;

use crate::dialect::Endpoint;
use ir::Conversation;

/// The APIs Ringside reads and writes. Clients speak the first three; providers all four.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Api {
    /// OpenAI Chat Completions.
    Chat,
    /// OpenAI Responses.
    Responses,
    /// Anthropic Messages.
    Messages,
    /// Google Gemini `generateContent`.
    Gemini,
}

impl Api {
    /// The API a client endpoint speaks, where translation can serve it.
    pub fn of_endpoint(e: Endpoint) -> Option<Api> {
        match e {
            Endpoint::ChatCompletions => Some(Api::Chat),
            Endpoint::Responses => Some(Api::Responses),
            Endpoint::Messages => Some(Api::Messages),
            _ => None,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Api::Chat => "chat",
            Api::Responses => "responses",
            Api::Messages => "messages",
            Api::Gemini => "gemini",
        }
    }
}

/// The client's body does not read as its API says: answered 400 in the client's dialect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unreadable(pub String);

impl Unreadable {
    pub(crate) fn new(what: impl Into<String>) -> Unreadable {
        Unreadable(what.into())
    }
}

/// A target cannot honour the request: it is skipped, and the decision record says why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cannot {
    /// The request's parameter or content (`n`, `stop`, `tools[2].type`, `input_audio`).
    pub what: String,
    pub why: &'static str,
}

/// A request written for the target's API.
#[derive(Clone, Debug, PartialEq)]
pub struct Written {
    pub body: Vec<u8>,
    /// Parameters left out by policy, for `x-ringside-dropped`.
    pub dropped: Vec<String>,
}

/// What the target is, as the writer needs it.
#[derive(Clone, Copy, Debug)]
pub struct TargetModel<'a> {
    pub model: &'a str,
    /// The answer's cap when the client set none and the API needs one (Anthropic).
    pub default_max_tokens: u64,
}

/// Read a client's request body in its API.
pub fn read(api: Api, body: &[u8]) -> Result<Conversation, Unreadable> {
    let v: serde_json::Value = serde_json::from_slice(body)
        .map_err(|e| Unreadable::new(format!("the body is not JSON: {e}")))?;
    let obj = v
        .as_object()
        .ok_or_else(|| Unreadable::new("the body is not a JSON object"))?;
    match api {
        Api::Chat => chat::read_request(obj),
        Api::Responses => responses::read_request(obj),
        Api::Messages => messages::read_request(obj),
        Api::Gemini => Err(Unreadable::new("clients do not speak the Gemini API here")),
    }
}

/// Write a conversation for a target of `api`.
pub fn write(api: Api, conv: &Conversation, target: TargetModel) -> Result<Written, Cannot> {
    let mut out = policy::Out::default();
    let v = match api {
        Api::Chat => chat::write_request(conv, target, &mut out)?,
        Api::Responses => responses::write_request(conv, target, &mut out)?,
        Api::Messages => {
            let body = messages::write_request(conv, target, &mut out)?;
            return Ok(Written {
                body,
                dropped: out.dropped,
            });
        }
        Api::Gemini => gemini::write_request(conv, target, &mut out)?,
    };
    Ok(Written {
        body: serde_json::to_vec(&v).unwrap_or_default(),
        dropped: out.dropped,
    })
}

/// The path below the provider's base URL for a request of `api` (Gemini names the model and the
/// method in the path; base URLs end at the version, `/v1` or `/v1beta`).
pub fn upstream_path(api: Api, model: &str, stream: bool) -> String {
    match api {
        Api::Chat => "/chat/completions".into(),
        Api::Responses => "/responses".into(),
        Api::Messages => "/messages".into(),
        Api::Gemini if stream => format!("/models/{model}:streamGenerateContent?alt=sse"),
        Api::Gemini => format!("/models/{model}:generateContent"),
    }
}

#[cfg(test)]
mod tests;
