//! A generation: one applied configuration and what is derived from it (the route table, the
//! names by slot). The process starts with generation 1; each reload that applies makes the
//! next. A request keeps the generation it started on until it ends, so a reload never changes
//! the config under a request in flight; the cores pick up a new generation at their next tick
//! (`Core::install`).

use super::slots::Slots;
use crate::config::Config;
use crate::ids::{ConnId, ConnNames};
use crate::route::RouteTable;
use crate::route::strategy::SelectorState;
use std::cell::RefCell;
use std::sync::Arc;

pub struct Gen {
    pub number: u64,
    pub config: Config,
    pub routes: RouteTable,
    /// Metric labels of routes by index (`""` where this generation has no such route).
    pub route_labels: Vec<String>,
    /// (provider id, connection id) by connection slot; empty where the slot holds none.
    pub conn_labels: Vec<(String, String)>,
    /// The same, kept for the life of the process (decision records borrow them).
    pub conn_names: Vec<ConnNames>,
    /// How this generation came from the one before (`slots::Plan`): slots that start clean
    /// on every core, and slots whose connection this generation no longer has.
    pub fresh_conns: Vec<ConnId>,
    pub fresh_providers: Vec<usize>,
    pub retired_conns: Vec<ConnId>,
    /// A provider of this generation is set to HTTP/1.1 (`Endpoint::set_to_http1`), so a
    /// client's stream may take two descriptors (`conn_caps`).
    pub http1_by_config: bool,
}

impl Gen {
    /// Provider slots whose connections go at this generation: new ones, and those reached
    /// elsewhere than in `before` (their address, egress proxy, TLS settings or protocol
    /// changed).
    pub fn moved_providers(&self, before: &crate::config::Config) -> Vec<usize> {
        let elsewhere = self.config.providers.iter().filter(|p| {
            before
                .providers
                .iter()
                .any(|b| b.slot == p.slot && b.endpoint != p.endpoint)
        });
        let mut out = self.fresh_providers.clone();
        out.extend(elsewhere.map(|p| p.slot));
        out
    }

    /// Derive a generation from a config already numbered onto `slots`.
    pub fn build(number: u64, config: Config, slots: &mut Slots) -> Gen {
        let mut routes = RouteTable::build(&config);
        let other = slots.other_route();
        let capacity = slots.route_capacity;
        let route_labels = routes.reindex(|name| slots.route_index(name), other, capacity);
        let mut conn_labels = vec![(String::new(), String::new()); config.slot_count()];
        for p in &config.providers {
            for c in &p.connections {
                conn_labels[c.index.index()] = (p.id.clone(), c.id.clone());
            }
        }
        let intern = crate::names::intern;
        let conn_names = conn_labels
            .iter()
            .map(|(p, c)| ConnNames {
                provider: intern(p),
                connection: intern(c),
                label: intern(&format!("{p}/{c}")),
            })
            .collect();
        let http1_by_config = config.providers.iter().any(|p| p.endpoint.set_to_http1());
        Gen {
            http1_by_config,
            number,
            config,
            routes,
            route_labels,
            conn_labels,
            conn_names,
            fresh_conns: Vec::new(),
            fresh_providers: Vec::new(),
            retired_conns: Vec::new(),
        }
    }

    /// The slot of `provider/connection` in this generation.
    pub fn conn_by_label(&self, label: &str) -> Option<ConnId> {
        crate::names::conn_by_label(&self.conn_labels, label)
    }
}

/// A core's view of a generation: the generation and the core's route selectors for it
/// (their slots are the route table's).
pub struct CoreGen {
    pub generation: Arc<Gen>,
    pub selector: RefCell<SelectorState>,
}

impl CoreGen {
    pub fn new(generation: Arc<Gen>, core: usize) -> CoreGen {
        let selector = SelectorState::new(
            generation.routes.slot_count(),
            rand::random::<u64>() ^ core as u64,
        );
        CoreGen {
            generation,
            selector: RefCell::new(selector),
        }
    }
}

impl std::ops::Deref for CoreGen {
    type Target = Gen;
    fn deref(&self) -> &Gen {
        &self.generation
    }
}
