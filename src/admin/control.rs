//! The local control socket: `<data_dir>/control.sock`, a Unix socket only the server's own
//! user (or root) may use. `ringside reload`, `ringside drain` and `ringside status` speak to
//! it, so that operating the server needs file permissions alone, as nginx's `-s reload` and
//! HAProxy's stats socket do: no admin token, no provider key in the operator's shell, and
//! nothing sent over the network to an address a config file names.
//!
//! The protocol is one line each way: a command (`reload`, `drain`, `status`), then one JSON
//! answer, then the connection closes. Each connection's peer is checked with `SO_PEERCRED`
//! (the socket is also created owner-only), and every command is logged with the peer's uid.

use crate::state::core::Shared;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The socket's name inside `data_dir`.
pub const SOCKET: &str = "control.sock";

/// What a client may ask.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    Reload,
    Drain,
    Status,
}

impl Command {
    pub fn parse(line: &str) -> Option<Command> {
        match line.trim() {
            "reload" => Some(Command::Reload),
            "drain" => Some(Command::Drain),
            "status" => Some(Command::Status),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Command::Reload => "reload",
            Command::Drain => "drain",
            Command::Status => "status",
        }
    }
}

/// The running socket; removed when dropped (at the end of the drain).
pub struct Control {
    path: PathBuf,
}

impl Drop for Control {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The socket's path for a data directory.
pub fn socket_path(data_dir: &str) -> PathBuf {
    Path::new(data_dir).join(SOCKET)
}

/// Listen on `<data_dir>/control.sock` (a stale socket from a process that died is replaced:
/// the data directory is this process's alone) and answer on a thread of its own.
pub fn start(shared: Arc<Shared>, data_dir: &str) -> Result<Control, String> {
    let path = socket_path(data_dir);
    if let Ok(meta) = std::fs::symlink_metadata(&path) {
        if !meta.file_type().is_socket() {
            return Err(format!(
                "{} exists and is not a socket: remove it",
                path.display()
            ));
        }
        let _ = std::fs::remove_file(&path);
    }
    let listener = UnixListener::bind(&path)
        .map_err(|e| format!("cannot create the control socket {}: {e}", path.display()))?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| format!("cannot restrict {}: {e}", path.display()))?;
    // Waited on with poll(2), then accepted without blocking: a blocked accept(2) holds a
    // descriptor number for as long as it waits, one fewer for the data port when the
    // open-file limit is reached.
    listener
        .set_nonblocking(true)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    std::thread::Builder::new()
        .name("ringside-control".into())
        .spawn(move || {
            loop {
                if !readable(&listener) {
                    continue;
                }
                if let Ok((conn, _)) = listener.accept()
                    && conn.set_nonblocking(false).is_ok()
                {
                    serve(&shared, conn);
                }
            }
        })
        .map_err(|e| format!("cannot start the control socket's thread: {e}"))?;
    Ok(Control { path })
}

/// Wait up to a second for a connection to accept on `listener`.
fn readable(listener: &UnixListener) -> bool {
    use std::os::fd::AsRawFd;
    let mut pfd = libc::pollfd {
        fd: listener.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: poll(2) on one pollfd we own, for a listener that outlives the call.
    let n = unsafe { libc::poll(&mut pfd, 1, 1_000) };
    n > 0 && pfd.revents & libc::POLLIN != 0
}

/// The uid of the process at the other end of `s`.
fn peer_uid(s: &UnixStream) -> Option<u32> {
    use std::os::fd::AsRawFd;
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: SO_PEERCRED writes at most `len` bytes into the ucred we own, on a socket we own.
    let ok = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&raw mut cred).cast(),
            &mut len,
        )
    } == 0;
    ok.then_some(cred.uid)
}

/// Whether a peer of uid `peer` may command a server running as `own`.
pub fn allowed(peer: u32, own: u32) -> bool {
    peer == own || peer == 0
}

fn serve(shared: &Arc<Shared>, mut conn: UnixStream) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
    // SAFETY: geteuid has no arguments and cannot fail.
    let own = unsafe { libc::geteuid() };
    let Some(uid) = peer_uid(&conn).filter(|&u| allowed(u, own)) else {
        let _ = writeln!(conn, r#"{{"error":"refused: not this server's user"}}"#);
        return;
    };
    let Some(command) = read_command(&conn) else {
        let _ = writeln!(
            conn,
            r#"{{"error":"unknown command: say reload, drain or status"}}"#
        );
        return;
    };
    crate::log::event(
        "info",
        "control socket: command",
        serde_json::json!({"command": command.as_str(), "peer_uid": uid}),
    );
    let before = (command == Command::Reload)
        .then(|| crate::state::audit_trail::generation(shared.current().number));
    let answer = run(shared, command);
    if command != Command::Status {
        let actor = crate::state::audit_trail::Actor::Socket { uid };
        let what = (&actor, command.as_str());
        (shared.audit_trail).record_command(shared.store, what, before, Some(answer.clone()));
    }
    let _ = writeln!(conn, "{answer}");
}

/// The command on the first line (at most 64 bytes are read).
fn read_command(conn: &UnixStream) -> Option<Command> {
    use std::io::Read;
    let mut line = String::new();
    let n = BufReader::new(conn.take(64)).read_line(&mut line).ok()?;
    (n > 0).then(|| Command::parse(&line)).flatten()
}

fn run(shared: &Arc<Shared>, command: Command) -> serde_json::Value {
    match command {
        Command::Reload => {
            let out = crate::state::reload::reload(shared, crate::state::reload::Cause::Control);
            crate::state::reload::log_outcome(&out);
            serde_json::to_value(out).unwrap_or_default()
        }
        Command::Drain => {
            // The main thread runs the drain, as for SIGTERM (`cli::serve`).
            shared.lifecycle.request_drain();
            let server = &shared.current().config.server;
            serde_json::json!({"draining": true,
                "drain_delay_ms": server.drain_delay.as_millis() as u64,
                "shutdown_grace_ms": server.shutdown_grace.as_millis() as u64})
        }
        Command::Status => serde_json::json!({
            "version": env!("CARGO_PKG_VERSION"),
            "generation": shared.current().number,
            "draining": shared.lifecycle.is_draining(),
            "listen": shared.current().config.server.listen.to_string(),
            "admin": shared.current().config.server.admin_listen.to_string(),
        }),
    }
}

/// Ask the server whose data directory is `data_dir` (`ringside reload`, `drain`, `status`):
/// its JSON answer.
pub fn ask(socket: &Path, command: Command) -> Result<serde_json::Value, String> {
    let mut s = UnixStream::connect(socket).map_err(|e| {
        format!(
            "no server answers on {} ({e}): is Ringside running with this data_dir, as this user?",
            socket.display()
        )
    })?;
    // A reload waits for every core to install the new config (a few ticks).
    let _ = s.set_read_timeout(Some(Duration::from_secs(30)));
    writeln!(s, "{}", command.as_str()).map_err(|e| format!("{}: {e}", socket.display()))?;
    let mut line = String::new();
    BufReader::new(&s)
        .read_line(&mut line)
        .map_err(|e| format!("{}: {e}", socket.display()))?;
    serde_json::from_str(line.trim()).map_err(|_| format!("{} gave no answer", socket.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_and_who_may_give_them() {
        assert_eq!(Command::parse("reload\n"), Some(Command::Reload));
        assert_eq!(Command::parse(" drain "), Some(Command::Drain));
        assert_eq!(Command::parse("status"), Some(Command::Status));
        assert_eq!(Command::parse("rm -rf"), None);
        assert!(allowed(1000, 1000));
        assert!(allowed(0, 1000), "root may");
        assert!(!allowed(1001, 1000));
    }
}
