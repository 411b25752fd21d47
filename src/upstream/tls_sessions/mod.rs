//! Where a core keeps the TLS sessions its upstream connections may resume: one store per core
//! (its own copy of the client config), so that a burst of new connections resumes rather than
//! handshakes in full.
//!
//! rustls's own store keeps 8 TLS 1.3 tickets per server: a burst of a few hundred new
//! connections (a restart's, a reload's, a spike's) used them up within its first dozen and
//! handshook the rest in full. TLS 1.3 tickets are used once each (RFC 8446 C.4, rustls's
//! rule), so this store keeps up to `TICKETS` per server: every connection made since adds to
//! them, and a burst takes the freshest first. Connections ask for `ASK` tickets after a full
//! handshake (RFC 9149; a server that does not honour it sends its default, often two), and
//! when a burst has used up those kept, a connect waits for the tickets that handshakes under
//! way are about to bring rather than handshake in full (`burst`, `TicketWait`). The mutex is
//! the core's own (rustls asks for `Sync`): never contended, and taken only around a handshake.

mod burst;

use burst::{Arrival, Burst};
use rustls::NamedGroup;
use rustls::client::ClientSessionStore;
use rustls::client::{Tls12ClientSessionValue, Tls13ClientSessionValue};
use rustls_pki_types::ServerName;
use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

/// TLS 1.3 tickets kept per server: a burst this size resumes.
pub const TICKETS: usize = 1024;
/// Servers remembered (upstream origins are few; beyond this, the oldest is forgotten).
const SERVERS: usize = 64;

/// Tickets a connection asks for (RFC 9149's ticket request): after a full handshake, enough
/// for the next sixteen connects of a burst; after a resumption, two (one to replace the
/// ticket used, one more), so that a burst's tickets grow with it.
pub const ASK: rustls::client::TicketRequest = rustls::client::TicketRequest {
    new_session_count: 16,
    resumption_count: 2,
};

#[derive(Debug, Default)]
struct Server {
    kx_hint: Option<NamedGroup>,
    tls12: Option<Tls12ClientSessionValue>,
    tls13: VecDeque<Tls13ClientSessionValue>,
    /// A burst of connects waiting for tickets, and what the server sends.
    burst: Burst,
    /// When it was last used (a count of uses across servers), to forget the stalest.
    used: u64,
}

impl Server {
    /// How many connects could resume now: one per TLS 1.3 ticket (each is used once), any
    /// number with a TLS 1.2 session (it is reused).
    fn resumable(&self) -> usize {
        if self.tls12.is_some() {
            usize::MAX
        } else {
            self.tls13.len()
        }
    }
}

#[derive(Debug, Default)]
struct Servers {
    by_name: HashMap<ServerName<'static>, Server>,
    uses: u64,
}

impl Servers {
    fn server(&mut self, name: &ServerName<'_>) -> &mut Server {
        self.uses += 1;
        let name = name.to_owned();
        if !self.by_name.contains_key(&name) && self.by_name.len() >= SERVERS {
            let stalest = self
                .by_name
                .iter()
                .filter(|(_, s)| s.burst.counts() == (0, 0))
                .min_by_key(|(_, s)| s.used)
                .map(|(n, _)| n.clone());
            if let Some(n) = stalest {
                self.by_name.remove(&n);
            }
        }
        let s = self.by_name.entry(name).or_default();
        s.used = self.uses;
        s
    }
}

/// One core's TLS sessions, by server name.
#[derive(Debug, Default)]
pub struct Sessions {
    servers: Mutex<Servers>,
}

impl Sessions {
    fn with<T>(&self, f: impl FnOnce(&mut Servers) -> T) -> T {
        // A poisoned lock only means a panic elsewhere while it was held: the data is still
        // sessions, at worst one fewer.
        let mut g = self.servers.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut g)
    }

    /// `f` on `name`'s state, then wake whom it says (outside the lock).
    fn with_server<T>(
        &self,
        name: &ServerName<'_>,
        f: impl FnOnce(&mut Server, &mut Vec<Waker>) -> T,
    ) -> T {
        let mut wake = Vec::new();
        let out = self.with(|s| f(s.server(name), &mut wake));
        wake.into_iter().for_each(Waker::wake);
        out
    }

    /// TLS 1.3 tickets kept for `name` (for tests and the benchmark's report).
    pub fn tickets(&self, name: &ServerName<'static>) -> usize {
        self.with(|s| s.by_name.get(name).map_or(0, |s| s.tls13.len()))
    }

    /// Before a handshake to `name`: at once when a ticket is kept or none is coming that
    /// earlier waiters have not claimed; otherwise when one comes, or when none will. Drop it
    /// (a timeout) to give up and handshake in full.
    pub fn ticket_wait<'a>(&'a self, name: &'a ServerName<'static>) -> TicketWait<'a> {
        TicketWait {
            sessions: self,
            name,
            id: None,
        }
    }

    /// A handshake to `name` starts now (a kept ticket, if any, is about to be taken): what it
    /// owes the waiters, settled as its tickets come or when it is dropped.
    pub fn start(self: &Arc<Self>, name: &ServerName<'static>) -> Owed {
        let expected = self.with_server(name, |s, _| s.burst.start(s.resumable() > 0));
        Owed {
            sessions: self.clone(),
            name: name.clone(),
            handshake_ended: false,
            expected,
            counted: 0,
            settled: false,
        }
    }
}

/// How a connect's wait for a ticket ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Waited {
    /// It did not wait.
    No,
    /// A ticket came: it resumes.
    Ticket,
    /// None will come for it: it handshakes in full.
    Full,
}

/// A connect waiting for a ticket (`Sessions::ticket_wait`).
pub struct TicketWait<'a> {
    sessions: &'a Sessions,
    name: &'a ServerName<'static>,
    id: Option<u64>,
}

impl Future for TicketWait<'_> {
    type Output = Waited;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Waited> {
        let this = self.get_mut();
        let (polled, id) = this.sessions.with_server(this.name, |s, _| {
            let kept = s.resumable();
            let Some(id) = this.id else {
                return match s.burst.arrive(kept, cx.waker()) {
                    Arrival::Go => (Poll::Ready(Waited::No), None),
                    Arrival::Wait(id) => (Poll::Pending, Some(id)),
                };
            };
            let polled = s.burst.poll_wait(id, kept, cx.waker());
            let id = polled.is_pending().then_some(id);
            (
                polled.map(|t| if t { Waited::Ticket } else { Waited::Full }),
                id,
            )
        });
        this.id = id;
        polled
    }
}

impl Drop for TicketWait<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.id {
            self.sessions
                .with_server(self.name, |s, wake| s.burst.leave(id, s.resumable(), wake));
        }
    }
}

/// What a handshake under way owes the connects waiting for tickets (`Sessions::start`): the
/// tickets it is expected to bring, settled as they come (`Owed::note`), and what it did not
/// bring given up when it is dropped.
#[derive(Debug)]
pub struct Owed {
    sessions: Arc<Sessions>,
    name: ServerName<'static>,
    /// Its handshake finished (its expectation then follows what kind it was).
    handshake_ended: bool,
    /// Tickets still expected from it.
    expected: u32,
    /// Tickets it brought so far.
    counted: u32,
    settled: bool,
}

impl Owed {
    /// After the handshake (`resumed` or in full), the connection has now brought `received`
    /// tickets in all, and its first data came or not. Returns whether it is settled (its
    /// data came: a server sends its tickets before its first answer). `tls12`: the session
    /// is TLS 1.2, which brings none (its session is reused instead).
    pub fn note(&mut self, resumed: bool, received: u32, data_came: bool, tls12: bool) -> bool {
        let Owed {
            sessions,
            name,
            handshake_ended,
            expected,
            counted,
            settled,
        } = self;
        sessions.with_server(name, |s, wake| {
            let (kept, b) = (s.resumable(), &mut s.burst);
            if !*handshake_ended {
                *handshake_ended = true;
                *expected = b.handshake_done(*expected, resumed, kept, wake);
            }
            if received > *counted {
                let n = (received - *counted).min(*expected);
                b.arrived(n);
                *expected -= n;
                *counted = received;
            }
            if tls12 || data_came {
                b.settle(*expected, Some((resumed, received)), kept, wake);
                *settled = true;
            }
        });
        *settled
    }
}

impl Drop for Owed {
    fn drop(&mut self) {
        if !self.settled {
            let expected = self.expected;
            self.sessions.with_server(&self.name, |s, wake| {
                s.burst.settle(expected, None, s.resumable(), wake)
            });
        }
    }
}

impl ClientSessionStore for Sessions {
    fn set_kx_hint(&self, name: ServerName<'static>, group: NamedGroup) {
        self.with(|s| s.server(&name).kx_hint = Some(group));
    }

    fn kx_hint(&self, name: &ServerName<'_>) -> Option<NamedGroup> {
        self.with(|s| s.by_name.get(&name.to_owned()).and_then(|s| s.kx_hint))
    }

    fn set_tls12_session(&self, name: ServerName<'static>, value: Tls12ClientSessionValue) {
        self.with_server(&name, |s, wake| {
            s.tls12 = Some(value);
            s.burst.session_kept(wake);
        });
    }

    fn tls12_session(&self, name: &ServerName<'_>) -> Option<Tls12ClientSessionValue> {
        self.with(|s| {
            s.by_name
                .get(&name.to_owned())
                .and_then(|s| s.tls12.clone())
        })
    }

    fn remove_tls12_session(&self, name: &ServerName<'static>) {
        self.with(|s| {
            if let Some(s) = s.by_name.get_mut(name) {
                s.tls12 = None;
            }
        });
    }

    fn insert_tls13_ticket(&self, name: ServerName<'static>, value: Tls13ClientSessionValue) {
        self.with_server(&name, |s, wake| {
            if s.tls13.len() >= TICKETS {
                s.tls13.pop_front();
            }
            s.tls13.push_back(value);
            s.burst.ticket_kept(s.tls13.len(), wake);
        });
    }

    fn take_tls13_ticket(&self, name: &ServerName<'static>) -> Option<Tls13ClientSessionValue> {
        // The freshest first: the least likely to have expired.
        self.with(|s| s.by_name.get_mut(name).and_then(|s| s.tls13.pop_back()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(i: usize) -> ServerName<'static> {
        ServerName::try_from(format!("host{i}.example")).expect("name")
    }

    /// Tickets coming and connects waiting for `n`.
    fn counts(s: &Sessions, n: &ServerName<'static>) -> (u32, usize) {
        s.with(|x| x.by_name.get(n).map_or((0, 0), |v| v.burst.counts()))
    }

    #[test]
    fn a_handshake_is_settled_by_its_first_answer_and_teaches_what_the_server_sends() {
        let s = Arc::new(Sessions::default());
        let n = name(0);
        let mut owed = s.start(&n);
        assert_eq!(
            counts(&s, &n),
            (2, 0),
            "two expected from a server not yet seen"
        );
        assert!(!owed.note(false, 0, false, false), "the handshake ended");
        assert!(!owed.note(false, 2, false, false), "two tickets came");
        assert_eq!(counts(&s, &n), (0, 0));
        // Its first answer: what the server did not send is no longer coming, and what it
        // sends is learned.
        assert!(owed.note(false, 2, true, false));
        assert_eq!(counts(&s, &n), (0, 0));
        drop(owed);
        assert_eq!(counts(&s, &n), (0, 0), "settled once");
        let next = s.start(&n);
        assert_eq!(counts(&s, &n), (2, 0));
        drop(next);
        assert_eq!(
            counts(&s, &n),
            (0, 0),
            "a connection dropped owes nothing more"
        );
    }

    #[test]
    fn a_tls12_session_owes_no_tickets() {
        let s = Arc::new(Sessions::default());
        let n = name(1);
        let mut owed = s.start(&n);
        assert!(owed.note(false, 0, false, true));
        assert_eq!(counts(&s, &n), (0, 0));
        let _next = s.start(&n);
        assert_eq!(
            counts(&s, &n),
            (0, 0),
            "nothing is expected from this server"
        );
    }

    #[test]
    fn servers_are_remembered_up_to_the_bound_the_stalest_forgotten() {
        let s = Sessions::default();
        for i in 0..SERVERS {
            s.set_kx_hint(name(i), NamedGroup::X25519);
        }
        // The first is used again: the second is now the stalest.
        assert_eq!(s.kx_hint(&name(0)), Some(NamedGroup::X25519));
        s.set_kx_hint(name(0), NamedGroup::secp256r1);
        s.set_kx_hint(name(SERVERS), NamedGroup::X25519);
        assert_eq!(s.kx_hint(&name(0)), Some(NamedGroup::secp256r1));
        assert_eq!(s.kx_hint(&name(1)), None, "the stalest was forgotten");
        assert_eq!(s.kx_hint(&name(SERVERS)), Some(NamedGroup::X25519));
        assert_eq!(s.tickets(&name(0)), 0);
        assert!(s.take_tls13_ticket(&name(0)).is_none());
    }
}
