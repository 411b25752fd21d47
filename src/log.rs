//! Logging off the hot path. Each core writes its access-log lines into a buffer of its own
//! ([`Batch`]: serialized in place, no allocation per line) and hands the whole buffer to one
//! writer thread when it fills or on the core's tick, over a bounded channel, never blocking;
//! a full channel drops the batch and counts its lines. The writer writes each batch with one
//! system call.

use std::io::Write;

#[derive(Clone)]
pub struct LogSink {
    tx: crossbeam_channel::Sender<Vec<u8>>,
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

impl LogSink {
    /// Start the writer thread (stdout).
    pub fn start() -> LogSink {
        // Batches, not lines: 1,024 of up to 64 KiB each.
        let (tx, rx) = crossbeam_channel::bounded::<Vec<u8>>(1024);
        let _ = std::thread::Builder::new()
            .name("ringside-log".into())
            .spawn(move || {
                let stdout = std::io::stdout();
                let mut out = std::io::BufWriter::with_capacity(256 * 1024, stdout.lock());
                // (A batch larger than the buffer's room goes straight through.)
                loop {
                    let mut closed = false;
                    loop {
                        match rx.try_recv() {
                            Ok(batch) => {
                                let _ = out.write_all(&batch);
                            }
                            Err(crossbeam_channel::TryRecvError::Empty) => break,
                            Err(crossbeam_channel::TryRecvError::Disconnected) => {
                                closed = true;
                                break;
                            }
                        }
                    }
                    let _ = out.flush();
                    if closed {
                        return;
                    }
                    std::thread::sleep(WRITE_EVERY);
                }
            });
        LogSink { tx }
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

/// Operational messages (start, driver, warnings) as JSON lines on stderr.
pub fn event(level: &str, msg: &str, fields: serde_json::Value) {
    let mut v = serde_json::json!({"ts_ms": crate::clock::unix_ms(), "level": level, "msg": msg});
    if let (Some(o), serde_json::Value::Object(f)) = (v.as_object_mut(), fields) {
        o.extend(f);
    }
    eprintln!("{v}");
}
