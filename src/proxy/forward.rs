//! Relaying the upstream response: the head as soon as it arrives, then each upstream read as
//! one client write of the same bytes (no copy on plain TCP, no per-event flush). A chunk
//! tracker reads along to find the end of the body; close-delimited bodies are re-framed as
//! chunked for keep-alive clients.

use super::body_end::{BodyEnd, EventEdge};
use super::client_head::{Shape, carries_body, client_head, head_for_client};
use super::deadline::{Timer, before, set_timer};
pub use super::relay_failure::RelayFailure;
use super::watch::{ClientWatch, Raced};
use crate::dialect::{ApiError, Dialect};
use crate::http::chunk::{ChunkTracker, size_line};
use crate::http::io::read_more;
use crate::http::{Framing, Head};
use crate::sse::Scanner;
use crate::upstream::UpConn;
use bytes::Bytes;
use monoio::io::AsyncWriteRentExt;
use monoio::net::tcp::TcpOwnedWriteHalf;
use std::time::Duration;

/// What the client is owed and how to frame it.
pub struct Relay<'a> {
    pub dialect: Dialect,
    pub request_id: &'a str,
    pub route: &'a str,
    /// `provider/connection`; `None` when this client may not see it.
    pub connection_label: Option<&'a str>,
    /// `x-ringside-attempts` (the decision record so far).
    pub attempts: &'a str,
    /// The connection's credential: redacted wherever an upstream header echoes it.
    pub secret: &'a [u8],
    pub client_keep_alive: bool,
    pub client_http11: bool,
    pub idle_timeout: Duration,
    /// How long the client may accept nothing before it counts as gone.
    pub send_timeout: Duration,
    /// The execution budget's end: the stream is cut (upstream closed) when it passes.
    pub hard_deadline: Option<std::time::Instant>,
    /// The stream guard's settings (readiness, total time, throughput watchdog).
    pub stream: crate::sse::StreamSettings,
}

/// How the relay ended.
#[derive(Debug, Default)]
pub struct Relayed {
    pub status: u16,
    pub body_bytes: u64,
    /// The upstream body was read to its end (the connection may be pooled).
    pub upstream_complete: bool,
    /// The client connection can serve another request.
    pub client_keep_alive: bool,
    /// Set when the relay failed after the head went out.
    pub failure: Option<RelayFailure>,
    pub client_gone: bool,
    /// Whether any byte reached the client (after that, nothing may be retried).
    pub committed: bool,
    /// What the SSE scanner saw (event streams only).
    pub sse: Option<crate::sse::Totals>,
}

/// Send a response whose body was read whole while judging it (an upstream error passed
/// through). Returns whether the client connection stays usable.
pub async fn relay_buffered(
    wr: &mut TcpOwnedWriteHalf,
    up: &Head,
    status: u16,
    body: &[u8],
    r: &Relay<'_>,
    extra: &[(&str, String)],
) -> bool {
    let body = if carries_body(status) { body } else { &[] };
    let shape = Shape {
        status,
        rechunk: false,
        keep_alive: r.client_keep_alive,
        is_sse: false,
        length: Some(body.len()),
        then: body.len(),
    };
    let mut h = head_for_client(up, r, &shape, extra);
    h.extend_from_slice(body);
    write(wr, Bytes::from(h)).await && r.client_keep_alive
}

/// How long the next upstream read may wait, and what it is when that runs out: idle silence,
/// unless the execution budget, the stream's readiness (no useful event yet: `decisive` false)
/// or its total time end sooner.
fn next_wait(
    r: &Relay<'_>,
    decisive: Option<bool>,
    started: std::time::Instant,
    now: std::time::Instant,
) -> (Duration, RelayFailure) {
    let mut wait = r.idle_timeout;
    let mut why = RelayFailure::IdleTimeout;
    let mut tighter = |at: Option<std::time::Instant>, reason: RelayFailure| {
        if let Some(at) = at {
            let left = at.saturating_duration_since(now);
            if left < wait {
                wait = left;
                why = reason;
            }
        }
    };
    tighter(r.hard_deadline, RelayFailure::ExecutionTimeout);
    if let Some(decisive) = decisive {
        let st = &r.stream;
        if !decisive {
            tighter(
                Some(started + Duration::from_millis(st.readiness_timeout_ms)),
                RelayFailure::ReadinessTimeout,
            );
        }
        if st.total_timeout_ms > 0 {
            tighter(
                Some(started + Duration::from_millis(st.total_timeout_ms)),
                RelayFailure::TotalTimeout,
            );
        }
    }
    (wait, why)
}

/// End a failed event stream with one error event in the client's dialect (and the last
/// chunk, for a chunked answer). True when it went out.
async fn send_error_event(
    wr: &mut TcpOwnedWriteHalf,
    r: &Relay<'_>,
    failure: RelayFailure,
    client_chunked: bool,
    send_timer: Timer<'_>,
) -> bool {
    let err = ApiError::new(
        502,
        failure.as_str(),
        "the upstream stream failed after it had started",
    );
    let ev = err.sse_event(r.dialect, r.request_id);
    let mut bytes = if client_chunked { as_chunk(&ev) } else { ev };
    if client_chunked {
        bytes.extend_from_slice(b"0\r\n\r\n");
    }
    matches!(
        send(wr, Bytes::from(bytes), send_timer, r.send_timeout).await,
        Sent::Done
    )
}

/// Frame `data` as one chunk (only for re-framed close-delimited bodies).
fn as_chunk(data: &[u8]) -> Vec<u8> {
    let mut line = [0u8; 18];
    let n = size_line(data.len(), &mut line);
    let mut v = Vec::with_capacity(n + data.len() + 2);
    v.extend_from_slice(&line[..n]);
    v.extend_from_slice(data);
    v.extend_from_slice(b"\r\n");
    v
}

/// How a write to the client went.
enum Sent {
    Done,
    Gone,
    /// The client accepted nothing for `limits.client_send_timeout_ms`: it stopped reading.
    Stalled,
}

/// Write to the client, within the send timeout (measured per write, like nginx's
/// `send_timeout`: a slow reader is fine, one that stops reading is cut).
async fn send(wr: &mut TcpOwnedWriteHalf, data: Bytes, timer: Timer<'_>, limit: Duration) -> Sent {
    if data.is_empty() {
        return Sent::Done;
    }
    set_timer(timer, crate::clock::instant() + limit);
    match before(wr.write_all(data), timer).await {
        Ok((Ok(_), _)) => Sent::Done,
        Ok((Err(_), _)) => Sent::Gone,
        Err(()) => Sent::Stalled,
    }
}

async fn write(wr: &mut TcpOwnedWriteHalf, data: Bytes) -> bool {
    if data.is_empty() {
        return true;
    }
    let (res, _) = wr.write_all(data).await;
    res.is_ok()
}

/// Relay the response whose head was just read. `up.buf` holds the bytes after the head.
pub async fn relay(
    wr: &mut TcpOwnedWriteHalf,
    watch: &mut ClientWatch<'_>,
    up: &mut UpConn,
    head: &Head,
    r: &Relay<'_>,
) -> Relayed {
    let mut out = Relayed {
        status: head.status,
        ..Default::default()
    };
    let rechunk = head.framing == Framing::Close && r.client_keep_alive && r.client_http11;
    let mut keep_alive = r.client_keep_alive;
    // An HTTP/1.0 client gets a chunked body without its framing, ended by closing.
    let mut dechunk =
        (!r.client_http11 && head.framing == Framing::Chunked).then(ChunkTracker::new);
    if (head.framing == Framing::Close && !rechunk) || dechunk.is_some() {
        keep_alive = false;
    }
    let is_sse = head
        .get("content-type")
        .is_some_and(|v| v.starts_with(b"text/event-stream"));
    let client_chunked = (head.framing == Framing::Chunked && dechunk.is_none()) || rechunk;
    let mut end = match head.framing {
        Framing::Length(n) => BodyEnd::Length(n),
        Framing::Chunked => BodyEnd::Chunked(ChunkTracker::new()),
        Framing::Close => BodyEnd::Close,
        Framing::Empty => BodyEnd::None,
    };
    // The body bytes already read go out with the head (plus a chunk frame when re-chunked).
    let first_body = up.buf.len() + if rechunk { 20 } else { 0 };
    let mut pending_head = Some(client_head(
        head, r, rechunk, keep_alive, is_sse, first_body,
    ));
    let mut upstream_eof = false;
    let mut scanner = (is_sse && r.stream.guard).then(Scanner::default);
    // Whether the bytes sent so far end between chunks and events (see `body_end`).
    let mut edge = EventEdge::default();
    let mut clean_edge = true;
    // Whether the client's message went out whole, and whether its last chunk is held back
    // for an error event to go before it.
    let mut message_whole = false;
    let mut held_back_last_chunk = false;
    let started = crate::clock::instant();
    let mut watchdog = (scanner.is_some() && r.stream.watchdog.enabled)
        .then(|| crate::sse::watchdog::Watchdog::new(r.stream.watchdog, crate::clock::now_ms()));
    let mut text_seen = 0u64;
    // Whether an error event may still be appended (not after an upstream's trailers, nor
    // past a Content-Length).
    let mut can_append = !matches!(head.framing, Framing::Length(_));
    let mut timer = None;
    // Writes have their own timer: their deadlines only move later, so moving it is cheap.
    let mut send_timer = None;
    let limit = r.send_timeout;
    loop {
        let (data, done, extra) = match end.take(&mut up.buf, scanner.as_mut(), &mut edge) {
            Ok(t) => t,
            Err(()) => {
                out.failure = Some(RelayFailure::BadFraming);
                if pending_head.is_some() {
                    // Nothing reached the client yet: the caller may still try elsewhere.
                    return out;
                }
                break;
            }
        };
        if extra {
            // The upstream sent bytes beyond its own body: never reuse that connection.
            upstream_eof = true;
        }
        out.body_bytes += data.len() as u64;
        let mut data = data;
        // A stream that ends without its terminal marker failed, whatever HTTP says: hold back
        // the upstream's last chunk so the error event can go before it.
        if done && let Some(sc) = scanner.as_mut() {
            sc.finish(|_| {});
        }
        if done
            && let Some(sc) = &scanner
            && !sc.totals.terminal
            && sc.totals.errors == 0
        {
            out.failure = Some(RelayFailure::NoTerminal);
            // The last-chunk line, whole in this read (after a chunk's CRLF or on its own).
            let n = data.len();
            let last_chunk_here = data.ends_with(b"0\r\n\r\n") && (n == 5 || data[n - 6] == b'\n');
            if head.framing == Framing::Chunked && last_chunk_here {
                data.truncate(data.len() - 5);
                held_back_last_chunk = true;
            } else {
                can_append = false;
            }
        }
        // (A last chunk held back above leaves the chunks before it whole: the tracker is done.)
        let edge_now = edge.between_events() && end.between_chunks();
        // This write ends the client's message (the body's own end goes out with it).
        let ends_message = done && !held_back_last_chunk && !rechunk;
        let data = if rechunk && !data.is_empty() {
            Bytes::from(as_chunk(&data))
        } else if let Some(t) = dechunk.as_mut() {
            let mut payload = Vec::with_capacity(data.len());
            if t.feed(&data, |p| payload.extend_from_slice(p)).is_err() {
                out.failure = Some(RelayFailure::BadFraming);
                break;
            }
            Bytes::from(payload)
        } else {
            data
        };
        out.committed = true;
        let data = match pending_head.take() {
            // Head and the first body bytes in one write.
            Some(mut h) => {
                h.extend_from_slice(&data);
                Bytes::from(h)
            }
            None => data,
        };
        match send(wr, data, &mut send_timer, limit).await {
            Sent::Done => {
                clean_edge = edge_now;
                message_whole |= ends_message;
            }
            Sent::Gone => {
                out.client_gone = true;
                break;
            }
            Sent::Stalled => {
                out.client_gone = true;
                out.failure = Some(RelayFailure::ClientSendTimeout);
                break;
            }
        }
        if let (Some(sc), Some(w)) = (&scanner, watchdog.as_mut()) {
            let t = crate::clock::now_ms();
            w.observe(t, sc.totals.text_bytes - text_seen);
            text_seen = sc.totals.text_bytes;
            if !done && w.too_slow(t, sc.totals.protected) {
                out.failure = Some(RelayFailure::ThroughputTooLow);
                break;
            }
        }
        if done {
            out.upstream_complete = !upstream_eof;
            break;
        }
        if upstream_eof {
            // A close-delimited body ends at EOF; anything else was cut short.
            if matches!(end, BodyEnd::Close) {
                out.upstream_complete = false;
                if let Some(sc) = scanner.as_mut() {
                    sc.finish(|_| {});
                }
                let unfinished = scanner
                    .as_ref()
                    .is_some_and(|sc| !sc.totals.terminal && sc.totals.errors == 0);
                if unfinished {
                    out.failure = Some(RelayFailure::NoTerminal);
                } else if rechunk {
                    let last = Bytes::from_static(b"0\r\n\r\n");
                    if !matches!(send(wr, last, &mut send_timer, limit).await, Sent::Done) {
                        out.client_gone = true;
                    }
                }
            } else {
                out.failure = Some(RelayFailure::Truncated);
            }
            break;
        }
        // Whichever ends first: idle silence, the execution budget, the stream's readiness
        // (no useful event yet) or its total time.
        let now = crate::clock::instant();
        let decisive = scanner.as_ref().map(|sc| sc.totals.decisive);
        let (wait, why) = next_wait(r, decisive, started, now);
        set_timer(&mut timer, now + wait);
        let read = before(
            async {
                // An event stream waits for readiness first: fewer, fuller reads (see
                // `read_when_ready`); other bodies arrive in large pieces anyway.
                if is_sse {
                    up.stream.read_when_ready(&mut up.buf).await
                } else {
                    read_more(&mut up.stream, &mut up.buf).await
                }
            },
            &mut timer,
        );
        match watch.race(std::pin::pin!(read)).await {
            Raced::ClientGone => {
                out.client_gone = true;
                break;
            }
            Raced::Done(Err(_)) => {
                out.failure = Some(why);
                break;
            }
            Raced::Done(Ok(Err(_))) => {
                out.failure = Some(RelayFailure::Reset);
                break;
            }
            Raced::Done(Ok(Ok(0))) => upstream_eof = true,
            Raced::Done(Ok(Ok(_))) => {}
        }
    }
    // Whether a failed stream still ended as a whole HTTP message: the upstream's own end went
    // out (a stream without its terminal marker, where no event could be added), or ours did.
    let mut ended_whole = message_whole;
    if let Some(failure) = out.failure {
        // After commit we never replay: end the stream in the client's dialect. The client
        // connection stays open only when that ending is a whole chunked message: its head
        // promised keep-alive, and a close right after a complete body races a client that
        // reuses the connection at once (it would see its next request dropped unanswered).
        if is_sse && !out.client_gone && can_append && clean_edge && !message_whole {
            let sent = send_error_event(wr, r, failure, client_chunked, &mut send_timer).await;
            ended_whole |= client_chunked && sent;
        }
        if !ended_whole {
            keep_alive = false;
        }
    }
    out.client_keep_alive =
        keep_alive && !out.client_gone && (out.failure.is_none() || ended_whole);
    out.sse = scanner.map(|s| s.totals);
    out
}

#[cfg(test)]
mod tests;
