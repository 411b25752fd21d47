//! Where a core keeps the TLS sessions its upstream connections may resume: one store per core
//! (its own copy of the client config), so that a burst of new connections resumes rather than
//! handshakes in full.
//!
//! rustls's own store keeps 8 TLS 1.3 tickets per server: a burst of a few hundred new
//! connections (a restart's, a reload's, a spike's) used them up within its first dozen and
//! handshook the rest in full. A server sends one or two tickets per handshake, and TLS 1.3
//! tickets are used once each (rustls's rule), so this store keeps up to `TICKETS` per server:
//! every connection made since adds to them, and a burst takes the freshest first. The mutex is
//! the core's own (rustls asks for `Sync`): never contended, and taken only around a handshake.

use rustls::NamedGroup;
use rustls::client::ClientSessionStore;
use rustls::client::{Tls12ClientSessionValue, Tls13ClientSessionValue};
use rustls_pki_types::ServerName;
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

/// TLS 1.3 tickets kept per server: a burst this size resumes.
pub const TICKETS: usize = 1024;
/// Servers remembered (upstream origins are few; beyond this, the oldest is forgotten).
const SERVERS: usize = 64;

#[derive(Debug, Default)]
struct Server {
    kx_hint: Option<NamedGroup>,
    tls12: Option<Tls12ClientSessionValue>,
    tls13: VecDeque<Tls13ClientSessionValue>,
    /// When it was last used (a count of uses across servers), to forget the stalest.
    used: u64,
}

#[derive(Debug, Default)]
struct Servers {
    by_name: HashMap<ServerName<'static>, Server>,
    uses: u64,
}

impl Servers {
    fn server(&mut self, name: ServerName<'static>) -> &mut Server {
        self.uses += 1;
        if !self.by_name.contains_key(&name) && self.by_name.len() >= SERVERS {
            let stalest = self
                .by_name
                .iter()
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

    /// TLS 1.3 tickets kept for `name` (for tests and the benchmark's report).
    pub fn tickets(&self, name: &ServerName<'static>) -> usize {
        self.with(|s| s.by_name.get(name).map_or(0, |s| s.tls13.len()))
    }
}

impl ClientSessionStore for Sessions {
    fn set_kx_hint(&self, name: ServerName<'static>, group: NamedGroup) {
        self.with(|s| s.server(name).kx_hint = Some(group));
    }

    fn kx_hint(&self, name: &ServerName<'_>) -> Option<NamedGroup> {
        self.with(|s| s.by_name.get(&name.to_owned()).and_then(|s| s.kx_hint))
    }

    fn set_tls12_session(&self, name: ServerName<'static>, value: Tls12ClientSessionValue) {
        self.with(|s| s.server(name).tls12 = Some(value));
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
        self.with(|s| {
            let t = &mut s.server(name).tls13;
            if t.len() >= TICKETS {
                t.pop_front();
            }
            t.push_back(value);
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
