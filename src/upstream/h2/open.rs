//! A request's connection when its provider may speak HTTP/2: a stream on a pooled connection
//! with room, on one being opened (waited for), or on one this request opens; an HTTP/1.1
//! connection when the provider's TLS chose HTTP/1.1.

use super::super::stream::Layered;
use super::super::{ConnectError, Connector, UpConn, UpStream, tls::Alpn};
use super::{Crowded, Opener, Pick};
use crate::config::Endpoint;
use std::sync::atomic::Ordering::Relaxed;

pub async fn open(
    c: &Connector,
    key: usize,
    ep: &Endpoint,
    alpn: Alpn,
) -> Result<UpConn, ConnectError> {
    let mut room_wait = RoomWait::default();
    let guard = loop {
        // (The borrow ends before any wait.)
        let pick = c.h2.borrow_mut().pick(key, ep.tls);
        match pick {
            Pick::Ready(s) => {
                room_wait.found(c);
                return Ok(on_stream(s, true));
            }
            Pick::Wait(opening) => opening.wait().await,
            Pick::Open(guard) => {
                room_wait.found(c);
                break guard;
            }
            Pick::Full(room, why) => room_wait.until_told(c, &room, why).await?,
            // (Only a server's HTTP_1_1_REQUIRED says so to a provider that must speak HTTP/2.)
            Pick::Http1 if alpn == Alpn::H2 => {
                return Err(ConnectError::Tls(
                    "the provider requires HTTP/1.1 (HTTP_1_1_REQUIRED), and its http2 is \"always\"".into(),
                ));
            }
            Pick::Http1 => return c.connect(ep).await,
        }
    };
    // Ends the opening when this returns or is dropped (the request went away).
    let opener = Opener { pool: &c.h2, guard };
    let made = c.make(ep, alpn).await?;
    if !made.h2 {
        if alpn == Alpn::H2 && ep.tls {
            return Err(ConnectError::Tls(
                "the provider did not choose HTTP/2 (http2 = \"always\")".into(),
            ));
        }
        // The provider speaks HTTP/1.1: this connection serves this request as such, and the
        // request path pools it; those waiting, and later ones, open their own side by side.
        c.h2.borrow_mut().speaks_http1(key);
        // Told at once (the tick tells it again): the data port's cap counts two descriptors
        // per client from now on, before a burst of such streams runs the process out.
        let told = &c.metrics.h2.http1;
        told.store(true, std::sync::atomic::Ordering::Relaxed);
        return Ok(UpConn::new(made.stream, made.fd));
    }
    let ping = c.h2.borrow_mut().ping_for(key);
    let origin = format!("{}:{}", ep.host, ep.port).into_boxed_str();
    let conn = super::conn::start(made.stream, made.fd, ping, origin);
    let stream = c.h2.borrow_mut().add(&opener.guard, conn, ep.tls);
    Ok(on_stream(stream, false))
}

/// A request's wait for room on its provider's connections ([`Pick::Full`]): it may last the
/// connect timeout, counted from the first wait (`by`, `None` until then), and keeps its place
/// in line from one wait to the next.
#[derive(Default)]
struct RoomWait {
    by: Option<std::time::Instant>,
    place: Option<u64>,
}

impl RoomWait {
    /// Until the room is told of a change (the caller looks at the pool again), or, when the
    /// time is up, [`ConnectError::NoRoom`] (the provider's servers take none) or
    /// [`ConnectError::OwnLimit`] (this core's most connections, all full), by the last look.
    async fn until_told(
        &mut self,
        c: &Connector,
        room: &super::room::Room,
        why: Crowded,
    ) -> Result<(), ConnectError> {
        let by = *self
            .by
            .get_or_insert_with(|| crate::clock::instant() + c.connect_timeout);
        let mut wait = std::pin::pin!(room.changed_in_place(self.place));
        let waited = crate::timer::timeout_at(by, wait.as_mut()).await;
        self.place = wait.place();
        if waited.is_err() {
            c.metrics.h2.room_waits[1].fetch_add(1, Relaxed);
            return Err(match why {
                Crowded::TakesNone => ConnectError::NoRoom,
                Crowded::OwnLimit => ConnectError::OwnLimit,
            });
        }
        Ok(())
    }

    /// It found a stream, or a connection of its own to open: counted if it waited.
    fn found(&self, c: &Connector) {
        if self.by.is_some() {
            c.metrics.h2.room_waits[0].fetch_add(1, Relaxed);
        }
    }
}

/// A stream as the request path's connection. `reused`: on a connection that served before
/// (a failure before its answer's first byte may be the connection's, not the provider's).
fn on_stream(s: super::stream::H2Stream, reused: bool) -> UpConn {
    let fd = s.fd();
    let mut up = UpConn::new(UpStream::Layered(Layered::H2(Box::new(s))), fd);
    up.reused = reused;
    up
}
