//! Fixed-rate (open-loop) load generator for benches/e2e.sh: latency is measured from each
//! request's scheduled send time, so a stalled server cannot hide its queueing delay.
//! usage: ringside-load ADDR PATH BODY RATE SECONDS CONNECTIONS
//!        ringside-load streams ADDR PATH BODY CONCURRENCY SECONDS (held streams)

mod streams;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

fn read_response(s: &mut TcpStream, buf: &mut Vec<u8>) -> std::io::Result<()> {
    buf.clear();
    let mut tmp = [0u8; 16 * 1024];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let body = &buf[end + 4..];
            if let Some(len) = head.lines().find_map(|l| {
                l.strip_prefix("content-length:")
                    .and_then(|v| v.trim().parse::<usize>().ok())
            }) {
                if body.len() >= len {
                    return Ok(());
                }
            } else if head.contains("transfer-encoding: chunked") && body.ends_with(b"0\r\n\r\n") {
                return Ok(());
            }
        }
        let n = s.read(&mut tmp)?;
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "closed",
            ));
        }
        buf.extend_from_slice(&tmp[..n]);
    }
}

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    if a.first().map(String::as_str) == Some("streams") {
        streams::run(&a[1..]);
    } else {
        fixed_rate(&a);
    }
}

/// The keep-alive JSON POST both modes send.
fn post_request(addr: &str, path: &str, body: &str) -> String {
    format!(
        "POST {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// Requests at a fixed rate over keep-alive connections (one thread each).
fn fixed_rate(a: &[String]) {
    if a.len() < 6 {
        eprintln!("usage: ringside-load ADDR PATH BODY RATE SECONDS CONNECTIONS");
        std::process::exit(2);
    }
    let (addr, path, body) = (a[0].clone(), a[1].clone(), a[2].clone());
    let rate: f64 = a[3].parse().unwrap_or(1000.0);
    let secs: f64 = a[4].parse().unwrap_or(10.0);
    let conns: usize = a[5].parse().unwrap_or(16);
    let req = post_request(&addr, &path, &body);
    let start = Instant::now() + Duration::from_millis(100);
    let per_conn = rate / conns as f64;
    let handles: Vec<_> = (0..conns)
        .map(|i| {
            let (addr, req) = (addr.clone(), req.clone());
            std::thread::spawn(move || {
                let mut lat = Vec::new();
                let mut errors = 0u64;
                let Ok(mut s) = TcpStream::connect(&addr) else {
                    return (lat, 1);
                };
                let _ = s.set_nodelay(true);
                let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
                let mut buf = Vec::with_capacity(64 * 1024);
                let interval = Duration::from_secs_f64(1.0 / per_conn);
                let offset = interval.mul_f64(i as f64 / conns as f64);
                let mut k = 0u32;
                loop {
                    let due = start + offset + interval * k;
                    if due.duration_since(start).as_secs_f64() > secs {
                        break;
                    }
                    let now = Instant::now();
                    if due > now {
                        std::thread::sleep(due - now);
                    }
                    let ok = s.write_all(req.as_bytes()).is_ok()
                        && read_response(&mut s, &mut buf).is_ok();
                    if ok {
                        lat.push(due.elapsed().as_secs_f64() * 1000.0);
                    } else {
                        errors += 1;
                        match TcpStream::connect(&addr) {
                            Ok(n) => s = n,
                            Err(_) => break,
                        }
                    }
                    k += 1;
                }
                (lat, errors)
            })
        })
        .collect();
    let mut all = Vec::new();
    let mut errors = 0;
    for h in handles {
        if let Ok((l, e)) = h.join() {
            all.extend(l);
            errors += e;
        }
    }
    all.sort_by(|a, b| a.total_cmp(b));
    let pct = |p: f64| {
        all.get(((all.len() as f64 * p) as usize).min(all.len().saturating_sub(1)))
            .copied()
            .unwrap_or(f64::NAN)
    };
    println!(
        "{{\"ok\":{},\"errors\":{errors},\"p50_ms\":{:.3},\"p99_ms\":{:.3},\"max_ms\":{:.3}}}",
        all.len(),
        pct(0.50),
        pct(0.99),
        all.last().copied().unwrap_or(f64::NAN)
    );
}
