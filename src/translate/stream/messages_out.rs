//! The neutral stream written as Anthropic Messages events: `message_start`, blocks started,
//! filled and stopped one after another, `message_delta` with the stop reason and the usage,
//! `message_stop`. Deltas are written straight into the output: no allocation per event.

use super::decode::Ev;
use super::{esc, event, merge_usage};
use crate::translate::answer::Stamp;
use crate::translate::ir::{Finish, Usage};
use crate::translate::messages::{stop_reason, usage_json};
use serde_json::json;
use std::io::Write;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Open {
    Text,
    Thinking,
    /// A tool call, by the provider's number.
    Tool(usize),
}

#[derive(Default)]
pub struct MessagesOut {
    started: bool,
    id: String,
    /// The block being filled, and its index in the message.
    open: Option<(Open, usize)>,
    blocks: usize,
    any_tool: bool,
    finish: Option<Finish>,
    usage: Usage,
}

impl MessagesOut {
    pub fn on(&mut self, ev: Ev, stamp: Stamp, out: &mut Vec<u8>) {
        match ev {
            // Anthropic's first event carries the input's usage: written with the first content.
            Ev::Start { id, .. } => {
                if self.id.is_empty() && !id.is_empty() {
                    self.id = id.to_string();
                }
            }
            Ev::Usage(u) => merge_usage(&mut self.usage, u),
            Ev::Finish(f) => self.finish = Some(f),
            Ev::Text(t) => {
                let i = self.block(Open::Text, stamp, out, |o| {
                    o.extend_from_slice(br#"{"type":"text","text":""}"#)
                });
                delta(out, i, |o| {
                    o.extend_from_slice(br#"{"type":"text_delta","text":"#);
                    esc(o, t);
                    o.push(b'}');
                });
            }
            Ev::Thinking(t) => {
                let i = self.block(Open::Thinking, stamp, out, |o| {
                    o.extend_from_slice(br#"{"type":"thinking","thinking":"","signature":""}"#)
                });
                delta(out, i, |o| {
                    o.extend_from_slice(br#"{"type":"thinking_delta","thinking":"#);
                    esc(o, t);
                    o.push(b'}');
                });
            }
            Ev::ToolStart { index, id, name } => {
                self.any_tool = true;
                self.close(out);
                self.block(Open::Tool(index), stamp, out, |o| {
                    o.extend_from_slice(br#"{"type":"tool_use","id":"#);
                    esc(o, id);
                    o.extend_from_slice(br#","name":"#);
                    esc(o, name);
                    o.extend_from_slice(br#","input":{}}"#);
                });
            }
            Ev::ToolArgs { index, args } => {
                // Providers send a call's arguments before the next call begins.
                if let Some((Open::Tool(t), i)) = self.open
                    && t == index
                {
                    delta(out, i, |o| {
                        o.extend_from_slice(br#"{"type":"input_json_delta","partial_json":"#);
                        esc(o, args);
                        o.push(b'}');
                    });
                }
            }
            Ev::Error(_) | Ev::End => {}
        }
    }

    fn start(&mut self, stamp: Stamp, out: &mut Vec<u8>) {
        if self.started {
            return;
        }
        self.started = true;
        if self.id.is_empty() {
            self.id = crate::translate::answer::made_id("msg_", stamp, 0);
        }
        let mut usage = usage_json(&self.usage);
        usage["output_tokens"] = 0.into();
        let v = json!({"type": "message_start", "message": {
            "id": self.id, "type": "message", "role": "assistant", "model": stamp.model,
            "content": [], "stop_reason": null, "stop_sequence": null, "usage": usage,
        }});
        event(out, "message_start", |o| {
            let _ = serde_json::to_writer(o, &v);
        });
    }

    /// The index of an open block of `kind`, starting one (and stopping the last) if needed.
    fn block(
        &mut self,
        kind: Open,
        stamp: Stamp,
        out: &mut Vec<u8>,
        start: impl FnOnce(&mut Vec<u8>),
    ) -> usize {
        self.start(stamp, out);
        if let Some((k, i)) = self.open
            && k == kind
        {
            return i;
        }
        self.close(out);
        let i = self.blocks;
        self.blocks += 1;
        self.open = Some((kind, i));
        event(out, "content_block_start", |o| {
            let _ = write!(
                o,
                r#"{{"type":"content_block_start","index":{i},"content_block":"#
            );
            start(o);
            o.push(b'}');
        });
        i
    }

    fn close(&mut self, out: &mut Vec<u8>) {
        if let Some((_, i)) = self.open.take() {
            event(out, "content_block_stop", |o| {
                let _ = write!(o, r#"{{"type":"content_block_stop","index":{i}}}"#);
            });
        }
    }

    /// The provider ended its stream: the last block stopped, the stop reason with the final
    /// usage (held until now: OpenAI's usage comes after its finish), `message_stop`.
    pub fn end(&mut self, stamp: Stamp, out: &mut Vec<u8>) {
        self.start(stamp, out);
        self.close(out);
        let finish = match self.finish.unwrap_or(Finish::Stop) {
            Finish::Stop if self.any_tool => Finish::ToolCalls,
            f => f,
        };
        let v = json!({"type": "message_delta",
            "delta": {"stop_reason": stop_reason(finish), "stop_sequence": null},
            "usage": usage_json(&self.usage)});
        event(out, "message_delta", |o| {
            let _ = serde_json::to_writer(o, &v);
        });
        event(out, "message_stop", |o| {
            o.extend_from_slice(br#"{"type":"message_stop"}"#)
        });
    }
}

fn delta(out: &mut Vec<u8>, i: usize, body: impl FnOnce(&mut Vec<u8>)) {
    event(out, "content_block_delta", |o| {
        let _ = write!(o, r#"{{"type":"content_block_delta","index":{i},"delta":"#);
        body(o);
        o.push(b'}');
    });
}
