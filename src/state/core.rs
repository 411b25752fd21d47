//! What one core owns: its pools, selectors, counters and drain signal. Plain data behind
//! `Rc`/`RefCell`, touched only by the core's own thread; cross-core state is in [`Shared`].

use super::drain::Drain;
use super::generation::{CoreGen, Gen};
use crate::audit::Record;
use crate::http::response::hex;
use crate::ids::ConnId;
use crate::log::LogSink;
use crate::metrics::CoreMetrics;
use crate::resilience::bus::{Bus, drain};
use crate::resilience::classify::Verdict;
use crate::resilience::{Event, Probes, Site, Tables};
use crate::route::load::LoadTable;
use crate::upstream::{Connector, pool::Pool};
use crossbeam_channel::Receiver;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

/// Read-only (or atomic) state shared by every core.
pub struct Shared {
    /// The applied configuration, for whoever is not a core (the admin port, the reload);
    /// each core keeps its own copy of the `Arc` (`Core::generation`).
    pub(crate) current: std::sync::Mutex<Arc<Gen>>,
    /// The generation the cores are to install (ahead of `current` during a reload).
    pub(crate) staged: std::sync::Mutex<Arc<Gen>>,
    /// The number of the newest generation (cores compare it on their tick).
    pub newest: AtomicU64,
    /// Per core: the generation it has installed (the reload waits for all of them).
    pub installed: Vec<AtomicU64>,
    /// Where each connection, provider and route keeps its state (`slots`).
    pub slots: std::sync::Mutex<super::slots::Slots>,
    /// Reloads: the config file, counts and the last outcome (`reload`).
    pub reloads: super::reload::Reloads,
    pub metrics: Vec<Arc<CoreMetrics>>,
    pub shutdown: AtomicBool,
    /// Draining, hurrying, stopped, and how many connections the grace's end cut.
    pub lifecycle: super::lifecycle::Lifecycle,
    pub log: Option<LogSink>,
    /// Random per-process prefix for request ids.
    pub id_prefix: u32,
    /// Cross-core resilience events (members: the cores, then the admin replica).
    pub bus: Bus,
    /// Half-open probe claims, one per provider.
    pub probes: Probes,
    /// Requests in flight per connection, across all cores.
    pub in_flight: Vec<AtomicU32>,
    /// Flow control: per-connection gates and the cores' doorbells.
    pub flow: &'static crate::flow::FlowShared,
    /// The durable store (terminal states, admin settings).
    pub store: &'static crate::store::Store,
    /// Until when each connection is held by an exclusive lease (kept by the store writer).
    pub leases: &'static crate::store::leases::LeaseView,
    /// Whether client keys created through the admin API exist (closes open mode).
    pub managed_keys: AtomicBool,
    /// Client connections held, in total and keyless per address.
    pub conn_caps: super::conn_caps::ConnCaps,
    /// Fleet mode's link to the other instances.
    pub fleet: crate::metrics::FleetCounters,
    /// Claude subscription accounts' usage walls, per connection slot.
    pub usage_walls: crate::resilience::usage_wall::walls::Walls,
    /// OAuth access tokens refreshed at run time, per connection slot.
    pub tokens: crate::upstream::tokens::Tokens,
    /// The requests given up on lately, to know a client's retry of one (`resilience::repeats`).
    pub repeats: crate::resilience::repeats::Repeats,
    /// Admin changes: who, what, before and after, when (`audit_trail`).
    pub audit_trail: super::audit_trail::AuditTrail,
    /// Where finished requests' spans go (`[telemetry]`), when exported.
    pub telemetry: Option<crate::telemetry::Sink>,
}

impl Shared {
    /// The generation serving new requests (not for the request path: a core has its own).
    pub fn current(&self) -> Arc<Gen> {
        self.current
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The client caps in force now (all connections, one address's), for the operator.
    pub fn caps_in_force(&self) -> (usize, u32) {
        let up = super::descriptor_cap::upstream_use(&self.metrics, self.current().http1_by_config);
        self.conn_caps.limits(up)
    }

    /// The newest generation, for the cores to install (and the admin replica to size for).
    pub fn staged(&self) -> Arc<Gen> {
        self.staged
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Phase one of a reload: the cores install `generation` at their next tick.
    pub fn stage(&self, generation: Arc<Gen>) {
        let number = generation.number;
        *self.staged.lock().unwrap_or_else(|e| e.into_inner()) = generation;
        self.newest.store(number, Ordering::Release);
    }

    /// Once every core serves it: `generation` is the current one for everyone else.
    pub fn commit(&self, generation: Arc<Gen>) {
        *self.current.lock().unwrap_or_else(|e| e.into_inner()) = generation;
    }

    /// The store key of a connection's terminal state.
    pub fn terminal_key(generation: &Gen, conn: ConnId) -> String {
        let (p, c) = generation
            .conn_labels
            .get(conn.index())
            .cloned()
            .unwrap_or_default();
        format!("terminal/{p}/{c}")
    }

    /// Persist a connection state that turned terminal (kept until an operator reset).
    pub fn persist_terminal(
        &self,
        generation: &Gen,
        conn: ConnId,
        state: &crate::resilience::cooldown::ConnState,
    ) {
        if let Some(t) = state.terminal {
            self.store.put(
                Self::terminal_key(generation, conn),
                serde_json::json!({"terminal": t, "epoch": state.epoch}),
            );
        }
    }

    /// Terminal states from the store, by connection slot.
    pub fn stored_terminals(
        &self,
        generation: &Gen,
    ) -> Vec<(ConnId, crate::resilience::cooldown::ConnState)> {
        let mut out = Vec::new();
        for (k, v) in self.store.scan("terminal/") {
            let Some(i) = k
                .strip_prefix("terminal/")
                .and_then(|label| generation.conn_by_label(label))
            else {
                continue; // a connection no longer in the config
            };
            let Ok(t) = serde_json::from_value(v["terminal"].clone()) else {
                continue;
            };
            out.push((
                i,
                crate::resilience::cooldown::ConnState {
                    terminal: Some(t),
                    epoch: v["epoch"].as_u64().unwrap_or(0) as u32,
                    ..Default::default()
                },
            ));
        }
        out
    }
}

pub struct Core {
    pub id: usize,
    pub shared: Arc<Shared>,
    pub metrics: Arc<CoreMetrics>,
    pub connector: Connector,
    pub pool: RefCell<Pool>,
    /// The generation this core serves new requests on, with its route selectors.
    pub generation: RefCell<Rc<CoreGen>>,
    pub drain: Drain,
    /// Client connections open on this core.
    pub open_conns: Cell<usize>,
    pub request_seq: Cell<u64>,
    /// This core's resilience tables and the inbox that keeps them in step with the others.
    pub tables: RefCell<Tables>,
    pub inbox: Receiver<Event>,
    pub loads: RefCell<LoadTable>,
    /// This core's flow queues.
    pub flow: std::rc::Rc<crate::flow::FlowCore>,
    /// The latest decision records of requests served here (the admin asks over the bus).
    pub decisions: RefCell<super::decisions::Decisions>,
    /// Session pins known to this core (replicated by events; the store keeps them durable).
    pub pins: RefCell<std::collections::HashMap<std::sync::Arc<str>, (ConnId, u64)>>,
    /// This core's access-log lines not yet handed to the writer (`log::Batch`).
    pub log_batch: RefCell<crate::log::Batch>,
    /// This core's copy of each refreshed OAuth access token, with the version it copied
    /// (`upstream::tokens`): a send compares one atomic, and locks only after a refresh.
    pub tokens: RefCell<Vec<(u64, Option<Arc<str>>)>>,
}

impl Core {
    /// Hand the buffered access-log lines to the writer (the core's tick, and its end).
    pub fn flush_log(&self) {
        if let Some(log) = &self.shared.log {
            let dropped = self.log_batch.borrow_mut().flush(log);
            if dropped > 0 {
                self.metrics
                    .log_lines_dropped
                    .fetch_add(dropped, std::sync::atomic::Ordering::Relaxed);
            }
        }
    }
}

impl Core {
    /// The generation new requests start on (a request keeps it to its end).
    pub fn generation(&self) -> Rc<CoreGen> {
        self.generation.borrow().clone()
    }

    /// Install the newest generation if this core does not serve it yet (on the tick, so
    /// between requests): room for new slots, clean state in fresh ones, new selectors.
    /// Requests in flight keep the generation they hold.
    pub fn install_newest(&self) {
        let newest = self.shared.newest.load(Ordering::Acquire);
        if newest == self.generation.borrow().number {
            return;
        }
        let generation = self.shared.staged();
        let cfg = &generation.config;
        let (fresh, retired) = (&generation.fresh_conns, &generation.retired_conns);
        self.tables.borrow_mut().fit(
            cfg.provider_slot_count(),
            cfg.slot_count(),
            &generation.fresh_providers,
            fresh,
        );
        self.loads.borrow_mut().fit(cfg.slot_count(), fresh);
        self.flow.fit(cfg.slot_count());
        // A provider slot that is new, or reached elsewhere now: none of the connections to
        // what it was are used for it, pooled or multiplexed.
        for p in generation.moved_providers(&self.generation().config) {
            self.pool.borrow_mut().moved(p, generation.number);
            self.connector.h2.borrow_mut().forget(p);
        }
        // A pin to a connection this generation lacks could never be honoured.
        self.pins
            .borrow_mut()
            .retain(|_, (c, _)| !retired.contains(c) && !fresh.contains(c));
        // The operator may have changed what a refusal on the way answered (a proxy's
        // credentials, a client certificate): one core ends those cooldowns for all.
        if self.id == 0 {
            self.tables
                .borrow_mut()
                .forget_refusals(&mut |ev| self.emit(ev));
        }
        let number = generation.number;
        *self.generation.borrow_mut() = Rc::new(CoreGen::new(generation, self.id));
        if let Some(a) = self.shared.installed.get(self.id) {
            a.store(number, Ordering::Release);
        }
    }

    /// Merge what other cores learned (before every routing decision and on the tick).
    pub fn sync(&self) {
        if self.inbox.is_empty() {
            return;
        }
        let generation = self.generation();
        let s = &generation.config.resilience;
        let mut t = self.tables.borrow_mut();
        drain(&self.inbox, |ev| match ev {
            Event::DecisionQuery { id, limit, reply } => {
                let d = self.decisions.borrow();
                let found: Vec<Record> = match id {
                    Some(id) => d.find(id).into_iter().collect(),
                    None => d.latest(*limit),
                };
                let _ = reply.send(found);
            }
            Event::Pin { key, conn, until } => {
                // The newest pin wins, whatever order pins arrive in (other cores, the fleet).
                let mut pins = self.pins.borrow_mut();
                if pins.get(key).is_none_or(|&(_, u)| u <= *until) {
                    pins.insert(key.clone(), (*conn, *until));
                }
            }
            ev => t.apply(ev, s),
        });
    }

    /// The connection a session is pinned to, if the pin is alive (this core's copy first,
    /// then the store for pins made before a restart).
    pub fn pinned(&self, key: &str, now_unix: u64) -> Option<(ConnId, u64)> {
        if let Some(&(c, until)) = self.pins.borrow().get(key) {
            return (until > now_unix).then_some((c, until));
        }
        let (label, until) = crate::store::pins::pinned(self.shared.store, key, now_unix)?;
        Some((self.generation().conn_by_label(&label)?, until))
    }

    /// Pin a session to a connection on every core (and in the store), unless the pin is
    /// already there and fresh.
    pub fn pin(
        &self,
        key: &str,
        conn: ConnId,
        ttl_ms: u64,
        had: Option<(ConnId, u64)>,
        now_unix: u64,
    ) {
        if had.is_some_and(|(c, until)| c == conn && until > now_unix + ttl_ms / 2) {
            return;
        }
        let until = now_unix + ttl_ms;
        let key: std::sync::Arc<str> = std::sync::Arc::from(key);
        self.pins.borrow_mut().insert(key.clone(), (conn, until));
        self.emit(Event::Pin {
            key: key.clone(),
            conn,
            until,
        });
        let (p, c) = self
            .generation()
            .conn_labels
            .get(conn.index())
            .cloned()
            .unwrap_or_default();
        self.shared.store.put(
            key.to_string(),
            serde_json::json!({"conn": format!("{p}/{c}"), "until": until}),
        );
    }

    /// Forget expired pins (on the tick); the table stays bounded.
    pub fn sweep_pins(&self, now_unix: u64) {
        let mut pins = self.pins.borrow_mut();
        pins.retain(|_, (_, until)| *until > now_unix);
        if pins.len() > 200_000 {
            pins.clear(); // the store still has them
        }
    }

    /// Keep a finished request's decision record (see `runtime::decisions`).
    pub fn remember(&self, r: Record) {
        self.decisions.borrow_mut().remember(r);
    }

    fn emit(&self, ev: Event) {
        self.shared.bus.broadcast(self.id, &ev);
    }

    pub fn record_failure(&self, site: Site, v: &Verdict) {
        let generation = self.generation();
        let s = &generation.config.resilience;
        let now = crate::clock::now_ms();
        let mut t = self.tables.borrow_mut();
        t.on_failure(s, site, v, now, &mut |ev| {
            if let Event::Conn { conn, state } = &ev {
                self.shared.persist_terminal(&generation, *conn, state);
            }
            self.emit(ev)
        });
    }

    pub fn record_success(&self, site: Site) {
        let generation = self.generation();
        let s = &generation.config.resilience;
        let now = crate::clock::now_ms();
        let mut t = self.tables.borrow_mut();
        t.on_success(s, site, now, &mut |ev| self.emit(ev));
    }

    /// A synthetic probe's answer for `conn` of the provider in `slot`; whether it changed
    /// anything (a breaker half-opened, a key lifted).
    pub fn record_probe(
        &self,
        slot: usize,
        conn: ConnId,
        answer: crate::resilience::probe::ProbeAnswer,
    ) -> bool {
        let generation = self.generation();
        let s = &generation.config.resilience;
        let now = crate::clock::now_ms();
        let mut changed = false;
        let mut t = self.tables.borrow_mut();
        t.on_probe(s, slot, conn, answer, now, &mut |ev| {
            changed = true;
            self.emit(ev)
        });
        changed
    }

    /// A new request id: process prefix, core, sequence.
    pub fn next_request_id(&self) -> String {
        let n = self.request_seq.get() + 1;
        self.request_seq.set(n);
        // Hex written by hand: `write!` cost ~800 instructions per request here (callgrind).
        let mut id = String::with_capacity(40);
        let tmp = &mut [0u8; 16];
        id.push_str("rs-");
        id.push_str(hex(u64::from(self.shared.id_prefix), 8, tmp));
        id.push('-');
        id.push_str(hex(self.id as u64, 1, tmp));
        id.push('-');
        id.push_str(hex(n, 1, tmp));
        id
    }
}
