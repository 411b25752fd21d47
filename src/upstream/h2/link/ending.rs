//! How a stream's reader leaving ends it. Most often the whole answer came first: read to
//! the length its head gave, with the END_STREAM still a frame behind (nginx, for one, sends
//! it in a DATA frame of its own). Such a stream is left to end on its own rather than reset:
//! a reset of a stream the server answered in full reads at the provider as a request its
//! client cancelled, and costs both sides a frame on every request. The connection counts it
//! open until it ends, as the server does, and resets any the server leaves open past
//! [`GRACE_MS`]. A stream left before its answer came whole is reset at once (CANCEL).

use super::{Link, Reason, Recv, State, frame};

/// How long a stream answered whole may wait for its end before it is reset.
pub const GRACE_MS: u64 = 1_000;
/// The most left to end at once on one connection; beyond it the oldest is reset.
const MOST: usize = 64;

impl Link {
    /// The stream's reader is gone. It is reset, unless it is over both ways or its whole
    /// answer came (then it is left to end on its own, and `true` says so: it still counts
    /// open). What its reader had not read goes back to the connection's window.
    pub fn close(&self, id: u32) -> bool {
        let s = &mut *self.st.borrow_mut();
        let Some(at) = s.streams.iter().position(|x| x.id == id) else {
            return false;
        };
        let slot = s.streams.swap_remove(at);
        let unread: usize = slot
            .queue
            .iter()
            .map(|r| match r {
                Recv::Data(b) => b.len(),
                _ => 0,
            })
            .sum();
        let over = s.dead || slot.done && slot.sent_all;
        let left = !over && slot.sent_all && slot.promised == Some(0);
        if left {
            s.leave_to_end(id, crate::clock::now_ms());
        } else if !over {
            frame::rst_stream(&mut s.out, id, Reason::CANCEL);
        }
        s.give_back(unread as u32);
        // Woken only for something to do: a frame to write, or its end (the last stream of a
        // connection let go). Most streams end whole with nothing to say, and a poll of the
        // connection's task for nothing was one more per request.
        if !s.out.is_empty() || s.finished() {
            s.wake_writer();
        }
        left
    }

    /// Reset the streams answered whole that the server left open too long (a second;
    /// run on a tick).
    pub fn expire_left(&self, now_ms: u64) {
        let s = &mut *self.st.borrow_mut();
        s.expire_left(now_ms);
        if !s.out.is_empty() {
            s.wake_writer();
        }
    }
}

impl State {
    /// Leave stream `id`, answered whole, to end on its own; `now_ms` on the core's clock.
    fn leave_to_end(&mut self, id: u32, now_ms: u64) {
        if self.ending.len() >= MOST {
            let (oldest, _) = self.ending.remove(0);
            self.reset_left(oldest);
        }
        self.ending.push((id, now_ms));
    }

    /// The server ended stream `id` (its END_STREAM, or a reset): if it was left to end, it
    /// is closed now.
    pub(super) fn ended(&mut self, id: u32) {
        if let Some(at) = self.ending.iter().position(|&(x, _)| x == id) {
            self.ending.remove(at);
            self.shared.stream_closed();
        }
    }

    /// Reset the streams left to end before `now_ms - GRACE_MS` (oldest first in the list).
    pub(super) fn expire_left(&mut self, now_ms: u64) {
        while let Some(&(id, since)) = self.ending.first()
            && now_ms.saturating_sub(since) >= GRACE_MS
        {
            self.ending.remove(0);
            self.reset_left(id);
        }
    }

    /// The connection is gone: the streams left to end are closed with it.
    pub(super) fn forget_left(&mut self) {
        for _ in self.ending.drain(..) {
            self.shared.stream_closed();
        }
    }

    fn reset_left(&mut self, id: u32) {
        frame::rst_stream(&mut self.out, id, Reason::CANCEL);
        self.shared.stream_closed();
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{answer, data, feed, headers, link, open, recv, sent};
    use super::super::*;
    use super::{GRACE_MS, MOST};
    use crate::http::h2frame::Kind;

    /// A stream whose 5-byte answer came whole without its END_STREAM.
    fn answered(l: &Link) -> u32 {
        let id = open(l, b"");
        l.shared.open.set(l.shared.open.get() + 1);
        let head = answer("200", &[("content-length", "5")]);
        feed(l, &headers(id, &head, false)).expect("head");
        feed(l, &data(id, b"hello", false)).expect("body");
        assert!(matches!(recv(l, id), Some(Recv::Head(..))));
        assert!(matches!(recv(l, id), Some(Recv::Data(d)) if &d[..] == b"hello"));
        id
    }

    fn resets(l: &Link) -> Vec<u32> {
        let f = sent(l);
        f.iter()
            .filter(|(h, _)| h.kind == Kind::RstStream)
            .map(|(h, _)| h.stream)
            .collect()
    }

    #[test]
    fn a_stream_read_whole_waits_for_its_end_instead_of_a_reset() {
        let l = link();
        let id = answered(&l);
        let _ = sent(&l);
        assert!(l.close(id), "left to end");
        assert!(sent(&l).is_empty(), "no RST_STREAM for an answered request");
        assert_eq!(l.shared.open.get(), 1, "counted open until its end");
        feed(&l, &data(id, b"", true)).expect("its END_STREAM");
        assert_eq!(l.shared.open.get(), 0);
        assert!(sent(&l).is_empty());
        // Ended once: a stray frame for it later changes nothing.
        feed(&l, &data(id, b"", true)).expect("ignored");
        assert_eq!(l.shared.open.get(), 0);
    }

    #[test]
    fn its_end_may_be_trailers_or_a_reset_from_the_server() {
        let l = link();
        let (a, b) = (answered(&l), answered(&l));
        assert!(l.close(a) && l.close(b));
        feed(&l, &headers(a, &answer("200", &[]), true)).expect("trailers");
        let mut rst = Vec::new();
        frame::rst_stream(&mut rst, b, Reason::NO_ERROR);
        feed(&l, &rst).expect("a reset");
        assert_eq!(l.shared.open.get(), 0);
        assert!(resets(&l).is_empty());
    }

    #[test]
    fn a_stream_the_server_leaves_open_is_reset_after_the_grace() {
        let l = link();
        let id = answered(&l);
        let before = crate::clock::now_ms();
        assert!(l.close(id));
        let after = crate::clock::now_ms();
        l.expire_left(before + GRACE_MS - 1);
        assert!(resets(&l).is_empty(), "within the grace");
        assert_eq!(l.shared.open.get(), 1);
        l.expire_left(after + GRACE_MS);
        assert_eq!(resets(&l), [id], "reset once the grace is over");
        assert_eq!(l.shared.open.get(), 0);
        l.expire_left(after + 10 * GRACE_MS);
        assert!(resets(&l).is_empty(), "and only once");
    }

    #[test]
    fn a_stream_not_answered_whole_or_still_sending_is_reset_at_once() {
        let l = link();
        let id = open(&l, b"");
        let head = answer("200", &[("content-length", "5")]);
        feed(&l, &headers(id, &head, false)).expect("head");
        feed(&l, &data(id, b"hell", false)).expect("most of the body");
        let _ = sent(&l);
        assert!(!l.close(id), "a byte of its answer still to come");
        assert_eq!(resets(&l), [id]);
        let id = open(&l, b"");
        feed(&l, &headers(id, &answer("200", &[]), false)).expect("a head with no length");
        assert!(!l.close(id));
        assert_eq!(resets(&l), [id]);
        // Answered while its body still waits for window: the server must stop expecting it.
        let id = l
            .open(|out| {
                crate::http::hpack::encode::method(out, b"POST");
                Ok(Bytes::from(vec![b'x'; 100_000]))
            })
            .expect("opens");
        feed(
            &l,
            &headers(id, &answer("413", &[("content-length", "0")]), false),
        )
        .expect("head");
        let _ = sent(&l);
        assert!(!l.close(id));
        assert_eq!(resets(&l), [id]);
    }

    #[test]
    fn too_many_left_to_end_reset_the_oldest_and_a_lost_connection_closes_them() {
        let l = link();
        let ids: Vec<u32> = (0..=MOST).map(|_| answered(&l)).collect();
        let _ = sent(&l);
        for id in &ids {
            assert!(l.close(*id));
        }
        assert_eq!(resets(&l), [ids[0]], "the oldest made room");
        assert_eq!(l.shared.open.get(), MOST);
        l.lost("gone");
        assert_eq!(l.shared.open.get(), 0, "closed with their connection");
    }
}
