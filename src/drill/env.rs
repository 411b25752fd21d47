//! The drill's environment: the variables the operator's config names, answered with made-up
//! values (real keys are never read), and nothing else.

use toml::{Table, Value};

/// The made-up key for a `key_env` variable.
pub fn fake_key(var: &str) -> String {
    format!("sk-drill-{}", var.to_ascii_lowercase())
}

/// A time far ahead (2100-01-01), for the expiry variables an OAuth seat names.
pub(super) const FAR_EXPIRY: &str = "4102444800";

/// Every variable a `*_env` field names, and whether it is an expiry (`expires_at_env`).
pub(super) fn named_vars(t: &Table, out: &mut Vec<(String, bool)>) {
    for (k, v) in t {
        match v {
            Value::String(var) if k.ends_with("_env") => {
                out.push((var.clone(), k == "expires_at_env"));
            }
            Value::Table(inner) => named_vars(inner, out),
            Value::Array(items) => {
                for inner in items.iter().filter_map(Value::as_table) {
                    named_vars(inner, out);
                }
            }
            _ => {}
        }
    }
}
