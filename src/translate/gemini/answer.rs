//! A Gemini `generateContent` answer (or one frame of its stream) read into the neutral form.

use crate::translate::answer::{Garbled, Stamp, made_id};
use crate::translate::ir::{Answer, Block, Finish, Usage};
use crate::translate::json::{Obj, str_field};
use serde_json::Value;

pub fn read_answer(o: &Obj, stamp: Stamp) -> Result<Answer, Garbled> {
    let cand = o.get("candidates").and_then(|c| c.get(0));
    if cand.is_none() && o.get("promptFeedback").is_some() {
        // The prompt itself was blocked: no candidate, a reason in the feedback.
        return Ok(Answer {
            id: str_field(o, "responseId").unwrap_or("").into(),
            finish: Some(Finish::ContentFilter),
            usage: o.get("usageMetadata").map(usage_of).unwrap_or_default(),
            ..Default::default()
        });
    }
    let cand = cand.ok_or_else(|| Garbled("the answer has no candidates".into()))?;
    let mut blocks = Vec::new();
    let mut calls = 0;
    for p in parts(cand) {
        read_part(p, stamp, &mut calls, &mut blocks);
    }
    let finish = cand
        .get("finishReason")
        .and_then(Value::as_str)
        .map(|r| finish_of(r, calls > 0));
    Ok(Answer {
        id: str_field(o, "responseId").unwrap_or("").into(),
        model: str_field(o, "modelVersion").unwrap_or("").into(),
        blocks,
        finish,
        usage: o.get("usageMetadata").map(usage_of).unwrap_or_default(),
    })
}

pub(in crate::translate) fn parts(cand: &Value) -> impl Iterator<Item = &Value> {
    cand.pointer("/content/parts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

/// One part: text, a thought, or a whole function call (Gemini sends a call's arguments in one
/// piece). A call without an id gets one made from the request's, numbered across the answer.
pub(in crate::translate) fn read_part(
    p: &Value,
    stamp: Stamp,
    calls: &mut usize,
    out: &mut Vec<Block>,
) {
    if let Some(f) = p.get("functionCall") {
        let id = f
            .get("id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .unwrap_or_else(|| made_id("call_", stamp, *calls));
        *calls += 1;
        out.push(Block::ToolCall {
            id,
            name: f.get("name").and_then(Value::as_str).unwrap_or("").into(),
            arguments: f
                .get("args")
                .map(Value::to_string)
                .unwrap_or_else(|| "{}".into()),
        });
    } else if let Some(t) = p.get("text").and_then(Value::as_str) {
        if p.get("thought").and_then(Value::as_bool) == Some(true) {
            out.push(Block::Thinking {
                text: t.into(),
                signature: None,
            });
        } else {
            out.push(Block::Text(t.into()));
        }
    }
}

/// Gemini ends a turn of calls with `STOP`; every reason but the cap is a filter of some kind.
pub(in crate::translate) fn finish_of(r: &str, calls: bool) -> Finish {
    match r {
        "STOP" | "FINISH_REASON_UNSPECIFIED" if calls => Finish::ToolCalls,
        "STOP" | "FINISH_REASON_UNSPECIFIED" => Finish::Stop,
        "MAX_TOKENS" => Finish::Length,
        _ => Finish::ContentFilter,
    }
}

/// Gemini's candidates count leaves out thoughts; the neutral form's output includes them.
pub(in crate::translate) fn usage_of(u: &Value) -> Usage {
    let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
    let thoughts = n("thoughtsTokenCount");
    Usage {
        input: n("promptTokenCount"),
        output: n("candidatesTokenCount") + thoughts,
        cache_read: n("cachedContentTokenCount"),
        cache_write: 0,
        reasoning: thoughts,
    }
}
