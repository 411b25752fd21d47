//! A provider's whole answer read into the neutral form and written in the client's API, and a
//! provider's error read for the client's dialect.

use super::ir::{Answer, ClientTools};
use super::{Api, chat, gemini, messages, responses};
use serde_json::Value;

/// What the answer's writer needs beyond the answer.
#[derive(Clone, Copy, Debug)]
pub struct Stamp<'a> {
    /// The model name the client asked for (its SDK compares it).
    pub model: &'a str,
    /// Unix seconds, for `created`.
    pub created: u64,
    /// Unique per request: made ids (a Gemini call without one) are built from it.
    pub request_id: &'a str,
    /// The client's names for its tools, for the calls written back to it.
    pub tools: &'a ClientTools,
}

/// The provider's answer does not read as its API says (a 502 for the client).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Garbled(pub String);

/// Read a provider's whole answer.
pub fn read(api: Api, body: &[u8], stamp: Stamp) -> Result<Answer, Garbled> {
    fn typed<'a, T: serde::Deserialize<'a>>(body: &'a [u8]) -> Result<T, Garbled> {
        serde_json::from_slice(body).map_err(|e| {
            Garbled(format!(
                "the provider's answer does not read as its API's: {e}"
            ))
        })
    }
    match api {
        Api::Chat => chat::read_answer(&typed(body)?),
        Api::Responses => responses::read_answer(&typed(body)?),
        Api::Messages => messages::read_answer(&typed(body)?),
        Api::Gemini => gemini::read_answer(&typed(body)?, stamp),
    }
}

/// Write an answer in the client's API.
pub fn write(api: Api, a: &Answer, stamp: Stamp) -> Vec<u8> {
    let v = match api {
        Api::Chat => return chat::write_answer(a, stamp),
        Api::Responses => responses::write_answer(a, stamp),
        Api::Messages | Api::Gemini => messages::write_answer(a, stamp),
    };
    serde_json::to_vec(&v).unwrap_or_default()
}

/// A provider's answer translated for the client.
pub fn translate(from: Api, to: Api, body: &[u8], stamp: Stamp) -> Result<Vec<u8>, Garbled> {
    Ok(write(to, &read(from, body, stamp)?, stamp))
}

/// The message of a provider's error body in any of the four APIs (`error.message`, a bare
/// `message`, or the text itself), for an error written in the client's dialect.
pub fn error_message(body: &[u8]) -> String {
    let from_json = serde_json::from_slice::<Value>(body).ok().and_then(|v| {
        v.get("error")
            .and_then(|e| e.get("message").or(Some(e)))
            .or_else(|| v.get("message"))
            .and_then(Value::as_str)
            .map(str::to_string)
    });
    from_json.unwrap_or_else(|| {
        let text = String::from_utf8_lossy(body);
        text.chars().filter(|c| !c.is_control()).take(500).collect()
    })
}

/// A made id: the request's id and a number (unique within a conversation, since every request
/// has its own id).
pub(super) fn made_id(prefix: &str, stamp: Stamp, n: usize) -> String {
    let rid: String = stamp
        .request_id
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(32)
        .collect();
    format!("{prefix}{rid}{n}")
}
