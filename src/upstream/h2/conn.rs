//! One HTTP/2 connection to a provider: the task that drives it (frames out as they are
//! queued, frames in as they arrive, PINGs to find it dead), and what the core's pool reads of
//! it (streams open, the server's stream limit, whether it still takes streams).

use super::super::UpStream;
use super::link::{ConnError, Link};
pub use super::shared::Shared;
use bytes::BytesMut;
use monoio::io::AsyncWriteRentExt;
use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

/// The most of a write buffer a connection keeps between bursts.
const KEEP_OUT: usize = 64 << 10;

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

/// A live connection in the pool.
pub struct H2Conn {
    pub link: Rc<Link>,
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
        !self.shared.closed.get() && self.link.usable()
    }
}

impl Drop for H2Conn {
    /// The pool let it go: it closes once its streams end.
    fn drop(&mut self) {
        self.link.release_conn();
    }
}

/// Speak HTTP/2 on `io` (its TLS chose `h2`, or `http2 = "always"` on plaintext): the
/// preface and SETTINGS are queued, and requests may follow at once, without waiting a round
/// trip for the server's SETTINGS.
pub fn start(io: UpStream, fd: std::os::fd::RawFd, ping: Ping, origin: Box<str>) -> H2Conn {
    let shared = Rc::new(Shared {
        origin,
        // Set by the pool (`H2Pool::add`) from what the provider said before, if it did.
        peer_max: Cell::new(0),
        idle_since_ms: Cell::new(crate::clock::now_ms()),
        ..Shared::default()
    });
    let link = Rc::new(Link::new(shared.clone()));
    monoio::spawn(run(io, link.clone(), ping));
    H2Conn { link, shared, fd }
}

/// Why the connection failed on `e`: the provider refusing the client certificate is marked
/// for its streams to tell (`Shared::tls_refused`).
fn failed(link: &Link, e: &std::io::Error) -> String {
    match super::super::tls::refusal(e) {
        Some(refusal) => {
            link.shared.tls_refused.set(true);
            refusal
        }
        None => format!("HTTP/2 connection: {e}"),
    }
}

/// Drive the connection until it fails or ends: write what is queued, else wait for frames,
/// for something to write, or for the PING timer.
async fn run(mut io: UpStream, link: Rc<Link>, ping: Ping) {
    let mut out = Vec::with_capacity(4096);
    let mut buf = BytesMut::new();
    let mut timer = Timer::new(ping);
    let why = loop {
        link.take_out(&mut out);
        if !out.is_empty() {
            let (r, back) = io.write_all(std::mem::take(&mut out)).await;
            // A burst's large buffer is not kept by an idle connection.
            out = if back.capacity() > KEEP_OUT {
                Vec::new()
            } else {
                back
            };
            match r {
                Ok(_) => continue,
                Err(e) => break failed(&link, &e),
            }
        }
        if link.finished() {
            // Let go with no stream left: say so before closing (best effort).
            link.say_goodbye();
            link.take_out(&mut out);
            let _ = io.write_all(std::mem::take(&mut out)).await;
            break String::new();
        }
        monoio::select! {
            r = io.read_when_ready(&mut buf) => match r {
                Ok(0) => break "HTTP/2 connection closed by the server".to_string(),
                Ok(_) => {
                    if let Err(ConnError(_, why)) = link.receive(&mut buf) {
                        // Its GOAWAY goes before the socket closes.
                        link.take_out(&mut out);
                        let _ = io.write_all(std::mem::take(&mut out)).await;
                        break format!("HTTP/2 protocol error: {why}");
                    }
                }
                Err(e) => break failed(&link, &e),
            },
            _ = std::future::poll_fn(|cx| link.poll_out(cx)) => {}
            _ = timer.sleep.as_mut() => {
                if !timer.fired(&link) {
                    break "HTTP/2 connection: no answer to a PING".to_string();
                }
            }
        }
    };
    if !why.is_empty() {
        link.lost(&why);
    }
    link.shared.closed.set(true);
    link.shared.settle();
}

/// The PING timer: a PING every `every`, its answer due within `wait`.
struct Timer {
    ping: Ping,
    sleep: std::pin::Pin<Box<monoio::time::Sleep>>,
    /// The next firing checks the last PING's answer.
    checking: bool,
}

impl Timer {
    fn new(ping: Ping) -> Timer {
        Timer {
            ping,
            sleep: Box::pin(monoio::time::sleep(ping.every)),
            checking: false,
        }
    }

    /// Returns false when the connection is lost (a PING went unanswered).
    fn fired(&mut self, link: &Link) -> bool {
        let now = monoio::time::Instant::now();
        if self.checking {
            if link.ping_state() != super::link::PingState::Idle {
                link.lost("no answer to a PING");
                return false;
            }
            self.checking = false;
            let rest = self.ping.every.saturating_sub(self.ping.wait);
            self.sleep.as_mut().reset(now + rest);
            return true;
        }
        link.ping_due();
        self.checking = true;
        self.sleep.as_mut().reset(now + self.ping.wait);
        true
    }
}
