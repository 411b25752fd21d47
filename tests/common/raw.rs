//! Raw sockets for the tests that need bytes on the wire as they are: a scripted upstream,
//! a client that writes and reads by hand, a client from another loopback address.

use super::T;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// A raw upstream that answers every request with the same bytes, counting connections.
pub struct RawUpstream {
    pub addr: SocketAddr,
    pub connections: Arc<AtomicUsize>,
    /// Every request body it read, in order.
    pub bodies: Arc<std::sync::Mutex<Vec<Vec<u8>>>>,
    /// Every request head it read (lowercased), in order.
    pub heads: Arc<std::sync::Mutex<Vec<String>>>,
}

/// `close_after`: close the socket after each answer (without saying so in the head).
pub fn raw_upstream(response: Vec<u8>, close_after: bool) -> RawUpstream {
    scripted_upstream(move |s| s.write_all(&response).is_ok() && !close_after)
}

/// A raw upstream that reads each request (head and Content-Length body) and lets `answer`
/// write what it likes; the connection ends when `answer` returns false. Counts connections.
pub fn scripted_upstream(
    answer: impl Fn(&mut TcpStream) -> bool + Send + Sync + 'static,
) -> RawUpstream {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("addr");
    let connections = Arc::new(AtomicUsize::new(0));
    let c2 = connections.clone();
    let bodies = Arc::new(std::sync::Mutex::new(Vec::new()));
    let b2 = bodies.clone();
    let heads = Arc::new(std::sync::Mutex::new(Vec::new()));
    let h2 = heads.clone();
    let answer = Arc::new(answer);
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            c2.fetch_add(1, Ordering::SeqCst);
            let answer = answer.clone();
            let bodies = b2.clone();
            let heads = h2.clone();
            std::thread::spawn(move || {
                let _ = s.set_read_timeout(Some(Duration::from_secs(30)));
                let mut buf = Vec::new();
                let mut tmp = [0u8; 4096];
                loop {
                    // Read one request head and its Content-Length body.
                    let Some(end) = find(&buf, b"\r\n\r\n") else {
                        match s.read(&mut tmp) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&tmp[..n]),
                        }
                        continue;
                    };
                    let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
                    let len: usize = head
                        .lines()
                        .find_map(|l| {
                            l.strip_prefix("content-length:")
                                .map(|v| v.trim().parse().unwrap_or(0))
                        })
                        .unwrap_or(0);
                    while buf.len() < end + 4 + len {
                        match s.read(&mut tmp) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&tmp[..n]),
                        }
                    }
                    let body = buf[end + 4..end + 4 + len].to_vec();
                    bodies.lock().unwrap_or_else(|e| e.into_inner()).push(body);
                    heads.lock().unwrap_or_else(|e| e.into_inner()).push(head);
                    buf.drain(..end + 4 + len);
                    if !answer(&mut s) {
                        return;
                    }
                }
            });
        }
    });
    RawUpstream {
        addr,
        connections,
        bodies,
        heads,
    }
}

pub fn find(h: &[u8], n: &[u8]) -> Option<usize> {
    h.windows(n.len()).position(|w| w == n)
}

/// Open a raw client connection to send hand-made bytes.
pub fn raw_client(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect_timeout(&addr, T).expect("connect");
    s.set_read_timeout(Some(T)).expect("timeout");
    s
}

pub fn read_all(mut s: TcpStream) -> Vec<u8> {
    let mut v = Vec::new();
    let _ = s.read_to_end(&mut v);
    v
}

/// Read from `s` until what arrived ends with `end` (a chunked body's last chunk, a trailer);
/// panics if the connection closes first, with what came.
pub fn read_until_end(s: &mut std::net::TcpStream, end: &[u8]) -> Vec<u8> {
    use std::io::Read;
    let mut got = Vec::new();
    let mut tmp = [0u8; 4096];
    while !got.ends_with(end) {
        let n = s.read(&mut tmp).expect("read");
        assert!(
            n > 0,
            "connection closed: {}",
            String::from_utf8_lossy(&got)
        );
        got.extend_from_slice(&tmp[..n]);
    }
    got
}

/// A connection to `to` from the loopback address `from` (127.0.0.2 is this host too).
pub fn connect_from(from: [u8; 4], to: SocketAddr) -> TcpStream {
    use std::os::fd::FromRawFd;
    let SocketAddr::V4(to) = to else {
        panic!("IPv4 expected")
    };
    let sockaddr = |ip: [u8; 4], port: u16| libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes(ip),
        },
        sin_zero: [0; 8],
    };
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: a fresh socket of our own, bound and connected with sockaddr_in values we own;
    // the descriptor is handed to the TcpStream, which closes it.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
        assert!(fd >= 0, "socket");
        let local = sockaddr(from, 0);
        assert_eq!(libc::bind(fd, (&raw const local).cast(), len), 0, "bind");
        let remote = sockaddr(to.ip().octets(), to.port());
        assert_eq!(
            libc::connect(fd, (&raw const remote).cast(), len),
            0,
            "connect"
        );
        let s = TcpStream::from_raw_fd(fd);
        s.set_read_timeout(Some(T)).expect("timeout");
        s
    }
}
