//! Provider stream events read into the neutral stream's events, for each provider API. Each
//! event is read into typed structs borrowed from its bytes (`wire`): nothing is built for the
//! fields it does not need.

use super::wire::{AnthEvent, AnthUsage, ChatChunk, GemFrame, RespEvent};
use crate::translate::answer::{Stamp, made_id};
use crate::translate::ir::{Finish, Usage};
use crate::translate::{Api, chat, gemini, messages, responses};

/// One step of an answer being streamed, in the neutral form.
#[derive(Debug, PartialEq)]
pub enum Ev<'a> {
    /// The answer's id and model (the first event of a stream).
    Start {
        id: &'a str,
        model: &'a str,
    },
    Text(&'a str),
    Thinking(&'a str),
    /// A tool call begins; `index` is the provider's number for it.
    ToolStart {
        index: usize,
        id: &'a str,
        name: &'a str,
    },
    /// A piece of a tool call's arguments (JSON text).
    ToolArgs {
        index: usize,
        args: &'a str,
    },
    /// Usage so far (each report replaces the last; zero fields keep what was known).
    Usage(Usage),
    Finish(Finish),
    /// The provider reported an error inside the stream.
    Error(&'a str),
    /// The provider's own end of stream.
    End,
}

const FAILED: &str = "the provider's stream failed";

/// A provider stream's reader state (calls counted across events, made ids).
#[derive(Default)]
pub struct Decoder {
    /// Calls begun so far (Gemini numbers them across frames; Responses' end needs to know).
    calls: usize,
    started: bool,
}

impl Decoder {
    /// Read one event of a provider's stream (an event that does not read is skipped: nothing
    /// a client could be told).
    pub fn event(
        &mut self,
        api: Api,
        name: &str,
        data: &[u8],
        stamp: Stamp,
        out: &mut impl FnMut(Ev),
    ) {
        if data == b"[DONE]" {
            return out(Ev::End);
        }
        match api {
            Api::Chat => {
                if let Ok(c) = serde_json::from_slice::<ChatChunk>(data) {
                    chat_event(&c, out);
                }
            }
            Api::Messages => {
                if let Ok(e) = serde_json::from_slice::<AnthEvent>(data) {
                    messages_event(name, &e, out);
                }
            }
            Api::Responses => {
                if let Ok(e) = serde_json::from_slice::<RespEvent>(data) {
                    self.responses_event(name, &e, out);
                }
            }
            Api::Gemini => {
                if let Ok(f) = serde_json::from_slice::<GemFrame>(data) {
                    self.gemini_event(&f, stamp, out);
                }
            }
        }
    }

    fn gemini_event(&mut self, f: &GemFrame, stamp: Stamp, out: &mut impl FnMut(Ev)) {
        if let Some(e) = &f.error {
            return out(Ev::Error(e.message.as_deref().unwrap_or(FAILED)));
        }
        if !self.started {
            self.started = true;
            let s = |t: &Option<std::borrow::Cow<str>>| t.as_deref().unwrap_or("").to_owned();
            let (id, model) = (s(&f.response_id), s(&f.model_version));
            out(Ev::Start {
                id: &id,
                model: &model,
            });
        }
        let cand = f.candidates.as_ref().and_then(|c| c.first());
        let parts = cand
            .and_then(|c| c.content.as_ref())
            .and_then(|c| c.parts.as_ref());
        for p in parts.into_iter().flat_map(|p| p.iter()) {
            if let Some(call) = &p.function_call {
                let index = self.calls;
                self.calls += 1;
                let made;
                let id = match call.id.as_deref().filter(|s| !s.is_empty()) {
                    Some(id) => id,
                    None => {
                        made = made_id("call_", stamp, index);
                        made.as_str()
                    }
                };
                let name = call.name.as_deref().unwrap_or("");
                out(Ev::ToolStart { index, id, name });
                let args = call.args.map_or("{}", |a| a.get());
                out(Ev::ToolArgs { index, args });
            } else if let Some(t) = p.text.as_deref() {
                out(if p.thought == Some(true) {
                    Ev::Thinking(t)
                } else {
                    Ev::Text(t)
                });
            }
        }
        if let Some(u) = &f.usage_metadata {
            out(Ev::Usage(u.neutral()));
        }
        if let Some(r) = cand.and_then(|c| c.finish_reason.as_deref()) {
            out(Ev::Finish(gemini::finish_of(r, self.calls > 0)));
        }
    }

    fn responses_event(&mut self, name: &str, v: &RespEvent, out: &mut impl FnMut(Ev)) {
        let kind = if name.is_empty() {
            v.kind.as_deref().unwrap_or("")
        } else {
            name
        };
        let s = |t: &Option<std::borrow::Cow<'_, str>>| -> String {
            t.as_deref().unwrap_or("").to_owned()
        };
        let index = v.output_index.unwrap_or(0) as usize;
        let delta = v.delta.as_deref().unwrap_or("");
        match kind {
            "response.created" => {
                let r = v.response.as_ref();
                let (id, model) = (
                    r.map(|r| s(&r.id)).unwrap_or_default(),
                    r.map(|r| s(&r.model)).unwrap_or_default(),
                );
                out(Ev::Start {
                    id: &id,
                    model: &model,
                });
            }
            "response.output_text.delta" => out(Ev::Text(delta)),
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                out(Ev::Thinking(delta))
            }
            "response.output_item.added" => {
                if let Some(item) = v
                    .item
                    .as_ref()
                    .filter(|i| i.kind.as_deref() == Some("function_call"))
                {
                    self.calls += 1;
                    let id = item.call_id.as_deref().unwrap_or("");
                    let name = item.name.as_deref().unwrap_or("");
                    out(Ev::ToolStart { index, id, name });
                }
            }
            "response.function_call_arguments.delta" => out(Ev::ToolArgs { index, args: delta }),
            "response.completed" | "response.incomplete" => {
                if let Some(r) = &v.response {
                    if let Some(u) = &r.usage {
                        out(Ev::Usage(u.neutral()));
                    }
                    let reason = r
                        .incomplete_details
                        .as_ref()
                        .and_then(|d| d.reason.as_deref());
                    let calls = self.calls > 0;
                    out(Ev::Finish(responses::finish_of(
                        r.status.as_deref(),
                        reason,
                        calls,
                    )));
                }
                out(Ev::End);
            }
            "response.failed" => {
                let m = v
                    .response
                    .as_ref()
                    .and_then(|r| r.error.as_ref())
                    .and_then(|e| e.message.as_deref());
                out(Ev::Error(m.unwrap_or("the provider's response failed")));
            }
            "error" => out(Ev::Error(v.message.as_deref().unwrap_or(FAILED))),
            _ => {}
        }
    }
}

fn chat_event(c: &ChatChunk, out: &mut impl FnMut(Ev)) {
    if let Some(e) = &c.error {
        return out(Ev::Error(e.message.as_deref().unwrap_or(FAILED)));
    }
    let id = c.id.as_deref().unwrap_or("");
    out(Ev::Start {
        id,
        model: c.model.as_deref().unwrap_or(""),
    });
    if let Some(choice) = c.choices.as_ref().and_then(|c| c.first()) {
        if let Some(d) = &choice.delta {
            if let Some(t) = d.reasoning_content.as_deref().filter(|t| !t.is_empty()) {
                out(Ev::Thinking(t));
            }
            if let Some(t) = d.content.as_deref().filter(|t| !t.is_empty()) {
                out(Ev::Text(t));
            }
            for (i, call) in d.tool_calls.iter().flat_map(|t| t.iter()).enumerate() {
                let index = call.index.map_or(i, |n| n as usize);
                let f = call.function.as_ref();
                if let Some(id) = call.id.as_deref() {
                    let name = f.and_then(|f| f.name.as_deref()).unwrap_or("");
                    out(Ev::ToolStart { index, id, name });
                }
                if let Some(a) = f
                    .and_then(|f| f.arguments.as_deref())
                    .filter(|a| !a.is_empty())
                {
                    out(Ev::ToolArgs { index, args: a });
                }
            }
        }
        if let Some(r) = choice.finish_reason.as_deref() {
            out(Ev::Finish(chat::finish_of(r)));
        }
    }
    if let Some(u) = &c.usage {
        out(Ev::Usage(u.neutral()));
    }
}

fn messages_event(name: &str, e: &AnthEvent, out: &mut impl FnMut(Ev)) {
    let kind = if name.is_empty() {
        e.kind.as_deref().unwrap_or("")
    } else {
        name
    };
    let index = e.index.unwrap_or(0) as usize;
    match kind {
        "message_start" => {
            let m = e.message.as_ref();
            let id = m.and_then(|m| m.id.as_deref()).unwrap_or("");
            let model = m.and_then(|m| m.model.as_deref()).unwrap_or("");
            out(Ev::Start { id, model });
            if let Some(u) = m.and_then(|m| m.usage.as_ref()) {
                out(Ev::Usage(anth_usage(u)));
            }
        }
        "content_block_start" => {
            if let Some(b) = e
                .content_block
                .as_ref()
                .filter(|b| b.kind.as_deref() == Some("tool_use"))
            {
                let id = b.id.as_deref().unwrap_or("");
                out(Ev::ToolStart {
                    index,
                    id,
                    name: b.name.as_deref().unwrap_or(""),
                });
            }
        }
        "content_block_delta" => {
            let Some(d) = &e.delta else { return };
            match d.kind.as_deref() {
                Some("text_delta") => out(Ev::Text(d.text.as_deref().unwrap_or(""))),
                Some("thinking_delta") => out(Ev::Thinking(d.thinking.as_deref().unwrap_or(""))),
                Some("input_json_delta") => {
                    if let Some(a) = d.partial_json.as_deref().filter(|a| !a.is_empty()) {
                        out(Ev::ToolArgs { index, args: a });
                    }
                }
                _ => {}
            }
        }
        "message_delta" => {
            if let Some(u) = &e.usage {
                out(Ev::Usage(anth_usage(u)));
            }
            if let Some(r) = e.delta.as_ref().and_then(|d| d.stop_reason.as_deref()) {
                out(Ev::Finish(messages::finish_of(r)));
            }
        }
        "message_stop" => out(Ev::End),
        "error" => out(Ev::Error(
            e.error
                .as_ref()
                .and_then(|e| e.message.as_deref())
                .unwrap_or(FAILED),
        )),
        _ => {}
    }
}

/// Anthropic reports input at the start and output at the end: a zero input is not known yet
/// (the usage merge keeps what was).
fn anth_usage(u: &AnthUsage) -> Usage {
    let mut n = u.neutral();
    if u.input_tokens == 0 {
        n.input = 0;
    }
    n
}
