//! Subcommands that ask a running server through its admin port: `ringside drain` and
//! `ringside reload`. The admin
//! address and token come from the same config file the server runs with.

use crate::config::{load_file, real_env};
use std::io::{Read, Write};
use std::time::Duration;

/// `POST /admin/drain`.
pub(super) fn drain(config: &str) -> Result<(), String> {
    let (status, body) = call(config, "POST", "/admin/drain")?;
    if status == 202 {
        println!("draining: {}", body.trim());
        Ok(())
    } else {
        Err(format!(
            "the server refused the drain ({status}): {}",
            body.trim()
        ))
    }
}

/// `POST /admin/reload`: print the outcome; problems make it fail.
pub(super) fn reload(config: &str) -> Result<(), String> {
    let (status, body) = call(config, "POST", "/admin/reload")?;
    match status {
        200 => {
            println!("{}", body.trim());
            Ok(())
        }
        422 => Err(format!(
            "the reload was rejected; the running config is unchanged:\n{}",
            body.trim()
        )),
        _ => Err(format!(
            "the server refused the reload ({status}): {}",
            body.trim()
        )),
    }
}

/// One admin request on a fresh connection: (status, body).
fn call(config: &str, method: &str, path: &str) -> Result<(u16, String), String> {
    let cfg = load_file(config, &real_env).map_err(|ps| {
        let lines: Vec<String> = ps.iter().map(|p| p.to_string()).collect();
        format!("{config}: {}", lines.join("; "))
    })?;
    let mut addr = cfg.server.admin_listen;
    if addr.ip().is_unspecified() {
        addr.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
    }
    // A reload waits for every core to install the new config (a few ticks).
    let timeout = Duration::from_secs(15);
    let mut s = std::net::TcpStream::connect_timeout(&addr, timeout)
        .map_err(|e| format!("admin port {addr} does not answer: {e}"))?;
    let _ = s.set_read_timeout(Some(timeout));
    let auth = cfg
        .server
        .admin_token
        .as_ref()
        .map(|t| format!("authorization: Bearer {}\r\n", t.expose()))
        .unwrap_or_default();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\n{auth}content-length: 0\r\nconnection: close\r\n\r\n"
    );
    s.write_all(req.as_bytes())
        .map_err(|e| format!("admin port {addr}: {e}"))?;
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out);
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("admin port {addr} gave no HTTP answer"))?;
    let body = text
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string();
    Ok((status, body))
}
