//! Provider stream events read into the neutral stream's events, for each provider API.

use crate::translate::answer::{Stamp, made_id};
use crate::translate::ir::{Finish, Usage};
use crate::translate::{Api, chat, gemini, messages, responses};
use serde_json::Value;

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

/// A provider stream's reader state (tool numbering across Gemini's frames, made ids).
#[derive(Default)]
pub struct Decoder {
    /// Gemini: calls seen so far (each frame's calls are numbered after the previous frames').
    calls: usize,
    started: bool,
}

impl Decoder {
    /// Read one event of a provider's stream.
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
        let Ok(v) = serde_json::from_slice::<Value>(data) else {
            return; // not JSON: nothing a client could be told
        };
        match api {
            Api::Chat => chat_event(&v, out),
            Api::Messages => messages_event(name, &v, out),
            Api::Responses => responses_event(name, &v, out),
            Api::Gemini => self.gemini_event(&v, stamp, out),
        }
    }

    fn gemini_event(&mut self, v: &Value, stamp: Stamp, out: &mut impl FnMut(Ev)) {
        if let Some(m) = v.pointer("/error/message").and_then(Value::as_str) {
            return out(Ev::Error(m));
        }
        if !self.started {
            self.started = true;
            let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("");
            out(Ev::Start {
                id: s("responseId"),
                model: s("modelVersion"),
            });
        }
        let cand = v.pointer("/candidates/0");
        for p in cand.into_iter().flat_map(gemini::parts) {
            if let Some(f) = p.get("functionCall") {
                let index = self.calls;
                self.calls += 1;
                let made;
                let id = match f
                    .get("id")
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                {
                    Some(id) => id,
                    None => {
                        made = made_id("call_", stamp, index);
                        made.as_str()
                    }
                };
                let name = f.get("name").and_then(Value::as_str).unwrap_or("");
                out(Ev::ToolStart { index, id, name });
                let args = f
                    .get("args")
                    .map(Value::to_string)
                    .unwrap_or_else(|| "{}".into());
                out(Ev::ToolArgs { index, args: &args });
            } else if let Some(t) = p.get("text").and_then(Value::as_str) {
                if p.get("thought").and_then(Value::as_bool) == Some(true) {
                    out(Ev::Thinking(t));
                } else {
                    out(Ev::Text(t));
                }
            }
        }
        if let Some(u) = v.get("usageMetadata") {
            out(Ev::Usage(gemini::usage_of(u)));
        }
        if let Some(r) = cand
            .and_then(|c| c.get("finishReason"))
            .and_then(Value::as_str)
        {
            out(Ev::Finish(gemini::finish_of(r, self.calls > 0)));
        }
    }
}

fn chat_event(v: &Value, out: &mut impl FnMut(Ev)) {
    if let Some(e) = v.get("error") {
        return out(Ev::Error(
            e.get("message")
                .and_then(Value::as_str)
                .unwrap_or("the provider's stream failed"),
        ));
    }
    let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("");
    out(Ev::Start {
        id: s("id"),
        model: s("model"),
    });
    if let Some(choice) = v.pointer("/choices/0") {
        let delta = choice.get("delta");
        let field = |k: &str| {
            delta
                .and_then(|d| d.get(k))
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
        };
        if let Some(t) = field("reasoning_content") {
            out(Ev::Thinking(t));
        }
        if let Some(t) = field("content") {
            out(Ev::Text(t));
        }
        let calls = delta
            .and_then(|d| d.get("tool_calls"))
            .and_then(Value::as_array);
        for (i, call) in calls.into_iter().flatten().enumerate() {
            let index = call
                .get("index")
                .and_then(Value::as_u64)
                .map_or(i, |n| n as usize);
            let f = call.get("function");
            let name = f.and_then(|f| f.get("name")).and_then(Value::as_str);
            if let Some(id) = call.get("id").and_then(Value::as_str) {
                out(Ev::ToolStart {
                    index,
                    id,
                    name: name.unwrap_or(""),
                });
            }
            if let Some(a) = f
                .and_then(|f| f.get("arguments"))
                .and_then(Value::as_str)
                .filter(|a| !a.is_empty())
            {
                out(Ev::ToolArgs { index, args: a });
            }
        }
        if let Some(r) = choice.get("finish_reason").and_then(Value::as_str) {
            out(Ev::Finish(chat::finish_of(r)));
        }
    }
    if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
        out(Ev::Usage(chat::usage_of(u)));
    }
}

fn messages_event(name: &str, v: &Value, out: &mut impl FnMut(Ev)) {
    let kind = if name.is_empty() {
        v.get("type").and_then(Value::as_str).unwrap_or("")
    } else {
        name
    };
    let index = v.get("index").and_then(Value::as_u64).unwrap_or(0) as usize;
    match kind {
        "message_start" => {
            let m = v.get("message");
            let s = |k: &str| {
                m.and_then(|m| m.get(k))
                    .and_then(Value::as_str)
                    .unwrap_or("")
            };
            out(Ev::Start {
                id: s("id"),
                model: s("model"),
            });
            if let Some(u) = m.and_then(|m| m.get("usage")) {
                out(Ev::Usage(messages::usage_of(u)));
            }
        }
        "content_block_start" => {
            let b = v.get("content_block");
            if b.and_then(|b| b.get("type")).and_then(Value::as_str) == Some("tool_use") {
                let s = |k: &str| {
                    b.and_then(|b| b.get(k))
                        .and_then(Value::as_str)
                        .unwrap_or("")
                };
                out(Ev::ToolStart {
                    index,
                    id: s("id"),
                    name: s("name"),
                });
            }
        }
        "content_block_delta" => {
            let d = v.get("delta");
            let s = |k: &str| d.and_then(|d| d.get(k)).and_then(Value::as_str);
            match s("type") {
                Some("text_delta") => out(Ev::Text(s("text").unwrap_or(""))),
                Some("thinking_delta") => out(Ev::Thinking(s("thinking").unwrap_or(""))),
                Some("input_json_delta") => {
                    if let Some(a) = s("partial_json").filter(|a| !a.is_empty()) {
                        out(Ev::ToolArgs { index, args: a });
                    }
                }
                _ => {}
            }
        }
        "message_delta" => {
            if let Some(u) = v.get("usage") {
                out(Ev::Usage(messages::usage_of(u)));
            }
            if let Some(r) = v.pointer("/delta/stop_reason").and_then(Value::as_str) {
                out(Ev::Finish(messages::finish_of(r)));
            }
        }
        "message_stop" => out(Ev::End),
        "error" => out(Ev::Error(
            v.pointer("/error/message")
                .and_then(Value::as_str)
                .unwrap_or("the provider's stream failed"),
        )),
        _ => {}
    }
}

fn responses_event(name: &str, v: &Value, out: &mut impl FnMut(Ev)) {
    let kind = if name.is_empty() {
        v.get("type").and_then(Value::as_str).unwrap_or("")
    } else {
        name
    };
    let s = |p: &str| v.pointer(p).and_then(Value::as_str).unwrap_or("");
    let index = v.get("output_index").and_then(Value::as_u64).unwrap_or(0) as usize;
    match kind {
        "response.created" => out(Ev::Start {
            id: s("/response/id"),
            model: s("/response/model"),
        }),
        "response.output_text.delta" => out(Ev::Text(s("/delta"))),
        "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
            out(Ev::Thinking(s("/delta")))
        }
        "response.output_item.added" if s("/item/type") == "function_call" => {
            out(Ev::ToolStart {
                index,
                id: s("/item/call_id"),
                name: s("/item/name"),
            });
        }
        "response.function_call_arguments.delta" => out(Ev::ToolArgs {
            index,
            args: s("/delta"),
        }),
        "response.completed" | "response.incomplete" => {
            if let Some(r) = v.get("response") {
                if let Some(u) = r.get("usage") {
                    out(Ev::Usage(responses::usage_of(u)));
                }
                let calls = r.get("output").and_then(Value::as_array).is_some_and(|o| {
                    o.iter()
                        .any(|i| i.get("type").and_then(Value::as_str) == Some("function_call"))
                });
                if let Some(o) = r.as_object() {
                    out(Ev::Finish(responses::finish_of(o, calls)));
                }
            }
            out(Ev::End);
        }
        "response.failed" => out(Ev::Error(
            v.pointer("/response/error/message")
                .and_then(Value::as_str)
                .unwrap_or("the provider's response failed"),
        )),
        "error" => out(Ev::Error(
            v.get("message")
                .and_then(Value::as_str)
                .unwrap_or("the provider's stream failed"),
        )),
        _ => {}
    }
}
