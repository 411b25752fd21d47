//! A provider's call (a probe) against a real HTTP/2 server on loopback (plaintext, prior
//! knowledge: `http2 = "always"` to an `http://` endpoint).

use super::call::{Call, status};
use super::{Connector, dns, tls};
use crate::config::{Endpoint, Http2};
use crate::test_driver::on_driver;
use bytes::Bytes;
use monoio::net::TcpListener;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

fn connector() -> Connector {
    Connector {
        resolver: dns::Resolver::start(1),
        dns: RefCell::default(),
        tls: tls::client_config("webpki", None).expect("TLS config"),
        own_tls: RefCell::default(),
        h2: RefCell::default(),
        metrics: Arc::new(crate::metrics::CoreMetrics::new(1, 1)),
        connect_timeout: Duration::from_secs(5),
        connects: Default::default(),
        connects_in_flight: 128,
        dns_ttl_ms: 1000,
    }
}

/// A provider on loopback `port` spoken to over HTTP/2 in plaintext (prior knowledge).
fn h2_endpoint(port: u16) -> Endpoint {
    Endpoint {
        tls: false,
        host: "127.0.0.1".into(),
        port,
        base_path: "/v1".into(),
        via: None,
        own_tls: None,
        http2: Http2::Always,
    }
}

/// Refuse the first `refuse` streams (`REFUSED_STREAM`), answer the rest 200; count them.
async fn refusing(listener: TcpListener, refuse: usize, seen: Rc<Cell<usize>>) {
    let (tcp, _) = listener.accept().await.expect("accept");
    let mut conn = monoio_http::h2::server::handshake(tcp)
        .await
        .expect("server handshake");
    while let Some(Ok((_, mut respond))) = conn.accept().await {
        seen.set(seen.get() + 1);
        if seen.get() <= refuse {
            respond.send_reset(monoio_http::h2::Reason::REFUSED_STREAM);
            continue;
        }
        let resp = http::Response::builder()
            .status(200)
            .header("content-length", 2)
            .body(())
            .expect("response");
        let mut tx = respond.send_response(resp, false).expect("head");
        tx.send_data(Bytes::from_static(b"{}"), true).expect("body");
    }
}

fn probe_once_refused(uring: bool, refuse: usize) -> (Option<u16>, usize) {
    on_driver(uring, async move {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let seen = Rc::new(Cell::new(0));
        monoio::spawn(refusing(listener, refuse, seen.clone()));
        let endpoint = h2_endpoint(port);
        let call = Call {
            endpoint: &endpoint,
            method: "GET",
            path: "/v1/models",
            headers: b"authorization: Bearer sk-probe\r\n",
            body: &[],
            provider: Some(0),
        };
        let end = crate::clock::instant() + Duration::from_secs(5);
        let answer = status(&connector(), &call, end).await;
        (answer, seen.get())
    })
}

/// A probe's stream the provider refused says nothing of its health: it goes once more, on
/// the same connection, and the answer is the second stream's. Twice refused, no answer.
#[test]
fn a_refused_probe_stream_goes_once_more() {
    for uring in [true, false] {
        assert_eq!(
            probe_once_refused(uring, 1),
            (Some(200), 2),
            "uring {uring}"
        );
        assert_eq!(probe_once_refused(uring, 2), (None, 2), "uring {uring}");
    }
}

/// Serve HTTP/2 on one connection, taking `max` streams at once and answering none (each
/// stream stays open until the client goes).
async fn holding(listener: TcpListener, max: u32) {
    let (tcp, _) = listener.accept().await.expect("accept");
    let mut conn = monoio_http::h2::server::Builder::new()
        .max_concurrent_streams(max)
        .handshake::<_, Bytes>(tcp)
        .await
        .expect("server handshake");
    let mut held = Vec::new();
    while let Some(Ok(stream)) = conn.accept().await {
        held.push(stream);
    }
}

/// A request that finds every connection full and may open no other waits the connect
/// timeout, then fails by why: the provider's servers taking no streams (`NoRoom`, every
/// key's concern) or this core's own connection limit (`OwnLimit`, a local shortage).
fn second_request_waits(uring: bool, server_max: u32) -> super::ConnectError {
    on_driver(uring, async move {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        monoio::spawn(holding(listener, server_max));
        let endpoint = h2_endpoint(port);
        let mut c = connector();
        c.h2 = RefCell::new(super::h2::H2Pool::at_most(1));
        c.connect_timeout = Duration::from_millis(200);
        let first = c
            .open(0, &endpoint)
            .await
            .expect("the first takes the connection");
        // Until the server's SETTINGS are in (before them the pool cannot tell why).
        for _ in 0..400 {
            if matches!(c.h2.borrow_mut().pick(0, false), super::h2::Pick::Full(..)) {
                break;
            }
            monoio::time::sleep(Duration::from_millis(5)).await;
        }
        let Err(e) = c.open(0, &endpoint).await else {
            panic!("no room for a second stream");
        };
        drop(first);
        e
    })
}

#[test]
fn a_wait_for_room_that_runs_out_says_whose_limit_it_met() {
    use crate::audit::AttemptOutcome;
    for uring in [true, false] {
        let e = second_request_waits(uring, 0);
        assert!(matches!(e, super::ConnectError::NoRoom), "{e}");
        assert_eq!(e.outcome(), AttemptOutcome::ConnectTimeout);
        let e = second_request_waits(uring, 1);
        assert!(matches!(e, super::ConnectError::OwnLimit), "{e}");
        assert_eq!(e.outcome(), AttemptOutcome::LocalResources, "blames no key");
    }
}
