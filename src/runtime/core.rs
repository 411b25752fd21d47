//! What one core owns: its pools, selectors, counters and drain signal. Plain data behind
//! `Rc`/`RefCell`, touched only by the core's own thread; cross-core state is in [`Shared`].

use super::drain::Drain;
use crate::config::Config;
use crate::log::LogSink;
use crate::metrics::CoreMetrics;
use crate::route::RouteTable;
use crate::route::strategy::SelectorState;
use crate::upstream::{Connector, pool::Pool};
use std::cell::{Cell, RefCell};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

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
}

impl Core {
    pub fn config(&self) -> &Config {
        &self.shared.config
    }

    /// A new request id: process prefix, core, sequence.
    pub fn next_request_id(&self) -> String {
        let n = self.request_seq.get() + 1;
        self.request_seq.set(n);
        format!("rs-{:08x}-{:x}-{:x}", self.shared.id_prefix, self.id, n)
    }
}
