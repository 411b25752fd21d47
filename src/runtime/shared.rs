//! The state the cores share, built once at start: routes, labels, metrics, the store, the
//! event bus, flow control (with its per-core doorbells) and the lease view.

use super::Inbox;
use crate::config::Config;
use crate::log::LogSink;
use crate::metrics::CoreMetrics;
use crate::route::RouteTable;
use crate::state::core::Shared;
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

type AdminInbox = crossbeam_channel::Receiver<crate::resilience::Event>;

/// The shared state, each core's inbox, and the admin replica's inbox.
pub(super) fn build(
    config: Config,
    access_log: Option<LogSink>,
    workers: usize,
) -> Result<(Arc<Shared>, Vec<Inbox>, AdminInbox), String> {
    let routes = RouteTable::build(&config);
    let route_labels = routes.labels();
    let conn_labels = conn_labels(&config);
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
    let (bell_writers, bell_readers) = doorbells(workers)?;
    let flow = flow_shared(&config, store, bell_writers);
    // Leases that outlived a restart keep their connections off-limits from the first request.
    let leases: &'static crate::store::leases::LeaseView =
        Box::leak(Box::new(crate::store::leases::LeaseView::new(&conn_labels)));
    store.attach_view(leases);
    let providers = config.providers.len();
    let connections = config.connection_count();
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
        lifecycle: Default::default(),
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
    let inboxes = inboxes.into_iter().zip(bell_readers).collect();
    Ok((shared, inboxes, admin_inbox))
}

/// (provider id, connection id) of every connection, by its index.
fn conn_labels(config: &Config) -> Vec<(String, String)> {
    let mut labels = vec![(String::new(), String::new()); config.connection_count()];
    for p in &config.providers {
        for c in &p.connections {
            labels[c.index] = (p.id.clone(), c.id.clone());
        }
    }
    labels
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
) -> &'static crate::flow::FlowShared {
    let flow_conns: Vec<crate::flow::ConnFlow> = config
        .providers
        .iter()
        .flat_map(|p| p.connections.iter().map(|c| c.flow.clone()))
        .collect();
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
