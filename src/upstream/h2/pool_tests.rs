//! The pool's openings against a server on loopback that says its stream limit when told to:
//! those waiting on a new connection go by the limit its server gives, not by a guess.

use super::conn::{self, Ping};
use super::{Crowded, H2Pool, Opener, Pick};
use crate::http::h2frame as frame;
use crate::test_driver::on_driver;
use crate::upstream::UpStream;
use monoio::io::AsyncWriteRentExt;
use monoio::net::{TcpListener, TcpStream};
use std::cell::RefCell;
use std::os::fd::AsRawFd;
use std::rc::Rc;
use std::time::Duration;

/// A connection opened through `pool` for `guard`, and the server's end of it.
async fn opened(
    pool: &RefCell<H2Pool>,
    listener: &TcpListener,
    guard: super::OpenGuard,
) -> (super::stream::H2Stream, TcpStream) {
    let addr = listener.local_addr().expect("addr");
    let tcp = TcpStream::connect(addr).await.expect("connect");
    let (server, _) = listener.accept().await.expect("accept");
    let fd = tcp.as_raw_fd();
    let opener = Opener { pool, guard };
    let ping = pool.borrow_mut().ping_for(0);
    let conn = conn::start(UpStream::Plain(tcp), fd, ping, "p:1".into());
    let first = pool.borrow_mut().add(&opener.guard, conn, false);
    (first, server)
}

/// The server's SETTINGS, taking `max` streams at once.
async fn say_limit(server: &mut TcpStream, max: u32) {
    let mut out = Vec::new();
    frame::settings(&mut out, &[(frame::MAX_CONCURRENT_STREAMS, max)]);
    let (r, _) = server.write_all(out).await;
    r.expect("settings written");
}

fn pick(pool: &RefCell<H2Pool>) -> Pick {
    pool.borrow_mut().pick(0, false)
}

/// A provider's first connection, opened while one more request waits on its opening: the
/// opening, the opener's stream and the server's end.
async fn first_with_a_waiter(
    pool: &RefCell<H2Pool>,
    listener: &TcpListener,
) -> (Rc<super::Opening>, super::stream::H2Stream, TcpStream) {
    let Pick::Open(guard) = pick(pool) else {
        panic!("nothing to pick: open one");
    };
    let Pick::Wait(opening) = pick(pool) else {
        panic!("one is opening: wait for it");
    };
    let (first, server) = opened(pool, listener, guard).await;
    (opening, first, server)
}

#[test]
fn those_waiting_on_a_new_connection_wait_for_its_servers_limit() {
    on_driver(true, async {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let pool = RefCell::new(H2Pool::default());
        let (opening, _first, mut server) = first_with_a_waiter(&pool, &listener).await;
        // Made, but its server has not said how many streams it takes: the opener's stream
        // went, the others wait on.
        assert!(
            !opening.done.get(),
            "the opening goes on until the server speaks"
        );
        assert!(matches!(pick(&pool), Pick::Wait(_)));
        say_limit(&mut server, 2).await;
        opening.wait().await;
        // Room for one more beside the opener's, then a new opening.
        let Pick::Ready(_second) = pick(&pool) else {
            panic!("room for a second stream");
        };
        let Pick::Open(guard) = pick(&pool) else {
            panic!("full at the server's limit: open another");
        };
        // The provider said its limit before: a second connection takes it at once, and
        // those waiting on it go as soon as it is made.
        let Pick::Wait(opening) = pick(&pool) else {
            panic!("wait for the second");
        };
        let (_third, _server) = opened(&pool, &listener, guard).await;
        assert!(opening.done.get(), "no round trip awaited");
        let Pick::Ready(_fourth) = pick(&pool) else {
            panic!("room on the second by the limit the first was given");
        };
        assert!(matches!(pick(&pool), Pick::Open(_)), "both full");
    });
}

#[test]
fn a_connection_that_ends_before_its_servers_limit_lets_its_waiters_go() {
    on_driver(true, async {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let pool = RefCell::new(H2Pool::default());
        let (opening, _first, server) = first_with_a_waiter(&pool, &listener).await;
        drop(server);
        // The connection's task finds it closed and ends: the waiters look again, and find
        // nothing to take but a new opening.
        opening.wait().await;
        assert!(matches!(pick(&pool), Pick::Open(_)));
    });
}

/// The server's GOAWAY with `code` and `debug`, written raw (the client never sends debug).
async fn go_away(server: &mut TcpStream, code: u32, debug: &[u8]) {
    let len = 8 + debug.len();
    let mut out = vec![0, (len >> 8) as u8, len as u8, 7, 0, 0, 0, 0, 0];
    out.extend_from_slice(&0u32.to_be_bytes());
    out.extend_from_slice(&code.to_be_bytes());
    out.extend_from_slice(debug);
    let (r, _) = server.write_all(out).await;
    r.expect("goaway written");
}

/// Until the pool's connections to provider 0 take no more streams (the GOAWAY was read).
async fn gone(pool: &RefCell<H2Pool>) {
    for _ in 0..200 {
        if pool.borrow().origins[0].conns.iter().all(|c| !c.usable()) {
            return;
        }
        monoio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the GOAWAY was never read");
}

/// One connection to provider 0 sent away with ENHANCE_YOUR_CALM and `debug`, and let go:
/// how the provider's next connection would then be PINGed.
async fn sent_away(pool: &RefCell<H2Pool>, listener: &TcpListener, debug: &[u8]) -> Duration {
    let Pick::Open(guard) = pick(pool) else {
        panic!("nothing usable: open one");
    };
    let (_stream, mut server) = opened(pool, listener, guard).await;
    say_limit(&mut server, 10).await;
    go_away(&mut server, 11, debug).await;
    gone(pool).await;
    // Let go (and learned from) at the next pick, whose opening ends unused.
    let Pick::Open(guard) = pick(pool) else {
        panic!("the one sent away takes no streams");
    };
    drop(Opener { pool, guard });
    pool.borrow_mut().ping_for(0).every
}

#[test]
fn a_server_that_says_too_many_pings_is_pinged_half_as_often() {
    on_driver(true, async {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let pool = RefCell::new(H2Pool::default());
        let every = Ping::default().every;
        // Told to calm down for something else: the PINGs are not what the server minded.
        assert_eq!(sent_away(&pool, &listener, b"calm down").await, every);
        assert_eq!(
            sent_away(&pool, &listener, b"too_many_pings").await,
            every * 2
        );
        assert_eq!(
            sent_away(&pool, &listener, b"too_many_pings").await,
            every * 4
        );
        // Never beyond an hour, however often a server says so.
        pool.borrow_mut().origins[0].ping_every = Some(super::MAX_PING_EVERY - every);
        let capped = sent_away(&pool, &listener, b"too_many_pings").await;
        assert_eq!(capped, super::MAX_PING_EVERY);
    });
}

#[test]
fn a_provider_found_speaking_http1_is_offered_http2_again_after_a_while() {
    on_driver(true, async {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let pool = RefCell::new(H2Pool::default());
        pool.borrow_mut().speaks_http1(0);
        assert!(matches!(pick(&pool), Pick::Http1));
        assert!(pool.borrow().any_http1());
        // Ten minutes on (the mark's end brought to now): the next request opens a connection
        // offering HTTP/2, and the provider counts as an HTTP/1.1 one meanwhile.
        pool.borrow_mut().origins[0].http1_until = Some(crate::clock::now_ms());
        let Pick::Open(guard) = pick(&pool) else {
            panic!("offered HTTP/2 again");
        };
        assert!(pool.borrow().any_http1(), "until a connection speaks it");
        let Pick::Wait(opening) = pick(&pool) else {
            panic!("one is opening: wait for it");
        };
        let (_first, mut server) = opened(&pool, &listener, guard).await;
        assert!(!pool.borrow().any_http1(), "it spoke HTTP/2");
        say_limit(&mut server, 4).await;
        opening.wait().await;
        let Pick::Ready(_second) = pick(&pool) else {
            panic!("a stream on the new connection");
        };
    });
}

/// A provider's first connection, its server having said it takes `max` streams (heard):
/// the opener's stream and the server's end.
async fn first_saying(
    pool: &RefCell<H2Pool>,
    listener: &TcpListener,
    max: u32,
) -> (super::stream::H2Stream, TcpStream) {
    let (opening, first, mut server) = first_with_a_waiter(pool, listener).await;
    say_limit(&mut server, max).await;
    opening.wait().await;
    (first, server)
}

/// A request waiting for room on provider 0's connections (none has any, and no other may be
/// opened, `why`): the room, and the wait, once it is on the room's list.
async fn waits_for_room(
    pool: &RefCell<H2Pool>,
    why: Crowded,
) -> (Rc<super::room::Room>, monoio::task::JoinHandle<()>) {
    let Pick::Full(room, found) = pick(pool) else {
        panic!("no room, and no other connection to open: wait");
    };
    assert_eq!(found, why, "why it waits");
    let waiting = room.clone();
    let waiter = monoio::spawn(async move { waiting.changed().await });
    for _ in 0..200 {
        if room.waiting() == 1 {
            return (room, waiter);
        }
        monoio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("no request waits for room");
}

#[test]
fn a_server_that_takes_no_streams_now_gets_no_other_connection() {
    on_driver(true, async {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let pool = RefCell::new(H2Pool::default());
        let (_first, mut server) = first_saying(&pool, &listener, 0).await;
        // Another connection would be told the same: wait for this one's server instead.
        let (_, waiter) = waits_for_room(&pool, Crowded::TakesNone).await;
        say_limit(&mut server, 5).await;
        waiter.await;
        let Pick::Ready(_second) = pick(&pool) else {
            panic!("room, now that its server takes five");
        };
    });
}

#[test]
fn past_its_most_connections_a_request_waits_for_a_stream_to_end() {
    on_driver(true, async {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let pool = RefCell::new(H2Pool::at_most(1));
        let (first, _server) = first_saying(&pool, &listener, 1).await;
        // Ringside's own limit, not the provider's word: a wait that runs out blames no key.
        let (room, waiter) = waits_for_room(&pool, Crowded::OwnLimit).await;
        drop(first);
        waiter.await;
        assert_eq!(room.waiting(), 0, "told");
        let Pick::Ready(_second) = pick(&pool) else {
            panic!("the first stream's place");
        };
    });
}

#[test]
fn a_burst_opens_as_many_connections_at_once_as_the_servers_limit_needs() {
    on_driver(true, async {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let pool = RefCell::new(H2Pool::default());
        let (_first, _server) = first_saying(&pool, &listener, 2).await;
        let Pick::Ready(_second) = pick(&pool) else {
            panic!("room for two on the first");
        };
        // Two streams a connection: a new one has room for its opener and one more.
        let Pick::Open(_a) = pick(&pool) else {
            panic!("full: open a second");
        };
        assert!(matches!(pick(&pool), Pick::Wait(_)), "one waits for it");
        assert!(
            matches!(pick(&pool), Pick::Open(_)),
            "the next opens a third at once, not once the second is made"
        );
    });
}

#[test]
fn after_a_server_said_none_others_wait_for_a_new_connections_server_to_speak() {
    on_driver(true, async {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let pool = RefCell::new(H2Pool::default());
        let (first, server) = first_saying(&pool, &listener, 0).await;
        assert!(
            matches!(pick(&pool), Pick::Full(_, Crowded::TakesNone)),
            "it takes none now"
        );
        drop((first, server));
        gone(&pool).await;
        let Pick::Open(guard) = pick(&pool) else {
            panic!("none left: open one to ask again");
        };
        let (_second, mut server) = opened(&pool, &listener, guard).await;
        // The provider's last word was none: no third connection before this one's answer.
        let (_, waiter) = waits_for_room(&pool, Crowded::TakesNone).await;
        say_limit(&mut server, 3).await;
        waiter.await;
        let Pick::Ready(_third) = pick(&pool) else {
            panic!("room, once its server said three");
        };
    });
}
