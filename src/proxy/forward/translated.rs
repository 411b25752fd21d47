//! A translated event stream in the relay: the provider's body (de-chunked) is fed to the
//! stream translator, and what it writes goes to the client as chunks (or unframed, for an
//! HTTP/1.0 client). The stream guard reads the provider's own events, before translation, as
//! on any stream; the translator says whether the provider ended its stream.

use super::stream::{Next, Stream};
use super::{Relay, RelayFailure, Relayed};
use crate::http::chunk::{ChunkTracker, size_line};
use crate::http::{Framing, Head};
use crate::translate::stream::{Standing, Translator};
use bytes::{Bytes, BytesMut};

/// What a translated stream carries in the relay (boxed: rare).
pub(crate) struct Translating {
    translator: Translator,
    /// `x-ringside-translated`, `x-ringside-dropped`: on the client's head.
    pub(super) headers: Vec<(&'static str, String)>,
    /// The provider's chunk framing, taken off (`None`: its body is not chunked).
    dechunk: Option<ChunkTracker>,
    /// The client reads chunks (HTTP/1.1).
    pub(super) chunked: bool,
    payload: Vec<u8>,
    out: Vec<u8>,
    /// What the client is sent, framed: each write is split off it, and its memory comes back
    /// once that write is done (no allocation per read once it has grown).
    framed: BytesMut,
}

impl Translating {
    pub(crate) fn new(translator: Translator, headers: Vec<(&'static str, String)>) -> Translating {
        Translating {
            translator,
            headers,
            dechunk: None,
            chunked: true,
            payload: Vec::new(),
            out: Vec::new(),
            framed: BytesMut::new(),
        }
    }

    /// Set for the answer being relayed: how the provider frames it, how the client reads.
    pub(super) fn frame(&mut self, upstream_chunked: bool, client_http11: bool) {
        self.dechunk = upstream_chunked.then(ChunkTracker::new);
        self.chunked = client_http11;
    }

    /// Upstream bytes (as framed by the provider) in; the client's bytes out, framed for it.
    /// When `done`, the stream's end: the client's last chunk goes out if the provider ended
    /// its stream (or reported an error, which the client has as its API's error event).
    /// `guard`: how the stream guard says the stream stands, for a stream passed through.
    pub(super) fn step(
        &mut self,
        data: &[u8],
        done: bool,
        guard: impl FnOnce(bool) -> Standing,
    ) -> Result<(Bytes, Standing), ()> {
        self.out.clear();
        // Room for the whole read at once: grown by doubling, the buffers of each new stream
        // cost more than the rest of passing it through.
        self.out.reserve(data.len() + 64);
        match self.dechunk.as_mut() {
            Some(t) => {
                self.payload.clear();
                self.payload.reserve(data.len());
                let payload = &mut self.payload;
                t.feed(data, |p| payload.extend_from_slice(p))
                    .map_err(drop)?;
                self.translator.feed(&self.payload, &mut self.out);
            }
            None => self.translator.feed(data, &mut self.out),
        }
        let mut standing = self.translator.standing();
        if done {
            standing = self.translator.finish(&mut self.out);
        }
        if self.translator.passes_through() {
            standing = guard(done);
        }
        let client = &mut self.framed;
        client.reserve(self.out.len() + 24);
        if !self.out.is_empty() {
            if self.chunked {
                let mut line = [0u8; 18];
                let n = size_line(self.out.len(), &mut line);
                client.extend_from_slice(&line[..n]);
                client.extend_from_slice(&self.out);
                client.extend_from_slice(b"\r\n");
            } else {
                client.extend_from_slice(&self.out);
            }
        }
        if done && standing != Standing::Open && self.chunked {
            client.extend_from_slice(b"0\r\n\r\n");
        }
        Ok((client.split().freeze(), standing))
    }
}

impl Stream {
    /// The stream is translated: the client reads the translator's events as chunks (HTTP/1.1)
    /// under a head of its own. Out of line: once per translated stream.
    #[inline(never)]
    pub(super) fn translate(&mut self, head: &Head, r: &Relay<'_>, mut t: Box<Translating>) {
        t.frame(self.framing == Framing::Chunked, r.client_http11);
        self.client_chunked = t.chunked;
        self.rechunk = false;
        self.dechunk = None;
        self.keep_alive = r.client_keep_alive && t.chunked;
        self.can_append = true;
        let shape = crate::proxy::client_head::Shape {
            status: head.status,
            rechunk: t.chunked,
            keep_alive: self.keep_alive,
            is_sse: true,
            length: None,
            then: 0,
            // The provider's length, if it sent one, is not the client's.
            rewritten: true,
        };
        let h = crate::proxy::client_head::head_for_client(head, r, &shape, &t.headers);
        self.pending_head = Some(h);
        self.translating = Some(t);
    }

    /// [`Stream::next_write`] for a translated stream: the translator's events, framed for
    /// the client; a provider that stopped without ending its stream failed (`NoTerminal`),
    /// and the relay appends the client API's error event.
    #[inline(never)]
    pub(super) fn next_translated(&mut self, data: &[u8], done: bool, out: &mut Relayed) -> Next {
        let Some(t) = self.translating.as_mut() else {
            return Next::Stop;
        };
        let scanner = &mut self.scanner;
        let Ok((client, standing)) = t.step(data, done, |done| guard_standing(scanner, done))
        else {
            out.failure = Some(RelayFailure::BadFraming);
            return if self.pending_head.is_some() {
                Next::Unsent
            } else {
                Next::Stop
            };
        };
        let ends_message = done && standing != crate::translate::stream::Standing::Open;
        if done && !ends_message {
            out.failure = Some(RelayFailure::NoTerminal);
        }
        out.committed = true;
        let first = self.pending_head.is_some();
        let data = match self.pending_head.take() {
            Some(mut h) => {
                h.extend_from_slice(&client);
                Bytes::from(h)
            }
            None => client,
        };
        Next::Write {
            data,
            done,
            // The translator writes whole events only.
            edge_now: true,
            ends_message,
            first,
        }
    }
}

/// How a stream passed through stands, as the stream guard read the provider's events: an
/// error event failed it, the end marker ended it. Without the guard, its end is the upstream
/// body's, as on any stream.
fn guard_standing(scanner: &mut Option<crate::sse::Scanner>, done: bool) -> Standing {
    let Some(sc) = scanner.as_mut() else {
        return if done {
            Standing::Ended
        } else {
            Standing::Open
        };
    };
    if done {
        sc.finish(|_| {});
    }
    if sc.totals.errors > 0 {
        Standing::Failed
    } else if sc.totals.terminal {
        Standing::Ended
    } else {
        Standing::Open
    }
}
