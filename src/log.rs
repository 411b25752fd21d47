//! Logging off the hot path: cores hand finished lines to one writer thread over a bounded
//! channel and never block; a full channel drops the line and counts it.

use std::io::Write;

#[derive(Clone)]
pub struct LogSink {
    tx: crossbeam_channel::Sender<String>,
}

/// How often the writer wakes to write what the cores queued. The cores never wake it: a
/// writer blocked in `recv` is woken by a futex call for each line sent to it, which put a
/// system call and a thread switch on the cores for every request (measured: with workers on
/// every core, the access log doubled the CPU per streamed event). Lines are at most this late.
const WRITE_EVERY: std::time::Duration = std::time::Duration::from_millis(10);

impl LogSink {
    /// Start the writer thread (stdout).
    pub fn start() -> LogSink {
        let (tx, rx) = crossbeam_channel::bounded::<String>(65_536);
        let _ = std::thread::Builder::new()
            .name("ringside-log".into())
            .spawn(move || {
                let stdout = std::io::stdout();
                let mut out = std::io::BufWriter::with_capacity(256 * 1024, stdout.lock());
                loop {
                    let mut closed = false;
                    loop {
                        match rx.try_recv() {
                            Ok(line) => {
                                let _ = out.write_all(line.as_bytes());
                                let _ = out.write_all(b"\n");
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

    /// Queue a line; false when it had to be dropped.
    pub fn send(&self, line: String) -> bool {
        self.tx.try_send(line).is_ok()
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
