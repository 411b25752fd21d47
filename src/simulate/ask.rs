//! What the simulator reads from a request body: the model, whether to stream, and the two
//! options that change an answer's shape.

use serde::Deserialize;
use std::borrow::Cow;

#[derive(Debug, Default, PartialEq, Eq)]
pub struct Ask {
    pub model: Option<String>,
    pub wants_stream: bool,
    /// `encoding_format: "base64"` (embeddings).
    pub base64: bool,
    /// `stream_options.include_usage` (a final usage chunk in a chat stream).
    pub include_usage: bool,
}

/// The body's fields that matter, borrowed; serde skips the rest without building them (a
/// whole `Value` tree per request cost the simulator CPU it shares with the proxy under test).
#[derive(Deserialize)]
struct Typed<'a> {
    #[serde(borrow, default)]
    model: Option<Cow<'a, str>>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(borrow, default)]
    encoding_format: Option<Cow<'a, str>>,
    #[serde(default)]
    stream_options: Option<StreamOptions>,
}

#[derive(Deserialize)]
struct StreamOptions {
    #[serde(default)]
    include_usage: Option<bool>,
}

impl Ask {
    /// Never fails: a body that is not JSON, or a field of an odd type, reads as absent (the
    /// simulator answers it as a real provider's lenient default would).
    pub fn read(body: &[u8]) -> Ask {
        if let Ok(t) = serde_json::from_slice::<Typed>(body) {
            return Ask {
                model: t.model.map(Cow::into_owned),
                wants_stream: t.stream.unwrap_or(false),
                base64: t.encoding_format.as_deref() == Some("base64"),
                include_usage: t
                    .stream_options
                    .and_then(|o| o.include_usage)
                    .unwrap_or(false),
            };
        }
        // A field of another type than expected: read what can be read, field by field.
        let v: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
        Ask {
            model: v["model"].as_str().map(str::to_string),
            wants_stream: v["stream"].as_bool().unwrap_or(false),
            base64: v["encoding_format"].as_str() == Some("base64"),
            include_usage: v["stream_options"]["include_usage"]
                .as_bool()
                .unwrap_or(false),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_fields_that_shape_an_answer() {
        let a = Ask::read(
            br#"{"messages":[{"role":"user","content":"hi \"there\""}],"model":"m\u00e9","stream":true,
                "stream_options":{"include_usage":true},"encoding_format":"base64","n":[1,{"x":null}]}"#,
        );
        assert_eq!(
            a,
            Ask {
                model: Some("mé".into()),
                wants_stream: true,
                base64: true,
                include_usage: true
            }
        );
    }

    #[test]
    fn odd_types_and_garbage_read_as_absent() {
        let a = Ask::read(br#"{"model":"m","stream":"yes","stream_options":7}"#);
        assert_eq!(a.model.as_deref(), Some("m"));
        assert!(!a.wants_stream && !a.include_usage);
        assert_eq!(Ask::read(b"not json"), Ask::default());
        assert_eq!(Ask::read(b""), Ask::default());
        assert_eq!(Ask::read(br#"{"model":null}"#), Ask::default());
    }
}
