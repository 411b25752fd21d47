//! Name resolution that never blocks a core: lookups run on a small resolver thread pool and
//! answer through a oneshot; each core keeps its own cache with a TTL.
//!
//! A lookup that fails while the cache still holds the name's last answer serves that answer
//! (RFC 8767's serve-stale, as Envoy keeps a cluster's last hosts): a resolver's outage, or a
//! process out of descriptors for its socket, is not the provider's failure, and cooling every
//! key of the provider for it would turn a DNS blip into an outage. The stale answer is kept
//! for [`STALE_RETRY_MS`] before the next lookup is tried, so that an outage does not queue a
//! slow lookup per request.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};

struct Lookup {
    host: String,
    port: u16,
    reply: futures_channel::oneshot::Sender<io::Result<Vec<SocketAddr>>>,
}

/// Handle to the resolver threads (cheap to clone: one channel sender).
#[derive(Clone)]
pub struct Resolver {
    tx: crossbeam_channel::Sender<Lookup>,
}

impl Resolver {
    pub fn start(threads: usize) -> Resolver {
        let (tx, rx) = crossbeam_channel::unbounded::<Lookup>();
        for i in 0..threads.max(1) {
            let rx = rx.clone();
            let _ = std::thread::Builder::new()
                .name(format!("ringside-dns-{i}"))
                .spawn(move || {
                    for job in rx.iter() {
                        let res = (job.host.as_str(), job.port)
                            .to_socket_addrs()
                            .map(|it| it.collect::<Vec<_>>());
                        let _ = job.reply.send(res);
                    }
                });
        }
        Resolver { tx }
    }

    async fn lookup(&self, host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
        let (reply, rx) = futures_channel::oneshot::channel();
        self.tx
            .send(Lookup {
                host: host.to_string(),
                port,
                reply,
            })
            .map_err(|_| io::Error::other("resolver stopped"))?;
        rx.await
            .map_err(|_| io::Error::other("resolver dropped the lookup"))?
    }
}

/// How long a stale answer is served after a failed lookup before the next one is tried.
pub const STALE_RETRY_MS: u64 = 5_000;

/// A core's cache of resolved names.
#[derive(Default)]
pub struct DnsCache {
    map: HashMap<(String, u16), (Vec<SocketAddr>, u64)>,
}

impl DnsCache {
    /// Resolve `host:port`, from the cache when fresh. IP literals never leave the core.
    pub async fn resolve(
        cache: &std::cell::RefCell<DnsCache>,
        resolver: &Resolver,
        host: &str,
        port: u16,
        ttl_ms: u64,
    ) -> io::Result<Vec<SocketAddr>> {
        if let Ok(ip) = host.parse::<IpAddr>() {
            return Ok(vec![SocketAddr::new(ip, port)]);
        }
        if let Some(addrs) = cache.borrow().fresh(host, port, crate::clock::now_ms()) {
            return Ok(addrs);
        }
        let looked = resolver.lookup(host, port).await;
        let now = crate::clock::now_ms();
        cache.borrow_mut().learn(host, port, looked, ttl_ms, now)
    }

    /// The cached answer for `host:port`, unless it has expired.
    fn fresh(&self, host: &str, port: u16, now: u64) -> Option<Vec<SocketAddr>> {
        let (addrs, exp) = self.map.get(&(host.to_string(), port))?;
        (*exp > now && !addrs.is_empty()).then(|| addrs.clone())
    }

    /// What a lookup found: a new answer is kept for `ttl_ms`; a failure (or no address) serves
    /// the last answer, if there is one, for [`STALE_RETRY_MS`] more.
    fn learn(
        &mut self,
        host: &str,
        port: u16,
        looked: io::Result<Vec<SocketAddr>>,
        ttl_ms: u64,
        now: u64,
    ) -> io::Result<Vec<SocketAddr>> {
        let looked = looked.and_then(|addrs| {
            if addrs.is_empty() {
                Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("{host} has no addresses"),
                ))
            } else {
                Ok(addrs)
            }
        });
        let key = (host.to_string(), port);
        match looked {
            Ok(addrs) => {
                self.map.insert(key, (addrs.clone(), now + ttl_ms));
                Ok(addrs)
            }
            Err(e) => match self.map.get_mut(&key) {
                Some((addrs, exp)) if !addrs.is_empty() => {
                    *exp = now + STALE_RETRY_MS.min(ttl_ms.max(1));
                    Ok(addrs.clone())
                }
                _ => Err(e),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOST: &str = "api.example.test";

    fn addr(last: u8) -> SocketAddr {
        SocketAddr::from(([192, 0, 2, last], 443))
    }

    fn down() -> io::Result<Vec<SocketAddr>> {
        Err(io::Error::other("resolver unreachable"))
    }

    #[test]
    fn a_failed_lookup_serves_the_last_answer_and_waits_before_asking_again() {
        let mut cache = DnsCache::default();
        let t0 = 1_000_000;
        let got = cache.learn(HOST, 443, Ok(vec![addr(7)]), 30_000, t0);
        assert_eq!(got.expect("resolved"), vec![addr(7)]);
        assert_eq!(cache.fresh(HOST, 443, t0 + 29_999), Some(vec![addr(7)]));
        // The answer expires and the lookup fails: the last answer is served...
        let t1 = t0 + 30_000;
        assert_eq!(cache.fresh(HOST, 443, t1), None);
        assert_eq!(
            cache.learn(HOST, 443, down(), 30_000, t1).expect("stale"),
            vec![addr(7)]
        );
        // ...as fresh for the retry interval (no lookup queued per request), then asked again.
        assert_eq!(
            cache.fresh(HOST, 443, t1 + STALE_RETRY_MS - 1),
            Some(vec![addr(7)])
        );
        assert_eq!(cache.fresh(HOST, 443, t1 + STALE_RETRY_MS), None);
        // "No addresses" is a failure too; a working lookup's answer replaces the stale one.
        let t2 = t1 + STALE_RETRY_MS;
        assert_eq!(
            cache
                .learn(HOST, 443, Ok(vec![]), 30_000, t2)
                .expect("stale"),
            vec![addr(7)]
        );
        let t3 = t2 + STALE_RETRY_MS;
        assert_eq!(
            cache
                .learn(HOST, 443, Ok(vec![addr(8)]), 30_000, t3)
                .expect("new"),
            vec![addr(8)]
        );
        assert_eq!(cache.fresh(HOST, 443, t3 + 29_999), Some(vec![addr(8)]));
        // A short TTL bounds the stale retry too.
        assert_eq!(
            cache
                .learn(HOST, 443, down(), 1_000, t3 + 30_000)
                .expect("stale"),
            vec![addr(8)]
        );
        assert_eq!(cache.fresh(HOST, 443, t3 + 31_000), None);
    }

    #[test]
    fn a_name_never_resolved_fails_as_the_lookup_did() {
        let mut cache = DnsCache::default();
        let e = cache
            .learn(HOST, 443, down(), 30_000, 0)
            .expect_err("nothing to serve");
        assert!(e.to_string().contains("unreachable"), "{e}");
        let e = cache
            .learn(HOST, 443, Ok(vec![]), 30_000, 0)
            .expect_err("no addresses");
        assert!(e.to_string().contains("no addresses"), "{e}");
        // Another port of the same name is another entry.
        cache
            .learn(HOST, 443, Ok(vec![addr(7)]), 30_000, 0)
            .expect("resolved");
        assert!(cache.learn(HOST, 8443, down(), 30_000, 1).is_err());
    }
}
