//! A translated event stream in the relay: the provider's body (de-chunked) is fed to the
//! stream translator, and what it writes goes to the client as chunks (or unframed, for an
//! HTTP/1.0 client). The stream guard reads the provider's own events, before translation, as
//! on any stream; the translator says whether the provider ended its stream.

use crate::http::chunk::{ChunkTracker, size_line};
use crate::translate::stream::{Standing, Translator};

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
    pub(super) fn step(&mut self, data: &[u8], done: bool) -> Result<(Vec<u8>, Standing), ()> {
        self.payload.clear();
        match self.dechunk.as_mut() {
            Some(t) => {
                let payload = &mut self.payload;
                t.feed(data, |p| payload.extend_from_slice(p))
                    .map_err(drop)?;
            }
            None => self.payload.extend_from_slice(data),
        }
        self.out.clear();
        self.translator.feed(&self.payload, &mut self.out);
        let mut standing = self.translator.standing();
        if done {
            standing = self.translator.finish(&mut self.out);
        }
        let mut client = Vec::with_capacity(self.out.len() + 24);
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
        Ok((client, standing))
    }
}
