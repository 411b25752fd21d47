//! Translation tests: golden requests and answers written from the providers' documented
//! examples, the policy on parameters without an equivalent, and round trips A → B → A.

mod answers;
mod codex;
mod requests;
mod roundtrip;

use super::{Api, TargetModel};
use serde_json::Value;

pub(super) fn target(model: &str) -> TargetModel<'_> {
    TargetModel {
        model,
        default_max_tokens: 4096,
    }
}

/// Translate a client body of `from` for a target of `to`, as JSON.
pub(super) fn translate(from: Api, to: Api, body: Value) -> Value {
    let conv = super::read(from, body.to_string().as_bytes()).expect("readable");
    let w = super::write(to, &conv, target("m")).expect("writable");
    serde_json::from_slice(&w.body).expect("json")
}
