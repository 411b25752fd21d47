//! Held streams: C concurrent event streams, each on its own keep-alive connection, started
//! again as soon as one ends until the time is up; one monoio thread drives them all.
//! usage: ringside-load streams ADDR PATH BODY CONCURRENCY SECONDS [INTERVAL_MS]
//!
//! A stream counts as completed when it ends with its terminal marker (`data: [DONE]`, or an
//! Anthropic `message_stop`) and the end of the body; its events are counted and its duration
//! kept. Anything else (a reset, an error status, a missing terminal marker) is an error.
//!
//! With INTERVAL_MS (the upstream's spacing of events) each event's delay is measured too: how
//! much later than its schedule it arrived, the schedule being the best kept by its neighbours
//! (event j due at t + j x INTERVAL, t the earliest start its near events allow). A
//! proxy that holds events back to send several at once (HAProxy's MSG_MORE on an unfinished
//! body) shows here, not in the stream's duration.

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
    /// Event delays in whole milliseconds: `delay_ms[d]` events arrived `d` ms late (the last
    /// bucket holds everything later).
    delay_ms: Vec<u64>,
}

/// The longest event delay kept in its own bucket.
const DELAY_BUCKETS: usize = 10_000;

impl Tally {
    /// Record one stream's event delays from its arrivals: `(ms since the request, index)`.
    /// Event j's schedule is anchored on its neighbours (the earliest `at - i x interval` within
    /// `WINDOW` events either side), so that an upstream whose timer runs a little slow over a
    /// long stream does not read as a proxy's delay, while a proxy holding two or three events
    /// back to send them together does.
    fn delays(&mut self, arrivals: &[(f64, u64)], interval_ms: f64) {
        const WINDOW: usize = 3;
        if self.delay_ms.is_empty() {
            self.delay_ms = vec![0; DELAY_BUCKETS + 1];
        }
        let due = |&(at, i): &(f64, u64)| at - i as f64 * interval_ms;
        // The first event is left out: it is the response's time to first byte, which the
        // stream duration already shows and a stream guard may hold to the first token.
        for (j, event) in arrivals.iter().enumerate().skip(1) {
            let near = &arrivals[j.saturating_sub(WINDOW)..(j + WINDOW + 1).min(arrivals.len())];
            let start = near.iter().map(due).fold(f64::INFINITY, f64::min);
            let late = (due(event) - start).max(0.0) as usize;
            self.delay_ms[late.min(DELAY_BUCKETS)] += 1;
        }
    }

    /// The delay at quantile `q` (0 when none was measured).
    fn delay_at(&self, q: f64) -> usize {
        let total: u64 = self.delay_ms.iter().sum();
        let want = (total as f64 * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (ms, n) in self.delay_ms.iter().enumerate() {
            seen += n;
            if seen >= want {
                return ms;
            }
        }
        0
    }
}

/// A finished stream: its events and, per read that brought events, when and which.
struct Finished {
    events: u64,
    arrivals: Vec<(f64, u64)>,
}

/// One whole response off `s`: status, body bytes seen, whether it ended with the terminal
/// marker and the end of its framing. Reads into one reused buffer.
async fn one_stream(s: &mut TcpStream, req: &[u8], buf: &mut Vec<u8>) -> Option<Finished> {
    let sent = Instant::now();
    let (res, _) = s.write_all(req.to_vec()).await;
    res.ok()?;
    let mut seen: Vec<u8> = Vec::with_capacity(4096);
    let mut arrivals = Vec::with_capacity(64);
    let mut counted = 0u64;
    let mut b = std::mem::take(buf);
    let out = loop {
        b.clear();
        let (res, nb) = s.read(b).await;
        b = nb;
        let n = res.ok()?;
        if n == 0 {
            break None;
        }
        let old = seen.len();
        seen.extend_from_slice(&b[..n]);
        // A marker split across reads is counted once it is whole.
        let at = sent.elapsed().as_secs_f64() * 1000.0;
        for _ in memchr::memmem::find_iter(&seen[old.saturating_sub(5)..], b"data: ") {
            arrivals.push((at, counted));
            counted += 1;
        }
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
                break terminal.then_some(Finished { events, arrivals });
            }
        }
    };
    *buf = b;
    out
}

async fn holder(
    addr: String,
    req: Rc<Vec<u8>>,
    until: Instant,
    interval_ms: Option<f64>,
    tally: Rc<RefCell<Tally>>,
) {
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
            Some(done) => {
                let mut t = tally.borrow_mut();
                t.completed += 1;
                t.events += done.events;
                if let Some(ms) = interval_ms {
                    t.delays(&done.arrivals, ms);
                }
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
        eprintln!("usage: ringside-load streams ADDR PATH BODY CONCURRENCY SECONDS [INTERVAL_MS]");
        std::process::exit(2);
    }
    let (addr, path, body) = (a[0].clone(), a[1].clone(), a[2].clone());
    let conc: usize = a[3].parse().unwrap_or(100);
    let secs: f64 = a[4].parse().unwrap_or(10.0);
    let interval_ms: Option<f64> = a.get(5).and_then(|v| v.parse().ok());
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
            .map(|_| {
                monoio::spawn(holder(
                    addr.clone(),
                    req.clone(),
                    until,
                    interval_ms,
                    tally.clone(),
                ))
            })
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
        "{{\"completed\":{},\"errors\":{},\"events\":{},\"events_per_s\":{:.0},\"p50_ms\":{:.0},\"p99_ms\":{:.0},\"event_delay_p50_ms\":{},\"event_delay_p99_ms\":{},\"event_delay_max_ms\":{},\"wall_s\":{wall:.1}}}",
        t.completed,
        t.errors,
        t.events,
        t.events as f64 / wall,
        pct(0.50),
        pct(0.99),
        t.delay_at(0.50),
        t.delay_at(0.99),
        t.delay_at(1.0)
    );
}
