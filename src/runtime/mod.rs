//! Starting the cores: one pinned thread per worker, each with its own monoio runtime
//! (io_uring, or epoll where io_uring is unavailable) and its own SO_REUSEPORT listener.

use crate::config::{Config, DriverChoice};
use crate::log::{LogSink, event};
use crate::metrics::CoreMetrics;
use crate::route::RouteTable;
use crate::route::strategy::SelectorState;
use crate::state::core::{Core, Shared};
use crate::upstream::{Connector, dns::Resolver, pool::Pool};
use monoio::net::{ListenerOpts, TcpListener};
use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// A started server: its shared state and threads.
pub struct Running {
    pub shared: Arc<Shared>,
    pub drivers: Vec<&'static str>,
    workers: Vec<JoinHandle<()>>,
    admin: Option<JoinHandle<()>>,
    /// The admin replica's place on the event bus, until the admin port takes it.
    admin_inbox: Option<crossbeam_channel::Receiver<crate::resilience::Event>>,
}

impl Running {
    /// The admin replica's bus inbox (once): the admin port is started above the runtime
    /// (`server::start`), which hands its thread back with [`Running::attach_admin`].
    pub fn take_admin_inbox(
        &mut self,
    ) -> Option<crossbeam_channel::Receiver<crate::resilience::Event>> {
        self.admin_inbox.take()
    }

    /// Keep the admin thread, to join it after the cores.
    pub fn attach_admin(&mut self, admin: JoinHandle<()>) {
        self.admin = Some(admin);
    }

    /// Begin a graceful shutdown: stop accepting, let in-flight requests finish.
    pub fn shutdown(&self) {
        self.shared.shutdown.store(true, Ordering::SeqCst);
    }

    /// Wait for every core to finish draining.
    pub fn join(self) {
        for w in self.workers {
            let _ = w.join();
        }
        // Everything the cores queued for the store is on disk before we exit.
        self.shared.store.flush();
        if let Some(a) = self.admin {
            let _ = a.join();
        }
    }
}

/// Refuse to start on a port another process already serves: with SO_REUSEPORT the kernel
/// would silently split traffic between us and it.
fn port_already_served(addr: SocketAddr) -> bool {
    if addr.port() == 0 {
        return false;
    }
    let probe = if addr.ip().is_unspecified() {
        SocketAddr::from(([127, 0, 0, 1], addr.port()))
    } else {
        addr
    };
    std::net::TcpStream::connect_timeout(&probe, Duration::from_millis(200)).is_ok()
}

/// Start the cores (the admin port is started by `server::start`).
pub fn start(config: Config, access_log: Option<LogSink>) -> Result<Running, String> {
    for (what, addr) in [
        ("listen", config.server.listen),
        ("admin_listen", config.server.admin_listen),
    ] {
        if port_already_served(addr) {
            return Err(format!(
                "server.{what} {addr} is already in use by another process"
            ));
        }
    }
    let tls = crate::upstream::tls::client_config(
        &config.upstream.tls_roots,
        config.upstream.ca_file.as_deref(),
    )?;
    let routes = RouteTable::build(&config);
    let route_labels = routes.labels();
    let mut conn_labels = vec![(String::new(), String::new()); config.connection_count()];
    for p in &config.providers {
        for c in &p.connections {
            conn_labels[c.index] = (p.id.clone(), c.id.clone());
        }
    }
    let workers = config.server.workers.max(1);
    let metrics: Vec<Arc<CoreMetrics>> = (0..workers)
        .map(|_| Arc::new(CoreMetrics::new(route_labels.len(), conn_labels.len())))
        .collect();
    let store = crate::store::open(
        &config.server.data_dir,
        config.store_map_size,
        config.store_fast,
    )?;
    let (bus, mut inboxes) = crate::resilience::bus::bus(workers + 1);
    let admin_inbox = inboxes.pop().ok_or("event bus without members")?;
    let providers = config.providers.len();
    let connections = config.connection_count();
    // One doorbell per core: another core writes a byte to wake this core's queue pump.
    let mut bell_writers = Vec::new();
    let mut bell_readers = Vec::new();
    for _ in 0..workers {
        let (w, r) = std::os::unix::net::UnixStream::pair()
            .map_err(|e| format!("cannot create a core doorbell: {e}"))?;
        w.set_nonblocking(true)
            .map_err(|e| format!("cannot create a core doorbell: {e}"))?;
        bell_writers.push(w);
        bell_readers.push(r);
    }
    let flow_conns: Vec<crate::flow::ConnFlow> = config
        .providers
        .iter()
        .flat_map(|p| p.connections.iter().map(|c| c.flow.clone()))
        .collect();
    // Lives as long as the process: permits refer to it without touching a shared refcount.
    let flow: &'static crate::flow::FlowShared =
        Box::leak(Box::new(crate::flow::FlowShared::with_tenants(
            flow_conns,
            crate::flow::settings::Budgets::new(config.flow_env),
            bell_writers,
            config.tenant_limits,
        )));
    // Settings changed through the admin API survive a restart.
    for (k, v) in store.scan("settings/flow/") {
        let name = k.trim_start_matches("settings/flow/");
        if let (Some(knob), Some(n)) = (
            crate::flow::settings::Knob::ALL
                .into_iter()
                .find(|x| x.name() == name),
            v.as_u64(),
        ) {
            flow.budgets.set_admin(knob, Some(n));
        }
    }
    // Leases that outlived a restart keep their connections off-limits from the first request.
    let leases: &'static crate::store::leases::LeaseView =
        Box::leak(Box::new(crate::store::leases::LeaseView::new(&conn_labels)));
    store.attach_view(leases);
    let max_connections = config.server.max_connections;
    let max_unauthenticated = config.server.max_unauthenticated_per_address;
    let shared = Arc::new(Shared {
        config,
        routes,
        route_labels,
        conn_names: conn_labels
            .iter()
            .map(|(p, c)| {
                let keep = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
                (keep(p.clone()), keep(c.clone()), keep(format!("{p}/{c}")))
            })
            .collect(),
        conn_labels,
        metrics,
        shutdown: Default::default(),
        log: access_log,
        id_prefix: rand::random(),
        bus,
        probes: crate::resilience::Probes::new(providers),
        in_flight: (0..connections).map(|_| Default::default()).collect(),
        flow,
        store,
        leases,
        managed_keys: AtomicBool::new(crate::clients::managed::any(store)),
        conn_caps: crate::state::conn_caps::ConnCaps::new(max_connections, max_unauthenticated),
    });
    let resolver = Resolver::start(2);
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<&'static str, String>>();
    let mut handles = Vec::new();
    for (id, (inbox, bell)) in inboxes.into_iter().zip(bell_readers).enumerate() {
        let shared = shared.clone();
        let tls = tls.clone();
        let resolver = resolver.clone();
        let ready = ready_tx.clone();
        let h = std::thread::Builder::new()
            .name(format!("ringside-core-{id}"))
            .spawn(move || worker(id, shared, tls, resolver, (inbox, bell), ready))
            .map_err(|e| format!("cannot start worker thread: {e}"))?;
        handles.push(h);
    }
    drop(ready_tx);
    let mut drivers = Vec::new();
    for _ in 0..workers {
        match ready_rx.recv() {
            Ok(Ok(d)) => drivers.push(d),
            Ok(Err(e)) => {
                shared.shutdown.store(true, Ordering::SeqCst);
                return Err(e);
            }
            Err(_) => return Err("a worker died during start".into()),
        }
    }
    Ok(Running {
        shared,
        drivers,
        workers: handles,
        admin: None,
        admin_inbox: Some(admin_inbox),
    })
}

type Ready = std::sync::mpsc::Sender<Result<&'static str, String>>;
/// A core's event inbox and the read end of its doorbell.
type Inbox = (
    crossbeam_channel::Receiver<crate::resilience::Event>,
    std::os::unix::net::UnixStream,
);

fn worker(
    id: usize,
    shared: Arc<Shared>,
    tls: Arc<rustls::ClientConfig>,
    resolver: Resolver,
    inbox: Inbox,
    ready: Ready,
) {
    if shared.config.server.pin_workers {
        let cpus = crate::config::available_cores();
        let _ = monoio::utils::bind_to_cpu_set(Some(id % cpus));
    }
    let entries = 1024;
    let want_uring = match shared.config.server.driver {
        DriverChoice::Uring => true,
        DriverChoice::Epoll => false,
        DriverChoice::Auto => monoio::utils::detect_uring(),
    };
    if want_uring {
        // Cooperative task running: completions are run when the core next enters the kernel
        // instead of interrupting it (measured ~8% less CPU per proxied request). Kernels
        // before 5.19 refuse the flag: then the plain ring.
        let ring = |coop: bool| {
            let mut b = io_uring::IoUring::builder();
            if coop {
                b.setup_coop_taskrun();
            }
            monoio::RuntimeBuilder::<monoio::IoUringDriver>::new()
                .with_entries(entries)
                .uring_builder(b)
                .enable_timer()
                .build()
        };
        let built = ring(true).or_else(|_| ring(false));
        match built {
            Ok(mut rt) => {
                rt.block_on(core_main(
                    id, shared, tls, resolver, inbox, ready, "io_uring",
                ));
                return;
            }
            Err(e) if shared.config.server.driver == DriverChoice::Uring => {
                let _ = ready.send(Err(format!(
                    "io_uring is unavailable ({e}); use driver = \"auto\" or \"epoll\""
                )));
                return;
            }
            Err(e) => event(
                "warn",
                "io_uring unavailable, falling back to epoll",
                serde_json::json!({"core": id, "error": e.to_string()}),
            ),
        }
    }
    match monoio::RuntimeBuilder::<monoio::LegacyDriver>::new()
        .with_entries(entries)
        .enable_timer()
        .build()
    {
        Ok(mut rt) => rt.block_on(core_main(id, shared, tls, resolver, inbox, ready, "epoll")),
        Err(e) => {
            let _ = ready.send(Err(format!("cannot build the epoll runtime: {e}")));
        }
    }
}

async fn core_main(
    id: usize,
    shared: Arc<Shared>,
    tls: Arc<rustls::ClientConfig>,
    resolver: Resolver,
    inbox: Inbox,
    ready: Ready,
    driver: &'static str,
) {
    let (inbox, bell) = inbox;
    let cfg = &shared.config;
    // This core's timer wheel: every deadline on the request path lives there.
    crate::timer::install();
    let opts = ListenerOpts::new()
        .reuse_port(true)
        .reuse_addr(true)
        .backlog(4096);
    let listener = match TcpListener::bind_with_config(cfg.server.listen, &opts) {
        Ok(l) => l,
        Err(e) => {
            let _ = ready.send(Err(format!("cannot listen on {}: {e}", cfg.server.listen)));
            return;
        }
    };
    let metrics = shared.metrics[id].clone();
    metrics
        .uring
        .store(i64::from(driver == "io_uring"), Ordering::Relaxed);
    let core = Rc::new(Core {
        id,
        shared: shared.clone(),
        metrics,
        connector: Connector {
            resolver,
            dns: RefCell::default(),
            tls,
            connect_timeout: Duration::from_millis(cfg.upstream.connect_timeout_ms),
            dns_ttl_ms: cfg.upstream.dns_ttl_ms,
        },
        pool: RefCell::new(Pool::new(
            cfg.upstream.pool_max_idle_per_upstream,
            cfg.upstream.pool_idle_timeout_ms,
        )),
        selector: RefCell::new(SelectorState::new(
            shared.routes.slot_count(),
            rand::random::<u64>() ^ id as u64,
        )),
        drain: Default::default(),
        open_conns: Cell::new(0),
        request_seq: Cell::new(0),
        tables: RefCell::new({
            let mut t = crate::resilience::Tables::new(cfg.providers.len(), cfg.connection_count());
            // Terminal states outlive a restart (until an operator resets them).
            for (i, st) in shared.stored_terminals() {
                t.conns[i] = st;
            }
            t
        }),
        inbox,
        loads: RefCell::new(crate::route::load::LoadTable::new(cfg.connection_count())),
        flow: Rc::new(crate::flow::FlowCore::new(id, cfg.connection_count())),
        decisions: RefCell::new(crate::state::decisions::Decisions::per_core(
            cfg.resilience.decision_ring,
            cfg.resilience.decision_ring_plain,
            cfg.server.workers,
        )),
        pins: RefCell::default(),
    });
    let _ = ready.send(Ok(driver));
    monoio::spawn(tick(core.clone()));
    monoio::spawn(crate::flow::run_doorbell(bell, core.flow.clone()));
    // The pump lives as long as the core: queued requests keep being served while draining.
    monoio::spawn(crate::flow::run_pump(
        core.shared.flow,
        core.flow.clone(),
        || false,
    ));
    loop {
        monoio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    monoio::spawn(crate::contain::contained(
                        crate::clock::per_poll(crate::proxy::serve_client(core.clone(), stream, peer.ip())),
                        &crate::metrics::TASK_PANICS,
                        Some(id),
                    ));
                }
                // Out of descriptors or similar: back off briefly instead of spinning.
                Err(_) => monoio::time::sleep(Duration::from_millis(10)).await,
            },
            _ = core.drain.wait() => break,
        }
    }
    drop(listener);
    let deadline = std::time::Instant::now() + shared.config.server.shutdown_grace;
    while core.open_conns.get() > 0 && std::time::Instant::now() < deadline {
        monoio::time::sleep(Duration::from_millis(20)).await;
    }
    core.pool.borrow_mut().clear();
}

/// The core's housekeeping tick: notice shutdown, sweep idle upstream connections.
async fn tick(core: Rc<Core>) {
    let mut n = 0u64;
    loop {
        monoio::time::sleep(Duration::from_millis(50)).await;
        if core.shared.shutdown.load(Ordering::Relaxed) {
            core.drain.trigger();
            return;
        }
        n += 1;
        core.sync();
        if n.is_multiple_of(20) {
            let now = crate::clock::now_ms();
            core.pool.borrow_mut().sweep(now);
            let s = &core.shared.config.resilience;
            core.tables.borrow_mut().lockouts.sweep(&s.lockout, now);
            core.sweep_pins(crate::clock::unix_ms());
        }
    }
}
