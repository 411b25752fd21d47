//! One client connection: admitted under the connection caps, then heads read and requests
//! handed to the request driver until the client closes, errs or the core drains; a closing
//! connection lingers so that an early answer is not destroyed by a reset.

pub mod tls;

use super::request;
use super::respond::respond_error;
use super::watch::{Readiness, readiness};
use crate::dialect::{ApiError, Dialect};
use crate::http::io::{READ_CHUNK, ReadError, read_request_head};
use crate::state::conn_caps::{Refused, Ticket};
use crate::state::core::Core;
use bytes::BytesMut;
use monoio::io::{AsyncWriteRent, Splitable};
use monoio::net::TcpStream;
use monoio::net::tcp::{TcpOwnedReadHalf, TcpOwnedWriteHalf};
use std::os::fd::{AsRawFd, RawFd};
use std::rc::Rc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

struct OpenConn<'a>(&'a Core);

impl Drop for OpenConn<'_> {
    fn drop(&mut self) {
        self.0.open_conns.set(self.0.open_conns.get() - 1);
        self.0.metrics.open_client_conns.fetch_sub(1, Relaxed);
    }
}

/// Serve one client connection until it closes, errs, or the core drains. The socket is split
/// before the task's future is made: an `async fn`'s arguments stay in its state for its
/// whole life, and a held stream's task should not keep a second copy of the stream.
pub fn serve_client(
    core: Rc<Core>,
    stream: TcpStream,
    peer: std::net::IpAddr,
) -> impl std::future::Future<Output = ()> {
    let _ = stream.set_nodelay(true);
    let fd = stream.as_raw_fd();
    let (rd, wr) = stream.into_split();
    serve(core, rd, wr, fd, peer)
}

/// A place under the data port's connection caps for a client at `peer` (a plain function:
/// nothing it reads stays in the connection's task). A TLS client holds one through its
/// handshake too (`tls`).
pub(super) fn admit(core: &Core, peer: std::net::IpAddr) -> Result<Ticket<'_>, Refused> {
    let generation = core.generation();
    let keyed = !generation.config.clients.is_open() || core.shared.managed_keys.load(Relaxed);
    let trusted = (generation.config.server.trusted_proxies.iter()).any(|n| n.contains(&peer));
    let up = crate::state::descriptor_cap::upstream_use(
        &core.shared.metrics,
        generation.http1_by_config,
    );
    core.shared.conn_caps.admit(Some(peer), keyed, trusted, up)
}

#[allow(clippy::manual_async_fn)] // an async block: see `crate::proxy`, *Arguments in place*
fn serve(
    core: Rc<Core>,
    mut rd: TcpOwnedReadHalf,
    mut wr: TcpOwnedWriteHalf,
    fd: RawFd,
    peer: std::net::IpAddr,
) -> impl std::future::Future<Output = ()> {
    async move {
        // Over the caps the connection is closed at once: nothing is read or kept for it.
        let Ok(ticket) = admit(&core, peer) else {
            return;
        };
        // (A held stream's client watch, still armed when it ended, is the next head's wait.)
        let link = super::exchange::ClientConn {
            ticket,
            fd,
            next_wait: std::cell::Cell::new(None),
        };
        core.open_conns.set(core.open_conns.get() + 1);
        core.metrics.open_client_conns.fetch_add(1, Relaxed);
        let _guard = OpenConn(&core);
        // No buffer until the first bytes arrive (`next_bytes`): a burst of new connections, or
        // ones that connect and wait, pin none.
        let mut buf = BytesMut::new();
        let mut served: u64 = 0;
        loop {
            if core.drain.is_draining() && buf.is_empty() {
                break;
            }
            // The limits are read once per request (the newest generation's), in a block of
            // their own: kept in the loop's locals, they took a place in every held stream's
            // task.
            let read = {
                let w = HeadWait::of(&core);
                let wait = link.next_wait.take();
                if !next_request_bytes(&core, &rd, fd, &mut buf, w.idle, wait).await {
                    break;
                }
                read_request_head(&mut rd, &mut buf, w.limits, w.idle, w.timeout)
            };
            // One statement: what the read returned is not kept in the task's state beyond it.
            // A bad head's answer and linger are one await: across two, the read's result took a
            // place of its own in every held stream's task.
            let mut head = match monoio::select! {
                h = read => Some(h),
                _ = core.drain.wait() => None,
            } {
                None | Some(Err(ReadError::Closed | ReadError::Io(_))) => break,
                Some(Ok(h)) => h,
                Some(Err(e)) => return refuse_bad_head(&core, e, &mut rd, &mut wr, &mut buf).await,
            };
            served += 1;
            let max = core.generation().config.limits.max_requests_per_connection;
            let last = max > 0 && served >= max;
            let conn = super::exchange::Conn {
                link: &link,
                last_request: last,
            };
            let keep = request::handle(&core, &mut head, &mut rd, &mut wr, &mut buf, conn).await;
            if !keep {
                drop(link.next_wait.take());
                linger(&core, &mut rd, &mut wr, &mut buf).await;
                return;
            }
        }
        let _ = wr.shutdown().await;
    }
}

/// How a request head is waited for and read: the configuration's limits.
struct HeadWait {
    limits: crate::http::HeadLimits,
    /// Keep-alive idle time before a request's first byte.
    idle: Duration,
    /// The longest a request head may take once it started.
    timeout: Duration,
}

impl HeadWait {
    fn of(core: &Core) -> HeadWait {
        let g = core.generation();
        let limits = &g.config.limits;
        HeadWait {
            limits: crate::http::HeadLimits {
                max_head_bytes: limits.max_head_bytes,
                max_headers: limits.max_headers,
            },
            idle: Duration::from_millis(limits.keepalive_idle_ms),
            timeout: Duration::from_millis(limits.header_read_timeout_ms),
        }
    }
}

/// Answer a request head that could not be read, then close the connection.
async fn refuse_bad_head(
    core: &Core,
    e: ReadError,
    rd: &mut TcpOwnedReadHalf,
    wr: &mut TcpOwnedWriteHalf,
    buf: &mut BytesMut,
) {
    answer_bad_head(core, &e, wr).await;
    linger(core, rd, wr, buf).await;
}

/// A request head that could not be read: 408 or 400 (431 for one too large), counted.
async fn answer_bad_head(core: &Core, e: &ReadError, wr: &mut TcpOwnedWriteHalf) {
    let (status, code, msg) = match e {
        ReadError::Timeout => (
            408,
            "request_timeout",
            "the request head was not received in time".to_string(),
        ),
        ReadError::Head(h) => (h.status(), h.code(), h.message()),
        _ => (
            400,
            "malformed_request",
            "the connection closed in the middle of a request head".to_string(),
        ),
    };
    let id = core.next_request_id();
    let err = ApiError::new(status, code, msg).should_retry(false);
    let _ = respond_error(wr, Dialect::OpenAi, &err, &id, false).await;
    core.metrics
        .request(core.generation().routes.other_index, status);
    core.metrics.finalized.fetch_add(1, Relaxed);
}

/// Before a head is read. A connection whose last request was a long one gave its buffer back:
/// it waits for the next request with none (a keep-alive connection may idle for minutes), on
/// the wait its client watch left armed (`handed`) if there is one. One whose client watch
/// caught the first bytes of the next request most likely has the rest there too: taken now,
/// the pooled buffer is handed back before the task waits again (a stream request gives it
/// back when it starts). False: the connection is over.
async fn next_request_bytes(
    core: &Core,
    rd: &monoio::net::tcp::TcpOwnedReadHalf,
    fd: std::os::fd::RawFd,
    buf: &mut BytesMut,
    idle: Duration,
    handed: Option<Readiness>,
) -> bool {
    if buf.capacity() == 0 {
        let wait = next_bytes(rd, fd, buf, idle, handed);
        return monoio::select! {
            got = wait => got,
            _ = core.drain.wait() => false,
        };
    }
    if buf.capacity() < READ_CHUNK / 4 {
        crate::http::io::make_room(buf);
        return crate::http::nowait::recv(fd, buf).is_ok();
    }
    true
}

/// Wait, holding no buffer, until the client sends its next bytes (readiness: `handed`, or
/// one armed here), then receive them into a pooled buffer without waiting (`http::nowait`).
/// False: the client closed or failed, or sent nothing for `idle` (closed, no 408, as in
/// `read_request_head`).
async fn next_bytes(
    rd: &monoio::net::tcp::TcpOwnedReadHalf,
    fd: std::os::fd::RawFd,
    buf: &mut BytesMut,
    idle: Duration,
    mut handed: Option<Readiness>,
) -> bool {
    let deadline = crate::clock::instant() + idle;
    loop {
        let wait = handed.take().unwrap_or_else(|| readiness(rd));
        match crate::timer::timeout_at(deadline, wait).await {
            Ok(Ok(())) => {}
            _ => return false,
        }
        crate::http::io::make_room(buf);
        match crate::http::nowait::recv(fd, buf) {
            Ok(Some(n)) => return n > 0,
            Ok(None) => crate::http::buffers::give_back(std::mem::take(buf)),
            Err(_) => return false,
        }
    }
}

/// The longest a closing connection keeps reading what its client still sends.
const LINGER_TOTAL: Duration = Duration::from_secs(10);
/// ... and the longest it waits for the next byte of it: nginx's `lingering_timeout`. (2 s
/// was too short for an SDK writing a large body on a loaded machine: the Node SDK's check of
/// a 413 saw a reset once in a full test run.)
const LINGER_IDLE: Duration = Duration::from_secs(5);

/// Close a connection that Ringside ends while its client may still be sending: an answer
/// given before the request was read to the end (413, 431, 408, 400), or `connection: close`.
/// Closing a socket with unread input makes the kernel send a reset, and a reset destroys the
/// answer still waiting in the client's receive buffer: an SDK that writes a 20 MB body before
/// it reads would see "connection reset" instead of the 413. So the answer is followed by a FIN,
/// and what the client still sends is read and thrown away until it closes, for at most
/// `LINGER_TOTAL`, `LINGER_IDLE` without a byte, or until the core drains (nginx's lingering
/// close).
async fn linger(
    core: &Core,
    rd: &mut monoio::net::tcp::TcpOwnedReadHalf,
    wr: &mut TcpOwnedWriteHalf,
    buf: &mut BytesMut,
) {
    // Let go of a large request buffer now: a lingering connection needs only a small sink.
    *buf = BytesMut::new();
    if wr.shutdown().await.is_err() {
        return;
    }
    let mut sink = BytesMut::with_capacity(READ_CHUNK);
    let end = crate::clock::instant() + LINGER_TOTAL;
    loop {
        sink.clear();
        let now = crate::clock::instant();
        if now >= end || core.drain.is_draining() {
            return;
        }
        let read = crate::timer::timeout_at(
            end.min(now + LINGER_IDLE),
            crate::http::io::read_more(rd, &mut sink),
        );
        let n = monoio::select! {
            r = read => r,
            _ = core.drain.wait() => return,
        };
        match n {
            Ok(Ok(n)) if n > 0 => {}
            _ => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The size of the future an async fn returns, read from its type: nothing is run.
    fn future_size<F, Fut>(_: F) -> usize
    where
        F: FnOnce(Rc<Core>, TcpStream, std::net::IpAddr) -> Fut,
    {
        std::mem::size_of::<Fut>()
    }

    /// Every held connection keeps one of these futures alive; its size is memory per stream.
    /// A refactor that moves a large value across an `.await` shows up here first. Measured
    /// 2026-12-01: 7,840 bytes before the request path was split into phases, 6,888 after,
    /// 5,048 once arguments were borrowed rather than moved into long-lived `async fn`s, the
    /// relay was made generic over plain and TLS bodies, and failure-only state was boxed;
    /// 4,768 (release) on 2026-12-02 once the client watch became a readiness wait, the
    /// watchdog's buckets 32-bit and an upstream TLS read boxed; 4,000 on 2026-12-03 (the
    /// path's drivers take their arguments in place, see `crate::proxy`, a bad head's two
    /// waits are one, the relay borrows its stream settings, a full client socket's write is
    /// boxed, and the route, client key and lease are each a pointer in the context); 3,480
    /// later that day (the watchdog and an HTTP/1.0 client's de-chunker boxed, as they are
    /// rare or off by default; the scanner's totals, the commit's names and instant, and the
    /// pool's empty answer no longer kept across the relay; `attempt` and `hold_stream` take
    /// their arguments in place; the relay's durations 32-bit), 3,488 once the relay's start
    /// was kept in 64-bit microseconds (a deadline may allow hours before it), 3,496 with the
    /// client watch's wait kept for the next request (`exchange::ClientConn`), 3,504 with the
    /// relay's pointer to what judging may read of the response head (`Relay::judging`),
    /// 3,512 with the client's request head lent to the relay with its body (`forward::Request`);
    /// 2026-12-04: 3,520 with an OAuth connection's refreshed token among the relay's secrets
    /// (`redact::Secrets`), 3,512 again once the relay's client descriptor was a plain one,
    /// 3,504 with the connection caps' per-address slots kept as 16-bit indices; 3,512 once the
    /// request's context came in stages (`exchange::Request`, `Admitted`, `Ctx` holding the
    /// first by reference; the model's place in the body 32-bit); 3,472 once connection slots
    /// and target places had types of their own, 32-bit (`ids::ConnId`, `ids::TargetIdx`: a
    /// candidate in 8 bytes, not 16, and a lease's connection in 4); 3,504 with translation
    /// between APIs (the request's translation session, a translated stream in the relay and
    /// its request, each boxed: 8 bytes apiece); 2026-12-05: 3,520 with a waiting stream's
    /// keep-alive in the client watch (boxed, 8 bytes), once the watch's arming timer was no
    /// longer an `Option` (8 bytes fewer); 3,520 still with tenant budgets (the tenant's quota
    /// place and budget reservation one boxed hold, 8 bytes fewer than the quota permit was;
    /// a request's cost a 32-bit count of micro-dollars in its record); 2026-12-06: 3,496 with
    /// an attempt's send time in its breaker site and the record's `waited_for` (boxed), once
    /// the site was made after the wait for admission rather than kept across it; 3,504 with
    /// the digest of the request a retry repeats (`LoopState::repeat`, to forget it once
    /// answered).
    /// The task around it adds 64 bytes: 3,520 keeps the whole task in the allocator's
    /// 3.5 KiB size class (one byte more and it takes 4 KiB per connection).
    const LIMIT: usize = 3_520;

    #[test]
    fn connection_future_size_is_bounded() {
        let size = future_size(serve_client);
        eprintln!("per-connection future: {size} bytes");
        assert!(
            size <= LIMIT,
            "the per-connection future grew to {size} bytes"
        );
        // A woken held stream's task is loaded ahead whole (`http::standing`).
        const { assert!(LIMIT + 64 <= crate::http::standing::TASK_BYTES) };
    }
}
