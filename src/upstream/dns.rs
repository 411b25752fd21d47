//! Name resolution that never blocks a core: lookups run on a small resolver thread pool and
//! answer through a oneshot; each core keeps its own cache with a TTL.

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
        let now = crate::clock::now_ms();
        if let Some((addrs, exp)) = cache.borrow().map.get(&(host.to_string(), port))
            && *exp > now
            && !addrs.is_empty()
        {
            return Ok(addrs.clone());
        }
        let addrs = resolver.lookup(host, port).await?;
        if addrs.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("{host} has no addresses"),
            ));
        }
        cache
            .borrow_mut()
            .map
            .insert((host.to_string(), port), (addrs.clone(), now + ttl_ms));
        Ok(addrs)
    }
}
