//! HTTP/2 to providers: per core, a few multiplexed connections per provider (`conn`), each
//! request a stream on one (`stream`), read by the request path as an HTTP/1.1 exchange.
//!
//! A request takes the first connection with room (alive, under the server's
//! `SETTINGS_MAX_CONCURRENT_STREAMS` and [`MAX_STREAMS`]); when none has room, one connection
//! is opened and the requests that come meanwhile wait for it, up to its room, rather than
//! each opening its own (a burst of 500 makes five connections, not 500). A new connection's
//! room is what the provider's server said last (`SETTINGS_MAX_CONCURRENT_STREAMS`); where
//! it never said, those waiting wait on for the new server's SETTINGS, a round trip, rather
//! than send streams it may refuse (a server that takes 5 would refuse 95 of a burst).
//!
//! Another connection is not opened where the provider's servers take no streams now
//! (`SETTINGS_MAX_CONCURRENT_STREAMS` = 0: a new one would say the same, and a storm of
//! connections is what such a server sheds load against), nor past [`MAX_CONNECTIONS`] to one
//! provider: requests then wait for room ([`room`]), within the connect timeout.

mod answer;
pub mod conn;
pub mod link;
pub mod open;
#[cfg(test)]
mod pool_tests;
pub mod request;
pub mod room;
pub mod shared;
pub mod stream;
#[cfg(test)]
mod tests;
pub use conn::Ping;

use conn::H2Conn;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

/// Streams Ringside opens on one connection at most, whatever the server allows: a lost
/// connection fails at most this many streams.
pub const MAX_STREAMS: usize = 100;

/// HTTP/2 connections one core holds to one provider at most: 25,600 streams at a hundred
/// each, more than a core's share of any descriptor limit; a server that takes a stream or two
/// per connection gets a queue, not a connection per request.
pub const MAX_CONNECTIONS: usize = 256;

/// A connection being opened, which the requests that come meanwhile wait for.
#[derive(Default)]
pub struct Opening {
    /// Requests waiting for it (it has room for [`MAX_STREAMS`] less the one that opens it).
    waiting: Cell<usize>,
    done: Cell<bool>,
    /// Those waiting, told when it ends.
    told: room::Room,
}

impl Opening {
    pub(super) fn finish(&self) {
        self.done.set(true);
        self.told.tell_all();
    }

    /// Wait until the opening ends (opened or not: the caller looks at the pool again).
    pub async fn wait(&self) {
        while !self.done.get() {
            self.told.changed().await;
        }
        self.waiting.set(self.waiting.get().saturating_sub(1));
    }
}

/// The opening of a connection, held by the request that opens it: ends the opening when
/// dropped, whatever happened (connected, failed, or the request went away).
pub struct OpenGuard {
    key: usize,
    opening: Rc<Opening>,
    /// The connection it opened finishes it, once its server says how many streams it takes.
    handed: Cell<bool>,
}

/// What a request gets from the pool.
pub enum Pick {
    /// A connection with room: a stream on it.
    Ready(stream::H2Stream),
    /// One is being opened with room: wait for it, then pick again.
    Wait(Rc<Opening>),
    /// Open one (the guard ends the opening).
    Open(OpenGuard),
    /// None has room and no other may be opened (why): wait for room, then pick again.
    Full(Rc<room::Room>, Crowded),
    /// The provider's TLS chose HTTP/1.1 before: connect as HTTP/1.1.
    Http1,
}

/// Why a request found no room and may open no connection: a wait that runs out is the
/// provider's concern in the first case and Ringside's own in the second.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Crowded {
    /// A server of the provider says it takes no streams now (a new connection would too).
    TakesNone,
    /// This core holds its most connections to the provider ([`MAX_CONNECTIONS`]), all full.
    OwnLimit,
}

/// Per provider (by index): its connections and the one being opened.
#[derive(Default)]
struct Origin {
    conns: Vec<H2Conn>,
    opening: Option<Rc<Opening>>,
    /// Requests waiting for room on its connections (each connection tells it).
    room: Rc<room::Room>,
    /// Its TLS chose HTTP/1.1 (`http2 = "auto"`), or its server required it: until then its
    /// connections are HTTP/1.1 ones, opened at once, side by side, and pooled as such; after
    /// it the next connection offers HTTP/2 again, the mark kept until one speaks it.
    http1_until: Option<u64>,
    /// The stream limit its servers last gave: a new connection's until its own server says.
    known_max: Option<usize>,
    /// How often its next connections are PINGed, once a server said too many PINGs (else
    /// `[upstream] h2_ping_interval_ms`).
    ping_every: Option<Duration>,
}

/// How long a provider found speaking HTTP/1.1 is reached so before a connection offers it
/// HTTP/2 again: its edge may have been upgraded since, and a server's `HTTP_1_1_REQUIRED` may
/// have been for one endpoint or one moment. Another handshake, or one more refused stream,
/// every ten minutes.
const HTTP1_RECHECK_MS: u64 = 10 * 60 * 1000;

/// The longest a provider's PING interval grows to, halving after halving.
const MAX_PING_EVERY: Duration = Duration::from_secs(3_600);

impl Origin {
    /// What its servers said last, from its newest live connection whose server spoke (one
    /// that ended settled with nothing said is no longer usable). Learned where none has room
    /// and as a connection opens, not on every pick.
    fn learn_max(&mut self) {
        let spoke = |c: &&H2Conn| c.usable() && c.shared.settled.get();
        if let Some(c) = self.conns.iter().rev().find(spoke) {
            self.known_max = Some(c.shared.peer_max.get());
        }
    }

    /// Requests that may wait for a connection being opened, beside its opener: what a new
    /// connection will take less the opener's stream (so a burst to a server that takes a
    /// few streams a connection opens that many connections at once, not one after another).
    fn may_wait(&self) -> usize {
        let takes = self.known_max.map_or(MAX_STREAMS, |m| m.min(MAX_STREAMS));
        takes.saturating_sub(1)
    }

    /// Let go of the connections that take no more streams (`keep`: also those it wants
    /// gone), learning from each: one its server sent away for too many PINGs doubles the
    /// interval of the connections opened after it (gRPC's client keepalive does the same);
    /// one whose server required HTTP/1.1 makes the provider an HTTP/1.1 one.
    fn let_go(&mut self, default: Duration, mut keep: impl FnMut(&H2Conn) -> bool) {
        let every = &mut self.ping_every;
        let http1 = &mut self.http1_until;
        self.conns.retain(|c| {
            let kept = keep(c) && c.usable();
            // Its server required HTTP/1.1: the provider is reached so for a while.
            if !kept && c.shared.wants_http1.get() {
                *http1 = Some(crate::clock::now_ms() + HTTP1_RECHECK_MS);
            }
            if !kept && c.shared.too_many_pings.take() {
                let next = (every.unwrap_or(default) * 2).min(MAX_PING_EVERY);
                *every = Some(next);
                crate::log::event(
                    "info",
                    "HTTP/2 connections to a provider are PINGed less often",
                    serde_json::json!({"origin": &*c.shared.origin, "ping_every_s": next.as_secs()}),
                );
            }
            kept
        });
    }
}

/// A core's HTTP/2 connections.
pub struct H2Pool {
    origins: Vec<Origin>,
    /// How connections are PINGed (`[upstream]`), unless their provider's servers said less.
    pub ping: Ping,
    /// Connections to one provider at most ([`MAX_CONNECTIONS`]; fewer in tests).
    most: usize,
}

impl Default for H2Pool {
    fn default() -> H2Pool {
        H2Pool::new(Ping::default())
    }
}

impl H2Pool {
    pub fn new(ping: Ping) -> H2Pool {
        H2Pool {
            origins: Vec::new(),
            ping,
            most: MAX_CONNECTIONS,
        }
    }

    /// A pool holding at most `most` connections to one provider.
    #[cfg(test)]
    pub fn at_most(most: usize) -> H2Pool {
        H2Pool {
            most,
            ..H2Pool::default()
        }
    }

    /// How provider `key`'s next connection is PINGed.
    pub fn ping_for(&mut self, key: usize) -> Ping {
        let ping = self.ping;
        Ping {
            every: self.origin(key).ping_every.unwrap_or(ping.every),
            ..ping
        }
    }

    fn origin(&mut self, key: usize) -> &mut Origin {
        if self.origins.len() <= key {
            self.origins.resize_with(key + 1, Origin::default);
        }
        &mut self.origins[key]
    }

    /// A stream for provider `key`, or what to do for one.
    pub fn pick(&mut self, key: usize, tls: bool) -> Pick {
        let (every, most) = (self.ping.every, self.most);
        let o = self.origin(key);
        o.let_go(every, |_| true);
        // (The clock is read for such a provider only.)
        if o.http1_until
            .is_some_and(|until| crate::clock::now_ms() < until)
        {
            return Pick::Http1;
        }
        if let Some(c) = o.conns.iter().find(|c| c.has_room(MAX_STREAMS)) {
            return Pick::Ready(stream::H2Stream::on(c, tls));
        }
        o.learn_max();
        if let Some(opening) = &o.opening
            && !opening.done.get()
            && opening.waiting.get() < o.may_wait()
        {
            opening.waiting.set(opening.waiting.get() + 1);
            return Pick::Wait(opening.clone());
        }
        // A server that said it takes none: its connection, or a new one while the provider's
        // last word was that (until its own server speaks).
        let said_none = o.known_max == Some(0);
        let none_now =
            |c: &H2Conn| c.shared.peer_max.get() == 0 && (said_none || c.shared.settled.get());
        if o.conns.iter().any(none_now) {
            return Pick::Full(o.room.clone(), Crowded::TakesNone);
        }
        if o.conns.len() >= most {
            return Pick::Full(o.room.clone(), Crowded::OwnLimit);
        }
        let opening = Rc::new(Opening::default());
        o.opening = Some(opening.clone());
        Pick::Open(OpenGuard {
            key,
            opening,
            handed: Cell::new(false),
        })
    }

    /// A connection opened for provider `key`, and a stream on it for its opener. Its room is
    /// what the provider said last; where it never said, the opening ends (and those waiting
    /// for it pick again) only once the new server does.
    pub fn add(&mut self, guard: &OpenGuard, conn: H2Conn, tls: bool) -> stream::H2Stream {
        let o = self.origin(guard.key);
        o.learn_max();
        if !conn.shared.settled.get() {
            match o.known_max {
                Some(max) if max > 0 => conn.shared.peer_max.set(max),
                // Never said, or said none: those waiting wait for this one's server.
                _ => {
                    *conn.shared.opening.borrow_mut() = Some(guard.opening.clone());
                    guard.handed.set(true);
                }
            }
        }
        *conn.shared.room.borrow_mut() = Some(o.room.clone());
        let s = stream::H2Stream::on(&conn, tls);
        o.conns.push(conn);
        // It speaks HTTP/2 (again): its streams take no connection of their own.
        o.http1_until = None;
        s
    }

    /// Let provider `key`'s connections go (its slot now names another provider; streams on
    /// them run to their end).
    pub fn forget(&mut self, key: usize) {
        if let Some(o) = self.origins.get_mut(key) {
            *o = Origin::default();
        }
    }

    /// Provider `key` speaks HTTP/1.1 (its TLS chose it).
    pub fn speaks_http1(&mut self, key: usize) {
        self.origin(key).http1_until = Some(crate::clock::now_ms() + HTTP1_RECHECK_MS);
    }

    /// End an opening (it is no longer what new requests wait for).
    fn end(&mut self, guard: &OpenGuard) {
        let o = self.origin(guard.key);
        if o.opening
            .as_ref()
            .is_some_and(|x| Rc::ptr_eq(x, &guard.opening))
        {
            o.opening = None;
        }
        guard.opening.finish();
    }

    /// Close connections that carried no stream for `idle_ms` (run on a tick).
    pub fn sweep(&mut self, now_ms: u64, idle_ms: u64) {
        for o in &mut self.origins {
            o.let_go(self.ping.every, |c| {
                c.link.expire_left(now_ms);
                let s = &c.shared;
                s.open.get() > 0 || now_ms.saturating_sub(s.idle_since_ms.get()) < idle_ms
            });
        }
    }

    /// Whether a provider on this core is reached over HTTP/1.1 although set to HTTP/2 where
    /// offered (its TLS chose HTTP/1.1, or its server required it): each of its streams then
    /// takes a descriptor of its own (`state::conn_caps`).
    pub fn any_http1(&self) -> bool {
        self.origins.iter().any(|o| o.http1_until.is_some())
    }

    /// Connections open, and streams on them (for the metrics).
    pub fn counts(&self) -> (usize, usize) {
        self.origins
            .iter()
            .flat_map(|o| &o.conns)
            .fold((0, 0), |(c, s), x| (c + 1, s + x.shared.open.get()))
    }

    pub fn clear(&mut self) {
        self.origins.clear();
    }
}

/// Ends its opening when dropped; the pool is the core's (`RefCell`, never borrowed across an
/// await).
pub struct Opener<'p> {
    pub pool: &'p RefCell<H2Pool>,
    pub guard: OpenGuard,
}

impl Drop for Opener<'_> {
    fn drop(&mut self) {
        // Handed to the connection it opened, which ends it once its server says how many
        // streams it takes ([`H2Pool::add`]).
        if self.guard.handed.get() {
            return;
        }
        if let Ok(mut p) = self.pool.try_borrow_mut() {
            p.end(&self.guard);
        } else {
            self.guard.opening.finish();
        }
    }
}
