//! `ringside simulate`: a fault-injecting OpenAI- and Anthropic-compatible upstream for the demo,
//! the tests and the benchmarks. Faults are chosen per key, per model, or per request
//! (`x-sim-fault` header); it counts attempts and peak concurrency per key (`GET /_sim/stats`).

mod answer;
mod ask;
pub mod body;
mod control;
pub mod fault;
pub mod front;
mod gemini;
mod listen_queue;
mod provider_head;
mod shape;
pub mod stats;
mod stream;
pub mod subscription;
mod tools;

use crate::http::HeadLimits;
use crate::http::response::whole;
use control::control;
use fault::Fault;
use monoio::net::{ListenerOpts, TcpListener, TcpStream};
use stats::Stats;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Selector {
    Key(String),
    Model(String),
}

#[derive(Clone, Debug)]
pub struct SimOptions {
    pub listen: SocketAddr,
    pub workers: usize,
    pub faults: Vec<(Selector, Fault)>,
    /// Text deltas per answer.
    pub events: u32,
    /// Pause between SSE events.
    pub interval_ms: u64,
    /// Pause before the response head.
    pub latency_ms: u64,
    pub force_epoll: bool,
    /// How long the OAuth access tokens the simulator issues last.
    pub token_lifetime_s: u64,
    /// Refuse (400, in the API's error shape) a body that breaks its API's rules: what a real
    /// provider refuses and a translator might get wrong (`shape`).
    pub strict: bool,
    /// Answer a request that offers tools with a call to its first one (`tools`).
    pub call_tools: bool,
    /// A TLS front (HTTP/2 and HTTP/1.1) relaying to this listener (`front`).
    pub front: Option<front::FrontOptions>,
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            listen: SocketAddr::from(([127, 0, 0, 1], 9000)),
            workers: 1,
            faults: Vec::new(),
            events: 8,
            interval_ms: 0,
            latency_ms: 0,
            force_epoll: false,
            token_lifetime_s: 3_600,
            strict: false,
            call_tools: false,
            front: None,
        }
    }
}

struct FaultEntry {
    selector: Selector,
    fault: Fault,
    used: AtomicU64,
}

pub struct SimState {
    opts: SimOptions,
    faults: Mutex<Vec<Arc<FaultEntry>>>,
    pub stats: Stats,
    /// Claude subscription mode: each key's usage wall.
    accounts: subscription::Accounts,
    shutdown: AtomicBool,
    /// The TLS front's counters (`/_sim/front`).
    pub front: Arc<front::FrontStats>,
}

pub struct Simulator {
    pub state: Arc<SimState>,
    pub addr: SocketAddr,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Simulator {
    pub fn stop(self) {
        self.state.shutdown.store(true, Ordering::SeqCst);
        for t in self.threads {
            let _ = t.join();
        }
    }
}

/// Parse `key:KEY=SPEC` or `model:MODEL=SPEC`.
pub fn parse_fault_arg(arg: &str) -> Result<(Selector, Fault), String> {
    let (sel, spec) = arg
        .split_once('=')
        .ok_or("expected key:KEY=SPEC or model:MODEL=SPEC")?;
    let selector = if let Some(k) = sel.strip_prefix("key:") {
        Selector::Key(k.to_string())
    } else if let Some(m) = sel.strip_prefix("model:") {
        Selector::Model(m.to_string())
    } else {
        return Err(format!("`{sel}` must start with key: or model:"));
    };
    Ok((selector, Fault::parse(spec)?))
}

pub fn start(opts: SimOptions) -> Result<Simulator, String> {
    let faults = opts
        .faults
        .iter()
        .map(|(s, f)| {
            Arc::new(FaultEntry {
                selector: s.clone(),
                fault: f.clone(),
                used: AtomicU64::new(0),
            })
        })
        .collect();
    let state = Arc::new(SimState {
        opts: opts.clone(),
        faults: Mutex::new(faults),
        stats: Stats::default(),
        accounts: Default::default(),
        shutdown: AtomicBool::new(false),
        front: Arc::default(),
    });
    let front = match &opts.front {
        Some(o) => Some(Arc::new(front::Front {
            config: front::server_config(o)?,
            opts: o.clone(),
            core: o.relay_to.unwrap_or(opts.listen),
            stats: state.front.clone(),
        })),
        None => None,
    };
    let (tx, rx) = std::sync::mpsc::channel::<Result<(), String>>();
    let mut threads = Vec::new();
    for i in 0..opts.workers.max(1) {
        let state = state.clone();
        let tx = tx.clone();
        let front = front.clone();
        let t = std::thread::Builder::new()
            .name(format!("sim-{i}"))
            .spawn(move || {
                let fut = sim_main(state.clone(), front, tx.clone());
                if !state.opts.force_epoll
                    && monoio::utils::detect_uring()
                    && let Ok(mut rt) = monoio::RuntimeBuilder::<monoio::IoUringDriver>::new()
                        .enable_timer()
                        .build()
                {
                    rt.block_on(fut);
                    return;
                }
                match monoio::RuntimeBuilder::<monoio::LegacyDriver>::new()
                    .enable_timer()
                    .build()
                {
                    Ok(mut rt) => rt.block_on(fut),
                    Err(e) => {
                        let _ = tx.send(Err(format!("simulator runtime: {e}")));
                    }
                }
            })
            .map_err(|e| e.to_string())?;
        threads.push(t);
    }
    for _ in 0..opts.workers.max(1) {
        rx.recv()
            .map_err(|_| "simulator thread died".to_string())??;
    }
    Ok(Simulator {
        state,
        addr: opts.listen,
        threads,
    })
}

/// The simulator's listen queue (the kernel caps it at `somaxconn`).
const QUEUE: usize = 4096;

async fn sim_main(
    state: Arc<SimState>,
    front: Option<Arc<front::Front>>,
    ready: std::sync::mpsc::Sender<Result<(), String>>,
) {
    let opts = ListenerOpts::new().reuse_port(true).backlog(QUEUE as i32);
    if let Some(front) = front {
        match TcpListener::bind_with_config(front.opts.listen, &opts) {
            Ok(l) => {
                let s = state.clone();
                monoio::spawn(front::run(front, l, move || {
                    s.shutdown.load(Ordering::Relaxed)
                }));
            }
            Err(e) => {
                let _ = ready.send(Err(format!(
                    "simulator front cannot listen on {}: {e}",
                    front.opts.listen
                )));
                return;
            }
        }
    }
    let listener = match TcpListener::bind_with_config(state.opts.listen, &opts) {
        Ok(l) => l,
        Err(e) => {
            let _ = ready.send(Err(format!(
                "simulator cannot listen on {}: {e}",
                state.opts.listen
            )));
            return;
        }
    };
    let _ = ready.send(Ok(()));
    // One accept future lives across the shutdown checks: dropping an in-flight accept on
    // io_uring can lose a connection the kernel already accepted (it is never served).
    let mut accept = Box::pin(listener.accept());
    loop {
        monoio::select! {
            a = &mut accept => {
                match a {
                    Ok((s, _)) => {
                        close_on_exec(&s);
                        monoio::spawn(serve(state.clone(), s));
                        // The whole queue: the simulator stands in for a provider's edge,
                        // which should not be what a benchmark's first wave measures.
                        listen_queue::accept_queued(&listener, QUEUE, |s| {
                            monoio::spawn(serve(state.clone(), s));
                        });
                    }
                    // Out of descriptors: an accept fails at once until one frees; do not spin.
                    Err(_) => monoio::time::sleep(Duration::from_millis(10)).await,
                }
                accept = Box::pin(listener.accept());
            }
            _ = monoio::time::sleep(Duration::from_millis(100)) => {
                if state.shutdown.load(Ordering::Relaxed) {
                    return;
                }
            }
        }
    }
}

/// An accepted socket is not inherited by processes the host program starts. An io_uring accept
/// leaves it inheritable, and a test that runs an SDK in a child process would otherwise hand
/// the child a copy: a reset (SO_LINGER 0, then close) then closes only our copy, and the
/// connection stays open.
fn close_on_exec(s: &TcpStream) {
    use std::os::fd::AsRawFd;
    // SAFETY: fcntl on a descriptor we own; it changes only its close-on-exec flag.
    unsafe {
        libc::fcntl(s.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC);
    }
}

fn key_of(head: &crate::http::Head) -> String {
    if let Some(v) = head.get_str("authorization") {
        return v.strip_prefix("Bearer ").unwrap_or(v).trim().to_string();
    }
    // Anthropic's, Gemini's and Azure's own headers.
    ["x-api-key", "x-goog-api-key", "api-key"]
        .iter()
        .find_map(|h| head.get_str(h))
        .unwrap_or("-")
        .to_string()
}

/// The simulator's limits on what it reads (generous: it stands in for a provider).
const LIMITS: crate::http::server::Limits = crate::http::server::Limits {
    head: HeadLimits {
        max_head_bytes: 64 * 1024,
        max_headers: 200,
    },
    idle: Duration::from_secs(300),
    head_timeout: Duration::from_secs(30),
    max_body: 64 << 20,
    body_timeout: Duration::from_secs(30),
    buffer: 16 * 1024,
};

async fn serve(state: Arc<SimState>, stream: TcpStream) {
    crate::http::server::serve(stream, LIMITS, |head, body, stream| {
        let state = state.clone();
        async move { one(&state, head, body, stream).await }
    })
    .await;
}

/// One request: the simulator's own endpoints, an account's, or a provider's answer.
async fn one(
    state: &Arc<SimState>,
    head: crate::http::Head,
    body: bytes::Bytes,
    stream: TcpStream,
) -> Option<TcpStream> {
    use crate::http::server::reply;
    let keep = head.keep_alive;
    if head.path().starts_with("/_sim/") {
        let (status, out) = control(state, &head, &body);
        return reply(
            stream,
            whole(status, "application/json", &[], &out, keep),
            keep,
        )
        .await;
    }
    if head.path().starts_with("/api/") || head.path().ends_with("/oauth/token") {
        let key = key_of(&head);
        let call = (head.method(), head.path(), key.as_str());
        if let Some((status, v)) = state.accounts.endpoint(state, call, &body) {
            let out = serde_json::to_vec(&v).unwrap_or_default();
            return reply(
                stream,
                whole(status, "application/json", &[], &out, keep),
                keep,
            )
            .await;
        }
    }
    match answer::answer(state, &head, body, stream).await {
        Some(s) if keep => Some(s),
        _ => None,
    }
}
