use super::*;
use crate::http::standing::{held, until_none_held};
use monoio::io::AsyncWriteRentExt;
use monoio::net::TcpListener;
use std::time::Duration;

fn on_uring<F: std::future::Future>(f: F) -> F::Output {
    crate::http::standing::start_of_runtime();
    monoio::RuntimeBuilder::<monoio::IoUringDriver>::new()
        .enable_timer()
        .build()
        .expect("io_uring runtime")
        .block_on(f)
}

/// An event stream's body reads through one standing poll for all its events once it has
/// waited long enough to earn one (its first wait never does: a burst takes none), and lets go
/// of it with the body: also when the relay stops in the middle of a wait (the client went
/// away, a timer fired).
#[test]
fn an_event_stream_body_holds_one_standing_poll_and_releases_it() {
    on_uring(async {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let mut up = TcpStream::connect(addr).await.expect("connect");
        let (mut sender, _) = listener.accept().await.expect("accept");
        let mut buf = bytes::BytesMut::new();
        // A wait given up half-way (nothing comes), longer than a stream's patience.
        let idle = Duration::from_millis(2 * crate::http::standing::patience::EARNED_AFTER_MS);
        {
            let mut body = PlainBody(&mut up);
            let (r, _) = sender.write_all(b"data: 0\n\n".to_vec()).await;
            r.expect("send");
            body.read_body(&mut buf, true).await.expect("read");
            assert_eq!(held(), 0, "a stream's first wait arms no poll");
            let wait = monoio::time::timeout(idle, body.read_body(&mut buf, true)).await;
            assert!(wait.is_err(), "nothing was sent");
            for event in [&b"data: 1\n\n"[..], b"data: 2\n\n", b"data: 3\n\n"] {
                let (r, _) = sender.write_all(event.to_vec()).await;
                r.expect("send");
                let n = body.read_body(&mut buf, true).await.expect("read");
                assert_eq!(&buf[buf.len() - n..], event);
                assert_eq!(held(), 1, "one poll for the rest of the stream");
            }
            let wait = monoio::time::timeout(idle, body.read_body(&mut buf, true)).await;
            assert!(wait.is_err(), "nothing was sent");
            assert_eq!(held(), 1);
        }
        assert_eq!(until_none_held().await, 0, "the body's poll outlived it");
        // The socket serves the next answer as before: a plain read, no standing poll.
        let (r, _) = sender.write_all(b"next".to_vec()).await;
        r.expect("send");
        buf.clear();
        let n = PlainBody(&mut up)
            .read_body(&mut buf, false)
            .await
            .expect("read");
        assert_eq!(&buf[..n], b"next");
        assert_eq!(held(), 0);
    });
}
