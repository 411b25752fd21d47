//! The neutral stream written as Chat Completions chunks (`data: {chunk}` … `data: [DONE]`).
//! Deltas are written straight into the output (strings escaped by serde_json into it): no
//! allocation per event.

use super::decode::Ev;
use super::{esc, merge_usage};
use crate::translate::answer::Stamp;
use crate::translate::chat::{finish_str, usage_out};
use crate::translate::ir::{Finish, Usage};
use std::io::Write;

#[derive(Default)]
pub struct ChatOut {
    started: bool,
    /// The chunk's opening up to `"delta":`, built once.
    prefix: Vec<u8>,
    /// Provider tool numbers in the order their calls began: a call's place is its index here.
    tools: Vec<usize>,
    finish: Option<Finish>,
    usage: Usage,
    /// The client asked for usage (`stream_options.include_usage`).
    include_usage: bool,
}

impl ChatOut {
    pub fn new(include_usage: bool) -> ChatOut {
        ChatOut {
            include_usage,
            ..Default::default()
        }
    }

    pub fn on(&mut self, ev: Ev, stamp: Stamp, out: &mut Vec<u8>) {
        match ev {
            Ev::Start { id, .. } => self.start(id, stamp, out),
            Ev::Text(t) => {
                self.start("", stamp, out);
                self.delta(out, |o| {
                    o.extend_from_slice(br#"{"content":"#);
                    esc(o, t);
                    o.push(b'}');
                });
            }
            Ev::Thinking(t) => {
                self.start("", stamp, out);
                self.delta(out, |o| {
                    o.extend_from_slice(br#"{"reasoning_content":"#);
                    esc(o, t);
                    o.push(b'}');
                });
            }
            Ev::ToolStart { index, id, name } => {
                self.start("", stamp, out);
                let n = self.tools.len();
                self.tools.push(index);
                self.delta(out, |o| {
                    let _ = write!(o, r#"{{"tool_calls":[{{"index":{n},"id":"#);
                    esc(o, id);
                    o.extend_from_slice(br#","type":"function","function":{"name":"#);
                    esc(o, name);
                    o.extend_from_slice(br#","arguments":""}}]}"#);
                });
            }
            Ev::ToolArgs { index, args } => {
                let Some(n) = self.tools.iter().position(|&i| i == index) else {
                    return; // arguments of a call that never began: nothing to attach them to
                };
                self.delta(out, |o| {
                    let _ = write!(
                        o,
                        r#"{{"tool_calls":[{{"index":{n},"function":{{"arguments":"#
                    );
                    esc(o, args);
                    o.extend_from_slice(b"}}]}");
                });
            }
            Ev::Usage(u) => merge_usage(&mut self.usage, u),
            Ev::Finish(f) => self.finish = Some(f),
            Ev::Error(_) | Ev::End => {}
        }
    }

    fn start(&mut self, id: &str, stamp: Stamp, out: &mut Vec<u8>) {
        if self.started {
            return;
        }
        self.started = true;
        let id = if id.is_empty() {
            crate::translate::answer::made_id("chatcmpl-", stamp, 0)
        } else {
            id.to_string()
        };
        self.prefix.extend_from_slice(br#"data: {"id":"#);
        esc(&mut self.prefix, &id);
        let _ = write!(
            self.prefix,
            r#","object":"chat.completion.chunk","created":{},"model":"#,
            stamp.created
        );
        esc(&mut self.prefix, stamp.model);
        self.prefix
            .extend_from_slice(br#","choices":[{"index":0,"delta":"#);
        self.delta(out, |o| {
            o.extend_from_slice(br#"{"role":"assistant","content":""}"#)
        });
    }

    fn delta(&self, out: &mut Vec<u8>, body: impl FnOnce(&mut Vec<u8>)) {
        out.extend_from_slice(&self.prefix);
        body(out);
        out.extend_from_slice(b",\"logprobs\":null,\"finish_reason\":null}]}\n\n");
    }

    /// The provider ended its stream: the finish chunk, the usage chunk when asked for, and
    /// `[DONE]`.
    pub fn end(&mut self, stamp: Stamp, out: &mut Vec<u8>) {
        self.start("", stamp, out);
        let finish = match self.finish.unwrap_or(Finish::Stop) {
            Finish::Stop if !self.tools.is_empty() => Finish::ToolCalls,
            f => f,
        };
        out.extend_from_slice(&self.prefix);
        let _ = write!(
            out,
            r#"{{}},"logprobs":null,"finish_reason":"{}"}}]}}"#,
            finish_str(finish)
        );
        out.extend_from_slice(b"\n\n");
        if self.include_usage {
            // The usage chunk: no choices (what OpenAI sends when asked).
            let head = self.prefix.len() - br#","choices":[{"index":0,"delta":"#.len();
            out.extend_from_slice(&self.prefix[..head]);
            out.extend_from_slice(br#","choices":[],"usage":"#);
            let _ = serde_json::to_writer(&mut *out, &usage_out(&self.usage));
            out.extend_from_slice(b"}\n\n");
        }
        out.extend_from_slice(b"data: [DONE]\n\n");
    }
}
