//! Upstream connections: resolve, connect (TCP_NODELAY, timeout), TLS, pool.

pub mod call;
#[cfg(test)]
mod call_tests;
pub mod connect_gate;
pub mod dns;
pub mod h2;
pub mod pool;
pub mod stream;
pub mod tls;
pub mod tls_sessions;
pub mod tls_stream;
pub mod tokens;
mod tunnel;

use crate::config::Endpoint;
use crate::timer;
use bytes::BytesMut;
use monoio::net::TcpStream;
use std::io;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
pub use stream::UpStream;

/// A live upstream connection and its read buffer.
pub struct UpConn {
    pub stream: UpStream,
    pub buf: BytesMut,
    /// Taken from the pool (so a failure before any response byte may be a stale socket).
    pub reused: bool,
    /// The pool's count of forgets for its upstream when it was taken (`pool::Pool::forget`;
    /// 16 bits, so the connection stays in the room it had).
    pub pool_gen: u16,
    /// The TCP socket under the stream (also under TLS), for the pool's quiet check.
    fd: std::os::fd::RawFd,
}

impl UpConn {
    /// A new connection's (no buffer until bytes come: the first read takes the core's,
    /// `http::buffers`).
    fn new(stream: UpStream, fd: std::os::fd::RawFd) -> UpConn {
        UpConn {
            stream,
            buf: BytesMut::new(),
            reused: false,
            pool_gen: 0,
            fd,
        }
    }

    /// Whether the server closed this idle connection or sent something on it unasked (an
    /// idle-timeout `408`, a stray answer). Such bytes would be read as the next request's
    /// answer, so the connection must not be used. One non-blocking peek, nothing consumed
    /// (and a look at what a TLS session took in).
    pub fn stirred(&self) -> bool {
        if self.stream.holds_unread() {
            return true;
        }
        let mut byte = 0u8;
        // SAFETY: `fd` is the socket this connection owns (alive as long as `self`), and the
        // buffer is one byte of our own stack.
        let n = unsafe {
            libc::recv(
                self.fd,
                (&raw mut byte).cast(),
                1,
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        // Data (n > 0) or EOF (n == 0); an error other than "nothing yet" is a dead socket.
        n >= 0 || io::Error::last_os_error().raw_os_error() != Some(libc::EAGAIN)
    }
}

/// Why a connection could not be made. Nothing was sent: always safe to try elsewhere.
#[derive(Debug)]
pub enum ConnectError {
    Dns(io::Error),
    Connect(io::Error),
    /// This host had no descriptor, port or buffer for the socket (`fd_limit::is_exhaustion`):
    /// says nothing about the upstream.
    Local(io::Error),
    Timeout,
    Tls(String),
    /// The egress proxy answered the tunnel's `CONNECT` with a refusal (what it said, without
    /// credentials): the provider was not reached.
    EgressRefused(String),
    /// The provider's TLS refused Ringside's client certificate (`tls::refusal`).
    TlsRefused(String),
    /// No HTTP/2 connection to the provider had room for a stream within the connect timeout,
    /// its servers taking no more streams now (`h2::room`).
    NoRoom,
    /// No HTTP/2 connection to the provider had room within the connect timeout, and this core
    /// holds its most (`h2::MAX_CONNECTIONS`): Ringside's own limit, which blames no key.
    OwnLimit,
    /// No turn to connect came within the connect timeout while connects to the server were
    /// timing out (`connect_gate`): the wait, Ringside's own pacing, blames no key; the
    /// connects that timed out did.
    NoTurn,
}

impl ConnectError {
    pub fn outcome(&self) -> crate::audit::AttemptOutcome {
        use crate::audit::AttemptOutcome;
        match self {
            ConnectError::Dns(_) => AttemptOutcome::DnsError,
            ConnectError::Connect(_) => AttemptOutcome::ConnectError,
            ConnectError::Local(_) | ConnectError::OwnLimit => AttemptOutcome::LocalResources,
            ConnectError::Timeout | ConnectError::NoRoom | ConnectError::NoTurn => {
                AttemptOutcome::ConnectTimeout
            }
            ConnectError::Tls(_) => AttemptOutcome::TlsError,
            ConnectError::EgressRefused(_) => AttemptOutcome::EgressRefused,
            ConnectError::TlsRefused(_) => AttemptOutcome::TlsError,
        }
    }
}

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnectError::Dns(e) => write!(f, "name resolution failed: {e}"),
            ConnectError::Connect(e) => write!(f, "connect failed: {e}"),
            ConnectError::Local(e) => write!(f, "no local resource for a new connection: {e}"),
            ConnectError::Timeout => f.write_str("connect timed out"),
            ConnectError::NoRoom => f.write_str(
                "no HTTP/2 connection to the provider had room for a stream within the connect \
                 timeout (its servers take no more now)",
            ),
            ConnectError::OwnLimit => write!(
                f,
                "every HTTP/2 connection this core may hold to the provider ({}) stayed full \
                 through the connect timeout",
                h2::MAX_CONNECTIONS
            ),
            ConnectError::NoTurn => f.write_str(
                "no turn to connect came within the connect timeout, while connects to the \
                 provider's server were timing out",
            ),
            ConnectError::Tls(e) => write!(f, "TLS handshake failed: {e}"),
            ConnectError::EgressRefused(e) | ConnectError::TlsRefused(e) => f.write_str(e),
        }
    }
}

/// Everything a core needs to open upstream connections.
pub struct Connector {
    pub resolver: dns::Resolver,
    pub dns: std::cell::RefCell<dns::DnsCache>,
    /// The core's own copy, with the core's TLS sessions (`tls::for_core`).
    pub tls: tls::CoreTls,
    /// Providers' own TLS configs built on this core (`tls::for_provider`), by their settings
    /// (a few: one per provider with settings of its own).
    pub own_tls: std::cell::RefCell<Vec<(Arc<crate::config::ProviderTls>, tls::Configs)>>,
    /// The core's HTTP/2 connections (`h2`).
    pub h2: std::cell::RefCell<h2::H2Pool>,
    /// The core's counters (TLS handshakes, full and resumed).
    pub metrics: Arc<crate::metrics::CoreMetrics>,
    pub connect_timeout: Duration,
    /// New connections under way at once to one server, and those waiting their turn
    /// (`connect_gate`; `[upstream] connects_in_flight`, 0: no limit).
    pub connects: connect_gate::Gates,
    pub connects_in_flight: u32,
    pub dns_ttl_ms: u64,
}

/// A connection made: its stream, its socket, and whether its TLS chose HTTP/2.
struct Made {
    stream: UpStream,
    fd: std::os::fd::RawFd,
    h2: bool,
}

impl Connector {
    /// A new HTTP/1.1 connection (the side calls, and providers that speak only HTTP/1.1).
    pub async fn connect(&self, ep: &Endpoint) -> Result<UpConn, ConnectError> {
        let m = self.make(ep, tls::Alpn::Http1).await?;
        Ok(UpConn::new(m.stream, m.fd))
    }

    /// A connection (or an HTTP/2 stream) for a request to provider `key` at `ep`, by its
    /// `http2` setting (`h2`).
    pub async fn open(&self, key: usize, ep: &Endpoint) -> Result<UpConn, ConnectError> {
        use crate::config::Http2;
        let alpn = match (ep.http2, ep.tls) {
            (Http2::Never, _) | (Http2::Auto, false) => return self.connect(ep).await,
            (Http2::Auto, true) => tls::Alpn::Either,
            (Http2::Always, _) => tls::Alpn::H2,
        };
        h2::open::open(self, key, ep, alpn).await
    }

    async fn make(&self, ep: &Endpoint, alpn: tls::Alpn) -> Result<Made, ConnectError> {
        // Through an egress proxy, the connection is to the proxy (`tunnel`).
        let (host, port) = ep
            .via
            .as_ref()
            .map_or((&ep.host, ep.port), |v| (&v.host, v.port));
        let addrs = dns::DnsCache::resolve(&self.dns, &self.resolver, host, port, self.dns_ttl_ms)
            .await
            .map_err(ConnectError::Dns)?;
        // A burst waits its turns here, not in the server's listen queue; the connect timeout
        // starts with the turn (the attempt's deadline bounds the wait, and so does a connect
        // timeout once connects to the server time out).
        let most = self.connects_in_flight;
        let turn = self.connects.turn(host, port, most, self.connect_timeout);
        let (turn, waited) = turn.await.map_err(|_| ConnectError::NoTurn)?;
        if waited {
            self.metrics.connect_waits.fetch_add(1, Ordering::Relaxed);
        }
        let began = crate::clock::instant();
        let mut chose_to_wait = Duration::ZERO;
        let made = self.make_within(ep, alpn, addrs, &mut chose_to_wait).await;
        turn.end(match &made {
            Ok(_) => connect_gate::Connect::Made(
                crate::clock::since(began).saturating_sub(chose_to_wait),
            ),
            Err(ConnectError::Timeout) => connect_gate::Connect::TimedOut,
            Err(_) => connect_gate::Connect::Failed,
        });
        made
    }

    /// [`Self::make`] once its turn came: the first of `addrs` that connects, within the
    /// connect timeout. `chose_to_wait`: how long of it went on a wait for a TLS ticket.
    async fn make_within(
        &self,
        ep: &Endpoint,
        alpn: tls::Alpn,
        addrs: Vec<std::net::SocketAddr>,
        chose_to_wait: &mut Duration,
    ) -> Result<Made, ConnectError> {
        let deadline = crate::clock::instant() + self.connect_timeout;
        let mut last = ConnectError::Timeout;
        for addr in addrs {
            if deadline <= crate::clock::instant() {
                return Err(ConnectError::Timeout);
            }
            let tcp = match timer::timeout_at(deadline, TcpStream::connect_addr(addr)).await {
                Ok(Ok(s)) => s,
                // Another address needs the same descriptor and port this host lacks.
                Ok(Err(e)) if crate::fd_limit::noted_exhaustion(&e) => {
                    return Err(ConnectError::Local(e));
                }
                Ok(Err(e)) => {
                    last = ConnectError::Connect(e);
                    continue;
                }
                Err(_) => return Err(ConnectError::Timeout),
            };
            let _ = tcp.set_nodelay(true);
            let mut tcp = tcp;
            if let Some(via) = &ep.via {
                // Boxed: rare, and the connect is part of every request's task.
                let tunnel = Box::pin(tunnel::open(&mut tcp, ep, via));
                match timer::timeout_at(deadline, tunnel).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => return Err(e),
                    Err(_) => return Err(ConnectError::Timeout),
                }
            }
            let fd = std::os::fd::AsRawFd::as_raw_fd(&tcp);
            let mut h2 = !ep.tls && alpn == tls::Alpn::H2;
            let stream = if ep.tls {
                let (configs, name) = self.tls_for(ep)?;
                let name = rustls_pki_types::ServerName::try_from(name.to_string())
                    .map_err(|e| ConnectError::Tls(format!("bad server name: {e}")))?;
                let sessions = &configs.sessions;
                let before = crate::clock::instant();
                self.wait_for_ticket(sessions, &name, deadline).await;
                *chose_to_wait = crate::clock::since(before);
                let config = configs.get(alpn).clone();
                let handshake = tls_stream::TlsStream::connect(tcp, config, name, Some(sessions));
                match timer::timeout_at(deadline, handshake).await {
                    Ok(Ok(s)) => {
                        let kind = usize::from(s.resumed());
                        self.metrics.tls_handshakes[kind].fetch_add(1, Ordering::Relaxed);
                        h2 = s.alpn() == Some(b"h2");
                        UpStream::Layered(stream::Layered::Tls(Box::new(s)))
                    }
                    Ok(Err(e)) => {
                        return Err(tls::refusal(&e).map_or_else(
                            || ConnectError::Tls(e.to_string()),
                            ConnectError::TlsRefused,
                        ));
                    }
                    Err(_) => return Err(ConnectError::Timeout),
                }
            } else {
                UpStream::Plain(tcp)
            };
            return Ok(Made { stream, fd, h2 });
        }
        Err(last)
    }

    /// Before a TLS handshake in a burst that has used up the tickets kept: wait for one that
    /// a handshake under way is about to bring (`tls_sessions`) rather than handshake in full
    /// at once; the wait ends when it comes or when those handshakes are over without it, and
    /// takes at most half the time left to the connect's deadline. Boxed: a new connection
    /// only, and the connect is part of every request's task.
    async fn wait_for_ticket(
        &self,
        sessions: &tls_sessions::Sessions,
        name: &rustls_pki_types::ServerName<'static>,
        deadline: std::time::Instant,
    ) {
        use tls_sessions::Waited;
        let now = crate::clock::instant();
        let until = now + deadline.saturating_duration_since(now) / 2;
        let wait = Box::pin(timer::timeout_at(until, sessions.ticket_wait(name)));
        let waited = wait.await.unwrap_or(Waited::Full);
        if waited != Waited::No {
            let gave_up = usize::from(waited == Waited::Full);
            self.metrics.tls_ticket_waits[gave_up].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The TLS configs and server name for `ep`: the core's, or the provider's own (built on
    /// this core the first time, from settings read with the config).
    fn tls_for<'e>(&self, ep: &'e Endpoint) -> Result<(tls::Configs, &'e str), ConnectError> {
        let Some(own) = &ep.own_tls else {
            return Ok((self.tls.configs.clone(), &ep.host));
        };
        let name = own.server_name.as_deref().unwrap_or(&ep.host);
        let mut built = self.own_tls.borrow_mut();
        if let Some((_, c)) = built.iter().find(|(s, _)| **s == **own) {
            return Ok((c.clone(), name));
        }
        let configs = tls::for_provider(&self.tls.roots, own).map_err(ConnectError::Tls)?;
        // Reloads make new settings: the oldest built go first.
        if built.len() >= 32 {
            built.remove(0);
        }
        built.push((own.clone(), configs.clone()));
        Ok((configs, name))
    }
}
