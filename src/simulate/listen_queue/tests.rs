use super::*;
use crate::test_driver::on_driver;
use monoio::io::{AsyncReadRent, AsyncWriteRentExt};

/// `n` clients whose connects have completed: each waits in the listen queue.
fn queue(listener: &TcpListener, n: usize) -> Vec<std::net::TcpStream> {
    let addr = listener.local_addr().expect("addr");
    (0..n)
        .map(|_| std::net::TcpStream::connect(addr).expect("connect"))
        .collect()
}

fn takes_the_queue_after_one_accept(uring: bool) {
    on_driver(uring, async {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let clients = queue(&listener, 10);
        let (_first, _) = listener.accept().await.expect("accept");
        let mut taken = Vec::new();
        accept_queued(&listener, PER_TURN, |s| taken.push(s));
        assert_eq!(taken.len(), 9, "every connection left in the queue");
        // Each is one of the clients that waited.
        let mut peers: Vec<_> = clients[1..]
            .iter()
            .map(|c| c.local_addr().expect("local"))
            .collect();
        let mut got: Vec<_> = taken.iter().map(|s| s.peer_addr().expect("peer")).collect();
        peers.sort();
        got.sort();
        assert_eq!(got, peers);
        // The queue is empty now: nothing more, and no wait.
        let mut more = 0;
        accept_queued(&listener, PER_TURN, |_| more += 1);
        assert_eq!(more, 0);
        // A connection taken this way works on this driver: bytes both ways.
        let mut s = taken.pop().expect("one");
        let peer = s.peer_addr().expect("peer");
        let mut client = clients
            .into_iter()
            .find(|c| c.local_addr().ok() == Some(peer))
            .expect("its client");
        use std::io::{Read, Write};
        client.write_all(b"ping").expect("client writes");
        let (r, buf) = s.read(vec![0u8; 16]).await;
        assert_eq!(&buf[..r.expect("read")], b"ping");
        let (r, _) = s.write_all(b"pong").await;
        r.expect("write");
        let mut back = [0u8; 4];
        client.read_exact(&mut back).expect("client reads");
        assert_eq!(&back, b"pong");
    });
}

#[test]
fn takes_the_queue_after_one_accept_on_io_uring() {
    takes_the_queue_after_one_accept(true);
}

#[test]
fn takes_the_queue_after_one_accept_on_epoll() {
    takes_the_queue_after_one_accept(false);
}

#[test]
fn takes_at_most_a_turns_worth() {
    for uring in [true, false] {
        on_driver(uring, async {
            let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
            let _clients = queue(&listener, PER_TURN + 5);
            let mut taken = Vec::new();
            accept_queued(&listener, PER_TURN, |s| taken.push(s));
            assert_eq!(taken.len(), PER_TURN, "the loop turns for the streams");
            accept_queued(&listener, PER_TURN, |s| taken.push(s));
            assert_eq!(taken.len(), PER_TURN + 5, "the rest at the next turn");
        });
    }
}
