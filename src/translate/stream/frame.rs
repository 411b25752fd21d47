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
    name: String,
    data: Vec<u8>,
    has_data: bool,
}

impl Framer {
    /// Feed bytes; `on_frame` is called for each complete event.
    pub fn feed(&mut self, bytes: &[u8], mut on_frame: impl FnMut(Frame)) {
        for &b in bytes {
            if b != b'\n' {
                self.line.push(b);
                continue;
            }
            if self.line.last() == Some(&b'\r') {
                self.line.pop();
            }
            if self.line.is_empty() {
                self.dispatch(&mut on_frame);
            } else {
                self.field();
            }
            self.line.clear();
        }
    }

    /// The upstream ended: an event without its blank line still counts (Gemini's last frame
    /// may end at the close).
    pub fn finish(&mut self, mut on_frame: impl FnMut(Frame)) {
        if !self.line.is_empty() {
            self.field();
            self.line.clear();
        }
        self.dispatch(&mut on_frame);
    }

    fn field(&mut self) {
        let line = &self.line;
        let (name, value) = match line.iter().position(|&b| b == b':') {
            Some(0) => return, // a comment
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (&line[..], &b""[..]),
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
                self.name.push_str(&String::from_utf8_lossy(value));
            }
            _ => {}
        }
    }

    fn dispatch(&mut self, on_frame: &mut impl FnMut(Frame)) {
        if self.has_data {
            on_frame(Frame {
                name: &self.name,
                data: &self.data,
            });
        }
        self.name.clear();
        self.data.clear();
        self.has_data = false;
    }
}
