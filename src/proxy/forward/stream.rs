//! The relay's state from one upstream read to the next, and its steps: turn what the upstream
//! sent into the next client write, watch the throughput, time and read the next read's outcome,
//! and end the stream (with an error event in the client's dialect when it failed after the commit).

use super::{Relay, RelayFailure, Relayed, Sent, as_chunk, next_wait, send};
use crate::http::chunk::ChunkTracker;
use crate::http::nowait::Push;
use crate::http::{Framing, Head};
use crate::proxy::body_end::{BodyEnd, EventEdge};
use crate::proxy::client_head::client_head;
use crate::proxy::deadline::{Timer, set_timer};
use crate::proxy::watch::Raced;
use crate::sse::Scanner;
use crate::sse::watchdog::Watchdog;
use bytes::{Bytes, BytesMut};
use monoio::net::tcp::TcpOwnedWriteHalf;
use std::time::{Duration, Instant};

/// What the relay writes next.
pub(super) enum Next {
    Write {
        data: Bytes,
        /// The upstream body ends with these bytes.
        done: bool,
        /// The bytes end between chunks and events (see `body_end`).
        edge_now: bool,
        /// This write ends the client's message (the body's own end goes out with it).
        ends_message: bool,
        /// This write carries the response head.
        first: bool,
    },
    /// The upstream's framing broke before anything reached the client.
    Unsent,
    /// The relay stops (the reason is in `Relayed::failure`).
    Stop,
}

/// The throughput watchdog of one stream, and how much of the stream's text it has seen.
struct Watched {
    watchdog: Watchdog,
    text_seen: u64,
}

/// One relayed response, between upstream reads.
pub(super) struct Stream {
    pub(super) framing: Framing,
    /// A close-delimited body re-framed as chunked for a keep-alive client.
    pub(super) rechunk: bool,
    /// An HTTP/1.0 client gets a chunked body without its framing, ended by closing (rare:
    /// boxed, so that it takes no room in every held stream's task).
    pub(super) dechunk: Option<Box<ChunkTracker>>,
    pub(super) keep_alive: bool,
    is_sse: bool,
    pub(super) client_chunked: bool,
    end: BodyEnd,
    /// The client's head, until it goes out with the first body bytes.
    pub(super) pending_head: Option<Vec<u8>>,
    pub(super) upstream_eof: bool,
    pub(super) scanner: Option<Scanner>,
    /// A JSON answer with a length (chunk frames would interrupt the JSON) whose `usage` has
    /// not been read yet: each read is searched for its key (SIMD), the figures read by
    /// theirs (`dialect::usage`; skimming the whole body cost ~15% more instructions per
    /// request).
    usage_wanted: bool,
    /// Whether the bytes sent so far end between chunks and events.
    edge: EventEdge,
    pub(super) clean_edge: bool,
    /// Whether the client's message went out whole.
    pub(super) message_whole: bool,
    /// The upstream's last chunk is held back for an error event to go before it.
    held_back_last_chunk: bool,
    started: Instant,
    /// Only when the watchdog is on (it is off by default): boxed, so that a held stream
    /// without one does not carry its 300 bytes of buckets.
    watchdog: Option<Box<Watched>>,
    /// Whether an error event may still be appended (not after an upstream's trailers, nor
    /// past a Content-Length).
    pub(super) can_append: bool,
    /// A stream of another API, translated for the client (rare: boxed).
    pub(super) translating: Option<Box<super::translated::Translating>>,
}

impl Stream {
    /// [`Stream::new`], and then an event stream lets go of the upstream's head but what
    /// judging its end may read: the client's copy is made (the stream holds it until the first
    /// write), and a provider's head is a kilobyte or more, most of it ids, cookies and limits
    /// that a held stream would otherwise keep for as long as it runs.
    #[inline(always)]
    pub(super) fn start(
        head: &mut Head,
        r: &Relay<'_>,
        buffered: usize,
        translating: Option<Box<super::translated::Translating>>,
    ) -> Stream {
        let mut s = Stream::new(head, r, buffered, translating.is_none());
        if let Some(t) = translating {
            s.translate(head, r, t);
        }
        if r.head_sent {
            s.after_early_head();
        }
        if s.is_sse {
            let_go_of_head(head, r.judging);
        }
        s
    }

    /// `buffered`: the body bytes read with the head; `with_head`: the client's head is made
    /// here (a translated stream makes its own). (Inlined, so that the stream is built where
    /// the relay keeps it: it holds the 832-byte scanner.)
    #[inline(always)]
    pub(super) fn new(head: &Head, r: &Relay<'_>, buffered: usize, with_head: bool) -> Stream {
        let framing = head.framing;
        let rechunk = framing == Framing::Close && r.client_keep_alive && r.client_http11;
        let mut keep_alive = r.client_keep_alive;
        let dechunk = (!r.client_http11 && framing == Framing::Chunked)
            .then(|| Box::new(ChunkTracker::new()));
        if (framing == Framing::Close && !rechunk) || dechunk.is_some() {
            keep_alive = false;
        }
        let is_sse = head
            .get("content-type")
            .is_some_and(|v| v.starts_with(b"text/event-stream"));
        let client_chunked = (framing == Framing::Chunked && dechunk.is_none()) || rechunk;
        let end = match framing {
            Framing::Length(n) => BodyEnd::Length(n),
            Framing::Chunked => BodyEnd::Chunked(ChunkTracker::new()),
            Framing::Close => BodyEnd::Close,
            Framing::Empty => BodyEnd::None,
        };
        // The body bytes already read go out with the head (plus a chunk frame when re-chunked).
        let first_body = buffered + if rechunk { 20 } else { 0 };
        let pending_head =
            with_head.then(|| client_head(head, r, rechunk, keep_alive, is_sse, first_body));
        let scanner = (is_sse && r.stream.guard).then(Scanner::default);
        let json = head
            .get("content-type")
            .is_some_and(|v| v.starts_with(b"application/json"));
        let usage_wanted = json && matches!(framing, Framing::Length(_));
        let watchdog = (scanner.is_some() && r.stream.watchdog.enabled).then(|| {
            Box::new(Watched {
                watchdog: Watchdog::new(r.stream.watchdog, crate::clock::now_ms()),
                text_seen: 0,
            })
        });
        Stream {
            framing,
            rechunk,
            dechunk,
            keep_alive,
            is_sse,
            client_chunked,
            end,
            pending_head,
            upstream_eof: false,
            scanner,
            usage_wanted,
            edge: EventEdge::default(),
            clean_edge: true,
            message_whole: false,
            held_back_last_chunk: false,
            started: crate::clock::instant(),
            watchdog,
            can_append: !matches!(framing, Framing::Length(_)),
            translating: None,
        }
    }

    /// The client has a waiting stream's head (chunked, `proxy::keepalive`): no head of this
    /// answer goes out, and a body the upstream did not chunk is chunked for it. Out of line:
    /// once per such stream.
    #[inline(never)]
    fn after_early_head(&mut self) {
        self.pending_head = Some(Vec::new());
        if self.translating.is_none() && !self.client_chunked {
            self.rechunk = true;
            self.client_chunked = true;
            self.dechunk = None;
            self.can_append = true;
        }
    }

    /// Take what the upstream sent so far as the next client write. Not inlined: the chunk
    /// tracker and the SSE scanner run in here per read, and inlined into the connection's
    /// whole future they ran a third more instructions (callgrind, PGO build, 2026-12-01).
    #[inline(never)]
    pub(super) fn next_write(&mut self, buf: &mut BytesMut, out: &mut Relayed) -> Next {
        let errors_before = self.scanner.as_ref().map_or(0, |sc| sc.totals.errors);
        let (mut data, done, extra) =
            match self.end.take(buf, self.scanner.as_mut(), &mut self.edge) {
                Ok(t) => t,
                Err(()) => {
                    out.failure = Some(RelayFailure::BadFraming);
                    return if self.pending_head.is_some() {
                        Next::Unsent
                    } else {
                        Next::Stop
                    };
                }
            };
        if extra {
            // The upstream sent bytes beyond its own body: never reuse that connection.
            self.upstream_eof = true;
        }
        out.body_bytes += data.len() as u64;
        if self.usage_wanted
            && let Some(u) = crate::dialect::usage::usage(&data)
        {
            // (A usage object split across two reads is missed: answers arrive whole.)
            self.usage_wanted = false;
            out.usage = u.map(|n| n.map_or(0, |n| n.min(u32::MAX - 1) + 1));
        }
        if out.first_useful_us == 0 && self.scanner.as_ref().is_some_and(|sc| sc.totals.useful) {
            // (Kept plus one, so that a first event at the relay's start is not "none".)
            let us = crate::audit::micros32(crate::clock::since(self.started));
            out.first_useful_us = us.saturating_add(1);
        }
        if errors_before == 0 && out.upstream_error.is_none() {
            self.catch_upstream_error(&data, out);
        }
        if self.translating.is_some() {
            return self.next_translated(&data, done, out);
        }
        if done {
            self.hold_back_if_unfinished(&mut data, out);
        }
        // (A last chunk held back above leaves the chunks before it whole: the tracker is done.)
        let edge_now = self.edge.between_events() && self.end.between_chunks();
        // A re-chunked body that ends by its length (after a waiting stream's head) ends with
        // the last chunk; a close-delimited one ends at the upstream's close.
        let last_chunk = self.rechunk && done && !self.held_back_last_chunk;
        let ends_message = done && !self.held_back_last_chunk && (!self.rechunk || last_chunk);
        let data = if self.rechunk && (!data.is_empty() || last_chunk) {
            Bytes::from(rechunked(&data, last_chunk))
        } else if let Some(t) = self.dechunk.as_mut() {
            let mut payload = Vec::with_capacity(data.len());
            if t.feed(&data, |p| payload.extend_from_slice(p)).is_err() {
                out.failure = Some(RelayFailure::BadFraming);
                return Next::Stop;
            }
            Bytes::from(payload)
        } else {
            data
        };
        out.committed = true;
        let first = self.pending_head.is_some();
        let data = match self.pending_head.take() {
            // Head and the first body bytes in one write.
            Some(mut h) => {
                h.extend_from_slice(&data);
                Bytes::from(h)
            }
            None => data,
        };
        Next::Write {
            data,
            done,
            edge_now,
            ends_message,
            first,
        }
    }

    /// The upstream's first in-band error event, if this read brought it (rare: the data is
    /// copied out only then).
    fn catch_upstream_error(&self, data: &[u8], out: &mut Relayed) {
        if self.scanner.as_ref().is_some_and(|sc| sc.totals.errors > 0) {
            out.upstream_error = Some(crate::sse::error_text(data));
        }
    }

    /// A stream that ends without its terminal marker failed, whatever HTTP says: hold back
    /// the upstream's last chunk so the error event can go before it.
    fn hold_back_if_unfinished(&mut self, data: &mut Bytes, out: &mut Relayed) {
        let Some(sc) = self.scanner.as_mut() else {
            return;
        };
        sc.finish(|_| {});
        if sc.totals.terminal || sc.totals.errors != 0 {
            return;
        }
        out.failure = Some(RelayFailure::NoTerminal);
        // The last-chunk line, whole in this read (after a chunk's CRLF or on its own).
        let n = data.len();
        let last_chunk_here = data.ends_with(b"0\r\n\r\n") && (n == 5 || data[n - 6] == b'\n');
        if self.framing == Framing::Chunked && last_chunk_here {
            data.truncate(n - 5);
            self.held_back_last_chunk = true;
        } else if self.rechunk {
            // Ours to end: the error event goes with the last chunk.
            self.held_back_last_chunk = true;
        } else {
            self.can_append = false;
        }
    }

    /// The throughput watchdog's view after a write; true when the stream is too slow to go on
    /// (never once the body is done).
    pub(super) fn too_slow(&mut self, done: bool) -> bool {
        let (Some(sc), Some(w)) = (&self.scanner, self.watchdog.as_mut()) else {
            return false;
        };
        let t = crate::clock::now_ms();
        w.watchdog.observe(t, sc.totals.text_bytes - w.text_seen);
        w.text_seen = sc.totals.text_bytes;
        !done && w.watchdog.too_slow(t, sc.totals.protected)
    }

    /// The upstream closed: a close-delimited body ends here (re-chunked: with the last
    /// chunk); anything else was cut short.
    pub(super) async fn at_upstream_eof(
        &mut self,
        wr: &mut TcpOwnedWriteHalf,
        out: &mut Relayed,
        send_timer: Timer<'_>,
        limit: Duration,
    ) {
        if !matches!(self.end, BodyEnd::Close) {
            out.failure = Some(RelayFailure::Truncated);
            return;
        }
        out.upstream_complete = false;
        if let Some(sc) = self.scanner.as_mut() {
            sc.finish(|_| {});
        }
        let unfinished = self
            .scanner
            .as_ref()
            .is_some_and(|sc| !sc.totals.terminal && sc.totals.errors == 0);
        if unfinished {
            out.failure = Some(RelayFailure::NoTerminal);
        } else if self.rechunk {
            let last = Bytes::from_static(b"0\r\n\r\n");
            if !matches!(
                send(wr, None, Push::Now, last, send_timer, limit).await,
                Sent::Done
            ) {
                out.client_gone = true;
            }
        }
    }

    /// Arm the read timer for whichever ends first: idle silence, the execution budget, the
    /// stream's readiness (no useful event yet) or its total time; returns what it means when
    /// it fires.
    pub(super) fn arm_read(&self, r: &Relay<'_>, timer: Timer<'_>) -> RelayFailure {
        let now = crate::clock::instant();
        let decisive = self.scanner.as_ref().map(|sc| sc.totals.decisive);
        let (mut wait, mut why) = next_wait(r, decisive, self.started, now);
        // The throughput watchdog judges when bytes arrive; a stream gone silent is judged when
        // its output would leave the window, not at the idle timeout.
        if let (Some(sc), Some(w)) = (&self.scanner, &self.watchdog) {
            let now_ms = crate::clock::ms_at(now);
            if let Some(at) = w.watchdog.silent_deadline(now_ms, sc.totals.protected) {
                let left = Duration::from_millis(at.saturating_sub(now_ms));
                if left < wait {
                    (wait, why) = (left, RelayFailure::ThroughputTooLow);
                }
            }
        }
        // A drain's grace ends every stream still running (`state::drain::cut_at`).
        if let Some(at) = crate::state::drain::cut_at() {
            let left = at.saturating_duration_since(now);
            if left < wait {
                (wait, why) = (left, RelayFailure::Shutdown);
            }
        }
        set_timer(timer, now + wait);
        why
    }

    /// What the next upstream read brought. `Err(Some(failure))`: the upstream failed or a
    /// limit ran out (`why`); `Err(None)`: the client went away.
    pub(super) fn after_read(
        &mut self,
        read: Raced<Result<std::io::Result<usize>, ()>>,
        why: RelayFailure,
    ) -> Result<(), Option<RelayFailure>> {
        match read {
            Raced::ClientGone => Err(None),
            Raced::Done(Err(())) => Err(Some(why)),
            Raced::Done(Ok(Err(_))) => Err(Some(RelayFailure::Reset)),
            Raced::Done(Ok(Ok(0))) => {
                self.upstream_eof = true;
                Ok(())
            }
            Raced::Done(Ok(Ok(_))) => Ok(()),
        }
    }

    pub(super) fn is_sse(&self) -> bool {
        self.is_sse
    }

    /// After commit we never replay: a failed event stream ends with one error event in the
    /// client's dialect, when one can still be appended whole (returns the failure to send).
    pub(super) fn error_event_due(&self, out: &Relayed) -> Option<RelayFailure> {
        let appendable = self.can_append && self.clean_edge && !self.message_whole;
        out.failure
            .filter(|_| self.is_sse && !out.client_gone && appendable)
    }

    /// The error event went out (`sent`): a chunked answer is then a whole message again.
    pub(super) fn error_event_sent(&mut self, sent: bool) {
        self.message_whole |= self.client_chunked && sent;
    }

    pub(super) fn client_chunked(&self) -> bool {
        self.client_chunked
    }

    /// End the relay: whether the client connection stays open; returns what the scanner saw.
    pub(super) fn finish(&mut self, out: &mut Relayed) -> Option<crate::sse::Totals> {
        let mut keep_alive = self.keep_alive;
        // Whether a failed stream still ended as a whole HTTP message: the upstream's own end
        // went out (a stream without its terminal marker, where no event could be added), or
        // our error event did. The client connection stays open only then: its head promised
        // keep-alive, and a close right after a complete body races a client that reuses the
        // connection at once (it would see its next request dropped unanswered).
        let ended_whole = self.message_whole;
        if out.failure.is_some() && !ended_whole {
            keep_alive = false;
        }
        out.client_keep_alive =
            keep_alive && !out.client_gone && (out.failure.is_none() || ended_whole);
        self.scanner.take().map(|s| s.totals)
    }
}

/// Body bytes as one chunk (none when empty), and the last chunk when the body ends here.
fn rechunked(data: &[u8], last: bool) -> Vec<u8> {
    let mut v = if data.is_empty() {
        Vec::with_capacity(5)
    } else {
        as_chunk(data)
    };
    if last {
        v.extend_from_slice(b"0\r\n\r\n");
    }
    v
}

/// [`Stream::start`]'s trim of the upstream's head, out of line: it runs once per event
/// stream, and the relay's own function is every request's loop (kept small, it keeps its
/// values in registers).
#[inline(never)]
fn let_go_of_head(head: &mut Head, judging: &crate::resilience::settings::Settings) {
    head.keep_only(|name| judging.reads_header(name));
}

/// A committed event stream's request head: only the access log reads it from here on
/// (`exchange::read_after_commit`), so it keeps its first line and those headers. Out of line,
/// as above: once per event stream.
#[inline(never)]
pub(super) fn let_go_of_request_head(head: &mut Head) {
    head.keep_only(super::super::exchange::read_after_commit);
}
