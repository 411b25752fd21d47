//! The neutral stream written as Responses API events: `response.created`, output items added,
//! filled and done one after another (message text, reasoning summaries, function calls), then
//! `response.completed` (or `response.incomplete`) with every item and the usage. Every event
//! carries its `sequence_number`. Deltas are written straight into the output; each item's text
//! grows in its own buffer (the done events and the final response repeat it).

use super::decode::Ev;
use super::{esc, event, merge_usage};
use crate::translate::answer::{Stamp, made_id};
use crate::translate::ir::{ClientTools, Finish, Usage};
use crate::translate::responses::{status_of, usage_json};
use serde_json::{Value, json};
use std::io::Write;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Message,
    Reasoning,
    /// A function call, by the provider's number.
    Call(usize),
}

struct Item {
    kind: Kind,
    id: String,
    /// The text, the summary, or the arguments so far.
    text: String,
    call_id: String,
    /// The client's name for the tool called, and its namespace.
    name: String,
    namespace: Option<String>,
    /// A call of a free-form tool: its text goes out whole when the call is done.
    free_form: bool,
}

impl Item {
    fn json(&self, status: &str) -> Value {
        match self.kind {
            Kind::Message => {
                json!({"id": self.id, "type": "message", "role": "assistant", "status": status,
                "content": if status == "in_progress" { json!([]) } else {
                    json!([{"type": "output_text", "text": self.text, "annotations": []}]) }})
            }
            Kind::Reasoning => json!({"id": self.id, "type": "reasoning",
                "summary": if status == "in_progress" { json!([]) } else {
                    json!([{"type": "summary_text", "text": self.text}]) }}),
            Kind::Call(_) => {
                let mut v = if self.free_form {
                    let input = match status {
                        "in_progress" => String::new(),
                        _ => ClientTools::free_form_input(&self.text),
                    };
                    json!({"id": self.id, "type": "custom_tool_call", "status": status,
                        "call_id": self.call_id, "name": self.name, "input": input})
                } else {
                    json!({"id": self.id, "type": "function_call", "status": status,
                        "call_id": self.call_id, "name": self.name, "arguments": self.text})
                };
                if let Some(ns) = &self.namespace {
                    v["namespace"] = ns.as_str().into();
                }
                v
            }
        }
    }
}

#[derive(Default)]
pub struct ResponsesOut {
    seq: u64,
    started: bool,
    id: String,
    items: Vec<Item>,
    /// The item being filled (its index in `items`, which is its `output_index`).
    open: Option<usize>,
    finish: Option<Finish>,
    usage: Usage,
}

impl ResponsesOut {
    pub fn on(&mut self, ev: Ev, stamp: Stamp, out: &mut Vec<u8>) {
        match ev {
            Ev::Start { id, .. } => self.start(id, stamp, out),
            Ev::Usage(u) => merge_usage(&mut self.usage, u),
            Ev::Finish(f) => self.finish = Some(f),
            Ev::Text(t) => {
                let i = self.item(Kind::Message, "", "", stamp, out);
                self.delta(
                    i,
                    "response.output_text.delta",
                    r#""content_index":0,"#,
                    t,
                    out,
                );
            }
            Ev::Thinking(t) => {
                let i = self.item(Kind::Reasoning, "", "", stamp, out);
                let kind = "response.reasoning_summary_text.delta";
                self.delta(i, kind, r#""summary_index":0,"#, t, out);
            }
            Ev::ToolStart { index, id, name } => {
                self.close(out);
                self.item(Kind::Call(index), id, name, stamp, out);
            }
            Ev::ToolArgs { index, args } => {
                let Some(i) = self
                    .open
                    .filter(|&i| self.items[i].kind == Kind::Call(index))
                else {
                    return; // providers send a call's arguments before the next call begins
                };
                if self.items[i].free_form {
                    // Its text is one field of these arguments: read when they are whole.
                    self.items[i].text.push_str(args);
                    return;
                }
                self.delta(i, "response.function_call_arguments.delta", "", args, out);
            }
            Ev::Error(_) | Ev::End => {}
        }
    }

    /// A piece of item `i`'s text as its `kind` delta event (`part`: the part's index field,
    /// if the item has parts), written straight into the output.
    fn delta(&mut self, i: usize, kind: &str, part: &str, piece: &str, out: &mut Vec<u8>) {
        self.items[i].text.push_str(piece);
        let seq = self.next();
        let id = &self.items[i].id;
        event(out, kind, |o| {
            let _ = write!(
                o,
                r#"{{"type":"{kind}","sequence_number":{seq},"item_id":"{id}","output_index":{i},{part}"delta":"#
            );
            esc(o, piece);
            if kind == "response.output_text.delta" {
                o.extend_from_slice(br#","logprobs":[]"#);
            }
            o.push(b'}');
        });
    }

    fn next(&mut self) -> u64 {
        self.seq += 1;
        self.seq - 1
    }

    fn emit(&mut self, out: &mut Vec<u8>, kind: &str, mut v: Value) {
        v["type"] = kind.into();
        v["sequence_number"] = self.next().into();
        event(out, kind, |o| {
            let _ = serde_json::to_writer(o, &v);
        });
    }

    fn response(&self, stamp: Stamp, status: &str) -> Value {
        json!({"id": self.id, "object": "response", "created_at": stamp.created, "status": status,
               "model": stamp.model, "output": [], "usage": null, "error": null, "incomplete_details": null})
    }

    fn start(&mut self, id: &str, stamp: Stamp, out: &mut Vec<u8>) {
        if self.started {
            return;
        }
        self.started = true;
        self.id = if id.is_empty() {
            made_id("resp_", stamp, 0)
        } else {
            id.to_string()
        };
        let r = self.response(stamp, "in_progress");
        self.emit(out, "response.created", json!({"response": r}));
        self.emit(out, "response.in_progress", json!({"response": r}));
    }

    /// The open item of `kind`, adding one (and finishing the last) if needed.
    fn item(
        &mut self,
        kind: Kind,
        call_id: &str,
        name: &str,
        stamp: Stamp,
        out: &mut Vec<u8>,
    ) -> usize {
        self.start("", stamp, out);
        if let Some(i) = self.open.filter(|&i| self.items[i].kind == kind) {
            return i;
        }
        self.close(out);
        let i = self.items.len();
        let prefix = match kind {
            Kind::Message => "msg_",
            Kind::Reasoning => "rs_",
            Kind::Call(_) => "fc_",
        };
        let (namespace, client_name) = stamp.tools.client_name(name);
        let free_form = matches!(kind, Kind::Call(_)) && stamp.tools.is_free_form(name);
        self.items.push(Item {
            kind,
            id: made_id(if free_form { "ctc_" } else { prefix }, stamp, i),
            text: String::new(),
            call_id: call_id.into(),
            name: client_name.into(),
            namespace: namespace.map(str::to_string),
            free_form,
        });
        self.open = Some(i);
        let (item, id) = (self.items[i].json("in_progress"), self.items[i].id.clone());
        self.emit(
            out,
            "response.output_item.added",
            json!({"output_index": i, "item": item}),
        );
        match kind {
            Kind::Message => self.emit(out, "response.content_part.added", json!({"item_id": id, "output_index": i,
                "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}})),
            Kind::Reasoning => self.emit(out, "response.reasoning_summary_part.added", json!({"item_id": id,
                "output_index": i, "summary_index": 0, "part": {"type": "summary_text", "text": ""}})),
            Kind::Call(_) => {}
        }
        i
    }

    fn close(&mut self, out: &mut Vec<u8>) {
        let Some(i) = self.open.take() else { return };
        let (id, text) = (self.items[i].id.clone(), self.items[i].text.clone());
        match self.items[i].kind {
            Kind::Message => {
                self.emit(
                    out,
                    "response.output_text.done",
                    json!({"item_id": id, "output_index": i,
                    "content_index": 0, "text": text, "logprobs": []}),
                );
                self.emit(out, "response.content_part.done", json!({"item_id": id, "output_index": i,
                    "content_index": 0, "part": {"type": "output_text", "text": text, "annotations": []}}));
            }
            Kind::Reasoning => {
                self.emit(
                    out,
                    "response.reasoning_summary_text.done",
                    json!({"item_id": id,
                    "output_index": i, "summary_index": 0, "text": text}),
                );
                self.emit(out, "response.reasoning_summary_part.done", json!({"item_id": id,
                    "output_index": i, "summary_index": 0, "part": {"type": "summary_text", "text": text}}));
            }
            Kind::Call(_) if self.items[i].free_form => {
                let input = ClientTools::free_form_input(&text);
                let delta = json!({"item_id": id, "output_index": i, "delta": input});
                self.emit(out, "response.custom_tool_call_input.delta", delta);
                let done = json!({"item_id": id, "output_index": i, "input": input});
                self.emit(out, "response.custom_tool_call_input.done", done);
            }
            Kind::Call(_) => self.emit(
                out,
                "response.function_call_arguments.done",
                json!({"item_id": id, "output_index": i, "arguments": text}),
            ),
        }
        let item = self.items[i].json("completed");
        self.emit(
            out,
            "response.output_item.done",
            json!({"output_index": i, "item": item}),
        );
    }

    /// The provider ended its stream: the open item done, then the whole response.
    pub fn end(&mut self, stamp: Stamp, out: &mut Vec<u8>) {
        self.start("", stamp, out);
        self.close(out);
        let calls = self.items.iter().any(|it| matches!(it.kind, Kind::Call(_)));
        let finish = match self.finish {
            Some(Finish::Stop) | None if calls => Some(Finish::ToolCalls),
            f => f,
        };
        let (status, incomplete) = status_of(finish);
        let mut r = self.response(stamp, status);
        r["output"] = self.items.iter().map(|it| it.json("completed")).collect();
        r["usage"] = usage_json(&self.usage);
        r["incomplete_details"] = incomplete;
        let kind = if status == "completed" {
            "response.completed"
        } else {
            "response.incomplete"
        };
        self.emit(out, kind, json!({"response": r}));
    }
}
