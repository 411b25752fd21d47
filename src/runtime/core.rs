//! One core's life: its listener, its `Core` (plain data it alone owns), its housekeeping
//! tick, doorbell and queue pump, the accept loop, and the drain at shutdown.

use super::{Inbox, Ready};
use crate::state::core::{Core, Shared};
use crate::state::generation::{CoreGen, Gen};
use crate::upstream::{Connector, dns::Resolver, pool::Pool};
use monoio::net::{ListenerOpts, TcpListener};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Run one core until it has drained.
pub(super) async fn run(
    id: usize,
    shared: Arc<Shared>,
    tls: crate::upstream::tls::CoreTls,
    resolver: Resolver,
    inbox: Inbox,
    ready: Ready,
    driver: &'static str,
) {
    let (inbox, bell) = inbox;
    // This core's timer wheel: every deadline on the request path lives there.
    crate::timer::install();
    let opts = ListenerOpts::new()
        .reuse_port(true)
        .reuse_addr(true)
        .backlog(4096);
    let generation = shared.current();
    let listen = generation.config.server.listen;
    let listener = match TcpListener::bind_with_config(listen, &opts) {
        Ok(l) => l,
        Err(e) => {
            let _ = ready.send(Err(format!("cannot listen on {listen}: {e}")));
            return;
        }
    };
    let metrics = shared.metrics[id].clone();
    metrics
        .uring
        .store(i64::from(driver == "io_uring"), Ordering::Relaxed);
    let connector = Connector {
        resolver,
        dns: RefCell::default(),
        tls,
        own_tls: RefCell::default(),
        h2: RefCell::new(crate::upstream::h2::H2Pool::new(
            crate::upstream::h2::Ping::of(&generation.config.upstream),
        )),
        metrics: metrics.clone(),
        connect_timeout: Duration::from_millis(generation.config.upstream.connect_timeout_ms),
        connects: Default::default(),
        connects_in_flight: generation.config.upstream.connects_in_flight,
        dns_ttl_ms: generation.config.upstream.dns_ttl_ms,
    };
    let core = Rc::new(new_core(id, shared, generation, metrics, connector, inbox));
    let _ = ready.send(Ok(driver));
    monoio::spawn(tick(core.clone()));
    if id == 0 {
        // One prober for the process: one probe per provider at a time.
        monoio::spawn(crate::proxy::prober::run(core.clone()));
        // And one writer of the state that outlives a restart.
        monoio::spawn(crate::saved::run(core.clone()));
    }
    monoio::spawn(crate::flow::run_doorbell(bell, core.flow.clone()));
    // The pump lives as long as the core: queued requests keep being served while draining.
    monoio::spawn(crate::flow::run_pump(
        core.shared.flow,
        core.flow.clone(),
        || false,
    ));
    accept_until_drained(&core, listener).await;
    let cut_at = std::time::Instant::now() + core.generation().config.server.shutdown_grace;
    // Streams still running at the grace's end end themselves then, with the dialect's error
    // event and their log line (`forward::stream`); a moment after, what is still open goes
    // with the runtime.
    crate::state::drain::cut_streams_at(cut_at);
    let mut deadline = cut_at + CUT_SETTLES_IN;
    let life = &core.shared.lifecycle;
    let (mut hurried, mut cut) = (false, false);
    while core.open_conns.get() > 0 && std::time::Instant::now() < deadline {
        if life.in_a_hurry() && !hurried {
            // A second signal: the grace ends now (streams see it when they next read).
            hurried = true;
            let now = std::time::Instant::now();
            crate::state::drain::cut_streams_at(now);
            deadline = deadline.min(now + CUT_SETTLES_IN);
        }
        if !cut && std::time::Instant::now() + CUT_SETTLES_IN >= deadline {
            // The grace's end: requests still waiting for a response head are answered.
            cut = true;
            crate::state::drain::cut_now();
        }
        // The tick has stopped: the log lines of requests that finish meanwhile go out here.
        core.flush_log();
        monoio::time::sleep(Duration::from_millis(20)).await;
    }
    // What is still open now is dropped with the runtime: counted, and said by the caller.
    life.count_cut(core.open_conns.get());
    core.flush_log();
    core.pool.borrow_mut().clear();
    core.connector.h2.borrow_mut().clear();
}

/// How long after the grace's end the cut streams get to send their error event and log line.
const CUT_SETTLES_IN: Duration = Duration::from_millis(500);

/// The core's own state, as it starts.
fn new_core(
    id: usize,
    shared: Arc<Shared>,
    generation: Arc<Gen>,
    metrics: Arc<crate::metrics::CoreMetrics>,
    connector: Connector,
    inbox: crossbeam_channel::Receiver<crate::resilience::Event>,
) -> Core {
    let cfg = &generation.config;
    let mut tables = crate::resilience::Tables::new(cfg.provider_slot_count(), cfg.slot_count());
    // Terminal states outlive a restart (until an operator resets them).
    for (i, st) in shared.stored_terminals(&generation) {
        tables.conns[i] = st;
    }
    // So do cooldowns, lockouts and open breakers, with the time they have left.
    crate::saved::restore(shared.store, &generation, &mut tables);
    Core {
        id,
        metrics,
        connector,
        pool: RefCell::new(Pool::new(
            cfg.upstream.pool_max_idle_per_upstream,
            cfg.upstream.pool_idle_timeout_ms,
        )),
        generation: RefCell::new(Rc::new(CoreGen::new(generation.clone(), id))),
        drain: Default::default(),
        open_conns: Cell::new(0),
        request_seq: Cell::new(0),
        tables: RefCell::new(tables),
        inbox,
        loads: RefCell::new(crate::route::load::LoadTable::new(cfg.slot_count())),
        flow: Rc::new(crate::flow::FlowCore::new(id, cfg.slot_count())),
        decisions: RefCell::new(crate::state::decisions::Decisions::per_core(
            cfg.resilience.decision_ring,
            cfg.resilience.decision_ring_plain,
            cfg.server.workers,
        )),
        pins: RefCell::default(),
        log_batch: RefCell::default(),
        tokens: RefCell::default(),
        shared,
    }
}

/// Accept client connections, each one task, until the core drains.
async fn accept_until_drained(core: &Rc<Core>, listener: TcpListener) {
    loop {
        monoio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let tls = core.generation().config.server.tls.clone();
                    if let Some(tls) = tls {
                        let serve = crate::proxy::serve_tls_client(core.clone(), stream, peer.ip(), tls);
                        monoio::spawn(crate::contain::contained(
                            serve,
                            &crate::metrics::TASK_PANICS,
                            Some(core.id),
                        ));
                        continue;
                    }
                    let serve = crate::proxy::serve_client(core.clone(), stream, peer.ip());
                    monoio::spawn(crate::contain::contained(
                        crate::clock::per_poll(serve),
                        &crate::metrics::TASK_PANICS,
                        Some(core.id),
                    ));
                }
                // Out of descriptors or similar: back off briefly instead of spinning (the
                // client waits in the listen queue); a shortage counted lets every core's idle
                // upstream connections go at its next tick.
                Err(e) => {
                    crate::fd_limit::noted_exhaustion(&e);
                    monoio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            _ = core.drain.wait() => break,
        }
    }
}

/// How often the housekeeping tick runs; how late it wakes is the core's loop lag.
const TICK: Duration = Duration::from_millis(50);

/// The core's housekeeping tick: notice shutdown, sweep idle upstream connections, measure
/// the core's load (`core_load`).
async fn tick(core: Rc<Core>) {
    let mut n = 0u64;
    // Opened here, on the core's own thread: the file names the thread that opens it.
    let mut run_delay = crate::core_load::RunDelay::of_this_thread();
    let mut exhaustions = crate::fd_limit::exhaustions();
    loop {
        let asleep = std::time::Instant::now();
        monoio::time::sleep(TICK).await;
        let load = observe_load(&core, asleep, &mut run_delay);
        let lag_us = u64::try_from(load.lag().as_micros()).unwrap_or(u64::MAX);
        core.metrics.loop_lag_us.store(lag_us, Ordering::Relaxed);
        core.metrics
            .busy
            .store(i64::from(load.busy()), Ordering::Relaxed);
        core.metrics
            .cpu_wait_permille
            .store(load.cpu_wait_permille().into(), Ordering::Relaxed);
        let standing = i64::try_from(crate::http::standing::held()).unwrap_or(i64::MAX);
        core.metrics
            .standing_polls
            .store(standing, Ordering::Relaxed);
        if core.shared.shutdown.load(Ordering::Relaxed) {
            core.drain.trigger();
            return;
        }
        n += 1;
        // Some core found no descriptor or port: the idle upstream connections are the
        // descriptors Ringside can spare, so every core lets its own go.
        let now_exhausted = crate::fd_limit::exhaustions();
        if now_exhausted != exhaustions {
            exhaustions = now_exhausted;
            core.pool.borrow_mut().clear();
            // HTTP/2 connections carrying no stream.
            let now = crate::clock::now_ms();
            core.connector.h2.borrow_mut().sweep(now, 0);
        }
        core.install_newest();
        core.sync();
        core.flush_log();
        if n.is_multiple_of(20) {
            let now = crate::clock::now_ms();
            core.pool.borrow_mut().sweep(now);
            let generation = core.generation();
            let idle_ms = generation.config.upstream.pool_idle_timeout_ms;
            let mut h2 = core.connector.h2.borrow_mut();
            h2.sweep(now, idle_ms);
            let (conns, streams) = h2.counts();
            let http1 = h2.any_http1();
            drop(h2);
            let h2 = &core.metrics.h2;
            h2.open[0].store(conns as u64, std::sync::atomic::Ordering::Relaxed);
            h2.open[1].store(streams as u64, std::sync::atomic::Ordering::Relaxed);
            h2.http1.store(http1, std::sync::atomic::Ordering::Relaxed);
            let goaways = crate::upstream::h2::link::goaways_received();
            for (to, n) in h2.goaways.iter().zip(goaways) {
                to.store(n, std::sync::atomic::Ordering::Relaxed);
            }
            let s = &generation.config.resilience;
            core.tables.borrow_mut().lockouts.sweep(&s.lockout, now);
            core.sweep_pins(crate::clock::unix_ms());
            if core.id == 0 {
                crate::proxy::oauth::refresh_due(&core);
            }
        }
    }
}

/// One wake of the tick, judged (`core_load`): how late it woke after sleeping from `asleep`,
/// and how long the core waited for a CPU since the wake before.
fn observe_load(
    core: &Core,
    asleep: std::time::Instant,
    run_delay: &mut crate::core_load::RunDelay,
) -> crate::core_load::LoopLoad {
    let waited = run_delay.since_last();
    let generation = core.generation();
    let stream = &generation.config.stream;
    let marks = crate::core_load::Marks {
        late: Duration::from_millis(stream.coalesce_busy_lag_ms.into()),
        wait_percent: stream.coalesce_busy_wait_percent,
    };
    let tick = crate::core_load::Tick {
        late: asleep.elapsed().saturating_sub(TICK),
        waited,
    };
    crate::core_load::observe(tick, marks)
}
