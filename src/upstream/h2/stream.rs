//! One request on an HTTP/2 connection, read by the request path as it reads an HTTP/1.1
//! connection: the answer's head, parsed ([`H2Stream::head`]; or as HTTP/1.1 bytes to a
//! reader that asks for bytes), then its body's bytes, then the end (a read of 0) where the
//! stream ends. What the stream's failure means for a retry is kept ([`Failure`]).

use super::conn::H2Conn;
use super::link::{Link, Recv};
pub use super::shared::Failure;
use super::shared::Shared;
use crate::http::head::Head;
use bytes::{Bytes, BytesMut};
use std::io;
use std::rc::Rc;

enum State {
    /// Made, nothing sent.
    Idle,
    /// Sent as this stream id: its head awaited.
    Awaiting(u32),
    /// Its head read: its body.
    Body(u32),
    Ended,
}

pub struct H2Stream {
    link: Rc<Link>,
    /// Its id on the connection once sent (0 before).
    id: u32,
    /// The connection's TCP socket.
    fd: std::os::fd::RawFd,
    shared: Rc<Shared>,
    https: bool,
    state: State,
    /// The answer's head until it is taken whole ([`Self::head`]) or read as bytes (its bytes
    /// then become `pending`, [`Self::emit_ready`]).
    head: Option<Head>,
    /// Bytes received and not yet read (a read had less room than a DATA frame): the head, or
    /// a DATA frame's, after the chunk-size line owed before it (`line`).
    pending: Bytes,
    /// A chunked body's framing still owed around `pending`: its size line (from `line_at`),
    /// and after it `tail` (`\r\n`, or the last chunk at the end).
    line: [u8; 18],
    line_len: u8,
    line_at: u8,
    tail: &'static [u8],
    chunked: bool,
    failure: Option<Failure>,
    /// A failure found while taking what was already received (`take_received`), after the
    /// bytes that read returned: the next read returns it.
    deferred: Option<io::Error>,
}

impl H2Stream {
    /// A stream on `conn`, counted open until dropped. `tls`: the provider's scheme.
    pub fn on(conn: &H2Conn, tls: bool) -> H2Stream {
        conn.shared.open.set(conn.shared.open.get() + 1);
        H2Stream {
            link: conn.link.clone(),
            id: 0,
            fd: conn.fd,
            shared: conn.shared.clone(),
            https: tls,
            state: State::Idle,
            head: None,
            pending: Bytes::new(),
            line: [0; 18],
            line_len: 0,
            line_at: 0,
            tail: b"",
            chunked: false,
            failure: None,
            deferred: None,
        }
    }

    pub fn fd(&self) -> std::os::fd::RawFd {
        self.fd
    }

    /// How it failed, if it did.
    pub fn failure(&self) -> Option<Failure> {
        self.failure
    }

    /// Whether its connection failed because the provider's TLS refused the client
    /// certificate.
    pub fn tls_refused(&self) -> bool {
        self.shared.tls_refused.get()
    }

    /// Whether this stream is the first of its connection to report the connection's failure
    /// (the one that counts against the provider; its siblings' same failure does not).
    pub fn first_to_report(&self) -> bool {
        if self.failure != Some(Failure::ConnectionLost) {
            return true;
        }
        !self.shared.failure_counted.replace(true)
    }

    /// Send the request: `head` (an HTTP/1.1 head of ours, a small body copied behind it) and
    /// `body` (a large one's). Queued on the connection at once (its task writes it, the body
    /// as the windows allow): nothing here waits.
    pub async fn send(&mut self, head: &Bytes, body: &Bytes) -> io::Result<()> {
        let https = self.https;
        let id = self.link.open(|out| {
            let used = super::request::encode(head, https, out)?;
            Ok(match (used < head.len(), body.is_empty()) {
                (false, _) => body.clone(),
                (true, true) => head.slice(used..),
                (true, false) => [&head[used..], &body[..]].concat().into(),
            })
        });
        let id = id.inspect_err(|e| {
            // A connection that failed or was told to go away since it was picked: nothing
            // was sent, so the request may go again on another, blaming no key.
            if e.kind() == io::ErrorKind::ConnectionRefused {
                self.failure = Some(Failure::Refused);
            }
        })?;
        self.state = State::Awaiting(id);
        self.id = id;
        Ok(())
    }

    /// The answer's head, parsed, once it came; `None` if the stream ended first (or its head
    /// was already read). What follows it is read as bytes.
    pub async fn head(&mut self) -> io::Result<Option<Head>> {
        if !self.fill().await? {
            return Ok(None);
        }
        Ok(self.head.take())
    }

    /// What the stream has already received after its head, into `buf`, never waiting: a JSON
    /// answer's body, which came with its head, then goes to the client in the head's write
    /// (one send and one segment, not two), as an HTTP/1.1 read of head and body together.
    pub fn read_received(&mut self, buf: &mut BytesMut) {
        // Nothing here: the buffer is left as it is (no room made for nothing).
        if self.owed() || self.take_received() {
            self.emit_into(buf);
        }
    }

    /// A failure [`Self::read_received`] found behind the head of an answer with a length (more
    /// DATA than its content-length, a reset part way): taken, for the attempt to fail before
    /// any of it reaches the client, as such a body can no longer come whole. An event
    /// stream's is left for its reader: the events before it go first, by the stream
    /// guard's rules.
    pub fn failed_with_head(&mut self) -> Option<io::Error> {
        if self.chunked {
            return None;
        }
        self.deferred.take()
    }

    /// The answer's next bytes into `buf`: its head first (as HTTP/1.1), then its body; 0 at
    /// its end. What the stream has already received joins them, as an HTTP/1.1 read takes
    /// whatever arrived: a JSON answer's head and body, read together, reach the client in one
    /// write (one send and one segment, not two).
    pub async fn read_into(&mut self, buf: &mut BytesMut) -> io::Result<usize> {
        if !self.fill().await? {
            return Ok(0);
        }
        Ok(self.emit_into(buf))
    }

    /// [`Self::emit_ready`] into `buf`, with room made in it: how many bytes.
    fn emit_into(&mut self, buf: &mut BytesMut) -> usize {
        crate::http::io::make_room(buf);
        let room = buf.capacity() - buf.len();
        self.emit_ready(room, |b| buf.extend_from_slice(b))
    }

    /// [`Self::read_into`] for any buffer the runtime reads into.
    pub async fn read_raw<T: monoio::buf::IoBufMut>(
        &mut self,
        mut buf: T,
    ) -> (io::Result<usize>, T) {
        match self.fill().await {
            Ok(true) => {}
            Ok(false) => return (Ok(0), buf),
            Err(e) => return (Err(e), buf),
        }
        let (room, at) = (buf.bytes_total(), buf.write_ptr());
        let mut n = 0;
        self.emit_ready(room, |b| {
            // SAFETY: `emit_ready` gives at most `room` bytes in all, and `write_ptr` has room
            // for `bytes_total`: each piece lands after the last, inside it.
            unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), at.add(n), b.len()) };
            n += b.len();
        });
        // SAFETY: the first `n` bytes were just written.
        unsafe { buf.set_init(n) };
        (Ok(n), buf)
    }

    /// [`Self::emit`] what is owed, then what the stream has already received, while `room`
    /// lasts. Returns how many bytes.
    fn emit_ready(&mut self, mut room: usize, mut put: impl FnMut(&[u8])) -> usize {
        // Read as bytes: the head, if not taken whole, goes first as its HTTP/1.1 bytes.
        if let Some(head) = self.head.take() {
            self.pending = head.raw().clone();
        }
        let start = room;
        loop {
            room -= self.emit(room, &mut put);
            if room == 0 || self.owed() || !self.take_received() {
                return start - room;
            }
        }
    }

    /// Take the stream's next piece if it is already here, never waiting: whether bytes are
    /// owed now. A failure found here is kept for the next read (the bytes before it go
    /// first).
    fn take_received(&mut self) -> bool {
        let State::Body(id) = self.state else {
            return false;
        };
        // A noop waker: a piece not here yet is waited for by the next read, with its own.
        let cx = std::task::Context::from_waker(std::task::Waker::noop());
        match self.link.poll_recv(id, &cx) {
            std::task::Poll::Pending => false,
            std::task::Poll::Ready(r) => match self.received(r) {
                Ok(()) => self.owed(),
                Err(e) => {
                    self.deferred = Some(e);
                    false
                }
            },
        }
    }

    /// Whether bytes (or the head) are owed to the reader.
    fn owed(&self) -> bool {
        self.head.is_some()
            || self.line_at < self.line_len
            || !self.pending.is_empty()
            || !self.tail.is_empty()
    }

    /// Give up to `room` owed bytes to `put`, in order: size line, bytes, tail. Returns how many.
    fn emit(&mut self, mut room: usize, mut put: impl FnMut(&[u8])) -> usize {
        let start = room;
        let line = &self.line[usize::from(self.line_at)..usize::from(self.line_len)];
        let n = line.len().min(room);
        put(&line[..n]);
        self.line_at += n as u8;
        room -= n;
        let n = self.pending.len().min(room);
        put(&self.pending.split_to(n));
        room -= n;
        if self.line_at == self.line_len && self.pending.is_empty() {
            let n = self.tail.len().min(room);
            put(&self.tail[..n]);
            self.tail = &self.tail[n..];
            room -= n;
        }
        start - room
    }

    /// Have bytes owed to the reader (`true`), or the stream's end (`false`).
    async fn fill(&mut self) -> io::Result<bool> {
        if !self.owed()
            && let Some(e) = self.deferred.take()
        {
            return Err(e);
        }
        while !self.owed() {
            let id = match self.state {
                State::Idle => return Err(io::Error::other("no request was sent")),
                State::Ended => return Ok(false),
                State::Awaiting(id) | State::Body(id) => id,
            };
            let r = std::future::poll_fn(|cx| self.link.poll_recv(id, cx)).await;
            self.received(r)?;
        }
        Ok(true)
    }

    /// What the stream gave: its head, a piece of its body owed to the reader (framed as a
    /// chunk when the answer had no length), its end, or its failure.
    fn received(&mut self, r: Recv) -> io::Result<()> {
        let id = match self.state {
            State::Awaiting(id) | State::Body(id) => id,
            State::Idle | State::Ended => return Ok(()),
        };
        match r {
            Recv::Head(head, chunked) => {
                self.chunked = chunked;
                self.head = Some(head);
                self.state = State::Body(id);
            }
            Recv::Data(data) => {
                // Copied out as it is read: the window is given back as it is.
                self.link.release(id, data.len());
                if self.chunked {
                    let n = crate::http::chunk::size_line(data.len(), &mut self.line);
                    (self.line_len, self.line_at) = (n as u8, 0);
                    self.tail = b"\r\n";
                }
                self.pending = data;
            }
            Recv::End => {
                if self.chunked {
                    self.tail = b"0\r\n\r\n";
                }
                self.state = State::Ended;
            }
            Recv::Failed(failure, why) => {
                self.failure = Some(failure);
                self.state = State::Ended;
                let kind = match failure {
                    Failure::Refused => io::ErrorKind::ConnectionRefused,
                    _ => io::ErrorKind::ConnectionReset,
                };
                return Err(io::Error::new(kind, format!("HTTP/2: {why}")));
            }
        }
        Ok(())
    }
}

impl Drop for H2Stream {
    fn drop(&mut self) {
        // A stream whose whole answer came (to the length its head gave) is left to end on
        // its own, its END_STREAM a frame behind: the connection counts it open until then.
        let left_to_end = self.id != 0 && self.link.close(self.id);
        if !left_to_end {
            self.shared.stream_closed();
        }
    }
}
