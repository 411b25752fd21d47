//! SSE framing for translation: upstream bytes, split at any boundary, into events (a name and
//! the data lines joined). The buffers are the stream's own and reused: nothing is allocated
//! per event once they have grown to the largest event.

/// One event's fields, borrowed from the framer until the next feed.
pub struct Frame<'a> {
    pub name: &'a str,
    pub data: &'a [u8],
}

#[derive(Default)]
pub struct Framer {
    /// The current line so far.
    line: Vec<u8>,
    name: Vec<u8>,
    data: Vec<u8>,
    has_data: bool,
}

impl Framer {
    /// Feed bytes; `on_frame` is called for each complete event. Lines whole in `bytes` are
    /// read where they lie; only a line split across feeds is copied.
    pub fn feed(&mut self, bytes: &[u8], mut on_frame: impl FnMut(Frame)) {
        let mut rest = bytes;
        while let Some(nl) = memchr::memchr(b'\n', rest) {
            if self.line.is_empty() {
                self.line_done(&rest[..nl], &mut on_frame);
            } else {
                let mut line = std::mem::take(&mut self.line);
                line.extend_from_slice(&rest[..nl]);
                self.line_done(&line, &mut on_frame);
                line.clear();
                self.line = line;
            }
            rest = &rest[nl + 1..];
        }
        self.line.extend_from_slice(rest);
    }

    /// The upstream ended: an event without its blank line still counts (Gemini's last frame
    /// may end at the close).
    pub fn finish(&mut self, mut on_frame: impl FnMut(Frame)) {
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            self.line_done(&line, &mut on_frame);
        }
        self.dispatch(&mut on_frame);
    }

    fn line_done(&mut self, line: &[u8], on_frame: &mut impl FnMut(Frame)) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            self.dispatch(on_frame);
        } else {
            self.field(line);
        }
    }

    fn field(&mut self, line: &[u8]) {
        let (name, value) = match line.iter().position(|&b| b == b':') {
            Some(0) => return, // a comment
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        match name {
            b"data" => {
                if self.has_data {
                    self.data.push(b'\n');
                }
                self.data.extend_from_slice(value);
                self.has_data = true;
            }
            b"event" => {
                self.name.clear();
                self.name.extend_from_slice(value);
            }
            _ => {}
        }
    }

    fn dispatch(&mut self, on_frame: &mut impl FnMut(Frame)) {
        if self.has_data {
            on_frame(Frame {
                // Every provider's event names are ASCII: one that is not names no event.
                name: std::str::from_utf8(&self.name).unwrap_or(""),
                data: &self.data,
            });
        }
        self.name.clear();
        self.data.clear();
        self.has_data = false;
    }
}
