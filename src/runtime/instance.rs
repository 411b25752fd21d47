//! One live instance per data dir, and a start that waits out a dying one.
//!
//! A live Ringside holds an exclusive lock on `data_dir/ringside.lock` for its whole life; the
//! kernel lets go of it the moment the process is gone, however it ended. So a second start
//! beside a live instance is refused at once, and a start right after a crash (systemd's
//! `Restart=`) finds the lock free. The dying process's sockets can outlive it briefly
//! (io_uring tears down asynchronously): a port that still answers is asked again for a few
//! seconds before it counts as another process's, instead of refusing the restart.

use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// Held for the life of the process.
pub struct InstanceLock {
    _file: std::fs::File,
}

/// Take the data dir's instance lock, or say which live instance holds it.
pub(super) fn lock(data_dir: &str) -> Result<InstanceLock, String> {
    std::fs::create_dir_all(data_dir)
        .map_err(|e| format!("server.data_dir {data_dir} cannot be created: {e}"))?;
    let path = std::path::Path::new(data_dir).join("ringside.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&path)
        .map_err(|e| format!("{} cannot be opened: {e}", path.display()))?;
    // SAFETY: flock(2) on a descriptor this function owns.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        return Err(if e.kind() == std::io::ErrorKind::WouldBlock {
            format!(
                "another Ringside is running with server.data_dir {data_dir} (it holds {}); stop it first, or give this one its own data_dir",
                path.display()
            )
        } else {
            format!("{} cannot be locked: {e}", path.display())
        });
    }
    Ok(InstanceLock { _file: file })
}

/// How long a port that still answers may take to fall silent (a dying instance's sockets).
const DYING_FOR_UP_TO: Duration = Duration::from_secs(5);

/// Refuse to start on a port another process serves (with SO_REUSEPORT the kernel would
/// silently split traffic between us and it), after waiting out a dying instance.
pub(super) fn ports_free(ports: &[(&str, SocketAddr)]) -> Result<(), String> {
    let until = Instant::now() + DYING_FOR_UP_TO;
    loop {
        let busy = ports.iter().find(|(_, a)| answers(*a));
        let Some((what, addr)) = busy else {
            return Ok(());
        };
        if Instant::now() >= until {
            return Err(format!(
                "server.{what} {addr} is already in use by another process"
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn answers(addr: SocketAddr) -> bool {
    if addr.port() == 0 {
        return false;
    }
    let probe = if addr.ip().is_unspecified() {
        SocketAddr::from(([127, 0, 0, 1], addr.port()))
    } else {
        addr
    };
    std::net::TcpStream::connect_timeout(&probe, Duration::from_millis(200)).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_instance_on_the_same_data_dir_is_refused_until_the_first_is_gone() {
        let dir = std::env::temp_dir().join(format!("ringside-lock-{}", std::process::id()));
        let d = dir.to_string_lossy().to_string();
        let first = lock(&d).expect("first");
        let err = lock(&d).err().expect("second refused");
        assert!(err.contains("another Ringside is running"), "{err}");
        drop(first);
        assert!(lock(&d).is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
