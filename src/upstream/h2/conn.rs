//! One HTTP/2 connection to a provider: its handshake, the task that drives it (frames in and
//! out, PINGs to find it dead while idle), and what the core's pool reads of it (streams open,
//! the server's stream limit, whether it still takes streams).

use super::super::UpStream;
use bytes::Bytes;
use monoio_http::h2::client::{Builder, SendRequest};
use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

/// Each stream's receive window: an answer of up to this many bytes never waits on a
/// `WINDOW_UPDATE` (an event stream's events are far smaller; its window is given back as each
/// is read), and at most this much of an answer waits in memory for a slow client.
const STREAM_WINDOW: u32 = 1 << 20;
/// The connection's receive window: room for many streams' answers at once.
const CONNECTION_WINDOW: u32 = 16 << 20;
/// Streams assumed allowed until the server's SETTINGS say (RFC 9113 recommends servers allow
/// at least 100): streams beyond wait in the connection rather than being refused.
const INITIAL_STREAMS: usize = 100;
/// A connection is PINGed every `every`, idle or not; without an answer within `wait` it is
/// closed, failing its streams once as a lost connection (a peer gone without a FIN, a
/// middlebox that dropped the flow), counted once, rather than each stream's own timeout
/// firing and counting apart (`[upstream] h2_ping_interval_ms`, `h2_ping_timeout_ms`).
#[derive(Clone, Copy, Debug)]
pub struct Ping {
    pub every: Duration,
    pub wait: Duration,
}

impl Ping {
    pub fn of(u: &crate::config::schema::UpstreamSection) -> Ping {
        Ping {
            every: Duration::from_millis(u.h2_ping_interval_ms),
            wait: Duration::from_millis(u.h2_ping_timeout_ms),
        }
    }
}

impl Default for Ping {
    fn default() -> Ping {
        Ping::of(&Default::default())
    }
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

/// A live connection in the pool.
pub struct H2Conn {
    pub send: SendRequest<Bytes>,
    pub shared: Rc<Shared>,
    /// The TCP socket under it.
    pub fd: std::os::fd::RawFd,
}

impl H2Conn {
    /// Whether one more stream may be opened on it: alive, not told to go away, under the
    /// server's limit and ours.
    pub fn has_room(&self, cap: usize) -> bool {
        let s = &self.shared;
        self.usable() && s.open.get() < s.peer_max.get().min(cap)
    }

    pub fn usable(&self) -> bool {
        !self.shared.closed.get() && !self.send.has_conn_error()
    }
}

/// Speak HTTP/2 on `io` (its TLS chose `h2`, or `http2 = "always"` on plaintext) and start the
/// task that drives the connection.
pub async fn start(
    io: UpStream,
    fd: std::os::fd::RawFd,
    ping: Ping,
) -> Result<H2Conn, monoio_http::h2::Error> {
    let mut b = Builder::new();
    b.initial_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .initial_max_send_streams(INITIAL_STREAMS)
        .enable_push(false);
    let (send, mut conn) = b.handshake::<UpStream, Bytes>(io).await?;
    let shared = Rc::new(Shared {
        peer_max: Cell::new(INITIAL_STREAMS),
        idle_since_ms: Cell::new(crate::clock::now_ms()),
        ..Shared::default()
    });
    let pings = conn.ping_pong();
    let s = shared.clone();
    // Moved into its task before it is first polled, and never after: once polled, its codec
    // holds a read armed at its own buffer (monoio-codec), which a move would leave dangling.
    monoio::spawn(async move {
        let run = std::future::poll_fn(|cx| {
            let r = std::pin::Pin::new(&mut conn).poll(cx);
            s.peer_max.set(conn.max_concurrent_send_streams());
            r
        });
        match pings {
            Some(p) => {
                monoio::select! {
                    _ = run => {},
                    _ = keep_alive(p, ping) => {},
                }
            }
            None => {
                let _ = run.await;
            }
        }
        s.closed.set(true);
    });
    Ok(H2Conn { send, shared, fd })
}

/// PING the connection; ends when a PING goes unanswered.
async fn keep_alive(mut pings: monoio_http::h2::PingPong, every: Ping) {
    loop {
        monoio::time::sleep(every.every).await;
        let ping = pings.ping(monoio_http::h2::Ping::opaque());
        match monoio::time::timeout(every.wait, ping).await {
            Ok(Ok(_)) => {}
            _ => return,
        }
    }
}
