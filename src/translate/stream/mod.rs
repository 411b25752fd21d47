//! A provider's event stream translated for the client, event by event: upstream bytes (split
//! anywhere) are framed, each event is read into the neutral stream (`decode::Ev`) and written
//! in the client's API. What the client reads is complete events only; the provider's end (its
//! end marker, or Gemini's finish) becomes the client API's end, and an error inside the stream
//! becomes the client API's error event.

mod chat_out;
mod decode;
mod frame;
mod messages_out;
mod pass;
mod responses_out;
mod wire;

pub use decode::Ev;

use super::Api;
use super::answer::Stamp;
use super::ir::{ClientTools, Usage};
use crate::dialect::{ApiError, Endpoint};

enum Encoder {
    Chat(chat_out::ChatOut),
    Messages(messages_out::MessagesOut),
    Responses(responses_out::ResponsesOut),
}

/// How a translated stream stands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Standing {
    #[default]
    Open,
    /// The provider ended it, and so did the client's stream.
    Ended,
    /// The provider reported an error inside it; the client has its API's error event.
    Failed,
}

pub struct Translator {
    framer: frame::Framer,
    flow: Flow,
    /// A Chat stream passed through as the provider wrote it, but for the usage chunk the
    /// client did not ask for (`Translator::without_usage`): no framing, no decoding.
    pass: Option<Box<pass::Pass>>,
}

/// What follows the framing: each event read and written for the client.
struct Flow {
    from: Api,
    decoder: decode::Decoder,
    names: Names,
    sink: Sink,
}

/// What every answer the client reads names: its model, the request, the time.
struct Names {
    model: String,
    request_id: String,
    created: u64,
    tools: ClientTools,
}

impl Names {
    fn stamp(&self) -> Stamp<'_> {
        Stamp {
            model: &self.model,
            created: self.created,
            request_id: &self.request_id,
            tools: &self.tools,
        }
    }
}

/// The client's side: its API's writer and how the stream stands.
struct Sink {
    to: Api,
    encoder: Encoder,
    standing: Standing,
    /// Gemini has no end marker: a finish reason is its end.
    finished: bool,
}

impl Translator {
    /// `to` is the client's API (Chat, Responses or Messages); `model` the name the client
    /// asked for; `include_usage`: a Chat client asked for the usage chunk; `tools`: the
    /// client's names for its tools.
    pub fn new(
        from: Api,
        to: Api,
        model: &str,
        request_id: &str,
        created: u64,
        include_usage: bool,
        tools: ClientTools,
    ) -> Translator {
        let encoder = match to {
            Api::Messages | Api::Gemini => Encoder::Messages(Default::default()),
            Api::Responses => Encoder::Responses(Default::default()),
            Api::Chat => Encoder::Chat(chat_out::ChatOut::new(include_usage)),
        };
        let names = Names {
            model: model.to_string(),
            request_id: request_id.to_string(),
            created,
            tools,
        };
        let sink = Sink {
            to,
            encoder,
            standing: Standing::Open,
            finished: false,
        };
        let decoder = Default::default();
        Translator {
            framer: Default::default(),
            flow: Flow {
                from,
                decoder,
                names,
                sink,
            },
            pass: None,
        }
    }

    /// A Chat stream relayed as the provider sent it, without the usage chunk Ringside asked
    /// for on a client's behalf (to bill it): the client sees the stream it asked for.
    pub fn without_usage(request_id: &str) -> Translator {
        let mut t = Translator::new(
            Api::Chat,
            Api::Chat,
            "",
            request_id,
            0,
            false,
            ClientTools::default(),
        );
        t.pass = Some(Box::default());
        t
    }

    /// How the stream stands (a stream passed through: always `Open`, its end is the stream
    /// guard's to tell).
    pub fn standing(&self) -> Standing {
        match &self.pass {
            Some(_) => Standing::Open,
            None => self.flow.sink.standing,
        }
    }

    /// Whether the stream is passed through (`without_usage`) rather than translated.
    pub fn passes_through(&self) -> bool {
        self.pass.is_some()
    }

    /// Upstream bytes in; the client's bytes appended to `out`.
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<u8>) {
        match &mut self.pass {
            Some(p) => p.feed(bytes, out),
            None => self.framer.feed(bytes, |f| self.flow.frame(f, out)),
        }
    }

    /// The upstream body ended. Returns the standing: `Open` means the provider stopped
    /// without ending its stream (the caller ends the client's stream as a failure).
    pub fn finish(&mut self, out: &mut Vec<u8>) -> Standing {
        if let Some(p) = &mut self.pass {
            return p.finish(out);
        }
        self.framer.finish(|f| self.flow.frame(f, out));
        let Flow {
            from, names, sink, ..
        } = &mut self.flow;
        if sink.standing == Standing::Open && *from == Api::Gemini && sink.finished {
            sink.on(Ev::End, names.stamp(), out);
        }
        sink.standing
    }
}

impl Flow {
    /// One provider event, read and written for the client (nothing once the stream ended).
    fn frame(&mut self, f: frame::Frame, out: &mut Vec<u8>) {
        if self.sink.standing != Standing::Open {
            return;
        }
        let stamp = self.names.stamp();
        let sink = &mut self.sink;
        self.decoder
            .event(self.from, f.name, f.data, stamp, &mut |ev| {
                sink.on(ev, stamp, out)
            });
    }
}

impl Sink {
    fn on(&mut self, ev: Ev, stamp: Stamp, out: &mut Vec<u8>) {
        if self.standing != Standing::Open {
            return;
        }
        match ev {
            Ev::Error(message) => {
                let endpoint = match self.to {
                    Api::Chat => Endpoint::ChatCompletions,
                    Api::Responses => Endpoint::Responses,
                    Api::Messages | Api::Gemini => Endpoint::Messages,
                };
                let err = ApiError::new(502, "upstream_stream_error", message);
                out.extend_from_slice(&err.sse_event(endpoint, stamp.request_id));
                self.standing = Standing::Failed;
                return;
            }
            Ev::Finish(_) => self.finished = true,
            _ => {}
        }
        let end = ev == Ev::End;
        match &mut self.encoder {
            Encoder::Chat(e) if end => e.end(stamp, out),
            Encoder::Chat(e) => e.on(ev, stamp, out),
            Encoder::Messages(e) if end => e.end(stamp, out),
            Encoder::Messages(e) => e.on(ev, stamp, out),
            Encoder::Responses(e) if end => e.end(stamp, out),
            Encoder::Responses(e) => e.on(ev, stamp, out),
        }
        if end {
            self.standing = Standing::Ended;
        }
    }
}

/// A named event (`event: NAME`, its data written by `data`), as Anthropic and Responses send.
fn event(out: &mut Vec<u8>, name: &str, data: impl FnOnce(&mut Vec<u8>)) {
    out.extend_from_slice(b"event: ");
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"\ndata: ");
    data(out);
    out.extend_from_slice(b"\n\n");
}

/// A JSON string, escaped, written into the output.
fn esc(out: &mut Vec<u8>, s: &str) {
    let _ = serde_json::to_writer(out, s);
}

/// Usage reports replace what was known, field by field (Anthropic reports input at the start
/// and output at the end; OpenAI everything at the end).
fn merge_usage(have: &mut Usage, new: Usage) {
    let keep = |h: &mut u64, n: u64| {
        if n > 0 {
            *h = n;
        }
    };
    keep(&mut have.input, new.input);
    keep(&mut have.output, new.output);
    keep(&mut have.cache_read, new.cache_read);
    keep(&mut have.cache_write, new.cache_write);
    keep(&mut have.reasoning, new.reasoning);
}

#[cfg(test)]
mod tests;
