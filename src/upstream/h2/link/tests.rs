//! The connection's state machine fed frames by hand: what each stream's reader gets and what
//! is queued for the server, with no socket and no clock.

use super::*;
use crate::http::h2frame::{Head, Kind};
use std::cell::Cell;
use std::task::Waker;

pub(super) fn link() -> Link {
    let shared = Rc::new(Shared {
        peer_max: Cell::new(100),
        ..Shared::default()
    });
    Link::new(shared)
}

/// The frames queued for the server since the last call (the preface skipped).
pub(super) fn sent(l: &Link) -> Vec<(Head, Vec<u8>)> {
    let mut out = Vec::new();
    l.take_out(&mut out);
    let mut b = out.strip_prefix(frame::PREFACE).unwrap_or(&out);
    let mut frames = Vec::new();
    while let Some(h) = frame::parse_head(b) {
        frames.push((h, b[frame::HEADER_LEN..frame::HEADER_LEN + h.len].to_vec()));
        b = &b[frame::HEADER_LEN + h.len..];
    }
    frames
}

pub(super) fn feed(l: &Link, frames: &[u8]) -> Result<(), &'static str> {
    let mut buf = BytesMut::from(frames);
    l.receive(&mut buf).map_err(|e| e.1)
}

pub(super) fn recv(l: &Link, id: u32) -> Option<Recv> {
    match l.poll_recv(id, &Context::from_waker(Waker::noop())) {
        Poll::Ready(r) => Some(r),
        Poll::Pending => None,
    }
}

pub(super) fn open(l: &Link, body: &'static [u8]) -> u32 {
    l.open(|out| {
        crate::http::hpack::encode::method(out, b"POST");
        Ok(Bytes::from_static(body))
    })
    .expect("opens")
}

/// An answer's header block: `:status` and the fields, as raw literals.
pub(super) fn answer(status: &str, fields: &[(&str, &str)]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&[0x08, status.len() as u8]);
    b.extend_from_slice(status.as_bytes());
    for (n, v) in fields {
        crate::http::hpack::encode::field(
            &mut b,
            n.as_bytes(),
            v.as_bytes(),
            crate::http::hpack::encode::Indexing::Without,
        );
    }
    b
}

pub(super) fn headers(id: u32, block: &[u8], end: bool) -> Vec<u8> {
    let mut out = Vec::new();
    frame::headers(&mut out, id, block, end, 16_384);
    out
}

pub(super) fn data(id: u32, bytes: &[u8], end: bool) -> Vec<u8> {
    let mut out = Vec::new();
    frame::data(&mut out, id, bytes, end);
    out
}

#[test]
fn a_request_goes_out_and_its_answer_comes_back_in_order() {
    let l = link();
    let id = open(&l, b"{}");
    let f = sent(&l);
    let kinds: Vec<Kind> = f.iter().map(|(h, _)| h.kind).collect();
    assert_eq!(
        kinds,
        [
            Kind::Settings,
            Kind::WindowUpdate,
            Kind::Headers,
            Kind::Data
        ]
    );
    assert_eq!((f[2].0.stream, f[3].1.as_slice()), (1, &b"{}"[..]));
    assert_eq!(f[3].0.flags, frame::END_STREAM);
    assert!(recv(&l, id).is_none(), "nothing yet");
    let mut frames = headers(
        1,
        &answer("200", &[("content-type", "text/event-stream")]),
        false,
    );
    frames.extend(data(1, b"data: 1\n\n", false));
    frames.extend(data(1, b"", true));
    feed(&l, &frames).expect("frames");
    match recv(&l, id) {
        Some(Recv::Head(head, chunked)) => {
            assert!(chunked);
            assert!(
                head.raw()
                    .starts_with(b"HTTP/1.1 200 \r\ncontent-type: text/event-stream\r\n")
            );
        }
        _ => panic!("the head first"),
    }
    assert!(matches!(recv(&l, id), Some(Recv::Data(d)) if &d[..] == b"data: 1\n\n"));
    assert!(matches!(recv(&l, id), Some(Recv::End)));
    l.close(id);
    assert!(sent(&l).is_empty(), "an ended stream is not reset");
}

#[test]
fn a_frame_split_across_reads_waits_for_its_rest() {
    let l = link();
    let id = open(&l, b"");
    let frames = headers(1, &answer("204", &[]), true);
    let mut buf = BytesMut::from(&frames[..5]);
    assert!(l.receive(&mut buf).is_ok());
    assert_eq!(buf.len(), 5, "kept until whole");
    buf.extend_from_slice(&frames[5..]);
    assert!(l.receive(&mut buf).is_ok());
    assert!(buf.is_empty());
    assert!(
        matches!(recv(&l, id), Some(Recv::Head(h, false)) if h.raw().windows(19).any(|w| w == b"content-length: 0\r\n"))
    );
    assert!(matches!(recv(&l, id), Some(Recv::End)));
}

#[test]
fn settings_are_applied_and_acknowledged() {
    let l = link();
    let _ = sent(&l);
    let mut f = Vec::new();
    frame::settings(
        &mut f,
        &[
            (frame::MAX_CONCURRENT_STREAMS, 5),
            (frame::INITIAL_WINDOW_SIZE, 4),
        ],
    );
    feed(&l, &f).expect("settings");
    assert_eq!(l.shared.peer_max.get(), 5);
    let out = sent(&l);
    assert_eq!(out.len(), 1);
    assert_eq!(
        (out[0].0.kind, out[0].0.flags),
        (Kind::Settings, frame::ACK)
    );
    // A body over the stream's window (4 bytes) waits for a WINDOW_UPDATE.
    let id = open(&l, b"0123456789");
    let out = sent(&l);
    assert_eq!(out.last().map(|(_, p)| p.as_slice()), Some(&b"0123"[..]));
    assert_eq!(out.last().map(|(h, _)| h.flags), Some(0), "not the end yet");
    let mut w = Vec::new();
    frame::window_update(&mut w, id, 100);
    feed(&l, &w).expect("window");
    let out = sent(&l);
    assert_eq!(out[0].1, b"456789");
    assert_eq!(out[0].0.flags, frame::END_STREAM);
}

#[test]
fn goaway_refuses_only_the_streams_above_its_last() {
    let l = link();
    let first = open(&l, b"");
    let second = open(&l, b"");
    let mut g = Vec::new();
    frame::goaway(&mut g, first, Reason::NO_ERROR);
    feed(&l, &g).expect("goaway");
    assert!(!l.usable(), "no new streams");
    let refused = l.open(|_| Ok(Bytes::new())).expect_err("refused");
    assert_eq!(
        refused.kind(),
        std::io::ErrorKind::ConnectionRefused,
        "safe to send again"
    );
    assert!(l.shared.closed.get());
    assert!(matches!(
        recv(&l, second),
        Some(Recv::Failed(Failure::Refused, _))
    ));
    assert!(recv(&l, first).is_none(), "the first runs on");
    feed(
        &l,
        &headers(first, &answer("200", &[("content-length", "0")]), true),
    )
    .expect("answer");
    assert!(matches!(recv(&l, first), Some(Recv::Head(..))));
    assert!(matches!(recv(&l, first), Some(Recv::End)));
    assert!(!l.finished(), "streams still held");
    l.close(first);
    l.close(second);
    assert!(
        l.finished(),
        "told to go away, no stream left: the connection ends"
    );
}

#[test]
fn resets_say_whether_a_retry_is_safe() {
    let l = link();
    let (a, b) = (open(&l, b""), open(&l, b""));
    let mut f = Vec::new();
    frame::rst_stream(&mut f, a, Reason::REFUSED_STREAM);
    frame::rst_stream(&mut f, b, Reason::INTERNAL_ERROR);
    feed(&l, &f).expect("resets");
    assert!(matches!(
        recv(&l, a),
        Some(Recv::Failed(Failure::Refused, _))
    ));
    assert!(
        matches!(recv(&l, b), Some(Recv::Failed(Failure::Reset, w)) if w.contains("INTERNAL_ERROR"))
    );
    assert!(l.usable(), "a stream's reset leaves the connection");
}

#[test]
fn pings_are_answered_and_ours_awaited() {
    let l = link();
    let _ = sent(&l);
    let mut p = Vec::new();
    frame::ping(&mut p, false, *b"12345678");
    feed(&l, &p).expect("ping");
    let out = sent(&l);
    assert_eq!(
        (out[0].0.flags, out[0].1.as_slice()),
        (frame::ACK, &b"12345678"[..])
    );
    l.ping_due();
    let ours = sent(&l);
    assert_eq!(l.ping_state(), PingState::Waiting(1));
    let mut ack = Vec::new();
    frame::ping(&mut ack, true, ours[0].1[..].try_into().expect("8 bytes"));
    feed(&l, &ack).expect("ack");
    assert_eq!(l.ping_state(), PingState::Idle);
}

#[test]
fn a_protocol_error_fails_every_stream_once_and_says_goaway() {
    let l = link();
    let id = open(&l, b"");
    let _ = sent(&l);
    assert!(
        feed(&l, &data(7, b"x", false)).is_err(),
        "DATA on a stream never opened"
    );
    assert!(matches!(
        recv(&l, id),
        Some(Recv::Failed(Failure::ConnectionLost, _))
    ));
    assert!(recv(&l, id).is_none(), "failed once");
    assert!(sent(&l).iter().any(|(h, _)| h.kind == Kind::GoAway));
    assert!(l.finished());
    // A header block the decoder cannot read: the connection's error too.
    let l = link();
    let _ = open(&l, b"");
    assert!(feed(&l, &headers(1, &[0x80], true)).is_err());
}

#[test]
fn data_beyond_the_window_resets_the_stream() {
    let l = link();
    let id = open(&l, b"");
    feed(&l, &headers(id, &answer("200", &[]), false)).expect("head");
    let _ = recv(&l, id);
    let big = vec![b'x'; 16_384];
    let mut over = Vec::new();
    for _ in 0..(STREAM_WINDOW as usize / big.len() + 1) {
        over.extend(data(id, &big, false));
    }
    feed(&l, &over).expect("a stream's error, not the connection's");
    let mut failed = false;
    while let Some(r) = recv(&l, id) {
        failed |= matches!(r, Recv::Failed(Failure::Reset, _));
    }
    assert!(failed);
    assert!(sent(&l).iter().any(|(h, _)| h.kind == Kind::RstStream));
}

#[test]
fn data_before_the_head_resets_the_stream() {
    let l = link();
    let id = open(&l, b"");
    let _ = sent(&l);
    feed(&l, &data(id, b"x", false)).expect("a stream's error");
    assert!(matches!(
        recv(&l, id),
        Some(Recv::Failed(Failure::Reset, _))
    ));
    let out = sent(&l);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].0.kind, Kind::RstStream);
    assert_eq!(out[0].1, Reason::PROTOCOL_ERROR.0.to_be_bytes());
    assert!(l.usable());
}

#[test]
fn a_header_block_in_continuations_is_read_whole() {
    let l = link();
    let id = open(&l, b"");
    let block = answer(
        "200",
        &[("x-long", &"v".repeat(100)), ("content-length", "0")],
    );
    let mut f = Vec::new();
    frame::headers(&mut f, id, &block, true, 16);
    feed(&l, &f).expect("headers and continuations");
    assert!(
        matches!(recv(&l, id), Some(Recv::Head(h, _)) if h.raw().windows(6).any(|w| w == b"x-long"))
    );
    // Another frame inside a header block is the connection's error.
    let l = link();
    let id = open(&l, b"");
    let mut f = Vec::new();
    frame::headers(&mut f, id, &block, true, 16);
    let cut = frame::HEADER_LEN + 16;
    let mut bad = f[..cut].to_vec();
    bad.extend(data(id, b"x", false));
    assert!(feed(&l, &bad).is_err());
}

#[test]
fn a_stream_dropped_early_is_cancelled_and_its_bytes_given_back() {
    let l = link();
    let id = open(&l, b"");
    feed(&l, &headers(id, &answer("200", &[]), false)).expect("head");
    feed(&l, &data(id, &vec![b'x'; 1000], false)).expect("data");
    let _ = sent(&l);
    l.close(id);
    let out = sent(&l);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].0.kind, Kind::RstStream);
    assert_eq!(out[0].1, Reason::CANCEL.0.to_be_bytes());
    // Frames still in flight for it are ignored.
    feed(&l, &data(id, b"late", true)).expect("late data");
    assert!(l.usable());
}

#[test]
fn whatever_a_server_sends_is_an_error_or_an_answer_never_a_panic() {
    // The same frames on every run.
    let mut rng = crate::test_rng::XorShift(0x9e37_79b9_7f4a_7c15);
    for _ in 0..3_000 {
        let l = link();
        let ids: Vec<u32> = (0..3).map(|_| open(&l, b"{}")).collect();
        let mut wire = Vec::new();
        for _ in 0..rng.below(8) + 1 {
            let len = rng.below(48) as usize;
            let kind = rng.below(11) as u8;
            let flags = rng.below(256) as u8;
            let stream: u32 = [0, 1, 3, 5, 7, 2][rng.below(6) as usize];
            wire.extend_from_slice(&(len as u32).to_be_bytes()[1..]);
            wire.extend_from_slice(&[kind, flags]);
            wire.extend_from_slice(&stream.to_be_bytes());
            if kind == 1 && rng.below(2) == 0 {
                // Often a well-formed answer head, so that what follows it is reached.
                let block = answer("200", &[("x", "y")]);
                let n = block.len();
                let at = wire.len() - frame::HEADER_LEN;
                wire[at..at + 3].copy_from_slice(&(n as u32).to_be_bytes()[1..]);
                wire[at + 4] = frame::END_HEADERS;
                wire.extend_from_slice(&block);
            } else {
                wire.extend((0..len).map(|_| rng.next_u64() as u8));
            }
        }
        let _ = feed(&l, &wire);
        for id in &ids {
            while recv(&l, *id).is_some() {}
            // Those answered whole are left to end: they too take whatever follows.
            l.close(*id);
        }
        let _ = feed(&l, &wire);
        l.expire_left(u64::MAX);
        let _ = sent(&l);
    }
}
