//! What the pool, a connection's state and its streams share: how a stream failed, and the
//! connection's counters the pool reads.

use std::cell::Cell;

/// How a stream failed, as far as a retry is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// The server refused it unprocessed: `RST_STREAM(REFUSED_STREAM)`, or a `GOAWAY` whose
    /// last stream id is below it. Safe to send again, on any connection.
    Refused,
    /// The connection under it failed (closed, reset, a connection error, no PING answer).
    ConnectionLost,
    /// The server reset this stream alone.
    Reset,
}

/// What the pool and the streams share about one connection.
#[derive(Default)]
pub struct Shared {
    /// Streams open on it (an [`super::stream::H2Stream`] counts from its making to its drop).
    pub open: Cell<usize>,
    /// The server's `SETTINGS_MAX_CONCURRENT_STREAMS` as last read.
    pub peer_max: Cell<usize>,
    /// Its task ended (the connection is closed) or it was told to go away: no new streams.
    pub closed: Cell<bool>,
    /// A stream already reported the connection's failure: its siblings' same failure is not
    /// counted again against the provider.
    pub failure_counted: Cell<bool>,
    /// When its last stream ended (ms, the core's clock), for the idle timeout.
    pub idle_since_ms: Cell<u64>,
}

impl Shared {
    /// A stream on it ended (counted from its making, [`Self::open`]): when it was the last,
    /// the connection's idle time starts.
    pub fn stream_closed(&self) {
        let open = self.open.get().saturating_sub(1);
        self.open.set(open);
        if open == 0 {
            self.idle_since_ms.set(crate::clock::now_ms());
        }
    }
}
