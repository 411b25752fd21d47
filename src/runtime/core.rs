//! What one core owns: its pools, selectors, counters and drain signal. Plain data behind
//! `Rc`/`RefCell`, touched only by the core's own thread; cross-core state is in [`Shared`].

use super::drain::Drain;
use crate::config::Config;
use crate::log::LogSink;
use crate::metrics::CoreMetrics;
use crate::proxy::record::Record;
use crate::resilience::bus::{Bus, drain};
use crate::resilience::classify::Verdict;
use crate::resilience::{Event, Probes, Site, Tables};
use crate::route::RouteTable;
use crate::route::load::LoadTable;
use crate::route::strategy::SelectorState;
use crate::upstream::{Connector, pool::Pool};
use crossbeam_channel::Receiver;
use std::cell::{Cell, RefCell};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32};

/// Read-only (or atomic) state shared by every core.
pub struct Shared {
    pub config: Config,
    pub routes: RouteTable,
    pub route_labels: Vec<String>,
    /// (provider id, connection id) by flat connection index.
    pub conn_labels: Vec<(String, String)>,
    pub metrics: Vec<Arc<CoreMetrics>>,
    pub shutdown: AtomicBool,
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
}

impl Shared {
    /// The store key of a connection's terminal state.
    pub fn terminal_key(&self, conn: usize) -> String {
        let (p, c) = self.conn_labels.get(conn).cloned().unwrap_or_default();
        format!("terminal/{p}/{c}")
    }

    /// Persist a connection state that turned terminal (kept until an operator reset).
    pub fn persist_terminal(&self, conn: usize, state: &crate::resilience::cooldown::ConnState) {
        if let Some(t) = state.terminal {
            self.store.put(
                self.terminal_key(conn),
                serde_json::json!({"terminal": t, "epoch": state.epoch}),
            );
        }
    }

    /// Terminal states from the store, by flat connection index.
    pub fn stored_terminals(&self) -> Vec<(usize, crate::resilience::cooldown::ConnState)> {
        let mut out = Vec::new();
        for (k, v) in self.store.scan("terminal/") {
            let Some(i) = (0..self.conn_labels.len()).find(|&i| self.terminal_key(i) == k) else {
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
    pub selector: RefCell<SelectorState>,
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
    pub ring: RefCell<std::collections::VecDeque<Record>>,
    pub ring_cap: usize,
}

impl Core {
    pub fn config(&self) -> &Config {
        &self.shared.config
    }

    /// Merge what other cores learned (before every routing decision and on the tick).
    pub fn sync(&self) {
        if self.inbox.is_empty() {
            return;
        }
        let s = &self.shared.config.resilience;
        let mut t = self.tables.borrow_mut();
        drain(&self.inbox, |ev| match ev {
            Event::DecisionQuery { id, limit, reply } => {
                let ring = self.ring.borrow();
                let found: Vec<Record> = match id {
                    Some(id) => ring
                        .iter()
                        .rev()
                        .filter(|r| r.request_id == **id)
                        .take(1)
                        .cloned()
                        .collect(),
                    None => ring.iter().rev().take(*limit).cloned().collect(),
                };
                let _ = reply.send(found);
            }
            ev => t.apply(ev, s),
        });
    }

    /// Keep a finished request's decision record (the oldest goes when the ring is full).
    pub fn remember(&self, r: Record) {
        if self.ring_cap == 0 {
            return;
        }
        let mut ring = self.ring.borrow_mut();
        if ring.len() >= self.ring_cap {
            ring.pop_front();
        }
        ring.push_back(r);
    }

    fn emit(&self, ev: Event) {
        self.shared.bus.broadcast(self.id, &ev);
    }

    pub fn record_failure(&self, site: Site, v: &Verdict) {
        let s = &self.shared.config.resilience;
        let now = crate::clock::now_ms();
        let mut t = self.tables.borrow_mut();
        t.on_failure(s, site, v, now, &mut |ev| {
            if let Event::Conn { conn, state } = &ev {
                self.shared.persist_terminal(*conn, state);
            }
            self.emit(ev)
        });
    }

    pub fn record_success(&self, site: Site) {
        let s = &self.shared.config.resilience;
        let now = crate::clock::now_ms();
        let mut t = self.tables.borrow_mut();
        t.on_success(s, site, now, &mut |ev| self.emit(ev));
    }

    /// A new request id: process prefix, core, sequence.
    pub fn next_request_id(&self) -> String {
        let n = self.request_seq.get() + 1;
        self.request_seq.set(n);
        format!("rs-{:08x}-{:x}-{:x}", self.shared.id_prefix, self.id, n)
    }
}
