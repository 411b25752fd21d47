//! What a request body asks for (`model`, `stream`), read without re-serialising the body, and
//! the one edit we make to it: replacing the top-level `model` value in place.

use bytes::{Bytes, BytesMut};
use serde::Deserialize;
use std::ops::Range;

/// Facts Ringside routes on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Facts {
    pub model: Option<String>,
    pub stream: bool,
    /// Where the top-level `model` value is in the body (for rewriting it in place).
    pub model_span: Option<Range<usize>>,
}

/// `model` as a string, or anything else (reported as a wrong type, not as broken JSON).
/// A visitor of our own: serde's untagged enums buffer the value first, which cost more than
/// the rest of a small request's scan (callgrind).
enum ModelField {
    Text(String),
    Other,
}

/// `stream`: a boolean, `null`, or anything else (a wrong type).
enum StreamField {
    Bool(bool),
    Null,
    Other,
}

/// Accepts any JSON value and sorts it with `sort`, skipping nested values without keeping them.
struct Sort<T>(fn(Value<'_>) -> T);

enum Value<'a> {
    Str(&'a str),
    Bool(bool),
    Null,
    Other,
}

impl<'de, T> serde::de::Visitor<'de> for Sort<T> {
    type Value = T;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_str<E>(self, v: &str) -> Result<T, E> {
        Ok((self.0)(Value::Str(v)))
    }
    fn visit_bool<E>(self, v: bool) -> Result<T, E> {
        Ok((self.0)(Value::Bool(v)))
    }
    fn visit_unit<E>(self) -> Result<T, E> {
        Ok((self.0)(Value::Null))
    }
    fn visit_none<E>(self) -> Result<T, E> {
        Ok((self.0)(Value::Null))
    }
    fn visit_i64<E>(self, _: i64) -> Result<T, E> {
        Ok((self.0)(Value::Other))
    }
    fn visit_u64<E>(self, _: u64) -> Result<T, E> {
        Ok((self.0)(Value::Other))
    }
    fn visit_f64<E>(self, _: f64) -> Result<T, E> {
        Ok((self.0)(Value::Other))
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<T, A::Error> {
        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
        Ok((self.0)(Value::Other))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<T, A::Error> {
        while map
            .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
            .is_some()
        {}
        Ok((self.0)(Value::Other))
    }
}

impl<'de> Deserialize<'de> for ModelField {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(Sort(|v| match v {
            Value::Str(s) => ModelField::Text(s.to_owned()),
            _ => ModelField::Other,
        }))
    }
}

impl<'de> Deserialize<'de> for StreamField {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(Sort(|v| match v {
            Value::Bool(b) => StreamField::Bool(b),
            Value::Null => StreamField::Null,
            _ => StreamField::Other,
        }))
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FactsError {
    /// Not JSON, or not an object.
    Malformed(String),
    /// `model` present but not a string, or `stream` not a boolean.
    BadField(&'static str),
}

/// The longest model name Ringside accepts (provider model ids are far shorter; a route name or
/// `provider/model` fits easily).
pub const MAX_MODEL_BYTES: usize = 256;

/// Why a client's model name is refused at intake, or `None` when it may be used. The name is
/// the client's string: it is matched against routes, kept in the decision record and written
/// into `x-ringside-route` for routes of the form `provider/model`, so it must be short and
/// free of control characters (CR/LF in it would otherwise split the response head) and of
/// characters that would make it look like another name where it is shown.
pub fn model_problem(model: &str) -> Option<&'static str> {
    // Printable ASCII, the common case, has none of the problems below: one pass over bytes.
    if !model.is_empty()
        && model.len() <= MAX_MODEL_BYTES
        && model.bytes().all(|b| matches!(b, b' '..=b'~'))
    {
        return None;
    }
    if model.is_empty() {
        Some("`model` is empty")
    } else if model.len() > MAX_MODEL_BYTES {
        Some("`model` is longer than 256 bytes")
    } else if model.chars().any(char::is_control) {
        Some("`model` contains a control character")
    } else if !model.is_ascii() && model.chars().any(crate::names::is_invisible) {
        Some(
            "`model` contains an invisible or direction-changing character (zero-width, bidi control)",
        )
    } else {
        None
    }
}

/// Parse the facts. An empty body gives empty facts (GET requests).
pub fn scan(body: &[u8]) -> Result<Facts, FactsError> {
    match body.iter().find(|b| !b.is_ascii_whitespace()) {
        None => return Ok(Facts::default()),
        Some(b'{') => {}
        Some(_) => {
            return Err(FactsError::Malformed(
                "the body must be a JSON object".into(),
            ));
        }
    }
    // JSON is UTF-8 throughout; checked once for the whole body, at memory speed.
    let text = simdutf8::basic::from_utf8(body).map_err(|_| {
        let at = std::str::from_utf8(body).map_or_else(|e| e.valid_up_to(), str::len);
        FactsError::Malformed(format!("the body is not valid UTF-8 (at byte {at})"))
    })?;
    // The whole body is checked (broken JSON anywhere is the client's 400, not the upstream's),
    // and duplicate top-level `model` or `stream` keys are refused: we would route on one value
    // while the upstream might read the other.
    let spans =
        super::json_check::check_object(body).map_err(|e| FactsError::Malformed(e.to_string()))?;
    // The two values are read by serde_json, as the whole body once was: the same decoding,
    // the same errors (a lone surrogate in the model name, a number out of range); a plain
    // string or literal, the common case, is read directly.
    // Spans start and end at ASCII bytes, so slicing the checked text cannot fail.
    let value = |span: &Option<Range<usize>>| span.as_ref().and_then(|r| text.get(r.clone()));
    let malformed = |e: serde_json::Error| FactsError::Malformed(e.to_string());
    let model = match value(&spans.model) {
        None => None,
        Some(v) => match plain_string(v) {
            Some(s) => Some(ModelField::Text(s.to_owned())),
            // `null` reads as absent, as `Option` reads it.
            None => serde_json::from_str::<Option<ModelField>>(v).map_err(malformed)?,
        },
    };
    let stream = match value(&spans.stream) {
        None | Some("null" | "false") => false,
        Some("true") => true,
        Some(v) => match serde_json::from_str::<Option<StreamField>>(v).map_err(malformed)? {
            None | Some(StreamField::Null) => false,
            Some(StreamField::Bool(b)) => b,
            Some(StreamField::Other) => return Err(FactsError::BadField("stream")),
        },
    };
    let model = match model {
        None => None,
        Some(ModelField::Text(m)) => Some(m),
        Some(ModelField::Other) => return Err(FactsError::BadField("model")),
    };
    let model_span = model.as_ref().and(spans.model);
    Ok(Facts {
        model,
        stream,
        model_span,
    })
}

/// A checked JSON string value without escapes: its contents.
fn plain_string(v: &str) -> Option<&str> {
    let inner = v.strip_prefix('"')?.strip_suffix('"')?;
    (!inner.contains('\\')).then_some(inner)
}

/// Replace the top-level `model` value with `new_model`, keeping every other byte as it was.
pub fn rewrite_model(body: &Bytes, span: &Range<usize>, new_model: &str) -> Bytes {
    let quoted = serde_json::to_string(new_model).unwrap_or_else(|_| "\"\"".into());
    let mut out = BytesMut::with_capacity(body.len() + quoted.len());
    out.extend_from_slice(&body[..span.start]);
    out.extend_from_slice(quoted.as_bytes());
    out.extend_from_slice(&body[span.end..]);
    out.freeze()
}

#[cfg(test)]
mod tests;
