//! The simulator's TLS front: HTTP/2 (and HTTP/1.1) over TLS, as real providers are reached,
//! each request relayed to the simulator's own HTTP/1.1 listener (`relay`) so that every
//! fault it injects holds over TLS too; and faults of HTTP/2's own (`H2Faults`): GOAWAY,
//! REFUSED_STREAM, a dropped connection, a slow receive window, an answer longer than its
//! `content-length`.

mod relay;

use monoio::net::{TcpListener, TcpStream};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Faults of the HTTP/2 layer (0: none).
#[derive(Clone, Debug, Default)]
pub struct H2Faults {
    /// Refuse every Nth stream (`RST_STREAM(REFUSED_STREAM)`, nothing relayed).
    pub refuse_every: u64,
    /// After N streams on a connection, shut it down gracefully (GOAWAY): the streams it took
    /// run to their end, later ones are refused by it.
    pub goaway_after: u64,
    /// The first connection to be asked for a stream past its Nth is dropped (once: every
    /// stream on it fails; later connections are not).
    pub drop_after: u64,
    /// The first connection to be asked for a stream past its Nth goes silent (once): it reads
    /// and writes nothing more but keeps its socket open for two minutes, as a provider gone
    /// without a FIN or a middlebox that forgot the flow. Only a PING finds it dead.
    pub blackhole_after: u64,
    /// Give a request body's receive window back this many bytes at a time, 20 ms apart: a
    /// body larger than the window (64 KiB) waits on WINDOW_UPDATEs.
    pub slow_window: u32,
    /// Reset every Nth stream with `HTTP_1_1_REQUIRED` (a server that takes such requests
    /// only over HTTP/1.1, as IIS does for a client certificate asked mid-connection).
    pub http1_required: u64,
    /// Every Nth stream's answer says a `content-length` of half its body and sends the whole
    /// body (a malformed answer, RFC 9113 §8.1.1; only answers with a length, not streams).
    pub short_length_every: u64,
    /// Hold each new connection this many milliseconds before its TLS handshake, as a busy
    /// server's accept queue does: a burst of connects is then many handshakes under way at
    /// once (`FrontStats::peak_handshaking`).
    pub slow_handshake_ms: u64,
}

impl H2Faults {
    /// `refuse-every=N`, `goaway-after=N`, `drop-after=N`, `blackhole-after=N`,
    /// `slow-window=BYTES`, `http1-required=N`, `short-length-every=N`, `slow-handshake=MS`.
    pub fn parse_into(&mut self, spec: &str) -> Result<(), String> {
        let (name, n) = spec
            .split_once('=')
            .ok_or("expected NAME=N (refuse-every, goaway-after, drop-after, blackhole-after, slow-window, http1-required, short-length-every, slow-handshake)")?;
        let n: u64 = n.parse().map_err(|_| format!("`{n}` is not a number"))?;
        match name {
            "refuse-every" => self.refuse_every = n,
            "goaway-after" => self.goaway_after = n,
            "drop-after" => self.drop_after = n,
            "blackhole-after" => self.blackhole_after = n,
            "slow-window" => self.slow_window = u32::try_from(n).map_err(|_| "too large")?,
            "http1-required" => self.http1_required = n,
            "short-length-every" => self.short_length_every = n,
            "slow-handshake" => self.slow_handshake_ms = n,
            other => return Err(format!("`{other}` is not an HTTP/2 fault")),
        }
        Ok(())
    }
}

/// Where the front listens and what it serves.
#[derive(Clone, Debug)]
pub struct FrontOptions {
    pub listen: SocketAddr,
    /// PEM certificate chain and key.
    pub cert_file: String,
    pub key_file: String,
    /// Offer HTTP/2 (else HTTP/1.1 only).
    pub http2: bool,
    /// Offer HTTP/1.1 (else HTTP/2 only: a client that offers only HTTP/1.1 fails its
    /// handshake, as a server that speaks nothing else refuses it).
    pub http1: bool,
    /// `SETTINGS_MAX_CONCURRENT_STREAMS`.
    pub max_streams: u32,
    pub faults: H2Faults,
    /// Where requests are relayed (another simulator's listener); `None`: this one's.
    pub relay_to: Option<SocketAddr>,
}

/// What the front saw (in `/_sim/stats` as `front`).
#[derive(Default, serde::Serialize)]
pub struct FrontStats {
    pub connections_h2: AtomicU64,
    pub connections_http1: AtomicU64,
    pub handshakes_resumed: AtomicU64,
    pub streams: AtomicU64,
    pub peak_streams: AtomicU64,
    #[serde(skip)]
    pub open_streams: AtomicU64,
    pub refused: AtomicU64,
    pub goaways: AtomicU64,
    pub dropped: AtomicU64,
    pub blackholed: AtomicU64,
    /// Connections accepted (whatever became of them), and the most at once not yet through
    /// their TLS handshake.
    pub accepted: AtomicU64,
    pub peak_handshaking: AtomicU64,
    #[serde(skip)]
    pub handshaking: AtomicU64,
}

impl FrontStats {
    /// Whether a connection with `on_conn` streams is the one to drop (`H2Faults::drop_after`).
    fn drops(&self, f: &H2Faults, on_conn: u64) -> bool {
        once_past(f.drop_after, on_conn, &self.dropped)
    }

    /// Whether a connection with `on_conn` streams is the one to go silent
    /// (`H2Faults::blackhole_after`).
    fn blackholes(&self, f: &H2Faults, on_conn: u64) -> bool {
        once_past(f.blackhole_after, on_conn, &self.blackholed)
    }
}

/// Whether a fault set at `after` streams (0: off) fires at `on_conn` streams, once: the first
/// to get there marks `fired`.
fn once_past(after: u64, on_conn: u64, fired: &AtomicU64) -> bool {
    after > 0
        && on_conn > after
        && fired
            .compare_exchange(0, 1, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
}

/// Read the certificate and key and make the server config.
pub fn server_config(o: &FrontOptions) -> Result<Arc<rustls::ServerConfig>, String> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&o.cert_file)
        .map_err(|e| format!("{}: {e}", o.cert_file))?
        .filter_map(Result::ok)
        .collect();
    let key =
        PrivateKeyDer::from_pem_file(&o.key_file).map_err(|e| format!("{}: {e}", o.key_file))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| format!("the front's certificate: {e}"))?;
    cfg.alpn_protocols = [(o.http2, &b"h2"[..]), (o.http1, &b"http/1.1"[..])]
        .into_iter()
        .filter(|(offered, _)| *offered)
        .map(|(_, name)| name.to_vec())
        .collect();
    cfg.session_storage = rustls::server::ServerSessionMemoryCache::new(16 * 1024);
    // A client's ticket request (RFC 9149) is honoured up to 16, as a server can that expects
    // bursts of connections; without one, two per handshake, as most servers send.
    cfg.max_tls13_tickets = 16;
    Ok(Arc::new(cfg))
}

/// What each of the front's connections needs.
pub struct Front {
    pub opts: FrontOptions,
    pub config: Arc<rustls::ServerConfig>,
    /// The simulator's own (plain) listener, where requests are relayed.
    pub core: SocketAddr,
    pub stats: Arc<FrontStats>,
}

/// Accept on the front's listener until `stop` says.
pub async fn run(front: Arc<Front>, listener: TcpListener, stop: impl Fn() -> bool) {
    let mut accept = Box::pin(listener.accept());
    loop {
        monoio::select! {
            a = &mut accept => {
                if let Ok((s, _)) = a {
                    super::close_on_exec(&s);
                    monoio::spawn(serve(front.clone(), s));
                } else {
                    monoio::time::sleep(Duration::from_millis(10)).await;
                }
                accept = Box::pin(listener.accept());
            }
            _ = monoio::time::sleep(Duration::from_millis(100)) => {
                if stop() {
                    return;
                }
            }
        }
    }
}

async fn serve(front: Arc<Front>, tcp: TcpStream) {
    let _ = tcp.set_nodelay(true);
    let st = &front.stats;
    st.accepted.fetch_add(1, Ordering::Relaxed);
    let now = st.handshaking.fetch_add(1, Ordering::Relaxed) + 1;
    st.peak_handshaking.fetch_max(now, Ordering::Relaxed);
    let hold = front.opts.faults.slow_handshake_ms;
    if hold > 0 {
        monoio::time::sleep(Duration::from_millis(hold)).await;
    }
    let tls = crate::http::server_tls::ServerTls::accept(tcp, front.config.clone()).await;
    st.handshaking.fetch_sub(1, Ordering::Relaxed);
    let Ok(tls) = tls else {
        return;
    };
    if tls.resumed() {
        st.handshakes_resumed.fetch_add(1, Ordering::Relaxed);
    }
    if tls.alpn() == Some(b"h2") {
        st.connections_h2.fetch_add(1, Ordering::Relaxed);
        relay::serve_h2(front.clone(), tls).await;
    } else {
        st.connections_http1.fetch_add(1, Ordering::Relaxed);
        relay::pipe_http1(&front, tls).await;
    }
}
