//! What the pool, a connection's state and its streams share: how a stream failed, and the
//! connection's counters the pool reads.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

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
    /// The server's `SETTINGS_MAX_CONCURRENT_STREAMS` as last read; until its first SETTINGS
    /// came, what the provider's last connection was told (0 when none was: no stream but its
    /// opener's goes on it before the server says how many it takes).
    pub peer_max: Cell<usize>,
    /// The server's first SETTINGS came (or the connection ended first).
    pub settled: Cell<bool>,
    /// The opening whose waiters wait for that, having no limit to go by.
    pub opening: RefCell<Option<Rc<super::Opening>>>,
    /// Requests waiting for room on its provider's connections (set as the pool takes it):
    /// told when a stream ends, its server says a new limit or it takes no more streams.
    pub room: RefCell<Option<Rc<super::room::Room>>>,
    /// Its task ended (the connection is closed) or it was told to go away: no new streams.
    pub closed: Cell<bool>,
    /// A stream already reported the connection's failure: its siblings' same failure is not
    /// counted again against the provider.
    pub failure_counted: Cell<bool>,
    /// It failed because the provider's TLS refused Ringside's client certificate
    /// (`tls::refusal`): its streams' failure is that, for every key of the provider.
    pub tls_refused: Cell<bool>,
    /// Its server told it to go away for too many PINGs (`GOAWAY(ENHANCE_YOUR_CALM)` saying
    /// `too_many_pings`, as gRPC servers and Google's front ends do): the pool doubles the
    /// PING interval of the provider's next connections once, when it lets this one go.
    pub too_many_pings: Cell<bool>,
    /// Its server said the provider must be reached over HTTP/1.1 (`HTTP_1_1_REQUIRED`, on a
    /// stream or the connection): the pool reaches it so from then on (`http2 = "auto"`).
    pub wants_http1: Cell<bool>,
    /// `host:port` it reaches, for the operator's log (`GOAWAY` with an error).
    pub origin: Box<str>,
    /// When its last stream ended (ms, the core's clock), for the idle timeout.
    pub idle_since_ms: Cell<u64>,
}

impl Shared {
    /// The server's stream limit is known (its first SETTINGS), or will never be (the
    /// connection ended): the requests waiting for it look at the pool again.
    pub fn settle(&self) {
        self.settled.set(true);
        if let Some(o) = self.opening.take() {
            o.finish();
        }
        self.room_changed();
    }

    /// It takes no more streams (told to go away, lost, or its server wants HTTP/1.1): it no
    /// longer counts toward its provider's connections, so one waiting may open another.
    pub fn close(&self) {
        self.closed.set(true);
        self.room_changed();
    }

    /// Those waiting for room look at the pool again.
    fn room_changed(&self) {
        if let Some(r) = &*self.room.borrow() {
            r.tell_all();
        }
    }

    /// A stream on it ended (counted from its making, [`Self::open`]): when it was the last,
    /// the connection's idle time starts.
    pub fn stream_closed(&self) {
        let open = self.open.get().saturating_sub(1);
        self.open.set(open);
        if open == 0 {
            self.idle_since_ms.set(crate::clock::now_ms());
        }
        if let Some(r) = &*self.room.borrow() {
            r.tell_one();
        }
    }
}
