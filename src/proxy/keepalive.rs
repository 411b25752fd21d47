//! Waiting streams are not silent (opt-in: `stream.keepalive_ms`, or a route's own): a
//! streaming request that has had nothing to send for the keep-alive spacing, because it waits
//! for a queue, a cooldown or a slow first byte, gets its head (200, `text/event-stream`,
//! chunked) and then one keep-alive per spacing (Anthropic's `ping` event for its API, an SSE
//! comment for the others), so that the read timeouts of SDKs and load balancers do not fire
//! while Ringside keeps trying. Nothing of an answer has reached the client then: attempts
//! and fallbacks go on as before. The answer's events follow the keep-alives in the same
//! chunked body; a request that fails after the head ends with its error as the dialect's error
//! event (`respond::finish_error`).
//!
//! The keep-alives are written by the client watch (`watch::ClientWatch::race`), which every
//! wait of the attempt loop goes through, with writes that do not wait (`http::nowait`): the
//! request's own writer is idle then, and a few dozen bytes every few seconds never fill a
//! socket buffer that a live client reads. One that is full, or a partial write, means a client
//! that stopped reading: it is treated as gone.

use super::exchange::Ctx;
use super::watch::ClientWatch;
use crate::dialect::Dialect;
use crate::route::Entry;
use crate::timer;
use bytes::BytesMut;
use monoio::net::tcp::TcpOwnedReadHalf;
use std::os::fd::RawFd;
use std::pin::Pin;
use std::task::Context;
use std::time::{Duration, Instant};

/// Anthropic's own keep-alive event, as one chunk.
const ANTHROPIC_PING: &[u8] = b"24\r\nevent: ping\ndata: {\"type\": \"ping\"}\n\n\r\n";
/// An SSE comment, which every SSE reader skips, as one chunk.
const COMMENT_PING: &[u8] = b"e\r\n: keep-alive\n\n\r\n";

/// One waiting stream's keep-alive (boxed in the watch: only opted-in streams make one).
pub(crate) struct KeepAlive {
    fd: RawFd,
    every: Duration,
    timer: timer::Sleep,
    /// The head, until it goes out with the first keep-alive.
    head: Option<Vec<u8>>,
    ping: &'static [u8],
    /// The answer is being relayed (or tried for relay): no keep-alive goes out meanwhile.
    paused: bool,
}

/// The attempt loop's client watch (`watch::ClientWatch::start`), keeping a streaming
/// request's waits alive where its route (or `[stream]`) opts in; HTTP/1.0 clients read no
/// chunks, and are left as they are.
pub(super) fn watch<'w>(
    ctx: &Ctx<'_, '_>,
    entry: &Entry,
    rd: &'w mut TcpOwnedReadHalf,
    buf: BytesMut,
) -> ClientWatch<'w> {
    let mut watch = ClientWatch::start(rd, buf);
    let every_ms = entry
        .keepalive_ms
        .unwrap_or(ctx.config().stream.keepalive_ms);
    if every_ms > 0 && ctx.admitted.stream && ctx.head.version_minor >= 1 {
        let every = Duration::from_millis(u64::from(every_ms.max(100)));
        watch.keep_alive(KeepAlive::new(ctx, every, ctx.started + every));
    }
    watch
}

/// After the attempt loop: the watch ends (`ClientWatch::finish`: the read buffer back in
/// `buf`, the still-armed wait returned), and a request whose head went out ends with an event
/// of its stream.
pub(super) fn settle(
    ctx: &mut Ctx<'_, '_>,
    watch: ClientWatch<'_>,
    buf: &mut BytesMut,
) -> Option<super::exchange::Readiness> {
    if watch.head_sent() {
        ctx.req.early_head = Some(ctx.admitted.endpoint);
        ctx.req.record.early_head = true;
    }
    let wait;
    (*buf, wait) = watch.finish();
    wait
}

impl KeepAlive {
    fn new(ctx: &Ctx<'_, '_>, every: Duration, first: Instant) -> Box<KeepAlive> {
        let anthropic = ctx.admitted.endpoint.dialect() == Dialect::Anthropic;
        Box::new(KeepAlive {
            fd: ctx.conn.fd,
            every,
            timer: timer::sleep_until(first),
            head: Some(head(anthropic, &ctx.record.request_id, ctx.keep_alive)),
            ping: if anthropic {
                ANTHROPIC_PING
            } else {
                COMMENT_PING
            },
            paused: false,
        })
    }

    /// Whether the head went out.
    pub fn head_sent(&self) -> bool {
        self.head.is_none()
    }

    /// Stop writing keep-alives (an answer is being relayed), or start again (that answer
    /// turned out unsendable and the request goes on waiting).
    pub fn pause(&mut self, paused: bool) {
        if !paused && self.paused {
            self.timer.reset(crate::clock::instant() + self.every);
        }
        self.paused = paused;
    }

    /// Write what is due (the head, a keep-alive) and register for the next one. `Err`: the
    /// client does not take what it is sent (gone, or not reading).
    pub fn poll_due(&mut self, cx: &mut Context<'_>) -> Result<(), ()> {
        if self.paused {
            return Ok(());
        }
        while Pin::new(&mut self.timer).poll(cx).is_ready() {
            self.send()?;
            self.timer.reset(crate::clock::instant() + self.every);
        }
        Ok(())
    }

    fn send(&mut self) -> Result<(), ()> {
        let (bytes, with_head) = match self.head.take() {
            Some(mut h) => {
                h.extend_from_slice(self.ping);
                (h, true)
            }
            None => (self.ping.to_vec(), false),
        };
        match crate::http::nowait::send(self.fd, &bytes) {
            Ok(n) if n == bytes.len() => Ok(()),
            // Nothing taken: a keep-alive may be skipped, the head may not.
            Ok(0) if !with_head => Ok(()),
            _ => Err(()),
        }
    }
}

/// The head a waiting stream gets before its answer: what every answer of the dialect's
/// streams has, with Ringside's request id (the upstream's own headers are not known yet).
fn head(anthropic: bool, request_id: &str, keep_alive: bool) -> Vec<u8> {
    let mut h = Vec::with_capacity(256);
    h.extend_from_slice(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n\
          cache-control: no-cache\r\ntransfer-encoding: chunked\r\n\
          x-ringside-keepalive: early-head\r\nx-request-id: ",
    );
    h.extend_from_slice(request_id.as_bytes());
    if anthropic {
        h.extend_from_slice(b"\r\nrequest-id: ");
        h.extend_from_slice(request_id.as_bytes());
    }
    if !keep_alive {
        h.extend_from_slice(b"\r\nconnection: close");
    }
    h.extend_from_slice(b"\r\n\r\n");
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dialect::Endpoint;

    /// The keep-alives are whole chunks: their size lines say their lengths.
    #[test]
    fn the_keep_alives_are_whole_chunks() {
        for ping in [ANTHROPIC_PING, COMMENT_PING] {
            let mut t = crate::http::chunk::ChunkTracker::new();
            let mut payload = Vec::new();
            t.feed(ping, |p| payload.extend_from_slice(p))
                .expect("a chunk");
            assert!(payload.ends_with(b"\n\n"), "{payload:?}");
            assert!(t.between_chunks(), "{payload:?}");
        }
        let mut t = crate::http::chunk::ChunkTracker::new();
        let mut payload = Vec::new();
        t.feed(ANTHROPIC_PING, |p| payload.extend_from_slice(p))
            .expect("a chunk");
        assert_eq!(payload, b"event: ping\ndata: {\"type\": \"ping\"}\n\n");
        let mut t = crate::http::chunk::ChunkTracker::new();
        let mut payload = Vec::new();
        t.feed(COMMENT_PING, |p| payload.extend_from_slice(p))
            .expect("a chunk");
        assert_eq!(payload, b": keep-alive\n\n");
    }

    #[test]
    fn the_head_is_an_event_stream_with_the_request_id() {
        let h = String::from_utf8(head(true, "req-1", false)).expect("text");
        assert!(h.starts_with("HTTP/1.1 200 OK\r\n"), "{h}");
        assert!(h.contains("transfer-encoding: chunked\r\n"), "{h}");
        assert!(h.contains("request-id: req-1\r\n"), "{h}");
        assert!(h.contains("connection: close\r\n"), "{h}");
        assert!(h.ends_with("\r\n\r\n"), "{h}");
        let h = String::from_utf8(head(false, "req-2", true)).expect("text");
        assert!(!h.contains("\r\nrequest-id"), "{h}");
        assert!(!h.contains("connection:"), "{h}");
    }

    #[test]
    fn an_error_after_the_head_is_one_event_and_the_last_chunk() {
        let err = crate::dialect::ApiError::new(503, "no_capacity", "every key is cooling");
        let out = crate::proxy::respond::error_event(&err, Endpoint::Messages, "req-3");
        let mut t = crate::http::chunk::ChunkTracker::new();
        let mut payload = Vec::new();
        t.feed(&out, |p| payload.extend_from_slice(p))
            .expect("chunks");
        assert!(t.is_done(), "ends with the last chunk");
        let text = String::from_utf8(payload).expect("text");
        assert!(text.starts_with("event: error\ndata: "), "{text}");
        assert!(text.contains("every key is cooling"), "{text}");
    }
}
