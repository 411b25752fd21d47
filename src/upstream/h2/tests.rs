//! A stream read against a real HTTP/2 server on loopback (plaintext, prior knowledge).

use super::conn;
use super::stream::H2Stream;
use crate::test_driver::on_driver;
use crate::upstream::UpStream;
use bytes::{Bytes, BytesMut};
use monoio::net::{TcpListener, TcpStream};
use std::cell::Cell;
use std::os::fd::AsRawFd;
use std::rc::Rc;

const BODY: &[u8] = br#"{"id":"chatcmpl-1","choices":[]}"#;

/// How the first stream is answered.
#[derive(Clone, Copy, PartialEq)]
enum First {
    /// Its length, then its body in one DATA frame, ended.
    Whole,
    /// An event stream without a length: [`EVENTS`], a DATA frame each, then its end.
    Events,
    /// Its head and body without its end; reset once the client read the second stream.
    Cut,
}

const EVENTS: [&[u8]; 3] = [b"data: 1\n\n", b"data: 2\n\n", b"data: [DONE]\n\n"];

/// Answer streams on one connection in order, each before the next: its frames reach the
/// client's connection before any of the next one's. Two streams; with `First::Cut` three,
/// the first reset once `cut` is set (the client read the second), before the third.
async fn answer_in_order(listener: TcpListener, first: First, cut: Rc<Cell<bool>>) {
    let (tcp, _) = listener.accept().await.expect("accept");
    let mut h2 = monoio_http::h2::server::handshake(tcp)
        .await
        .expect("server handshake");
    let mut asked = Vec::new();
    while asked.len() < 2 + usize::from(first == First::Cut) {
        let (_, respond) = h2.accept().await.expect("a stream").expect("whole");
        asked.push(respond);
    }
    // The answers in a task of their own: the connection, driven here (frames go out only
    // while it is, and it must not move once polled), until the client goes.
    monoio::spawn(respond_in_order(asked, first, cut));
    while let Some(Ok(_)) = h2.accept().await {}
}

async fn respond_in_order(
    asked: Vec<monoio_http::h2::server::SendResponse<Bytes>>,
    first: First,
    cut: Rc<Cell<bool>>,
) {
    let mut held = None;
    for (i, mut respond) in asked.into_iter().enumerate() {
        let shape = if i == 0 { first } else { First::Whole };
        let mut resp = http::Response::builder().status(200);
        resp = match shape {
            First::Events => resp.header("content-type", "text/event-stream"),
            _ => resp.header("content-length", BODY.len()),
        };
        let resp = resp.body(()).expect("response");
        if let (2, Some(tx)) = (i, held.as_mut()) {
            while !cut.get() {
                monoio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
            monoio_http::h2::SendStream::send_reset(tx, monoio_http::h2::Reason::INTERNAL_ERROR);
        }
        let mut tx = respond.send_response(resp, false).expect("head");
        match shape {
            First::Whole => tx.send_data(Bytes::from_static(BODY), true),
            First::Events => EVENTS
                .iter()
                .enumerate()
                .try_for_each(|(k, e)| tx.send_data(Bytes::from_static(e), k + 1 == EVENTS.len())),
            First::Cut => tx.send_data(Bytes::from_static(BODY), false),
        }
        .expect("body");
        if shape == First::Cut {
            held = Some(tx);
        }
        // Let the connection write this answer before the next is queued: its frames would
        // otherwise go out round-robin with the next one's.
        monoio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
}

/// Streams sent on a new connection to [`answer_in_order`], each after the first read to its
/// end, so that all the first's frames are in; the first returned unread.
async fn first_of(first: First) -> H2Stream {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let cut = Rc::new(Cell::new(false));
    monoio::spawn(answer_in_order(listener, first, cut.clone()));
    let tcp = TcpStream::connect(addr).await.expect("connect");
    let fd = tcp.as_raw_fd();
    let c = conn::start(
        UpStream::Plain(tcp),
        fd,
        conn::Ping::default(),
        "p:1".into(),
    );
    let head = Bytes::from_static(
        b"POST /v1/chat/completions HTTP/1.1\r\nhost: sim\r\ncontent-length: 2\r\n\r\n{}",
    );
    let n = 2 + usize::from(first == First::Cut);
    let mut streams: Vec<H2Stream> = (0..n).map(|_| H2Stream::on(&c, false)).collect();
    for s in &mut streams {
        s.send(&head, &Bytes::new()).await.expect("send");
    }
    let first = streams.remove(0);
    for s in &mut streams {
        let mut buf = BytesMut::new();
        while s.read_into(&mut buf).await.expect("read") > 0 {}
        cut.set(true);
    }
    first
}

/// A JSON answer whose head and body have both arrived is read in one read: the relay writes
/// it to the client in one write (one send, one segment), as it does an HTTP/1.1 answer.
#[test]
fn an_answer_already_received_is_read_whole_at_once() {
    on_driver(true, async {
        let mut first = first_of(First::Whole).await;
        let mut buf = BytesMut::new();
        let n = first.read_into(&mut buf).await.expect("read first");
        let text = String::from_utf8_lossy(&buf[..n]).into_owned();
        assert!(text.starts_with("HTTP/1.1 200 "), "{text}");
        assert!(
            text.ends_with(std::str::from_utf8(BODY).expect("utf-8")),
            "head and body in one read: {text}"
        );
        let mut rest = BytesMut::new();
        assert_eq!(
            first.read_into(&mut rest).await.expect("end"),
            0,
            "then its end"
        );
    });
}

/// A reset found while taking what had already arrived waits behind the bytes before it: they
/// are read first, the failure on the read after them, kept as the stream's own.
#[test]
fn a_reset_behind_received_bytes_fails_the_read_after_them() {
    on_driver(true, async {
        let mut first = first_of(First::Cut).await;
        let mut buf = BytesMut::new();
        let n = first
            .read_into(&mut buf)
            .await
            .expect("the bytes before the reset");
        assert!(
            buf[..n].ends_with(BODY),
            "{:?}",
            String::from_utf8_lossy(&buf)
        );
        assert!(first.read_into(&mut buf).await.is_err(), "then the reset");
        assert_eq!(first.failure(), Some(super::stream::Failure::Reset));
    });
}

/// An event stream's pieces already received are read at once with its head, each framed as a
/// chunk (it has no length) and the end as the last chunk: what the relay reads of an HTTP/1.1
/// provider's stream.
#[test]
fn received_events_are_read_at_once_as_chunks() {
    on_driver(true, async {
        let mut first = first_of(First::Events).await;
        let mut buf = BytesMut::new();
        let n = first.read_into(&mut buf).await.expect("read");
        let limits = crate::http::HeadLimits {
            max_head_bytes: 4096,
            max_headers: 16,
        };
        let (head, used) = crate::http::head::parse_response(&buf[..n], limits, false)
            .expect("a head")
            .expect("whole");
        assert_eq!(head.framing, crate::http::head::Framing::Chunked);
        let mut body = Vec::new();
        let mut chunks = crate::http::chunk::ChunkTracker::new();
        let took = chunks
            .feed(&buf[used..n], |p| body.extend_from_slice(p))
            .expect("chunks");
        assert_eq!(took, n - used, "nothing after the last chunk");
        assert!(chunks.is_done(), "the end came in the same read");
        assert_eq!(body, EVENTS.concat());
        let mut rest = BytesMut::new();
        assert_eq!(first.read_into(&mut rest).await.expect("end"), 0);
    });
}

/// Taken parsed (the request path's way), the head leaves the body that came with it to be
/// read at once, without waiting: the relay writes both to the client in one write. Its
/// bytes are not read again.
#[test]
fn a_head_taken_parsed_leaves_its_received_body_to_read_at_once() {
    on_driver(true, async {
        let mut first = first_of(First::Whole).await;
        let head = first.head().await.expect("read").expect("a head");
        assert_eq!(head.status, 200);
        let length = BODY.len() as u64;
        assert_eq!(head.framing, crate::http::head::Framing::Length(length));
        let mut buf = BytesMut::new();
        first.read_received(&mut buf);
        assert_eq!(&buf[..], BODY, "the body alone, already here");
        let mut rest = BytesMut::new();
        assert_eq!(first.read_into(&mut rest).await.expect("end"), 0);
        let mut first = first_of(First::Events).await;
        let head = first.head().await.expect("read").expect("a head");
        assert_eq!(head.framing, crate::http::head::Framing::Chunked);
        let mut buf = BytesMut::new();
        first.read_received(&mut buf);
        assert!(buf.starts_with(b"9\r\ndata: 1\n\n\r\n"), "{buf:?}");
        assert!(buf.ends_with(b"0\r\n\r\n"), "the end came too: {buf:?}");
    });
}
