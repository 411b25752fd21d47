use super::*;
use monoio::io::AsyncWriteRentExt;
use monoio::net::{TcpListener, TcpStream};
use std::time::Duration;

fn on_driver<F: std::future::Future>(uring: bool, f: F) -> F::Output {
    start_of_runtime();
    crate::test_driver::on_driver(uring, f)
}

/// A connected pair: (the side a stream reads, the side that sends).
async fn pair() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let reader = TcpStream::connect(addr).await.expect("connect");
    let (sender, _) = listener.accept().await.expect("accept");
    (reader, sender)
}

/// Whether the wait returns within a generous bound (a wait that should stay pending is
/// given a short one: being late cannot make it pass wrongly).
async fn ready_within(fd: RawFd, ms: u64) -> bool {
    monoio::time::timeout(Duration::from_millis(ms), ready(fd))
        .await
        .unwrap_or(false)
}

fn drain(fd: RawFd) -> usize {
    let mut buf = bytes::BytesMut::with_capacity(4096);
    let mut n = 0;
    while let Ok(Some(k)) = crate::http::nowait::recv(fd, &mut buf) {
        if k == 0 {
            break;
        }
        n += k;
        buf.clear();
    }
    n
}

#[test]
fn a_standing_poll_wakes_for_each_arrival_until_released() {
    on_driver(true, async {
        let (reader, mut sender) = pair().await;
        let fd = reader.as_raw_fd();
        assert!(armed(fd), "armed on io_uring");
        assert!(armed(fd), "armed once");
        assert_eq!(held(), 1);
        for round in 0..3u8 {
            let (r, _) = sender.write_all(vec![b'a' + round; 10]).await;
            r.expect("send");
            assert!(ready_within(fd, 5_000).await, "round {round}: no readiness");
            assert_eq!(drain(fd), 10, "round {round}");
            // Drained, and nothing new: the poll is armed still, and waits.
            assert!(
                !ready_within(fd, 50).await,
                "round {round}: ready with nothing there"
            );
        }
        release(fd);
        assert_eq!(until_none_held().await, 0, "the slot was not freed");
        // The slot is reused for the next stream, under a new generation.
        assert!(armed(fd), "armed again");
        let (r, _) = sender.write_all(b"x".to_vec()).await;
        r.expect("send");
        assert!(ready_within(fd, 5_000).await);
        release(fd);
        assert_eq!(until_none_held().await, 0);
    });
}

#[test]
fn a_receive_that_filled_its_buffer_leaves_the_next_wait_ready() {
    on_driver(true, async {
        let (reader, mut sender) = pair().await;
        let fd = reader.as_raw_fd();
        assert!(armed(fd));
        let (r, _) = sender.write_all(vec![b'z'; 100]).await;
        r.expect("send");
        assert!(ready_within(fd, 5_000).await);
        // A small receive takes part of what is there: no new arrival will say so.
        let mut small = bytes::BytesMut::with_capacity(10);
        let room = small.capacity();
        let n = crate::http::nowait::recv(fd, &mut small)
            .expect("recv")
            .expect("bytes");
        assert_eq!(n, room);
        still_ready(fd);
        assert!(
            ready_within(fd, 50).await,
            "the bytes left were not announced"
        );
        assert_eq!(drain(fd), 100 - n);
        release(fd);
        assert_eq!(until_none_held().await, 0);
    });
}

#[test]
fn the_peer_closing_is_readiness() {
    on_driver(true, async {
        let (reader, sender) = pair().await;
        let fd = reader.as_raw_fd();
        assert!(armed(fd));
        drop(sender);
        assert!(ready_within(fd, 5_000).await, "the close was not announced");
        let mut buf = bytes::BytesMut::with_capacity(16);
        let got = crate::http::nowait::recv(fd, &mut buf).expect("recv");
        assert_eq!(got, Some(0), "EOF");
        release(fd);
        assert_eq!(until_none_held().await, 0);
    });
}

#[test]
fn the_epoll_driver_has_no_standing_polls() {
    on_driver(false, async {
        let (reader, _sender) = pair().await;
        assert!(!armed(reader.as_raw_fd()));
        assert_eq!(held(), 0);
    });
}

#[test]
fn many_streams_each_get_their_own_arrivals() {
    on_driver(true, async {
        let mut pairs = Vec::new();
        for _ in 0..64 {
            let (reader, sender) = pair().await;
            assert!(armed(reader.as_raw_fd()));
            pairs.push((reader, sender));
        }
        // Only the odd ones send: only they are ready.
        for (i, (_, sender)) in pairs.iter_mut().enumerate() {
            if i % 2 == 1 {
                let (r, _) = sender.write_all(b"e".to_vec()).await;
                r.expect("send");
            }
        }
        for (i, (reader, _)) in pairs.iter().enumerate() {
            if i % 2 == 1 {
                assert!(ready_within(reader.as_raw_fd(), 5_000).await, "stream {i}");
                assert_eq!(drain(reader.as_raw_fd()), 1);
            }
        }
        for (i, (reader, _)) in pairs.iter().enumerate() {
            if i % 2 == 0 {
                assert!(
                    !ready_within(reader.as_raw_fd(), 5).await,
                    "stream {i} sent nothing"
                );
            }
        }
        for (reader, _) in &pairs {
            release(reader.as_raw_fd());
        }
        drop(pairs);
        assert_eq!(until_none_held().await, 0);
    });
}

/// A poll the kernel refuses (here: a descriptor that is not open; a kernel without multishot
/// polls answers every arm so) sends its stream back to the runtime's wait, and frees its slot.
#[test]
fn a_refused_poll_sends_its_stream_back_to_the_old_wait() {
    on_driver(true, async {
        let (reader, _sender) = pair().await;
        // A descriptor number nothing holds.
        let closed: RawFd = 65_000;
        assert!(
            // SAFETY: F_GETFD only asks whether the descriptor is open.
            unsafe { libc::fcntl(closed, libc::F_GETFD) } < 0,
            "{closed} is open"
        );
        assert!(armed(closed), "the submission itself is taken");
        assert!(!ready(closed).await, "the refusal is not readiness");
        assert!(!armed(closed), "the old wait from now on");
        assert_eq!(held(), 0, "the refused poll's slot is free");
        // Released, the mark goes; other streams were never affected.
        release(closed);
        assert!(armed(reader.as_raw_fd()));
        release(reader.as_raw_fd());
        assert_eq!(until_none_held().await, 0);
    });
}

/// A runtime that ends takes its core's ring with it: the next one on the same thread (as in
/// these tests) arms its polls on a ring its own reaper reads.
#[test]
fn each_runtime_on_a_thread_gets_a_ring_its_reaper_reads() {
    for round in 0..2 {
        on_driver(true, async move {
            let (reader, mut sender) = pair().await;
            let fd = reader.as_raw_fd();
            assert!(armed(fd), "round {round}");
            let (r, _) = sender.write_all(b"e".to_vec()).await;
            r.expect("send");
            assert!(ready_within(fd, 5_000).await, "round {round}: not woken");
            // Left armed: the runtime's end takes it.
        });
    }
}

/// The last bytes and the close may come in one completion: the receive that takes the bytes
/// leaves the end for the next one, and nothing would announce it again (an upstream that
/// resets mid-stream hung its stream until the idle timeout).
#[test]
fn the_close_after_the_last_bytes_is_still_readiness_after_they_are_read() {
    on_driver(true, async {
        for reset in [false, true] {
            let (reader, mut sender) = pair().await;
            let fd = reader.as_raw_fd();
            assert!(armed(fd));
            let (r, _) = sender.write_all(b"last".to_vec()).await;
            r.expect("send");
            if reset {
                crate::http::nowait::reset_on_close(sender.as_raw_fd()).expect("SO_LINGER");
            }
            drop(sender);
            // Let both arrive before the first wait, as under load.
            monoio::time::sleep(Duration::from_millis(50)).await;
            assert!(ready_within(fd, 5_000).await, "reset {reset}: no readiness");
            let mut buf = bytes::BytesMut::with_capacity(64);
            let got = crate::http::nowait::recv(fd, &mut buf);
            if !reset {
                assert_eq!(got.expect("recv"), Some(4), "the bytes first");
            }
            assert!(
                ready_within(fd, 2_000).await,
                "reset {reset}: the end was not announced after the bytes"
            );
            let end = crate::http::nowait::recv(fd, &mut buf);
            assert!(
                matches!(end, Ok(Some(0)) | Err(_)),
                "reset {reset}: {end:?} after the end"
            );
            release(fd);
        }
        assert_eq!(until_none_held().await, 0);
    });
}

#[test]
fn loading_a_task_ahead_never_faults_whatever_the_waker_points_at() {
    // A waker of another kind may point anywhere: at nothing, at a small allocation whose
    // end the task's span runs past, or at an address no page backs.
    prefetch_task(std::ptr::null());
    let small = Box::new(0u64);
    prefetch_task((&raw const *small).cast());
    prefetch_task(std::ptr::without_provenance(usize::MAX - 64));
}
