//! Starting the cores: one pinned thread per worker, each with its own monoio runtime
//! (io_uring, or epoll where io_uring is unavailable) and its own SO_REUSEPORT listener.

mod core;
mod instance;
mod shared;

use crate::config::{Config, DriverChoice};
use crate::log::{LogSink, event};
use crate::state::core::Shared;
use crate::upstream::dns::Resolver;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;

/// A started server: its shared state and threads.
pub struct Running {
    pub shared: Arc<Shared>,
    pub drivers: Vec<&'static str>,
    workers: Vec<JoinHandle<()>>,
    admin: Option<JoinHandle<()>>,
    /// The admin replica's place on the event bus, until the admin port takes it.
    admin_inbox: Option<crossbeam_channel::Receiver<crate::resilience::Event>>,
    /// Fleet mode's threads, stopped after the cores.
    fleet: Option<crate::fleet::Fleet>,
    /// This instance's hold on its data dir (`instance`), for the life of the process.
    _lock: instance::InstanceLock,
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
        // What the cores learned last reaches the fleet before the process goes.
        if let Some(f) = self.fleet {
            f.stop();
        }
        // Everything the cores queued for the store is on disk before we exit.
        self.shared.store.flush();
        self.shared.lifecycle.mark_stopped();
        if let Some(a) = self.admin {
            let _ = a.join();
        }
    }
}

/// Start the cores (the admin port is started by `server::start`).
pub fn start(config: Config, access_log: Option<LogSink>) -> Result<Running, String> {
    let lock = instance::lock(&config.server.data_dir)?;
    instance::ports_free(&[
        ("listen", config.server.listen),
        ("admin_listen", config.server.admin_listen),
    ])?;
    let tls = crate::upstream::tls::client_config(
        &config.upstream.tls_roots,
        config.upstream.ca_file.as_deref(),
    )?;
    let workers = config.server.workers.max(1);
    let fleet_settings = config.fleet.clone();
    let (shared, (inboxes, admin_inbox, fleet_inbox)) = shared::build(config, access_log, workers)?;
    // Before the cores serve: what the other instances know is on their inboxes.
    let fleet = match &fleet_settings {
        Some(s) => Some(crate::fleet::start(shared.clone(), fleet_inbox, s)?),
        None => None, // its inbox is dropped: sends to it fail at once
    };
    let resolver = Resolver::start(2);
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<&'static str, String>>();
    let mut handles = Vec::new();
    for (id, inbox) in inboxes.into_iter().enumerate() {
        let shared = shared.clone();
        // Each core resumes the TLS sessions its own connections made.
        let tls = crate::upstream::tls::for_core(&tls);
        let resolver = resolver.clone();
        let ready = ready_tx.clone();
        let h = std::thread::Builder::new()
            .name(format!("ringside-core-{id}"))
            .spawn(move || worker(id, shared, tls, resolver, inbox, ready))
            .map_err(|e| format!("cannot start worker thread: {e}"))?;
        handles.push(h);
    }
    drop(ready_tx);
    let mut drivers = Vec::new();
    for _ in 0..workers {
        let failed = match ready_rx.recv() {
            Ok(Ok(d)) => {
                drivers.push(d);
                continue;
            }
            Ok(Err(e)) => e,
            Err(_) => "a worker died during start".into(),
        };
        shared.shutdown.store(true, Ordering::SeqCst);
        if let Some(f) = fleet {
            f.stop();
        }
        return Err(failed);
    }
    Ok(Running {
        shared,
        drivers,
        workers: handles,
        admin: None,
        admin_inbox: Some(admin_inbox),
        fleet,
        _lock: lock,
    })
}

pub(crate) type Ready = std::sync::mpsc::Sender<Result<&'static str, String>>;
/// A core's event inbox and the read end of its doorbell.
pub(crate) type Inbox = (
    crossbeam_channel::Receiver<crate::resilience::Event>,
    std::os::unix::net::UnixStream,
);

/// Pin this worker's thread inside the process's allowed CPU set, when it has a CPU to spare
/// (`cpu::pin_target`); say what happened either way.
fn pin(id: usize, workers: usize) {
    let allowed = crate::cpu::allowed();
    let Some(cpu) = crate::cpu::pin_target(&allowed, id, workers) else {
        if id == 0 {
            event(
                "info",
                "workers not pinned: the allowed CPU set has no CPU to spare beyond the workers",
                serde_json::json!({"workers": workers, "allowed_cpus": allowed}),
            );
        }
        return;
    };
    if let Err(e) = monoio::utils::bind_to_cpu_set(Some(cpu)) {
        event(
            "warn",
            "could not pin a worker",
            serde_json::json!({"core": id, "cpu": cpu, "error": e.to_string()}),
        );
    }
}

/// Submission-queue entries of each core's ring: what a core asks between two entries into the
/// kernel (monoio submits when the queue fills). The size also sets how many chains the kernel
/// hashes armed polls into, to find one it is asked to cancel (the completion queue's entries
/// / 32, at most 256). With 1,024 (64 chains) and thousands of held streams each cancel walked
/// a chain of a hundred or more cold entries, about 10 µs per closed connection at 9,000
/// streams; 4,096 gives the kernel's 256. The rings take about 400 KiB per core.
const RING_ENTRIES: u32 = 4096;
/// Events one epoll wait may return.
const EPOLL_EVENTS: u32 = 1024;

fn worker(
    id: usize,
    shared: Arc<Shared>,
    tls: crate::upstream::tls::CoreTls,
    resolver: Resolver,
    inbox: Inbox,
    ready: Ready,
) {
    let server = shared.current().config.server.clone();
    if server.pin_workers {
        pin(id, server.workers);
    }
    let want_uring = match server.driver {
        DriverChoice::Uring => true,
        DriverChoice::Epoll => false,
        DriverChoice::Auto => monoio::utils::detect_uring(),
    };
    // A ring of standing polls left by an earlier runtime on this thread has no reaper.
    crate::http::standing::start_of_runtime();
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
                .with_entries(RING_ENTRIES)
                .uring_builder(b)
                .enable_timer()
                .build()
        };
        let built = ring(true).or_else(|_| ring(false));
        match built {
            Ok(mut rt) => {
                rt.block_on(core::run(
                    id, shared, tls, resolver, inbox, ready, "io_uring",
                ));
                return;
            }
            Err(e) if server.driver == DriverChoice::Uring => {
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
        .with_entries(EPOLL_EVENTS)
        .enable_timer()
        .build()
    {
        Ok(mut rt) => rt.block_on(core::run(id, shared, tls, resolver, inbox, ready, "epoll")),
        Err(e) => {
            let _ = ready.send(Err(format!("cannot build the epoll runtime: {e}")));
        }
    }
}
