//! A Gemini `generateContent` answer (or one frame of its stream) read into the neutral form.

use crate::translate::answer::{Garbled, Stamp, made_id};
use crate::translate::ir::{Answer, Block, Finish};
use crate::translate::wire::{GemAnswer, GemPart, GemUsage, Text};

pub fn read_answer(g: &GemAnswer, stamp: Stamp) -> Result<Answer, Garbled> {
    let text = |t: &Text| t.as_deref().unwrap_or("").to_string();
    let usage = g
        .usage_metadata
        .as_ref()
        .map(GemUsage::neutral)
        .unwrap_or_default();
    let cand = g.candidates.as_ref().and_then(|c| c.first());
    if cand.is_none() && g.prompt_feedback.is_some() {
        // The prompt itself was blocked: no candidate, a reason in the feedback.
        return Ok(Answer {
            id: text(&g.response_id),
            finish: Some(Finish::ContentFilter),
            usage,
            ..Default::default()
        });
    }
    let cand = cand.ok_or_else(|| Garbled("the answer has no candidates".into()))?;
    let mut blocks = Vec::new();
    let mut calls = 0;
    let parts = cand.content.as_ref().and_then(|c| c.parts.as_ref());
    for p in parts.into_iter().flatten() {
        read_part(p, stamp, &mut calls, &mut blocks);
    }
    let finish = cand
        .finish_reason
        .as_deref()
        .map(|r| finish_of(r, calls > 0));
    Ok(Answer {
        id: text(&g.response_id),
        model: text(&g.model_version),
        blocks,
        finish,
        usage,
    })
}

/// One part: text, a thought, or a whole function call (Gemini sends a call's arguments in one
/// piece). A call without an id gets one made from the request's, numbered across the answer.
fn read_part(p: &GemPart, stamp: Stamp, calls: &mut usize, out: &mut Vec<Block>) {
    if let Some(f) = &p.function_call {
        let id = match f.id.as_deref().filter(|s| !s.is_empty()) {
            Some(id) => id.to_string(),
            None => made_id("call_", stamp, *calls),
        };
        *calls += 1;
        out.push(Block::ToolCall {
            id,
            name: f.name.as_deref().unwrap_or("").into(),
            arguments: f.args.map_or("{}", |a| a.get()).into(),
        });
    } else if let Some(t) = p.text.as_deref() {
        if p.thought == Some(true) {
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
