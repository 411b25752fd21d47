//! One HTTP/2 connection's protocol state, without I/O: frames received are fed in
//! ([`Link::receive`]), what must be sent gathers in one buffer for the connection's task to
//! write ([`Link::take_out`]), and each stream's answer waits in its slot for the request
//! that opened it ([`Link::poll_recv`]). The connection's task, the pool and the streams share
//! it on one core (`Rc`, a `RefCell` never borrowed across an await).
//!
//! Flow control: each stream may receive [`STREAM_WINDOW`] bytes and the connection
//! [`CONNECTION_WINDOW`] before the reader gives them back (as it reads them), so an event
//! stream never waits on a `WINDOW_UPDATE` and a slow client holds at most a window of its
//! answer in memory. A request body larger than the server's windows waits in its slot and
//! goes as `WINDOW_UPDATE`s open them.

mod ending;
mod frames;
mod goaway;
pub use goaway::goaways_received;

use super::shared::{Failure, Shared};
use crate::http::h2frame::{self as frame, Reason};
use crate::http::hpack::Decoder;
use bytes::{Bytes, BytesMut};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

/// Each stream's receive window.
pub const STREAM_WINDOW: u32 = 1 << 20;
/// The connection's receive window: room for many streams' answers at once.
pub const CONNECTION_WINDOW: u32 = 16 << 20;
/// The largest response header list accepted (names, values and 32 bytes per field).
const MAX_HEADER_LIST: usize = 64 << 10;
/// The largest header block gathered across CONTINUATION frames.
const MAX_HEADER_BLOCK: usize = 256 << 10;

/// What a stream's reader gets next.
pub enum Recv {
    /// The answer's head (its bytes the HTTP/1.1 head it spells); `chunked`: its body is
    /// framed as chunks.
    Head(crate::http::head::Head, bool),
    Data(Bytes),
    End,
    Failed(Failure, String),
}

struct Slot {
    id: u32,
    queue: VecDeque<Recv>,
    /// The final head came (later HEADERS are trailers).
    headed: bool,
    /// Nothing more will come: the end or a failure is queued.
    done: bool,
    waker: Option<Waker>,
    /// What the server lets us send on it.
    send_window: i64,
    /// The request body not yet sent (waiting for window).
    body: Bytes,
    /// The request's END_STREAM is sent.
    sent_all: bool,
    /// Body bytes the answer's head promised and that have not come yet (`None`: no head
    /// yet, or one that gave no length).
    promised: Option<u64>,
    /// Bytes read and not yet given back to its window.
    consumed: u32,
    /// What the server may still send on it before we give room back.
    recv_window: i64,
}

impl Slot {
    fn push(&mut self, r: Recv) {
        if self.done {
            return;
        }
        self.done = matches!(r, Recv::End | Recv::Failed(..));
        self.queue.push_back(r);
        if let Some(w) = self.waker.take() {
            w.wake();
        }
    }

    fn fail(&mut self, f: Failure, why: &str) {
        self.push(Recv::Failed(f, why.to_string()));
    }
}

/// Whether the connection's PING is answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PingState {
    Idle,
    /// A PING is out, sent at this count of PINGs.
    Waiting(u64),
}

struct State {
    out: Vec<u8>,
    writer: Option<Waker>,
    streams: Vec<Slot>,
    /// Streams read whole whose END_STREAM is still to come, with when their reader left
    /// (`ending`), oldest first.
    ending: Vec<(u32, u64)>,
    next_id: u32,
    peer_window: i64,
    peer_max_frame: usize,
    send_window: i64,
    consumed: u32,
    /// What the server may still send on the connection before we give room back.
    recv_window: i64,
    decoder: Decoder,
    /// A header block arriving in CONTINUATION frames: its stream, END_STREAM, its bytes.
    continuing: Option<(u32, bool, Vec<u8>)>,
    goaway: Option<u32>,
    /// The connection failed: no stream goes on, the task ends.
    dead: bool,
    /// No one holds it for new streams any more (the pool let it go).
    released: bool,
    ping: PingState,
    pings: u64,
    shared: Rc<Shared>,
}

/// A connection error: what to tell the server, and why for the log and the streams.
pub struct ConnError(pub Reason, pub &'static str);

pub struct Link {
    st: RefCell<State>,
    pub shared: Rc<Shared>,
}

impl Link {
    /// A connection whose preface, SETTINGS and window are queued to be written first.
    pub fn new(shared: Rc<Shared>) -> Link {
        let mut out = Vec::with_capacity(4096);
        out.extend_from_slice(frame::PREFACE);
        frame::settings(
            &mut out,
            &[
                (frame::ENABLE_PUSH, 0),
                (frame::INITIAL_WINDOW_SIZE, STREAM_WINDOW),
                (frame::MAX_HEADER_LIST_SIZE, MAX_HEADER_LIST as u32),
            ],
        );
        frame::window_update(&mut out, 0, CONNECTION_WINDOW - 65_535);
        Link {
            st: RefCell::new(State {
                out,
                writer: None,
                streams: Vec::new(),
                ending: Vec::new(),
                next_id: 1,
                peer_window: 65_535,
                peer_max_frame: frame::DEFAULT_MAX_FRAME,
                send_window: 65_535,
                consumed: 0,
                recv_window: i64::from(CONNECTION_WINDOW),
                decoder: Decoder::new(4096),
                continuing: None,
                goaway: None,
                dead: false,
                released: false,
                ping: PingState::Idle,
                pings: 0,
                shared: shared.clone(),
            }),
            shared,
        }
    }

    /// Whether new streams may go on it.
    pub fn usable(&self) -> bool {
        let s = self.st.borrow();
        !s.dead && s.goaway.is_none() && !s.released && s.next_id < (1 << 31) - 2
    }

    /// Open a stream: `request` writes its header block and gives its body, which follows as
    /// DATA. Returns the stream's id.
    pub fn open(
        &self,
        request: impl FnOnce(&mut Vec<u8>) -> std::io::Result<Bytes>,
    ) -> std::io::Result<u32> {
        let s = &mut *self.st.borrow_mut();
        if s.dead || s.goaway.is_some() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::ConnectionRefused,
                "HTTP/2: the connection takes no new streams",
            ));
        }
        // The header block is encoded straight into the frames to write.
        let at = frame::headers_begin(&mut s.out);
        let body = request(&mut s.out).inspect_err(|_| s.out.truncate(at))?;
        let id = s.next_id;
        s.next_id += 2;
        frame::headers_end(&mut s.out, at, id, body.is_empty(), s.peer_max_frame);
        s.streams.push(Slot {
            id,
            queue: VecDeque::new(),
            headed: false,
            done: false,
            waker: None,
            send_window: s.peer_window,
            sent_all: body.is_empty(),
            promised: None,
            body,
            consumed: 0,
            recv_window: i64::from(STREAM_WINDOW),
        });
        let at = s.streams.len() - 1;
        s.pump(at);
        s.wake_writer();
        Ok(id)
    }

    /// The next thing stream `id`'s reader gets, or `Pending` (woken when it comes).
    pub fn poll_recv(&self, id: u32, cx: &Context<'_>) -> Poll<Recv> {
        let s = &mut *self.st.borrow_mut();
        let Some(slot) = s.streams.iter_mut().find(|x| x.id == id) else {
            return Poll::Ready(Recv::Failed(
                Failure::ConnectionLost,
                "no such stream".into(),
            ));
        };
        match slot.queue.pop_front() {
            Some(r) => Poll::Ready(r),
            None => {
                if !slot.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                    slot.waker = Some(cx.waker().clone());
                }
                Poll::Pending
            }
        }
    }

    /// `n` bytes of stream `id`'s answer were read: their room is given back to both windows
    /// once half of either is used.
    pub fn release(&self, id: u32, n: usize) {
        let s = &mut *self.st.borrow_mut();
        let n = n as u32;
        if let Some(slot) = s.streams.iter_mut().find(|x| x.id == id) {
            slot.consumed += n;
            if slot.consumed >= STREAM_WINDOW / 2 && !slot.done {
                frame::window_update(&mut s.out, id, slot.consumed);
                slot.recv_window += i64::from(slot.consumed);
                slot.consumed = 0;
                s.wake_writer();
            }
        }
        s.give_back(n);
    }

    /// The pool let the connection go: it ends once its last stream does.
    pub fn release_conn(&self) {
        let s = &mut *self.st.borrow_mut();
        s.released = true;
        s.wake_writer();
    }

    /// The connection closes cleanly: a GOAWAY(NO_ERROR) is queued, unless it failed.
    pub fn say_goodbye(&self) {
        let s = &mut *self.st.borrow_mut();
        if !s.dead {
            frame::goaway(&mut s.out, 0, Reason::NO_ERROR);
        }
    }

    /// Whether the connection's task should end: it failed, or it is let go (or told to go
    /// away) with no stream left.
    pub fn finished(&self) -> bool {
        self.st.borrow().finished()
    }

    /// The bytes to write, swapped with `spare` (an empty buffer to gather the next ones).
    pub fn take_out(&self, spare: &mut Vec<u8>) {
        spare.clear();
        std::mem::swap(&mut self.st.borrow_mut().out, spare);
    }

    /// Wait until there is something to write or the connection should end.
    pub fn poll_out(&self, cx: &Context<'_>) -> Poll<()> {
        let s = &mut *self.st.borrow_mut();
        if !s.out.is_empty() || s.finished() {
            return Poll::Ready(());
        }
        if !s.writer.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            s.writer = Some(cx.waker().clone());
        }
        Poll::Pending
    }

    /// Send a PING; its answer sets [`PingState::Idle`] again.
    pub fn ping_due(&self) {
        let s = &mut *self.st.borrow_mut();
        s.pings += 1;
        frame::ping(&mut s.out, false, s.pings.to_be_bytes());
        s.ping = PingState::Waiting(s.pings);
        s.wake_writer();
    }

    pub fn ping_state(&self) -> PingState {
        self.st.borrow().ping
    }

    /// The connection is lost (closed, reset, an I/O error): every stream fails once.
    pub fn lost(&self, why: &str) {
        self.st.borrow_mut().lost(why);
    }

    /// Frames received, at the front of `buf`: each whole one is handled and taken off.
    /// A protocol error fails the connection (a GOAWAY with its reason is queued).
    pub fn receive(&self, buf: &mut BytesMut) -> Result<(), ConnError> {
        let s = &mut *self.st.borrow_mut();
        let r = s.receive(buf);
        if let Err(e) = &r {
            // A client names the last stream the server pushed: none.
            frame::goaway(&mut s.out, 0, e.0);
            s.lost(e.1);
        }
        // No wake: the connection's task, the only caller, writes what this queued on its
        // next turn (waking it would poll it once more for nothing, on every read).
        r
    }
}

impl State {
    fn finished(&self) -> bool {
        self.dead || ((self.released || self.goaway.is_some()) && self.streams.is_empty())
    }

    fn wake_writer(&mut self) {
        if let Some(w) = self.writer.take() {
            w.wake();
        }
    }

    fn give_back(&mut self, n: u32) {
        self.consumed += n;
        if self.consumed >= CONNECTION_WINDOW / 2 {
            frame::window_update(&mut self.out, 0, self.consumed);
            self.recv_window += i64::from(self.consumed);
            self.consumed = 0;
        }
    }

    fn lost(&mut self, why: &str) {
        self.dead = true;
        self.forget_left();
        self.shared.close();
        for slot in &mut self.streams {
            slot.fail(Failure::ConnectionLost, why);
        }
        self.wake_writer();
    }

    /// Send what stream `at`'s body may send now.
    fn pump(&mut self, at: usize) {
        let max = self.peer_max_frame;
        let slot = &mut self.streams[at];
        while !slot.sent_all && slot.send_window > 0 && self.send_window > 0 {
            let n = slot
                .body
                .len()
                .min(max)
                .min(slot.send_window as usize)
                .min(self.send_window as usize);
            let part = slot.body.split_to(n);
            let end = slot.body.is_empty();
            frame::data(&mut self.out, slot.id, &part, end);
            slot.send_window -= n as i64;
            self.send_window -= n as i64;
            slot.sent_all = end;
        }
    }
}

#[cfg(test)]
mod tests;
