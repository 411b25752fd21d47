//! Logging off the hot path: cores hand finished lines to one writer thread over a bounded
//! channel and never block; a full channel drops the line and counts it.

use std::io::Write;

#[derive(Clone)]
pub struct LogSink {
    tx: crossbeam_channel::Sender<String>,
}

impl LogSink {
    /// Start the writer thread (stdout).
    pub fn start() -> LogSink {
        let (tx, rx) = crossbeam_channel::bounded::<String>(65_536);
        let _ = std::thread::Builder::new()
            .name("ringside-log".into())
            .spawn(move || {
                let stdout = std::io::stdout();
                let mut out = std::io::BufWriter::new(stdout.lock());
                while let Ok(line) = rx.recv() {
                    let _ = out.write_all(line.as_bytes());
                    let _ = out.write_all(b"\n");
                    while let Ok(more) = rx.try_recv() {
                        let _ = out.write_all(more.as_bytes());
                        let _ = out.write_all(b"\n");
                    }
                    let _ = out.flush();
                }
            });
        LogSink { tx }
    }

    /// Queue a line; false when it had to be dropped.
    pub fn send(&self, line: String) -> bool {
        self.tx.try_send(line).is_ok()
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
