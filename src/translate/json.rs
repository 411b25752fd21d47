//! Small readers over `serde_json` values, with the error a client sees when a field is wrong.

use super::Unreadable;
use super::ir::Tool;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

pub type Obj = Map<String, Value>;

pub fn str_field<'a>(o: &'a Obj, key: &str) -> Option<&'a str> {
    o.get(key).and_then(Value::as_str)
}

/// A field that must be a string when present.
pub fn opt_string(o: &Obj, key: &str, at: &str) -> Result<Option<String>, Unreadable> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(Unreadable::new(format!("{at}{key} must be a string"))),
    }
}

pub fn opt_u64(o: &Obj, key: &str) -> Result<Option<u64>, Unreadable> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| Unreadable::new(format!("{key} must be a non-negative integer"))),
    }
}

pub fn opt_f64(o: &Obj, key: &str) -> Result<Option<f64>, Unreadable> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_f64()
            .map(Some)
            .ok_or_else(|| Unreadable::new(format!("{key} must be a number"))),
    }
}

pub fn opt_bool(o: &Obj, key: &str) -> Result<Option<bool>, Unreadable> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(Unreadable::new(format!("{key} must be true or false"))),
    }
}

pub fn array<'a>(v: &'a Value, at: &str) -> Result<&'a Vec<Value>, Unreadable> {
    v.as_array()
        .ok_or_else(|| Unreadable::new(format!("{at} must be an array")))
}

pub fn object<'a>(v: &'a Value, at: &str) -> Result<&'a Obj, Unreadable> {
    v.as_object()
        .ok_or_else(|| Unreadable::new(format!("{at} must be an object")))
}

/// `stop` / `stop_sequences`: a string or an array of strings.
pub fn stops(v: Option<&Value>) -> Result<Vec<String>, Unreadable> {
    match v {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(s)) => Ok(vec![s.clone()]),
        Some(Value::Array(a)) => a
            .iter()
            .map(|s| {
                s.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| Unreadable::new("stop sequences must be strings"))
            })
            .collect(),
        Some(_) => Err(Unreadable::new(
            "stop must be a string or an array of strings",
        )),
    }
}

const NOT_AN_OBJECT: &str = "tool-call arguments are not a JSON object";

/// Tool-call arguments as JSON text of an object: an empty text is `{}` (a call without
/// arguments streams none).
pub fn arguments_object(args: &str) -> Result<Value, &'static str> {
    if args.trim().is_empty() {
        return Ok(Value::Object(Map::new()));
    }
    match serde_json::from_str::<Value>(args) {
        Ok(v @ Value::Object(_)) => Ok(v),
        _ => Err(NOT_AN_OBJECT),
    }
}

/// The same check, the arguments kept as written (key order included) for a typed writer.
pub fn arguments_raw(args: &str) -> Result<&RawValue, &'static str> {
    let args = args.trim();
    let args = if args.is_empty() { "{}" } else { args };
    match serde_json::from_str::<&RawValue>(args) {
        Ok(raw) if raw.get().starts_with('{') => Ok(raw),
        _ => Err(NOT_AN_OBJECT),
    }
}

/// A number field, left out when absent (or not a finite number).
pub fn put_f64(o: &mut Obj, key: &str, v: Option<f64>) {
    if let Some(x) = v.and_then(serde_json::Number::from_f64) {
        o.insert(key.into(), Value::Number(x));
    }
}

/// A function tool's fields (`name`, `description`, its schema under `schema`, `strict`) from
/// the object that holds them; `at` names it in the client's error.
pub fn tool(o: &Obj, at: &str, schema: &str) -> Result<Tool, Unreadable> {
    Ok(Tool {
        name: str_field(o, "name")
            .ok_or_else(|| Unreadable::new(format!("{at} needs a name")))?
            .to_string(),
        description: str_field(o, "description").map(str::to_string),
        parameters: o
            .get(schema)
            .cloned()
            .unwrap_or_else(|| serde_json::json!({"type": "object"})),
        strict: o.get("strict").and_then(Value::as_bool),
    })
}
