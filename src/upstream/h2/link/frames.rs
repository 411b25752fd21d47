//! The frames a server sends, each applied to the connection's state: answers and their
//! bodies into their streams' slots, resets, SETTINGS, PINGs, GOAWAY and window updates.
//! An `Err` is a connection error (RFC 9113 §5.4.1); a stream's own trouble fails that
//! stream alone and resets it.

use super::super::answer::{self, Answer};
use super::{ConnError, Failure, MAX_HEADER_BLOCK, MAX_HEADER_LIST, PingState, Recv, Slot, State};
use crate::http::h2frame::{self as frame, Head, Kind, Reason};
use crate::http::head::Framing;
use bytes::{Bytes, BytesMut};

impl State {
    pub(super) fn receive(&mut self, buf: &mut BytesMut) -> Result<(), ConnError> {
        while let Some(h) = frame::parse_head(buf) {
            if h.len > frame::DEFAULT_MAX_FRAME {
                return Err(ConnError(Reason::FRAME_SIZE_ERROR, "a frame over 16 KiB"));
            }
            if buf.len() < frame::HEADER_LEN + h.len {
                buf.reserve(frame::HEADER_LEN + h.len - buf.len());
                return Ok(());
            }
            let whole = buf.split_to(frame::HEADER_LEN + h.len).freeze();
            let payload = whole.slice(frame::HEADER_LEN..);
            if self.continuing.is_some() && h.kind != Kind::Continuation {
                return Err(ConnError(
                    Reason::PROTOCOL_ERROR,
                    "a frame inside a header block",
                ));
            }
            self.frame(h, payload)?;
        }
        Ok(())
    }

    fn frame(&mut self, h: Head, payload: Bytes) -> Result<(), ConnError> {
        match h.kind {
            Kind::Data => self.data(h, payload),
            Kind::Headers => {
                let fragment = frame::header_fragment(&payload, h.flags)
                    .ok_or(ConnError(Reason::PROTOCOL_ERROR, "bad HEADERS padding"))?;
                let end_stream = h.flags & frame::END_STREAM != 0;
                if h.flags & frame::END_HEADERS != 0 {
                    self.headers(h.stream, end_stream, fragment)
                } else {
                    self.continuing = Some((h.stream, end_stream, fragment.to_vec()));
                    Ok(())
                }
            }
            Kind::Continuation => {
                let Some((id, end, mut block)) = self.continuing.take() else {
                    return Err(ConnError(Reason::PROTOCOL_ERROR, "a stray CONTINUATION"));
                };
                if id != h.stream || block.len() + payload.len() > MAX_HEADER_BLOCK {
                    return Err(ConnError(Reason::PROTOCOL_ERROR, "a bad CONTINUATION"));
                }
                block.extend_from_slice(&payload);
                if h.flags & frame::END_HEADERS != 0 {
                    self.headers(id, end, &block)
                } else {
                    self.continuing = Some((id, end, block));
                    Ok(())
                }
            }
            Kind::RstStream => self.reset(h, &payload),
            Kind::Settings => self.settings(h, &payload),
            Kind::Ping => {
                let p: [u8; 8] = payload[..]
                    .try_into()
                    .map_err(|_| ConnError(Reason::FRAME_SIZE_ERROR, "a PING not 8 bytes"))?;
                if h.flags & frame::ACK == 0 {
                    frame::ping(&mut self.out, true, p);
                } else if self.ping == PingState::Waiting(u64::from_be_bytes(p)) {
                    self.ping = PingState::Idle;
                }
                Ok(())
            }
            Kind::GoAway => self.goaway(&payload),
            Kind::WindowUpdate => self.window_update(h, &payload),
            Kind::PushPromise => Err(ConnError(Reason::PROTOCOL_ERROR, "a push, disabled")),
            Kind::Priority | Kind::Unknown(_) => Ok(()),
        }
    }

    fn slot(&mut self, id: u32) -> Option<&mut Slot> {
        self.streams.iter_mut().find(|x| x.id == id)
    }

    /// A stream id the server may not name: ours not yet opened, or one of its own.
    fn idle(&self, id: u32) -> bool {
        id == 0 || id >= self.next_id || id.is_multiple_of(2)
    }

    fn data(&mut self, h: Head, payload: Bytes) -> Result<(), ConnError> {
        if self.idle(h.stream) {
            return Err(ConnError(Reason::PROTOCOL_ERROR, "DATA on an idle stream"));
        }
        let whole = payload.len() as u32;
        // Windows are counted on whole frames, padding included (RFC 9113 §6.9.1).
        self.recv_window -= i64::from(whole);
        if self.recv_window < 0 {
            return Err(ConnError(
                Reason::FLOW_CONTROL_ERROR,
                "DATA beyond the connection's window",
            ));
        }
        let body = frame::unpad(&payload, h.flags)
            .ok_or(ConnError(Reason::PROTOCOL_ERROR, "bad DATA padding"))?;
        let body = payload.slice_ref(body);
        let end = h.flags & frame::END_STREAM != 0;
        let padding = whole - body.len() as u32;
        let Some(slot) = self.streams.iter_mut().find(|x| x.id == h.stream) else {
            // A stream already closed here (its reader went away): its bytes are given back.
            self.give_back(whole);
            if end {
                self.ended(h.stream);
            }
            return Ok(());
        };
        slot.recv_window -= i64::from(whole);
        let refused = if slot.recv_window < 0 {
            Some((
                Reason::FLOW_CONTROL_ERROR,
                "DATA beyond the stream's window",
            ))
        } else if !slot.headed {
            // Malformed (RFC 9113 §8.1.1): the stream is reset, so the server stops sending.
            Some((Reason::PROTOCOL_ERROR, "DATA before the answer's head"))
        } else if slot.promised.is_some_and(|p| body.len() as u64 > p) {
            // Malformed too: more than the head's content-length. Passed on, the reader would
            // stop at the length and take the first part of an answer for all of it.
            Some((
                Reason::PROTOCOL_ERROR,
                "DATA beyond the answer's content-length",
            ))
        } else {
            None
        };
        if let Some((reason, why)) = refused {
            slot.fail(Failure::Reset, why);
            frame::rst_stream(&mut self.out, h.stream, reason);
            self.give_back(whole);
            return Ok(());
        }
        if !body.is_empty() {
            if let Some(p) = &mut slot.promised {
                *p -= body.len() as u64;
            }
            slot.push(Recv::Data(body));
        }
        if end {
            slot.push(Recv::End);
        }
        // Padding is never read: given back at once.
        self.give_back(padding);
        Ok(())
    }

    fn headers(&mut self, id: u32, end_stream: bool, block: &[u8]) -> Result<(), ConnError> {
        if self.idle(id) {
            return Err(ConnError(
                Reason::PROTOCOL_ERROR,
                "HEADERS on an idle stream",
            ));
        }
        // Decoded whatever happens to the stream: the table must follow the server's.
        let answer = answer::decode(&mut self.decoder, block, MAX_HEADER_LIST, end_stream)
            .map_err(|_| ConnError(Reason::COMPRESSION_ERROR, "a bad header block"))?;
        let Some(slot) = self.streams.iter_mut().find(|x| x.id == id) else {
            if end_stream {
                self.ended(id);
            }
            return Ok(());
        };
        let reset = match (slot.headed, answer) {
            // Trailers: nothing of them is passed on; they end the stream.
            (true, _) if end_stream => {
                slot.push(Recv::End);
                false
            }
            (true, _) => {
                slot.fail(Failure::Reset, "trailers without END_STREAM");
                true
            }
            (false, Answer::Informational) => false,
            (false, Answer::Final { head, chunked }) => {
                slot.headed = true;
                slot.promised = match head.framing {
                    Framing::Length(n) => Some(n),
                    Framing::Empty => Some(0),
                    Framing::Chunked | Framing::Close => None,
                };
                slot.push(Recv::Head(head, chunked));
                if end_stream {
                    slot.push(Recv::End);
                }
                false
            }
            (false, Answer::Malformed(why)) => {
                slot.fail(Failure::Reset, why);
                true
            }
        };
        if reset {
            frame::rst_stream(&mut self.out, id, Reason::PROTOCOL_ERROR);
        }
        Ok(())
    }

    fn reset(&mut self, h: Head, payload: &[u8]) -> Result<(), ConnError> {
        let code: [u8; 4] = payload
            .try_into()
            .map_err(|_| ConnError(Reason::FRAME_SIZE_ERROR, "an RST_STREAM not 4 bytes"))?;
        if self.idle(h.stream) {
            return Err(ConnError(
                Reason::PROTOCOL_ERROR,
                "RST_STREAM on an idle stream",
            ));
        }
        let reason = Reason(u32::from_be_bytes(code));
        if reason == Reason::HTTP_1_1_REQUIRED {
            // The server will not take this request over HTTP/2: unprocessed, it goes again
            // over HTTP/1.1, and so does every later one (no new stream here).
            self.shared.wants_http1.set(true);
            self.shared.close();
        }
        if let Some(slot) = self.slot(h.stream) {
            let f = if reason == Reason::REFUSED_STREAM || reason == Reason::HTTP_1_1_REQUIRED {
                Failure::Refused
            } else {
                Failure::Reset
            };
            slot.push(Recv::Failed(f, format!("stream reset: {reason}")));
            // Nothing more is sent on it.
            slot.sent_all = true;
            slot.body = Bytes::new();
        } else {
            self.ended(h.stream);
        }
        Ok(())
    }

    fn settings(&mut self, h: Head, payload: &[u8]) -> Result<(), ConnError> {
        if h.flags & frame::ACK != 0 || h.stream != 0 {
            return Ok(());
        }
        if !payload.len().is_multiple_of(6) {
            return Err(ConnError(Reason::FRAME_SIZE_ERROR, "SETTINGS not in 6s"));
        }
        // A first SETTINGS that names no limit sets none (RFC 9113 §6.5.2).
        if !self.shared.settled.get() {
            self.shared.peer_max.set(usize::MAX);
        }
        for s in payload.chunks_exact(6) {
            let id = u16::from_be_bytes([s[0], s[1]]);
            let v = u32::from_be_bytes([s[2], s[3], s[4], s[5]]);
            match id {
                frame::MAX_CONCURRENT_STREAMS => self.shared.peer_max.set(v as usize),
                frame::INITIAL_WINDOW_SIZE => {
                    if i64::from(v) > frame::MAX_WINDOW {
                        return Err(ConnError(Reason::FLOW_CONTROL_ERROR, "a window too large"));
                    }
                    let delta = i64::from(v) - self.peer_window;
                    self.peer_window = i64::from(v);
                    for slot in &mut self.streams {
                        slot.send_window += delta;
                    }
                }
                frame::MAX_FRAME_SIZE => {
                    if !(16_384..=16_777_215).contains(&v) {
                        return Err(ConnError(Reason::PROTOCOL_ERROR, "a bad MAX_FRAME_SIZE"));
                    }
                    self.peer_max_frame = v as usize;
                }
                _ => {}
            }
        }
        frame::settings_ack(&mut self.out);
        for at in 0..self.streams.len() {
            self.pump(at);
        }
        self.shared.settle();
        Ok(())
    }

    fn goaway(&mut self, payload: &[u8]) -> Result<(), ConnError> {
        if payload.len() < 8 {
            return Err(ConnError(
                Reason::FRAME_SIZE_ERROR,
                "a GOAWAY under 8 bytes",
            ));
        }
        let last =
            u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]) & 0x7fff_ffff;
        let reason = Reason(u32::from_be_bytes([
            payload[4], payload[5], payload[6], payload[7],
        ]));
        super::goaway::received(&self.shared, reason, &payload[8..]);
        // A second GOAWAY may only lower the last stream id.
        let last = self.goaway.map_or(last, |l| l.min(last));
        self.goaway = Some(last);
        self.shared.closed.set(true);
        self.shared.settle();
        let why = format!("GOAWAY ({reason}): not processed");
        for slot in self.streams.iter_mut().filter(|x| x.id > last) {
            slot.push(Recv::Failed(Failure::Refused, why.clone()));
        }
        Ok(())
    }

    fn window_update(&mut self, h: Head, payload: &[u8]) -> Result<(), ConnError> {
        let inc: [u8; 4] = payload
            .try_into()
            .map_err(|_| ConnError(Reason::FRAME_SIZE_ERROR, "a WINDOW_UPDATE not 4 bytes"))?;
        let inc = i64::from(u32::from_be_bytes(inc) & 0x7fff_ffff);
        if h.stream == 0 {
            if inc == 0 || self.send_window + inc > frame::MAX_WINDOW {
                return Err(ConnError(
                    Reason::FLOW_CONTROL_ERROR,
                    "a bad connection window",
                ));
            }
            self.send_window += inc;
            for at in 0..self.streams.len() {
                self.pump(at);
            }
        } else if let Some(at) = self.streams.iter().position(|x| x.id == h.stream) {
            let slot = &mut self.streams[at];
            if inc == 0 || slot.send_window + inc > frame::MAX_WINDOW {
                slot.fail(Failure::Reset, "a bad stream window");
                frame::rst_stream(&mut self.out, h.stream, Reason::FLOW_CONTROL_ERROR);
                return Ok(());
            }
            slot.send_window += inc;
            self.pump(at);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{answer, data, feed, headers, link, open, recv, sent};
    use super::super::*;

    #[test]
    fn data_beyond_the_content_length_resets_the_stream_after_what_fitted() {
        let l = link();
        let id = open(&l, b"");
        let _ = sent(&l);
        let mut frames = headers(id, &answer("200", &[("content-length", "5")]), false);
        frames.extend(data(id, b"{\"id\"", false));
        frames.extend(data(id, b":1}", true));
        feed(&l, &frames).expect("a stream's error");
        assert!(matches!(recv(&l, id), Some(Recv::Head(..))));
        assert!(matches!(recv(&l, id), Some(Recv::Data(d)) if &d[..] == b"{\"id\""));
        assert!(
            matches!(recv(&l, id), Some(Recv::Failed(Failure::Reset, why)) if why.contains("content-length")),
            "not an end: the reader would take five bytes for the whole answer"
        );
        let out = sent(&l);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].1, Reason::PROTOCOL_ERROR.0.to_be_bytes());
    }

    #[test]
    fn a_header_list_over_the_limit_loses_its_stream_not_the_connection() {
        let l = link();
        let (big, small) = (open(&l, b""), open(&l, b""));
        let _ = sent(&l);
        let value = "v".repeat(1_000);
        let many: Vec<(String, &str)> = (0..80).map(|i| (format!("x-{i}"), &value[..])).collect();
        let fields: Vec<(&str, &str)> = many.iter().map(|(n, v)| (n.as_str(), *v)).collect();
        let mut frames = headers(big, &answer("200", &fields), true);
        frames.extend(headers(
            small,
            &answer("200", &[("content-length", "0")]),
            true,
        ));
        feed(&l, &frames).expect("the stream's error, not the connection's");
        assert!(
            matches!(recv(&l, big), Some(Recv::Failed(Failure::Reset, why)) if why.contains("over the limit"))
        );
        assert!(matches!(recv(&l, small), Some(Recv::Head(..))));
        assert!(l.usable());
        let out = sent(&l);
        assert_eq!(
            (out.len(), out[0].0.stream),
            (1, big),
            "only its stream reset"
        );
    }
}
