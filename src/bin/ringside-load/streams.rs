//! Held streams: C concurrent event streams, each on its own keep-alive connection, started
//! again as soon as one ends until the time is up; one monoio thread drives them all.
//! usage: ringside-load streams ADDR PATH BODY CONCURRENCY SECONDS
//!
//! A stream counts as completed when it ends with its terminal marker (`data: [DONE]`, or an
//! Anthropic `message_stop`) and the end of the body; its events are counted and its duration
//! kept. Anything else (a reset, an error status, a missing terminal marker) is an error.

use monoio::io::{AsyncReadRent, AsyncWriteRentExt};
use monoio::net::TcpStream;
use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

#[derive(Default)]
struct Tally {
    completed: u64,
    errors: u64,
    events: u64,
    durations_ms: Vec<f64>,
}

/// One whole response off `s`: status, body bytes seen, whether it ended with the terminal
/// marker and the end of its framing. Reads into one reused buffer.
async fn one_stream(s: &mut TcpStream, req: &[u8], buf: &mut Vec<u8>) -> Option<u64> {
    let (res, _) = s.write_all(req.to_vec()).await;
    res.ok()?;
    let mut seen: Vec<u8> = Vec::with_capacity(4096);
    let mut b = std::mem::take(buf);
    let out = loop {
        b.clear();
        let (res, nb) = s.read(b).await;
        b = nb;
        let n = res.ok()?;
        if n == 0 {
            break None;
        }
        seen.extend_from_slice(&b[..n]);
        if let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
            if !seen.starts_with(b"HTTP/1.1 200") {
                break None;
            }
            let body = &seen[end + 4..];
            let chunked_end = body.ends_with(b"0\r\n\r\n");
            if chunked_end
                || body.ends_with(b"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
            {
                let terminal = memchr::memmem::find(body, b"data: [DONE]").is_some()
                    || memchr::memmem::find(body, b"message_stop").is_some();
                let events = memchr::memmem::find_iter(body, b"data: ").count() as u64;
                break terminal.then_some(events);
            }
        }
    };
    *buf = b;
    out
}

async fn holder(addr: String, req: Rc<Vec<u8>>, until: Instant, tally: Rc<RefCell<Tally>>) {
    let mut buf = Vec::with_capacity(16 * 1024);
    let mut conn: Option<TcpStream> = None;
    while Instant::now() < until {
        if conn.is_none() {
            match TcpStream::connect(addr.as_str()).await {
                Ok(s) => {
                    let _ = s.set_nodelay(true);
                    conn = Some(s);
                }
                Err(_) => {
                    tally.borrow_mut().errors += 1;
                    monoio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            }
        }
        let Some(s) = conn.as_mut() else { continue };
        let started = Instant::now();
        match one_stream(s, &req, &mut buf).await {
            Some(events) => {
                let mut t = tally.borrow_mut();
                t.completed += 1;
                t.events += events;
                t.durations_ms
                    .push(started.elapsed().as_secs_f64() * 1000.0);
            }
            None => {
                tally.borrow_mut().errors += 1;
                conn = None;
            }
        }
    }
}

pub fn run(a: &[String]) {
    if a.len() < 5 {
        eprintln!("usage: ringside-load streams ADDR PATH BODY CONCURRENCY SECONDS");
        std::process::exit(2);
    }
    let (addr, path, body) = (a[0].clone(), a[1].clone(), a[2].clone());
    let conc: usize = a[3].parse().unwrap_or(100);
    let secs: f64 = a[4].parse().unwrap_or(10.0);
    let req = Rc::new(super::post_request(&addr, &path, &body).into_bytes());
    let built = monoio::RuntimeBuilder::<monoio::FusionDriver>::new()
        .enable_timer()
        .with_entries(4096)
        .build();
    let mut rt = match built {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("ringside-load: cannot start the runtime: {e}");
            std::process::exit(1);
        }
    };
    let tally = Rc::new(RefCell::new(Tally::default()));
    let started = Instant::now();
    rt.block_on(async {
        let until = Instant::now() + Duration::from_secs_f64(secs);
        let tasks: Vec<_> = (0..conc)
            .map(|_| monoio::spawn(holder(addr.clone(), req.clone(), until, tally.clone())))
            .collect();
        for t in tasks {
            t.await;
        }
    });
    let wall = started.elapsed().as_secs_f64();
    let mut t = tally.borrow_mut();
    t.durations_ms.sort_by(|a, b| a.total_cmp(b));
    let d = &t.durations_ms;
    let pct = |p: f64| {
        d.get(((d.len() as f64 * p) as usize).min(d.len().saturating_sub(1)))
            .copied()
            .unwrap_or(f64::NAN)
    };
    println!(
        "{{\"completed\":{},\"errors\":{},\"events\":{},\"events_per_s\":{:.0},\"p50_ms\":{:.0},\"p99_ms\":{:.0},\"wall_s\":{wall:.1}}}",
        t.completed,
        t.errors,
        t.events,
        t.events as f64 / wall,
        pct(0.50),
        pct(0.99)
    );
}
