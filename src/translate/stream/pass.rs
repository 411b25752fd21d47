//! A Chat stream passed through as the provider wrote it, but for the final usage chunk
//! (`"choices":[]` with a `usage` object) that Ringside asked for on the client's behalf: the
//! client reads the stream it asked for, Ringside bills what the provider reported (the stream
//! guard read the provider's own bytes before this).
//!
//! Read by read, not event by event: the complete events of a read are searched for an empty
//! array and go out as they are up to it; only the event around such a find is read on its own.
//! How the stream ends (its end marker, an error event) is the stream guard's to tell, as on any
//! stream (`proxy::forward::translated`). Framed event by event, a billed stream cost 80 % more
//! instructions than a plain one.

use super::Standing;
use memchr::memmem::Finder;
use std::sync::LazyLock;

/// What passing a stream through holds between reads: the event that has not ended yet.
#[derive(Default)]
pub(super) struct Pass {
    tail: Vec<u8>,
}

/// What marks a read as needing a closer look, each searcher built once.
struct Keys {
    empty: Finder<'static>,
    choices: [Finder<'static>; 2],
    usage: Finder<'static>,
}

static KEYS: LazyLock<Keys> = LazyLock::new(|| Keys {
    empty: Finder::new(b"[]"),
    choices: [
        Finder::new(b"\"choices\":[]"),
        Finder::new(b"\"choices\": []"),
    ],
    usage: Finder::new(b"\"usage\""),
});

impl Pass {
    /// Upstream bytes in (split anywhere); the client's bytes appended to `out`.
    pub(super) fn feed(&mut self, bytes: &[u8], out: &mut Vec<u8>) {
        out.reserve(bytes.len());
        if self.tail.is_empty() {
            let end = events_end(bytes);
            self.events(&bytes[..end], out);
            self.tail.extend_from_slice(&bytes[end..]);
        } else {
            let mut work = std::mem::take(&mut self.tail);
            work.extend_from_slice(bytes);
            let end = events_end(&work);
            self.events(&work[..end], out);
            work.drain(..end);
            self.tail = work;
        }
    }

    /// The upstream ended: an event without its blank line still counts. (The standing is
    /// the stream guard's to tell: `Open` here.)
    pub(super) fn finish(&mut self, out: &mut Vec<u8>) -> Standing {
        if !self.tail.is_empty() {
            let tail = std::mem::take(&mut self.tail);
            self.event(&tail, out);
        }
        Standing::Open
    }

    /// Whole events, copied as they are up to each empty array (found by SIMD search; the
    /// usage chunk has one, other events seldom), whose event is read on its own.
    fn events(&mut self, events: &[u8], out: &mut Vec<u8>) {
        let empty = &KEYS.empty;
        let mut rest = events;
        while let Some(hit) = empty.find(rest) {
            let start = event_start(rest, hit);
            out.extend_from_slice(&rest[..start]);
            let end = start + first_event_end(&rest[start..]);
            self.event(&rest[start..end], out);
            rest = &rest[end..];
        }
        out.extend_from_slice(rest);
    }

    /// One event, its blank line included: left out (the usage chunk) or written as sent.
    fn event(&mut self, event: &[u8], out: &mut Vec<u8>) {
        if usage_only(event) {
            return;
        }
        out.extend_from_slice(event);
        if !ends_blank(event) {
            // The last event, cut at the close: the client's stream gets its blank line.
            out.extend_from_slice(if event.ends_with(b"\n") {
                b"\n"
            } else {
                b"\n\n"
            });
        }
    }
}

/// The chunk that carries only the usage: no choices, a usage object.
fn usage_only(event: &[u8]) -> bool {
    let keys = &*KEYS;
    keys.choices.iter().any(|k| k.find(event).is_some()) && keys.usage.find(event).is_some()
}

/// Where the complete events at the start of `bytes` end: just past the last blank line (0:
/// none ended yet).
fn events_end(bytes: &[u8]) -> usize {
    let mut at = bytes.len();
    while let Some(nl) = memchr::memrchr(b'\n', &bytes[..at]) {
        if ends_line_before(bytes, nl) {
            return nl + 1;
        }
        at = nl;
    }
    0
}

/// Where the event holding the byte at `at` starts: just past the blank line before it.
fn event_start(bytes: &[u8], at: usize) -> usize {
    let mut to = at;
    while let Some(nl) = memchr::memrchr(b'\n', &bytes[..to]) {
        if ends_line_before(bytes, nl) {
            return nl + 1;
        }
        to = nl;
    }
    0
}

/// Where the first event of `bytes` ends: past its blank line, else at the end.
fn first_event_end(bytes: &[u8]) -> usize {
    let mut from = 0;
    while let Some(p) = memchr::memchr(b'\n', &bytes[from..]) {
        let nl = from + p;
        if ends_line_before(bytes, nl) {
            return nl + 1;
        }
        from = nl + 1;
    }
    bytes.len()
}

/// Whether the line ending at `nl` is blank: the byte before it (a `\r` aside) ends a line too.
fn ends_line_before(bytes: &[u8], nl: usize) -> bool {
    let before = match nl.checked_sub(1).map(|i| bytes[i]) {
        Some(b'\r') => nl.checked_sub(2).map(|i| bytes[i]),
        b => b,
    };
    before == Some(b'\n')
}

fn ends_blank(event: &[u8]) -> bool {
    event.ends_with(b"\n") && ends_line_before(event, event.len() - 1)
}

#[cfg(test)]
#[path = "pass_tests.rs"]
mod tests;
