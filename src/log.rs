//! Logging off the hot path. Each core writes its access-log lines into a buffer of its own
//! ([`Batch`]: serialized in place, no allocation per line) and hands the whole buffer to one
//! writer thread when it fills or on the core's tick, over a bounded channel, never blocking;
//! a full channel drops the batch and counts its lines. The writer writes each batch with one
//! system call.

use std::io::{IoSlice, Write};

#[derive(Clone)]
pub struct LogSink {
    tx: crossbeam_channel::Sender<Vec<u8>>,
    /// Batches the writer has written, emptied, for the cores to fill again: a core's next
    /// batch reuses memory that is already there instead of a fresh 68 KiB allocation.
    spare: crossbeam_channel::Receiver<Vec<u8>>,
}

/// A core's access-log lines not yet handed to the writer.
#[derive(Default)]
pub struct Batch {
    buf: Vec<u8>,
    lines: u64,
}

/// A batch goes to the writer once it holds this much (else on the core's next tick).
const BATCH_BYTES: usize = 64 * 1024;

impl Batch {
    /// Append one line written by `write` (which writes it without the newline); hand the
    /// batch over when it is full. Returns how many lines had to be dropped (a full channel).
    pub fn push(&mut self, sink: &LogSink, write: impl FnOnce(&mut Vec<u8>)) -> u64 {
        if self.buf.capacity() == 0 {
            self.buf = sink.spare.try_recv().unwrap_or_default();
            self.buf.reserve(BATCH_BYTES + 4096);
        }
        write(&mut self.buf);
        self.buf.push(b'\n');
        self.lines += 1;
        if self.buf.len() >= BATCH_BYTES {
            self.flush(sink)
        } else {
            0
        }
    }

    /// Hand what is buffered to the writer; returns the lines dropped (a full channel).
    pub fn flush(&mut self, sink: &LogSink) -> u64 {
        if self.buf.is_empty() {
            return 0;
        }
        let lines = std::mem::take(&mut self.lines);
        let batch = std::mem::take(&mut self.buf);
        if sink.tx.try_send(batch).is_ok() {
            0
        } else {
            lines
        }
    }
}

/// How often the writer wakes to write what the cores queued. The cores never wake it: a
/// writer blocked in `recv` is woken by a futex call for each line sent to it, which put a
/// system call and a thread switch on the cores for every request (measured: with workers on
/// every core, the access log doubled the CPU per streamed event). A line waits at most a
/// core's tick (50 ms) in its core's batch, then this long.
const WRITE_EVERY: std::time::Duration = std::time::Duration::from_millis(10);

/// At most this many batches go out in one `writev` (far below the kernel's 1,024 slices).
const BATCHES_PER_WRITE: usize = 64;

/// Emptied batches kept for reuse (each up to 68 KiB, touched only as far as it was filled).
const SPARE_BATCHES: usize = 16;

impl LogSink {
    /// Start the writer thread (stdout).
    pub fn start() -> LogSink {
        LogSink::start_with(|| std::io::stdout().lock())
    }

    /// Start the writer thread on the output `open` gives it (opened on that thread).
    pub fn start_with<W: Write>(open: impl FnOnce() -> W + Send + 'static) -> LogSink {
        // Batches, not lines: 1,024 of up to 64 KiB each.
        let (tx, rx) = crossbeam_channel::bounded::<Vec<u8>>(1024);
        let (spare_tx, spare) = crossbeam_channel::bounded::<Vec<u8>>(SPARE_BATCHES);
        let _ = std::thread::Builder::new()
            .name("ringside-log".into())
            .spawn(move || {
                let mut out = open();
                let mut batches = Vec::with_capacity(BATCHES_PER_WRITE);
                loop {
                    let closed = write_queued(&mut out, &rx, &mut batches, &spare_tx);
                    let _ = out.flush();
                    if closed {
                        return;
                    }
                    std::thread::sleep(WRITE_EVERY);
                }
            });
        LogSink { tx, spare }
    }

    /// Wait (at most `max`) until every queued line is written: at shutdown, so the last
    /// requests' lines are not lost with the process.
    pub fn finish(&self, max: std::time::Duration) {
        let until = std::time::Instant::now() + max;
        while !self.tx.is_empty() && std::time::Instant::now() < until {
            std::thread::sleep(WRITE_EVERY / 2);
        }
        // The writer's last batch: taken off the queue, being written.
        std::thread::sleep(WRITE_EVERY * 2);
    }
}

/// Write every batch queued now, up to [`BATCHES_PER_WRITE`] per vectored write, straight
/// from the cores' buffers (a copy into a `BufWriter` cost ~700 instructions per request);
/// hand the emptied buffers back. Returns whether the cores are gone.
fn write_queued(
    out: &mut impl Write,
    rx: &crossbeam_channel::Receiver<Vec<u8>>,
    batches: &mut Vec<Vec<u8>>,
    spare: &crossbeam_channel::Sender<Vec<u8>>,
) -> bool {
    loop {
        let mut closed = false;
        while batches.len() < BATCHES_PER_WRITE {
            match rx.try_recv() {
                Ok(batch) => batches.push(batch),
                Err(crossbeam_channel::TryRecvError::Empty) => break,
                Err(crossbeam_channel::TryRecvError::Disconnected) => {
                    closed = true;
                    break;
                }
            }
        }
        if batches.is_empty() {
            return closed;
        }
        let full = batches.len() == BATCHES_PER_WRITE;
        // A failed write (a closed pipe, a full disk) loses these lines, never the process.
        let _ = write_all(out, batches);
        for mut b in batches.drain(..) {
            b.clear();
            let _ = spare.try_send(b);
        }
        if closed || !full {
            return closed;
        }
    }
}

/// `write_all` over several buffers (the standard one is not stable yet).
fn write_all(out: &mut impl Write, bufs: &[Vec<u8>]) -> std::io::Result<()> {
    let mut slices: Vec<IoSlice<'_>> = bufs.iter().map(|b| IoSlice::new(b)).collect();
    let mut rest = &mut slices[..];
    IoSlice::advance_slices(&mut rest, 0);
    while !rest.is_empty() {
        match out.write_vectored(rest) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut rest, n),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// How much an operational message matters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Error = 1,
    Warn = 2,
    Info = 3,
    Debug = 4,
}

impl Level {
    fn parse(s: &str) -> Option<Level> {
        match s.trim().to_ascii_lowercase().as_str() {
            "error" => Some(Level::Error),
            "warn" | "warning" => Some(Level::Warn),
            "info" => Some(Level::Info),
            "debug" | "trace" => Some(Level::Debug),
            _ => None,
        }
    }
}

/// The most detailed level written: `RINGSIDE_LOG` (or `RUST_LOG`) as `error`, `warn`, `info`
/// (the default), `debug` or `off`; a `target=level` list is read for its `ringside` entry or
/// its bare level.
fn max_level() -> Option<Level> {
    static MAX: std::sync::OnceLock<Option<Level>> = std::sync::OnceLock::new();
    *MAX.get_or_init(|| {
        let spec = std::env::var(crate::env_vars::LOG)
            .or_else(|_| std::env::var("RUST_LOG"))
            .unwrap_or_default();
        level_of_spec(&spec)
    })
}

/// Whether `spec` says a level this reads (else info is used: `env_vars::warnings` says so).
pub fn spec_is_valid(spec: &str) -> bool {
    spec.split(',').all(|part| {
        let level = part.split_once('=').map_or(part, |(_, l)| l).trim();
        level.is_empty() || level.eq_ignore_ascii_case("off") || Level::parse(level).is_some()
    })
}

fn level_of_spec(spec: &str) -> Option<Level> {
    if spec.trim().is_empty() {
        return Some(Level::Info);
    }
    let mut bare = None;
    for part in spec.split(',') {
        match part.split_once('=') {
            Some((target, level)) if target.trim() == "ringside" => {
                return if level.trim().eq_ignore_ascii_case("off") {
                    None
                } else {
                    Level::parse(level).or(Some(Level::Info))
                };
            }
            Some(_) => {}
            None if part.trim().eq_ignore_ascii_case("off") => bare = Some(None),
            None => bare = Some(Level::parse(part).or(Some(Level::Info))),
        }
    }
    bare.unwrap_or(Some(Level::Info))
}

/// Whether operational messages are being kept for [`take_captured`] instead of written.
static CAPTURING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
static CAPTURED: std::sync::Mutex<Vec<serde_json::Value>> = std::sync::Mutex::new(Vec::new());

/// Keep operational messages instead of writing them to stderr, until [`stop_capture`]: for
/// `ringside drill`, which runs Ringside in its own process and reports which messages fired
/// during each scenario (an operator's log alerts), rather than interleaving them with its
/// table. Messages are rare (transitions, not requests), so a lock here costs nothing.
pub fn start_capture() {
    CAPTURING.store(true, std::sync::atomic::Ordering::Release);
}

/// Write operational messages to stderr again; what was kept is dropped.
pub fn stop_capture() {
    CAPTURING.store(false, std::sync::atomic::Ordering::Release);
    take_captured();
}

/// The messages kept since the last call (each the JSON object that would have been written).
pub fn take_captured() -> Vec<serde_json::Value> {
    std::mem::take(&mut *CAPTURED.lock().unwrap_or_else(|e| e.into_inner()))
}

/// Operational messages (start, reload, drain, breaker and connection transitions, store
/// problems, driver fallback) as JSON lines on stderr: `time` (RFC 3339, UTC), `level`, `msg`,
/// then the fields. `ts_ms` stays for readers of the earlier format.
pub fn event(level: &str, msg: &str, fields: serde_json::Value) {
    let lvl = Level::parse(level).unwrap_or(Level::Info);
    if max_level().is_none_or(|max| lvl > max) {
        return;
    }
    let ts_ms = crate::clock::unix_ms();
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ts_ms);
    let mut v = serde_json::json!({
        "time": humantime::format_rfc3339_millis(at).to_string(),
        "level": level,
        "msg": msg,
        "ts_ms": ts_ms,
    });
    if let (Some(o), serde_json::Value::Object(f)) = (v.as_object_mut(), fields) {
        o.extend(f);
    }
    if CAPTURING.load(std::sync::atomic::Ordering::Acquire) {
        CAPTURED.lock().unwrap_or_else(|e| e.into_inner()).push(v);
        return;
    }
    // One write a line: a reader tailing the log (or another writer on the same file) never
    // meets half a line, as `eprintln!` (a write per formatted piece on unbuffered stderr)
    // would leave it.
    let mut line = v.to_string();
    line.push('\n');
    use std::io::Write;
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An output that takes at most 7 bytes per call and keeps what it got.
    #[derive(Clone, Default)]
    struct Trickle(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl Write for Trickle {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let n = buf.len().min(7);
            self.0.lock().unwrap().extend_from_slice(&buf[..n]);
            Ok(n)
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn partial_vectored_writes_still_write_every_byte_in_order() {
        let out = Trickle::default();
        let bufs = vec![b"first\n".to_vec(), Vec::new(), b"second line\n".to_vec()];
        write_all(&mut out.clone(), &bufs).unwrap();
        assert_eq!(&*out.0.lock().unwrap(), b"first\nsecond line\n");
    }

    #[test]
    fn every_line_reaches_the_writer_and_emptied_batches_come_back() {
        let out = Trickle::default();
        let sink = LogSink::start_with({
            let out = out.clone();
            move || out
        });
        let mut batch = Batch::default();
        let line = vec![b'x'; 1000];
        // Enough lines for a few full batches, then a partial one flushed as a tick would.
        for i in 0..200u32 {
            let dropped = batch.push(&sink, |o| {
                o.extend_from_slice(&line);
                o.extend_from_slice(i.to_string().as_bytes());
            });
            assert_eq!(dropped, 0);
        }
        assert_eq!(batch.flush(&sink), 0);
        sink.finish(std::time::Duration::from_secs(10));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while out.0.lock().unwrap().len() < 200 * 1001 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let written = out.0.lock().unwrap().clone();
        let lines: Vec<&[u8]> = written
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .collect();
        assert_eq!(lines.len(), 200);
        for (i, l) in lines.iter().enumerate() {
            assert_eq!(&l[..1000], &line[..]);
            assert_eq!(&l[1000..], i.to_string().as_bytes());
        }
        // The writer handed its buffers back; the next batch starts from one of them.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while sink.spare.is_empty() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let reused = sink.spare.try_recv().expect("an emptied batch");
        assert!(reused.is_empty() && reused.capacity() >= BATCH_BYTES);
    }

    #[test]
    fn the_level_comes_from_a_bare_level_or_the_ringside_target() {
        assert_eq!(level_of_spec(""), Some(Level::Info));
        assert_eq!(level_of_spec("warn"), Some(Level::Warn));
        assert_eq!(
            level_of_spec("hyper=debug,ringside=error"),
            Some(Level::Error)
        );
        assert_eq!(level_of_spec("debug,hyper=off"), Some(Level::Debug));
        assert_eq!(level_of_spec("off"), None);
        // A level it cannot read leaves the default rather than silence.
        assert_eq!(level_of_spec("nonsense"), Some(Level::Info));
    }
}
