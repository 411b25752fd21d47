//! TLS on the data port (`[server] tls_cert_file`, `tls_key_file`): a terminator inside the
//! process. Each TLS client's handshake is done here; its plaintext then goes through one end
//! of a local socket pair, and the other end is served as any plaintext client is
//! (`serve_client`, with the client's real address). The request path stays the one the
//! benchmarks measure: TLS costs a pair of local sockets and two copies per connection, paid
//! only by TLS clients.
//!
//! Two tasks move bytes: the client's records in, decrypted, to the pair (`inbound`), and the
//! answers from the pair, encrypted, to the client (`outbound`). They share the rustls
//! connection (never borrowed across an await). The served side closing ends both; the
//! client closing (or a bad record) closes the pair, which the request path sees as its
//! client gone.

use crate::state::core::Core;
use monoio::io::{AsyncReadRent, AsyncWriteRent, AsyncWriteRentExt, Splitable};
use monoio::net::TcpStream;
use monoio::net::tcp::{TcpOwnedReadHalf, TcpOwnedWriteHalf};
use rustls::ServerConnection;
use std::cell::RefCell;
use std::io::{Read, Write};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

/// Read size on either side.
const CHUNK: usize = 16 * 1024;

/// Serve one TLS client: handshake (within the head timeout), then the plaintext path.
pub async fn serve(
    core: Rc<Core>,
    tcp: TcpStream,
    peer: std::net::IpAddr,
    config: Arc<rustls::ServerConfig>,
) {
    // The handshake holds a place under the connection caps, as a plaintext client's first
    // head does: a flood of handshakes from one address is refused at its share. (The place
    // is given back for the plaintext side's own.)
    let Ok(place) = super::admit(&core, peer) else {
        return;
    };
    let _ = tcp.set_nodelay(true);
    let limit = Duration::from_millis(core.generation().config.limits.header_read_timeout_ms);
    let accept = crate::http::server_tls::ServerTls::accept(tcp, config);
    let handshake = monoio::time::timeout(limit, accept).await;
    let ok = matches!(handshake, Ok(Ok(_)));
    core.metrics.client_tls[usize::from(!ok)].fetch_add(1, Relaxed);
    drop(place);
    let Ok(Ok(tls)) = handshake else {
        return;
    };
    let Ok((outer, inner)) = pair() else {
        return;
    };
    let served = crate::proxy::serve_client(core.clone(), inner, peer);
    monoio::spawn(crate::contain::contained(
        crate::clock::per_poll(served),
        &crate::metrics::TASK_PANICS,
        Some(core.id),
    ));
    let (tcp, conn, incoming) = tls.into_parts();
    let conn = Rc::new(RefCell::new(conn));
    let (tcp_rd, tcp_wr) = tcp.into_split();
    let (pair_rd, pair_wr) = outer.into_split();
    let (done, served_closed) = futures_channel::oneshot::channel::<()>();
    let c = conn.clone();
    monoio::spawn(async move {
        outbound(c, pair_rd, tcp_wr).await;
        let _ = done.send(());
    });
    // The client done (its answers still owed go out on their own task until the served
    // side closes), or the served side closed (the client's next bytes have nowhere to
    // go: its read is dropped).
    monoio::select! {
        _ = inbound(conn, incoming, tcp_rd, pair_wr) => {},
        _ = served_closed => {},
    }
}

/// A connected pair of local stream sockets, as sockets monoio serves.
fn pair() -> std::io::Result<(TcpStream, TcpStream)> {
    use std::os::fd::FromRawFd;
    let mut fds = [0; 2];
    let kind = libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK;
    // SAFETY: socketpair(2) writes two descriptors into the array we own.
    if unsafe { libc::socketpair(libc::AF_UNIX, kind, 0, fds.as_mut_ptr()) } != 0 {
        let e = std::io::Error::last_os_error();
        crate::fd_limit::noted_exhaustion(&e);
        return Err(e);
    }
    // SAFETY: each descriptor is a fresh, open stream socket owned by nothing else. Every
    // operation the request path makes on it (read, write, recv with MSG_PEEK, shutdown) is a
    // stream socket's, and it is served by the descriptor, never asked for a TCP address.
    let (a, b) = unsafe {
        (
            std::net::TcpStream::from_raw_fd(fds[0]),
            std::net::TcpStream::from_raw_fd(fds[1]),
        )
    };
    Ok((TcpStream::from_std(a)?, TcpStream::from_std(b)?))
}

/// The client's records in: decrypted, written to the pair. Ends at the client's end (or its
/// close_notify, or a bad record), closing the pair's writing side.
async fn inbound(
    conn: Rc<RefCell<ServerConnection>>,
    mut incoming: Vec<u8>,
    mut tcp: TcpOwnedReadHalf,
    mut pair: TcpOwnedWriteHalf,
) {
    let mut buf = vec![0u8; CHUNK];
    while let Some((plain, closed)) = take_records(&conn, &mut incoming) {
        if !plain.is_empty() && pair.write_all(plain).await.0.is_err() {
            return;
        }
        if closed {
            break;
        }
        let (r, b) = tcp.read(buf).await;
        buf = b;
        match r {
            Ok(0) | Err(_) => break,
            Ok(n) => incoming.extend_from_slice(&buf[..n]),
        }
    }
    let _ = pair.shutdown().await;
}

/// Give rustls what it takes of `incoming` and read the plaintext out, and whether the
/// client said close_notify; `None` when its records are bad.
fn take_records(
    conn: &RefCell<ServerConnection>,
    incoming: &mut Vec<u8>,
) -> Option<(Vec<u8>, bool)> {
    let mut c = conn.borrow_mut();
    let mut closed = false;
    while !incoming.is_empty() {
        let mut at = &incoming[..];
        let taken = c.read_tls(&mut at).ok()?;
        incoming.drain(..taken);
        closed |= c.process_new_packets().ok()?.peer_has_closed();
        if taken == 0 {
            break;
        }
    }
    // Also what was decrypted before (the handshake's last read can carry the first request
    // with the client's Finished).
    let mut plain = Vec::new();
    let mut chunk = [0u8; 4096];
    while let Ok(n) = c.reader().read(&mut chunk) {
        if n == 0 {
            break;
        }
        plain.extend_from_slice(&chunk[..n]);
    }
    Some((plain, closed))
}

/// The answers out: read from the pair, encrypted, written to the client. At the pair's end
/// the client is told close_notify and the socket shut.
async fn outbound(
    conn: Rc<RefCell<ServerConnection>>,
    mut pair: TcpOwnedReadHalf,
    mut tcp: TcpOwnedWriteHalf,
) {
    let mut buf = vec![0u8; CHUNK];
    loop {
        let (r, b) = pair.read(buf).await;
        buf = b;
        let n = match r {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let Ok(records) = encrypt(&conn, &buf[..n]) else {
            break;
        };
        if tcp.write_all(records).await.0.is_err() {
            return;
        }
    }
    let records = {
        let mut c = conn.borrow_mut();
        c.send_close_notify();
        let mut out = Vec::new();
        let _ = c.write_tls(&mut out);
        out
    };
    // A client that reads nothing is not waited for past the head timeout's scale.
    let _ = monoio::time::timeout(Duration::from_secs(10), tcp.write_all(records)).await;
    let _ = tcp.shutdown().await;
}

/// `plain` as records (and any records rustls owes the client besides).
fn encrypt(conn: &RefCell<ServerConnection>, mut plain: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut c = conn.borrow_mut();
    let mut out = Vec::with_capacity(plain.len() + 64);
    while !plain.is_empty() {
        let n = c.writer().write(plain)?;
        plain = &plain[n..];
        while c.wants_write() {
            c.write_tls(&mut out)?;
        }
    }
    Ok(out)
}
