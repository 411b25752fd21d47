//! The state the cores share, built once at start: the first generation (config, routes,
//! labels), the slots, metrics, the store, the event bus, flow control (with its per-core
//! doorbells) and the lease view. Per-slot arrays have room for every slot a reload may add.

use super::Inbox;
use crate::config::Config;
use crate::log::LogSink;
use crate::metrics::CoreMetrics;
use crate::state::core::Shared;
use crate::state::generation::Gen;
use crate::state::slots::Slots;
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64};

type AdminInbox = crossbeam_channel::Receiver<crate::resilience::Event>;
/// The inboxes beyond the cores': the admin replica's and fleet mode's.
pub(super) type Inboxes = (Vec<Inbox>, AdminInbox, AdminInbox);

/// The shared state, each core's inbox, and the admin replica's inbox.
pub(super) fn build(
    config: Config,
    access_log: Option<LogSink>,
    workers: usize,
) -> Result<(Arc<Shared>, Inboxes), String> {
    let mut slots = Slots::new(&config);
    let store = crate::store::open(
        &config.server.data_dir,
        config.store_map_size,
        config.store_fast,
    )?;
    let (bus, mut inboxes) = crate::resilience::bus::bus(workers + 2);
    let fleet_inbox = inboxes.pop().ok_or("event bus without members")?;
    let admin_inbox = inboxes.pop().ok_or("event bus without members")?;
    let (bell_writers, bell_readers) = doorbells(workers)?;
    let flow = flow_shared(&config, store, bell_writers, slots.conn_capacity);
    let max_connections = config.server.max_connections;
    let config_fleet_off = config.fleet.is_none();
    let max_unauthenticated = config.server.max_unauthenticated_per_address;
    let address_share = config.server.max_connections_per_address;
    let generation = Arc::new(Gen::build(1, config, &mut slots));
    // Spacing learned from rate-limit headers before a restart, with its window's time left.
    crate::saved::restore_pacing(store, &generation, &flow.gates);
    crate::saved::restore_spend(store, &generation, &flow.spend);
    let metrics: Vec<Arc<CoreMetrics>> = (0..workers)
        .map(|_| Arc::new(CoreMetrics::new(slots.route_capacity, slots.conn_capacity)))
        .collect();
    // Leases that outlived a restart keep their connections off-limits from the first request.
    let leases: &'static crate::store::leases::LeaseView = Box::leak(Box::new(
        crate::store::leases::LeaseView::new(&generation.conn_labels, slots.conn_capacity),
    ));
    // In fleet mode the view follows the fleet's book instead (`fleet::leases`).
    if config_fleet_off {
        store.attach_view(leases);
    }
    let usage_walls = crate::resilience::usage_wall::walls::Walls::new(slots.conn_capacity);
    let cfg = &generation.config;
    let tokens =
        crate::upstream::tokens::Tokens::new(slots.conn_capacity, cfg.token_key.as_ref(), store);
    // Refreshed tokens kept sealed win over the environment's while it gives the same seed.
    tokens.seed(cfg, store);
    let telemetry = match &cfg.telemetry {
        Some(t) => Some(crate::telemetry::start(t)?),
        None => None,
    };
    let shared = Arc::new(Shared {
        newest: AtomicU64::new(generation.number),
        installed: (0..workers)
            .map(|_| AtomicU64::new(generation.number))
            .collect(),
        current: std::sync::Mutex::new(generation.clone()),
        staged: std::sync::Mutex::new(generation),
        reloads: Default::default(),
        metrics,
        shutdown: Default::default(),
        lifecycle: Default::default(),
        log: access_log,
        id_prefix: rand::random(),
        bus,
        probes: crate::resilience::Probes::new(slots.provider_capacity),
        in_flight: (0..slots.conn_capacity)
            .map(|_| Default::default())
            .collect(),
        flow,
        store,
        leases,
        managed_keys: AtomicBool::new(crate::clients::managed::any(store)),
        conn_caps: crate::state::conn_caps::ConnCaps::new(
            max_connections,
            address_share,
            max_unauthenticated,
        ),
        slots: std::sync::Mutex::new(slots),
        fleet: Default::default(),
        usage_walls,
        tokens,
        repeats: Default::default(),
        audit_trail: crate::state::audit_trail::AuditTrail::load(store),
        telemetry,
    });
    let inboxes = inboxes.into_iter().zip(bell_readers).collect();
    Ok((shared, (inboxes, admin_inbox, fleet_inbox)))
}

/// One doorbell per core: another core writes a byte to wake this core's queue pump.
fn doorbells(workers: usize) -> Result<(Vec<UnixStream>, Vec<UnixStream>), String> {
    let mut writers = Vec::new();
    let mut readers = Vec::new();
    for _ in 0..workers {
        let (w, r) =
            UnixStream::pair().map_err(|e| format!("cannot create a core doorbell: {e}"))?;
        w.set_nonblocking(true)
            .map_err(|e| format!("cannot create a core doorbell: {e}"))?;
        writers.push(w);
        readers.push(r);
    }
    Ok((writers, readers))
}

/// Flow control's shared half, with the settings an operator changed through the admin API
/// (they survive a restart). It lives as long as the process: permits refer to it without
/// touching a shared refcount.
fn flow_shared(
    config: &Config,
    store: &'static crate::store::Store,
    bell_writers: Vec<UnixStream>,
    capacity: usize,
) -> &'static crate::flow::FlowShared {
    // Every slot the process may hand out has its gate from the start (a reload sets them).
    let mut flow_conns: Vec<crate::flow::ConnFlow> = config
        .providers
        .iter()
        .flat_map(|p| p.connections.iter().map(|c| c.flow.clone()))
        .collect();
    flow_conns.resize(capacity.max(flow_conns.len()), Default::default());
    let flow: &'static crate::flow::FlowShared = Box::leak(Box::new(
        crate::flow::FlowShared::with_tenants(
            flow_conns,
            crate::flow::settings::Budgets::new(config.flow_env),
            bell_writers,
            config.tenant_limits,
        )
        .with_accounts(&config.accounts),
    ));
    flow.budgets
        .apply_saved(store.scan(crate::flow::settings::SAVED_PREFIX));
    flow
}
