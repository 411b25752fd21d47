//! Reads and writes that never wait: one non-blocking syscall on a socket that readiness said
//! is ready. A held stream's event goes upstream socket → core's buffer → client socket inside
//! one poll of its task, so the buffer is back in the pool before the task sleeps again; an
//! io_uring read or write would hold it across a trip through the ring, and a burst of events
//! on thousands of streams would hold thousands of buffers at once (HAProxy's model: a buffer
//! only while data is in flight). Only a write the client's socket cannot take whole waits,
//! and the readiness wait before a receive ([`readable`]) holds no buffer.

use bytes::BytesMut;
use std::io;
use std::os::fd::RawFd;

/// Wait until `s` is readable: the wait before every [`recv`]. On epoll, monoio keeps a
/// socket's last readiness until one of its own operations finds the socket empty, and our
/// receives are not its operations: an exact wait (`relaxed = false`) checks with `poll(2)` when it starts, which finds the stale
/// readiness and clears it, and again when epoll wakes it. The second check only repeats what
/// epoll has just said, so the wait polls the exact one once (the check and the clearing)
/// and then waits relaxed: one `poll(2)` per event instead of two. A readiness that is stale
/// all the same (rare) makes the caller's receive find nothing, and its next wait checks
/// again. io_uring's readiness is exact either way.
pub async fn readable(s: &monoio::net::TcpStream) -> std::io::Result<()> {
    if !monoio::utils::is_legacy() {
        return s.readable(false).await;
    }
    {
        let mut exact = std::pin::pin!(s.readable(false));
        let first = std::future::poll_fn(|cx| {
            std::task::Poll::Ready(match exact.as_mut().poll(cx) {
                std::task::Poll::Ready(r) => Some(r),
                std::task::Poll::Pending => None,
            })
        })
        .await;
        if let Some(r) = first {
            return r;
        }
    }
    s.readable(true).await
}

/// Receive what the socket holds into `buf`'s spare capacity, without waiting.
/// `Ok(Some(0))` is the peer's EOF; `Ok(None)`: nothing there after all (a stale readiness).
pub fn recv(fd: RawFd, buf: &mut BytesMut) -> io::Result<Option<usize>> {
    let spare = buf.spare_capacity_mut();
    if spare.is_empty() {
        return Err(io::Error::other("recv into a full buffer"));
    }
    // SAFETY: the memory is `buf`'s reserved spare capacity, `spare.len()` bytes long.
    let n = unsafe { recv_raw(fd, spare.as_mut_ptr().cast(), spare.len()) }?;
    if let Some(n) = n {
        // SAFETY: the kernel initialised the first `n` bytes of the spare capacity.
        unsafe { buf.set_len(buf.len() + n) };
    }
    Ok(n)
}

/// [`recv`] into `len` bytes at `ptr`.
///
/// # Safety
/// `ptr` must be valid for writes of `len` bytes, and `fd` a socket the caller owns for the
/// duration of the call.
unsafe fn recv_raw(fd: RawFd, ptr: *mut libc::c_void, len: usize) -> io::Result<Option<usize>> {
    loop {
        // SAFETY: the caller's contract: the kernel writes at most `len` bytes at `ptr`.
        let n = unsafe { libc::recv(fd, ptr, len, libc::MSG_DONTWAIT) };
        if n >= 0 {
            return Ok(Some(n as usize));
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::WouldBlock => return Ok(None),
            io::ErrorKind::Interrupted => continue,
            _ => return Err(e),
        }
    }
}

/// [`recv`] into `buf`: the TLS layer's records go into the core's scratch buffer
/// (`upstream::tls_stream`). `Ok(Some(0))` is the peer's EOF; `Ok(None)`: nothing there.
pub fn recv_slice(fd: RawFd, buf: &mut [u8]) -> io::Result<Option<usize>> {
    if buf.is_empty() {
        return Err(io::Error::other("recv into a full buffer"));
    }
    // SAFETY: `buf` is valid for writes of its length; the fd is the caller's socket.
    unsafe { recv_raw(fd, buf.as_mut_ptr().cast(), buf.len()) }
}

/// Send as much of `data` as the socket takes now; `Ok(0)` when it takes nothing.
/// `MSG_NOSIGNAL`: a client that closed is an error here, never a SIGPIPE.
pub fn send(fd: RawFd, data: &[u8]) -> io::Result<usize> {
    send_then(fd, data, Push::Now)
}

/// When the kernel sends what a [`send_then`] gave it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Push {
    /// At once (`TCP_NODELAY` is set on client sockets): one segment per write.
    Now,
    /// With what comes next (`MSG_MORE`): the kernel holds a partial segment until more data
    /// fills it, a later write pushes, or about 200 ms pass. Fewer segments and fewer wake-ups
    /// of the peer, each write held meanwhile.
    WithNext,
}

/// [`send`], saying when the kernel should push the bytes out.
pub fn send_then(fd: RawFd, data: &[u8], push: Push) -> io::Result<usize> {
    let more = match push {
        Push::Now => 0,
        Push::WithNext => libc::MSG_MORE,
    };
    if data.is_empty() {
        return Ok(0);
    }
    loop {
        // SAFETY: `fd` is a socket the caller owns for the duration of the call; the kernel
        // only reads `data`.
        let n = unsafe {
            libc::send(
                fd,
                data.as_ptr().cast(),
                data.len(),
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL | more,
            )
        };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::WouldBlock => return Ok(0),
            io::ErrorKind::Interrupted => continue,
            _ => return Err(e),
        }
    }
}

/// Make closing `fd` send a reset instead of a FIN (`SO_LINGER` 0), as a crashed or reset peer
/// would: the simulator's reset fault and tests of how a reset is seen.
pub fn reset_on_close(fd: RawFd) -> io::Result<()> {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: setsockopt on a descriptor the caller owns, with a correctly sized `linger`.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&raw const linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;

    #[test]
    fn receives_what_is_there_and_says_when_nothing_is() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let mut client =
            std::net::TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let (server, _) = listener.accept().expect("accept");
        let mut buf = BytesMut::with_capacity(64);
        assert_eq!(recv(server.as_raw_fd(), &mut buf).expect("recv"), None);
        client.write_all(b"data: {}\n\n").expect("write");
        assert_eq!(recv_soon(&server, &mut buf), Some(10));
        assert_eq!(&buf[..], b"data: {}\n\n");
        assert_eq!(send(server.as_raw_fd(), b"ok").expect("send"), 2);
        let mut ok = [0u8; 2];
        std::io::Read::read_exact(&mut client, &mut ok).expect("read");
        assert_eq!(&ok, b"ok");
        drop(client);
        assert_eq!(recv_soon(&server, &mut buf), Some(0));
    }

    /// `recv` until loopback has delivered something (bounded: a second).
    fn recv_soon(server: &std::net::TcpStream, buf: &mut BytesMut) -> Option<usize> {
        for _ in 0..1000 {
            if let Some(n) = recv(server.as_raw_fd(), buf).expect("recv") {
                return Some(n);
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        None
    }

    #[test]
    fn a_full_client_socket_takes_nothing_and_does_not_block() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let _client =
            std::net::TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let (server, _) = listener.accept().expect("accept");
        let chunk = vec![b'x'; 64 * 1024];
        let mut total = 0usize;
        // The client never reads: the socket fills up and then takes nothing.
        loop {
            let n = send(server.as_raw_fd(), &chunk).expect("send");
            if n == 0 {
                break;
            }
            total += n;
            assert!(total < 1 << 30, "the socket never filled");
        }
        assert!(total > 0);
    }

    #[test]
    fn recv_slice_says_when_nothing_is_there() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let mut client =
            std::net::TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let (server, _) = listener.accept().expect("accept");
        let mut buf = [0u8; 16];
        assert_eq!(
            recv_slice(server.as_raw_fd(), &mut buf).expect("recv"),
            None
        );
        assert!(recv_slice(server.as_raw_fd(), &mut []).is_err());
        client.write_all(b"record").expect("write");
        let mut got = None;
        for _ in 0..1000 {
            got = recv_slice(server.as_raw_fd(), &mut buf).expect("recv");
            if got.is_some() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(got, Some(6));
        assert_eq!(&buf[..6], b"record");
        drop(client);
        for _ in 0..1000 {
            if let Some(n) = recv_slice(server.as_raw_fd(), &mut buf).expect("recv") {
                assert_eq!(n, 0, "EOF");
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        panic!("no EOF seen");
    }
}
