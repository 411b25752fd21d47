//! Where an upstream body ends, and whether what went to the client so far ends cleanly.
//!
//! The relay forwards each upstream read as it comes. When a stream fails after it started
//! (reset, cut short, broken framing, a timeout), Ringside ends it with an error event in the
//! client's dialect, but only where the bytes sent so far end between two chunks and between
//! two events: an event appended inside an unfinished chunk would corrupt the client's chunked
//! framing, and one appended inside an unfinished event would merge into it. Anywhere else the
//! connection is closed without a last chunk, which every HTTP client reports as a cut body.

use crate::http::chunk::ChunkTracker;
use crate::sse::Scanner;
use bytes::{Bytes, BytesMut};

/// Tracks where the upstream body ends.
pub enum BodyEnd {
    Length(u64),
    Chunked(ChunkTracker),
    Close,
    None,
}

impl BodyEnd {
    /// Split off the body bytes at the front of `buf`. Returns (bytes, body finished).
    /// Bytes past the end of the body mean the upstream misbehaved: they are dropped.
    /// The SSE scanner, if any, reads the payload along (no copy).
    pub fn take(
        &mut self,
        buf: &mut BytesMut,
        mut sse: Option<&mut Scanner>,
        edge: &mut EventEdge,
    ) -> Result<(Bytes, bool, bool), ()> {
        let mut scan = |p: &[u8]| {
            edge.push(p);
            if let Some(s) = sse.as_deref_mut() {
                s.feed(p, |_| {});
            }
        };
        match self {
            BodyEnd::Length(left) => {
                let n = (*left).min(buf.len() as u64) as usize;
                *left -= n as u64;
                let extra = buf.len() > n;
                let out = buf.split_to(n).freeze();
                if extra {
                    buf.clear();
                }
                scan(&out);
                Ok((out, *left == 0, extra))
            }
            BodyEnd::Chunked(t) => {
                let used = t.feed(buf, &mut scan).map_err(|_| ())?;
                let extra = used < buf.len();
                let out = buf.split_to(used).freeze();
                if extra {
                    buf.clear();
                }
                Ok((out, t.is_done(), extra))
            }
            BodyEnd::Close => {
                let out = buf.split().freeze();
                scan(&out);
                Ok((out, false, false))
            }
            BodyEnd::None => Ok((Bytes::new(), true, !buf.is_empty())),
        }
    }

    /// Whether the wire bytes taken so far end between two chunks (always, unless chunked).
    pub fn between_chunks(&self) -> bool {
        match self {
            BodyEnd::Chunked(t) => t.between_chunks() || t.is_done(),
            _ => true,
        }
    }
}

/// The last payload bytes taken, to tell whether they end between two events (after a blank
/// line, or before anything). Four bytes, copied per read, not per event.
#[derive(Clone, Copy, Debug, Default)]
pub struct EventEdge {
    last: [u8; 4],
    len: u8,
}

impl EventEdge {
    pub fn push(&mut self, p: &[u8]) {
        if p.len() >= 4 {
            self.last.copy_from_slice(&p[p.len() - 4..]);
            self.len = 4;
            return;
        }
        for &b in p {
            self.last.copy_within(1.., 0);
            self.last[3] = b;
            self.len = (self.len + 1).min(4);
        }
    }

    /// Nothing yet, or the payload ends with a blank line (LF, CR or CRLF line ends).
    pub fn between_events(&self) -> bool {
        let l = &self.last[4 - self.len as usize..];
        l.is_empty()
            || l.ends_with(b"\n\n")
            || l.ends_with(b"\r\r")
            || l.ends_with(b"\n\r")
            || l.ends_with(b"\r\n\r\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edge_of(parts: &[&[u8]]) -> bool {
        let mut e = EventEdge::default();
        for p in parts {
            e.push(p);
        }
        e.between_events()
    }

    #[test]
    fn event_edges_across_any_split() {
        assert!(edge_of(&[]));
        for whole in [
            &b"data: {}\n\n"[..],
            b"data: {}\r\n\r\n",
            b"data: {}\r\r",
            b": ping\n\n",
            b"event: a\ndata: 1\n\ndata: 2\n\n",
        ] {
            for cut in 0..=whole.len() {
                let (a, b) = whole.split_at(cut);
                assert!(edge_of(&[a, b]), "{whole:?} cut at {cut}");
                let (x, y) = b.split_at(b.len() / 2);
                assert!(edge_of(&[a, x, y]), "{whole:?} three pieces at {cut}");
            }
        }
        for open in [
            &b"data: {}"[..],
            b"data: {}\n",
            b"data: {}\r\n",
            b"data: {}\n\ndata: {",
            b"event: x\n",
            b"x",
        ] {
            for cut in 0..=open.len() {
                let (a, b) = open.split_at(cut);
                assert!(!edge_of(&[a, b]), "{open:?} cut at {cut}");
            }
        }
    }

    #[test]
    fn chunk_edges() {
        let mut end = BodyEnd::Chunked(ChunkTracker::new());
        let mut edge = EventEdge::default();
        let mut buf = BytesMut::from(&b"5\r\nab"[..]);
        end.take(&mut buf, None, &mut edge).expect("valid");
        assert!(!end.between_chunks(), "inside a chunk");
        let mut buf = BytesMut::from(&b"c\n\n\r\n"[..]);
        end.take(&mut buf, None, &mut edge).expect("valid");
        assert!(end.between_chunks());
        assert!(edge.between_events());
        let mut buf = BytesMut::from(&b"3"[..]);
        end.take(&mut buf, None, &mut edge).expect("valid");
        assert!(!end.between_chunks(), "inside a size line");
        assert!(BodyEnd::Length(10).between_chunks());
    }
}
