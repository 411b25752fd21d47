//! systemd's readiness protocol (`Type=notify`): one datagram per state change to the socket
//! `NOTIFY_SOCKET` names (`READY=1`, `RELOADING=1`, `STOPPING=1`, `STATUS=…`). Without that
//! variable (not under systemd) nothing is sent. Written here rather than pulled in: it is one
//! `sendto` on a Unix datagram socket.

use std::os::unix::net::UnixDatagram;

/// Send `state` (newline-separated `KEY=value` lines) to systemd, if it is listening.
pub fn notify(state: &str) {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    let Ok(sock) = UnixDatagram::unbound() else {
        return;
    };
    let bytes = path.as_encoded_bytes();
    // A leading '@' names a socket in the abstract namespace.
    let _ = if let Some(name) = bytes.strip_prefix(b"@") {
        use std::os::linux::net::SocketAddrExt;
        std::os::unix::net::SocketAddr::from_abstract_name(name)
            .and_then(|a| sock.send_to_addr(state.as_bytes(), &a))
    } else {
        sock.send_to(state.as_bytes(), &path)
    };
}

/// `RELOADING=1` with the monotonic time systemd wants beside it (`Type=notify-reload`
/// refuses a reload notification without it), and a status line.
pub fn reloading(status: &str) {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime fills the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    let usec = (ts.tv_sec as u64) * 1_000_000 + (ts.tv_nsec as u64) / 1_000;
    notify(&format!(
        "RELOADING=1\nMONOTONIC_USEC={usec}\nSTATUS={status}"
    ));
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_state_reaches_the_socket_systemd_names() {
        let dir = std::env::temp_dir().join(format!("ringside-notify-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join("notify.sock");
        let _ = std::fs::remove_file(&path);
        let listener = std::os::unix::net::UnixDatagram::bind(&path).expect("bind");
        // SAFETY: this test alone reads NOTIFY_SOCKET in this process's tests.
        unsafe { std::env::set_var("NOTIFY_SOCKET", &path) };
        super::notify("READY=1\nSTATUS=serving");
        // SAFETY: as above.
        unsafe { std::env::remove_var("NOTIFY_SOCKET") };
        let mut buf = [0u8; 64];
        let n = listener.recv(&mut buf).expect("recv");
        assert_eq!(&buf[..n], b"READY=1\nSTATUS=serving");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
