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
}

#[derive(Deserialize)]
struct Top {
    #[serde(default)]
    model: Option<ModelField>,
    #[serde(default)]
    stream: Option<StreamField>,
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
    // Duplicate top-level keys are refused: we would route on one value while the upstream
    // might read the other.
    // JSON is UTF-8 throughout. serde_json checks the strings it decodes but not the ones it
    // skips, so the whole body is checked first; it then reads it as `str`, not again.
    let text = simdutf8::basic::from_utf8(body).map_err(|_| {
        let at = std::str::from_utf8(body).map_or_else(|e| e.valid_up_to(), str::len);
        FactsError::Malformed(format!("the body is not valid UTF-8 (at byte {at})"))
    })?;
    let top: Top = serde_json::from_str(text).map_err(|e| FactsError::Malformed(e.to_string()))?;
    let stream = match top.stream {
        None | Some(StreamField::Null) => false,
        Some(StreamField::Bool(b)) => b,
        Some(StreamField::Other) => return Err(FactsError::BadField("stream")),
    };
    let model = match top.model {
        None => None,
        Some(ModelField::Text(m)) => Some(m),
        Some(ModelField::Other) => return Err(FactsError::BadField("model")),
    };
    Ok(Facts { model, stream })
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

/// Find the byte range of the value of a top-level key in a JSON object. The body has already
/// been validated by serde_json, so this walk only needs to respect strings and nesting. When a
/// key repeats, serde_json keeps the last one, and so do we.
pub fn top_level_value_span(body: &[u8], key: &[u8]) -> Option<Range<usize>> {
    let mut i = skip_ws(body, 0);
    if body.get(i) != Some(&b'{') {
        return None;
    }
    i += 1;
    let mut found = None;
    loop {
        i = skip_ws(body, i);
        match body.get(i)? {
            b'}' => return found,
            b',' => {
                i += 1;
                continue;
            }
            b'"' => {}
            _ => return found,
        }
        let key_end = string_end(body, i)?;
        let this_key = &body[i + 1..key_end - 1];
        i = skip_ws(body, key_end);
        if body.get(i) != Some(&b':') {
            return found;
        }
        i = skip_ws(body, i + 1);
        let value_end = value_end(body, i)?;
        if this_key == key {
            found = Some(i..value_end);
        }
        i = value_end;
    }
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r') {
        i += 1;
    }
    i
}

/// `b[i]` is an opening quote; returns the index just past the closing quote.
fn string_end(b: &[u8], i: usize) -> Option<usize> {
    let mut j = i + 1;
    while j < b.len() {
        match b[j] {
            b'\\' => j += 2,
            b'"' => return Some(j + 1),
            _ => j += 1,
        }
    }
    None
}

fn value_end(b: &[u8], i: usize) -> Option<usize> {
    match b.get(i)? {
        b'"' => string_end(b, i),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut j = i;
            while j < b.len() {
                match b[j] {
                    b'"' => {
                        j = string_end(b, j)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(j + 1);
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
            None
        }
        _ => {
            let mut j = i;
            while j < b.len() && !matches!(b[j], b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r')
            {
                j += 1;
            }
            Some(j)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_model_and_stream() {
        let body = br#"{"messages":[{"role":"user","content":"hi \"model\": x"}],"model":"gpt-4o","stream":true}"#;
        let f = scan(body).unwrap();
        assert_eq!(f.model.as_deref(), Some("gpt-4o"));
        assert!(f.stream);
        let span = top_level_value_span(body, b"model").unwrap();
        assert_eq!(&body[span], br#""gpt-4o""#);
    }

    #[test]
    fn rewrite_keeps_other_bytes() {
        let body =
            Bytes::from_static(b"{ \"model\" : \"smart\",\n \"x\": [1, {\"model\":\"inner\"}] }");
        let span = top_level_value_span(&body, b"model").unwrap();
        let out = rewrite_model(&body, &span, "gpt-4o-mini");
        assert_eq!(
            &out[..],
            b"{ \"model\" : \"gpt-4o-mini\",\n \"x\": [1, {\"model\":\"inner\"}] }"
        );
    }

    #[test]
    fn escaped_model_names_decode() {
        let f = scan(br#"{"model":"a\/b"}"#).unwrap();
        assert_eq!(f.model.as_deref(), Some("a/b"));
    }

    #[test]
    fn bad_inputs() {
        assert!(matches!(scan(b"{not json"), Err(FactsError::Malformed(_))));
        assert!(matches!(scan(b"[1,2]"), Err(FactsError::Malformed(_))));
        assert_eq!(scan(br#"{"model":5}"#), Err(FactsError::BadField("model")));
        // A null model is a missing one (the caller says so), not a wrong type.
        assert_eq!(scan(br#"{"model":null}"#).unwrap().model, None);
        for wrong in [r#"{"model":[1,{"a":"b"}]}"#, r#"{"model":{"x":[]}}"#] {
            assert_eq!(
                scan(wrong.as_bytes()),
                Err(FactsError::BadField("model")),
                "{wrong}"
            );
        }
        for wrong in [
            r#"{"model":"m","stream":1}"#,
            r#"{"model":"m","stream":[true]}"#,
        ] {
            assert_eq!(
                scan(wrong.as_bytes()),
                Err(FactsError::BadField("stream")),
                "{wrong}"
            );
        }
        let f = scan(br#" {"stream":null,"model":"m","extra":{"model":5,"stream":"x"}}"#).unwrap();
        assert_eq!((f.model.as_deref(), f.stream), (Some("m"), false));
        // Broken JSON inside a skipped value is still broken JSON.
        assert!(matches!(
            scan(br#"{"model":"m","x":[1,}"#),
            Err(FactsError::Malformed(_))
        ));
        assert!(matches!(
            scan(br#"{"model":[1,}"#),
            Err(FactsError::Malformed(_))
        ));
        assert_eq!(
            scan(br#"{"model":"m","stream":"yes"}"#),
            Err(FactsError::BadField("stream"))
        );
        assert_eq!(scan(b"").unwrap(), Facts::default());
        assert_eq!(scan(b" \r\n").unwrap(), Facts::default());
    }

    /// Every kind of broken JSON in a value that is skipped, not read, is still refused: the
    /// same answer serde_json's full parse gives. (One difference: a lone surrogate escape such
    /// as `"\ud800"` inside a skipped string passes, as the JSON grammar allows; only decoding
    /// the string refuses it, and Ringside forwards skipped values untouched.)
    #[test]
    fn skipped_values_are_validated_in_full() {
        let broken: &[&[u8]] = &[
            br#"{"model":"m","x":tru}"#,
            br#"{"model":"m","x":nul}"#,
            br#"{"model":"m","x":falsey}"#,
            br#"{"model":"m","x":01}"#,
            br#"{"model":"m","x":1.}"#,
            br#"{"model":"m","x":-}"#,
            br#"{"model":"m","x":1e}"#,
            br#"{"model":"m","x":+1}"#,
            br#"{"model":"m","x":.5}"#,
            br#"{"model":"m","x":"\x"}"#,
            br#"{"model":"m","x":"\u12"}"#,
            b"{\"model\":\"m\",\"x\":\"a\x01b\"}",
            b"{\"model\":\"m\",\"x\":\"\xff\xfe\"}",
            b"{\"model\":\"m\",\"x\":\"\xc3\"}",
            br#"{"model":"m","x":[1 2]}"#,
            br#"{"model":"m","x":{"a" 1}}"#,
            br#"{"model":"m","x":{"a":1,}}"#,
            br#"{"model":"m","x":{1:2}}"#,
            br#"{"model":"m","x":"open}"#,
            br#"{"model":"m"} x"#,
            br#"{"model":"m"}{}"#,
            br#"{"model":"m","x":[[[[]]]}"#,
            br#"{"model":"m","x":NaN}"#,
            br#"{"model":"m",}"#,
            br#"{"model":"m""x":1}"#,
        ];
        for b in broken {
            assert!(
                serde_json::from_slice::<serde_json::Value>(b).is_err(),
                "fixture is valid JSON: {}",
                String::from_utf8_lossy(b)
            );
            assert!(
                matches!(scan(b), Err(FactsError::Malformed(_))),
                "accepted: {}",
                String::from_utf8_lossy(b)
            );
        }
        let fine: &[&[u8]] = &[
            br#"{"model":"m","x":[1,-0.5e+3,true,false,null,"\u00e9\ud83d\ude00\n",{}]}"#,
            "{\"model\":\"m\",\"x\":\"naïve 😀\"}".as_bytes(),
            b" {\"model\" : \"m\" ,\n\t\"x\" : { } } \n",
        ];
        for b in fine {
            assert_eq!(
                scan(b).map(|f| f.model),
                Ok(Some("m".into())),
                "{}",
                String::from_utf8_lossy(b)
            );
        }
    }

    #[test]
    fn duplicate_model_keys_are_refused() {
        assert!(matches!(
            scan(br#"{"model":"a","model":"b"}"#),
            Err(FactsError::Malformed(_))
        ));
        // The span finder itself keeps the last one, like most JSON readers.
        assert_eq!(
            top_level_value_span(br#"{"model":"a","model":"b"}"#, b"model"),
            Some(21..24)
        );
    }
}
