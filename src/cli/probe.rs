//! `ringside probe`: ask the running server's admin port whether it is ready (`GET /readyz`),
//! or only up (`--live`: `GET /healthz`), and exit 0 or 1. For a container's `HEALTHCHECK`
//! and other probes that run a command: no curl in the image, no token (the probes need none).

use crate::config::{admin_listen_of, real_env};
use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

/// How long the whole probe may take.
const TIMEOUT: Duration = Duration::from_secs(3);

/// The address to dial for a listen address: a wildcard listens on loopback too.
fn dial_addr(listen: &str) -> Result<SocketAddr, String> {
    let mut a = (listen.to_socket_addrs())
        .map_err(|e| format!("admin_listen `{listen}`: {e}"))?
        .next()
        .ok_or_else(|| format!("admin_listen `{listen}` names no address"))?;
    if a.ip().is_unspecified() {
        a.set_ip(match a {
            SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    Ok(a)
}

/// Probe; `Ok(true)` when the server answered 200.
pub(super) fn run(config: &str, live: bool) -> Result<bool, String> {
    let addr = dial_addr(&admin_listen_of(config, &real_env)?)?;
    let path = if live { "/healthz" } else { "/readyz" };
    let reply = crate::demo::client::request(addr, "GET", path, &[], b"", TIMEOUT)
        .map_err(|e| format!("{addr}{path}: {e} (is the server running?)"))?;
    println!("{path}: {} {}", reply.status, reply.text().trim());
    Ok(reply.status == 200)
}
